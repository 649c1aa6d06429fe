"""The reference-model auditor's statistics: per-sample membership scores against
reference models, a set-level test, D_Q's membership strength relative to the known
members with its upper bound, and the three-way decision.

Anchors (their ideas, our code):

- Per-sample score (:data:`SCORES`): by default RMIA's offline score (Zarifzadeh et al.,
  "Low-Cost High-Power Membership Inference Attacks", ICML 2024, Sec. 3 and App. B.2.2):
  the target's probability of the true class over ``Pr(x)``, estimated from reference
  models that never trained on x as ``((1 + a) mean_k p_k(x) + (1 - a)) / 2``
  (:func:`rmia_scores`). RMIA then compares that ratio with the ratios of population
  samples z; for a fixed population this is a monotone transform of the ratio, which the
  membership map below absorbs, so the log ratio is the score. LiRA's offline score with
  a fixed variance (Carlini et al., "Membership Inference Attacks From First
  Principles", S&P 2022, Sec. IV-C) stays available (``"lira"``, :func:`calibrated_scores`).
- Set-level test: dataset inference's one-sided test of the query set against known
  non-members scored the same way (Maini et al., "Dataset Inference", ICLR 2021; a
  permutation test here, see :func:`set_test`), after mapping every score to a
  membership probability cross-fitted on the known members and non-members
  (:class:`MembershipCalibration`).
- Remembered share: the mixture estimate of dataset-usage cardinality inference (Tong et
  al. 2024, DUCI), with a one-sided upper confidence bound
  (:mod:`~monai_forget.audit.remembered_share`).

Decision (three-way, :func:`refmodel_decision`), at level ``alpha`` and margin ``pi0``:

- ``not forgotten``: evidence of remembering: D_Q is more member-like than the known
  non-members, p <= alpha, and the known members are too (``member_effect_low`` > 0).
  Without that the target shows no measurable memorisation of its own training data, so
  a D_Q that differs from the non-members differs for another reason (e.g. another split
  or scanner) and the decision is ``inconclusive`` (ours: measured on a bounded bundle
  run, where a model retrained without the provider got p = 0.018 with the members'
  effect bound at -0.07). Evidence of remembering wins over a bound below the margin.
- ``forgotten`` at margin ``pi0``: the upper bound of the membership strength is below
  ``pi0`` (interval inclusion: at every true share >= ``pi0`` the chance of this is at
  most ``alpha``);
- ``inconclusive``: neither, or the compared sets do not look alike to the reference
  models (:func:`~monai_forget.audit.shift_check.shift_check`); the sizes that would
  give "forgotten" its power are reported
  (:func:`~monai_forget.audit.remembered_share.needed_sizes`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import scipy.stats

from monai_forget.audit.hidden_shift import hidden_shift_tolerance
from monai_forget.audit.refmodel_calibration import (
    PERMUTATIONS,
    MembershipCalibration,
    permutation_pvalue,
)
from monai_forget.audit.remembered_share import (
    KnownSets,
    detection_power,
    forgetting_power,
    needed_sizes,
    share_bound,
)
from monai_forget.audit.result import FORGOTTEN, INCONCLUSIVE, NOT_FORGOTTEN
from monai_forget.audit.shift_check import ShiftCheck
from monai_forget.checks import PARAMETERS, UNIT, check_in
from monai_forget.scores import check_probabilities

__all__ = [
    "PLANNING_POWER",
    "RMIA_OFFLINE_A",
    "ROLES",
    "SCORES",
    "MembershipCalibration",
    "SetTest",
    "auc",
    "both_designs",
    "calibrated_scores",
    "check_margin",
    "logit_confidence",
    "membership_signal",
    "out_of_pair_logits",
    "permutation_pvalue",
    "pooled_sigma",
    "refmodel_decision",
    "rmia_scores",
    "set_test",
    "true_class_probability",
]

#: The sets a reference-model audit scores: the query set and the known members and
#: non-members of the target.
ROLES: tuple[str, ...] = ("query", "members", "nonmembers")
#: The per-sample scores: RMIA's offline score (the default) and LiRA's offline score with
#: a fixed variance.
SCORES: tuple[str, ...] = ("rmia", "lira")
#: RMIA's offline coefficient ``a`` (``Pr(x) = ((1 + a) p_out + (1 - a)) / 2``). Chosen
#: among 0, 0.2, 0.3, 0.5, 0.7 and 1 on a development seed of
#: benchmarks/audit_calibration.py (MNIST and PneumoniaMNIST: highest AUC and TPR at 1 %
#: FPR at ``a = 0``), never on the seeds its error rates are measured on.
RMIA_OFFLINE_A = 0.0
#: The power the needed sizes are planned for ("inconclusive" says what would give it).
PLANNING_POWER = 0.8
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


def true_class_probability(probs: object, labels: object) -> np.ndarray:
    """Each sample's softmax probability of its true class (RMIA's signal)."""
    p, y = check_probabilities(probs, labels)
    return p[np.arange(len(y)), y]


def membership_signal(score: str, probs: object, labels: object) -> np.ndarray:
    """What one model contributes to ``score``: the true-class probability (``"rmia"``)
    or LiRA's logit-scaled confidence (``"lira"``)."""
    if score == "rmia":
        return true_class_probability(probs, labels)
    if score == "lira":
        return logit_confidence(probs, labels)
    raise ValueError(f"score must be one of {SCORES}, got {score!r}")


