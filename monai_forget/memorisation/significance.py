"""One-tailed tests that the unique feature moves the model more than random features.

Hartley & Tsaftaris (2022), Sec. 2.3: with d_u^i = KL(f(x_c^i) || f(x_u^i)) and
d_r^i = KL(f(x_c^i) || f(x_r^i)), the model is taken to have memorised z_u when
mean(d_u) > mean(d_r) significantly. The null hypothesis is "z_u moves the outputs no
more than a random feature of the same size"; every test here is one-tailed
(alternative: d_u larger).

Tests offered:

- ``"student"`` — **the paper's test**: a one-tailed two-sample t-test between the
  sets {d_u^i} and {d_r^i}. The paper does not state a variance assumption; we use
  Student's pooled-variance test (the classic default, ``scipy.stats.ttest_ind``).
- ``"welch"`` — the same two-sample comparison without the equal-variance assumption.
- ``"paired"`` — a one-tailed one-sample t-test on the differences d_u^i - d_r^i. Both
  divergences of probe i share the clean probe x_c^i, so the samples are paired;
  pairing removes the probe-to-probe variation and is usually more powerful.
- ``"wilcoxon"`` — the Wilcoxon signed-rank test on the same differences (rank-based:
  no normality assumption; KL divergences are skewed and heavy-tailed).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.stats

from monai_forget.defaults import MEMORISATION_PAPER_TEST, MEMORISATION_TESTS
from monai_forget.stats import student_ttest, welch_ttest

__all__ = ["PAPER_TEST", "TESTS", "OneTailedResult", "one_tailed_test", "paired_ttest"]

#: Every test offered, by name.
TESTS: tuple[str, ...] = MEMORISATION_TESTS
#: The test used by Hartley & Tsaftaris (2022), Sec. 2.3.
PAPER_TEST = MEMORISATION_PAPER_TEST


class OneTailedResult(NamedTuple):
    """One test's result: statistic, one-tailed p-value and degrees of freedom (t-tests)."""

    statistic: float
    pvalue: float
    df: float | None = None


def _diffs(d_unique: np.ndarray, d_random: np.ndarray) -> np.ndarray:
    if d_unique.shape != d_random.shape:
        raise ValueError(
            f"paired tests need one d_u and one d_r per probe; got {d_unique.size} and "
            f"{d_random.size} values"
        )
    return d_unique - d_random


def paired_ttest(d_unique: object, d_random: object) -> OneTailedResult:
    """One-tailed paired t-test of mean(d_u - d_r) > 0.

    ``t = mean(D) / (s_D / sqrt(n))`` with ``D_i = d_u^i - d_r^i``, ``s_D`` the sample
    standard deviation (ddof 1) and ``df = n - 1``; ``p = P(T_{n-1} >= t)``. Matches
    ``scipy.stats.ttest_rel(d_u, d_r, alternative="greater")``. When every difference is
    equal (``s_D = 0``, scipy gives NaN): ``t = 0, p = 1`` if they are all 0, otherwise
    ``t = +/-inf`` and ``p = 0`` (positive) or ``1`` (negative).
    """
    diff = _diffs(_sample(d_unique, "d_unique"), _sample(d_random, "d_random"))
    n = diff.size
    df = float(n - 1)
    if np.all(diff == diff[0]):
        if diff[0] == 0:
            return OneTailedResult(0.0, 1.0, df)
        return OneTailedResult(float(np.sign(diff[0]) * np.inf), float(diff[0] < 0), df)
    t = float(np.mean(diff) / (np.std(diff, ddof=1) / np.sqrt(n)))
    return OneTailedResult(t, float(scipy.stats.t.sf(t, df)), df)


def _wilcoxon(d_unique: np.ndarray, d_random: np.ndarray) -> OneTailedResult:
    """One-tailed Wilcoxon signed-rank test of d_u - d_r > 0 (scipy; zero differences dropped).

    The statistic is the sum of the ranks of the positive differences (scipy's ``r_plus``).
    With every difference 0 there is no evidence: statistic 0, p = 1.
    """
    diff = _diffs(d_unique, d_random)
    if not np.any(diff):
        return OneTailedResult(0.0, 1.0)
    res = scipy.stats.wilcoxon(diff, zero_method="wilcox", alternative="greater")
    return OneTailedResult(float(res.statistic), float(res.pvalue))


def _sample(x: object, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1 or arr.size < 2:
        raise ValueError(
            f"{name} must be a 1-D array of at least 2 divergences (one per probe), got "
            f"shape {arr.shape}; pass at least 2 probes"
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError(
            f"{name} has NaN or inf divergences: a probability of exactly 0 where the clean "
            "output is positive; pass logits (from_logits=True) rather than rounded "
            "probabilities"
        )
    return arr


def one_tailed_test(d_unique: object, d_random: object, test: str = PAPER_TEST) -> OneTailedResult:
    """Run ``test`` (one of :data:`TESTS`) with the alternative mean(d_u) > mean(d_r).

    Args:
        d_unique: divergences d_u^i, one per probe.
        d_random: divergences d_r^i, one per probe (same order for paired tests).
        test: ``"student"`` (the paper's), ``"welch"``, ``"paired"`` or ``"wilcoxon"``.

    Raises:
        ValueError: an unknown test, fewer than 2 values, NaN/inf, or unequal lengths
            for a paired test.
    """
    if test not in TESTS:
        raise ValueError(f"unknown test {test!r}; choose one of {TESTS}")
    du = _sample(d_unique, "d_unique")
    dr = _sample(d_random, "d_random")
    if test == "student":
        res = student_ttest(du, dr, alternative="greater")
        return OneTailedResult(res.statistic, res.pvalue, res.df)
    if test == "welch":
        res = welch_ttest(du, dr, alternative="greater")
        return OneTailedResult(res.statistic, res.pvalue, res.df)
    if test == "paired":
        return paired_ttest(du, dr)
    return _wilcoxon(du, dr)
