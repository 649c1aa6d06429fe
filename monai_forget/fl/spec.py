"""The federated job's description, shared by the driver and the clients.

The driver (:mod:`monai_forget.fl.job`) writes a job folder that every FLARE
client reads: ``job.json`` (this module's :class:`JobSpec`), ``data/<site>.npz`` (each
client's images and labels) and ``initial_model.pt``. Clients write what they did to
``clients/<site>/``: their per-round updates, the model they withdrew from and an
elimination record. Everything here is plain JSON and tensors loaded with
``weights_only=True``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

from monai_forget.checks import COUNT, INDEX, check_choice, check_in, check_parameter
from monai_forget.io import atomic_write
from monai_forget.shadow import SupervisedRecipe

__all__ = [
    "REMOVAL_METHODS",
    "WITHDRAWAL_METHODS",
    "FederatedConfig",
    "JobSpec",
    "Removal",
    "Schedule",
    "Withdrawal",
    "check_site_name",
    "departure",
    "load_tensors",
    "save_tensors",
]

#: How a withdrawing client leaves: Forsaken's dummy gradient (SecForget, Protocol 2 of
#: Liu et al. 2020), subtracting its accumulated contributions ("forcible"), or simply
#: stopping ("natural").
WITHDRAWAL_METHODS = ("forsaken", "forcible", "natural")
#: How a client is removed after training, from what the server kept: retraining from
#: scratch without it, FedEraser's calibrated retraining (Liu et al. 2021), or retraining
#: from the global model of the round it first trained in (a client that joined late).
REMOVAL_METHODS = ("retrain", "federaser", "checkpoint")
#: The metric a withdrawing client's elimination update carries, so the server knows it
#: withdrew (``monai_forget.fl.aggregator`` leaves out its later results).
ELIMINATED = "eliminated"

_SITE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")


def check_site_name(name: str) -> str:
    """Refuse client names FLARE cannot use as site names."""
    if not isinstance(name, str) or not _SITE.match(name):
        raise ValueError(
            f"client name {name!r} is not a valid FLARE site name; use letters, digits, "
            "'-' and '_' (starting with a letter or digit), e.g. 'site-1'"
        )
    return name


@dataclass(frozen=True)
class FederatedConfig:
    """How every client trains in each FedAvg round.

    Local training is :class:`~monai_forget.shadow.SupervisedRecipe` with a fixed
    ``local_steps`` budget, so auditors can train shadow models "with the same design"
    (:meth:`recipe`).

    Args:
        network: Registry name (:func:`monai_forget.networks.get_network`).
        network_args: Keyword arguments of the network (JSON-serialisable).
        rounds: Number of FedAvg rounds.
        local_steps: Mini-batch updates per client per round.
        batch_size: Local mini-batch size.
        learning_rate: Local optimiser step size.
        optimizer: ``"adam"`` or ``"sgd"``.
        seed: Seeds the initial model and every client's batches.
        threads_per_client: ``torch.set_num_threads`` in each client process.
        simulator_threads: Client processes the FLARE simulator runs at once.
    """

    network: str = "mlp"
    network_args: Mapping[str, Any] = field(default_factory=dict)
    rounds: int = 5
    local_steps: int = 50
    batch_size: int = 32
    learning_rate: float = 1e-3
    optimizer: str = "adam"
    seed: int = 0
    threads_per_client: int = 1
    simulator_threads: int = 2

    def __post_init__(self) -> None:
        for name in (
            "rounds",
            "local_steps",
            "batch_size",
            "threads_per_client",
            "simulator_threads",
        ):
            check_in(name, getattr(self, name), COUNT)
        self.recipe()  # validates optimizer and the rest

    def recipe(self, steps: int | None = None) -> SupervisedRecipe:
        """The local training design; ``steps`` overrides ``local_steps`` (e.g. for shadows)."""
        return SupervisedRecipe(
            network=self.network,
            network_args=dict(self.network_args),
            steps=int(steps or self.local_steps),
            batch_size=self.batch_size,
            learning_rate=self.learning_rate,
            optimizer=self.optimizer,
        )


@dataclass(frozen=True)
class Withdrawal:
    """One client leaves the federation at a chosen round.

    In round ``round`` (0-based, as FLARE counts) the client sends its elimination update
    in place of its normal update; from the next round on it contributes nothing.

    Args:
        client: The withdrawing client's name.
        round: The round of the elimination update.
        method: ``"forsaken"`` (dummy gradient, Protocol 2 SecForget), ``"forcible"``
            (subtract its accumulated contributions) or ``"natural"`` (send nothing).
        generator: Keyword arguments of
            :class:`~monai_forget.unlearning.dummy_gradient.DummyGradientGenerator`
            (``method="forsaken"`` only).
    """

    client: str
    round: int
    method: Literal["forsaken", "forcible", "natural"] = "forsaken"
    generator: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_site_name(self.client)
        check_choice("method", self.method, WITHDRAWAL_METHODS)
        check_in("the withdrawal round", self.round, INDEX)
        if self.generator and self.method != "forsaken":
            raise ValueError("generator settings apply only to method='forsaken'")
        if self.method == "forsaken":
            from monai_forget.unlearning.dummy_gradient import DummyGradientGenerator

            DummyGradientGenerator(**dict(self.generator))  # validate early, not in a client


@dataclass(frozen=True)
class Removal:
    """One client removed after the federation trained, from what the server kept.

    Args:
        client: The client to remove.
        method: ``"retrain"`` (FedAvg from scratch without it), ``"federaser"``
            (:mod:`monai_forget.unlearning.federaser`) or ``"checkpoint"`` (FedAvg without
            it from the global model of round ``joined``, which the server keeps: exact,
            since no earlier round saw the client; with ``joined=0`` it is retraining).
        calibration_ratio: FedEraser's calibration training, a share of the local steps.
        retain_every: FedEraser's retaining interval in rounds.
        joined: The round the client first trained in (0-based; a client that joined the
            federation late).
    """

    client: str
    method: Literal["retrain", "federaser", "checkpoint"] = "retrain"
    calibration_ratio: float = 0.5
    retain_every: int = 2
    joined: int = 0

    def __post_init__(self) -> None:
        check_site_name(self.client)
        check_choice("method", self.method, REMOVAL_METHODS)
        check_in("the round the client joined", self.joined, INDEX)
        check_parameter("calibration_ratio", self.calibration_ratio)
        check_in("retain_every (rounds)", self.retain_every, COUNT)


def departure(
    client: str,
    method: str | None = None,
    *,
    round: int = 0,
    joined: int = 0,
    generator: Mapping[str, Any] | None = None,
) -> Withdrawal | Removal:
    """How ``client`` leaves by ``method``: removed after training (a
    :data:`REMOVAL_METHODS` method; ``joined``: the round it first trained in) or leaving
    during training in ``round`` (``generator``: Forsaken's settings).

    The default is the measured one (``benchmarks/results/withdrawal_methods.md``):
    retraining from the checkpoint for a site that joined late (exact, at the share of
    the rounds after it joined), else retraining from scratch (no cheaper method was
    equivalent to it for a site that trained from round 0).

    Raises:
        ValueError: an unknown method, or ``joined`` with a method that leaves during
            training (a late joiner is removed after training).
    """
    if method is None:
        method = "checkpoint" if joined else "retrain"
    check_choice("method", method, REMOVAL_METHODS + WITHDRAWAL_METHODS)
    if method in REMOVAL_METHODS:
        return Removal(client, method, joined=joined)
    if joined:
        raise ValueError(
            f"a site that joined in round {joined} is removed after training (method one of "
            f"{', '.join(REMOVAL_METHODS)}); {method!r} leaves during training from a "
            "federation every site trained in from round 0"
        )
    return Withdrawal(client, round, method, dict(generator or {}))


@dataclass(frozen=True)
class Schedule:
    """Which rounds each client trains in, and what seeds its batches.

    Args:
        first_round: The federation's round the job's round 0 is (a job that continues a
            federation from a checkpoint).
        joined: Client -> the federation's round it first trains in (default 0).
        positions: Client -> its position in the federation, which seeds its batches
            (default: its place in the job's client list), so a federation rerun
            without one client gives the others the same batches.
    """

    first_round: int = 0
    joined: Mapping[str, int] = field(default_factory=dict)
    positions: Mapping[str, int] = field(default_factory=dict)

    def trains(self, client: str, job_round: int) -> bool:
        """Whether ``client`` trains in the job's round ``job_round``."""
        return self.first_round + job_round >= self.joined.get(client, 0)


@dataclass(frozen=True)
class JobSpec:
    """What ``job.json`` holds: the training config, the withdrawal, the client list and
    the rounds each client trains in."""

    config: FederatedConfig
    clients: tuple[str, ...]
    withdrawal: Withdrawal | None = None
    schedule: Schedule = field(default_factory=Schedule)

    def to_json(self) -> str:
        return json.dumps(
            {
                "config": asdict(self.config),
                "clients": list(self.clients),
                "withdrawal": None if self.withdrawal is None else asdict(self.withdrawal),
                "schedule": asdict(self.schedule),
            },
            indent=2,
            default=list,
        )

    @classmethod
    def from_json(cls, text: str) -> JobSpec:
        raw = json.loads(text)
        w = raw.get("withdrawal")
        return cls(
            config=FederatedConfig(**raw["config"]),
            clients=tuple(raw["clients"]),
            withdrawal=None if w is None else Withdrawal(**w),
            schedule=Schedule(**raw.get("schedule", {})),
        )

    def save(self, path: Path) -> None:
        with atomic_write(path, "w", overwrite=True) as handle:
            handle.write(self.to_json())

    @classmethod
    def load(cls, path: Path) -> JobSpec:
        return cls.from_json(Path(path).read_text())


def save_tensors(tensors: Mapping[str, torch.Tensor], path: Path) -> None:
    """Save a name -> tensor mapping atomically (CPU, detached)."""
    with atomic_write(path, "wb", overwrite=True) as handle:
        torch.save({k: v.detach().cpu() for k, v in tensors.items()}, handle)


def load_tensors(path: Path) -> dict[str, torch.Tensor]:
    """Load a name -> tensor mapping with ``weights_only=True``."""
    obj = torch.load(Path(path), map_location="cpu", weights_only=True)
    if isinstance(obj, Mapping) and isinstance(obj.get("model"), Mapping):
        obj = obj["model"]  # FLARE's persistor wraps the weights
    if not isinstance(obj, Mapping):
        raise ValueError(f"{path} does not hold a name -> tensor mapping")
    return {str(k): torch.as_tensor(v) for k, v in obj.items()}
