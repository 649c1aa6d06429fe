"""Remove a site after training on NVIDIA FLARE, from what the server kept: FedEraser,
or retraining from the checkpoint before the site first trained.

The training run keeps FedEraser's server history (:func:`~monai_forget.fl.job.
run_federated` with ``retain_every``; :class:`~monai_forget.fl.aggregator.OrderedFedAvg`
writes it). :func:`run_federaser` then runs the unlearning as a second FLARE job: the
remaining sites calibration-train for ``calibration_ratio`` of their local steps, one
round per retained training round after the first, and the server
(:class:`~monai_forget.fl.aggregator.FedEraserCalibration`) rescales each site's
direction to its retained update's size. The method, our reading of the paper and the
storage it needs are in :mod:`monai_forget.unlearning.federaser`.

:func:`run_from_checkpoint` removes a site that joined the federation late: the server
kept the global model of the round the site first trained in (one model), and a second
FLARE job reruns only the rounds from there without it, each remaining site with its
batch seeds of the training run, as
:func:`~monai_forget.unlearning.federaser.retrain_from_checkpoint` does in one process.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import torch
from torch import nn

from monai_forget.checks import check_parameter
from monai_forget.data import LabelledImages
from monai_forget.fl.job import FederatedRun, run_federated
from monai_forget.fl.spec import FederatedConfig, Removal, Schedule, save_tensors
from monai_forget.unlearning.federaser import (
    ServerHistory,
    WithdrawalCost,
    checkpoint_restart,
    first_round_model,
)

__all__ = ["remove_after_training", "run_federaser", "run_from_checkpoint"]


def _kept_history(trained: FederatedRun, withdrawn: str) -> ServerHistory:
    """What ``trained``'s server kept, for removing ``withdrawn`` (one of its sites)."""
    if not trained.history_path.is_file():
        raise ValueError(
            f"the run at {trained.workspace} kept no server history; train with "
            "run_federated(..., retain_every=2) to remove a site after training"
        )
    if withdrawn not in trained.clients:
        raise ValueError(f"{withdrawn!r} is not one of the run's sites {list(trained.clients)}")
    return ServerHistory.load(trained.history_path)


def run_federaser(
    trained: FederatedRun,
    withdrawn: str,
    clients: Mapping[str, LabelledImages],
    workspace: str | Path,
    *,
    calibration_ratio: float = 0.5,
    backend: str = "simulator",
) -> tuple[FederatedRun, WithdrawalCost]:
    """Remove ``withdrawn`` from ``trained``'s global model with FedEraser, on FLARE.

    Args:
        trained: A run made with ``run_federated(..., retain_every=N)``.
        withdrawn: The site to remove.
        clients: Every site's data as in the training run (the withdrawn site's is not
            used).
        workspace: The unlearning job's workspace (replaced if it exists).
        calibration_ratio: Calibration training's share of the usual local steps.
        backend: ``"simulator"`` or ``"poc"``.

    Returns:
        The unlearning run (its global model is the unlearned model) and its cost.

    Raises:
        ValueError: the run kept no history, an unknown site, or a ratio outside (0, 1].
    """
    check_parameter("calibration_ratio", calibration_ratio)
    history = _kept_history(trained, withdrawn)
    from monai_forget.fl.aggregator import FedEraserCalibration

    remaining = {n: clients[n] for n in trained.clients if n != withdrawn}
    kept = first_round_model(history, [n for n in remaining if n in history.norms[0]])
    first = {k: v.to(torch.float32) for k, v in kept.items()}
    later = history.retained_rounds[1:]
    workspace = Path(workspace).resolve()
    config = replace(
        trained.config,
        rounds=max(1, len(later)),
        local_steps=max(1, math.ceil(calibration_ratio * trained.config.local_steps)),
        seed=trained.config.seed + 1,  # as unlearning.federaser seeds calibration
    )
    if not later:  # only round 0 retained: its updates are the whole unlearning
        return _first_round_only(trained, first, remaining, workspace, config, history)
    start = workspace / "initial_unlearned.pt"
    workspace.mkdir(parents=True, exist_ok=True)
    save_tensors(first, start)
    run = run_federated(
        remaining,
        config,
        workspace,
        initial_state=first,
        backend=backend,
        aggregator=FedEraserCalibration(
            history_path=str(trained.history_path), retained=later, initial_ckpt=str(start)
        ),
    )
    cost = WithdrawalCost(
        config.local_steps * config.rounds * len(remaining),
        config.rounds,
        run.seconds,
        history.storage_bytes(),
    )
    return run, cost


