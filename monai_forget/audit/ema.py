"""Ensembled Membership Auditing (EMA) of Huang, Li & Li, "EMA: Auditing Data Removal
from Trained Models", MICCAI 2021 (Algorithms 1-2).

Step 1 infers, per query sample, whether the target memorised it: each membership
metric of Song & Mittal 2021 is compared with a per-class threshold learned on
calibration data, and a sample counts as memorised when any metric clears its
threshold. Step 2 ensembles the membership vector M with a two-sample test against an
all-ones vector; the p-value is rho_EMA, and rho_EMA <= alpha means the query set is not
memorised (forgotten).

What the auditor learns on calibration data (the thresholds, with alpha and the test)
is an :class:`EMAReference`; :func:`ema_decision` is the rule, the one place it is
written. Defaults follow the paper; the public reference code's departures are options
(``threshold_by="prediction"``, ``metrics`` without modified entropy,
``test="student"``, ``calibration_outputs="target"``); ``docs/ema_auditor.md`` tabulates
them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from monai_forget.audit.result import FORGOTTEN, NOT_FORGOTTEN, AuditResult
from monai_forget.defaults import EMA_METRICS
from monai_forget.inference import Predictions
from monai_forget.scores import MEMBERSHIP_METRICS, check_probabilities, membership_scores
from monai_forget.stats import TTestResult, best_balanced_threshold, student_ttest, welch_ttest

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

ThresholdBy = Literal["label", "prediction"]
TestName = Literal["welch", "student"]
Scores = dict[str, np.ndarray]
PAPER_METRICS: tuple[str, ...] = EMA_METRICS


def ema_decision(pvalue: float, alpha: float) -> str:
    """Huang et al. 2021, Alg. 2: rho_EMA <= alpha means forgotten (not memorised)."""
    return FORGOTTEN if pvalue <= alpha else NOT_FORGOTTEN


def ema_rule(alpha: float) -> str:
    """:func:`ema_decision` in words."""
    return f"rho_EMA <= {alpha:g} means forgotten: the query set is not memorised"


def _classes(probs: np.ndarray, labels: np.ndarray, threshold_by: ThresholdBy) -> np.ndarray:
    """The class whose threshold applies to each sample: its label or the predicted class."""
    if threshold_by == "label":
        return labels
    if threshold_by == "prediction":
        return probs.argmax(axis=1)
    raise ValueError(f"threshold_by must be 'label' or 'prediction', got {threshold_by!r}")


def _check_metrics(metrics: tuple[str, ...]) -> None:
    unknown = set(metrics) - set(MEMBERSHIP_METRICS)
    if unknown or not metrics:
        raise ValueError(f"metrics must be a non-empty subset of {sorted(MEMBERSHIP_METRICS)}")


@dataclass(frozen=True)
class EMAThresholds:
    """Per-class membership thresholds learned in EMA Step 1 (Huang et al. 2021, Alg. 1).

    Scores are oriented so that higher means more likely a member (see
    :func:`monai_forget.scores.membership_scores`); a sample of class c is a member by
    metric m when ``score_m >= thresholds[m][c]``.

    Attributes:
        thresholds: metric name -> (K,) thresholds (``inf`` disables a metric for a class
            where no threshold beats chance).
        balanced_accuracy: metric name -> (K,) calibration balanced accuracy per class.
        threshold_by: ``"label"`` (paper) or ``"prediction"`` (reference code).
        fallback_classes: classes with no calibration member or non-member, which use the
            threshold learned on all classes together.
    """

    thresholds: dict[str, np.ndarray]
    balanced_accuracy: dict[str, np.ndarray]
    threshold_by: ThresholdBy = "label"
    fallback_classes: tuple[int, ...] = ()

    @property
    def metrics(self) -> tuple[str, ...]:
        return tuple(self.thresholds)

    @property
    def num_classes(self) -> int:
        return len(next(iter(self.thresholds.values())))

    def to_dict(self) -> dict[str, Any]:
        return {
            "thresholds": {m: v.tolist() for m, v in self.thresholds.items()},
            "balanced_accuracy": {m: v.tolist() for m, v in self.balanced_accuracy.items()},
            "threshold_by": self.threshold_by,
            "fallback_classes": list(self.fallback_classes),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EMAThresholds:
        return cls(
            thresholds={m: np.asarray(v, dtype=float) for m, v in data["thresholds"].items()},
            balanced_accuracy={
                m: np.asarray(v, dtype=float) for m, v in data["balanced_accuracy"].items()
            },
            threshold_by=data.get("threshold_by", "label"),
            fallback_classes=tuple(data.get("fallback_classes", ())),
        )


def _fit_thresholds(
    member: Scores,
    member_cls: np.ndarray,
    nonmember: Scores,
    nonmember_cls: np.ndarray,
    num_classes: int,
    threshold_by: ThresholdBy,
) -> EMAThresholds:
    """Per-class, per-metric thresholds from membership scores computed beforehand."""
    thresholds: dict[str, np.ndarray] = {}
    accuracy: dict[str, np.ndarray] = {}
    fallback = tuple(
        c
        for c in range(num_classes)
        if not (np.any(member_cls == c) and np.any(nonmember_cls == c))
    )
    for metric in member:
        if metric == "correctness":
            # Song & Mittal 2021 (Sec. 3.2) infer membership from correctness by a fixed
            # rule, member iff correctly classified: no threshold is learned.
            thresholds[metric] = np.ones(num_classes)
            accuracy[metric] = _correctness_accuracy(
                member[metric], nonmember[metric], member_cls, nonmember_cls, num_classes
            )
            continue
        pooled = best_balanced_threshold(member[metric], nonmember[metric])
        thresholds[metric] = np.full(num_classes, pooled.threshold)
        accuracy[metric] = np.full(num_classes, pooled.balanced_accuracy)
        for c in set(range(num_classes)) - set(fallback):
            best = best_balanced_threshold(
                member[metric][member_cls == c], nonmember[metric][nonmember_cls == c]
            )
            thresholds[metric][c] = best.threshold
            accuracy[metric][c] = best.balanced_accuracy
    return EMAThresholds(thresholds, accuracy, threshold_by, fallback)


def fit_ema_thresholds(
    member_probs: np.ndarray,
    member_labels: np.ndarray,
    nonmember_probs: np.ndarray,
    nonmember_labels: np.ndarray,
    *,
    metrics: tuple[str, ...] = PAPER_METRICS,
    threshold_by: ThresholdBy = "label",
) -> EMAThresholds:
    """EMA Step 1 calibration (Huang et al. 2021, Alg. 1): per-class, per-metric thresholds.

    Correctness is a fixed rule (member iff correctly classified, as in Song & Mittal
    2021). For every other metric and class, the threshold maximises the balanced accuracy
    0.5 * (TPR + TNR) between the calibration members (samples the reference model was
    trained on) and non-members (held-out calibration samples), found by
    :func:`monai_forget.stats.best_balanced_threshold`. A class with no member or no
    non-member uses the threshold learned on all classes pooled.
    """
    member_probs, member_labels = check_probabilities(member_probs, member_labels)
    num_classes = member_probs.shape[1]
    nonmember_probs, nonmember_labels = check_probabilities(
        nonmember_probs, nonmember_labels, num_classes=num_classes
    )
    _check_metrics(metrics)
    return _fit_thresholds(
        membership_scores(member_probs, member_labels, metrics),
        _classes(member_probs, member_labels, threshold_by),
        membership_scores(nonmember_probs, nonmember_labels, metrics),
        _classes(nonmember_probs, nonmember_labels, threshold_by),
        num_classes,
        threshold_by,
    )


def _correctness_accuracy(
    member: np.ndarray,
    nonmember: np.ndarray,
    member_cls: np.ndarray,
    nonmember_cls: np.ndarray,
    num_classes: int,
) -> np.ndarray:
    """Per-class calibration balanced accuracy of the fixed rule "member iff correct"."""
    out = np.full(num_classes, np.nan)
    for c in range(num_classes):
        m, n = member[member_cls == c], nonmember[nonmember_cls == c]
        if len(m) and len(n):
            out[c] = 0.5 * (np.mean(m >= 1.0) + np.mean(n < 1.0))
    return out


def _membership(scores: Scores, cls: np.ndarray, thresholds: EMAThresholds) -> np.ndarray:
    """M_i = 1 when any metric's score of sample i clears its class threshold."""
    member = np.zeros(len(cls), dtype=bool)
    for metric, per_class in thresholds.thresholds.items():
        member |= scores[metric] >= per_class[cls]
    return member.astype(np.float64)


