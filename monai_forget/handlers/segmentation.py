"""Ignite handlers for segmentation evaluators: per-image membership scores, in-plane
HD95, and the output transform that feeds per-image scores to the withdrawal handlers.

``KSCalibratedRatio`` and ``EMAPValue`` take class probabilities and labels; with
``output_transform=membership_output(score)`` they audit a segmentation model instead:
each image becomes the row ``(1 - s, s)`` with label 1
(:meth:`~monai_forget.segmentation.SegmentationScores.to_predictions`), images whose
label has no structure are left out for scores undefined there, so the evaluation
covers the same images the audit did; the images with a defined score go along, so the
handlers check by content that they are D_Q's.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from monai.handlers import IgniteMetricHandler
from monai.handlers.utils import from_engine

from monai_forget.checks import check_choice
from monai_forget.io import atomic_write, check_writable
from monai_forget.metrics.segmentation import (
    SegmentationMembershipScoreMetric,
    SlicewiseHausdorffDistanceMetric,
)
from monai_forget.segmentation.scores import SCORE_NAMES, segmentation_scores

__all__ = [
    "PerImageMetricsWriter",
    "SegmentationMembershipScores",
    "SlicewiseHausdorffDistance",
    "membership_output",
]


_PRED_LABEL = from_engine(["pred", "label"])


def _stack(values: Any) -> torch.Tensor:
    if isinstance(values, (list, tuple)):
        return torch.stack([torch.as_tensor(v) for v in values])
    return torch.as_tensor(values)


def membership_output(
    score: str = "foreground_confidence",
    pred_key: str = "pred",
    label_key: str = "label",
    from_logits: bool = True,
    image_key: str | None = "image",
) -> Callable[[Any], tuple[torch.Tensor, ...]]:
    """Output transform: per-pixel ``(pred, label[, image])`` -> per-image
    ``((1 - s, s), 1[, image])``.

    Args:
        score: the per-image score (:data:`~monai_forget.segmentation.SCORE_NAMES`) the
            audit reference was computed with.
        pred_key: the output item with the per-pixel logits (or probabilities).
        label_key: the output item with the label map.
        from_logits: ``pred_key`` holds logits.
        image_key: the output item with the images, handed on (those with a defined
            score) so the handlers check by content that they evaluate D_Q; ``None``
            hands none (the handlers then need ``check=None``).
    """
    check_choice("score", score, SCORE_NAMES)
    select = from_engine([pred_key, label_key] + ([image_key] if image_key else []))

    def transform(output: Any) -> tuple[torch.Tensor, ...]:
        pred, label, *images = select(output)
        s = segmentation_scores(_stack(pred), _stack(label), from_logits=from_logits)[score]
        defined = torch.isfinite(s)
        s = s[defined].clamp(0.0, 1.0)
        rows = (torch.stack([1.0 - s, s], dim=1), torch.ones(len(s), dtype=torch.long))
        return rows + tuple(_stack(i)[defined.to(torch.bool).cpu()] for i in images)

    return transform


class SegmentationMembershipScores(IgniteMetricHandler):
    """Per-image membership scores of the evaluated segmentation model.

    ``engine.state.metrics[name]`` is the mean of ``score``; the metric's
    ``last_scores`` holds every image's scores for the auditors.

    Args:
        score: the score whose mean is reported.
        from_logits: the evaluator's ``pred`` holds logits.
        output_transform: extracts ``(y_pred, y)`` from ``engine.state.output``.
        save_details: store the per-image scores in ``engine.state.metric_details``.
    """

    def __init__(
        self,
        score: str = "foreground_confidence",
        from_logits: bool = True,
        output_transform: Callable = _PRED_LABEL,
        save_details: bool = True,
    ) -> None:
        super().__init__(
            metric_fn=SegmentationMembershipScoreMetric(score, from_logits),
            output_transform=output_transform,
            save_details=save_details,
        )


class SlicewiseHausdorffDistance(IgniteMetricHandler):
    """In-plane HD95 per structure of short-axis stacks
    (:func:`~monai_forget.metrics.compute_slicewise_hausdorff_distance`).

    Args:
        percentile: 95 gives HD95.
        spacing: in-plane pixel size in mm (``None``: pixels).
        reduction: ``"mean_batch"`` (per structure) or ``"mean"``.
        output_transform: extracts one-hot ``(y_pred, y)`` volumes.
        save_details: store the per-volume values in ``engine.state.metric_details``.
    """

    def __init__(
        self,
        percentile: float = 95.0,
        spacing: Sequence[float] | None = None,
        reduction: str = "mean_batch",
        output_transform: Callable = _PRED_LABEL,
        save_details: bool = True,
    ) -> None:
        super().__init__(
            metric_fn=SlicewiseHausdorffDistanceMetric(percentile, spacing, reduction),
            output_transform=output_transform,
            save_details=save_details,
        )


class PerImageMetricsWriter:
    """Write each evaluated image's metric values (``engine.state.metric_details``) as CSV.

    One row per image (a volume, for the segmentation bundle) with ``id_keys`` taken
    from the batch, then a column per metric and structure, e.g. ``dice_LV``. Written
    atomically at epoch end; an existing file is refused unless ``overwrite``.

    Args:
        path: the CSV file.
        metrics: names of metrics attached with ``save_details=True``.
        class_names: the structure of each column of a metric's details.
        id_keys: batch items identifying an image.
        overwrite: replace an existing file.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        metrics: Sequence[str],
        class_names: Sequence[str],
        id_keys: Sequence[str] = ("patient", "phase"),
        overwrite: bool = False,
    ) -> None:
        self.path = check_writable(path, overwrite)
        self.metrics, self.class_names = list(metrics), list(class_names)
        self.id_keys, self.overwrite = list(id_keys), overwrite
        self.ids: list[list[str]] = []

    def attach(self, engine: Any) -> None:
        from ignite.engine import Events

        engine.add_event_handler(Events.EPOCH_STARTED, lambda e: self.ids.clear())
        engine.add_event_handler(Events.ITERATION_COMPLETED, self._collect)
        engine.add_event_handler(Events.EPOCH_COMPLETED, self._write)

    def _collect(self, engine: Any) -> None:
        batch = engine.state.batch
        items = [batch] if isinstance(batch, Mapping) else batch
        for item in items:
            self.ids.append([str(np.asarray(item.get(k, "")).ravel()[0]) for k in self.id_keys])

    def _write(self, engine: Any) -> None:
        details = getattr(engine.state, "metric_details", {}) or {}
        columns, values = [], []
        for name in self.metrics:
            if name not in details:
                raise KeyError(f"metric {name!r} kept no details; attach it with save_details=True")
            table = (
                torch.as_tensor(details[name]).detach().cpu().double().reshape(len(self.ids), -1)
            )
            names = self.class_names if table.shape[1] == len(self.class_names) else ["value"]
            columns += [f"{name}_{c}" for c in names]
            values.append(table.numpy())
        rows = np.concatenate(values, axis=1) if values else np.empty((len(self.ids), 0))
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow([*self.id_keys, *columns])
        for ids, row in zip(self.ids, rows, strict=True):
            writer.writerow([*ids, *(f"{v:.6g}" for v in row)])
        with atomic_write(self.path, "w", overwrite=self.overwrite) as handle:
            handle.write(buffer.getvalue())
        self.overwrite = True
