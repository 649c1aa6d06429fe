"""D_Q's membership strength relative to the known members: its estimate, a one-sided
upper confidence bound, and the power and sizes behind "forgotten at a margin".

What is bounded (issue 50): ``pi`` below is a ratio of mean membership, 0 when D_Q scores
like never-seen data and 1 when it scores like the known members. It is the share of D_Q's
samples that are remembered only under the two-component model below; a D_Q wholly
remembered at 40 % of the members' strength (what an unlearning method that weakens every
trace leaves) has ``pi = 0.4`` as well, so every report names it "membership strength
relative to the known members" (:func:`~monai_forget.audit.result.strength_text`).

Model (a mixture, as in dataset-usage cardinality inference, Tong et al. 2024, DUCI): a
share ``pi`` of D_Q is remembered and scores like the target's known members, the rest
scores like data the target never saw (the known non-members). For any per-sample value
``h`` (here the membership probability of
:class:`~monai_forget.audit.refmodel_calibration.MembershipCalibration`),
``E_Q[h] = pi E_M[h] + (1 - pi) E_N[h]``, so ``pi = (mean_Q - mean_N) / (mean_M - mean_N)``.

The upper bound (ours: Fieller's construction for a ratio of means, Fieller 1954): a
share ``pi`` is rejected as too large when ``D(pi) = mean_Q - (1 - pi) mean_N - pi mean_M``
is below ``-z_{1-alpha} se(pi)``, where ``se(pi)^2 = v_Q(pi) / n_Q + (1 - pi)^2 v_N / n_N +
pi^2 v_M / n_M``. The bound is the largest share not rejected: the larger root of
``D(pi)^2 = z^2 se(pi)^2``. D_Q's variance ``v_Q(pi)`` is the larger of its sample variance
and ``pi v_M + (1 - pi) v_N + pi (1 - pi) (mean_M - mean_N)^2``, the variance of one sample
of the mixture at the hypothesised share (as a score test takes it). Each alone
undercovers: the sample variance a wholly remembered small D_Q, the mixture's a
forgotten one (tests/test_remembered_share.py shows both on step-valued scores; an
exploration on the benchmark's development seeds found 0.83 and 0.94 coverage). With the
larger, the lowest coverage of any cell was 0.940 on the development seeds and 0.933 on
the 15 evaluation trainings per data set (benchmarks/results/audit_calibration.md). Each
variance gives a quadratic in ``pi``; the bound is the larger of their larger roots. It
is finite only when the members' lead over the non-members is itself significant;
otherwise no share can be excluded and the bound is ``inf``.

"Forgotten at margin pi0" is interval inclusion (as in equivalence testing): the bound
lies below ``pi0``. At every true share ``pi >= pi0`` the chance of that is at most
``alpha`` (the bound covers ``pi`` with probability ``1 - alpha``), so the error is
controlled at every share beyond the margin, not only at "wholly remembered".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.stats

__all__ = [
    "KnownSets",
    "ShareBound",
    "detection_power",
    "forgetting_power",
    "needed_sizes",
    "share_bound",
]


@dataclass(frozen=True)
class KnownSets:
    """What the bound needs of the known members and non-members: means, variances,
    sizes (of the per-sample values ``h``)."""

    member_mean: float
    member_var: float
    n_members: int
    nonmember_mean: float
    nonmember_var: float
    n_nonmembers: int

    @classmethod
    def of(cls, members: np.ndarray, nonmembers: np.ndarray) -> KnownSets:
        m = np.asarray(members, dtype=np.float64)
        n = np.asarray(nonmembers, dtype=np.float64)
        if min(m.size, n.size) < 2:
            raise ValueError("the share bound needs at least 2 known members and 2 non-members")
        return cls(
            float(m.mean()), float(m.var(ddof=1)), m.size,
            float(n.mean()), float(n.var(ddof=1)), n.size,
        )  # fmt: skip

    @property
    def effect(self) -> float:
        """``mean_M - mean_N``: how much more member-like the known members score."""
        return self.member_mean - self.nonmember_mean

    def effect_low(self, level: float = 0.95) -> float:
        """One-sided lower confidence bound of :attr:`effect` (normal approximation)."""
        se = math.sqrt(self.member_var / self.n_members + self.nonmember_var / self.n_nonmembers)
        return self.effect - float(scipy.stats.norm.ppf(level)) * se

    def mixture_var(self, share: float) -> float:
        """Variance of one sample of D_Q when a ``share`` of it is remembered."""
        d = self.effect
        return (
            share * self.member_var + (1 - share) * self.nonmember_var + share * (1 - share) * d * d
        )


@dataclass(frozen=True)
class ShareBound:
    """The membership strength of D_Q and its one-sided upper confidence bound.

    Attributes:
        estimate: ``(mean_Q - mean_N) / (mean_M - mean_N)`` (``nan`` when the known sets do
            not differ); not clipped: values outside [0, 1] are sampling noise at the ends.
        upper: the ``1 - alpha`` upper confidence bound (``inf``: no share can be excluded).
        alpha: the bound's error level.
    """

    estimate: float
    upper: float
    alpha: float


def share_bound(query: np.ndarray, known: KnownSets, alpha: float) -> ShareBound:
    """:class:`ShareBound` of D_Q's values ``query`` (module docstring: the construction)."""
    q = np.asarray(query, dtype=np.float64)
    if q.size < 2:
        raise ValueError("the share bound needs at least 2 query samples")
    z2 = float(scipy.stats.norm.ppf(1 - alpha)) ** 2
    a, d, n_q = float(q.mean()) - known.nonmember_mean, known.effect, q.size
    estimate = a / d if d != 0 else math.nan
    c_m = known.member_var / known.n_members
    c_n = known.nonmember_var / known.n_nonmembers
    v_m, v_n, v_q = known.member_var, known.nonmember_var, float(q.var(ddof=1))
    # D(pi)^2 - z^2 se(pi)^2 = A pi^2 + B pi + C for each D_Q variance; the larger root
    roots = []
    for quad, lin, const in (
        # the mixture's variance at pi (KnownSets.mixture_var)
        (
            d * d * (1 + z2 / n_q) - z2 * (c_m + c_n),
            -2 * a * d - z2 * ((v_m - v_n + d * d) / n_q - 2 * c_n),
            a * a - z2 * (v_n / n_q + c_n),
        ),
        # D_Q's sample variance
        (d * d - z2 * (c_m + c_n), -2 * a * d + 2 * z2 * c_n, a * a - z2 * (v_q / n_q + c_n)),
    ):
        if d <= 0 or quad <= 0:
            return ShareBound(estimate, math.inf, alpha)
        disc = max(lin * lin - 4 * quad * const, 0.0)  # > 0: D = 0 lies between the roots
        roots.append((-lin + math.sqrt(disc)) / (2 * quad))
    return ShareBound(estimate, max(roots), alpha)


