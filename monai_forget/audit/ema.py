"""Ensembled Membership Auditing (EMA) of Huang, Li & Li, "EMA: Auditing Data Removal
from Trained Models", MICCAI 2021 (Algorithms 1-2).

Step 1 infers, per query sample, whether the target memorised it: each membership
metric of Song & Mittal 2021 is compared with a per-class threshold learned on
calibration data (:mod:`~monai_forget.audit.ema_fit`), and a sample counts as memorised
when any metric clears its threshold. Step 2 ensembles the membership vector M with a
two-sample test against an all-ones vector; the p-value is rho_EMA, and rho_EMA <= alpha
means the query set is not memorised (forgotten).

What the auditor learns on calibration data (the thresholds, with alpha and the test)
is an :class:`EMAReference`; :func:`ema_decision` is the rule, the one place it is
written. Defaults follow the paper's text: its three metrics (correctness, confidence,
entropy; the text names three, the list itself was lost in extraction and the authors'
code uses these), per-class thresholds, a t-test. The authors' public code is available
as ``variant="reference-code"`` (:meth:`~monai_forget.audit.EMAAuditor.reference_code`);
``docs/ema_auditor.md`` tabulates every difference.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import scipy.stats

from monai_forget.audit.ema_fit import (
    EMAThresholds,
    Scores,
    ThresholdBy,
    Variant,
    check_metrics,
    check_variant,
    classes_of,
    ema_scores,
    fit_ema_thresholds,
    fit_thresholds_from_scores,
)
from monai_forget.audit.result import FORGOTTEN, NOT_FORGOTTEN, AuditResult
from monai_forget.checks import check_choice, check_fraction
from monai_forget.defaults import EMA_ALPHA, EMA_METRICS
from monai_forget.inference import Predictions
from monai_forget.scores import check_probabilities
from monai_forget.stats import TTestResult, student_ttest, welch_ttest

__all__ = [
    "PAPER_METRICS",
    "EMAReference",
    "EMAThresholds",
    "ema_decision",
    "ema_membership",
    "ema_pvalue",
    "ema_rule",
    "fit_ema_thresholds",
]

TestName = Literal["welch", "student"]
#: The paper's three metrics (correctness, confidence, entropy).
PAPER_METRICS: tuple[str, ...] = EMA_METRICS


def ema_decision(pvalue: float, alpha: float) -> str:
    """Huang et al. 2021, Alg. 2: rho_EMA <= alpha means forgotten (not memorised)."""
    return FORGOTTEN if pvalue <= alpha else NOT_FORGOTTEN


def ema_rule(alpha: float) -> str:
    """:func:`ema_decision` in words."""
    return f"rho_EMA <= {alpha:g} means forgotten: the query set is not memorised"


def _membership(scores: Scores, cls: np.ndarray, thresholds: EMAThresholds) -> np.ndarray:
    """M_i = 1 when any metric's score of sample i clears its class threshold."""
    member = np.zeros(len(cls), dtype=bool)
    for metric, per_class in thresholds.thresholds.items():
        member |= scores[metric] >= per_class[cls]
    return member.astype(np.float64)


def ema_membership(probs: np.ndarray, labels: np.ndarray, thresholds: EMAThresholds) -> np.ndarray:
    """EMA Step 1 inference (Huang et al. 2021, Alg. 1): the membership vector M.

    M_i = 1 when any metric's score of sample i clears the threshold of its class (its
    label or predicted class: :attr:`EMAThresholds.apply_by`), else 0.
    """
    probs, labels = check_probabilities(probs, labels, num_classes=thresholds.num_classes)
    scores = ema_scores(probs, labels, thresholds.metrics, thresholds.variant)
    return _membership(scores, classes_of(probs, labels, thresholds.apply_by), thresholds)


def ema_pvalue(
    membership: np.ndarray, test: TestName = "welch", variant: Variant = "paper"
) -> TTestResult:
    """EMA Step 2 (Huang et al. 2021, Alg. 1 and Appendix B): M against all-ones.

    The p-value is rho_EMA. ``"welch"`` (unequal variances; the all-ones vector has none)
    is the default; ``"student"`` (pooled variance) is what the reference code runs. When
    every sample is a member both samples are constant and equal: p = 1. The reference
    code variant calls ``scipy.stats.ttest_ind`` as the authors' code does (p = 1 when M
    is all ones), so its p-value is scipy's to the last bit.
    """
    membership = np.asarray(membership, dtype=np.float64)
    ones = np.ones_like(membership)
    check_choice("test", test, ("welch", "student"))
    if variant == "reference-code":
        if membership.mean() == 1.0:
            return TTestResult(0.0, 1.0, float(2 * len(ones) - 2))
        with warnings.catch_warnings():  # scipy's near-constant-sample warnings
            warnings.simplefilter("ignore", RuntimeWarning)
            res = scipy.stats.ttest_ind(membership, ones, equal_var=test == "student")
        return TTestResult(float(res.statistic), float(res.pvalue), float(res.df))
    if test == "welch":
        return welch_ttest(membership, ones)
    return student_ttest(membership, ones)


