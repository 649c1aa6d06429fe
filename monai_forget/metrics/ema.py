"""EMA's rho_EMA as a MONAI metric (Huang, Li & Li 2021, Algorithms 1-2)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import torch

from monai_forget.audit.ema import EMAReference, EMAThresholds, TestName
from monai_forget.audit.result import AuditResult
from monai_forget.inference import Predictions
from monai_forget.metrics.base import AuditMetric
from monai_forget.metrics.labels import to_probs_and_labels
from monai_forget.metrics.query_check import SampleCheck

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
        reference: what :meth:`monai_forget.audit.EMAAuditor.fit_reference` returned (it
            carries D_Q's content hashes when fitted with D_Q; its test and alpha are
            used), or the thresholds alone: an :class:`EMAThresholds` or its
            ``to_dict()`` form (bundle configs).
        test: ``"welch"`` or ``"student"`` (default: the reference's, else Welch).
        from_logits: apply a softmax to ``y_pred`` first.
        check: the check that the evaluated samples are D_Q (:class:`SampleCheck`; its
            hashes default to the reference's, fitted with D_Q; ``None``: no check).
    """

    statistic = "rho_EMA"

    def __init__(
        self,
        reference: EMAReference | EMAThresholds | dict[str, Any],
        test: TestName | None = None,
        from_logits: bool = False,
        check: SampleCheck | None = SampleCheck(),
    ) -> None:
        if isinstance(reference, EMAReference):
            reference = replace(reference, test=test or reference.test)
        else:
            reference = EMAReference.from_dict({"thresholds": reference, "test": test or "welch"})
        super().__init__(from_logits, check, reference.query_hashes, reference.query_copies)
        self.reference = reference
        self.last_result: AuditResult | None = None

    @property
    def thresholds(self) -> EMAThresholds:
        return self.reference.thresholds

    def aggregate(self) -> float:  # type: ignore[override]
        probs, labels, _ = self.outputs()
        self.last_result = self.reference.audit(Predictions(probs, labels))
        return self.last_result.statistic
