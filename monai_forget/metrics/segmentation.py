"""MONAI metrics for segmentation models: per-image membership scores and the in-plane
95th-percentile Hausdorff distance of short-axis stacks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from monai.metrics import CumulativeIterationMetric, compute_hausdorff_distance

from monai_forget.checks import check_choice
from monai_forget.metrics.buffer import BatchBuffered
from monai_forget.segmentation.scores import SCORE_NAMES, SegmentationScores, segmentation_scores

__all__ = [
    "SegmentationMembershipScoreMetric",
    "SlicewiseHausdorffDistanceMetric",
    "compute_segmentation_membership_scores",
    "compute_slicewise_hausdorff_distance",
]


def compute_segmentation_membership_scores(
    y_pred: torch.Tensor, y: torch.Tensor, *, from_logits: bool = True
) -> torch.Tensor:
    """``(B, 4)`` float64 per-image scores, columns in the order of :data:`SCORE_NAMES`
    (see :func:`monai_forget.segmentation.segmentation_scores`)."""
    scores = segmentation_scores(y_pred, y, from_logits=from_logits)
    return torch.stack([scores[n] for n in SCORE_NAMES], dim=1)


class SegmentationMembershipScoreMetric(BatchBuffered, CumulativeIterationMetric):
    """Accumulates every evaluated image's membership scores.

    ``aggregate`` returns the mean of ``score`` over the images where it is defined and
    keeps every image's scores in ``last_scores`` (a
    :class:`~monai_forget.segmentation.SegmentationScores`), which is what the auditors
    take (:meth:`~monai_forget.segmentation.SegmentationScores.to_predictions`).

    Args:
        score: the score ``aggregate`` reports, one of :data:`SCORE_NAMES`.
        from_logits: ``y_pred`` holds logits (softmax taken in float64).
    """

    def __init__(self, score: str = "foreground_confidence", from_logits: bool = True) -> None:
        super().__init__()
        check_choice("score", score, SCORE_NAMES)
        self.score = score
        self.from_logits = from_logits
        self.last_scores: SegmentationScores | None = None

    def _compute_tensor(self, y_pred: torch.Tensor, y: torch.Tensor | None = None, **kwargs: Any):  # type: ignore[override]
        if y is None:
            raise ValueError("membership scores need the label maps y")
        return compute_segmentation_membership_scores(y_pred, y, from_logits=self.from_logits)

    def aggregate(self) -> float:  # type: ignore[override]
        buffer = self.get_buffer()
        if buffer is None:
            raise ValueError("no image was evaluated")
        values = buffer.numpy()
        self.last_scores = SegmentationScores({n: values[:, i] for i, n in enumerate(SCORE_NAMES)})
        return float(np.nanmean(self.last_scores[self.score]))


def compute_slicewise_hausdorff_distance(
    y_pred: torch.Tensor,
    y: torch.Tensor,
    *,
    percentile: float = 95.0,
    spacing: Sequence[float] | None = None,
) -> torch.Tensor:
    """Per-structure Hausdorff distance of short-axis stacks, computed in-plane.

    Cine-MRI stacks have slices 5-10 mm apart and in-plane pixels of about 1.5 mm, and
    the SSL4MIS release records neither, so a 3D distance cannot be measured. Each
    slice's distance is MONAI's ``compute_hausdorff_distance`` (``percentile``-th
    percentile, both directions) between the predicted and expert structure on that
    slice; a volume's value is the mean over the slices where both contain the
    structure. Slices where only one of them does are not counted here (the Dice
    penalises them).

    Args:
        y_pred: one-hot prediction ``(B, K, H, W, D)`` (background first, excluded).
        y: one-hot label, the same shape.
        percentile: 95 gives HD95.
        spacing: in-plane pixel size (mm) for results in mm; default pixels.

    Returns:
        ``(B, K - 1)`` float32, NaN where no slice has the structure in both.
    """
    if y_pred.shape != y.shape or y_pred.ndim != 5:
        raise ValueError(
            f"y_pred {tuple(y_pred.shape)} and y {tuple(y.shape)} must both be one-hot "
            "(B, K, H, W, D)"
        )
    pred, label = y_pred.detach().cpu().bool(), y.detach().cpu().bool()
    out = torch.full((pred.shape[0], pred.shape[1] - 1), float("nan"))
    for b in range(pred.shape[0]):
        for c in range(1, pred.shape[1]):
            both = (pred[b, c].flatten(0, 1).any(0) & label[b, c].flatten(0, 1).any(0)).nonzero()
            if len(both) == 0:
                continue
            z = both[:, 0]
            p = pred[b, c].permute(2, 0, 1)[z][:, None]  # (slices, 1, H, W)
            t = label[b, c].permute(2, 0, 1)[z][:, None]
            distances = compute_hausdorff_distance(
                p, t, include_background=True, percentile=percentile, spacing=spacing
            )
            out[b, c - 1] = distances.float().mean()
    return out


class SlicewiseHausdorffDistanceMetric(CumulativeIterationMetric):
    """:func:`compute_slicewise_hausdorff_distance` as a MONAI metric.

    Args:
        percentile: 95 gives HD95.
        spacing: in-plane pixel size in mm (``None``: pixels).
        reduction: ``"mean_batch"`` (per structure, over the volumes) or ``"mean"``.
    """

    def __init__(
        self,
        percentile: float = 95.0,
        spacing: Sequence[float] | None = None,
        reduction: str = "mean_batch",
    ) -> None:
        super().__init__()
        check_choice("reduction", reduction, ("mean", "mean_batch"))
        self.percentile, self.spacing, self.reduction = percentile, spacing, reduction

    def _compute_tensor(self, y_pred: torch.Tensor, y: torch.Tensor | None = None, **kwargs: Any):  # type: ignore[override]
        if y is None:
            raise ValueError("the Hausdorff distance needs the label y")
        return compute_slicewise_hausdorff_distance(
            y_pred, y, percentile=self.percentile, spacing=self.spacing
        )

    def aggregate(self) -> torch.Tensor:  # type: ignore[override]
        values = self.get_buffer()
        if not isinstance(values, torch.Tensor):
            raise ValueError("no volume was evaluated")
        per_structure = torch.nanmean(values, dim=0)
        return per_structure if self.reduction == "mean_batch" else torch.nanmean(per_structure)
