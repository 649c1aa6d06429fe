"""Sequential decoys: draw decoys until each name's decision is settled, up to a cap.

With a fixed number n of decoys a name's calibrated p is at least 1 / (n + 1), so a name
that beats all but a few decoys can be left unflagged only for want of decoys, and most
names, far from any threshold, are scored against far more decoys than they need. Here
every kind of name has one stream of decoys, scored in a random order, and each name's
p-value is Besag & Clifford's sequential Monte Carlo p-value ("Sequential Monte Carlo
p-values", Biometrika 78, 1991):

    follow the stream until h decoys score at or above the name (the h-th at position l):
        p = h / l;
    if the stream ends first (n decoys scored, g < h of them at or above the name):
        p = (g + 1) / (n + 1).

Under the null that the name is exchangeable with its decoys, P(p <= a) <= a for every a
(Besag & Clifford, Sec. 2; ties count against the name), so the correction over the
roster (BH or Bonferroni) applies as with a fixed number of decoys. A kind's stream stops
once every name of that kind has met h decoys at or above it (their p-values are fixed),
or at the cap.

A name the correction leaves unflagged is then either

- **no evidence**: the one-sided 95 % Clopper-Pearson lower bound of its exceedance
  probability (the p-value infinitely many decoys would give) lies above the level it
  would need to be flagged next (BH: alpha (R + 1) / m with R names flagged; Bonferroni:
  alpha / m; no correction: alpha), so more decoys would, with 95 % confidence, not flag
  it; or
- **undecided**: that bound is at or below the level: the decoys drawn (the cap, or every
  decoy the source holds) cannot tell, and the scan says how many would be needed.

This decision rule is the project's (the paper has a single feature and a t-test); its
error: a flag keeps the correction's guarantee (exact p-values); a "no evidence" is wrong
about the infinite-decoy decision with probability at most 5 % per name.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import scipy.stats

from monai_forget.checks import COUNT, check_in
from monai_forget.memorisation.decoys import DecoyTest

__all__ = [
    "EXCEEDANCES",
    "UNDECIDED_CONFIDENCE",
    "exceedances_in",
    "lower_bound",
    "needed_decoys",
    "sequential_decoy_test",
    "settling_level",
]

#: h: decoys at or above a name after which its p-value is fixed (Besag & Clifford
#: suggest h of 10 to 20; 10 keeps the control scans' streams short).
EXCEEDANCES = 10
#: Confidence of the bound that separates "no evidence" from "undecided".
UNDECIDED_CONFIDENCE = 0.95


def exceedances_in(statistic: float, decoys: np.ndarray, h: int) -> tuple[int, int]:
    """``(g, l)``: the decoys at or above ``statistic`` and how many of the stream were
    followed: up to the ``h``-th such decoy, or the whole stream when fewer than ``h``."""
    at_or_above = np.flatnonzero(np.asarray(decoys, np.float64) >= float(statistic))
    if at_or_above.size >= h:
        return h, int(at_or_above[h - 1]) + 1
    return int(at_or_above.size), int(np.asarray(decoys).size)


def sequential_decoy_test(
    statistic: float, decoy_statistics: object, h: int = EXCEEDANCES, decoys: Sequence[str] = ()
) -> DecoyTest:
    """Besag & Clifford's sequential p-value of ``statistic`` over the decoys' stream, in
    order (module docstring). ``rank`` is ``1 + g`` and ``n_decoys`` the decoys followed
    (``l``, or the whole stream); ``exposure`` is ``-log2(p)``.

    Raises:
        ValueError: no decoys, NaN values, or ``h`` below 1.
    """
    d = np.array(decoy_statistics, dtype=np.float64, copy=True).ravel()
    m = float(statistic)
    check_in("h (exceedances to stop at)", h, COUNT)
    if d.size == 0:
        raise ValueError("the calibrated test needs at least one decoy; pass decoys >= 1")
    if math.isnan(m) or np.isnan(d).any():
        raise ValueError("M of the feature or of a decoy is NaN; check the model's outputs")
    g, followed = exceedances_in(m, d, h)
    p = h / followed if g == h else (g + 1) / (followed + 1)
    d = d[:followed]
    d.flags.writeable = False
    return DecoyTest(m, followed, g + 1, p, -math.log2(p), d, tuple(decoys)[:followed])


def lower_bound(g: int, n: int, confidence: float = UNDECIDED_CONFIDENCE) -> float:
    """One-sided Clopper-Pearson lower bound of a probability from ``g`` successes in
    ``n`` trials (0 when ``g`` is 0)."""
    if g <= 0:
        return 0.0
    return float(scipy.stats.beta.ppf(1.0 - confidence, g, n - g + 1))


def settling_level(correction: str, alpha: float, n_names: int, n_flagged: int) -> float:
    """The p-value an unflagged name would need to be flagged next: BH's step at rank
    ``n_flagged + 1``, Bonferroni's ``alpha / m``, or ``alpha`` without a correction."""
    if correction == "bh":
        return alpha * (n_flagged + 1) / n_names
    if correction == "bonferroni":
        return alpha / n_names
    return alpha


def needed_decoys(g: int, level: float) -> int:
    """Decoys that would let a name with ``g`` decoys at or above it reach ``level``: the
    smallest ``n`` with ``(g + 1) / (n + 1) < level``."""
    return math.floor((g + 1) / level)
