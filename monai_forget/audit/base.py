"""What both withdrawal auditors share: shadow training, cached inference, provenance."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from monai_forget.audit.result import package_versions
from monai_forget.data import LabelledImages, check_disjoint
from monai_forget.fingerprint import data_fingerprint, model_fingerprint
from monai_forget.inference import Predictions, predict
from monai_forget.shadow import Recipe, ShadowTrainer


def check_set_size(name: str, data: LabelledImages, minimum: int = 2) -> None:
    """Refuse sets too small for a two-sample statistic."""
    if len(data) < minimum:
        raise ValueError(
            f"the {name} set has {len(data)} sample(s); an audit needs at least {minimum}: "
            f"add samples to the {name} set"
        )


@dataclass
class ShadowAuditor:
    """Common configuration of auditors that train shadow models from a recipe.

    Args:
        recipe: the target's training design ("the same design", Liu & Tsaftaris 2020).
        seed: seeds shadow training and any random split of the calibration set.
        device: where shadow models train and every model runs.
        cache_dir: cache for shadow weights and predictions (``None``: no cache).
        batch_size: inference batch size.
        progress: show progress bars during inference.
    """

    recipe: Recipe | None = None
    seed: int = 0
    device: str | torch.device = "cpu"
    cache_dir: str | Path | None = None
    batch_size: int = 256
    progress: bool = False

    def _start(self, query: LabelledImages, calibration: LabelledImages) -> None:
        check_set_size("query", query)
        check_set_size("calibration", calibration)
        check_disjoint(query, calibration)

    def _train(self, data: LabelledImages) -> nn.Module:
        if self.recipe is None:
            raise ValueError(
                "this audit trains shadow models: pass recipe=... (the target's design)"
            )
        trainer = ShadowTrainer(self.recipe, device=self.device, cache_dir=self.cache_dir)
        return trainer.train(data, seed=self.seed)

    def _predict(self, model: nn.Module, data: LabelledImages) -> Predictions:
        return predict(
            model,
            data,
            batch_size=self.batch_size,
            device=self.device,
            cache_dir=self.cache_dir,
            progress=self.progress,
        )

    def _provenance(
        self, models: dict[str, nn.Module], data: dict[str, LabelledImages], **options: Any
    ) -> dict[str, Any]:
        return {
            "models": {name: model_fingerprint(m) for name, m in models.items()},
            "data": {name: data_fingerprint(d) for name, d in data.items()},
            "recipe": None if self.recipe is None else self.recipe.name,
            "seed": self.seed,
            "options": options,
            "versions": package_versions(),
        }
