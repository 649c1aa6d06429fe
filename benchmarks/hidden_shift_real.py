"""Benchmark: the hidden-shift tolerance on real data, a withdrawn site the target knows
less well than the reference models let it seem (issue 66, item 1, the real cells).

The trainings of ``benchmarks/audit_site_shift.py``'s down direction: PneumoniaMNIST's
train and val splits are the consortium's source A, its test split (collected apart) is
the withdrawn site B. Per seed, a target trained on source A's set and only 100 of B's
images, 8 offline reference models on seeded halves of A's population (none saw B). D_Q
is drawn from B: a share of it from the 100 images the target trained on, the rest from
B's images it never saw; the product's offline audit (RMIA's score, the permutation test,
the bound, the shift check; alpha 0.05, margin 0.5) with the known non-members'
membership probabilities, so each "forgotten" carries its hidden-shift tolerance
(:mod:`monai_forget.audit.hidden_shift`).

The hidden shift of each training is measured, not assumed: how far B's never-seen images'
membership probabilities (the target's scores after the reference models' calibration:
the part of the shift they cannot see, on the scale the tolerance is read on) sit below
the known non-members', in sd of the known non-members': ``(mean(non-members) - mean(B
never seen)) / sd(non-members)``, over all of B's never-seen images. Per cell:
"forgotten" (false wherever the share >= the margin), the "forgotten" whose tolerance
covers the training's hidden shift (what a reader who trusts the tolerance takes as
"forgotten"), and the shift check's own miss rate (the share of audits it let through
while D_Q came from the shifted site).

The record (numbers, with the command, commit, date and machine) is written beside the
markdown; ``--from-record`` re-renders it without the data or the models.

Usage (the models are cached in ``--cache-dir`` by ``_refmodel_cells.few_training``,
as the site-shift benchmark's: about 10 minutes a training on one core; the audits about
a minute)::

    python benchmarks/hidden_shift_real.py --cache-dir CACHE --seeds 0 1 2 3 4 \\
        --record benchmarks/results/hidden_shift_real.json \\
        --out benchmarks/results/hidden_shift_real.md
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _markdown import add_record_arguments, log, run_recorded, say, say_provenance
from _refmodel_cells import FEW_TRAINED, MARGINS, SHIFT_SHARES, Audit, draw, few_training

from monai_forget.audit.result import FORGOTTEN
from monai_forget.rates import measured_rate, rate_text

SIZES = (20, 50, 200)
MARGIN = MARGINS[-1]
DATASET = "pneumoniamnist"


#: Where D_Q comes from: (the target that audits it, the pool of its never-seen images).
SOURCES = {FEW_TRAINED: (1, "other_site_unseen"), "same": (0, "never")}


def hidden_shift(audit: Audit, pool: str) -> float:
    """How far the never-seen images of ``pool`` sit below the known non-members in
    membership probability (the target's scores after the reference models' calibration,
    mapped as D_Q's are), in sd of the known non-members': the tolerance's unit."""
    nonmembers = audit.calibration.nonmembers
    unseen = audit.calibration(audit.pools[pool][0])
    return float((nonmembers.mean() - unseen.mean()) / nonmembers.std(ddof=1))


def training_cells(seed: int, args: argparse.Namespace) -> dict:
    """One training: each source's hidden shift and every cell's audits (decision,
    tolerance, whether the shift check fired)."""
    run = few_training(DATASET, seed, Path(args.cache_dir), args.references)
    shifts, cells = {}, {}
    for source, (target, pool) in SOURCES.items():
        audit = Audit.of(run, target, seed)
        shifts[source] = hidden_shift(audit, pool)
        for share in SHIFT_SHARES:
            for size in SIZES:
                if source == FEW_TRAINED and round(share * size) > len(run["b_train"]):
                    continue
                cells[f"{source}|{share}|{size}"] = audits_of(audit, source, share, size, seed,
                                                              args.draws)  # fmt: skip
    log(f"{DATASET} seed {seed}: hidden shifts {shifts}")
    return {"hidden_shift": shifts, "cells": cells}


def audits_of(audit: Audit, source: str, share: float, size: int, seed: int, draws: int):
    """[forgotten, its tolerance or None, the shift check fired] of each seeded D_Q."""
    rng = np.random.default_rng([seed, round(100 * share), size, 66])
    audits = []
    for i in range(draws):
        out = audit.decide(draw(source, share, size, audit, rng), seed=i, tolerance=True)
        tol = float(out["tolerance"])
        forgotten = out["decisions"][MARGIN] == FORGOTTEN
        audits.append([forgotten, tol if math.isfinite(tol) else None, out["shifted"]])
    return audits


def render(record: dict) -> int:
    trainings = record["trainings"]
    say("# The hidden-shift tolerance on real data: a withdrawn site the target hardly knows\n")
    say_provenance(record["provenance"])
    say("\n" + " ".join(__doc__.split("\n\n")[1:3]).replace("\n", " ") + "\n")
    say("Each training's hidden shift (sd of the known non-members' membership "
        "probabilities; positive: the "
        "pool's never-seen images score lower under the target than the reference models "
        "explain), for D_Q from the withdrawn site and, as a control, from the consortium's "
        "own source (the first target, which never saw site B):\n")  # fmt: skip
    say("| seed | " + " | ".join(SOURCES) + " |")
    say("|---" * (len(SOURCES) + 1) + "|")
    for seed, t in trainings.items():
        say(f"| {seed} | " + " | ".join(f"{t['hidden_shift'][s]:+.2f}" for s in SOURCES) + " |")
    say(f"\nAudits per cell: {record['draws']} per training x {len(trainings)} trainings; "
        "95 % Wilson intervals (draws of one training share its models).\n")  # fmt: skip
    say("| D_Q from | share remembered | \\|D_Q\\| | audits | forgotten | forgotten, tolerance "
        "covers the training's hidden shift | median tolerance of a forgotten (sd) | share of "
        "forgotten with tolerance 0 | shift check let it through |")  # fmt: skip
    say("|---" * 9 + "|")
    worst = (0.0, "")
    for key in trainings[next(iter(trainings))]["cells"]:
        source, share, size = key.split("|")
        rows = [(t["hidden_shift"][source], a) for t in trainings.values()
                for a in t["cells"][key]]  # fmt: skip
        n = len(rows)
        tolerances = [a[1] for _, a in rows if a[0] and a[1] is not None]
        covered = sum(a[0] and a[1] is not None and a[1] >= shift for shift, a in rows)
        zero = f"{sum(t == 0 for t in tolerances)}/{len(tolerances)}" if tolerances else "-"
        c_rate = measured_rate(covered, n)
        say(f"| {source} | {share} | {size} | {n} | "
            f"{rate_text(measured_rate(sum(a[0] for _, a in rows), n))} | {rate_text(c_rate)} | "
            f"{np.median(tolerances) if tolerances else float('nan'):.2f} | {zero} | "
            f"{rate_text(measured_rate(sum(not a[2] for _, a in rows), n))} |")  # fmt: skip
        if float(share) >= MARGIN and c_rate["high"] >= worst[0]:
            worst = (c_rate["high"], f"{source}, share {share}, |D_Q| {size}: {rate_text(c_rate)}")
    say("\n## Targets\n")
    mark = "**met**" if worst[0] <= 0.1 else "**missed**"
    say('- covered false "forgotten" <= alpha (Wilson upper <= 0.1) in every real cell with '
        f"share >= the margin: worst {worst[1]} {mark}")  # fmt: skip
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache-dir", default="/tmp/monai-forget-site-shift")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--references", type=int, default=8)
    parser.add_argument("--draws", type=int, default=100, help="audits per cell and training")
    add_record_arguments(parser)
    args = parser.parse_args()
    torch.set_num_threads(1)

    def measure() -> dict:
        trainings = {str(s): training_cells(s, args) for s in args.seeds}
        return {"draws": args.draws, "trainings": trainings}

    return run_recorded(args, measure, render)


if __name__ == "__main__":
    sys.exit(main())
