"""Pure statistics on arrays: the math behind the withdrawal auditors.

Everything here is float64 numpy/scipy, vectorised, and free of models, so each
function can be checked line by line against the paper it cites and against an
independent computation (scipy or brute force) in ``tests/test_stats.py``.

References:
    Liu & Tsaftaris, "Have you forgotten? A method to assess if machine learning
    models have forgotten data", MICCAI 2020 (ECDF, K-S distance: Eqs. 1-3).
    Huang, Li & Li, "EMA: Auditing Data Removal from Trained Models", 2021
    (balanced-accuracy thresholds, Step 1; two-sample test, Step 2).
    Hartley & Tsaftaris, "Unintended memorisation of unique features in neural
    networks", 2022 (KL divergence, Eq. 1).
"""

from __future__ import annotations

import math
from typing import Literal, NamedTuple

import numpy as np
import scipy.special
import scipy.stats

__all__ = [
    "TTestResult",
    "ThresholdResult",
    "auc_upper_bound",
    "benjamini_hochberg",
    "best_balanced_threshold",
    "best_balanced_threshold_exhaustive",
    "bonferroni",
    "ecdf",
    "kl_divergence",
    "ks_distance",
    "student_ttest",
    "welch_ttest",
]

Alternative = Literal["two-sided", "less", "greater"]
_ALTERNATIVES = ("two-sided", "less", "greater")


# --------------------------------------------------------------------------- input checks


