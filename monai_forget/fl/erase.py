"""FedEraser on NVIDIA FLARE: remove a site after training, from the server's history.

The training run keeps FedEraser's server history (:func:`~monai_forget.fl.job.
run_federated` with ``retain_every``; :class:`~monai_forget.fl.aggregator.OrderedFedAvg`
writes it). :func:`run_federaser` then runs the unlearning as a second FLARE job: the
remaining sites calibration-train for ``calibration_ratio`` of their local steps, one
round per retained training round after the first, and the server
(:class:`~monai_forget.fl.aggregator.FedEraserCalibration`) rescales each site's
direction to its retained update's size. The method, our reading of the paper and the
storage it needs are in :mod:`monai_forget.unlearning.federaser`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import torch
from torch import nn

from monai_forget.data import LabelledImages
from monai_forget.fl.job import FederatedRun, run_federated
from monai_forget.fl.spec import FederatedConfig, Removal, save_tensors
from monai_forget.unlearning.federaser import ServerHistory, WithdrawalCost, first_round_model

__all__ = ["remove_after_training", "run_federaser"]


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
    if not trained.history_path.is_file():
        raise ValueError(
            f"the run at {trained.workspace} kept no server history; train with "
            "run_federated(..., retain_every=2) to remove a site with FedEraser later"
        )
    if withdrawn not in trained.clients:
        raise ValueError(f"{withdrawn!r} is not one of the run's sites {list(trained.clients)}")
    if not 0 < calibration_ratio <= 1:
        raise ValueError(f"calibration_ratio must be in (0, 1], got {calibration_ratio}")
    from monai_forget.fl.aggregator import FedEraserCalibration

    history = ServerHistory.load(trained.history_path)
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
    """Train FedAvg with every client on FLARE (the server keeping FedEraser's history, in
    ``workspace/train``), then remove ``removal.client`` in a second FLARE run
    (``workspace/federaser`` or ``workspace/retrain``).

    Returns:
        The removal's run (its global model has the client removed), the trained model
        it was removed from, and the removal's cost.
    """
    workspace = Path(workspace)
    trained = run_federated(
        clients, config, workspace / "train", backend=backend, retain_every=removal.retain_every
    )
    if removal.method == "federaser":
        run, cost = run_federaser(
            trained, removal.client, clients, workspace / "federaser",
            calibration_ratio=removal.calibration_ratio, backend=backend,
        )  # fmt: skip
    else:
        stay = {n: d for n, d in clients.items() if n != removal.client}
        run = run_federated(stay, config, workspace / "retrain", backend=backend)
        steps = config.rounds * len(stay) * config.local_steps
        cost = WithdrawalCost(steps, config.rounds, run.seconds, 0)
    return run, trained.global_model, cost
