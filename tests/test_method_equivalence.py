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


def test_the_check_elsewhere_is_scipys_unequal_variance_t_on_hsus_degrees_of_freedom():
    rng = np.random.default_rng(3)
    for i in range(200):
        r, k = rng.integers(2, 12, size=2)
        m_out = rng.normal(rng.uniform(-1, 1), rng.uniform(0.1, 1), r)
        r_out = rng.normal(0.0, rng.uniform(0.1, 1), k)
        got = method_equivalence(
            np.zeros(r) + rng.normal(0, 0.01, r), rng.normal(0, 0.01, k), margin=0.5,
            method_elsewhere=m_out, retrained_elsewhere=r_out,
        )  # fmt: skip
        t = scipy.stats.ttest_ind(m_out, r_out, equal_var=False).statistic
        assert got.elsewhere_pvalue == pytest.approx(2 * scipy.stats.t.sf(abs(t), min(r, k) - 1))
        assert got.equivalent == (got.inside and got.elsewhere_pvalue > 0.01), i  # its default


def test_a_method_that_moved_every_output_is_not_equivalent_however_close_its_advantage():
    """Runs whose advantage on the site is retraining's but whose confidence on never-seen
    data sits 10 retraining spreads lower (FedEraser on MNIST-30, seed 1): withheld; the
    same runs with retraining's confidence elsewhere: equivalent."""
    rng = np.random.default_rng(4)
    runs, retrained = rng.normal(0, 0.05, 10), rng.normal(0, 0.05, 20)
    like = rng.normal(5.0, 0.3, 20)
    moved = method_equivalence(
        runs, retrained, margin=0.3, method_elsewhere=rng.normal(2.0, 0.3, 10),
        retrained_elsewhere=like,
    )  # fmt: skip
    assert moved.inside and moved.changed_elsewhere and not moved.equivalent
    assert moved.summary().startswith("no evidence") and "never-seen data differs" in (
        moved.summary()
    )
    kept = method_equivalence(
        runs, retrained, margin=0.3, method_elsewhere=rng.normal(5.0, 0.3, 10),
        retrained_elsewhere=like,
    )  # fmt: skip
    assert kept.inside and not kept.changed_elsewhere and kept.equivalent
    assert "never-seen" not in kept.summary()


def test_the_check_elsewhere_withholds_exact_retraining_in_at_most_its_level():
    """Ten retrained models as the runs against twenty others: their confidence
    elsewhere called different in at most 1 % (the default level) of 4,000 draws, and
    at most 5 % at a level of 5 %."""
    rng = np.random.default_rng(5)
    draws, changed, changed_at_5 = 4000, 0, 0
    for _ in range(draws):
        got = method_equivalence(
            rng.normal(0, 1, 10), rng.normal(0, 1, 20), margin=10.0,
            method_elsewhere=rng.normal(0, 1, 10), retrained_elsewhere=rng.normal(0, 1, 20),
        )  # fmt: skip
        changed += got.changed_elsewhere
        changed_at_5 += got.elsewhere_pvalue <= 0.05
    assert 0 < changed <= 0.01 * draws and changed < changed_at_5 <= 0.05 * draws


def test_without_spread_elsewhere_only_identical_confidence_is_like_retraining():
    same = method_equivalence(
        [0.0, 0.1], [0.05, 0.0, 0.1], margin=1.0,
        method_elsewhere=[2.0, 2.0], retrained_elsewhere=[2.0, 2.0, 2.0],
    )  # fmt: skip
    assert same.elsewhere_pvalue == 1.0 and same.equivalent
    other = method_equivalence(
        [0.0, 0.1], [0.05, 0.0, 0.1], margin=1.0,
        method_elsewhere=[1.0, 1.0], retrained_elsewhere=[2.0, 2.0, 2.0],
    )  # fmt: skip
    assert other.elsewhere_pvalue == 0.0 and not other.equivalent


@pytest.mark.parametrize(
    ("elsewhere", "message"),
    [
        ({"method_elsewhere": [1.0, 2.0]}, "pass both method_elsewhere and retrained_elsewhere"),
        ({"method_elsewhere": [1.0], "retrained_elsewhere": [1.0, 2.0]}, "one per model"),
        ({"method_elsewhere": [1.0, np.inf], "retrained_elsewhere": [1.0, 2.0]}, "finite"),
        ({"elsewhere_alpha": 0.0}, r"elsewhere_alpha must be in \(0, 0.5\)"),
    ],
)
def test_bad_confidences_elsewhere_are_refused(elsewhere, message):
    with pytest.raises(ValueError, match=message):
        method_equivalence([1.0, 2.0], [1.0, 2.0], 0.5, **elsewhere)


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
