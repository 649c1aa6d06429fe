"""The reference-model audit's membership map, cross-fitted on two folds, and the
permutation test within the samples of each map (statistics of
:mod:`~monai_forget.audit.refmodel`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["PERMUTATIONS", "MembershipCalibration", "permutation_pvalue"]

#: Random relabellings of the set-level permutation test (p resolves to 1e-4).
PERMUTATIONS = 9999


@dataclass(frozen=True)
class MembershipCalibration:
    """The map from a score to a membership probability, cross-fitted on two folds.

    The known members and non-members are each split in two folds (seeded); the map
    fitted on one fold maps the other fold's scores, so every known sample is mapped by
    a map that never saw it and all of them are compared with D_Q (ours, not from
    LiRA or dataset inference: two-fold cross-fitting; one map fitted on a half and the
    other half compared, as before 2026-11-26, left half of the known samples unused).
    Each D_Q score is mapped by one of the two maps,
    assigned at random in equal shares (:meth:`query_maps`), and the set-level test
    permutes within the samples of one map (:func:`set_test`), which keeps it exact.

    A map is an isotonic regression of "is a member" on the score, members and
    non-members weighted equally: an estimate of P(member | score) at even odds, which
    is monotone in the likelihood ratio f_member(s) / f_nonmember(s), bounded in
    [0.01, 0.99] (heavy-tailed scores of saturated confidences cannot dominate a mean).

    Attributes:
        members: every known member's membership probability (out of fold).
        nonmembers: every known non-member's.
        member_maps: the map (0 or 1) that mapped each known member.
        nonmember_maps: the map that mapped each known non-member.
        seed: seed of the folds and of the query's map assignment.
    """

    members: np.ndarray
    nonmembers: np.ndarray
    member_maps: np.ndarray
    nonmember_maps: np.ndarray
    seed: int
    _maps: tuple[Any, ...] = field(repr=False, compare=False)

    @classmethod
    def fit(cls, members: np.ndarray, nonmembers: np.ndarray, seed: int = 0):
        """Fit the two maps and map every known sample out of fold."""
        from sklearn.isotonic import IsotonicRegression

        members = np.asarray(members, dtype=np.float64)
        nonmembers = np.asarray(nonmembers, dtype=np.float64)
        if min(members.size, nonmembers.size) < 4:
            raise ValueError("the calibration needs at least 4 known members and 4 non-members")
        rng = np.random.default_rng(seed)
        m_folds, n_folds = _balanced(members.size, rng), _balanced(nonmembers.size, rng)
        maps = []
        for fold in (0, 1):
            m, n = members[m_folds == fold], nonmembers[n_folds == fold]
            x = np.concatenate([m, n])
            y = np.concatenate([np.ones(m.size), np.zeros(n.size)])
            w = np.concatenate([np.full(m.size, 0.5 / m.size), np.full(n.size, 0.5 / n.size)])
            iso = IsotonicRegression(y_min=0.01, y_max=0.99, out_of_bounds="clip")
            maps.append(iso.fit(x, y, sample_weight=w))
        # map k was fitted on fold k: it maps fold 1 - k
        m_maps, n_maps = 1 - m_folds, 1 - n_folds
        return cls(
            _apply(maps, members, m_maps), _apply(maps, nonmembers, n_maps), m_maps, n_maps,
            int(seed), tuple(maps),
        )  # fmt: skip

    def query_maps(self, n: int) -> np.ndarray:
        """The map of each of ``n`` query scores: half each, in a seeded random order."""
        return _balanced(n, np.random.default_rng([self.seed, n]))

    def __call__(self, scores: np.ndarray) -> np.ndarray:
        """The membership probability of each query score (:meth:`query_maps`)."""
        scores = np.asarray(scores, dtype=np.float64)
        return _apply(self._maps, scores, self.query_maps(scores.size))


def _balanced(n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` labels, 0 and 1 in equal shares (the odd one 0 or 1 at random), shuffled."""
    return rng.permutation(np.arange(n) + rng.integers(2)) % 2


def _apply(maps: Sequence[Any], scores: np.ndarray, which: np.ndarray) -> np.ndarray:
    out = np.empty(scores.size)
    for k, iso in enumerate(maps):
        if np.any(which == k):
            out[which == k] = iso.predict(scores[which == k])
    return out


def permutation_pvalue(
    a: np.ndarray,
    a_strata: np.ndarray,
    b: np.ndarray,
    b_strata: np.ndarray,
    *,
    n_resamples: int = PERMUTATIONS,
    seed: int = 0,
) -> float:
    """One-sided p-value of ``mean(a) - mean(b)`` (H1: greater) by random relabellings
    that keep, within each stratum, how many of its values belong to ``a``.

    Within a stratum the values of ``a`` and ``b`` are exchangeable under the null (in
    the audit: D_Q and known non-members mapped by the same cross-fitted map), so the
    test is exact at every ``n_resamples``: ``p = (1 + #{T* >= T}) / (1 + n_resamples)``.
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    a_strata, b_strata = np.asarray(a_strata), np.asarray(b_strata)
    observed = a.mean() - b.mean()
    rng = np.random.default_rng(seed)
    resampled = np.zeros(n_resamples)
    for stratum in np.union1d(a_strata, b_strata):
        values = np.concatenate([a[a_strata == stratum], b[b_strata == stratum]])
        k = int(np.sum(a_strata == stratum))
        if k == 0 or k == values.size:
            resampled += values.sum() / (a.size if k else -b.size)
            continue
        # the first k of a random order are the stratum's "a" values in a relabelling
        picked = rng.random((n_resamples, values.size)).argpartition(k - 1, axis=1)[:, :k]
        a_sum = values[picked].sum(axis=1)
        resampled += a_sum / a.size - (values.sum() - a_sum) / b.size
    # ties of the observed labelling must count whatever the rounding of the sums
    tolerance = 1e-12 * max(1.0, abs(observed))
    return float((1 + np.sum(resampled >= observed - tolerance)) / (1 + n_resamples))
