"""Benchmark: the reference-model audit under a shift the reference models cannot see.

Issue 66, item 1. D_Q's membership scores are drawn, then moved by a shift the
reference models do not see (the target alone scores D_Q's site lower, or higher); the
audit decides through the package's own decision functions
(:meth:`~monai_forget.audit.refmodel_calibration.MembershipCalibration.fit`,
:func:`~monai_forget.audit.refmodel.set_test` with the hidden-shift tolerance,
:func:`~monai_forget.audit.refmodel.refmodel_decision`). Scores: known non-members
N(0, 1), known members N(``--effect``, 1), ``--known`` of each; D_Q of |D_Q| scores, a
share of them member-like, then shifted by ``shift`` sd (the non-members' sd is the
unit). alpha 0.05, margin 0.5. The shift check cannot see these shifts by construction
(it reads the reference models' outputs, which the shift leaves alone): its miss rate
here is 100 %, so every cell is decided as the audit would decide it.

Per cell: the share of "forgotten" (false wherever the share >= the margin), and of
"forgotten" whose tolerance covers the cell's downward shift (tolerance >= |shift|:
what a reader who trusts the tolerance takes as "forgotten"); the guarantee of
:mod:`monai_forget.audit.hidden_shift` is that the second stays <= alpha at every share
>= the margin, whatever the shift.

The record (numbers, with the command, commit, date and machine) is written beside the
markdown; ``--from-record`` re-renders the markdown from it without simulating.

Usage::

    python benchmarks/hidden_shift.py --draws 400 \\
        --record benchmarks/results/hidden_shift.json --out benchmarks/results/hidden_shift.md
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import scipy.stats
from _markdown import add_record_arguments, finish, log, run_recorded, say, say_provenance

from monai_forget.audit.refmodel import refmodel_decision, set_test
from monai_forget.audit.refmodel_calibration import MembershipCalibration
from monai_forget.audit.result import FORGOTTEN, NOT_FORGOTTEN

ALPHA, MARGIN = 0.05, 0.5
SHIFTS = (-1.0, -0.5, -0.2, 0.0, 0.2, 0.5)
SHARES = (0.0, 0.5, 1.0)
SIZES = (20, 50, 200)
#: Never-seen images of the shifted site drawn to measure its hidden shift per audit.
POOL = 2000


def calibrated_shift(calibration: MembershipCalibration, unseen: np.ndarray) -> float:
    """How far the site's never-seen scores sit below the known non-members in membership
    probability, in sd of the known non-members' (the tolerance's unit)."""
    nonmembers = calibration.nonmembers
    return float((nonmembers.mean() - calibration(unseen).mean()) / nonmembers.std(ddof=1))


def draw(rng, args, share: float, size: int, shift: float):
    """Known members, known non-members and D_Q's scores of one audit."""
    members = rng.normal(args.effect, 1.0, args.known)
    nonmembers = rng.normal(0.0, 1.0, args.known)
    k = round(share * size)
    query = np.concatenate([rng.normal(args.effect, 1.0, k), rng.normal(0.0, 1.0, size - k)])
    return members, nonmembers, query + shift


def cell(args, share: float, size: int, shift: float) -> dict:
    """Counts of one cell over ``args.draws`` audits."""
    rng = np.random.default_rng([args.seed, round(100 * share), size, round(100 * shift) + 500])
    counts = {"draws": args.draws, "forgotten": 0, "not_forgotten": 0, "covered": 0}
    tolerances, hidden = [], []
    for i in range(args.draws):
        members, nonmembers, query = draw(rng, args, share, size, shift)
        calibration = MembershipCalibration.fit(members, nonmembers, seed=i)
        test = set_test(query, calibration, alpha=ALPHA, margin=MARGIN, seed=i,
                        n_resamples=args.permutations, with_tolerance=True)  # fmt: skip
        decision = refmodel_decision(test, ALPHA)
        counts["not_forgotten"] += decision == NOT_FORGOTTEN
        hidden.append(calibrated_shift(calibration, rng.normal(0.0, 1.0, POOL) + shift))
        if decision == FORGOTTEN:
            counts["forgotten"] += 1
            tolerances.append(test.shift_tolerance)
            counts["covered"] += test.shift_tolerance >= max(hidden[-1], 0.0) - 1e-9
    counts["tolerance_median"] = float(np.median(tolerances)) if tolerances else None
    counts["hidden_median"] = float(np.median(hidden))
    return {"share": share, "size": size, "shift": shift, **counts}