def _as_sample(x: object, name: str, *, min_size: int = 1) -> np.ndarray:
    """Return ``x`` as a finite 1-D float64 array with at least ``min_size`` values."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(
            f"{name} must be a 1-D array of values, got shape {arr.shape}; "
            "flatten it (e.g. `x.ravel()`) or pass one sample per call"
        )
    if arr.size < min_size:
        raise ValueError(
            f"{name} has {arr.size} value(s) but at least {min_size} are needed; "
            "pass a larger sample"
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf values; remove or impute them before testing")
    return arr


# --------------------------------------------------------------------------- ECDF and K-S


def ecdf(sample: object, at: object) -> np.ndarray:
    """Empirical CDF of ``sample`` evaluated at the points ``at``.

    Implements Eq. 1 of Liu & Tsaftaris (2020): ``F_n(x) = #{s_i <= x} / n``.

    Args:
        sample: 1-D sample ``s_1..s_n`` (finite values, n >= 1).
        at: points at which to evaluate ``F_n`` (any shape).

    Returns:
        float64 array of the same shape as ``at`` with values in [0, 1].
    """
    s = np.sort(_as_sample(sample, "sample"))
    x = np.asarray(at, dtype=np.float64)
    # side="right" counts the values equal to x, as the "<=" in Eq. 1 requires.
    return np.searchsorted(s, x, side="right") / s.size


def ks_distance(a: object, b: object) -> float:
    """Exact two-sample Kolmogorov-Smirnov distance ``sup_x |F_a(x) - F_b(x)|``.

    Implements Eqs. 2-3 of Liu & Tsaftaris (2020) with ``scipy.stats.ks_2samp``, whose
    statistic evaluates both ECDFs (Eq. 1) at every point of the pooled sample, where the
    supremum of two step functions is attained: exact, ties included. Only the statistic
    is used, so the cheap asymptotic p-value method is asked for.

    Args:
        a: first 1-D sample (finite, non-empty).
        b: second 1-D sample (finite, non-empty).

    Returns:
        The distance in [0, 1].
    """
    a = _as_sample(a, "a")
    b = _as_sample(b, "b")
    with np.errstate(divide="ignore"):  # the unused p-value divides by 0 for 1-value samples
        return float(scipy.stats.ks_2samp(a, b, method="asymp").statistic)


# --------------------------------------------------------------------------- t-tests


class TTestResult(NamedTuple):
    """Result of a two-sample t-test (same fields as scipy's, as plain floats)."""

    statistic: float
    pvalue: float
    df: float


def _check_alternative(alternative: str) -> None:
    if alternative not in _ALTERNATIVES:  # stats imports nothing of the package
        raise ValueError(f"alternative must be one of {_ALTERNATIVES}, got {alternative!r}")


def _mean_var(x: np.ndarray) -> tuple[float, float]:
    """Mean and unbiased variance; exactly (x[0], 0.0) for a constant sample.

    A constant sample such as EMA's all-ones vector must have variance exactly 0
    (floating-point averaging can otherwise leave ~1e-33 and a spurious huge t).
    """
    if np.all(x == x[0]):
        return float(x[0]), 0.0
    return float(np.mean(x)), float(np.var(x, ddof=1))


def _t_pvalue(t: float, df: float, alternative: str) -> float:
    """p-value of statistic ``t`` under Student's t with ``df`` degrees of freedom."""
    if alternative == "less":
        return float(scipy.stats.t.cdf(t, df))
    if alternative == "greater":
        return float(scipy.stats.t.sf(t, df))
    return float(min(1.0, 2.0 * scipy.stats.t.sf(abs(t), df)))


def _degenerate_result(mean_a: float, mean_b: float, df: float, alternative: str) -> TTestResult:
    """Both samples constant: the test is decided by the means alone.

    Equal means: no evidence of a difference (t = 0, p = 1). Different means:
    infinite evidence in the direction of ``mean_a - mean_b`` (t = +/-inf), so
    p = 0 for the two-sided test and the consistent one-sided test, p = 1 for the
    inconsistent one. scipy returns NaN here.
    """
    if mean_a == mean_b:
        return TTestResult(0.0, 1.0, df)
    t = np.inf if mean_a > mean_b else -np.inf
    consistent = alternative == "two-sided" or (alternative == "greater") == (t > 0)
    return TTestResult(float(t), 0.0 if consistent else 1.0, df)


def _two_sample_t(a: object, b: object, alternative: str, *, pooled: bool) -> TTestResult:
    """Shared body of the Student (``pooled``) and Welch t-tests."""
    _check_alternative(alternative)
    a = _as_sample(a, "a", min_size=2)
    b = _as_sample(b, "b", min_size=2)
    (ma, va), (mb, vb) = _mean_var(a), _mean_var(b)
    na, nb = a.size, b.size
    if pooled:
        df = float(na + nb - 2)
        variance = ((na - 1) * va + (nb - 1) * vb) / df * (1.0 / na + 1.0 / nb)
    else:
        sa, sb = va / na, vb / nb
        variance = sa + sb
        df = variance**2 / (sa**2 / (na - 1) + sb**2 / (nb - 1)) if variance else float("nan")
    if variance == 0.0:
        return _degenerate_result(ma, mb, df, alternative)
    t = (ma - mb) / np.sqrt(variance)
    return TTestResult(float(t), _t_pvalue(t, df, alternative), float(df))


def student_ttest(a: object, b: object, alternative: Alternative = "two-sided") -> TTestResult:
    """Two-sample Student t-test with pooled (equal) variance.

    ``t = (mean_a - mean_b) / sqrt(s_p^2 (1/n_a + 1/n_b))`` with
    ``s_p^2 = ((n_a-1) s_a^2 + (n_b-1) s_b^2) / (n_a + n_b - 2)`` and
    ``df = n_a + n_b - 2``. This is the test of EMA's public code (Huang et al.
    2021, Step 2); it matches ``scipy.stats.ttest_ind(a, b, equal_var=True)``.

    Degenerate case (scipy gives NaN): when both samples are constant, the
    result is ``t = 0, p = 1`` for equal values, else ``t = +/-inf`` with p = 0
    for the two-sided and the sign-consistent one-sided alternative and p = 1 for
    the other one-sided alternative. ``df`` stays ``n_a + n_b - 2``.

    Args:
        a: first 1-D sample, at least 2 finite values.
        b: second 1-D sample, at least 2 finite values.
        alternative: "two-sided", "less" (mean_a < mean_b) or "greater".

    Returns:
        TTestResult(statistic, pvalue, df).

    Raises:
        ValueError: fewer than 2 values, NaN/inf, or an unknown alternative.
    """
    return _two_sample_t(a, b, alternative, pooled=True)


def welch_ttest(a: object, b: object, alternative: Alternative = "two-sided") -> TTestResult:
    """Two-sample Welch t-test (unequal variances, Welch-Satterthwaite df).

    ``t = (mean_a - mean_b) / sqrt(s_a^2/n_a + s_b^2/n_b)``,
    ``df = (s_a^2/n_a + s_b^2/n_b)^2 / ((s_a^2/n_a)^2/(n_a-1) + (s_b^2/n_b)^2/(n_b-1))``.
    EMA's Step 2 (Huang et al. 2021) compares the membership vector with an
    all-ones vector, whose variance is 0; Welch then
    reduces to a one-sample test of the other sample (df = n - 1) and is
    well-defined. Matches ``scipy.stats.ttest_ind(a, b, equal_var=False)``.

    Degenerate case (scipy gives NaN): both samples constant → same rule as
    :func:`student_ttest` (t = 0, p = 1 for equal values; else t = +/-inf, p = 0
    or 1 by alternative), and ``df`` is NaN because Welch-Satterthwaite is 0/0.
    Arguments, result and errors: as :func:`student_ttest`.
    """
    return _two_sample_t(a, b, alternative, pooled=False)


# --------------------------------------------------------------------------- thresholds


class ThresholdResult(NamedTuple):
    """Best threshold for the rule "member iff score >= threshold" and its balanced accuracy."""

    threshold: float
    balanced_accuracy: float


def _threshold_inputs(member_scores: object, nonmember_scores: object):
    members = np.asarray(member_scores, dtype=np.float64).ravel()
    nonmembers = np.asarray(nonmember_scores, dtype=np.float64).ravel()
    for name, arr in (("member_scores", members), ("nonmember_scores", nonmembers)):
        if arr.size == 0:
            raise ValueError(
                f"{name} is empty; a balanced-accuracy threshold needs at least one "
                "member and one non-member score"
            )
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} contains NaN or inf; remove or clip those scores first")
    return members, nonmembers


