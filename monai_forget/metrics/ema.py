"""EMA's rho_EMA as a MONAI metric (Huang, Li & Li 2021, Algorithms 1-2)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from monai.metrics import CumulativeIterationMetric

from monai_forget.audit.ema import EMAReference, EMAThresholds, TestName
from monai_forget.inference import Predictions
from monai_forget.metrics.buffer import BatchBuffered
from monai_forget.metrics.labels import to_probs_and_labels

__all__ = ["EMAPValueMetric", "compute_ema_pvalue"]


def compute_ema_pvalue(
    y_pred: torch.Tensor | np.ndarray,
    y: torch.Tensor | np.ndarray,
    thresholds: EMAThresholds,
    *,
    test: TestName = "welch",
    from_logits: bool = False,
) -> float:
    """rho_EMA: p-value of the membership vector of D_Q against all-ones (EMA Alg. 2).

    Args:
        y_pred: the target's probabilities (or logits with ``from_logits``) on D_Q.
        y: ground-truth classes, ``(N,)``, ``(N, 1)`` or one-hot ``(N, K)``.
        thresholds: per-class thresholds learned beforehand on calibration data
            (:meth:`monai_forget.audit.EMAAuditor.fit_reference`).
        test: ``"welch"`` (default) or ``"student"``.
    """
    reference = EMAReference(thresholds, test=test)
    return _pvalue(reference, y_pred, y, from_logits)


def _pvalue(reference: EMAReference, y_pred: Any, y: Any, from_logits: bool) -> float:
    probs, labels = to_probs_and_labels(y_pred, y, from_logits=from_logits)
    return reference.audit(Predictions(probs, labels)).statistic


class EMAPValueMetric(BatchBuffered, CumulativeIterationMetric):
    """Accumulates the target's outputs over an evaluation of D_Q and returns rho_EMA.

    Args:
        thresholds: an :class:`EMAThresholds` or its ``to_dict()`` form (bundle configs).
        test: ``"welch"`` or ``"student"``.
        from_logits: apply a softmax to ``y_pred`` first.
    """

    def __init__(
        self,
        thresholds: EMAThresholds | dict[str, Any],
        test: TestName = "welch",
        from_logits: bool = False,
    ) -> None:
        super().__init__()
        self.reference = EMAReference.from_dict({"thresholds": thresholds, "test": test})
        self.from_logits = from_logits

    @property
    def thresholds(self) -> EMAThresholds:
        return self.reference.thresholds

    def _compute_tensor(self, y_pred: torch.Tensor, y: torch.Tensor | None = None, **kwargs: Any):  # type: ignore[override]
        if y is None:
            raise ValueError("EMA needs ground-truth labels y")
        return y_pred, y

    def aggregate(self) -> float:  # type: ignore[override]
        y_pred, y = self.get_buffer()
        return _pvalue(self.reference, y_pred, y, self.from_logits)
