"""The K-S calibrated ratio as a MONAI metric (Liu & Tsaftaris 2020, Eq. 4)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from monai_forget.audit.ks import KSRatio, KSReference
from monai_forget.audit.result import AuditResult
from monai_forget.inference import Predictions
from monai_forget.metrics.base import AuditMetric
from monai_forget.metrics.labels import to_probs_and_labels
from monai_forget.metrics.query_check import SampleCheck
from monai_forget.scores import confidence

__all__ = ["KSCalibratedRatioMetric", "compute_ks_calibrated_ratio"]


def compute_ks_calibrated_ratio(
    y_pred: torch.Tensor | np.ndarray,
    y: torch.Tensor | np.ndarray,
    query_confidence: np.ndarray,
    calibration_confidence: np.ndarray,
    *,
    from_logits: bool = False,
) -> KSRatio:
    """rho_KS of Liu & Tsaftaris 2020, Eq. 4, from the target's outputs on D_Q.

    Args:
        y_pred: the target model's probabilities (or logits with ``from_logits``) on D_Q,
            shape ``(N, K)``.
        y: ground-truth classes, ``(N,)``, ``(N, 1)`` or one-hot ``(N, K)``.
        query_confidence: the query shadow model's t[y] on D_Q (computed beforehand).
        calibration_confidence: the calibration shadow model's t[y] on D_Q.
    """
    probs, labels = to_probs_and_labels(y_pred, y, from_logits=from_logits)
    reference = KSReference(query_confidence, calibration_confidence)
    return reference.ratio(confidence(probs, labels))


class KSCalibratedRatioMetric(AuditMetric):
    """Accumulates the target's outputs over an evaluation of D_Q and returns rho_KS.

    The shadow models' confidences on D_Q are reference outputs computed beforehand
    (:meth:`monai_forget.audit.KSAuditor.fit_reference`); only the target runs during
    evaluation. ``aggregate`` returns rho and keeps the full :class:`KSRatio` in
    ``last_ratio`` and the decision in ``last_result``.

    Args:
        reference: what :meth:`monai_forget.audit.KSAuditor.fit_reference` returned (it
            carries D_Q's content hashes), or the query shadow model's ground-truth
            confidences on D_Q.
        calibration_confidence: with confidences as ``reference``: the calibration shadow
            model's ground-truth confidences on D_Q.
        from_logits: apply a softmax to ``y_pred`` first.
        check: the check that the evaluated samples are D_Q (:class:`SampleCheck`; its
            hashes default to the reference's; ``None``: no check).
    """

    statistic = "rho_KS"

    def __init__(
        self,
        reference: KSReference | Any,
        calibration_confidence: Any = None,
        from_logits: bool = False,
        check: SampleCheck | None = SampleCheck(),
    ) -> None:
        if not isinstance(reference, KSReference):
            if calibration_confidence is None:
                raise ValueError(
                    "pass the KSReference of KSAuditor.fit_reference, or both shadow models' "
                    "confidences on D_Q (query_confidence, calibration_confidence)"
                )
            reference = KSReference(reference, calibration_confidence)
        elif calibration_confidence is not None:
            raise ValueError("a KSReference holds both confidences: omit calibration_confidence")
        super().__init__(from_logits, check, reference.query_hashes, reference.query_copies)
        self.reference = reference
        self.last_ratio: KSRatio | None = None
        self.last_result: AuditResult | None = None

    def aggregate(self) -> float:  # type: ignore[override]
        probs, labels, _ = self.outputs()
        self.last_ratio = self.reference.ratio(confidence(probs, labels))
        # a decision only over exactly D_Q (a mismatch let through with a warning has none)
        covered = len(probs) == len(self.reference)
        self.last_result = self.reference.audit(Predictions(probs, labels)) if covered else None
        return self.last_ratio.rho
