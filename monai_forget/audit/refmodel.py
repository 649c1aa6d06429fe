"""The reference-model auditor's statistics: calibrated membership scores, a set-level
test with three outcomes, its power, and the fraction of D_Q still remembered.

Anchors (their ideas, our code): the per-sample score is LiRA's offline test (Carlini et
al., "Membership Inference Attacks From First Principles", S&P 2022, Sec. IV-C): the
target's logit-scaled confidence on a sample compared with the same quantity under
reference models that never trained on it, which removes how hard the sample is for
any model of the design. The set-level test follows dataset inference (Maini et al.,
"Dataset Inference", ICLR 2021): a one-sided test of the query set against known
non-members scored the same way (a permutation test where they use a t-test, see
:func:`set_test`), after mapping every score to a membership probability
cross-fitted on the known members and non-members (:class:`MembershipCalibration`:
bounded, so the heavy tails of saturated confidences cannot dominate, and shaped like the
likelihood ratio, which weights the scores that separate members best). The fraction
estimate follows dataset-usage cardinality inference (Tong et al. 2024, DUCI, in ML
Privacy Meter): the query set is a mixture of remembered and forgotten samples, so its
mean membership probability interpolates between the known non-members' and members'.

Decision (three-way, :func:`refmodel_decision`):

- ``not forgotten``: D_Q is more member-like than the known non-members, p <= alpha,
  and the known members are too (``member_effect_low`` > 0). Without that the target
  shows no measurable memorisation of its own training data, so a D_Q that differs from
  the non-members differs for another reason (e.g. another split or scanner) and the
  decision is ``inconclusive`` (ours: measured on a bounded bundle run, where a model
  retrained without the provider got p = 0.018 with the members' effect bound at -0.07);
- ``forgotten``: p > alpha, and the test had power >= ``min_power`` to see D_Q
  remembered as much as the known members are (with the members' AUC at its lower 95 %
  confidence bound, so the power is not overstated);
- ``inconclusive``: neither, or the compared sets do not look alike to the reference
  models (:func:`shift_check`); the query size that would give the power is reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.stats

from monai_forget.audit.refmodel_calibration import (
    PERMUTATIONS,
    MembershipCalibration,
    permutation_pvalue,
)
from monai_forget.audit.result import FORGOTTEN, INCONCLUSIVE, NOT_FORGOTTEN
from monai_forget.scores import check_probabilities

__all__ = [
    "ROLES",
    "MembershipCalibration",
    "SetTest",
    "ShiftCheck",
    "auc",
    "calibrated_scores",
    "logit_confidence",
    "out_of_pair_logits",
    "permutation_pvalue",
    "pooled_sigma",
    "refmodel_decision",
    "remembered_fraction",
    "set_test",
    "shift_check",
]

#: The sets a reference-model audit scores: the query set and the known members and
#: non-members of the target.
ROLES: tuple[str, ...] = ("query", "members", "nonmembers")
_TINY = np.finfo(np.float64).tiny


def logit_confidence(probs: object, labels: object) -> np.ndarray:
    """``phi = log p_y - log(sum_{j != y} p_j)``: LiRA's logit scaling of the confidence.

    Carlini et al. 2022, Sec. IV-B: confidences bunch at 1.0 for training samples; on
    the logit scale they are close to Gaussian. The sum over the other classes is taken
    directly, not as ``1 - p_y``, which loses every digit near 1; both terms are floored
    at the smallest float64 so a saturated output gives about +-708, not inf.
    """
    p, y = check_probabilities(probs, labels)
    rows = np.arange(len(y))
    p_y = p[rows, y]
    others = p.sum(axis=1) - p_y
    return np.log(np.maximum(p_y, _TINY)) - np.log(np.maximum(others, _TINY))


def calibrated_scores(
    target_phi: np.ndarray, reference_phi: np.ndarray, sigma: float
) -> np.ndarray:
    """``(phi_target(x) - mean_k phi_k(x)) / sigma`` for every sample x.

    ``reference_phi`` is ``(K, N)``: K reference models that never trained on the N
    samples (LiRA's offline setting); ``sigma`` is the pooled spread of those models
    around their per-sample mean (one variance for all samples, LiRA's fixed-variance
    variant, stable with few reference models). Higher means more member-like.
    """
    target_phi = np.asarray(target_phi, dtype=np.float64)
    reference_phi = np.atleast_2d(np.asarray(reference_phi, dtype=np.float64))
    if reference_phi.shape[1] != target_phi.shape[0]:
        raise ValueError(
            f"{reference_phi.shape[1]} reference outputs per model for {target_phi.shape[0]} "
            "target outputs; score the same samples with every model"
        )
    return (target_phi - reference_phi.mean(axis=0)) / sigma


def out_of_pair_logits(phi: np.ndarray, trained_on: np.ndarray, seed: object = 0) -> np.ndarray:
    """Each unit's logits under the model of every reference pair that never trained on it.

    Reference models 2j and 2j + 1 are a pair trained on complementary halves of the
    known samples (ours: so every known sample can be scored, none set aside to train
    the reference models). A known sample is in exactly one half of each pair, so its
    reference is the other model; a sample in neither half (D_Q) takes one model of
    each pair at random (seeded). Every unit thus has K / 2 reference models that never
    trained on it, drawn alike, which keeps D_Q exchangeable with the known non-members.

    Args:
        phi: ``(K, N)`` logits of K reference models (K even) on N units.
        trained_on: ``(K, N)`` booleans, model k trained on unit n.
        seed: seed of the choice for units in neither half.

    Returns:
        ``(K / 2, N)`` logits, one row per pair.

    Raises:
        ValueError: an odd number of models, or both models of a pair trained on a unit.
    """
    phi = np.atleast_2d(np.asarray(phi, dtype=np.float64))
    trained_on = np.asarray(trained_on, dtype=bool)
    if phi.shape[0] % 2 or phi.shape != trained_on.shape:
        raise ValueError(
            f"{phi.shape[0]} reference models with membership of shape {trained_on.shape}: "
            "pairs of models (an even number), one membership row per model"
        )
    rng = np.random.default_rng(seed)
    rows = []
    for first in range(0, phi.shape[0], 2):
        in_first, in_second = trained_on[first], trained_on[first + 1]
        if np.any(in_first & in_second):
            raise ValueError(
                f"reference models {first} and {first + 1} both trained on a unit: a "
                "pair trains on complementary halves"
            )
        either = rng.random(phi.shape[1]) < 0.5
        use_second = in_first | (~in_second & either)
        rows.append(np.where(use_second, phi[first + 1], phi[first]))
    return np.stack(rows)


def pooled_sigma(reference_phi: np.ndarray) -> float:
    """The reference models' spread around their per-sample mean, pooled over samples."""
    reference_phi = np.atleast_2d(np.asarray(reference_phi, dtype=np.float64))
    if reference_phi.shape[0] < 2:
        raise ValueError("the spread of reference models needs at least 2 of them")
    sigma = float(np.sqrt(np.mean(np.var(reference_phi, axis=0, ddof=1))))
    return sigma if sigma > 0 else 1.0


def auc(a: np.ndarray, b: np.ndarray) -> float:
    """``P(A > B) + P(A = B) / 2`` for a score of set A and one of set B: the Mann-Whitney
    U statistic over ``|A| |B|`` (the area under the ROC curve separating A from B)."""
    u = scipy.stats.mannwhitneyu(a, b, alternative="greater", method="asymptotic").statistic
    return float(u) / (len(a) * len(b))


@dataclass(frozen=True)
class SetTest:
    """The set-level test of D_Q against known non-members, and its power.

    Attributes:
        pvalue: one-sided permutation-test p-value of the difference in mean mapped
            score, H1: D_Q is more member-like than the known non-members.
        query_mean: mean membership probability of D_Q.
        member_mean: the known members' mean.
        nonmember_mean: the known non-members' mean.
        member_effect_low: one-sided 95 % lower confidence bound of member - non-member.
        power: probability that the test rejects at alpha when D_Q is remembered like
            the known members (normal approximation, with ``member_effect_low``).
        needed_query_size: the |D_Q| that would give ``min_power`` (``inf`` when no size
            would: no member signal, or too few known non-members).
    """

    pvalue: float
    query_mean: float
    member_mean: float
    nonmember_mean: float
    member_effect_low: float
    power: float
    needed_query_size: float


def set_test(
    query: np.ndarray,
    calibration: MembershipCalibration,
    *,
    alpha: float,
    min_power: float,
    n_resamples: int = PERMUTATIONS,
    seed: int = 0,
) -> SetTest:
    """Test D_Q against the known non-members and measure the test's power.

    D_Q's scores are mapped to membership probabilities (:class:`MembershipCalibration`)
    and their mean is compared with the known non-members' by a one-sided permutation
    test (:func:`permutation_pvalue`, ``n_resamples`` random relabellings within the
    samples of each cross-fitted map, seeded by ``seed``; p counts the observed labelling,
    so it is never 0): the set-level comparison of dataset inference (Maini et al. 2021),
    which uses a t-test. Ours is a permutation test because the mapped scores are step
    values with an atom at the floor (a model's rare misclassified samples): a small D_Q
    often holds none of them, its variance is then near zero and Welch's t-test turns
    that into a small p-value (on scores of that shape it called 36 % of non-member sets
    of 20 "not forgotten" at alpha 0.05, the permutation test 7 % with a single map,
    under 10 % with the cross-fitted pair: tests/test_audit_refmodel.py); the
    permutation test is exact whenever D_Q and the non-members are exchangeable.

    For a query set remembered like the known members, the mean difference would be
    ``d = mean(members) - mean(nonmembers)``; with its lower 95 % bound ``d_low`` the power is
    ``Phi(d_low / sqrt(v_M / n_Q + v_N / n_N) - z_{1-alpha})``, and the query size giving
    ``min_power`` solves the same equation for ``n_Q``.
    """
    q = calibration(query)
    m, n = calibration.members, calibration.nonmembers
    pvalue = permutation_pvalue(
        q,
        calibration.query_maps(q.size),
        n,
        calibration.nonmember_maps,
        n_resamples=n_resamples,
        seed=seed,
    )
    v_m, v_n = float(np.var(m, ddof=1)), float(np.var(n, ddof=1))
    effect = float(m.mean() - n.mean())
    effect_low = effect - scipy.stats.norm.ppf(0.95) * math.sqrt(v_m / m.size + v_n / n.size)
    z_alpha, z_power = scipy.stats.norm.ppf(1 - alpha), scipy.stats.norm.ppf(min_power)
    se = math.sqrt(v_m / q.size + v_n / n.size)
    power = float(scipy.stats.norm.cdf(effect_low / se - z_alpha)) if se > 0 else 0.0
    room = (effect_low / (z_alpha + z_power)) ** 2 - v_n / n.size
    needed = math.ceil(v_m / room) if effect_low > 0 and room > 0 else math.inf
    return SetTest(
        float(pvalue), float(q.mean()), float(m.mean()), float(n.mean()), effect_low,
        power, needed,
    )  # fmt: skip


@dataclass(frozen=True)
class ShiftCheck:
    """Do the compared sets look alike to the reference models? (target-free)

    The reference models never trained on D_Q, the known members or the known
    non-members, so their outputs on the three sets must come from one distribution
    when the audit's assumption holds: the known non-members are like D_Q, and the known
    members like the non-members. Two-sample K-S tests of the reference models' mean
    logit confidence check it; a shift (e.g. low-quality or other-site non-members) makes
    any comparison of the target's outputs meaningless, so the audit answers
    "inconclusive".

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


def shift_check(
    query_mu: np.ndarray, member_mu: np.ndarray, nonmember_mu: np.ndarray, level: float = 0.01
) -> ShiftCheck:
    """:class:`ShiftCheck` of the reference models' mean logit confidences."""

    def pvalue(a: np.ndarray, b: np.ndarray) -> float:
        return float(scipy.stats.ks_2samp(a, b, method="asymp").pvalue)

    return ShiftCheck(pvalue(query_mu, nonmember_mu), pvalue(member_mu, nonmember_mu), level)


def refmodel_decision(
    test: SetTest, alpha: float, min_power: float, shift: ShiftCheck | None = None
) -> str:
    """The three-way decision of the module docstring; "inconclusive" whatever the test
    says when the compared sets do not look alike to the reference models."""
    if shift is not None and shift.shifted:
        return INCONCLUSIVE
    if test.pvalue <= alpha:
        return NOT_FORGOTTEN if test.member_effect_low > 0 else INCONCLUSIVE
    if test.power >= min_power:
        return FORGOTTEN
    return INCONCLUSIVE


def remembered_fraction(
    query: np.ndarray,
    calibration: MembershipCalibration,
    *,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Estimated share of D_Q the model still remembers, with a bootstrap interval.

    If a share ``pi`` of D_Q is remembered (scoring like the known members) and the rest
    forgotten (like non-members), D_Q's mean membership probability is ``pi * mean_M +
    (1 - pi) * mean_N``, so ``pi = (mean_Q - mean_N) / (mean_M - mean_N)``: a mixture
    estimate in the spirit of DUCI. The interval resamples the three sets independently
    (percentile bootstrap). ``nan`` when members and non-members do not differ.

    A ratio's confidence set is bounded only when its denominator is significantly
    non-zero (Fieller 1954): when the bootstrap puts the members' lead over the
    non-members, ``mean_M - mean_N``, at or below 0 in more than ``(1 - level) / 2`` of
    the resamples, the interval is ``(-inf, inf)``: the known members are not measurably
    member-like, so no share of D_Q can be excluded (a percentile interval of the ratio
    would be finite there, and meaningless).

    Returns:
        ``(estimate, low, high)``, not clipped (values outside [0, 1] are sampling noise
        around the ends).
    """
    sets = [calibration(query), calibration.members, calibration.nonmembers]

    def fraction(q: np.ndarray, m: np.ndarray, n: np.ndarray) -> np.ndarray:
        span = m - n
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(span != 0, (q - n) / span, np.nan)

    estimate = float(fraction(*(s.mean() for s in sets)))
    rng = np.random.default_rng(seed)
    means = [s[rng.integers(0, s.size, (n_boot, s.size))].mean(axis=1) for s in sets]
    boot = fraction(*means)
    boot = boot[np.isfinite(boot)]
    if not np.isfinite(estimate) or boot.size == 0:
        return float("nan"), float("nan"), float("nan")
    if np.mean(means[1] - means[2] <= 0) > (1 - level) / 2:
        return estimate, -math.inf, math.inf
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(boot, [tail, 100 - tail])
    return estimate, float(low), float(high)