def rmia_scores(
    target_p: np.ndarray, reference_p_mean: np.ndarray, a: float = RMIA_OFFLINE_A
) -> np.ndarray:
    """RMIA's offline log likelihood ratio ``log p_T(x) - log Pr(x)`` of every sample.

    Zarifzadeh et al. 2024, Sec. 3 (``LR_theta(x) = Pr(x | theta) / Pr(x)``) and App.
    B.2.2 (offline: ``Pr(x) = ((1 + a) p_out(x) + (1 - a)) / 2`` with ``p_out`` the mean
    true-class probability of reference models that never trained on x). Higher means
    more member-like. The comparison with population samples that turns the ratio into
    RMIA's score is monotone in the ratio for a fixed population; the membership map
    of the set-level test absorbs it.
    """
    target_p = np.asarray(target_p, dtype=np.float64)
    reference_p_mean = np.asarray(reference_p_mean, dtype=np.float64)
    if target_p.shape != reference_p_mean.shape:
        raise ValueError(
            f"{reference_p_mean.shape} reference probabilities for {target_p.shape} target "
            "probabilities; score the same samples with every model"
        )
    check_in("RMIA's offline coefficient a", a, UNIT)
    marginal = (1 + a) / 2 * reference_p_mean + (1 - a) / 2
    return np.log(np.maximum(target_p, _TINY)) - np.log(np.maximum(marginal, _TINY))


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
    """The set-level test of D_Q against known non-members, the membership strength, and the
    power behind each decision.

    Attributes:
        pvalue: one-sided permutation-test p-value of the difference in mean mapped
            score, H1: D_Q is more member-like than the known non-members.
        query_mean: mean membership probability of D_Q.
        member_mean: the known members' mean.
        nonmember_mean: the known non-members' mean.
        member_effect_low: one-sided 95 % lower confidence bound of member - non-member.
        share: D_Q's estimated membership strength relative to the known members (DUCI's
            mixture estimate; a share of samples only under its two-component model).
        share_upper: its one-sided ``1 - alpha`` upper confidence bound (``inf``: none).
        margin: the share below which the bound must lie for "forgotten".
        power_forgotten: chance that a wholly forgotten D_Q of this size gets a bound
            below the margin (:func:`~monai_forget.audit.remembered_share.forgetting_power`).
        power_remembered: chance that the test finds a wholly remembered D_Q of this
            size (:func:`~monai_forget.audit.remembered_share.detection_power`).
        needed: the size of D_Q, of the known members and of the known non-members
            (each with the others as they are) for :data:`PLANNING_POWER` to certify a
            wholly forgotten D_Q; ``inf`` where no size of that set is enough.
        shift_tolerance: where the audit decides "forgotten", the largest hidden downward
            shift of D_Q's membership probabilities (sd of the known non-members') under
            which it stays so
            (:func:`~monai_forget.audit.hidden_shift.hidden_shift_tolerance`); else NaN.
    """

    pvalue: float
    query_mean: float
    member_mean: float
    nonmember_mean: float
    member_effect_low: float
    share: float
    share_upper: float
    margin: float
    power_forgotten: float
    power_remembered: float
    needed: dict[str, float]
    shift_tolerance: float = math.nan


