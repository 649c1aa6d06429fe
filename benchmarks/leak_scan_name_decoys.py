"""Leak scan on control models: decoys that are names against random-letter decoys.

Issue 36, items 1 and 3. The decoy p-value of a roster name is exact only if the name is
exchangeable with its decoys on a model that never saw it. Control models (MLP-1 on
MNIST, the 50-name roster, no name anywhere in training: the control models of
``unique_feature_memorisation.py``, same seeds and cache) are scanned twice with the
same seeds, once per decoy source:

- ``letters``: random letters of each name's kind;
- ``names``: real given and family names of the same length (Faker's per-locale lists,
  :mod:`monai_forget.memorisation.name_decoys`; the scan's default, chosen on these
  measurements: the source whose control scans stayed within 5 %).

The power each source leaves (``--series 1 3 10 30 --reps R --cells mnist:mlp-1 ...``): a
4-letter roster name burned into K training images of one class (a patient's series) of
each data set, the network trained as the control models, R models per K, scanned with
both sources; detected = flagged and ranked first: the scan's power curve.

On a control model every roster name's p-value should be uniform: measured as the share
of (scan, name) pairs with p <= 0.05 and <= 0.01 (exact tests give at most 5 % and 1 %),
a Kolmogorov-Smirnov test of all of them against the uniform distribution, the names
whose p <= 0.05 most often, and the share of scans flagging any name (BH at 0.05 over the
roster), each with a 95 % Wilson interval.

``--control-cells`` gives the data sets and networks of the control models (``--controls``
models each). ``--shard K/N`` runs every N-th model from K into the cache (N processes at
once, then one with ``0/1`` reports); ``--device cuda`` trains and scans on a GPU (its
models are other draws than the CPU's: cuDNN's kernels are not bitwise those of the CPU);
``--cached-only`` reports the scans in the cache and computes none. Series scans that
flag several names also test each against its likeness to the others
(:mod:`monai_forget.memorisation.attribution`); the report counts the other names flagged
before and after.

Run (the results file's command; models and scans are cached under ``--cache``)::

    python benchmarks/leak_scan_name_decoys.py --controls 100 \
        --control-cells mnist:mlp-1 pneumoniamnist:mlp-1 \
        --cells mnist:mlp-1 pneumoniamnist:mlp-1 --reps 20 5 --series 1 3 10 30 \
        --out benchmarks/results/leak_scan_name_decoys.md
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import scipy.stats
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _ufm_engine as ufm
from _common import wilson
from _markdown import log, say, write
from _name_decoy_models import (
    DEFAULT_CELL,
    control_model,
    series_model,
)

from monai_forget.memorisation import LeakScanConfig, leak_scan
from monai_forget.memorisation.name_decoys import faker_version

SOURCES = ("letters", "names")


def scan(rep: int, source: str, series: int = 0, cell: str = DEFAULT_CELL) -> dict:
    """Control model ``rep`` (or ``cell``'s ``series`` model) scanned with ``source``
    decoys (cached in the store). A series scan that flagged several names and was
    cached before the scan attributed them is run again (same seeds, same flags)."""
    store, seed, cfg = ufm.STATE["store"], ufm.STATE["seed"], ufm.STATE["cfg"]
    arm = f"series{series}" if series else "control"
    where = "" if cell == DEFAULT_CELL else "{}/{}/".format(*cell.split(":"))
    key = f"namedecoys/{where}{arm}/{rep}/{source}"
    record = store.get(key)
    stale = (
        record is not None and series and len(record["flagged"]) > 1 and "attributed" not in record
    )
    if record is None and ufm.STATE.get("cached_only"):
        return None
    if record is None or stale:
        if series:
            model, name = series_model(series, rep, cell)
        else:
            model, name = control_model(rep, cell), None
        decoy_seed = int(np.random.SeedSequence([seed, 901, rep]).generate_state(1)[0])
        device = ufm.STATE.get("device", "cpu")
        config = LeakScanConfig(
            decoy_seed=decoy_seed,
            seed=seed + rep,
            alpha=cfg.alpha,
            decoy_source=source,
            device=device,
        )
        start = time.perf_counter()
        probes = ufm.STATE["splits"][cell.split(":")[0]].probes
        res = leak_scan(model, probes, ufm.ROSTER, config)
        if stale and res.significant_names() != record["flagged"]:
            raise RuntimeError(f"{key}: the scan run again flagged other names")
        record = {
            "name": name,
            "rank": res.rank_of(name) if name else None,
            "p": {r.name: r.pvalue for r in res.rows},
            "flagged": res.significant_names(),
            "attributed": res.attributed_names(),
            "explained": res.explained_names(),
            "top": res.top.name,
            "decoys": {n.template: len(n.texts) for n in res.nulls},
            "seconds": time.perf_counter() - start,
            "device": str(device),
        }
        store.put(key, record)
    return record


def report(records: dict, args: argparse.Namespace, seconds: float) -> None:
    say("### Leak scan on control models: name decoys against random-letter decoys\n")
    say(
        f"`python benchmarks/leak_scan_name_decoys.py {' '.join(sys.argv[1:])}`; seed "
        f"{args.seed}; control models: the network trained without any name (MLP-1 on "
        f"MNIST: the control models of `unique_feature_memorisation.py`), the 50-name "
        f"roster, default decoys per kind, BH at 0.05; Faker {faker_version()}.\n"
    )
    scans = [*records["controls"].values(), *records.get("series", {}).values()]
    kinds = next(r for by_source in scans for r in by_source["names"])["decoys"]
    say(
        "Name decoys per kind in these scans: "
        + ", ".join(f"{k}: {v}" for k, v in sorted(kinds.items()))
        + " (3-letter names: all the lists hold, so their smallest p is "
        f"{1 / (kinds.get('AAA', 1) + 1):.4f} and no 3-letter name of a 50-name roster can "
        "be flagged at 0.05 after BH).\n"
    )
    every = [r for by_source in scans for rows in by_source.values() for r in rows]
    devices = sorted({r.get("device", "cpu") for r in every})
    say(
        "Scans by device (median seconds per scan, model training not included): "
        + ", ".join(
            f"{d}: {sum(r.get('device', 'cpu') == d for r in every)} "
            f"({np.median([r['seconds'] for r in every if r.get('device', 'cpu') == d]):.0f} s)"
            for d in devices
        )
        + " (one torch thread per process; a GPU's models are other draws than the CPU's).\n"
    )
    if records["controls"]:
        say(
            "| data, network | decoys | (scan, name) pairs with p <= 0.05 | p <= 0.01 | "
            "KS vs uniform | scans flagging any name | most often p <= 0.05 |"
        )
        say("|---|---|---|---|---|---|---|")
    for cell, by_source in records["controls"].items():
        for source in SOURCES:
            rows = by_source[source]
            p = np.array([[r["p"][name] for name in ufm.ROSTER] for r in rows])
            # the decoy p-value is discrete (steps of 1/(n+1)): KS on the pooled values
            ks = scipy.stats.kstest(p.ravel(), "uniform")
            often = np.sum(p <= 0.05, axis=0)
            worst = np.argsort(-often)[:4]
            names = ", ".join(f"{ufm.ROSTER[i]} {often[i]}/{len(rows)}" for i in worst if often[i])
            say(
                f"| {cell.replace(':', ', ')} | {source} | "
                f"{wilson(int(np.sum(p <= 0.05)), p.size)} | "
                f"{wilson(int(np.sum(p <= 0.01)), p.size)} | D = {ks.statistic:.3f}, "
                f"p = {ks.pvalue:.2g} | "
                f"{wilson(sum(bool(r['flagged']) for r in rows), len(rows))} | "
                f"{names or '-'} |"
            )
    series = records.get("series", {})
    if series:
        say(
            "\nThe scan's power curve: a 4-letter roster name burned into K training images "
            "of one class (a patient's series; the network trained as the control models; "
            "the counts are models per K); detected = flagged and ranked first; where "
            "several names were flagged, each was tested against its likeness to the others "
            "(`monai_forget.memorisation.attribution`): *attributed* = flagged and not "
            "explained by another flagged name's likeness; *set aside* = the leaked name "
            "flagged but explained:\n"
        )
        say(
            "| data, network | K images | decoys | detected | ranked first | flagged | "
            "another roster name flagged | ... and attributed | leaked name set aside |"
        )
        say("|---|---|---|---|---|---|---|---|---|")
        for (cell, count), by_source in series.items():
            for source in SOURCES:
                rows = by_source[source]
                first = [r["rank"] == 1 for r in rows]
                flagged = [r["name"] in r["flagged"] for r in rows]
                both = sum(a and b for a, b in zip(first, flagged, strict=True))
                others = sum(bool(set(r["flagged"]) - {r["name"]}) for r in rows)
                kept = [set(r.get("attributed", r["flagged"])) for r in rows]
                still = sum(bool(k - {r["name"]}) for k, r in zip(kept, rows, strict=True))
                lost = sum(r["name"] in r["flagged"] and r["name"] not in k
                           for k, r in zip(kept, rows, strict=True))  # fmt: skip
                counts = (both, sum(first), sum(flagged), others, still, lost)
                cells = [wilson(k, len(rows)) for k in counts]
                say(
                    f"| {cell.replace(':', ', ')} | {count} | {source} | "
                    + " | ".join(cells)
                    + " |"
                )
    say()
    if args.cached_only:
        say("Every scan was read from the cache (the runs that made them: 'Scans by device').")
    else:
        say(f"Wall time of this invocation: {seconds / 60:.1f} min ({args.device}, one thread).")
    if args.out:
        write(args.out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ufm.add_scan_options(parser)
    parser.add_argument("--controls", type=int, default=40, help="control models (no name)")
    parser.add_argument(
        "--series", type=int, nargs="+", default=[1, 3, 10, 30], help="images carrying the name"
    )
    parser.add_argument(
        "--reps",
        type=int,
        nargs="+",
        default=[0],
        help="models with a name per K: one count, or one per cell (0: none)",
    )
    parser.add_argument(
        "--control-cells",
        nargs="+",
        default=[DEFAULT_CELL],
        help="data:network of the control models, each with --controls models",
    )
    parser.add_argument(
        "--cells",
        nargs="+",
        default=[DEFAULT_CELL],
        help="data:network of the series models, e.g. mnist:mlp-1 pneumoniamnist:cnn-1",
    )
    parser.add_argument(
        "--shard",
        default="0/1",
        help="K/N: compute only every N-th model of each cell and count from K into the "
        "cache, and no report (run N shards at once, then once with 0/1 to report)",
    )
    parser.add_argument("--device", default="cpu", help="where models train and run, e.g. cuda")
    parser.add_argument(
        "--cached-only",
        action="store_true",
        help="report the scans in the cache and compute none (e.g. after a timed-out run)",
    )
    args = parser.parse_args()
    shard, shards = (int(x) for x in args.shard.split("/"))
    torch.set_num_threads(1)
    start = time.perf_counter()
    ufm.init_cached(args)
    ufm.STATE.update(device=args.device, cached_only=args.cached_only)
    records: dict[str, list[dict]] = {source: [] for source in SOURCES}
    records["controls"] = {}
    for cell in args.control_cells if args.controls else ():
        by_source = records["controls"][cell] = {source: [] for source in SOURCES}
        for rep in range(args.controls)[shard::shards]:
            for source in SOURCES:
                record = scan(rep, source, cell=cell)
                if record is None:
                    continue
                by_source[source].append(record)
                log(f"{cell} control {rep} {source}: flagged {record['flagged']}, top "
                    f"{record['top']} ({record['seconds']:.0f} s)")  # fmt: skip
    reps = args.reps * len(args.cells) if len(args.reps) == 1 else args.reps
    if len(reps) != len(args.cells):
        parser.error(f"--reps gives {len(args.reps)} counts for {len(args.cells)} cells")
    if any(reps):
        records["series"] = {}
    for cell, cell_reps in zip(args.cells, reps, strict=True):
        for count in args.series if cell_reps else ():
            by_source = records["series"][cell, count] = {source: [] for source in SOURCES}
            for rep in range(cell_reps)[shard::shards]:
                for source in SOURCES:
                    record = scan(rep, source, count, cell)
                    if record is None:
                        continue
                    by_source[source].append(record)
                    log(f"{cell} series {count} rep {rep} {source}: {record['name']} rank "
                        f"{record['rank']}, flagged {record['flagged']}")  # fmt: skip
    if shards == 1:
        report(records, args, time.perf_counter() - start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
