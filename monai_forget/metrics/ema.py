"""EMA's rho_EMA as a MONAI metric (Huang, Li & Li 2021, Algorithms 1-2)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from monai_forget.audit.ema import EMAReference, EMAThresholds, TestName
from monai_forget.inference import Predictions
from monai_forget.metrics.base import AuditMetric
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
    probs, labels = to_probs_and_labels(y_pred, y, from_logits=from_logits)
    return EMAReference(thresholds, test=test).audit(Predictions(probs, labels)).statistic


class EMAPValueMetric(AuditMetric):
    """Accumulates the target's outputs over an evaluation of D_Q and returns rho_EMA.

    Args:
        thresholds: an :class:`EMAThresholds` or its ``to_dict()`` form (bundle configs).
        test: ``"welch"`` or ``"student"``.
        from_logits: apply a softmax to ``y_pred`` first.
        query_hashes: content hashes of D_Q, to check the evaluated samples are D_Q.
        on_mismatch: ``"error"`` or ``"warn"`` when they are not.
        on_extra: samples outside D_Q are an ``"error"`` or ``"ignore"``d.
    """

    statistic = "rho_EMA"

    def __init__(
        self,
        thresholds: EMAThresholds | dict[str, Any],
        test: TestName = "welch",
        from_logits: bool = False,
        query_hashes: Sequence[str] | None = None,
        on_mismatch: str = "error",
        on_extra: str = "error",
    ) -> None:
        super().__init__(from_logits, query_hashes, on_mismatch, on_extra)
        self.reference = EMAReference.from_dict({"thresholds": thresholds, "test": test})

    @property
    def thresholds(self) -> EMAThresholds:
        return self.reference.thresholds

    def aggregate(self) -> float:  # type: ignore[override]
        probs, labels, _ = self.outputs()
        return self.reference.audit(Predictions(probs, labels)).statistic