def check_margin(margin: float) -> float:
    """The margin of membership strength, refused outside (0, 1] with its meaning."""
    why = "the largest membership strength of D_Q, relative to the known members, that still "
    return check_in("margin", margin, PARAMETERS["margin"], why + "counts as forgotten, e.g. 0.5")


def set_test(
    query: np.ndarray,
    calibration: MembershipCalibration,
    *,
    alpha: float,
    margin: float,
    n_resamples: int = PERMUTATIONS,
    seed: int = 0,
    with_tolerance: bool = False,
) -> SetTest:
    """Test D_Q against the known non-members and bound the share of it remembered.

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

    The membership strength and its upper bound are
    :func:`~monai_forget.audit.remembered_share.share_bound` of the mapped values; with
    ``with_tolerance``, a "forgotten" carries its hidden-shift tolerance
    (:func:`~monai_forget.audit.hidden_shift.hidden_shift_tolerance`) on the mapped values,
    in sd of the known non-members' mapped values.
    """
    check_margin(margin)
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
    known = KnownSets.of(m, n)
    bound = share_bound(q, known, alpha)
    test = SetTest(
        pvalue=float(pvalue),
        query_mean=float(q.mean()),
        member_mean=known.member_mean,
        nonmember_mean=known.nonmember_mean,
        member_effect_low=known.effect_low(0.95),
        share=bound.estimate,
        share_upper=bound.upper,
        margin=float(margin),
        power_forgotten=forgetting_power(known, q.size, margin, alpha),
        power_remembered=detection_power(known, q.size, alpha),
        needed=needed_sizes(known, q.size, margin, alpha, PLANNING_POWER),
    )
    if not with_tolerance or refmodel_decision(test, alpha) != FORGOTTEN:
        return test

    def still_forgotten(mapped: np.ndarray) -> bool:
        upper = share_bound(mapped, known, alpha).upper
        if not upper < margin:  # the cheap half first
            return False
        maps = calibration.query_maps(mapped.size)
        p = permutation_pvalue(
            mapped, maps, n, calibration.nonmember_maps, n_resamples=n_resamples, seed=seed
        )
        shifted = replace(test, pvalue=float(p), share_upper=upper)
        return refmodel_decision(shifted, alpha) == FORGOTTEN

    tolerance = hidden_shift_tolerance(q, n, still_forgotten)
    return replace(test, shift_tolerance=tolerance)


def both_designs(first: str, second: str) -> str:
    """The answer of two audits of one D_Q by two reference-model designs: theirs where
    they agree, else "inconclusive" (ours, issue 50). Each error of the joint answer is
    an error of both, so its rate is at most the lower of the two designs' rates for
    that error: without D_Q's site's images (false "forgotten" held in both directions
    of a site shift) and with them (false "not forgotten" held where the target knows
    the site), measured in benchmarks/results/audit_site_shift.md."""
    return first if first == second else INCONCLUSIVE


def refmodel_decision(test: SetTest, alpha: float, shift: ShiftCheck | None = None) -> str:
    """The three-way decision of the module docstring; "inconclusive" whatever the test
    says when the compared sets do not look alike to the reference models."""
    if shift is not None and shift.shifted:
        return INCONCLUSIVE
    if test.pvalue <= alpha:
        return NOT_FORGOTTEN if test.member_effect_low > 0 else INCONCLUSIVE
    if test.share_upper < test.margin:
        return FORGOTTEN
    return INCONCLUSIVE