def _candidates(members: np.ndarray, nonmembers: np.ndarray) -> np.ndarray:
    """Every distinct observed score, ascending, then +inf (calls nothing a member)."""
    return np.append(np.unique(np.concatenate([members, nonmembers])), np.inf)


def _balanced_accuracy(tp, tn, n_members: int, n_nonmembers: int):
    """0.5 * (TPR + TNR) from integer counts; shared so both searches give identical floats."""
    return 0.5 * (np.float64(tp) / n_members + np.float64(tn) / n_nonmembers)


def best_balanced_threshold(member_scores: object, nonmember_scores: object) -> ThresholdResult:
    """Threshold maximising balanced accuracy, from one ROC sweep (O(n log n)).

    EMA, Huang, Li & Li (2021), Step 1: a per-sample metric is turned into a
    membership decision "member iff score >= threshold", with the threshold chosen
    on calibration data to maximise ``0.5 * (TPR + TNR)``. Candidates are every
    distinct observed score plus +inf; ties go to the LARGEST maximising
    threshold (the most conservative rule). Scores must be oriented so that higher
    means more likely member (see :func:`monai_forget.scores.membership_scores`).

    ``sklearn.metrics.roc_curve`` (with ``drop_intermediate=False``) gives the TPR and
    FPR of the rule ``score >= t`` at every distinct score, in decreasing order, led by
    ``t = +inf``. The rates are turned back into integer counts (exact: they are
    ``count / total``), so the balanced accuracy is the same float the exhaustive
    search computes.

    Args:
        member_scores: scores of samples the model was trained on (any shape, flattened).
        nonmember_scores: scores of held-out samples.

    Returns:
        ThresholdResult(threshold, balanced_accuracy).

    Raises:
        ValueError: an empty set, or NaN/inf scores.
    """
    from sklearn.metrics import roc_curve

    members, nonmembers = _threshold_inputs(member_scores, nonmember_scores)
    n_m, n_n = members.size, nonmembers.size
    truth = np.concatenate([np.ones(n_m, dtype=np.int8), np.zeros(n_n, dtype=np.int8)])
    fpr, tpr, cand = roc_curve(
        truth, np.concatenate([members, nonmembers]), drop_intermediate=False
    )
    tp = np.rint(tpr * n_m).astype(np.int64)  # members >= t
    tn = n_n - np.rint(fpr * n_n).astype(np.int64)  # non-members < t
    ba = _balanced_accuracy(tp, tn, n_m, n_n)
    best = int(np.argmax(ba))  # candidates descend: the first maximiser is the largest
    return ThresholdResult(float(cand[best]), float(ba[best]))


def best_balanced_threshold_exhaustive(
    member_scores: object, nonmember_scores: object
) -> ThresholdResult:
    """Reference brute-force search for :func:`best_balanced_threshold`.

    Loops in Python over every candidate and recounts TP/TN with numpy
    (O(n^2) work). Same candidates, same rule, same tie-break (largest
    threshold) and the same balanced-accuracy formula on integer counts, so the
    result must be identical float for float. Used by tests and the benchmark.
    """
    members, nonmembers = _threshold_inputs(member_scores, nonmember_scores)
    best = ThresholdResult(float("nan"), -1.0)
    for t in _candidates(members, nonmembers):
        tp = int(np.count_nonzero(members >= t))
        tn = int(np.count_nonzero(nonmembers < t))
        ba = float(_balanced_accuracy(tp, tn, members.size, nonmembers.size))
        if ba >= best.balanced_accuracy:  # ">=" with ascending t keeps the largest
            best = ThresholdResult(float(t), ba)
    return best


