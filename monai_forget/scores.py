"""Per-sample membership metrics from a model's softmax outputs.

The four metrics of Song & Mittal, "Systematic evaluation of privacy risks of
machine learning models" (USENIX Security 2021, Section 3.2), as used by EMA
(Huang, Li & Li, "EMA: Auditing Data Removal from Trained Models", 2021, Step 1):
prediction correctness, confidence in the true class, prediction entropy and
modified prediction entropy.

Orientation: the raw metric functions return the paper's quantities. Entropy and
modified entropy are LOWER for members; :func:`membership_scores` negates them so
that every returned score is "higher = more likely a member", which is what
:func:`monai_forget.stats.best_balanced_threshold` expects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import scipy.special

__all__ = [
    "MEMBERSHIP_METRICS",
    "MODIFIED_ENTROPY_EPS",
    "MembershipMetric",
    "check_probabilities",
    "confidence",
    "correctness",
    "entropy",
    "membership_scores",
    "modified_entropy",
]

#: Floor applied inside the logarithms of the modified entropy so that
#: ``log(0)`` never occurs (the value used by Song & Mittal's reference code).
MODIFIED_ENTROPY_EPS = 1e-30

#: Allowed deviation of a probability row's sum from 1.
_ROW_SUM_TOL = 1e-4


# --------------------------------------------------------------------------- validation


def _to_numpy(x: object) -> np.ndarray:
    """numpy view of a numpy array, torch tensor (any device) or array-like."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # torch.Tensor without importing torch
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def _check_prob_array(probs: object, num_classes: int | None) -> np.ndarray:
    arr = _to_numpy(probs)
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise ValueError(f"probs must be numeric, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if arr.ndim != 2:
        raise ValueError(
            f"probs must be 2-D (N samples, K classes), got shape {arr.shape}; "
            "reshape it, e.g. `probs.reshape(len(probs), -1)` or add a batch axis"
        )
    if arr.size == 0:
        raise ValueError(
            f"probs is empty (shape {arr.shape}); pass at least one sample with at least one class"
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError("probs contains NaN or inf values; check the model outputs for overflow")
    if num_classes is not None and arr.shape[1] != num_classes:
        raise ValueError(
            f"probs has {arr.shape[1]} classes (columns) but num_classes={num_classes}; "
            "pass the full softmax output of the model"
        )
    return arr


def _check_simplex(arr: np.ndarray) -> None:
    if arr.min() < 0.0 or arr.max() > 1.0:
        raise ValueError(
            f"probs has values outside [0, 1] (min {arr.min():.4g}, max {arr.max():.4g}); "
            "these look like logits: pass from_logits=True to apply a softmax"
        )
    sums = arr.sum(axis=1)
    worst = int(np.argmax(np.abs(sums - 1.0)))
    if abs(sums[worst] - 1.0) > _ROW_SUM_TOL:
        raise ValueError(
            f"probs rows must sum to 1 (within {_ROW_SUM_TOL}), but row {worst} sums to "
            f"{sums[worst]:.6g}; if these are logits or unnormalised scores pass "
            "from_logits=True, otherwise pass the model's softmax output"
        )


def _check_labels(labels: object, n: int, k: int) -> np.ndarray:
    lab = _to_numpy(labels)
    if lab.ndim != 1:
        raise ValueError(
            f"labels must be 1-D (one class index per sample), got shape {lab.shape}; "
            "for one-hot labels pass `labels.argmax(axis=1)`"
        )
    if not np.issubdtype(lab.dtype, np.integer):
        raise ValueError(
            f"labels must be integers (class indices), got dtype {lab.dtype}; "
            "convert with `labels.astype(int)` or `labels.long()`"
        )
    if lab.size != n:
        raise ValueError(
            f"length mismatch: labels has {lab.size} entries but probs has {n} rows; "
            "pass one label per sample"
        )
    if lab.size and (lab.min() < 0 or lab.max() >= k):
        raise ValueError(
            f"labels outside the class range [0, {k}): found min {lab.min()}, max {lab.max()}; "
            "labels must index the columns of probs"
        )
    return lab.astype(np.int64)


def check_probabilities(
    probs: object,
    labels: object | None = None,
    *,
    from_logits: bool = False,
    num_classes: int | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Validate (probabilities, labels) and return them as float64 / int64 numpy arrays.

    Args:
        probs: (N, K) softmax outputs, numpy array or torch tensor (any device).
        labels: optional (N,) integer class indices in [0, K).
        from_logits: treat ``probs`` as logits and apply a numerically stable
            softmax (``scipy.special.softmax``) along the class axis.
        num_classes: if given, the required K.

    Returns:
        ``(probs, labels)``: float64 (N, K) rows on the simplex, and int64 (N,)
        labels or None.

    Raises:
        ValueError: naming the problem and the fix — not 2-D, empty, NaN/inf,
            values outside [0, 1] or rows not summing to 1 within 1e-4 (suggests
            ``from_logits=True``), labels not 1-D integers, length mismatch, labels
            out of range.
    """
    arr = _check_prob_array(probs, num_classes)
    if from_logits:
        arr = scipy.special.softmax(arr, axis=1)
    else:
        _check_simplex(arr)
    lab = None if labels is None else _check_labels(labels, arr.shape[0], arr.shape[1])
    return arr, lab


def _checked(probs: object, labels: object) -> tuple[np.ndarray, np.ndarray]:
    if labels is None:
        raise ValueError("labels are required for this metric; pass the true class indices")
    return check_probabilities(probs, labels)  # type: ignore[return-value]


# --------------------------------------------------------------------------- metrics


def correctness(probs: object, labels: object) -> np.ndarray:
    """Prediction correctness ``1[argmax_i p_i == y]`` (Song & Mittal 2021, Sec. 3.2, I_corr).

    Members are more often classified correctly. Ties in argmax resolve to the
    lowest class index (numpy convention).

    Returns:
        float64 (N,) array of 1.0 / 0.0.
    """
    p, y = _checked(probs, labels)
    return (np.argmax(p, axis=1) == y).astype(np.float64)


def confidence(probs: object, labels: object) -> np.ndarray:
    """Confidence in the true class ``p_y`` (Song & Mittal 2021, Sec. 3.2, I_conf).

    The quantity ``t[y]`` whose distributions the K-S auditor compares (Liu &
    Tsaftaris 2020, Algorithm 1). Higher for members.

    Returns:
        float64 (N,) array in [0, 1].
    """
    p, y = _checked(probs, labels)
    return p[np.arange(p.shape[0]), y]


def entropy(probs: object, labels: object | None = None) -> np.ndarray:
    """Prediction entropy ``-sum_i p_i log p_i`` in nats, with ``0 log 0 = 0``.

    Song & Mittal 2021, Sec. 3.2 (I_entr). Lower for members. ``labels`` is
    accepted (and validated if given) only so that every metric shares the
    signature ``f(probs, labels)``.

    Returns:
        float64 (N,) array in [0, log K].
    """
    p, _ = check_probabilities(probs, labels)
    return scipy.special.entr(p).sum(axis=1)


def modified_entropy(probs: object, labels: object) -> np.ndarray:
    """Modified prediction entropy Mentr (Song & Mittal 2021, Sec. 3.2, Eq. for Mentr).

    ``Mentr(p, y) = -(1 - p_y) log(p_y) - sum_{i != y} p_i log(1 - p_i)``.

    Unlike the entropy, it uses the label: it is large both for uncertain
    predictions and for confident wrong ones. Lower for members. Inside the
    logarithms, ``p_y`` and ``1 - p_i`` are floored at
    ``MODIFIED_ENTROPY_EPS = 1e-30`` so that ``log(0)`` cannot occur; a
    prediction with ``p_y = 0`` therefore scores ``-log(1e-30) ~= 69.08`` for
    that term instead of +inf.

    Returns:
        float64 (N,) array, >= 0.
    """
    p, y = _checked(probs, labels)
    rows = np.arange(p.shape[0])
    p_y = p[rows, y]
    others = -p * np.log(np.maximum(1.0 - p, MODIFIED_ENTROPY_EPS))
    others[rows, y] = 0.0  # the sum runs over i != y
    return -(1.0 - p_y) * np.log(np.maximum(p_y, MODIFIED_ENTROPY_EPS)) + others.sum(axis=1)


# --------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class MembershipMetric:
    """A per-sample membership metric and its direction.

    Attributes:
        name: registry key.
        function: ``f(probs, labels) -> (N,) float64`` raw metric.
        higher_is_member: True if members tend to score higher.
    """

    name: str
    function: Callable[[object, object], np.ndarray]
    higher_is_member: bool


MEMBERSHIP_METRICS: dict[str, MembershipMetric] = {
    "correctness": MembershipMetric("correctness", correctness, True),
    "confidence": MembershipMetric("confidence", confidence, True),
    "entropy": MembershipMetric("entropy", entropy, False),
    "modified_entropy": MembershipMetric("modified_entropy", modified_entropy, False),
}


def membership_scores(
    probs: object,
    labels: object,
    metrics: Iterable[str] = tuple(MEMBERSHIP_METRICS),
) -> dict[str, np.ndarray]:
    """Per-sample membership scores, oriented so that HIGHER = MORE LIKELY MEMBER.

    Correctness and confidence are returned as is; entropy and modified entropy
    are NEGATED (members have low entropy). The result can go straight into
    :func:`monai_forget.stats.best_balanced_threshold` with the rule
    "member iff score >= threshold" (EMA, Huang et al. 2021, Step 1).

    Args:
        probs: (N, K) softmax outputs (numpy or torch).
        labels: (N,) integer class indices.
        metrics: names from :data:`MEMBERSHIP_METRICS`, in the desired order.

    Returns:
        ``{name: (N,) float64 scores}`` in the order of ``metrics``.

    Raises:
        ValueError: an unknown metric name, or invalid probabilities/labels.
    """
    names = list(metrics)
    unknown = [m for m in names if m not in MEMBERSHIP_METRICS]
    if unknown:
        raise ValueError(
            f"unknown membership metric(s) {unknown}; choose from {list(MEMBERSHIP_METRICS)}"
        )
    p, y = _checked(probs, labels)  # validate once; the metrics re-check cheaply
    out: dict[str, np.ndarray] = {}
    for name in names:
        metric = MEMBERSHIP_METRICS[name]
        raw = metric.function(p, y)
        out[name] = raw if metric.higher_is_member else -raw
    return out
