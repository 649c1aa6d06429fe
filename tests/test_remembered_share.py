"""The remembered share's upper bound, and the power and sizes behind "forgotten", against
brute force and simulation (known sets redrawn every time: many "trainings"), with
unequal spreads and a misclassified tail, where a formula with the wrong spread fails."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from monai_forget.audit.refmodel_calibration import permutation_pvalue
from monai_forget.audit.remembered_share import (
    KnownSets,
    detection_power,
    forgetting_power,
    needed_sizes,
    share_bound,
)

ALPHA = 0.05


def _members(rng: np.random.Generator, n: int) -> np.ndarray:
    """Member values: high and tight."""
    return rng.normal(0.62, 0.08, n)


def _nonmembers(rng: np.random.Generator, n: int) -> np.ndarray:
    """Non-member values: lower, wider, and a tenth in a misclassified tail at the floor."""
    x = rng.normal(0.5, 0.12, n)
    x[rng.random(n) < 0.1] = 0.01
    return x


def _query(rng: np.random.Generator, n: int, share: float) -> np.ndarray:
    k = round(share * n)
    return np.concatenate([_members(rng, k), _nonmembers(rng, n - k)])


def _known(rng: np.random.Generator, n_m: int = 300, n_n: int = 600) -> KnownSets:
    return KnownSets.of(_members(rng, n_m), _nonmembers(rng, n_n))


def _bound_by_bisection(q: np.ndarray, known: KnownSets, alpha: float) -> float:
    """The largest share the rule of the module docstring does not reject, by bisection
    (the rule written out: D(pi) < -z se(pi) with D_Q's variance the larger of the
    sample's and the mixture's)."""
    z = scipy.stats.norm.ppf(1 - alpha)
    d, a = known.effect, q.mean() - known.nonmember_mean
    c_m, c_n = known.member_var / known.n_members, known.nonmember_var / known.n_nonmembers

    def rejected(pi: float) -> bool:
        mixture = pi * known.member_var + (1 - pi) * known.nonmember_var + pi * (1 - pi) * d * d
        var_q = max(q.var(ddof=1), mixture)
        se = math.sqrt(max(var_q, 0.0) / q.size + (1 - pi) ** 2 * c_n + pi**2 * c_m)
        return a - pi * d < -z * se

    low, high = a / d, a / d + 1.0
    while not rejected(high):
        high += 2 * (high - low)
    for _ in range(80):
        mid = (low + high) / 2
        low, high = (low, mid) if rejected(mid) else (mid, high)
    return high


def test_bound_equals_the_rule_solved_by_bisection() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        known = _known(rng, int(rng.integers(20, 400)), int(rng.integers(20, 800)))
        q = _query(rng, int(rng.integers(5, 400)), rng.random())
        bound = share_bound(q, known, ALPHA)
        if np.isfinite(bound.upper):
            assert bound.upper == pytest.approx(_bound_by_bisection(q, known, ALPHA), abs=1e-9)
        expected = (q.mean() - known.nonmember_mean) / known.effect
        assert bound.estimate == pytest.approx(expected)


@pytest.mark.parametrize("share", [0.0, 0.1, 0.25, 0.5, 1.0])
@pytest.mark.parametrize("n_query", [20, 200])
def test_bound_covers_every_share(share: float, n_query: int) -> None:
    """The bound falls below the true share ("forgotten" at a margin at or under it) in
    at most about alpha of audits, the known sets redrawn for each."""
    rng = np.random.default_rng([int(share * 100), n_query])
    misses = 0
    for _ in range(400):
        known = _known(rng)
        misses += share_bound(_query(rng, n_query, share), known, ALPHA).upper < share
    # 400 draws: the binomial 99.9 % quantile at alpha is 0.08
    assert misses / 400 <= 0.08


def _discrete(values: list[float], probs: list[float]):
    """Step-valued scores, as the isotonic membership map makes them."""
    return lambda rng, n: rng.choice(values, n, p=probs)


@pytest.mark.parametrize(("share", "n_query", "alone"), [(0.0, 10, "sample"), (1.0, 15, "mixture")])
def test_each_variance_alone_undercovers_where_the_larger_does_not(
    share: float, n_query: int, alone: str
) -> None:
    """Why the bound takes the larger of D_Q's sample variance and the mixture's: on
    step-valued scores, the sample variance alone undercovers a forgotten D_Q of 10 (a
    few draws miss the non-members' spread), the mixture's alone a remembered D_Q of 15;
    the larger keeps both within alpha (2,000 draws, known sets redrawn each time)."""
    members = _discrete([0.99, 0.8, 0.3], [0.6, 0.3, 0.1])
    nonmembers = _discrete([0.99, 0.5, 0.2, 0.01], [0.1, 0.5, 0.3, 0.1])
    rng = np.random.default_rng(7)
    z = scipy.stats.norm.ppf(1 - ALPHA)
    ours, single = 0, 0
    for _ in range(2000):
        known = KnownSets.of(members(rng, 300), nonmembers(rng, 600))
        k = round(share * n_query)
        q = np.concatenate([members(rng, k), nonmembers(rng, n_query - k)])
        ours += share_bound(q, known, ALPHA).upper < share
        variance = q.var(ddof=1) if alone == "sample" else known.mixture_var(share)
        rest = (1 - share) ** 2 * known.nonmember_var / known.n_nonmembers
        rest += share**2 * known.member_var / known.n_members
        d_at_share = q.mean() - known.nonmember_mean - share * known.effect
        single += d_at_share < -z * math.sqrt(variance / n_query + rest)
    assert ours / 2000 <= 0.05 < 0.06 < single / 2000


def test_bound_is_unbounded_when_members_do_not_stand_out() -> None:
    """Fieller: when the members' lead over the non-members is not significant no share
    can be excluded; a clear lead gives a finite bound."""
    rng = np.random.default_rng(2)
    q = rng.normal(0, 1, 200)
    for lead, bounded in ((0.0, False), (-1.0, False), (0.02, False), (1.0, True)):
        known = KnownSets.of(rng.normal(lead, 1, 300), rng.normal(0, 1, 300))
        assert np.isfinite(share_bound(q, known, ALPHA).upper) == bounded, lead
        if not bounded:
            assert forgetting_power(known, 200, 0.5, ALPHA) == 0.0


def _forgotten_rate(n_query: int, margin: float, draws: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    known = _known(rng)  # fixed known sets: the formula is conditional on them
    hits = 0
    for _ in range(draws):
        hits += share_bound(_nonmembers(rng, n_query), known, ALPHA).upper < margin
    return hits / draws, known


def test_forgetting_power_uses_the_null_spread() -> None:
    """A forgotten D_Q has the non-members' spread: the formula matches simulation, and
    the same formula with the (tighter) members' spread would overstate it."""
    rate, known = _forgotten_rate(12, 0.5, 800, seed=3)
    predicted = forgetting_power(known, 12, 0.5, ALPHA)
    assert predicted == pytest.approx(rate, abs=0.05)
    tight = KnownSets(
        known.member_mean, known.member_var, known.n_members,
        known.nonmember_mean, known.member_var, known.n_nonmembers,
    )  # fmt: skip
    assert forgetting_power(tight, 12, 0.5, ALPHA) > rate + 0.15


def test_detection_power_uses_both_spreads() -> None:
    """A wholly remembered D_Q against the permutation test (null spread: the
    non-members'; the query mean's spread: the members'): formula against simulation;
    the members' spread alone in the null, as before, would overstate the power."""
    rng = np.random.default_rng(4)

    def tight_members(rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.normal(0.52, 0.06, n)

    members, nonmembers = tight_members(rng, 300), _nonmembers(rng, 600)
    known = KnownSets.of(members, nonmembers)
    n_query = 10
    rejected = 0
    for i in range(400):
        q = tight_members(rng, n_query)
        p = permutation_pvalue(q, np.zeros(n_query), nonmembers, np.zeros(600), n_resamples=499,
                               seed=i)  # fmt: skip
        rejected += p <= ALPHA
    predicted = detection_power(known, n_query, ALPHA)
    assert predicted == pytest.approx(rejected / 400, abs=0.07)
    z = scipy.stats.norm.ppf(1 - ALPHA)
    se_members = math.sqrt(known.member_var / n_query + known.nonmember_var / 600)
    wrong = scipy.stats.norm.cdf(known.effect / se_members - z)
    assert wrong > rejected / 400 + 0.1


def test_needed_sizes_give_the_planned_power() -> None:
    """At the needed query size the formula reaches the planned power and one fewer does
    not; simulation at that size agrees; a set that cannot help alone is inf."""
    rng = np.random.default_rng(5)
    known = _known(rng)
    need = needed_sizes(known, 20, 0.5, ALPHA, 0.8)
    n = int(need["query"])
    assert (
        forgetting_power(known, n, 0.5, ALPHA) >= 0.8 > forgetting_power(known, n - 1, 0.5, ALPHA)
    )
    hits = sum(share_bound(_nonmembers(rng, n), known, ALPHA).upper < 0.5 for _ in range(400))
    assert hits / 400 == pytest.approx(0.8, abs=0.07)
    # With a D_Q of 3 no number of known samples is enough: D_Q's own noise dominates.
    assert needed_sizes(known, 3, 0.5, ALPHA, 0.8)["nonmembers"] == math.inf


def test_known_sets_statistics_by_hand() -> None:
    """The members' lead and its one-sided lower 95 % bound (normal approximation), and the
    variance of one sample of a mixture, against direct computation."""
    members, nonmembers = np.array([0.9, 0.7, 0.8, 0.6]), np.array([0.1, 0.5, 0.3])
    known = KnownSets.of(members, nonmembers)
    lead = 0.75 - 0.3
    se = math.sqrt(np.var(members, ddof=1) / 4 + np.var(nonmembers, ddof=1) / 3)
    assert known.effect == pytest.approx(lead)
    assert known.effect_low(0.95) == pytest.approx(lead - 1.6448536269514722 * se)
    assert known.effect_low(0.95) < known.effect
    # a share pi of draws from the members, the rest from the non-members: the variance
    # of one draw, by brute force on a large sample of such draws
    rng = np.random.default_rng(9)
    m_pop, n_pop = rng.normal(2.0, 0.5, 400_000), rng.normal(0.0, 1.0, 400_000)
    known = KnownSets.of(m_pop, n_pop)
    for share in (0.0, 0.3, 0.8):
        pick = rng.random(400_000) < share
        draws = np.where(pick, m_pop, n_pop)
        assert known.mixture_var(share) == pytest.approx(draws.var(), rel=0.02), share


def test_a_set_wholly_remembered_at_40_percent_strength_reads_as_strength() -> None:
    """Issue 50, item 3: every sample of D_Q remembered, each at 40 % of the members' lead
    over the non-members (what an unlearning method that weakens every trace leaves). The
    estimate is 0.4, as for a set of which 40 % is wholly remembered: the words say what
    is bounded, a membership strength relative to the known members, not a share of D_Q's
    samples (every sample here is remembered)."""
    from monai_forget.audit.result import strength_text

    rng = np.random.default_rng(3)
    known = _known(rng)
    weakened = known.nonmember_mean + 0.4 * known.effect + rng.normal(0, 0.02, 200)
    bound = share_bound(weakened, known, ALPHA)
    assert bound.estimate == pytest.approx(0.4, abs=0.03)
    assert bound.estimate < bound.upper < 1
    text = strength_text(bound.upper, ALPHA)
    assert text == (
        f"D_Q's membership strength at most {bound.upper:.0%} of the known members' "
        "(95% upper bound)"
    )
    assert "remembered" not in text and "share" not in text
    no_bound = (
        "D_Q's membership strength relative to the known members: no bound (the audit "
        "cannot exclude full membership)"
    )
    # issue 66: a bound that reads 100% or more bounds nothing; just below, it is a bound
    assert strength_text(math.inf) == strength_text(1.5) == strength_text(0.995) == no_bound
    assert strength_text(0.994, ALPHA).startswith("D_Q's membership strength at most 99%")
