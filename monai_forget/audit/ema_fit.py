"""EMA Step 1 calibration (Huang, Li & Li 2021, Alg. 2): per-class membership thresholds.

Two variants, both kept:

- ``"paper"`` (default): the paper's text with Song & Mittal's (2021) per-class rule.
  Thresholds maximise the balanced accuracy between calibration members and
  non-members, ties to the LARGEST maximising threshold (candidates: every observed
  score and +inf); a class without members or non-members uses the threshold learned
  on all classes pooled; a query sample gets the threshold of the class that grouped
  the calibration samples (``threshold_by``: true label, or predicted class).
- ``"reference-code"``: what the authors' public code computes. Thresholds are fitted
  on calibration samples grouped by TRUE label and applied to the query by PREDICTED
  class; the first maximiser wins, in the order members then non-members as given,
  starting from threshold 0 at accuracy 0 (so a class with no member or no non-member,
  whose accuracy is undefined, keeps 0); the entropy's logarithm is floored at 1e-30.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from monai_forget.checks import check_choice
from monai_forget.defaults import EMA_METRICS
from monai_forget.scores import MEMBERSHIP_METRICS, check_probabilities, membership_scores
from monai_forget.stats import best_balanced_threshold

__all__ = ["VARIANTS", "EMAThresholds", "ema_scores", "fit_ema_thresholds"]

ThresholdBy = Literal["label", "prediction"]
Variant = Literal["paper", "reference-code"]
Scores = dict[str, np.ndarray]
#: The threshold rules offered (module docstring).
VARIANTS: tuple[str, ...] = ("paper", "reference-code")
#: Floor inside the logarithm of the reference code's entropy.
REFERENCE_CODE_LOG_FLOOR = 1e-30


def classes_of(probs: np.ndarray, labels: np.ndarray, by: ThresholdBy) -> np.ndarray:
    """The class whose threshold applies to each sample: its label or the predicted class."""
    if by == "label":
        return labels
    if by == "prediction":
        return probs.argmax(axis=1)  # first maximiser on ties, as numpy (and the reference)
    raise ValueError(f"threshold_by must be 'label' or 'prediction', got {by!r}")


def check_variant(variant: str) -> None:
    check_choice("variant", variant, VARIANTS)


def check_metrics(metrics: tuple[str, ...]) -> None:
    unknown = set(metrics) - set(MEMBERSHIP_METRICS)
    if unknown or not metrics:
        raise ValueError(f"metrics must be a non-empty subset of {sorted(MEMBERSHIP_METRICS)}")


def ema_scores(
    probs: np.ndarray, labels: np.ndarray, metrics: tuple[str, ...], variant: Variant = "paper"
) -> Scores:
    """Membership scores (higher = more member-like) of validated outputs.

    The reference code computes the entropy as ``sum_i p_i * -log(max(p_i, 1e-30))``;
    the paper variant uses ``0 log 0 = 0`` (they differ only for probabilities below
    1e-30).
    """
    scores = membership_scores(probs, labels, metrics)
    if variant == "reference-code" and "entropy" in scores:
        floored = -np.log(np.maximum(probs, REFERENCE_CODE_LOG_FLOOR))
        scores["entropy"] = -np.sum(probs * floored, axis=1)
    return scores


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
        threshold_by: which class groups the calibration samples when the thresholds are
            fitted: their ``"label"`` (paper) or their ``"prediction"``; the paper variant
            applies the same rule to the query.
        fallback_classes: classes with no calibration member or non-member, which use the
            threshold learned on all classes together (paper variant; the reference code
            gives them the threshold 0).
        variant: ``"paper"`` or ``"reference-code"`` (see :data:`VARIANTS`).
    """

    thresholds: dict[str, np.ndarray]
    balanced_accuracy: dict[str, np.ndarray]
    threshold_by: ThresholdBy = "label"
    fallback_classes: tuple[int, ...] = ()
    variant: Variant = "paper"

    @property
    def apply_by(self) -> ThresholdBy:
        """Which class's threshold a query sample gets: the reference code fits thresholds
        by label but applies them by the query's predicted class."""
        return "prediction" if self.variant == "reference-code" else self.threshold_by

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
            "variant": self.variant,
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
            variant=data.get("variant", "paper"),
        )


