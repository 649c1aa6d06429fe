"""How far a "forgotten" holds against a shift the reference models cannot see.

The reference-model audit's bound (:func:`~monai_forget.audit.remembered_share.share_bound`)
compares D_Q's membership scores with the known members' and non-members'. Its guarantee
(at a true membership strength >= the margin, a bound below the margin at most ``alpha``
of the time) assumes that D_Q, had the target never seen it, would score like the known
non-members. When D_Q's site sits lower under the target alone (a scanner or population
the target handles worse than the reference models do, so the reference models cannot
correct for it), a remembered D_Q can score like never-seen data and be called forgotten:
simulated, half of D_Q remembered and a hidden shift of 0.5 sd, "forgotten" in 43-96 % of
audits (issue 66).

No audit can see such a shift from the target's outputs on D_Q alone, so each
"forgotten" carries its tolerance instead: the largest downward shift ``t`` of D_Q's
membership probabilities (the calibrated scores the test and the bound read,
:class:`~monai_forget.audit.refmodel_calibration.MembershipCalibration`), in standard
deviations of the known non-members' membership probabilities, on a grid of
:data:`TOLERANCE_STEP` up to :data:`TOLERANCE_MAX`, such that the audit still decides
"forgotten" (the bound below the margin, no evidence of remembering) on D_Q's
probabilities raised by any grid shift up to ``t``, everything else as it was (ours; a
tipping-point sensitivity analysis). Its guarantee: if D_Q's probabilities sit lower by a
shift ``delta`` (a grid value, the same for every sample), then "forgotten with tolerance
>= delta" implies that the audit would have said "forgotten" on the unshifted ones, so it
happens no more often than the audit's own false "forgotten" without a shift, whatever
``delta`` is.

Why the calibrated scale, not the raw scores': on real models the raw scores are no
location family. PneumoniaMNIST's RMIA scores have an atom at 0 (interquartile range 0)
and a tail of misclassified images, so their standard deviation is the tail's; on that
scale one grid step moved the atom past the members' and every "forgotten" measured had a
tolerance of 0 (376 of 376 never-seen sets of 200, ``benchmarks/hidden_shift_real.py``
at the previous definition). The calibrated probabilities are what the decision reads,
and a hidden shift is measured on them the same way (the site's never-seen images against
the known non-members). benchmarks/hidden_shift.py (simulated) and
benchmarks/hidden_shift_real.py (PneumoniaMNIST's test split as the site) measure it
through the package's decision functions.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

__all__ = ["TOLERANCE_MAX", "TOLERANCE_STEP", "hidden_shift_tolerance", "tolerance_text"]

#: The grid of hidden shifts a tolerance is read on (sd of the non-members' scores).
TOLERANCE_STEP = 0.05
#: The largest shift on the grid: a tolerance this large reads "at least" it.
TOLERANCE_MAX = 3.0


def hidden_shift_tolerance(
    query: np.ndarray,
    nonmember_scores: np.ndarray,
    still_forgotten: Callable[[np.ndarray], bool],
) -> float:
    """The largest hidden downward shift under which the audit still decides "forgotten".

    Args:
        query: D_Q's membership probabilities (the calibrated scores the decision reads).
        nonmember_scores: the known non-members' membership probabilities: their standard
            deviation is the unit of the shift.
        still_forgotten: whether the audit decides "forgotten" on these D_Q scores, the
            rest as it was (the bound below the margin and no evidence of remembering:
            :func:`~monai_forget.audit.refmodel.set_test` passes the decision rule).

    Returns:
        The tolerance in sd (a multiple of :data:`TOLERANCE_STEP`, at most
        :data:`TOLERANCE_MAX`); NaN when the unshifted scores are not "forgotten" (there
        is nothing to qualify) or the non-members' scores do not vary.
    """
    q = np.asarray(query, dtype=np.float64)
    spread = float(np.std(np.asarray(nonmember_scores, dtype=np.float64), ddof=1))
    if not (math.isfinite(spread) and spread > 0):
        return math.nan
    tolerance = math.nan
    for step in range(round(TOLERANCE_MAX / TOLERANCE_STEP) + 1):
        shift = step * TOLERANCE_STEP
        if not still_forgotten(q + shift * spread):
            break
        tolerance = shift
    return tolerance


def tolerance_text(tolerance: float) -> str:
    """The tolerance in a sentence a reader can act on (empty when there is none)."""
    if not math.isfinite(tolerance):
        return ""
    shift = (
        "shift the reference models cannot see (the target alone scoring D_Q's site lower "
        "than they do)"
    )
    if tolerance <= 0:
        return f"Even a small {shift} could hide remembering here (hidden-shift tolerance 0 sd)."
    if tolerance >= TOLERANCE_MAX:
        return (
            f"This stands against a {shift}, by up to {TOLERANCE_MAX:.2f} sd of the known "
            "non-members' membership probabilities (the largest checked)."
        )
    return (
        f"This stands against a {shift}, by up to {tolerance:.2f} sd of the known non-members' "
        "membership probabilities; a larger one could hide remembering."
    )
