"""Removing a site from a FedAvg model without retraining from scratch.

Two methods, each from what the server kept while the federation trained
(:class:`ServerHistory`, recorded by :func:`train_with_history`):

- :func:`federaser`: **FedEraser** (Liu, Ma, Yang, Wang & Liu, "FedEraser: Enabling
  Efficient Client-Level Data Removal from Federated Learning Models", IWQoS 2021).
  The paper's text is not among ``shared/papers``; this is the method as we read it,
  stated so it can be checked:

  1. while FedAvg trains, the server retains each client's update
     ``U^k_t = W^k_t - M_t`` at every ``interval``-th round ``t_1 = 0 < t_2 < ... < t_n``;
  2. the unlearned model starts from the initial model, ``M~_1 = M_0`` (it holds nothing
     of the withdrawn site), and takes round ``t_1``'s retained updates of the remaining
     clients as they are: they were computed from that same model;
  3. at every later retained round ``t_j`` each remaining client trains ``M~_j`` for
     ``calibration_ratio`` of its usual local steps (calibration training) and returns
     ``Û^k``; the server keeps its direction and the retained update's size,
     ``Ũ^k = ||U^k_{t_j}|| Û^k / ||Û^k||``, and ``M~_{j+1} = M~_j + mean_k Ũ^k``.

  Norms are taken per parameter tensor (one layer's weight or bias), our reading; one
  norm over the whole model would let the largest layer set every layer's step. The
  mean weighs clients equally, as FedAvg here does (equal local step counts). The
  defaults, ``interval`` 2 and ``calibration_ratio`` 0.5, give the 4x saving in client
  compute the paper's abstract reports.

  Storage: the calibration reads only the retained updates' norms, plus round ``t_1``'s
  full updates, so :class:`ServerHistory` keeps those (:meth:`ServerHistory.
  storage_bytes`); the paper's server keeps every retained update in full
  (:meth:`ServerHistory.full_storage_bytes`). Both are reported.

- :func:`retrain_from_checkpoint`: exact retraining that starts from the last global
  model before the withdrawn site first trained (a site that joined late), and reruns
  only the rounds after it. Where the site trained from round 0 the checkpoint is the
  initial model and this is full retraining.

Each returns the model with its :class:`WithdrawalCost`: client compute in local steps,
communication rounds, wall time and the server storage the method needed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
from torch import nn

from monai_forget.checks import COUNT, check_in, check_parameter
from monai_forget.data import LabelledImages
from monai_forget.io import atomic_write
from monai_forget.shadow import SupervisedRecipe
from monai_forget.unlearning.baselines import State, fedavg

__all__ = [
    "CheckpointRestart",
    "ServerHistory",
    "UnlearnedModel",
    "WithdrawalCost",
    "calibrate_update",
    "calibrated_model",
    "checkpoint_restart",
    "federaser",
    "first_round_model",
    "retrain_from_checkpoint",
    "train_with_history",
]


def _floating(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {
        k: v.detach().to("cpu", torch.float64) for k, v in state.items() if v.is_floating_point()
    }


def _as_double(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.double() for k, v in state.items()}


def _bytes(tensors: Mapping[str, torch.Tensor]) -> int:
    return sum(v.numel() * v.element_size() for v in tensors.values())


@dataclass
class ServerHistory:
    """What the FedAvg server kept while training, for removing a site afterwards.

    Attributes:
        clients: Client names in federation order (a client's position seeds its batches).
        rounds: Rounds trained.
        interval: Updates are retained every ``interval`` rounds, from round 0.
        joined: Client -> the first round it trained in.
        initial: The global model of round 0.
        first_updates: Client -> its full update in the first retained round it trained
            in (float32).
        norms: Retained round -> client -> tensor name -> the norm of its update.
        checkpoints: Round -> the global model at its start, for every round in which a
            client trained for the first time after round 0.
    """

    clients: tuple[str, ...]
    rounds: int
    interval: int
    joined: dict[str, int]
    initial: dict[str, torch.Tensor]
    first_updates: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)
    norms: dict[int, dict[str, dict[str, float]]] = field(default_factory=dict)
    checkpoints: dict[int, dict[str, torch.Tensor]] = field(default_factory=dict)

    @property
    def retained_rounds(self) -> list[int]:
        return sorted(self.norms)

    def record(self, r: int, before: State, states: Mapping[str, State]) -> None:
        """Keep what round ``r`` leaves: ``before`` is the global model the clients
        started from, ``states`` client name -> the weights it trained."""
        self.rounds = max(self.rounds, r + 1)
        if r in set(self.joined.values()) - {0}:
            self.checkpoints[r] = {k: v.detach().cpu().clone() for k, v in before.items()}
        if r % self.interval:
            return
        start = _floating(before)
        self.norms[r] = {}
        for name, state in states.items():
            update = {k: v - start[k] for k, v in _floating(state).items()}
            self.norms[r][name] = {k: float(torch.linalg.vector_norm(v)) for k, v in update.items()}
            if name not in self.first_updates:
                self.first_updates[name] = {k: v.to(torch.float32) for k, v in update.items()}

    def save(self, path: str | Path) -> None:
        """Write the history atomically (tensors and plain values: it loads with
        ``weights_only=True``)."""
        with atomic_write(Path(path), "wb", overwrite=True) as handle:
            torch.save({**asdict(self), "clients": list(self.clients)}, handle)

    @classmethod
    def load(cls, path: str | Path) -> ServerHistory:
        """Read a history written by :meth:`save` (``weights_only=True``)."""
        raw = torch.load(Path(path), map_location="cpu", weights_only=True)
        return cls(**{**raw, "clients": tuple(raw["clients"])})

    def every(self, k: int) -> ServerHistory:
        """The history a server retaining every ``k``-th of these rounds would have kept
        (one training, several retaining intervals compared)."""
        check_in("k", k, COUNT)
        kept = {r: n for r, n in self.norms.items() if r % (k * self.interval) == 0}
        return replace(self, interval=self.interval * k, norms=kept)

    def storage_bytes(self) -> int:
        """What this history keeps for FedEraser: the first full updates, the norms
        (float32 each) and the checkpoints."""
        norms = sum(len(n) for per_round in self.norms.values() for n in per_round.values())
        first = sum(_bytes(u) for u in self.first_updates.values())
        return first + 4 * norms + sum(_bytes(c) for c in self.checkpoints.values())

    def full_storage_bytes(self) -> int:
        """What a server keeping every retained update in full (the paper's) stores."""
        per_update = _bytes(next(iter(self.first_updates.values())))
        return per_update * sum(len(per_round) for per_round in self.norms.values())


@dataclass(frozen=True)
class WithdrawalCost:
    """What removing a site cost.

    Attributes:
        local_steps: Client compute: mini-batch steps summed over clients and rounds.
        rounds: Communication rounds.
        seconds: Wall time (all clients in one process, one after another).
        server_bytes: What the server had to keep from training for this method.
    """

    local_steps: int
    rounds: int
    seconds: float
    server_bytes: int


@dataclass
class UnlearnedModel:
    """A model with the site removed, and what removing it cost."""

    model: nn.Module
    cost: WithdrawalCost


def train_with_history(
    clients: Mapping[str, LabelledImages],
    local: SupervisedRecipe,
    rounds: int,
    *,
    seed: int,
    interval: int = 2,
    joined: Mapping[str, int] | None = None,
    initial: Mapping[str, torch.Tensor] | None = None,
    device: str | torch.device = "cpu",
) -> tuple[nn.Module, ServerHistory]:
    """FedAvg (:func:`~monai_forget.unlearning.baselines.fedavg`) whose server keeps what
    :func:`federaser` and :func:`retrain_from_checkpoint` need.

    Args:
        clients: Client name -> its training data.
        local: Each client's local training (a fixed step budget).
        rounds: FedAvg rounds.
        seed: Seeds the initial model (unless ``initial``) and every client's batches.
        interval: Retain the clients' updates every ``interval`` rounds (FedEraser's
            retaining interval).
        joined: Client -> the first round it trains in (default: all from round 0).
        initial: The initial global weights (default: ``local.build()`` seeded by ``seed``).
        device: Torch device.

    Returns:
        The trained global model (eval mode) and the server's history.
    """
    check_in("the retaining interval (rounds)", interval, COUNT)
    names = tuple(clients)
    start = {n: 0 for n in names} | dict(joined or {})
    if set(start) != set(names):
        raise ValueError(f"joined names {sorted(set(start) - set(names))}, not clients")
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = local.build()
    if initial is not None:
        model.load_state_dict(dict(initial))
    weights = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    history = ServerHistory(names, 0, interval, start, weights)
    fedavg(
        model,
        [clients[n] for n in names],
        local,
        rounds,
        seed=seed,
        device=device,
        joined=[start[n] for n in names],
        on_round=lambda r, before, states: history.record(
            r, before, {names[i]: state for i, state in states.items()}
        ),
    )
    return model.eval(), history


def calibrate_update(
    calibration: Mapping[str, torch.Tensor], retained_norms: Mapping[str, float]
) -> dict[str, torch.Tensor]:
    """FedEraser's calibrated update: each tensor of the calibration update rescaled to
    the retained update's norm (``||U|| Û / ||Û||``; a zero calibration tensor stays
    zero: it has no direction)."""
    out = {}
    for k, v in calibration.items():
        norm = torch.linalg.vector_norm(v)
        out[k] = v * (retained_norms[k] / norm) if norm > 0 else torch.zeros_like(v)
    return out


def first_round_model(history: ServerHistory, clients: list[str]) -> dict[str, torch.Tensor]:
    """``M~`` after the first retained round: the initial model plus the mean of the
    ``clients``' retained round-0 updates (computed from that same model)."""
    start = _floating(history.initial)
    updates = [_as_double(history.first_updates[n]) for n in clients]
    return {k: start[k] + sum(u[k] for u in updates) / len(updates) for k in start}


def calibrated_model(
    current: State, trained: Mapping[str, State], norms: Mapping[str, Mapping[str, float]]
) -> dict[str, torch.Tensor]:
    """One FedEraser round on the server: ``M~ + mean_k ||U^k|| Û^k / ||Û^k||``, with
    ``Û^k`` = client k's calibration-trained weights minus ``current`` and ``||U^k||`` its
    retained update's norms (``norms``: client -> tensor name -> norm)."""
    start = _floating(current)
    updates = []
    for name, state in trained.items():
        new = _floating(state)
        updates.append(calibrate_update({k: new[k] - start[k] for k in start}, norms[name]))
    return {k: start[k] + sum(u[k] for u in updates) / len(updates) for k in start}


def _check_remaining(history: ServerHistory, remaining: Collection[str]) -> None:
    unknown = sorted(set(remaining) - set(history.clients))
    if unknown:
        raise ValueError(f"{unknown} did not train in this federation ({list(history.clients)})")
    if len(remaining) == len(history.clients):
        raise ValueError("every client is in `remaining`; leave the withdrawn site out of it")
    if not remaining:
        raise ValueError("no client remains to rebuild the model with")


def federaser(
    history: ServerHistory,
    remaining: Mapping[str, LabelledImages],
    local: SupervisedRecipe,
    *,
    calibration_ratio: float = 0.5,
    seed: int = 0,
    device: str | torch.device = "cpu",
) -> UnlearnedModel:
    """FedEraser's unlearned model without the clients left out of ``remaining``
    (module docstring: the method, our reading of it, the storage).

    Args:
        history: What the server kept while the federation trained.
        remaining: The clients that stay -> their data (each calibrates on it).
        local: The clients' local training design (its step budget is scaled).
        calibration_ratio: Calibration training's share of the usual local steps.
        seed: Seeds the calibration batches.
        device: Torch device.

    Raises:
        ValueError: an unknown or no remaining client, no retained round, or a ratio
            outside (0, 1].
    """
    check_parameter("calibration_ratio", calibration_ratio)
    if local.steps is None:
        raise ValueError("FedEraser scales a fixed local step budget; give the recipe steps=")
    _check_remaining(history, remaining)
    if not history.norms:
        raise ValueError("the history retained no round; train with train_with_history")
    device = torch.device(device)
    calibrating = replace(local, steps=max(1, math.ceil(calibration_ratio * local.steps)))
    started = time.perf_counter()
    model = local.build()
    model.load_state_dict(history.initial)
    model.to(device)
    position = {n: i for i, n in enumerate(remaining)}
    steps = rounds = 0
    for t in history.retained_rounds:
        clients = [n for n in remaining if n in history.norms[t]]
        if not clients:
            continue
        state = model.state_dict()
        if t == 0:  # computed from the initial model, as M~ is: nothing to calibrate
            new = first_round_model(history, clients)
        else:
            trained = {}
            for n in clients:
                copy_ = local.build()
                copy_.load_state_dict(state)
                # as a FLARE client of the unlearning job (seed + 1) seeds its round
                batch_seed = (seed + 1) * 100_003 + rounds * 1_009 + position[n]
                calibrating.fit(copy_, remaining[n], seed=batch_seed, device=device)
                trained[n] = copy_.state_dict()
            new = calibrated_model(state, trained, history.norms[t])
            steps += calibrating.steps * len(clients)
            rounds += 1
        for k, v in new.items():
            state[k].copy_(v.to(state[k]))
    cost = WithdrawalCost(steps, rounds, time.perf_counter() - started, history.storage_bytes())
    return UnlearnedModel(model.eval(), cost)


@dataclass(frozen=True)
class CheckpointRestart:
    """Where retraining without the withdrawn clients starts: the last global model
    before any of them first trained, and what the remaining clients rerun from there.

    Attributes:
        start: The round of the checkpoint (0: the initial model, full retraining).
        weights: The global model at its start (floating tensors as float32).
        joined: Remaining client -> the first round it trains in the rerun.
        positions: Remaining client -> its position in the federation (its batch seeds).
        rounds: The federation's rounds (the rerun stops before it).
    """

    start: int
    weights: dict[str, torch.Tensor]
    joined: dict[str, int]
    positions: dict[str, int]
    rounds: int

    def cost(self, steps_per_round: int, seconds: float) -> WithdrawalCost:
        """The rerun's cost: local steps of the rounds it reruns, the server's one
        checkpoint (nothing kept when it is the initial model)."""
        steps = steps_per_round * sum(self.rounds - j for j in self.joined.values())
        kept = _bytes(self.weights) if self.start else 0
        return WithdrawalCost(steps, self.rounds - self.start, seconds, kept)


def checkpoint_restart(history: ServerHistory, remaining: Sequence[str]) -> CheckpointRestart:
    """The restart of :func:`retrain_from_checkpoint` (and of its FLARE job,
    :func:`~monai_forget.fl.erase.run_from_checkpoint`) for the clients ``remaining``.

    Raises:
        ValueError: an unknown or no remaining client, or no checkpoint kept for the
            round.
    """
    _check_remaining(history, remaining)
    withdrawn = [n for n in history.clients if n not in remaining]
    start = min(history.joined[n] for n in withdrawn)
    if start and start not in history.checkpoints:
        raise ValueError(f"no checkpoint of round {start} was kept; retrain from scratch")
    kept = history.checkpoints[start] if start else history.initial
    # the model's own precision (a FLARE server's history holds float64)
    weights = {k: v.to(torch.float32) if v.is_floating_point() else v for k, v in kept.items()}
    order = [n for n in history.clients if n in remaining]
    return CheckpointRestart(
        start,
        weights,
        {n: max(history.joined[n], start) for n in order},
        {n: history.clients.index(n) for n in order},
        history.rounds,
    )


def retrain_from_checkpoint(
    history: ServerHistory,
    remaining: Mapping[str, LabelledImages],
    local: SupervisedRecipe,
    *,
    seed: int,
    device: str | torch.device = "cpu",
) -> UnlearnedModel:
    """Retrain without the withdrawn clients from the last global model before any of them
    first trained: the remaining clients rerun only the rounds after it (with the
    federation's batch seeds, each client keeping its position). A site that trained from
    round 0 leaves only the initial model: that is full retraining.

    Raises:
        ValueError: an unknown or no remaining client, a recipe without a step budget, or
            no checkpoint kept for the round.
    """
    if local.steps is None:
        raise ValueError("the cost is counted in local steps; give the recipe steps=")
    restart = checkpoint_restart(history, list(remaining))
    started = time.perf_counter()
    model = local.build()
    model.load_state_dict(restart.weights)
    fedavg(
        model,
        [remaining[n] for n in restart.joined],
        local,
        restart.rounds,
        seed=seed,
        device=device,
        first_round=restart.start,
        joined=list(restart.joined.values()),
        positions=list(restart.positions.values()),
    )
    cost = restart.cost(local.steps, time.perf_counter() - started)
    return UnlearnedModel(model.eval(), cost)