def rate(k: int, n: int) -> str:
    ci = scipy.stats.binomtest(k, n).proportion_ci(0.95, method="wilson")
    return f"{k / n:.3f} [{ci.low:.3f}, {ci.high:.3f}]"


def upper(k: int, n: int) -> float:
    return float(scipy.stats.binomtest(k, n).proportion_ci(0.95, method="wilson").high)


def render(record: dict) -> int:
    """The markdown of a record (the same from a fresh run and from ``--from-record``)."""
    s = record["settings"]
    say("# The reference-model audit under a shift the reference models cannot see")
    say()
    say_provenance(record["provenance"])
    say()
    say(
        f"Simulated through the package's decision functions: known non-members N(0, 1) and "
        f"members N({s['effect']}, 1), {s['known']} of each; D_Q a share of member-like "
        f"scores, moved by a hidden shift (sd of the non-members' scores) the reference "
        f"models cannot see; alpha {ALPHA}, margin {MARGIN}, {s['draws']} audits per cell, "
        f"permutation tests of {s['permutations']} relabellings; 95 % Wilson intervals. "
        "The tolerance is read on D_Q's membership probabilities (the calibrated scores "
        "the decision reads); each audit's hidden shift is measured on the same scale, "
        f"{POOL} never-seen scores of the shifted site against the known non-members. "
        '"covered": forgotten with a tolerance >= that audit\'s hidden shift.'
    )
    say()
    say("| hidden shift (sd of raw scores) | on the calibrated scale (median) | share | "
        "\\|D_Q\\| | forgotten | forgotten, tolerance covers the shift | not forgotten | "
        "median tolerance of a forgotten |")  # fmt: skip
    say("|---|---|---|---|---|---|---|---|")
    targets, held = [], True
    for c in record["cells"]:
        n = c["draws"]
        median = "-" if c["tolerance_median"] is None else f"{c['tolerance_median']:.2f}"
        say(
            f"| {c['shift']:+.1f} | {c['hidden_median']:+.2f} | {c['share']:g} | {c['size']} | "
            f"{rate(c['forgotten'], n)} | "
            f"{rate(c['covered'], n)} | {rate(c['not_forgotten'], n)} | {median} |"
        )
        if c["share"] >= MARGIN:
            ok = c["covered"] / n <= ALPHA and upper(c["covered"], n) <= 0.1
            held &= ok
            if not ok:
                targets.append(
                    f"- shift {c['shift']:+.1f}, share {c['share']:g}, |D_Q| {c['size']}: "
                    f"covered forgotten {rate(c['covered'], n)} **missed**"
                )
    say()
    shifted = [c for c in record["cells"] if c["shift"] < 0 and c["share"] >= MARGIN]
    worst = max(shifted, key=lambda c: c["forgotten"] / c["draws"])
    targets.insert(
        0,
        f"- every cell with share >= the margin: forgotten with a tolerance covering the hidden "
        f"shift <= alpha (Wilson upper <= 0.1): {'**met**' if held else '**missed**'}",
    )
    targets.append(
        f"- without the tolerance (any forgotten), the worst hidden-shift cell: shift "
        f"{worst['shift']:+.1f}, share {worst['share']:g}, |D_Q| {worst['size']}: "
        f"{rate(worst['forgotten'], worst['draws'])} (the hazard the tolerance reports)"
    )
    return finish(targets, None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=400)
    parser.add_argument("--effect", type=float, default=1.0, help="members' shift (sd)")
    parser.add_argument("--known", type=int, default=200, help="known members (and non-members)")
    parser.add_argument("--permutations", type=int, default=999)
    parser.add_argument("--seed", type=int, default=0)
    add_record_arguments(parser)
    args = parser.parse_args()

    def simulate() -> dict:
        cells = []
        for shift in SHIFTS:
            for share in SHARES:
                for size in SIZES:
                    log(f"shift {shift:+.1f}, share {share:g}, |D_Q| {size}")
                    cells.append(cell(args, share, size, shift))
        names = ("draws", "effect", "known", "permutations", "seed")
        return {"settings": {k: getattr(args, k) for k in names}, "cells": cells}

    return run_recorded(args, simulate, render)


if __name__ == "__main__":
    sys.exit(main())
