"""Shadow models trained like a federated target: FedAvg in one process.

The forgetting rate's membership oracle (Liu et al. 2020, "Learn to Forget: User-Level
Memorization Elimination in Federated Learning", Section IV-A; the target-shadow
method of Shokri et al. 2017) needs a shadow model "trained like the target". A target
trained by FedAvg fits each provider's data less tightly than one model trained
centrally for the same number of steps: every round averages N local fits. A central
shadow then overfits harder than the target, and an oracle fitted on its outputs calls
many of the target's true members non-members (a low B.R.R).

:class:`FedAvgShadowRecipe` trains a shadow the way the federation trains the target:
it splits the shadow's data into ``clients`` parts (by patient when told how), and for
``rounds`` rounds trains a copy of the model on each part with the target's local
recipe and averages the copies with equal weights (FedAvg with equal step counts, as
FLARE's ``FedAvgRecipe`` does for this package's clients). It runs in-process with
plain PyTorch (no FLARE), and satisfies :class:`monai_forget.shadow.Recipe`, so the
oracle and the auditors can use it wherever they take a recipe.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from monai_forget.checks import COUNT, check_in
from monai_forget.data import LabelledImages
from monai_forget.shadow import SupervisedRecipe
from monai_forget.unlearning.baselines import fedavg

__all__ = ["FedAvgShadowRecipe"]


@dataclass(frozen=True)
class FedAvgShadowRecipe:
    """FedAvg of ``clients`` local fits per round, for ``rounds`` rounds, in one process.

    Args:
        local: Each client's local training per round (the target's local recipe).
        clients: Number of simulated clients the data is split into.
        rounds: Number of FedAvg rounds.
        group_of: Sample id -> group (e.g. patient); when given, whole groups go to one
            client, as in a patient-provider federation. Otherwise samples are split at
            random.
    """

    local: SupervisedRecipe
    clients: int
    rounds: int
    group_of: Callable[[str], str] | None = None

    def __post_init__(self) -> None:
        check_in("clients", self.clients, COUNT)
        check_in("rounds", self.rounds, COUNT)

    @property
    def name(self) -> str:
        spec = {
            "local": self.local.name,
            "clients": self.clients,
            "rounds": self.rounds,
            "grouped": self.group_of is not None,
        }
        return "fedavg:" + json.dumps(spec, sort_keys=True)

    def build(self) -> nn.Module:
        return self.local.build()

    def partition(self, data: LabelledImages, seed: int) -> list[LabelledImages]:
        """Split ``data`` into ``clients`` non-empty parts (whole groups when grouped)."""
        rng = np.random.default_rng(seed)
        if self.group_of is not None and data.ids is not None:
            keys = np.array([self.group_of(i) for i in data.ids])
            groups = rng.permutation(np.unique(keys))
            if len(groups) < self.clients:
                raise ValueError(
                    f"{len(groups)} groups cannot fill {self.clients} simulated clients; "
                    "lower clients or give the shadow more groups (patients)"
                )
            parts = [np.isin(keys, groups[i :: self.clients]) for i in range(self.clients)]
        else:
            if len(data) < self.clients:
                raise ValueError(f"{len(data)} samples cannot fill {self.clients} clients")
            order = rng.permutation(len(data))
            parts = [np.sort(order[i :: self.clients]) for i in range(self.clients)]
        return [data.subset(p) for p in parts]

    def fit(
        self, model: nn.Module, data: LabelledImages, *, seed: int, device: torch.device
    ) -> None:
        """Train ``model`` in place by FedAvg over the parts of ``data``."""
        fedavg(model, self.partition(data, seed), self.local, self.rounds, seed=seed, device=device)
