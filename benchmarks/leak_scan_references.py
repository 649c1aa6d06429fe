"""Leak scan with reference models: false alarms and detection, beside the scan without.

Issue 12's leak-scan experiment (MLP-1 on MNIST, the 50-name roster, one name burned
into one top-influence training image, or none for control models; the models of
``unique_feature_memorisation.py``, same seeds and cache) scanned twice:

- **decoys only** (the scan's default): each name's M ranked among 1,000 decoys of its
  kind on the audited model;
- **with reference models**: ``--references`` MLP-1 models trained on the same training
  images without any name (seeds ``seed + 300 + k``) are scanned with the same decoys,
  and each text's M is taken relative to theirs
  (:func:`monai_forget.memorisation.reference_scan.relative_to_references`, what
  ``leak_scan(..., references=...)`` computes).

One decoy draw (``--decoy-seed``) serves every model, so each reference model is scanned
once; a scan is valid with any decoy draw that does not depend on the model. Prints, per
arm, how often the injected name ranks first and is flagged (BH at 0.05 over the roster)
and how many control scans flag any name, with 95 % Clopper-Pearson intervals.

Run::

    python benchmarks/leak_scan_references.py --out benchmarks/results/leak_scan_references.md
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _ufm_engine as ufm
from _leak_scan_references import (
    outcome,
    pvalues,
    scanned,
)
from _markdown import log, say, write

from monai_forget.memorisation.reference_scan import relative_to_references


def reference_model(k: int, seed: int):
    split = ufm.STATE["splits"]["mnist"]
    model, _ = ufm.trained(f"refscan/model/{k}", "mlp-1", split, split.train, seed + 300 + k)
    return model, None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ufm.add_scan_options(parser)
    parser.add_argument("--references", type=int, default=8)
    parser.add_argument("--decoy-seed", type=int, default=7)
    parser.add_argument("--reps", type=int, default=10, help="name on a top-influence image")
    parser.add_argument("--controls", type=int, default=20, help="control models (no name)")
    args = parser.parse_args()
    cfg = ufm.FULL
    torch.set_num_threads(1)
    start = time.perf_counter()
    ufm.init_cached(args)
    ufm.job_reference("mnist", "mlp-1")  # the top-influence images

    def scan_of(placement: str, rep: int) -> dict:
        def build():
            model, _, name, _ = ufm.scan_model(placement, rep)
            return model, name

        log(f"{placement} {rep}")
        return scanned(f"refscan/{placement}/{rep}", build, args.decoy_seed, args.seed + 7)

    refs = []
    for k in range(args.references):
        log(f"reference {k}")
        build = lambda k=k: reference_model(k, args.seed)  # noqa: E731
        refs.append(scanned(f"refscan/reference/{k}", build, args.decoy_seed, args.seed + 7))
    texts = refs[0]["texts"]
    if any(r["texts"] != texts for r in refs):
        raise RuntimeError("the reference scans drew different decoys; clear refscan/ keys")
    targets = [("top", r) for r in range(args.reps)] + [
        ("control", r) for r in range(args.controls)
    ]
    rows = []
    for placement, rep in targets:
        rec = scan_of(placement, rep)
        m = np.array(rec["m"])
        plain = outcome(pvalues(m, texts), m, rec["name"], cfg.alpha)
        stat, _ = relative_to_references(
            m, [np.array(r["m"]) for r in refs], texts, len(ufm.ROSTER)
        )
        with_refs = outcome(pvalues(stat, texts), stat, rec["name"], cfg.alpha)
        rows.append((placement, rep, rec["name"], plain, with_refs))
    report(rows, args, time.perf_counter() - start)
    return 0


def report(rows: list, args: argparse.Namespace, seconds: float) -> None:
    say("### Leak scan with reference models (MLP-1 on MNIST)")
    say()
    say(f"`python benchmarks/leak_scan_references.py --references {args.references} "
        f"--decoy-seed {args.decoy_seed} --reps {args.reps} --controls {args.controls}`; seed "
        f"{args.seed}; models as `unique_feature_memorisation.py` (names and images "
        f"[{args.seed}, 500, rep], models seed {args.seed}+200+rep); reference models seed "
        f"{args.seed}+300+k, trained on the same 1,000 images without any name; 1,000 decoys "
        "per name length, one draw for every model; BH at 0.05 over the 50 names.")  # fmt: skip
    say()
    say("| rep | name | decoys only: rank | flagged | with references: rank | flagged |")
    say("|---|---|---|---|---|---|")
    for placement, rep, name, plain, refd in rows:
        if placement == "top":
            say(f"| {rep} | {name} | {plain['rank']} | {name in plain['flagged']} | "
                f"{refd['rank']} | {name in refd['flagged']} |")  # fmt: skip
    say()
    tops = [r for r in rows if r[0] == "top"]
    controls = [r for r in rows if r[0] == "control"]

    def rate(k: int, n: int) -> str:
        lo, hi = ufm.interval(k, n)
        return f"{k}/{n} ({100 * k / n:.0f} %; {100 * lo:.0f}-{100 * hi:.0f} %)"

    say("| arm | injected name ranked 1st | injected name flagged | control scans: any "
        "name flagged | control scans: top-ranked names |")  # fmt: skip
    say("|---|---|---|---|---|")
    for arm, i in (("decoys only", 3), ("with references", 4)):
        first = sum(r[i]["rank"] == 1 for r in tops)
        flagged = sum(r[2] in r[i]["flagged"] for r in tops)
        false = sum(bool(r[i]["flagged"]) for r in controls)
        top_names = {}
        for r in controls:
            top_names[r[i]["top"]] = top_names.get(r[i]["top"], 0) + 1
        common = ", ".join(
            f"{n} x{c}" for n, c in sorted(top_names.items(), key=lambda x: -x[1])[:3]
        )
        say(f"| {arm} | {rate(first, len(tops))} | {rate(flagged, len(tops))} | "
            f"{rate(false, len(controls))} | {common} |")  # fmt: skip
    say()
    say(f"Wall time of this invocation: {seconds / 60:.1f} min (2 shared cores, one thread).")
    if args.out:
        write(args.out)


if __name__ == "__main__":
    sys.exit(main())