# --------------------------------------------------------------------------- multiple testing


def _as_pvalues(pvalues: object) -> np.ndarray:
    p = np.asarray(pvalues, dtype=np.float64)
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"pvalues must be a non-empty 1-D array, got shape {p.shape}")
    if not np.all((p >= 0.0) & (p <= 1.0)):
        raise ValueError("pvalues must lie in [0, 1] (NaN is not allowed); check their source")
    return p


def benjamini_hochberg(pvalues: object) -> np.ndarray:
    """Benjamini-Hochberg (1995) adjusted p-values (false discovery rate control).

    Delegates to ``scipy.stats.false_discovery_control(method="bh")``: reject the
    hypotheses whose adjusted p-value is <= the target FDR.

    Args:
        pvalues: 1-D array of p-values in [0, 1].

    Returns:
        Adjusted p-values, same order as the input.
    """
    return scipy.stats.false_discovery_control(_as_pvalues(pvalues), method="bh")


def bonferroni(pvalues: object) -> np.ndarray:
    """Bonferroni-adjusted p-values ``min(1, m * p)`` for ``m`` tests (family-wise error)."""
    p = _as_pvalues(pvalues)
    return np.minimum(1.0, p.size * p)


# --------------------------------------------------------------------------- divergences


def kl_divergence(p: object, q: object, axis: int = -1) -> np.ndarray:
    """Kullback-Leibler divergence ``KL(p || q) = sum_i p_i log(p_i / q_i)`` along ``axis``.

    Used by the memorisation score of Hartley & Tsaftaris (2022), Eq. 1, between
    the softmax outputs on clean and feature-patched probes. Natural log (nats);
    terms with ``p_i = 0`` contribute 0, and ``q_i = 0 < p_i`` gives +inf
    (``scipy.special.rel_entr`` conventions). Inputs are not renormalised.

    Args:
        p: probability vectors (broadcastable with ``q``).
        q: reference probability vectors.
        axis: axis holding the distribution (default: last, i.e. row-wise).

    Returns:
        float64 array of divergences with ``axis`` removed.
    """
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if np.any(p < 0) or np.any(q < 0) or not (np.all(np.isfinite(p)) and np.all(np.isfinite(q))):
        raise ValueError("p and q must be finite, non-negative probability vectors")
    return np.sum(scipy.special.rel_entr(p, q), axis=axis)


def auc_upper_bound(auc: float, n_positive: int, n_negative: int, alpha: float = 0.05) -> float:
    """One-sided ``1 - alpha`` upper confidence bound of an AUC, clipped to 1.

    The standard error is Hanley & McNeil's (1982, "The meaning and use of the area under
    a receiver operating characteristic (ROC) curve", Radiology 143, Eq. 1), with their
    ``Q1 = A / (2 - A)`` and ``Q2 = 2 A^2 / (1 + A)``:

        SE(A)^2 = [A (1 - A) + (n_p - 1)(Q1 - A^2) + (n_n - 1)(Q2 - A^2)] / (n_p n_n).

    The bound ``A + z_{1-alpha} SE(A)`` (a normal approximation, clipped to 1) is ours;
    its coverage is checked by simulation in tests/test_stats.py.

    Raises:
        ValueError: an AUC outside [0, 1], fewer than one sample on a side, or alpha
            outside (0, 1).
    """
    a = float(auc)
    if not 0.0 <= a <= 1.0 or n_positive < 1 or n_negative < 1 or not 0.0 < alpha < 1.0:
        raise ValueError(
            f"need an AUC in [0, 1], samples on both sides and alpha in (0, 1), got {a}, "
            f"{n_positive}, {n_negative}, {alpha}"
        )
    q1, q2 = a / (2.0 - a), 2.0 * a * a / (1.0 + a)
    var = (a * (1.0 - a) + (n_positive - 1) * (q1 - a * a) + (n_negative - 1) * (q2 - a * a)) / (
        n_positive * n_negative
    )
    return min(1.0, a + float(scipy.stats.norm.ppf(1.0 - alpha)) * math.sqrt(max(var, 0.0)))
