"""The three baselines of Liu et al. 2020 (Section IV-B) against which Forsaken is judged.

Liu, Ma, Liu & Ma, "Learn to Forget: User-Level Memorization Elimination in Federated
Learning" (arXiv:2003.10933, 2020):

- **natural**: keep training without the user and let the model forget on its own
  (:func:`natural_forgetting`);
- **forcible**: subtract the user's accumulated contributions from the model
  (:func:`forcible_forgetting`);
- **retraining** from scratch without the user, the gold standard
  (:func:`retrain_from_scratch`; federated: :func:`fedavg` over the remaining clients).

These work on any PyTorch/MONAI classifier; in federated training the same operations
run inside NVIDIA FLARE (:mod:`monai_forget.fl`: ``Withdrawal(method=
"natural" | "forcible")`` and a run without the user).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence

import torch
from torch import nn

from monai_forget.data import LabelledImages
from monai_forget.shadow import Recipe, ShadowTrainer
from monai_forget.unlearning.parameters import check_same_shapes

#: ``on_round(round, global state before, client position -> client state)``.
State = Mapping[str, torch.Tensor]
RoundHook = Callable[[int, State, Mapping[int, State]], None]

__all__ = [
    "accumulate_updates",
    "average_states",
    "fedavg",
    "forcible_forgetting",
    "natural_forgetting",
    "retrain_from_scratch",
]


def accumulate_updates(
    reference: Mapping[str, torch.Tensor], updates: Sequence[Mapping[str, torch.Tensor]]
) -> dict[str, torch.Tensor]:
    """Sum a user's per-round updates, refusing any whose shapes differ from ``reference``.

    Args:
        reference: The current model's tensors by name (only the names an update holds
            are compared).
        updates: One mapping per round, name -> weight change.

    Raises:
        ValueError: no update, or an update whose shapes differ from the model's (the
            model changed shape between rounds: the contributions no longer apply).
    """
    if not updates:
        raise ValueError("no contribution to subtract: pass at least one recorded update")
    names = set(updates[0])
    total: dict[str, torch.Tensor] = {}
    for i, update in enumerate(updates):
        unknown = sorted(set(update) - set(reference))
        if unknown:
            raise ValueError(
                f"update {i} holds {unknown[:3]}, which the model does not have; the updates "
                "must come from the same architecture"
            )
        if set(update) != names:
            raise ValueError(
                f"update {i} names different tensors than update 0; all updates must come "
                "from the same architecture"
            )
        check_same_shapes({k: reference[k] for k in update}, update, f"update {i}")
        for k, v in update.items():
            total[k] = total.get(k, 0) + v.detach().to("cpu", torch.float32)
    return total


def forcible_forgetting(
    model: nn.Module, contributions: Sequence[Mapping[str, torch.Tensor]]
) -> nn.Module:
    """Forcible baseline: ``W - Σ_t c_t``, the model minus the user's contributions.

    Args:
        model: The current (global) model; left unchanged.
        contributions: The user's contribution to the model in each round it took part
            in (in FedAvg: its aggregation share times its weight change).

    Returns:
        A copy of the model with the contributions subtracted.
    """
    new = copy.deepcopy(model)
    state = new.state_dict()
    total = accumulate_updates(state, contributions)
    with torch.no_grad():
        for name, value in total.items():
            state[name].sub_(value.to(state[name]))
    return new


def natural_forgetting(
    model: nn.Module,
    remaining: LabelledImages,
    recipe: Recipe,
    *,
    seed: int = 0,
    device: str | torch.device = "cpu",
) -> nn.Module:
    """Natural baseline: continue training a copy of ``model`` on the remaining data.

    Args:
        model: The current model; left unchanged.
        remaining: Everyone else's data.
        recipe: The training design (its budget is the continuation's length).
        seed: Seeds the continuation's batches.
        device: Torch device.
    """
    if len(remaining) == 0:
        raise ValueError("natural forgetting needs remaining data to continue training on")
    new = copy.deepcopy(model)
    recipe.fit(new, remaining, seed=seed, device=torch.device(device))
    return new.eval()


def retrain_from_scratch(
    remaining: LabelledImages,
    recipe: Recipe,
    *,
    seed: int = 0,
    device: str | torch.device = "cpu",
) -> nn.Module:
    """Retraining baseline (the gold standard): a fresh model trained without the user."""
    return ShadowTrainer(recipe, device=device).train(remaining, seed=seed)


def fedavg(
    model: nn.Module,
    clients: Sequence[LabelledImages],
    local: Recipe,
    rounds: int,
    *,
    seed: int,
    device: str | torch.device,
    first_round: int = 0,
    joined: Sequence[int] | None = None,
    on_round: RoundHook | None = None,
    positions: Sequence[int] | None = None,
) -> nn.Module:
    """Train ``model`` in place by FedAvg: each round, a copy fitted by ``local`` on each
    client's data, then the copies' floating-point weights averaged with equal weights
    (the clients run equal step counts, as FLARE's ``FedAvgRecipe`` runs this package's
    clients); integer buffers are taken from the first client.

    Args:
        model: The global model at round ``first_round``; trained in place.
        clients: Each client's data; its position seeds its batches.
        local: Each client's local training design.
        rounds: The round to stop before (``rounds - first_round`` rounds run).
        seed: Seeds every client's batches (with the round and the client's position).
        device: Torch device.
        first_round: The round to start at (continuing a federation from a checkpoint).
        joined: The round each client first trains in (default: every client from 0).
        on_round: Called after each round's local training with the round, the global
            state the clients started from and position -> client state (e.g. for the
            server's retained updates, :mod:`monai_forget.unlearning.federaser`).
        positions: Each client's position in the federation it came from, for its batch
            seeds and in ``on_round`` (default: its position in ``clients``), so a
            federation rerun without one client gives the others the same batches.
    """
    device = torch.device(device)
    model.to(device)
    start = [0] * len(clients) if joined is None else list(joined)
    if len(start) != len(clients):
        raise ValueError(f"joined has {len(start)} rounds for {len(clients)} clients")
    where = list(range(len(clients))) if positions is None else list(positions)
    for r in range(first_round, rounds):
        before = {k: v.detach().clone() for k, v in model.state_dict().items()}
        states = {}
        for i, part in enumerate(clients):
            if r < start[i]:
                continue
            copy_ = copy.deepcopy(model)
            local.fit(copy_, part, seed=seed * 100_003 + r * 1_009 + where[i], device=device)
            states[where[i]] = copy_.state_dict()
        if not states:
            raise ValueError(f"no client trains in round {r}; check joined={start}")
        if on_round is not None:
            on_round(r, before, states)
        model.load_state_dict(average_states(list(states.values())))
    return model


def average_states(states: Sequence[Mapping[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """FedAvg's equal-weight mean of client state dicts; integer buffers (e.g. batch-norm
    counters) are taken from the first client."""
    return {
        k: sum(s[k] for s in states) / len(states) if v.is_floating_point() else v
        for k, v in states[0].items()
    }
