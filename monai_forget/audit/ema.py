"""Ensembled Membership Auditing (EMA) of Huang, Li & Li, "EMA: Auditing Data Removal
from Trained Models", MICCAI 2021 (Algorithms 1-2).

Step 1 infers, per query sample, whether the target memorised it: each membership
metric of Song & Mittal 2021 is compared with a per-class threshold learned on
calibration data, and a sample counts as memorised when any metric clears its
threshold. Step 2 ensembles the membership vector M with a two-sample test against an
all-ones vector; the p-value is rho_EMA, and rho_EMA <= alpha means the query set is not
memorised (forgotten).

Defaults follow the paper; the public reference code's departures are options
(``threshold_by="prediction"``, ``metrics`` without modified entropy,
``test="student"``, ``calibration_outputs="target"``); ``docs/ema_auditor.md`` tabulates
them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from torch import nn

from monai_forget.audit.base import ShadowAuditor, check_set_size
from monai_forget.audit.result import FORGOTTEN, NOT_FORGOTTEN, AuditResult
from monai_forget.data import LabelledImages
from monai_forget.inference import Predictions
from monai_forget.scores import MEMBERSHIP_METRICS, check_probabilities, membership_scores
from monai_forget.stats import TTestResult, best_balanced_threshold, student_ttest, welch_ttest

ThresholdBy = Literal["label", "prediction"]
TestName = Literal["welch", "student"]
PAPER_METRICS: tuple[str, ...] = ("correctness", "confidence", "entropy", "modified_entropy")


def _classes(probs: np.ndarray, labels: np.ndarray, threshold_by: ThresholdBy) -> np.ndarray:
    """The class whose threshold applies to each sample: its label or the predicted class."""
    if threshold_by == "label":
        return labels
    if threshold_by == "prediction":
        return probs.argmax(axis=1)
    raise ValueError(f"threshold_by must be 'label' or 'prediction', got {threshold_by!r}")


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
    unknown = set(metrics) - set(MEMBERSHIP_METRICS)
    if unknown or not metrics:
        raise ValueError(f"metrics must be a non-empty subset of {sorted(MEMBERSHIP_METRICS)}")
    member_scores = membership_scores(member_probs, member_labels, metrics)
    nonmember_scores = membership_scores(nonmember_probs, nonmember_labels, metrics)
    member_cls = _classes(member_probs, member_labels, threshold_by)
    nonmember_cls = _classes(nonmember_probs, nonmember_labels, threshold_by)

    thresholds: dict[str, np.ndarray] = {}
    accuracy: dict[str, np.ndarray] = {}
    fallback = tuple(
        c
        for c in range(num_classes)
        if not (np.any(member_cls == c) and np.any(nonmember_cls == c))
    )
    for metric in metrics:
        if metric == "correctness":
            # Song & Mittal 2021 (Sec. 3.2) infer membership from correctness by a fixed
            # rule, member iff correctly classified: no threshold is learned.
            thresholds[metric] = np.ones(num_classes)
            accuracy[metric] = _correctness_accuracy(
                member_scores[metric],
                nonmember_scores[metric],
                member_cls,
                nonmember_cls,
                num_classes,
            )
            continue
        pooled = best_balanced_threshold(member_scores[metric], nonmember_scores[metric])
        thresholds[metric] = np.full(num_classes, pooled.threshold)
        accuracy[metric] = np.full(num_classes, pooled.balanced_accuracy)
        for c in set(range(num_classes)) - set(fallback):
            best = best_balanced_threshold(
                member_scores[metric][member_cls == c], nonmember_scores[metric][nonmember_cls == c]
            )
            thresholds[metric][c] = best.threshold
            accuracy[metric][c] = best.balanced_accuracy
    return EMAThresholds(thresholds, accuracy, threshold_by, fallback)


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


def ema_membership(probs: np.ndarray, labels: np.ndarray, thresholds: EMAThresholds) -> np.ndarray:
    """EMA Step 1 inference (Huang et al. 2021, Alg. 1): the membership vector M.

    M_i = 1 when any metric's score of sample i clears its class threshold, else 0.
    """
    probs, labels = check_probabilities(probs, labels, num_classes=thresholds.num_classes)
    scores = membership_scores(probs, labels, thresholds.metrics)
    cls = _classes(probs, labels, thresholds.threshold_by)
    member = np.zeros(len(labels), dtype=bool)
    for metric, per_class in thresholds.thresholds.items():
        member |= scores[metric] >= per_class[cls]
    return member.astype(np.float64)


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


def ema_rule(alpha: float) -> str:
    return f"rho_EMA <= {alpha:g} means forgotten (not memorised)"


@dataclass
class EMAAuditor(ShadowAuditor):
    """Withdrawal audit with Ensembled Membership Auditing (Huang, Li & Li 2021).

    The calibration set is split (seeded, stratified) into members, on which a
    calibration shadow model is trained with the target's recipe, and held-out
    non-members; thresholds are learned on that model's outputs and applied to the
    target's outputs on the query set.

    Args:
        alpha: significance level; rho_EMA <= alpha means forgotten (paper: 0.1).
        metrics: membership metrics to OR (paper: all four).
        threshold_by: class whose threshold applies: true ``"label"`` (paper) or
            ``"prediction"`` (reference code).
        test: ``"welch"`` (default) or ``"student"`` (reference code).
        calibration_outputs: thresholds from a ``"shadow"`` model trained on the
            calibration members (paper), or from the ``"target"`` model's outputs on the
            calibration split (reference code; the member half must then be part of the
            target's training data).
        member_fraction: share of the calibration set used as members.
    """

    alpha: float = 0.1
    metrics: tuple[str, ...] = PAPER_METRICS
    threshold_by: ThresholdBy = "label"
    test: TestName = "welch"
    calibration_outputs: Literal["shadow", "target"] = "shadow"
    member_fraction: float = 0.5
    _options: dict[str, Any] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")
        if not 0.0 < self.member_fraction < 1.0:
            raise ValueError(f"member_fraction must be in (0, 1), got {self.member_fraction}")
        if self.calibration_outputs not in ("shadow", "target"):
            raise ValueError("calibration_outputs must be 'shadow' or 'target'")
        self._options = {
            "alpha": self.alpha,
            "metrics": list(self.metrics),
            "threshold_by": self.threshold_by,
            "test": self.test,
            "calibration_outputs": self.calibration_outputs,
            "member_fraction": self.member_fraction,
        }

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
        reference, members, nonmembers = self._reference_outputs(calibration, target)
        result = self.audit_predictions(
            self._predict(target, query), members, nonmembers, label=label
        )
        result.provenance = self._provenance(
            {"target": target, "calibration_reference": reference},
            {"query": query, "calibration": calibration},
            **self._options,
        )
        return result

    def calibrate(
        self, calibration: LabelledImages, target: nn.Module | None = None
    ) -> EMAThresholds:
        """Step 1 calibration alone: thresholds to hand to :class:`~monai_forget.metrics.EMAMetric`.

        ``target`` is needed only with ``calibration_outputs="target"``.
        """
        check_set_size("calibration", calibration, minimum=4)
        _, members, nonmembers = self._reference_outputs(calibration, target)
        return self.fit_thresholds(members, nonmembers)

    def _reference_outputs(
        self, calibration: LabelledImages, target: nn.Module | None
    ) -> tuple[nn.Module, Predictions, Predictions]:
        """Split D_C into members/non-members; the reference model and its outputs on both."""
        members, nonmembers = calibration.split(self.member_fraction, seed=self.seed)
        if self.calibration_outputs == "target":
            if target is None:
                raise ValueError("calibration_outputs='target' needs the target model")
            reference = target
        else:
            reference = self._train(members)
        return reference, self._predict(reference, members), self._predict(reference, nonmembers)

    def fit_thresholds(self, members: Predictions, nonmembers: Predictions) -> EMAThresholds:
        """Step 1 calibration from the reference model's outputs on the calibration split."""
        return fit_ema_thresholds(
            members.probs,
            members.labels,
            nonmembers.probs,
            nonmembers.labels,
            metrics=self.metrics,
            threshold_by=self.threshold_by,
        )

    def audit_predictions(
        self,
        target: Predictions,
        members: Predictions,
        nonmembers: Predictions,
        *,
        label: str = "",
    ) -> AuditResult:
        """The audit from outputs computed beforehand: the target's on D_Q and the
        reference model's on the calibration members and non-members."""
        thresholds = self.fit_thresholds(members, nonmembers)
        membership = ema_membership(target.probs, target.labels, thresholds)
        test = ema_pvalue(membership, self.test)
        pvalue = float(test.pvalue)
        query_scores = membership_scores(target.probs, target.labels, self.metrics)
        member_scores = membership_scores(members.probs, members.labels, self.metrics)
        nonmember_scores = membership_scores(nonmembers.probs, nonmembers.labels, self.metrics)
        return AuditResult(
            method="ema",
            decision=FORGOTTEN if pvalue <= self.alpha else NOT_FORGOTTEN,
            statistic_name="rho_EMA",
            statistic=pvalue,
            rule=ema_rule(self.alpha),
            details={
                "alpha": self.alpha,
                "t_statistic": float(test.statistic),
                "degrees_of_freedom": float(test.df),
                "membership_rate": float(membership.mean()),
                "test": self.test,
                "thresholds": thresholds.to_dict(),
            },
            sizes={
                "query": len(target.labels),
                "calibration_members": len(members.labels),
                "calibration_nonmembers": len(nonmembers.labels),
            },
            arrays={
                "membership": membership,
                **{f"query_{m}": s for m, s in query_scores.items()},
                **{f"member_{m}": s for m, s in member_scores.items()},
                **{f"nonmember_{m}": s for m, s in nonmember_scores.items()},
            },
            label=label,
            provenance={"options": dict(self._options)},
        )