def first_max_threshold(member: np.ndarray, nonmember: np.ndarray) -> tuple[float, float]:
    """The reference code's threshold: the FIRST candidate, in the order members then
    non-members as given, whose balanced accuracy beats every earlier one, starting from
    threshold 0 at accuracy 0. An empty side makes every accuracy undefined: 0 stays."""
    if member.size == 0 or nonmember.size == 0:
        return 0.0, float("nan")
    candidates = np.concatenate([member, nonmember])
    at_least = member.size - np.searchsorted(np.sort(member), candidates, side="left")
    below = np.searchsorted(np.sort(nonmember), candidates, side="left")
    accuracy = 0.5 * (at_least / (member.size + 0.0) + below / (nonmember.size + 0.0))
    best = int(np.argmax(accuracy))  # the first occurrence of the maximum
    if not accuracy[best] > 0.0:
        return 0.0, float(accuracy[best])
    return float(candidates[best]), float(accuracy[best])


def _paper_thresholds(
    member: np.ndarray, member_cls: np.ndarray, nonmember: np.ndarray, nonmember_cls: np.ndarray,
    num_classes: int, fallback: tuple[int, ...],
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    pooled = best_balanced_threshold(member, nonmember)
    thresholds = np.full(num_classes, pooled.threshold)
    accuracy = np.full(num_classes, pooled.balanced_accuracy)
    for c in set(range(num_classes)) - set(fallback):
        best = best_balanced_threshold(member[member_cls == c], nonmember[nonmember_cls == c])
        thresholds[c], accuracy[c] = best.threshold, best.balanced_accuracy
    return thresholds, accuracy


def fit_thresholds_from_scores(
    member: Scores,
    member_cls: np.ndarray,
    nonmember: Scores,
    nonmember_cls: np.ndarray,
    num_classes: int,
    threshold_by: ThresholdBy = "label",
    variant: Variant = "paper",
) -> EMAThresholds:
    """Per-class, per-metric thresholds from membership scores computed beforehand."""
    fallback = tuple(
        c
        for c in range(num_classes)
        if not (np.any(member_cls == c) and np.any(nonmember_cls == c))
    )
    thresholds: dict[str, np.ndarray] = {}
    accuracy: dict[str, np.ndarray] = {}
    for metric in member:
        if metric == "correctness":
            # Song & Mittal 2021 (Sec. 3.2) infer membership from correctness by a fixed
            # rule, member iff correctly classified: no threshold is learned.
            thresholds[metric] = np.ones(num_classes)
            accuracy[metric] = _correctness_accuracy(
                member[metric], nonmember[metric], member_cls, nonmember_cls, num_classes
            )
        elif variant == "paper":
            thresholds[metric], accuracy[metric] = _paper_thresholds(
                member[metric], member_cls, nonmember[metric], nonmember_cls, num_classes,
                fallback,
            )  # fmt: skip
        else:
            pairs = [
                first_max_threshold(
                    member[metric][member_cls == c], nonmember[metric][nonmember_cls == c]
                )
                for c in range(num_classes)
            ]
            thresholds[metric] = np.array([t for t, _ in pairs])
            accuracy[metric] = np.array([a for _, a in pairs])
    return EMAThresholds(thresholds, accuracy, threshold_by, fallback, variant)


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


def fit_ema_thresholds(
    member_probs: np.ndarray,
    member_labels: np.ndarray,
    nonmember_probs: np.ndarray,
    nonmember_labels: np.ndarray,
    *,
    metrics: tuple[str, ...] = EMA_METRICS,
    threshold_by: ThresholdBy = "label",
    variant: Variant = "paper",
) -> EMAThresholds:
    """EMA Step 1 calibration (Huang et al. 2021, Alg. 2): per-class, per-metric thresholds.

    Correctness is a fixed rule (member iff correctly classified, as in Song & Mittal
    2021). For every other metric and class, the threshold maximises the balanced accuracy
    0.5 * (TPR + TNR) (Eq. 2) between the calibration members (samples the reference model
    was trained on) and non-members (held-out calibration samples); the two variants
    differ in ties, empty classes and the classes used (module docstring). The reference
    code variant always groups the calibration samples by label.
    """
    check_variant(variant)
    check_metrics(metrics)
    member_probs, member_labels = check_probabilities(member_probs, member_labels)
    num_classes = member_probs.shape[1]
    nonmember_probs, nonmember_labels = check_probabilities(
        nonmember_probs, nonmember_labels, num_classes=num_classes
    )
    fit_by: ThresholdBy = "label" if variant == "reference-code" else threshold_by
    return fit_thresholds_from_scores(
        ema_scores(member_probs, member_labels, metrics, variant),
        classes_of(member_probs, member_labels, fit_by),
        ema_scores(nonmember_probs, nonmember_labels, metrics, variant),
        classes_of(nonmember_probs, nonmember_labels, fit_by),
        num_classes,
        fit_by,
        variant,
    )
