"""Leak scan with reference models a hospital can build: trained on halves of its own
patients, each name judged against the references that never saw its patient's images.

Issue 36, item 5. The reference models of ``leak_scan_references.py`` were trained on the
training images without the name, which a hospital cannot build: it does not know which
images carry a name. What it does know is which images belong to which patient, and which
patient each roster name is. So (ours; LiRA's offline design, Carlini et al. 2022, with
the patient as the unit): ``--references`` models of the audited design are trained in
pairs on the two halves of the patients (a new split per pair), every name's patient is
left out of one model of each pair, and each name's statistic
(:func:`~monai_forget.memorisation.reference_scan.relative_to_references`) is taken
against the models that never saw its patient's images, its decoys against the same
models. If the name was burned into its patient's series, those models never saw it.

The data are ``leak_scan_name_decoys.py``'s (MLP-1 on MNIST, the 50-name roster, a
4-letter name burned into ``--series`` training images of one class: the patient's
series; its models come from that script's cache). Every other training image is a
patient of its own; every other roster name is the patient of one of them, drawn per
run. Control models (no name anywhere) are scanned the same way, with one set of
reference models on halves of the clean images. One decoy draw (the product default:
random letters) serves every model; BH at 0.05 over the 50 names. Three arms: decoys
only (the scan's default), every reference for every name (what ``leak_scan(...,
references=...)`` computes when given these models: half of them saw the leaked series),
and each name against the references that never saw its patient (what ``leak_scan(...,
reference_patients=...)`` computes: the script calls the same functions,
``unseen_references`` and ``relative_to_each_set``, on the cached M of each model).

Run::

    python benchmarks/leak_scan_patient_references.py --cache /work/scratch/s7/ufm \\
        --series 10 30 --reps 10 --controls 100 --references 8 \\
        --out benchmarks/results/leak_scan_patient_references.md
    python benchmarks/leak_scan_patient_references.py --cache /work/scratch/s7/ufm \
        --cell pneumoniamnist:mlp-1 --series 10 30 --reps 5 --controls 100 --references 8 \
        --out benchmarks/results/leak_scan_patient_references_pneumoniamnist.md

``--shard K/N`` fills the cache with every N-th case from K and writes no report, so
several processes can share the work before one run reports from the cache.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _name_decoy_models as lsnd
import _ufm_engine as ufm
from _common import wilson
from _leak_scan_references import outcome, pvalues, scanned
from _markdown import log, say, write

from monai_forget.memorisation import LeakScanConfig
from monai_forget.memorisation.decoys import decoy_template, decoy_test
from monai_forget.memorisation.patient_references import unseen_references
from monai_forget.memorisation.reference_scan import relative_to_each_set, relative_to_references

ARMS = ("decoys only", "every reference for every name", "patient references")


def m_vector(key: str, build, decoy_seed: int, cell: str = lsnd.DEFAULT_CELL) -> dict:
    """A model's M on every text (names, then decoys), from the store or scanned
    (``leak_scan_references.scanned`` with the scan's default seed of random controls,
    on the probes of ``cell``'s data)."""
    data = cell.split(":")[0]
    return scanned(key, lambda: (build(), None), decoy_seed, LeakScanConfig().seed, data)


def patient_halves(patients: np.ndarray, pairs: int, seed: object) -> list[np.ndarray]:
    """Per reference model, a boolean mask over the patients it trains on: pair j's two
    models take the two halves of one random split."""
    rng = np.random.default_rng(seed)
    unique = np.unique(patients)
    masks = []
    for _ in range(pairs):
        first = rng.permutation(unique)[: len(unique) // 2]
        inside = np.isin(patients, first)
        masks += [inside, ~inside]
    return masks


def references(key: str, train, patients: np.ndarray, count: int, decoy_seed: int, cell) -> tuple:
    """Train (or load) ``cell``'s reference models on the patient halves and scan them:
    ``(masks over the images, M vectors)``."""
    data, arch = cell.split(":")
    split, seed = ufm.STATE["splits"][data], ufm.STATE["seed"]
    masks = patient_halves(patients, count // 2, [seed, 700, *map(ord, key)])
    vectors = []
    for k, mask in enumerate(masks):
        log(f"  {key} reference {k + 1}/{count}")

        def build(k=k, mask=mask):
            data = train.subset(np.flatnonzero(mask))
            return ufm.trained(f"{key}/model/{k}", arch, split, data, seed + 700 + k)[0]

        vectors.append(np.array(m_vector(f"{key}/scan/{k}", build, decoy_seed, cell)["m"]))
    return masks, vectors


def judged(m: np.ndarray, texts: list[str], refs: list[np.ndarray], out_of: list[list[int]]):
    """Each name's statistic and p-value against the references that never saw its
    patient (``out_of[i]``), its decoys against the same references."""
    n = len(ufm.ROSTER)
    kinds = np.array([decoy_template(t) for t in texts])
    stat, p = np.empty(n), np.empty(n)
    sets = [tuple(o) for o in out_of]
    by_set = relative_to_each_set(m, refs, texts, n, sets)  # what leak_scan computes
    for i in range(n):
        s = by_set[sets[i]][0]
        stat[i] = s[i]
        p[i] = decoy_test(s[i], s[n:][kinds[n:] == kinds[i]]).pvalue
    return stat, p


def run_case(m: np.ndarray, texts, refs, masks, patients, owner, name, alpha) -> dict:
    """One scanned model's outcome in each of :data:`ARMS`."""
    seen = [set(patients[mask].tolist()) for mask in masks]
    name_patients = [patients[own[0]] for own in owner]
    out_of = unseen_references(ufm.ROSTER, name_patients, seen)  # what leak_scan computes
    stat, p = judged(m, texts, refs, out_of)
    every, _ = relative_to_references(m, refs, texts, len(ufm.ROSTER))
    return {
        "decoys only": outcome(pvalues(m, texts), m, name, alpha),
        "every reference for every name": outcome(pvalues(every, texts), every, name, alpha),
        "patient references": outcome(p, stat, name, alpha),
    }


def owners(n_images: int, series: np.ndarray | None, name: str | None, seed: object):
    """Patients of the training images (the series is one patient, every other image its
    own) and, per roster name, the images of its patient."""
    patients = np.arange(n_images)
    if series is not None:
        patients[series] = series[0]
    rng = np.random.default_rng(seed)
    singles = np.setdiff1d(np.arange(n_images), series if series is not None else [])
    drawn = rng.choice(singles, len(ufm.ROSTER), replace=False)
    owner = [
        np.asarray(series) if n == name else np.array([int(d)])
        for n, d in zip(ufm.ROSTER, drawn, strict=True)
    ]
    return patients, owner


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ufm.add_scan_options(parser)
    parser.add_argument(
        "--series", type=int, nargs="+", default=[10], help="images carrying the name"
    )
    parser.add_argument("--reps", type=int, default=10, help="series models per count")
    parser.add_argument("--controls", type=int, default=20, help="control models (no name)")
    parser.add_argument("--references", type=int, default=8, help="an even number")
    parser.add_argument("--decoy-seed", type=int, default=7)
    parser.add_argument(
        "--cell", default=lsnd.DEFAULT_CELL, help="data:network, e.g. pneumoniamnist:mlp-1"
    )
    parser.add_argument(
        "--shard",
        default="0/1",
        help="K/N: compute only the models of every N-th case from K into the cache, and no "
        "report (run N shards at once, then once with 0/1 to report)",
    )
    args = parser.parse_args()
    if args.references < 4 or args.references % 2:
        parser.error("--references: an even number of at least 4 (pairs)")
    shard, shards = (int(x) for x in args.shard.split("/"))
    start = time.perf_counter()
    ufm.init_cached(args)
    alpha, seed, cell = ufm.FULL.alpha, args.seed, args.cell
    data, arch = cell.split(":")
    # the first cell keeps the keys its models and scans were cached under
    root = "patientrefs" if cell == lsnd.DEFAULT_CELL else f"patientrefs/{data}/{arch}"
    clean = ufm.STATE["splits"][data].train
    rows = {"series": {count: [] for count in args.series}, "control": []}
    cases = [(c, r) for c in args.series for r in range(args.reps)]
    for count, rep in cases[shard::shards]:
        train, name, series = lsnd.series_data(count, rep, cell)
        key = f"{root}/series{count}/{rep}"
        patients, owner = owners(len(train), series, name, [seed, 710, count, rep])
        masks, refs = references(key, train, patients, args.references, args.decoy_seed, cell)
        target = m_vector(
            f"{key}/scan/target",
            lambda count=count, rep=rep: lsnd.series_model(count, rep, cell)[0],
            args.decoy_seed,
            cell,
        )
        m = np.array(target["m"])
        case = run_case(m, target["texts"], refs, masks, patients, owner, name, alpha)
        rows["series"][count].append((name, case))
        log(f"series {count} rep {rep} {name}: {case}")
    patients = np.arange(len(clean))
    refs_key = f"{root}/clean"
    masks, refs = references(refs_key, clean, patients, args.references, args.decoy_seed, cell)
    for rep in range(args.controls)[shard::shards]:
        _, owner = owners(len(clean), None, None, [seed, 720, rep])
        target = m_vector(
            f"{root}/control/{rep}/scan",
            lambda rep=rep: lsnd.control_model(rep, cell),
            args.decoy_seed,
            cell,
        )
        m = np.array(target["m"])
        case = run_case(m, target["texts"], refs, masks, patients, owner, None, alpha)
        rows["control"].append((None, case))
        log(f"control {rep}: {case}")
    if shards == 1:
        report(rows, args, time.perf_counter() - start)
    return 0


def rate(k: int, of: list) -> str:
    """``k`` of the runs ``of``, with its Wilson interval ("-" when there are none)."""
    return wilson(k, len(of)) if of else "-"


def report(rows: dict, args: argparse.Namespace, seconds: float) -> None:
    data, arch = args.cell.split(":")
    names = {"mnist": "MNIST", "pneumoniamnist": "PneumoniaMNIST"}
    say(
        "### Leak scan with reference models trained on halves of the patients "
        f"({arch.upper()}, {names.get(data, data)})"
    )
    say()
    cell = "" if args.cell == lsnd.DEFAULT_CELL else f"--cell {args.cell} "
    say(
        f"`python benchmarks/leak_scan_patient_references.py {cell}--series "
        f"{' '.join(map(str, args.series))} --reps {args.reps} --controls {args.controls} "
        f"--references {args.references} --decoy-seed {args.decoy_seed}`; seed {args.seed}; "
        "the name on a series of images of one class (the models of "
        "`leak_scan_name_decoys.py`), every other image a patient of its own; "
        f"{args.references} reference models in pairs on patient halves, "
        f"{args.references // 2} per name (those that never saw its patient); 1,000 "
        "random-letter decoys per name length, one draw for every model; BH at 0.05 over "
        "the 50 names; 95 % Wilson intervals."
    )
    say()
    say(
        "| series | arm | leaked name flagged | leaked name ranked 1st | found (flagged and "
        "ranked 1st) | another roster name flagged (before attribution) |"
    )
    say("|---|---|---|---|---|---|")
    for count, series in rows["series"].items():
        for arm in ARMS:
            found = sum(name in c[arm]["flagged"] for name, c in series)
            first = sum(c[arm]["rank"] == 1 for _, c in series)
            both = sum(name in c[arm]["flagged"] and c[arm]["rank"] == 1 for name, c in series)
            other = sum(any(f != name for f in c[arm]["flagged"]) for name, c in series)
            cells = [rate(k, series) for k in (found, first, both, other)]
            say(f"| {count} | {arm} | " + " | ".join(cells) + " |")
    say()
    controls = rows["control"]
    say(
        "The control models all train on the same clean images, so they share one set of "
        f"{args.references} reference models: their rate is measured over {len(controls)} "
        "trainings of the audited model but one set of references. Each series model has "
        "its own references."
    )
    say()
    say("| arm | control models (no name): any name flagged |")
    say("|---|---|")
    for arm in ARMS:
        say(f"| {arm} | {rate(sum(bool(c[arm]['flagged']) for _, c in controls), controls)} |")
    say()
    say(f"Wall time of this invocation: {seconds / 60:.1f} min (2 shared cores, one thread).")
    if args.out:
        write(args.out)


if __name__ == "__main__":
    sys.exit(main())