@dataclass(frozen=True)
class EMAReference:
    """What the EMA auditor learned on calibration data, computed once before evaluation.

    Attributes:
        thresholds: the per-class thresholds of Step 1 (with their variant).
        alpha: significance level of :func:`ema_decision` (paper: 0.1).
        test: the Step 2 test, ``"welch"`` or ``"student"``.
        member_scores: the reference model's membership scores on its calibration
            members (for the report's figures; not needed to audit).
        nonmember_scores: the same on the calibration non-members.
        query_hashes: content hashes of the D_Q the reference was fitted for (set by
            ``EMAAuditor.fit_reference`` when given D_Q), with which the evaluation-time
            metric checks it evaluates D_Q; not serialised.
        query_copies: hashes of D_Q's images the audit collapsed as copies of others
            (the metric leaves them out of the statistic); not serialised.
    """

    thresholds: EMAThresholds
    alpha: float = EMA_ALPHA
    test: TestName = "welch"
    member_scores: Scores = field(default_factory=dict, repr=False)
    nonmember_scores: Scores = field(default_factory=dict, repr=False)
    query_hashes: tuple[str, ...] | None = field(default=None, compare=False, repr=False)
    query_copies: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        check_fraction("alpha", self.alpha)
        check_choice("test", self.test, ("welch", "student"))

    @classmethod
    def from_predictions(
        cls,
        members: Predictions,
        nonmembers: Predictions,
        *,
        metrics: tuple[str, ...] = PAPER_METRICS,
        threshold_by: ThresholdBy = "label",
        variant: Variant = "paper",
        alpha: float = EMA_ALPHA,
        test: TestName = "welch",
    ) -> EMAReference:
        """Step 1 calibration from the reference model's outputs on the calibration
        members and non-members; each set is scored once."""
        check_metrics(metrics)
        check_variant(variant)
        num_classes = members.probs.shape[1]
        if nonmembers.probs.shape[1] != num_classes:
            raise ValueError(
                f"members have {num_classes} classes but non-members "
                f"{nonmembers.probs.shape[1]}; pass outputs of the same reference model"
            )
        fit_by: ThresholdBy = "label" if variant == "reference-code" else threshold_by
        member = ema_scores(members.probs, members.labels, metrics, variant)
        nonmember = ema_scores(nonmembers.probs, nonmembers.labels, metrics, variant)
        thresholds = fit_thresholds_from_scores(
            member,
            classes_of(members.probs, members.labels, fit_by),
            nonmember,
            classes_of(nonmembers.probs, nonmembers.labels, fit_by),
            num_classes,
            fit_by,
            variant,
        )
        return cls(thresholds, alpha, test, member, nonmember)

    def decide(self, pvalue: float) -> str:
        """:func:`ema_decision` at this reference's alpha."""
        return ema_decision(pvalue, self.alpha)

    def audit(self, target: Predictions, /, *, label: str = "") -> AuditResult:
        """The audit of the target's outputs on D_Q against these thresholds."""
        th = self.thresholds
        if target.probs.shape[1] != th.num_classes:
            raise ValueError(
                f"the target outputs {target.probs.shape[1]} classes but the thresholds were "
                f"learned for {th.num_classes}"
            )
        query = ema_scores(target.probs, target.labels, th.metrics, th.variant)
        membership = _membership(query, classes_of(target.probs, target.labels, th.apply_by), th)
        test = ema_pvalue(membership, self.test, th.variant)
        pvalue = float(test.pvalue)
        return AuditResult(
            method="ema",
            decision=self.decide(pvalue),
            statistic_name="rho_EMA",
            statistic=pvalue,
            rule=ema_rule(self.alpha),
            details={
                "alpha": self.alpha,
                "t_statistic": float(test.statistic),
                "degrees_of_freedom": float(test.df),
                "membership_rate": float(membership.mean()),
                "test": self.test,
                "variant": th.variant,
                "thresholds": th.to_dict(),
            },
            sizes={"query": len(target), **self._split_sizes()},
            arrays={
                "membership": membership,
                **{f"query_{m}": s for m, s in query.items()},
                **{f"member_{m}": s for m, s in self.member_scores.items()},
                **{f"nonmember_{m}": s for m, s in self.nonmember_scores.items()},
            },
            label=label,
        )

    def _split_sizes(self) -> dict[str, int]:
        """The calibration split's sizes, where this reference keeps its scores."""
        return {
            f"calibration_{role}": len(next(iter(scores.values())))
            for role, scores in (("members", self.member_scores),
                                 ("nonmembers", self.nonmember_scores))
            if scores
        }  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """The thresholds, alpha and test (the calibration scores are not kept)."""
        return {"thresholds": self.thresholds.to_dict(), "alpha": self.alpha, "test": self.test}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EMAReference:
        thresholds = data["thresholds"]
        if not isinstance(thresholds, EMAThresholds):
            thresholds = EMAThresholds.from_dict(thresholds)
        return cls(thresholds, float(data.get("alpha", 0.1)), data.get("test", "welch"))
