"""Federated training with a withdrawal, run on NVIDIA FLARE (simulator or POC).

:func:`run_federated` writes a job folder (each client's data as ``.npz``, the job
description, a seeded initial model), builds FLARE's PyTorch ``FedAvgRecipe`` with
:mod:`monai_forget.fl.client` as every client's training script (Client
API), and runs it with ``SimEnv``: the server and N clients on this machine, in
``simulator_threads`` client processes, or with ``PocEnv``: a provisioned deployment
(server, N clients and an admin, each with its startup kit and certificates) whose
services run as separate processes, the job submitted through the admin API. One
client may withdraw at a chosen round (:class:`~monai_forget.fl.spec.Withdrawal`):
with Forsaken's SecForget (Protocol 2 of Liu et al. 2020, "Learn to Forget: User-Level
Memorization Elimination in Federated Learning"), forcibly, or naturally. The global
model FLARE saved is returned with what every client recorded.

Workspace layout (``workspace/``)::

    simulator.log                                      the simulator's console output
    job/job.json, job/data/<site>.npz, job/initial_model.pt
    job/clients/<site>/update_round_NNN.pt, before_withdrawal.pt, withdrawal.json
    flare/<job name>/server/simulate_job/log.txt       FLARE's server log
    flare/<job name>/<site>/simulate_job/log.txt       each client's log
    poc/                                               the POC deployment (backend "poc"):
                                                       startup kits, each service's logs
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from monai_forget.checks import check_choice
from monai_forget.data import LabelledImages
from monai_forget.fl.poc import DeploymentError, run_poc
from monai_forget.fl.spec import (
    FederatedConfig,
    JobSpec,
    Schedule,
    Withdrawal,
    check_site_name,
    load_tensors,
    save_tensors,
)
from monai_forget.io import atomic_write

__all__ = [
    "FederatedRun",
    "WithdrawalError",
    "check_contributions",
    "fedavg_recipe",
    "model_from_state",
    "network_class_path",
    "run_federated",
]

JOB_NAME = "monai_forget_fedavg"
#: Where a job runs: FLARE's simulator or a POC deployment (separate processes).
BACKENDS = ("simulator", "poc")


class WithdrawalError(RuntimeError):
    """The withdrawing client could not compute its elimination update.

    The client sent no update in that round, so the global model carries no trace of a
    partial elimination (the other clients' normal updates were aggregated as usual).
    """


def network_class_path(network: str) -> str:
    """The importable class path FLARE's server uses to build ``network``."""
    from monai_forget.networks import NETWORKS

    key = network.strip()
    if key.lower() in NETWORKS:
        cls = NETWORKS[key.lower()]
        return f"{cls.__module__}.{cls.__qualname__}"
    from monai.networks import nets

    if isinstance(getattr(nets, key, None), type):
        return f"monai.networks.nets.{key}"
    raise ValueError(f"unknown network {network!r}; see monai_forget.networks.get_network")


@dataclass
class FederatedRun:
    """The outcome of one simulated federation.

    Attributes:
        global_model: The final global model (eval mode).
        workspace: The run's workspace (job files, client records, FLARE logs).
        clients: Client names in order.
        withdrawal: The withdrawal, if any.
        record: The withdrawing client's record (method, round, seconds, Eq. 4 terms).
        seconds: Wall-clock time of the FLARE run.
        backend: ``"simulator"`` or ``"poc"``.
    """

    global_model: nn.Module
    workspace: Path
    clients: tuple[str, ...]
    config: FederatedConfig
    withdrawal: Withdrawal | None = None
    record: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    backend: str = "simulator"

    def client_dir(self, client: str) -> Path:
        return self.workspace / "job" / "clients" / client

    def model_before_withdrawal(self) -> nn.Module:
        """The global model the withdrawing client received in its withdrawal round."""
        if self.withdrawal is None:
            raise ValueError("this run had no withdrawal")
        path = self.client_dir(self.withdrawal.client) / "before_withdrawal.pt"
        return model_from_state(self.config, load_tensors(path))

    def updates(self, client: str) -> list[dict[str, torch.Tensor]]:
        """The client's recorded per-round weight changes (its local training updates)."""
        paths = sorted(self.client_dir(client).glob("update_round_*.pt"))
        return [load_tensors(p) for p in paths]

    @property
    def history_path(self) -> Path:
        """Where the server kept FedEraser's history (``run_federated(retain_every=)``)."""
        return self.workspace / "job" / "server" / "history.pt"

    @property
    def log_dir(self) -> Path:
        """FLARE's logs: the simulator's job folder, or the POC deployment."""
        return self.workspace / ("poc" if self.backend == "poc" else f"flare/{JOB_NAME}")


def model_from_state(config: FederatedConfig, state: Mapping[str, torch.Tensor]) -> nn.Module:
    """The federation's network (eval mode) with the weights of ``state`` (e.g. saved by FLARE)."""
    model = config.recipe().build()
    model.load_state_dict(
        {k: v.to(torch.float32) if v.is_floating_point() else v for k, v in state.items()}
    )
    return model.eval()


def _check_clients(
    clients: Mapping[str, LabelledImages], config: FederatedConfig, withdrawal: Withdrawal | None
) -> int:
    if len(clients) < 2:
        raise ValueError(f"a federation needs at least 2 clients, got {len(clients)}")
    for name in clients:
        check_site_name(name)
    shapes = {d.image_shape for d in clients.values() if len(d)}
    if len(shapes) > 1:
        raise ValueError(f"clients have different image shapes {sorted(shapes)}; use one shape")
    model = config.recipe().build().eval()
    with torch.no_grad():
        k = int(model(torch.zeros((1, *next(iter(shapes))))).shape[1]) if shapes else 0
    for name, data in clients.items():
        if len(data) and int(data.labels.max()) >= k:
            raise ValueError(
                f"client {name} has label {int(data.labels.max())} but the network outputs "
                f"{k} classes; set network_args so the network has one output per class"
            )
        if len(data) == 0 and (withdrawal is None or withdrawal.client != name):
            raise ValueError(f"client {name} has no data; give every client training samples")
    if withdrawal is not None:
        if withdrawal.client not in clients:
            raise ValueError(
                f"withdrawing client {withdrawal.client!r} is not one of {sorted(clients)}"
            )
        if len(clients[withdrawal.client]) == 0:
            raise ValueError(
                f"client {withdrawal.client} has no data, so there is nothing to withdraw; "
                "a withdrawal needs the client's training samples as its elimination set"
            )
        if withdrawal.round >= config.rounds:
            raise ValueError(
                f"withdrawal round {withdrawal.round} is not within the {config.rounds} rounds "
                f"(0..{config.rounds - 1})"
            )
        if withdrawal.method == "forcible" and withdrawal.round == 0:
            raise ValueError("forcible withdrawal at round 0 has no contribution to subtract")
    return k


def _write_npz(data: LabelledImages, path: Path) -> None:
    with atomic_write(path, "wb", overwrite=True) as handle:
        np.savez(handle, images=data.images, labels=data.labels)


def run_federated(
    clients: Mapping[str, LabelledImages],
    config: FederatedConfig,
    workspace: str | Path,
    *,
    withdrawal: Withdrawal | None = None,
    initial_state: Mapping[str, torch.Tensor] | None = None,
    backend: str = "simulator",
    retain_every: int | None = None,
    aggregator: Any = None,
    schedule: Schedule | None = None,
) -> FederatedRun:
    """Run FedAvg on NVIDIA FLARE, with an optional withdrawal.

    Args:
        clients: Client name -> its training data (names are FLARE site names).
        config: Local training and round settings.
        workspace: Folder for the job files, client records and FLARE's logs; an
            existing run there is replaced.
        withdrawal: A client leaving at a chosen round, and how.
        initial_state: Start from these weights instead of a fresh seeded model (e.g.
            to continue a federation).
        backend: ``"simulator"`` (FLARE's ``SimEnv``: clients as threads of one
            simulator) or ``"poc"`` (FLARE's ``PocEnv``: a provisioned server and one
            process per client on this machine, the job submitted and monitored through
            the admin API, everything stopped at the end; its workspace is
            ``workspace/poc``).
        retain_every: The server keeps FedEraser's history every this many rounds
            (``workspace/job/server/history.pt``, :attr:`FederatedRun.history_path`), so
            a site can later be removed by :func:`~monai_forget.fl.erase.run_federaser`.
        aggregator: A FLARE aggregator to use in place of the order-free FedAvg (e.g.
            :class:`~monai_forget.fl.aggregator.FedEraserCalibration`).
        schedule: The rounds each client trains in (a client that joined late) and the
            positions that seed their batches (default: every client from round 0, in
            the order of ``clients``).

    Returns:
        The final global model and the run's records.

    Raises:
        ValueError: bad clients, data or withdrawal (before anything runs).
        RuntimeError: the FLARE simulation failed (see the logs under ``workspace``).
        WithdrawalError: the withdrawing client could not compute its update.
    """
    check_choice("backend", backend, BACKENDS)
    _check_clients(clients, config, withdrawal)
    workspace = Path(workspace).resolve()
    job_dir = workspace / "job"
    names = tuple(clients)
    if backend == "poc":  # what a killed run here left, stopped before its files go
        from monai_forget.fl.poc import stop_deployment

        stop_deployment(workspace / "poc")
    _clear(workspace)
    for name, data in clients.items():
        _write_npz(data, job_dir / "data" / f"{name}.npz")
        (job_dir / "clients" / name).mkdir(parents=True, exist_ok=True)
    schedule = schedule or Schedule()
    JobSpec(config, names, withdrawal, schedule).save(job_dir / "job.json")
    if initial_state is None:
        with torch.random.fork_rng():
            torch.manual_seed(config.seed)
            initial_state = config.recipe().build().state_dict()
    ckpt = job_dir / "initial_model.pt"
    save_tensors(initial_state, ckpt)

    from monai_forget.fl import client as fl_client

    if retain_every is not None:
        from monai_forget.fl.aggregator import OrderedFedAvg

        aggregator = OrderedFedAvg(
            withdrawn=None if withdrawal is None else withdrawal.client,
            withdrawal_round=0 if withdrawal is None else withdrawal.round,
            retain_path=str(job_dir / "server" / "history.pt"),
            retain_every=int(retain_every),
            initial_ckpt=str(ckpt),
            clients=list(names),
            rounds=config.rounds,
            joined=dict(schedule.joined),
        )
    recipe = fedavg_recipe(
        config,
        names,
        withdrawal,
        aggregator=aggregator,
        initial_ckpt=str(ckpt),
        train_script=str(Path(fl_client.__file__).resolve()),
        train_args=f"--job-dir {job_dir}",
    )
    start = time.perf_counter()
    try:
        with _output_to(workspace / "simulator.log"):
            if backend == "poc":
                state = run_poc(recipe, names, workspace)
            else:
                state = _run_simulator(recipe, names, config, workspace)
    except DeploymentError:  # its message already names the clients and the logs
        raise
    except RuntimeError as err:
        raise RuntimeError(
            f"{err} (console output: {workspace / 'simulator.log'}; client records: "
            f"{job_dir / 'clients'})"
        ) from err
    seconds = time.perf_counter() - start
    check_contributions(job_dir / "clients", names, config.rounds, withdrawal, schedule)
    record = _read_record(job_dir, withdrawal)
    model = model_from_state(config, state)
    return FederatedRun(model, workspace, names, config, withdrawal, record, seconds, backend)


def fedavg_recipe(
    config: FederatedConfig,
    names: Sequence[str],
    withdrawal: Withdrawal | None,
    *,
    initial_ckpt: str,
    train_script: str,
    train_args: str = "",
    per_site_args: Mapping[str, str] | None = None,
    aggregator: Any = None,
) -> Any:
    """FLARE's PyTorch ``FedAvgRecipe`` for this federation: the network built by the
    server from its class path, the seeded initial weights, ``train_script`` as every
    client's Client API script, and the order-free aggregator that knows the withdrawal
    (or ``aggregator``). ``per_site_args``: site -> that site's script arguments (FLARE's
    per-site config)."""
    from nvflare.app_opt.pt.recipes.fedavg import FedAvgRecipe
    from nvflare.recipe.utils import set_per_site_config

    from monai_forget.fl.aggregator import OrderedFedAvg

    recipe = FedAvgRecipe(
        name=JOB_NAME,
        model={
            "class_path": network_class_path(config.network),
            "args": json.loads(json.dumps(dict(config.network_args), default=list)),
        },
        initial_ckpt=initial_ckpt,
        min_clients=len(names),
        num_rounds=config.rounds,
        train_script=train_script,
        train_args=train_args,
        aggregator=aggregator
        or OrderedFedAvg(
            withdrawn=None if withdrawal is None else withdrawal.client,
            withdrawal_round=0 if withdrawal is None else withdrawal.round,
        ),
    )
    if per_site_args:
        set_per_site_config(recipe, {site: {"train_args": a} for site, a in per_site_args.items()})
    return recipe


def _run_simulator(
    recipe: Any, names: tuple[str, ...], config: FederatedConfig, workspace: Path
) -> dict[str, torch.Tensor]:
    """The job on FLARE's simulator; the final global weights."""
    from nvflare.recipe import SimEnv

    env = SimEnv(
        clients=list(names),
        num_threads=min(config.simulator_threads, len(names)),
        workspace_root=str(workspace / "flare"),
    )
    result = recipe.execute(env).get_result()
    found = _find_global_model(Path(result) if result else workspace / "flare" / JOB_NAME)
    return load_tensors(found)


@contextlib.contextmanager
def _output_to(path: Path) -> Iterator[None]:
    """Send this process's stdout/stderr file descriptors (and so the FLARE simulator
    subprocess's console output) to ``path`` for the duration of the block."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        with path.open("ab") as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            try:
                yield
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
    finally:
        for fd in saved:
            os.close(fd)


def _clear(workspace: Path) -> None:
    """Remove a previous run's job and FLARE folders (only those this module writes)."""
    import shutil

    for sub in ("job", "flare", "poc"):
        target = workspace / sub
        if target.exists():
            shutil.rmtree(target)
    workspace.mkdir(parents=True, exist_ok=True)


def check_contributions(
    clients_dir: Path,
    names: Sequence[str],
    rounds: int,
    withdrawal: Withdrawal | None,
    schedule: Schedule | None = None,
) -> None:
    """Refuse a run in which a client's own process did not answer each of its rounds.

    Every client records each round it trains (``update_round_NNN.pt`` in its folder,
    numbered by the job's rounds; the withdrawing client only before its round, a client
    that joined late only from the round it joined in). FLARE's simulator has been seen, on a
    loaded machine, to serve one client's tasks from another client's process: that
    process trains on its own data, so the global model is not this federation's, and
    nothing else shows it.

    Raises:
        RuntimeError: a client without a record for a round it trained in, named with
            the rounds and the remedy.
    """
    missing = {}
    schedule = schedule or Schedule()
    for name in names:
        last = withdrawal.round if withdrawal is not None and withdrawal.client == name else rounds
        wanted = [r for r in range(min(last, rounds)) if schedule.trains(name, r)]
        have = clients_dir / name
        lost = [r for r in wanted if not (have / f"update_round_{r:03d}.pt").is_file()]
        if lost:
            missing[name] = lost
    if missing:
        named = "; ".join(f"{n}: rounds {', '.join(map(str, r))}" for n, r in missing.items())
        raise RuntimeError(
            f"no update was recorded by {named} (client records: {clients_dir}): those tasks "
            "were not answered by the client's own process (FLARE's simulator can serve one "
            "client's tasks from another client's process on a loaded machine), so the "
            "global model is not this federation's. Run it again on a less loaded machine, "
            "or with backend='poc' (one process per site)"
        )


def _read_record(job_dir: Path, withdrawal: Withdrawal | None) -> dict[str, Any]:
    if withdrawal is None:
        return {}
    path = job_dir / "clients" / withdrawal.client / "withdrawal.json"
    if not path.is_file():
        raise RuntimeError(
            f"client {withdrawal.client} left no withdrawal record at {path}; the simulation "
            f"did not reach round {withdrawal.round} (see {job_dir.parent / 'simulator.log'} "
            f"and the FLARE logs under {job_dir.parent / 'flare'})"
        )
    record = json.loads(path.read_text())
    if "error" in record:
        raise WithdrawalError(
            f"withdrawal of client {withdrawal.client} at round {withdrawal.round} failed: "
            f"{record['error']}; it sent no update, so the global model holds no partial "
            f"elimination (details in {path})"
        )
    return record


def _find_global_model(result_dir: Path) -> Path:
    matches = sorted(result_dir.glob("server/simulate_job/**/FL_global_model.pt"))
    if not matches:
        raise RuntimeError(
            f"FLARE saved no global model under {result_dir}; the simulation failed: see "
            f"{result_dir / 'server' / 'simulate_job' / 'log.txt'}"
        )
    return matches[0]
