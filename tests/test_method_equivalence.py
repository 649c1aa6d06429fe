"""The method-level equivalence test (issue 66, item 3): several runs of the method
against several exact retrainings, two one-sided unequal-variance t tests with Hsu's
degrees of freedom."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from monai_forget.unlearning.method_equivalence import method_equivalence


def _scipy_tost(m, r, margin, alpha) -> bool:
    """Schuirmann's two one-sided tests on scipy's unequal-variance t statistics, each
    referred to Hsu's min(r, k) - 1 degrees of freedom: both nulls rejected."""
    df = min(len(m), len(r)) - 1
    above = scipy.stats.ttest_ind(m + margin, r, equal_var=False).statistic
    below = scipy.stats.ttest_ind(m - margin, r, equal_var=False).statistic
    return max(scipy.stats.t.sf(above, df), scipy.stats.t.cdf(below, df)) < alpha


def test_the_decision_is_two_one_sided_tests_on_scipys_statistics():
    rng = np.random.default_rng(0)
    agreed = 0
    for i in range(400):
        r, k = rng.integers(2, 12, size=2)
        m = rng.normal(rng.uniform(-0.3, 0.3), rng.uniform(0.02, 0.2), r)
        ref = rng.normal(0.0, rng.uniform(0.02, 0.2), k)
        got = method_equivalence(m, ref, margin=0.15, alpha=0.05)
        assert got.equivalent == _scipy_tost(m, ref, 0.15, 0.05), i
        agreed += got.equivalent
    assert 20 < agreed < 380  # both outcomes were exercised


def test_at_the_margin_a_method_passes_at_most_alpha_even_with_its_own_spread():
    """A method whose mean sits exactly at the margin, its runs twice as spread as
    retraining's: "equivalent" in at most alpha of the draws (Welch's degrees of freedom
    passed 5.25 % here; a test that ignored the method's own spread, far more)."""
    rng = np.random.default_rng(1)
    draws, delta, passed = 4000, 0.1, 0
    for _ in range(draws):
        m = rng.normal(delta, 0.08, 3)
        ref = rng.normal(0.0, 0.04, 6)
        passed += method_equivalence(m, ref, margin=delta, alpha=0.05).equivalent
    upper = scipy.stats.binomtest(passed, draws).proportion_ci(0.95, method="wilson").high
    assert passed / draws <= 0.05 and upper <= 0.06, passed


def test_exact_retraining_against_itself_passes_with_the_tests_power():
    """Five retrained models judged against six others, margin 4 spreads (the median of
    the MNIST-30 seeds' delta / sigma): "not equivalent" in under 5 % of draws."""
    rng = np.random.default_rng(2)
    draws = 2000
    missed = sum(
        not method_equivalence(rng.normal(0, 1, 5), rng.normal(0, 1, 6), margin=4.0).equivalent
        for _ in range(draws)
    )
    assert missed / draws < 0.05, missed


def test_the_interval_and_the_summary_say_what_was_compared():
    got = method_equivalence([1.0, 1.2, 0.8], [1.1, 0.9, 1.0, 1.0], margin=0.5)
    assert got.difference == pytest.approx(0.0) and got.low < 0 < got.high
    assert got.runs == 3 and got.retrained == 4 and got.equivalent
    assert got.summary().startswith("evidence that the method is equivalent to retraining")
    far = method_equivalence([3.0, 3.1], [1.0, 1.1], margin=0.5)
    assert not far.equivalent and far.summary().startswith("no evidence")


@pytest.mark.parametrize(
    ("method", "retrained", "margin", "alpha", "message"),
    [
        ([1.0], [1.0, 2.0], 0.5, 0.05, "the method's runs must be an integer >= 2"),
        ([1.0, 2.0], [1.0], 0.5, 0.05, "the retrained models must be an integer >= 2"),
        ([1.0, 2.0], [1.0, 2.0], 0.0, 0.05, "margin must be > 0"),
        ([1.0, 2.0], [1.0, 2.0], 0.5, 0.5, r"alpha must be in \(0, 0.5\)"),
        ([1.0, np.nan], [1.0, 2.0], 0.5, 0.05, "finite"),
    ],
)
def test_bad_inputs_are_refused_by_name(method, retrained, margin, alpha, message):
    with pytest.raises(ValueError, match=message):
        method_equivalence(method, retrained, margin, alpha)