def ema_membership(probs: np.ndarray, labels: np.ndarray, thresholds: EMAThresholds) -> np.ndarray:
    """EMA Step 1 inference (Huang et al. 2021, Alg. 1): the membership vector M.

    M_i = 1 when any metric's score of sample i clears its class threshold, else 0.
    """
    probs, labels = check_probabilities(probs, labels, num_classes=thresholds.num_classes)
    scores = membership_scores(probs, labels, thresholds.metrics)
    return _membership(scores, _classes(probs, labels, thresholds.threshold_by), thresholds)


def ema_pvalue(membership: np.ndarray, test: TestName = "welch") -> TTestResult:
    """EMA Step 2 (Huang et al. 2021, Alg. 2): two-sample test of M against all-ones.

    The p-value is rho_EMA. ``"welch"`` (unequal variances; the all-ones vector has none)
    is the default; ``"student"`` (pooled variance) is what the reference code runs.
    When every sample is a member both samples are constant and equal: p = 1.
    """
    membership = np.asarray(membership, dtype=np.float64)
    ones = np.ones_like(membership)
    if test == "welch":
        return welch_ttest(membership, ones)
    if test == "student":
        return student_ttest(membership, ones)
    raise ValueError(f"test must be 'welch' or 'student', got {test!r}")


