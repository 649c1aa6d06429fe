"""Do D_Q, the known members and the known non-members look alike to the reference
models? A target-free check that makes the reference-model audit "inconclusive" when
they do not (:func:`shift_check`).

The reference models never trained on any of the three sets, so their outputs on them
come from one distribution when the audit's assumption holds. Each comparison with the
known non-members combines a K-S test of the reference models' mean true-class signal
with Hotelling's T^2 test (Hotelling 1931) of their confusion profile, compared within
labels (ours; measured in benchmarks/audit_calibration.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.stats

__all__ = [
    "SHIFT_LEVEL",
    "ShiftCheck",
    "hotelling_pvalue",
    "shift_check",
    "shift_features",
    "shift_pvalue",
    "shift_signal",
]

_TINY = np.finfo(np.float64).tiny

#: A shift-check p-value below it makes the audit inconclusive (each comparison's false
#: alarms stay near 1 %: measured on same-source D_Q of the development seeds).
SHIFT_LEVEL = 0.01


def shift_signal(score: str, signal: np.ndarray) -> np.ndarray:
    """What the shift check compares of one model's signal: the log true-class
    probability for ``"rmia"`` (the mean of a probability hides how much harder a source
    is: measured, the log caught other-site D_Q far more often), the logit-scaled
    confidence itself for ``"lira"``."""
    signal = np.asarray(signal, dtype=np.float64)
    return np.log(np.maximum(signal, _TINY)) if score == "rmia" else signal


@dataclass(frozen=True)
class ShiftCheck:
    """Do the compared sets look alike to the reference models? (target-free)

    The reference models never trained on D_Q, the known members or the known
    non-members, so their outputs on the three sets must come from one distribution
    when the audit's assumption holds: the known non-members are like D_Q, and the known
    members like the non-members. A shift (e.g. low-quality or other-site non-members)
    makes any comparison of the target's outputs meaningless, so the audit answers
    "inconclusive". Each p-value combines two tests (:func:`shift_check`).

    Attributes:
        pvalue_query: D_Q vs known non-members.
        pvalue_members: known members vs known non-members.
        level: a p-value below it is a shift.
    """

    pvalue_query: float
    pvalue_members: float
    level: float

    @property
    def shifted(self) -> bool:
        return min(self.pvalue_query, self.pvalue_members) < self.level


def shift_features(score: str, signals: np.ndarray, probs: np.ndarray | None = None) -> np.ndarray:
    """``(N, F)`` what the shift check compares, from ``(K, N)`` reference signals and
    optionally their ``(K, N, C)`` softmax outputs.

    Column 0 is the reference models' mean :func:`shift_signal`. With ``probs`` and more
    than two classes, the mean log-probability of every class follows: the reference
    models' confusion profile (with two classes it holds nothing column 0 does not).
    Ours, measured on the development seeds: MNIST digits of other writers, which the
    1-D signal let through in most audits of |D_Q| 200, differ in that profile (a
    domain classifier on it reaches AUC 0.62); compared within each label
    (:func:`shift_check`), it flags 62-85 % of such D_Q of 50 and all of 200.
    """
    columns = [shift_signal(score, signals).mean(axis=0)[:, None]]
    if probs is not None and np.shape(probs)[-1] > 2:
        log_p = np.log(np.maximum(np.asarray(probs, dtype=np.float64), _TINY))
        columns.append(log_p.mean(axis=0))
    return np.concatenate(columns, axis=1)


def _within_label(values: np.ndarray, labels: np.ndarray, reference: np.ndarray,
                  reference_labels: np.ndarray) -> np.ndarray:  # fmt: skip
    """``values`` less the mean of ``reference`` samples of the same label (the overall
    mean for a label ``reference`` lacks): removes what differs only because two sets
    hold the labels in other proportions."""
    centred = values - reference.mean(axis=0)
    for label in np.unique(labels):
        of_label = reference_labels == label
        if of_label.any():
            centred[labels == label] = values[labels == label] - reference[of_label].mean(axis=0)
    return centred


def _normal_scores(values: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Each column mapped to standard normal scores through ``reference``'s empirical
    CDF (mid-ranks): robust to the heavy tails of log-probabilities."""
    out = np.empty(values.shape, dtype=np.float64)
    for j in range(values.shape[1]):
        ref = np.sort(reference[:, j])
        low = np.searchsorted(ref, values[:, j], "left")
        ranks = (low + np.searchsorted(ref, values[:, j], "right")) / 2
        out[:, j] = scipy.stats.norm.ppf((ranks + 0.5) / (ref.size + 1))
    return out


def hotelling_pvalue(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sample Hotelling T^2 test of equal means of ``(n_a, F)`` and ``(n_b, F)``
    (pooled covariance, F distribution; Hotelling 1931)."""
    n_a, n_b, f = len(a), len(b), a.shape[1]
    dof = n_a + n_b - f - 1
    if dof < 1:
        return 1.0
    diff = a.mean(axis=0) - b.mean(axis=0)
    pooled = (
        (n_a - 1) * np.atleast_2d(np.cov(a, rowvar=False))
        + (n_b - 1) * np.atleast_2d(np.cov(b, rowvar=False))
    ) / (n_a + n_b - 2)
    t2 = diff @ np.linalg.lstsq(pooled, diff, rcond=None)[0] / (1 / n_a + 1 / n_b)
    return float(scipy.stats.f.sf(t2 * dof / (f * (n_a + n_b - 2)), f, dof))


def shift_pvalue(
    values: np.ndarray,
    nonmembers: np.ndarray,
    labels: tuple[np.ndarray, np.ndarray] | None = None,
) -> float:
    """p-value of "``values`` and the known ``nonmembers`` look alike to the reference
    models", from their :func:`shift_features` (``(N,)`` or ``(N, F)``; ``labels``: the
    two sets' labels, to compare the features within labels).

    A two-sample K-S test of column 0 (any change of its distribution) and Hotelling's
    T^2 of every column's normal scores, each column first centred on the non-members'
    mean of the sample's label (:func:`hotelling_pvalue`; a shift of the confusion
    profile), combined by Bonferroni: ``min(1, 2 min(p_KS, p_T2))``.
    """
    raw = [np.asarray(v, dtype=np.float64) for v in (values, nonmembers)]
    raw = [v.reshape(len(v), -1) for v in raw]
    centred = raw
    if labels is not None:
        centred = [_within_label(v, np.asarray(y), raw[1], np.asarray(labels[1]))
                   for v, y in zip(raw, labels, strict=True)]  # fmt: skip
    ks = scipy.stats.ks_2samp(raw[0][:, 0], raw[1][:, 0], method="asymp").pvalue
    t2 = hotelling_pvalue(
        _normal_scores(centred[0], centred[1]), _normal_scores(centred[1], centred[1])
    )
    return float(min(1.0, 2 * min(ks, t2)))


def shift_check(
    query: np.ndarray,
    members: np.ndarray,
    nonmembers: np.ndarray,
    level: float = SHIFT_LEVEL,
    labels: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> ShiftCheck:
    """:class:`ShiftCheck` of the :func:`shift_features` of the three sets, D_Q and the
    known members each compared with the known non-members (:func:`shift_pvalue`;
    ``labels``: each set's labels)."""

    def pvalue(values: np.ndarray, k: int) -> float:
        pair = None if labels is None else (labels[k], labels[2])
        return shift_pvalue(values, nonmembers, pair)

    return ShiftCheck(pvalue(query, 0), pvalue(members, 1), level)
