"""A D_Q made of copies, with and without collapsing them (issue 66, item 2).

Simulated through the package's own decision functions: each audit draws known members'
and known non-members' membership scores (normal, the members shifted by ``--effect``
sd), fits :class:`MembershipCalibration` on them, and decides a never-seen D_Q (scores
drawn as non-members') with :func:`set_test` and :func:`refmodel_decision`. D_Q is
``--size`` images made of K distinct images repeated (a copy scores as its original):
decided as given (every copy a sample, the package before this issue) and collapsed (the
distinct images only, what every auditor now does), beside D_Q of ``--size`` and of K
distinct images. A false "not forgotten" on a never-seen D_Q is the error counted; 95 %
Wilson intervals.

Usage::

    python benchmarks/duplicated_query.py --audits 1000 --out benchmarks/results/duplicated_query.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import wilson
from _markdown import finish, say

from monai_forget.audit.refmodel import refmodel_decision, set_test
from monai_forget.audit.refmodel_calibration import MembershipCalibration
from monai_forget.audit.result import NOT_FORGOTTEN
from monai_forget.defaults import REFMODEL_ALPHA, REFMODEL_MARGIN

#: Distinct images in D_Q (each repeated size / K times).
DISTINCT = (2, 5, 10, 25)


def audit(query: np.ndarray, rng: np.random.Generator, args: argparse.Namespace) -> str:
    members = rng.normal(args.effect, 1.0, args.known)
    nonmembers = rng.normal(0.0, 1.0, args.known)
    seed = int(rng.integers(2**31))
    calibration = MembershipCalibration.fit(members, nonmembers, seed)
    test = set_test(query, calibration, alpha=REFMODEL_ALPHA, margin=REFMODEL_MARGIN,
                    n_resamples=args.permutations, seed=seed)  # fmt: skip
    return refmodel_decision(test, REFMODEL_ALPHA)


def cell(k: int | None, collapse: bool, args: argparse.Namespace) -> tuple[int, int]:
    """False "not forgotten" count over ``args.audits`` never-seen D_Q: ``k`` distinct
    images repeated to ``args.size`` (``None``: ``args.size`` distinct)."""
    rng = np.random.default_rng([args.seed, k or 0, int(collapse)])
    wrong = 0
    for _ in range(args.audits):
        distinct = rng.normal(0.0, 1.0, k or args.size)
        query = distinct if collapse or k is None else np.resize(distinct, args.size)
        wrong += audit(query, rng, args) == NOT_FORGOTTEN
    return wrong, args.audits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--audits", type=int, default=1000)
    parser.add_argument("--size", type=int, default=50, help="images in D_Q as given")
    parser.add_argument("--known", type=int, default=200, help="known members, and non-members")
    parser.add_argument("--effect", type=float, default=1.0, help="members' shift, in sd")
    parser.add_argument("--permutations", type=int, default=999)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    say('### A D_Q of copies: false "not forgotten", as given and collapsed (issue 66)\n')
    say(f"`{' '.join(['python', 'benchmarks/duplicated_query.py', *sys.argv[1:]])}`. "
        f"{args.audits} audits per row of a never-seen D_Q of {args.size} images through "
        "MembershipCalibration, set_test and refmodel_decision (alpha "
        f"{REFMODEL_ALPHA}, margin {REFMODEL_MARGIN}, {args.permutations} permutations); "
        f"{args.known} known members (scores shifted by {args.effect} sd) and non-members "
        "drawn afresh for each audit. 95 % Wilson intervals.\n")  # fmt: skip
    base, n = cell(None, False, args)
    say('| D_Q | decided on | false "not forgotten" |\n|---|---|---|')
    say(f"| {args.size} distinct images | {args.size} | {wilson(base, n)} |")
    rows = []
    for k in DISTINCT:
        given, _ = cell(k, False, args)
        collapsed, _ = cell(k, True, args)
        reps = args.size // k
        say(f"| {k} images x {reps} | {args.size} (as given) | {wilson(given, n)} |")
        say(f"| {k} images x {reps} | {k} (collapsed) | {wilson(collapsed, n)} |")
        rows.append((k, given, collapsed))
    targets = []
    for k, given, collapsed in rows:
        gap = 100 * (collapsed - base) / n
        mark = "**met**" if gap <= 2 else "**missed**"
        targets.append(f"- {k} images x {args.size // k}, collapsed: {collapsed}/{n} against "
                       f"{base}/{n} for {args.size} distinct ({gap:+.1f} points; within 2 "
                       f"above, or below): {mark} (as given: {given}/{n})")  # fmt: skip
    return finish(targets, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