@dataclass(frozen=True)
class EMAReference:
    """What the EMA auditor learned on calibration data, computed once before evaluation.

    Attributes:
        thresholds: the per-class thresholds of Step 1.
        alpha: significance level of :func:`ema_decision` (paper: 0.1).
        test: the Step 2 test, ``"welch"`` or ``"student"``.
        member_scores: the reference model's membership scores on its calibration
            members (for the report's figures; not needed to audit).
        nonmember_scores: the same on the calibration non-members.
    """

    thresholds: EMAThresholds
    alpha: float = 0.1
    test: TestName = "welch"
    member_scores: Scores = field(default_factory=dict, repr=False)
    nonmember_scores: Scores = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")
        if self.test not in ("welch", "student"):
            raise ValueError(f"test must be 'welch' or 'student', got {self.test!r}")

    @classmethod
    def from_predictions(
        cls,
        members: Predictions,
        nonmembers: Predictions,
        *,
        metrics: tuple[str, ...] = PAPER_METRICS,
        threshold_by: ThresholdBy = "label",
        alpha: float = 0.1,
        test: TestName = "welch",
    ) -> EMAReference:
        """Step 1 calibration from the reference model's outputs on the calibration
        members and non-members; each set is scored once."""
        _check_metrics(metrics)
        num_classes = members.probs.shape[1]
        if nonmembers.probs.shape[1] != num_classes:
            raise ValueError(
                f"members have {num_classes} classes but non-members "
                f"{nonmembers.probs.shape[1]}; pass outputs of the same reference model"
            )
        member = membership_scores(members.probs, members.labels, metrics)
        nonmember = membership_scores(nonmembers.probs, nonmembers.labels, metrics)
        thresholds = _fit_thresholds(
            member,
            _classes(members.probs, members.labels, threshold_by),
            nonmember,
            _classes(nonmembers.probs, nonmembers.labels, threshold_by),
            num_classes,
            threshold_by,
        )
        return cls(thresholds, alpha, test, member, nonmember)

    def decide(self, pvalue: float) -> str:
        """:func:`ema_decision` at this reference's alpha."""
        return ema_decision(pvalue, self.alpha)

    def audit(self, target: Predictions, *, label: str = "") -> AuditResult:
        """The audit of the target's outputs on D_Q against these thresholds."""
        if target.probs.shape[1] != self.thresholds.num_classes:
            raise ValueError(
                f"the target outputs {target.probs.shape[1]} classes but the thresholds were "
                f"learned for {self.thresholds.num_classes}"
            )
        query = membership_scores(target.probs, target.labels, self.thresholds.metrics)
        cls = _classes(target.probs, target.labels, self.thresholds.threshold_by)
        membership = _membership(query, cls, self.thresholds)
        test = ema_pvalue(membership, self.test)
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
                "thresholds": self.thresholds.to_dict(),
            },
            sizes={"query": len(target)},
            arrays={
                "membership": membership,
                **{f"query_{m}": s for m, s in query.items()},
                **{f"member_{m}": s for m, s in self.member_scores.items()},
                **{f"nonmember_{m}": s for m, s in self.nonmember_scores.items()},
            },
            label=label,
        )

    def to_dict(self) -> dict[str, Any]:
        """The thresholds, alpha and test (the calibration scores are not kept)."""
        return {"thresholds": self.thresholds.to_dict(), "alpha": self.alpha, "test": self.test}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EMAReference:
        thresholds = data["thresholds"]
        if not isinstance(thresholds, EMAThresholds):
            thresholds = EMAThresholds.from_dict(thresholds)
        return cls(thresholds, float(data.get("alpha", 0.1)), data.get("test", "welch"))
