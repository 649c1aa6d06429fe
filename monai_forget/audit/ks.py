"""The K-S calibrated ratio of Liu & Tsaftaris, "Have you forgotten? A method to assess
if machine learning models have forgotten data", MICCAI 2020 (Algorithm 1)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from torch import nn

from monai_forget.audit.base import ShadowAuditor
from monai_forget.audit.result import FORGOTTEN, NOT_FORGOTTEN, AuditResult
from monai_forget.data import LabelledImages
from monai_forget.inference import Predictions
from monai_forget.stats import ks_distance

KS_RULE = "rho_KS >= 1 means forgotten"


@dataclass(frozen=True)
class KSRatio:
    """rho = KS(query, target) / KS(query, calibration) and its two K-S distances."""

    rho: float
    ks_query_target: float
    ks_query_calibration: float

    @property
    def decision(self) -> str:
        """Liu & Tsaftaris 2020 Sec. 3: rho >= 1 forgotten, rho < 1 not forgotten."""
        return FORGOTTEN if self.rho >= 1.0 else NOT_FORGOTTEN


def ks_calibrated_ratio(
    target_confidence: np.ndarray,
    query_confidence: np.ndarray,
    calibration_confidence: np.ndarray,
) -> KSRatio:
    """Calibrated K-S ratio of Liu & Tsaftaris 2020, Eq. 4.

    Each argument holds one model's confidence for the ground-truth class, t[y], on
    every sample of the query set D_Q: the target model, the query shadow model (trained
    on D_Q) and the calibration shadow model (trained on D_C). The K-S distances are the
    exact two-sample statistics of Eqs. 1-3 (sup-distance between the ECDFs), and

        rho = KS(query, target) / KS(query, calibration).

    Raises:
        ValueError: the calibration distance is 0, so the ratio is undefined: the
            calibration shadow model behaves exactly like the query shadow model on D_Q.
    """
    ks_qt = ks_distance(query_confidence, target_confidence)
    ks_qc = ks_distance(query_confidence, calibration_confidence)
    if ks_qc == 0.0:
        raise ValueError(
            "KS(query, calibration) is 0: the calibration shadow model's confidences on D_Q "
            "equal the query shadow model's, so the ratio cannot be calibrated; use a "
            "calibration set that is disjoint from and not a copy of the query set"
        )
    return KSRatio(rho=ks_qt / ks_qc, ks_query_target=ks_qt, ks_query_calibration=ks_qc)


class KSAuditor(ShadowAuditor):
    """Withdrawal audit with the K-S calibrated ratio (Liu & Tsaftaris 2020, Algorithm 1).

    Trains a query shadow model on D_Q and a calibration shadow model on D_C with the
    target's recipe, runs all three models over D_Q, and compares their ground-truth
    class confidences with :func:`ks_calibrated_ratio`. See ``docs/ks_auditor.md`` for
    assumptions and failure modes.
    """

    def audit(
        self,
        target: nn.Module,
        query: LabelledImages,
        calibration: LabelledImages,
        *,
        label: str = "",
    ) -> AuditResult:
        """Has ``target`` forgotten ``query``? ``calibration`` must share no sample with it."""
        self._start(query, calibration)
        query_shadow = self._train(query)
        calibration_shadow = self._train(calibration)
        result = self.audit_predictions(
            self._predict(target, query),
            self._predict(query_shadow, query),
            self._predict(calibration_shadow, query),
            label=label,
        )
        result.sizes["calibration"] = len(calibration)
        result.provenance = self._provenance(
            {
                "target": target,
                "query_shadow": query_shadow,
                "calibration_shadow": calibration_shadow,
            },
            {"query": query, "calibration": calibration},
        )
        return result

    def reference_confidences(
        self, query: LabelledImages, calibration: LabelledImages
    ) -> tuple[np.ndarray, np.ndarray]:
        """The shadow models' ground-truth confidences on D_Q: (query shadow, calibration
        shadow). Computed once before evaluation for the metric and handler."""
        self._start(query, calibration)
        return (
            self._predict(self._train(query), query).confidence,
            self._predict(self._train(calibration), query).confidence,
        )

    @staticmethod
    def audit_predictions(
        target: Predictions,
        query_shadow: Predictions,
        calibration_shadow: Predictions,
        *,
        label: str = "",
    ) -> AuditResult:
        """The audit from the three models' outputs on D_Q, computed beforehand."""
        lengths = (len(target), len(query_shadow), len(calibration_shadow))
        if len(set(lengths)) != 1:
            raise ValueError(
                "the three prediction sets must cover the same query samples; "
                f"got lengths {lengths}"
            )
        ratio = ks_calibrated_ratio(
            target.confidence, query_shadow.confidence, calibration_shadow.confidence
        )
        return AuditResult(
            method="ks",
            decision=ratio.decision,
            statistic_name="rho_KS",
            statistic=ratio.rho,
            rule=KS_RULE,
            details={
                "ks_query_target": ratio.ks_query_target,
                "ks_query_calibration": ratio.ks_query_calibration,
            },
            sizes={"query": len(target.labels)},
            arrays={
                "target_confidence": target.confidence,
                "query_shadow_confidence": query_shadow.confidence,
                "calibration_shadow_confidence": calibration_shadow.confidence,
            },
            label=label,
        )