def run_from_checkpoint(
    trained: FederatedRun,
    withdrawn: str,
    clients: Mapping[str, LabelledImages],
    workspace: str | Path,
    *,
    backend: str = "simulator",
) -> tuple[FederatedRun, WithdrawalCost]:
    """Remove ``withdrawn`` by retraining from the global model of the round it first
    trained in, on FLARE: the rounds from there run again without it.

    Exact: no round before the checkpoint saw the site, so the result is a federation
    trained without it (with the training run's seeds). A site that trained from round 0
    leaves only the initial model: that is full retraining, at full cost.

    Args:
        trained: A run made with ``run_federated(..., retain_every=N, schedule=...)``
            whose server kept the checkpoint of the site's first round.
        withdrawn: The site to remove.
        clients: Every site's data as in the training run.
        workspace: The job's workspace (replaced if it exists).
        backend: ``"simulator"`` or ``"poc"``.

    Returns:
        The retraining run (its global model has the site removed; its ``record`` names
        the site and the round it joined in) and its cost (the server storage: the one
        checkpoint).

    Raises:
        ValueError: the run kept no history, an unknown site, or no checkpoint of the
            site's first round.
    """
    history = _kept_history(trained, withdrawn)
    restart = checkpoint_restart(history, [n for n in trained.clients if n != withdrawn])
    run = run_federated(
        {n: clients[n] for n in restart.joined},
        replace(trained.config, rounds=restart.rounds - restart.start),
        workspace,
        initial_state=restart.weights,
        backend=backend,
        schedule=Schedule(restart.start, restart.joined, restart.positions),
    )
    record = {"client": withdrawn, "method": "checkpoint", "joined": restart.start}
    cost = restart.cost(trained.config.local_steps, run.seconds)
    return replace(run, record=record), cost


def _first_round_only(trained, first, remaining, workspace, config, history):
    from monai_forget.fl.job import model_from_state

    model = model_from_state(trained.config, first)
    run = FederatedRun(model, workspace, tuple(remaining), config, backend=trained.backend)
    return run, WithdrawalCost(0, 0, 0.0, history.storage_bytes())


def remove_after_training(
    clients: Mapping[str, LabelledImages],
    config: FederatedConfig,
    removal: Removal,
    workspace: str | Path,
    *,
    backend: str = "simulator",
) -> tuple[FederatedRun, nn.Module, WithdrawalCost]:
    """Train FedAvg with every client on FLARE (the server keeping FedEraser's history and
    the checkpoint of the round ``removal.client`` joined in, in ``workspace/train``), then
    remove it in a second FLARE run (``workspace/<method>``).

    Returns:
        The removal's run (its global model has the client removed), the trained model
        it was removed from, and the removal's cost.
    """
    if removal.joined >= config.rounds:
        raise ValueError(
            f"{removal.client} joins in round {removal.joined} but the federation trains "
            f"{config.rounds} rounds (0-based); give a round below {config.rounds}"
        )
    workspace = Path(workspace)
    trained = run_federated(
        clients,
        config,
        workspace / "train",
        backend=backend,
        retain_every=removal.retain_every,
        schedule=Schedule(joined={removal.client: removal.joined}),
    )
    if removal.method == "federaser":
        run, cost = run_federaser(
            trained, removal.client, clients, workspace / "federaser",
            calibration_ratio=removal.calibration_ratio, backend=backend,
        )  # fmt: skip
    elif removal.method == "checkpoint":
        run, cost = run_from_checkpoint(
            trained, removal.client, clients, workspace / "checkpoint", backend=backend
        )
    else:
        stay = {n: d for n, d in clients.items() if n != removal.client}
        run = run_federated(stay, config, workspace / "retrain", backend=backend)
        steps = config.rounds * len(stay) * config.local_steps
        cost = WithdrawalCost(steps, config.rounds, run.seconds, 0)
    return run, trained.global_model, cost