def forgetting_power(known: KnownSets, n_query: float, margin: float, alpha: float) -> float:
    """Chance that a wholly forgotten D_Q of ``n_query`` samples gets a bound below ``margin``.

    A forgotten D_Q scores like the non-members, so ``D(margin)`` has mean ``-margin *
    effect`` and variance ``v_N / n_Q + (1 - margin)^2 v_N / n_N + margin^2 v_M / n_M`` (the
    non-members' spread for D_Q: the null's, not the members'); the bound is below the
    margin when ``D(margin) < -z se(margin)`` (normal approximation).
    """
    d, z = known.effect, float(scipy.stats.norm.ppf(1 - alpha))
    c_m = known.member_var / known.n_members
    c_n = known.nonmember_var / known.n_nonmembers
    if d <= 0 or d * d <= z * z * (c_m + c_n):
        return 0.0  # the bound is unbounded: never below a margin
    spread = math.sqrt(known.nonmember_var / n_query + (1 - margin) ** 2 * c_n + margin**2 * c_m)
    # the bound's D_Q variance: the larger of the mixture's at the margin and the sample
    # variance, which for a forgotten D_Q is about the non-members'
    decision_se = math.sqrt(
        max(known.mixture_var(margin), known.nonmember_var) / n_query
        + (1 - margin) ** 2 * c_n
        + margin**2 * c_m
    )
    return float(scipy.stats.norm.cdf((margin * d - z * decision_se) / spread))


def detection_power(known: KnownSets, n_query: float, alpha: float) -> float:
    """Chance that the set-level test finds a wholly remembered D_Q of ``n_query`` samples.

    The permutation test's null spread is the non-members' (D_Q and the non-members
    exchangeable): it rejects when ``mean_Q - mean_N > z sqrt(v_N (1/n_Q + 1/n_N))``; a
    remembered D_Q's mean has the members' spread around ``mean_N + effect``.
    """
    z = float(scipy.stats.norm.ppf(1 - alpha))
    n_n = known.n_nonmembers
    threshold = z * math.sqrt(known.nonmember_var * (1 / n_query + 1 / n_n))
    spread = math.sqrt(known.member_var / n_query + known.nonmember_var / n_n)
    if spread == 0:
        return float(known.effect > threshold)
    return float(scipy.stats.norm.cdf((known.effect - threshold) / spread))


def needed_sizes(
    known: KnownSets, n_query: int, margin: float, alpha: float, power: float
) -> dict[str, float]:
    """The size each set would need, the others as they are, for ``power`` to certify a
    wholly forgotten D_Q at ``margin`` (:func:`forgetting_power`); ``inf`` when no size of
    that set is enough (the others limit it)."""

    def smallest(power_at) -> float:
        high = 1
        while power_at(high) < power:
            high *= 2
            if high > 2**26:
                return math.inf
        low = high // 2
        while high - low > 1:  # power_at(high) >= power > power_at(low)
            mid = (low + high) // 2
            low, high = (low, mid) if power_at(mid) >= power else (mid, high)
        return float(high)

    def with_sizes(n_m: int, n_n: int) -> KnownSets:
        return KnownSets(
            known.member_mean, known.member_var, n_m,
            known.nonmember_mean, known.nonmember_var, n_n,
        )  # fmt: skip

    return {
        "query": smallest(lambda n: forgetting_power(known, n, margin, alpha)),
        "members": smallest(
            lambda n: forgetting_power(with_sizes(n, known.n_nonmembers), n_query, margin, alpha)
        ),
        "nonmembers": smallest(
            lambda n: forgetting_power(with_sizes(known.n_members, n), n_query, margin, alpha)
        ),
    }
