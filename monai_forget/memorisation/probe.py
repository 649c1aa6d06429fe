"""The audited model run on clean, z_u- and z_r-carrying copies of each probe batch.

Hartley & Tsaftaris 2022 (Sec. 2.3, Eq. 1) compare a model's outputs on clean probes
with its outputs on the same probes carrying the unique feature z_u and random features
z_r. :class:`FeatureProbe` makes that one forward pass of a MONAI evaluator: each batch
yields ``(B, 3, K)`` outputs [clean, with z_u, with z_r], which
:class:`monai_forget.metrics.UniqueFeatureMemorisationMetric` turns into M.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from monai_forget.memorisation.feature import RandomFeature, UniqueFeature

__all__ = ["FeatureProbe"]


class FeatureProbe(nn.Module):
    """``model`` run on clean, z_u- and z_r-carrying copies of a batch in one pass.

    ``forward(x)`` with ``x`` of shape ``(B, C, H, W)`` returns ``(B, 3, K)``: the
    outputs on ``x``, on ``x`` with the unique feature and on ``x`` with one fresh random
    feature per probe (Hartley & Tsaftaris 2022, Sec. 2.3). The input is not modified.

    Args:
        model: the audited classifier, ``(B, C, H, W) -> (B, K)``.
        feature: the unique feature z_u.
        random_feature: ``"patch"`` (the paper's block overwrite), ``"ink"`` or ``"text"``.
        seed: seed of the random features; :meth:`reset` restarts the stream, so two
            passes over the same loader see the same controls.
    """

    def __init__(
        self,
        model: nn.Module,
        feature: UniqueFeature,
        random_feature: RandomFeature = "patch",
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.model = model
        self.feature = feature
        self.random_feature = random_feature
        self.seed = seed
        self.reset()

    def reset(self) -> None:
        """Restart the random-feature stream from ``seed``."""
        self._rng = np.random.default_rng(self.seed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        masks = self.feature.random_masks(len(x), self._rng, self.random_feature)
        random = self.feature.apply_random(x, masks, kind=self.random_feature)
        batch = torch.cat([x, self.feature.apply(x), random])
        out = self.model(batch)
        return out.reshape(3, len(x), *out.shape[1:]).transpose(0, 1)
