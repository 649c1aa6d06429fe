"""Statistics against scipy, brute force and hand-worked examples."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

from monai_forget.stats import (
    TTestResult,
    benjamini_hochberg,
    best_balanced_threshold,
    best_balanced_threshold_exhaustive,
    bonferroni,
    ecdf,
    kl_divergence,
    ks_distance,
    student_ttest,
    welch_ttest,
)

RNG_SEEDS = range(40)


def _draw(rng: np.random.Generator, kind: str, n: int) -> np.ndarray:
    if kind == "continuous":
        return rng.normal(rng.uniform(-1, 1), rng.uniform(0.5, 2), size=n)
    if kind == "discrete":  # heavy ties
        return rng.integers(0, 4, size=n).astype(float)
    return rng.choice([0.0, 0.25, 0.5, 1.0], size=n)  # few levels, like confidences


# --------------------------------------------------------------------------- ECDF / K-S


def test_ecdf_hand_worked():
    # sample {1, 2, 2, 4}: F(0)=0, F(1)=1/4, F(1.5)=1/4, F(2)=3/4, F(3)=3/4, F(4)=1, F(9)=1
    got = ecdf([4, 2, 1, 2], [0, 1, 1.5, 2, 3, 4, 9])
    np.testing.assert_array_equal(got, [0, 0.25, 0.25, 0.75, 0.75, 1, 1])


def test_ks_hand_worked():
    # a={1,2,3}, b={2,3,4,5}: at x=2, F_a=2/3, F_b=1/4 -> 5/12; at x=3, 1 vs 1/2 -> 1/2 (max)
    assert ks_distance([1, 2, 3], [2, 3, 4, 5]) == pytest.approx(0.5, abs=0)
    assert ks_distance([1, 2, 3], [1, 2, 3]) == 0.0
    assert ks_distance([0, 0], [1, 1]) == 1.0


@pytest.mark.parametrize("kind", ["continuous", "discrete", "levels"])
def test_ks_equals_scipy_seeded(kind):
    for seed in RNG_SEEDS:
        rng = np.random.default_rng(seed)
        a = _draw(rng, kind, int(rng.integers(1, 60)))
        b = _draw(rng, kind, int(rng.integers(1, 90)))
        assert ks_distance(a, b) == pytest.approx(scipy.stats.ks_2samp(a, b).statistic, abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(-3, 3), min_size=1, max_size=30),
    st.lists(st.floats(-3, 3, allow_nan=False), min_size=1, max_size=30),
)
def test_ks_equals_scipy_hypothesis(a, b):
    assert ks_distance(a, b) == pytest.approx(scipy.stats.ks_2samp(a, b).statistic, abs=1e-12)


def test_ks_rejects_bad_input():
    with pytest.raises(ValueError, match="NaN or inf"):
        ks_distance([1.0, np.nan], [1.0])
    with pytest.raises(ValueError, match="at least 1"):
        ks_distance([], [1.0])
    with pytest.raises(ValueError, match="1-D"):
        ks_distance([[1.0, 2.0]], [1.0])


# --------------------------------------------------------------------------- t-tests


@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
@pytest.mark.parametrize(("ours", "equal_var"), [(student_ttest, True), (welch_ttest, False)])
def test_ttests_equal_scipy(ours, equal_var, alternative):
    for seed in RNG_SEEDS:
        rng = np.random.default_rng(seed)
        a = _draw(rng, "continuous", int(rng.integers(2, 40)))
        b = _draw(rng, "levels", int(rng.integers(2, 40)))
        if np.all(b == b[0]):
            continue
        want = scipy.stats.ttest_ind(a, b, equal_var=equal_var, alternative=alternative)
        got = ours(a, b, alternative=alternative)
        assert isinstance(got, TTestResult)
        np.testing.assert_allclose(
            [got.statistic, got.pvalue, got.df], [want.statistic, want.pvalue, want.df], rtol=1e-10
        )


@pytest.mark.filterwarnings("ignore:Precision loss:RuntimeWarning")  # scipy, on the ones
@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
def test_welch_with_one_constant_sample_equals_scipy_and_one_sample_test(alternative):
    rng = np.random.default_rng(3)
    membership = (rng.random(25) < 0.7).astype(float)  # EMA: 0/1 vector vs all ones
    ones = np.ones(30)
    got = welch_ttest(membership, ones, alternative=alternative)
    want = scipy.stats.ttest_ind(membership, ones, equal_var=False, alternative=alternative)
    one = scipy.stats.ttest_1samp(membership, 1.0, alternative=alternative)
    np.testing.assert_allclose([got.statistic, got.pvalue], [want.statistic, want.pvalue])
    np.testing.assert_allclose([got.statistic, got.pvalue, got.df], [one.statistic, one.pvalue, 24])


def test_constant_sample_variance_is_exactly_zero():
    # 0.1 averaged is not exactly 0.1 in floating point; both constant -> degenerate rule
    got = welch_ttest([0.1] * 10, [0.1] * 7)
    assert (got.statistic, got.pvalue) == (0.0, 1.0)
    assert math.isnan(got.df)


@pytest.mark.parametrize("test", [student_ttest, welch_ttest])
def test_degenerate_both_constant(test):
    for alt in ("two-sided", "less", "greater"):
        r = test(np.ones(5), np.ones(8), alternative=alt)
        assert (r.statistic, r.pvalue) == (0.0, 1.0)
    # mean_a < mean_b: t = -inf; "less" is consistent, "greater" is not
    expected = {"two-sided": 0.0, "less": 0.0, "greater": 1.0}
    for alt, p in expected.items():
        r = test(np.zeros(5), np.ones(8), alternative=alt)
        assert r.statistic == -np.inf and r.pvalue == p
    expected = {"two-sided": 0.0, "less": 1.0, "greater": 0.0}
    for alt, p in expected.items():
        r = test(np.ones(5), np.zeros(8), alternative=alt)
        assert r.statistic == np.inf and r.pvalue == p
    assert student_ttest(np.ones(5), np.ones(8)).df == 11.0


@pytest.mark.parametrize("test", [student_ttest, welch_ttest])
def test_ttest_bad_input(test):
    with pytest.raises(ValueError, match="at least 2"):
        test([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="NaN or inf"):
        test([1.0, np.inf], [1.0, 2.0])
    with pytest.raises(ValueError, match="alternative"):
        test([1.0, 2.0], [1.0, 2.0], alternative="bigger")


# --------------------------------------------------------------------------- thresholds


def test_threshold_hand_worked():
    # members {3, 2, 2}, non-members {1, 2}. Candidates 1, 2, 3, inf:
    # t=1: TPR 3/3, TNR 0/2 -> 0.5; t=2: TPR 3/3, TNR 1/2 -> 0.75;
    # t=3: TPR 1/3, TNR 2/2 -> 2/3; t=inf: TPR 0, TNR 1 -> 0.5.
    r = best_balanced_threshold([3, 2, 2], [1, 2])
    assert r.threshold == 2.0
    assert r.balanced_accuracy == 0.5 * (3 / 3 + 1 / 2)


def test_threshold_ties_take_largest_and_inf_candidate():
    # members {1}, non-members {2}: t=1 -> 0.5, t=2 -> 0.5, inf -> 0.5; largest is inf
    r = best_balanced_threshold([1.0], [2.0])
    assert r == (np.inf, 0.5)
    # perfectly separable: t=2 gives BA 1; t=3 only TPR 1/2
    assert best_balanced_threshold([2.0, 3.0], [0.0, 1.0]) == (2.0, 1.0)
    # members {2, 3}, non-members {1, 2}: t=2 -> 0.5*(1 + 1/2) = 0.75,
    # t=3 -> 0.5*(1/2 + 1) = 0.75: a tie, resolved to the larger threshold 3
    r = best_balanced_threshold([2.0, 3.0], [1.0, 2.0])
    assert r.threshold == 3.0 and r.balanced_accuracy == 0.75


@pytest.mark.parametrize("kind", ["continuous", "discrete", "levels"])
def test_threshold_equals_exhaustive(kind):
    for seed in RNG_SEEDS:
        rng = np.random.default_rng(seed)
        n_m, n_n = int(rng.integers(1, 200)), int(rng.integers(1, 15))  # unbalanced
        if seed % 2:
            n_m, n_n = n_n, n_m
        m = _draw(rng, kind, n_m) + rng.uniform(0, 1)
        nm = _draw(rng, kind, n_n)
        assert best_balanced_threshold(m, nm) == best_balanced_threshold_exhaustive(m, nm)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 5), min_size=1, max_size=25),
    st.lists(st.integers(0, 5), min_size=1, max_size=25),
)
def test_threshold_equals_exhaustive_hypothesis(m, nm):
    assert best_balanced_threshold(m, nm) == best_balanced_threshold_exhaustive(m, nm)


def test_threshold_does_not_mutate_input():
    m = np.array([3.0, 1.0, 2.0])
    best_balanced_threshold(m, np.array([0.0, 5.0]))
    np.testing.assert_array_equal(m, [3.0, 1.0, 2.0])


@pytest.mark.parametrize("fn", [best_balanced_threshold, best_balanced_threshold_exhaustive])
def test_threshold_bad_input(fn):
    with pytest.raises(ValueError, match="member_scores is empty"):
        fn([], [1.0])
    with pytest.raises(ValueError, match="nonmember_scores is empty"):
        fn([1.0], [])
    with pytest.raises(ValueError, match="NaN"):
        fn([np.nan], [1.0])


# --------------------------------------------------------------------------- multiple testing


def test_benjamini_hochberg_hand_worked():
    # sorted p = 0.01, 0.02, 0.03, 0.04, 0.20 (m=5); raw p*m/rank = .05, .05, .05, .05, .20
    # then running minimum from the top keeps them; returned in input order.
    p = [0.04, 0.01, 0.20, 0.03, 0.02]
    np.testing.assert_allclose(benjamini_hochberg(p), [0.05, 0.05, 0.20, 0.05, 0.05])
    # monotonicity step: p = 0.01, 0.04, 0.045 (m=3) -> .03, .06, .045 -> .03, .045, .045
    np.testing.assert_allclose(benjamini_hochberg([0.01, 0.04, 0.045]), [0.03, 0.045, 0.045])


def test_bonferroni():
    np.testing.assert_allclose(bonferroni([0.01, 0.3, 0.5]), [0.03, 0.9, 1.0])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        bonferroni([0.5, 1.5])


# --------------------------------------------------------------------------- KL


def test_kl_hand_worked_and_scipy():
    p, q = [0.5, 0.5, 0.0], [0.25, 0.5, 0.25]
    # 0.5 log(0.5/0.25) + 0.5 log 1 + 0 = 0.5 log 2
    assert kl_divergence(p, q) == pytest.approx(0.5 * math.log(2))
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(6), size=10)
    Q = rng.dirichlet(np.ones(6), size=10)
    np.testing.assert_allclose(kl_divergence(P, Q), scipy.stats.entropy(P, Q, axis=1))
    np.testing.assert_allclose(kl_divergence(P.T, Q.T, axis=0), scipy.stats.entropy(P, Q, axis=1))
    assert kl_divergence([1.0, 0.0], [0.0, 1.0]) == np.inf
    with pytest.raises(ValueError, match="non-negative"):
        kl_divergence([-0.1, 1.1], [0.5, 0.5])


def test_threshold_equals_exhaustive_large_mixed():
    rng = np.random.default_rng(7)
    m = np.concatenate([rng.normal(0.3, 1, 1500), rng.integers(0, 3, 300).astype(float)])
    nm = np.concatenate([rng.normal(0, 1, 700), rng.integers(0, 3, 500).astype(float)])
    assert best_balanced_threshold(m, nm) == best_balanced_threshold_exhaustive(m, nm)


def test_auc_upper_bound_by_hand_and_its_coverage() -> None:
    """Hanley & McNeil (1982) by hand at A = 0.5, 10 vs 10: Q1 = Q2 = 1/3, SE^2 =
    (0.25 + 9/12 + 9/12) / 100 = 0.0175, bound 0.5 + 1.6449 * 0.1323 = 0.7176. Over 600
    draws of normal scores 0.5 sd apart (true AUC Phi(0.5 / sqrt 2) = 0.638) the one-sided
    95 % bound covers the truth in at least 93 % of draws."""
    from sklearn.metrics import roc_auc_score

    from monai_forget.stats import auc_upper_bound

    assert auc_upper_bound(0.5, 10, 10) == pytest.approx(0.5 + 1.644854 * 0.0175**0.5, abs=1e-5)
    assert auc_upper_bound(0.99, 5, 5) == 1.0
    rng = np.random.default_rng(0)
    truth = scipy.stats.norm.cdf(0.5 / np.sqrt(2))
    covered = 0
    for _ in range(600):
        pos, neg = rng.normal(0.5, 1, 40), rng.normal(0, 1, 60)
        a = roc_auc_score(np.r_[np.ones(40), np.zeros(60)], np.r_[pos, neg])
        covered += auc_upper_bound(a, 40, 60) >= truth
    assert covered / 600 >= 0.93
    with pytest.raises(ValueError, match="AUC in"):
        auc_upper_bound(1.2, 10, 10)
