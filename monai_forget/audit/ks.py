"""The K-S calibrated ratio of Liu & Tsaftaris, "Have you forgotten? A method to assess
if machine learning models have forgotten data", MICCAI 2020 (Algorithm 1).

What the auditor learns from its shadow models (their ground-truth-class confidences on
D_Q) is a :class:`KSReference`; the target's outputs on D_Q are then compared with it,
and :func:`ks_decision` is the paper's rule, the one place it is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from monai_forget.audit.result import FORGOTTEN, NOT_FORGOTTEN, AuditResult
from monai_forget.inference import Predictions
from monai_forget.stats import ks_distance

__all__ = ["KS_RULE", "KSRatio", "KSReference", "ks_calibrated_ratio", "ks_decision"]

KS_RULE = "rho_KS >= 1 means forgotten"


def ks_decision(rho: float) -> str:
    """Liu & Tsaftaris 2020, Sec. 3: rho_KS >= 1 means forgotten, rho_KS < 1 not forgotten."""
    return FORGOTTEN if rho >= 1.0 else NOT_FORGOTTEN


@dataclass(frozen=True)
class KSRatio:
    """rho = KS(query, target) / KS(query, calibration) and its two K-S distances."""

    rho: float
    ks_query_target: float
    ks_query_calibration: float

    @property
    def decision(self) -> str:
        """The paper's rule applied to ``rho`` (:func:`ks_decision`)."""
        return ks_decision(self.rho)


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


@dataclass(frozen=True)
class KSReference:
    """What the K-S auditor learned from its shadow models, computed once before evaluation.

    Attributes:
        query_confidence: the query shadow model's t[y] on every sample of D_Q.
        calibration_confidence: the calibration shadow model's t[y] on D_Q.
        query_hashes: content hashes of D_Q (set by ``KSAuditor.fit_reference``), with
            which the evaluation-time metric checks it evaluates D_Q; not serialised
            (``reference.json`` keeps them once, beside every auditor's reference).
        query_copies: hashes of D_Q's images the audit collapsed as copies of others
            (the metric leaves them out of the statistic); not serialised either.
    """

    query_confidence: np.ndarray
    calibration_confidence: np.ndarray
    query_hashes: tuple[str, ...] | None = field(default=None, compare=False, repr=False)
    query_copies: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        q = np.array(self.query_confidence, dtype=np.float64, copy=True).ravel()
        c = np.array(self.calibration_confidence, dtype=np.float64, copy=True).ravel()
        if len(q) != len(c):
            raise ValueError(
                "the query and calibration shadow confidences must cover the same query "
                f"samples; got lengths {len(q)} and {len(c)}"
            )
        q.flags.writeable = False
        c.flags.writeable = False
        object.__setattr__(self, "query_confidence", q)
        object.__setattr__(self, "calibration_confidence", c)
        if self.query_hashes is not None:
            object.__setattr__(self, "query_hashes", tuple(str(h) for h in self.query_hashes))

    @classmethod
    def from_predictions(
        cls, query_shadow: Predictions, calibration_shadow: Predictions
    ) -> KSReference:
        """From the two shadow models' outputs on D_Q."""
        if len(query_shadow) != len(calibration_shadow):
            raise ValueError(
                "the prediction sets must cover the same query samples; got lengths "
                f"{(len(query_shadow), len(calibration_shadow))}"
            )
        return cls(query_shadow.confidence, calibration_shadow.confidence)

    def __len__(self) -> int:
        return len(self.query_confidence)

    def ratio(self, target_confidence: np.ndarray) -> KSRatio:
        """rho_KS of a target whose t[y] on D_Q is ``target_confidence`` (Eq. 4)."""
        return ks_calibrated_ratio(
            target_confidence, self.query_confidence, self.calibration_confidence
        )

    def audit(self, target: Predictions, /, *, label: str = "") -> AuditResult:
        """The audit of the target's outputs on D_Q against this reference."""
        if len(target) != len(self):
            raise ValueError(
                "the three prediction sets must cover the same query samples; got lengths "
                f"{(len(target), len(self), len(self))}"
            )
        ratio = self.ratio(target.confidence)
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
            sizes={"query": len(target)},
            arrays={
                "target_confidence": target.confidence,
                "query_shadow_confidence": self.query_confidence,
                "calibration_shadow_confidence": self.calibration_confidence,
            },
            label=label,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "query_confidence": self.query_confidence.tolist(),
            "calibration_confidence": self.calibration_confidence.tolist(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KSReference:
        return cls(data["query_confidence"], data["calibration_confidence"])
