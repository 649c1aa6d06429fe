"""Measured error rates of the papers' withdrawal auditors (K-S and EMA, as published):
many null and member query sets. (The reference-model auditor, the product's default, is
measured over many trainings by ``benchmarks/audit_calibration.py``.)

For each data set, one consortium model (the target) is trained once; the auditor holds
data it controls (the population P, from which the reference/shadow models are trained
and which is D_C for K-S and EMA), plus known members and known non-members of the
target. Query sets D_Q are then drawn many times from pools the auditor never used:

- ``non-members``: |D_Q| samples the target never saw (right answer: forgotten);
- ``members``: |D_Q| samples of the target's training set (right: not forgotten);
- ``10% remembered`` / ``50% remembered``: that share of D_Q from the training set, the
  rest unseen (right: not forgotten; a partly withdrawn provider).

Cells: |D_Q| in {20, 50, 200} at calibration quality k = 100, and EMA's low-quality
calibration k in {80, 60, 40} (k% of the auditor's data clean, the rest rotated or noised
as in benchmarks/withdrawal_audit_grid.py, after the EMA reference code) at |D_Q| in
{50, 200} for non-members and members. For every auditor and cell the script prints the
rate of each decision with 95 % Wilson intervals: false "forgotten" on members, false
"not forgotten" on non-members, inconclusive.

Cost: EMA reuses its models across draws (trained once per data set and quality
level), so its draws are cheap; K-S trains a query shadow
model on every D_Q (Liu & Tsaftaris 2020, Alg. 1), so it gets ``--ks-draws`` draws per
cell and only the full-quality member and non-member cells (its error rates on many
draws are in ``benchmarks/results/withdrawal_audit_grid.md``). Models and predictions
are cached in ``--cache-dir``; finished cells are kept in
``<cache-dir>/cells.json`` so an interrupted run resumes.

Run::

    python benchmarks/papers_calibration.py --out benchmarks/results/papers_calibration.md
    python benchmarks/papers_calibration.py --quick   # a few draws, for a smoke test
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _audit_grid import degrade
from _common import MNIST_RECIPE, PNEUMONIA_RECIPE, permuted, unique_images
from _markdown import log, say, write

from monai_forget.audit import (
    FORGOTTEN,
    INCONCLUSIVE,
    NOT_FORGOTTEN,
    EMAAuditor,
    ks_calibrated_ratio,
)
from monai_forget.data import (
    LabelledImages,
    concat,
    data_root,
    load_mnist_test,
    load_pneumoniamnist,
)
from monai_forget.inference import Predictions, predict
from monai_forget.rates import measured_rate
from monai_forget.shadow import ShadowTrainer, SupervisedRecipe

KINDS = {"non-members": 0.0, "10% remembered": 0.1, "50% remembered": 0.5, "members": 1.0}
SIZES = (20, 50, 200)
QUALITY = (80, 60, 40)
QUALITY_SIZES = (50, 200)
AUDITORS = ("ema", "ks")


@dataclass(frozen=True)
class Pools:
    """One data set cut for the benchmark (every part disjoint by content)."""

    name: str
    recipe: SupervisedRecipe
    target_train: LabelledImages
    members_known: LabelledImages
    member_pool: LabelledImages
    nonmembers_known: LabelledImages
    nonmember_pool: LabelledImages
    population: LabelledImages


def _cut(name: str, recipe: SupervisedRecipe, data: LabelledImages, seed: int) -> Pools:
    data = permuted(unique_images(data), seed)
    n = len(data)
    bounds = np.cumsum([0.4, 0.2, 0.1, 0.3]) * n
    target, q_non, n_known, pop = (
        data.subset(slice(int(a), int(b))) for a, b in zip([0, *bounds[:-1]], bounds, strict=True)
    )
    t = len(target)
    return Pools(
        name,
        recipe,
        target,
        target.subset(slice(0, t // 4)),
        target.subset(slice(t // 4, 3 * t // 4)),
        n_known,
        q_non,
        pop,
    )


def load(name: str, seed: int) -> Pools:
    root = data_root()
    if name == "mnist":
        return _cut("MNIST", MNIST_RECIPE, load_mnist_test(root), seed)
    xray = concat(*(load_pneumoniamnist(s, root=root) for s in ("train", "val", "test")))
    return _cut("PneumoniaMNIST", PNEUMONIA_RECIPE, xray, seed)


@dataclass
class Prepared:
    """Everything a draw needs, computed once per data set and quality level."""

    target_probs: dict[str, np.ndarray]  # pool -> target softmax on that pool
    labels: dict[str, np.ndarray]
    ema_reference: object | None  # None when EMA is not benchmarked
    ks_calibration_conf: dict[str, np.ndarray] | None  # pool -> calibration shadow's t[y]


def prepare(
    p: Pools,
    k: int,
    seed: int,
    cache: Path,
    auditors: Sequence[str] = AUDITORS,
) -> Prepared:
    population = degrade(p.population, k, seed + 7)
    nonmembers_known = degrade(p.nonmembers_known, k, seed + 8)
    pools = {
        "members_known": p.members_known,
        "nonmembers_known": nonmembers_known,
        "member_pool": p.member_pool,
        "nonmember_pool": p.nonmember_pool,
    }
    options = {"recipe": p.recipe, "seed": seed, "cache_dir": cache}
    target = ShadowTrainer(p.recipe, cache_dir=cache).train(p.target_train, seed=seed + 1)
    outs = {name: predict(target, d, cache_dir=cache) for name, d in pools.items()}
    ema_reference, ks_conf = None, None
    if "ema" in auditors:
        log(f"  {p.name} k={k}: EMA reference model (cached)")
        ema_reference = EMAAuditor(**options).fit_reference(None, population)
    if "ks" in auditors:
        log(f"  {p.name} k={k}: K-S calibration shadow (cached)")
        ks_shadow = ShadowTrainer(p.recipe, cache_dir=cache).train(population, seed=seed)
        ks_conf = {n: predict(ks_shadow, d, cache_dir=cache).confidence for n, d in pools.items()}
    return Prepared(
        target_probs={n: o.probs for n, o in outs.items()},
        labels={n: o.labels for n, o in outs.items()},
        ema_reference=ema_reference,
        ks_calibration_conf=ks_conf,
    )


def draw(p: Pools, kind: str, size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    n_mem = round(KINDS[kind] * size)
    idx = {
        "member_pool": rng.choice(len(p.member_pool), n_mem, replace=False),
        "nonmember_pool": rng.choice(len(p.nonmember_pool), size - n_mem, replace=False),
    }
    return {pool: i for pool, i in idx.items() if len(i)}


def ema_decide(prep: Prepared, idx: dict[str, np.ndarray]) -> str:
    probs = np.concatenate([prep.target_probs[pool][i] for pool, i in idx.items()])
    labels = np.concatenate([prep.labels[pool][i] for pool, i in idx.items()])
    return prep.ema_reference.audit(Predictions(probs, labels)).decision


def ks_decide(p: Pools, prep: Prepared, idx: dict[str, np.ndarray], seed: int, cache: Path) -> str:
    query = concat(*(getattr(p, pool).subset(i) for pool, i in idx.items() if len(i)))
    shadow = ShadowTrainer(p.recipe, cache_dir=cache).train(query, seed=seed)
    query_conf = predict(shadow, query).confidence
    target_conf = np.concatenate(
        [prep.target_probs[pool][i, prep.labels[pool][i]] for pool, i in idx.items()]
    )
    cal_conf = np.concatenate([prep.ks_calibration_conf[pool][i] for pool, i in idx.items()])
    try:
        return ks_calibrated_ratio(target_conf, query_conf, cal_conf).decision
    except ValueError:  # KS(query, calibration) = 0: the ratio is undefined
        return INCONCLUSIVE


def wilson(count: int, n: int) -> tuple[float, float]:
    """95 % Wilson score interval of a binomial proportion."""
    if n == 0:
        return float("nan"), float("nan")
    z = 1.959964
    phat = count / n
    centre = (phat + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def cells(quick: bool) -> list[tuple[int, str, int]]:
    out = [(100, kind, size) for kind in KINDS for size in SIZES]
    low = [(k, kind, size) for k in QUALITY for kind in ("non-members", "members")
           for size in QUALITY_SIZES]  # fmt: skip
    out += low
    return out[:4] if quick else out


def ks_cell(cell: tuple[int, str, int]) -> bool:
    """K-S trains a query shadow model per draw (minutes each on 2 cores): it runs the
    full-quality cells of members and non-members only."""
    k, kind, _ = cell
    return k == 100 and kind in ("non-members", "members")


def run_cell(
    p: Pools, prep: Prepared, auditor: str, cell: tuple[int, str, int], args: argparse.Namespace
) -> dict:
    """Every draw of one (auditor, cell): the count of each decision."""
    k, kind, size = cell
    draws = args.ks_draws if auditor == "ks" else (
        args.null_draws if kind == "non-members" else args.draws
    )  # fmt: skip
    rng = np.random.default_rng([args.seed, k, size, list(KINDS).index(kind)])
    start = time.perf_counter()
    decisions = []
    for _ in range(draws):
        idx = draw(p, kind, size, rng)
        if auditor == "ema":
            decisions.append(ema_decide(prep, idx))
        else:
            decisions.append(ks_decide(p, prep, idx, args.seed, Path(args.cache_dir)))
    counts = {d: decisions.count(d) for d in (FORGOTTEN, NOT_FORGOTTEN, INCONCLUSIVE)}
    return {"draws": draws, **counts, "seconds": time.perf_counter() - start}


def run(args: argparse.Namespace) -> None:
    cache = Path(args.cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    store = cache / "cells.json"
    done: dict[str, dict] = json.loads(store.read_text()) if store.is_file() else {}
    if args.report:
        report(done, args)
        return
    pools: dict[str, Pools] = {}
    prepared: dict[tuple[str, int], Prepared] = {}
    # K-S trains a model per draw: every other auditor's cells first, K-S's last.
    for auditor in args.auditors:
        for dataset in args.datasets:
            for cell in cells(args.quick):
                if auditor == "ks" and not ks_cell(cell):
                    continue
                key = "|".join(map(str, (dataset, *cell, auditor)))
                if key in done:
                    continue
                if dataset not in pools:
                    pools[dataset] = load(dataset, args.seed)
                if (dataset, cell[0]) not in prepared:
                    prepared[dataset, cell[0]] = prepare(
                        pools[dataset], cell[0], args.seed, cache, args.auditors
                    )
                done[key] = run_cell(
                    pools[dataset], prepared[dataset, cell[0]], auditor, cell, args
                )
                store.write_text(json.dumps(done, indent=1))
                log(f"{key}: {done[key]}")
    report(done, args)


def _rate(count: int, n: int) -> str:
    low, high = wilson(count, n)
    return f"{count / n:.3f} [{low:.3f}, {high:.3f}]" if n else "-"


def report(done: dict[str, dict], args: argparse.Namespace) -> None:
    say("# Withdrawal auditors' error rates over many query sets")
    say()
    say(f"`python benchmarks/papers_calibration.py {' '.join(sys.argv[1:])}`; seed {args.seed}; "
        "alpha 0.1 (EMA); K-S's rule rho >= 1. Rates with 95 % Wilson intervals.")  # fmt: skip
    say()
    for dataset in args.datasets:
        for auditor in args.auditors:
            say(f"## {dataset}: {auditor}")
            say()
            say("| k | D_Q | draws | forgotten | not forgotten | inconclusive | wrong |")
            say("|---|---|---|---|---|---|---|")
            for k, kind, size in cells(args.quick):
                c = done.get(f"{dataset}|{k}|{kind}|{size}|{auditor}")
                if c is None:
                    continue
                n = c["draws"]
                wrong = c[NOT_FORGOTTEN] if kind == "non-members" else c[FORGOTTEN]
                say(f"| {k} | {kind}, {size} | {n} | {_rate(c[FORGOTTEN], n)} | "
                    f"{_rate(c[NOT_FORGOTTEN], n)} | {_rate(c[INCONCLUSIVE], n)} | "
                    f"{_rate(wrong, n)} |")  # fmt: skip
            say()
    if args.out:
        write(args.out)
    if args.error_rates:
        write_error_rates(done, args)


def write_error_rates(done: dict[str, dict], args: argparse.Namespace) -> None:
    """The rates the audit report quotes (monai_forget/audit/measured_error_rates.json)."""
    rows = []
    for key, c in done.items():
        dataset, k, kind, size, auditor = key.split("|")
        n = c["draws"]
        rows.append({
            "dataset": {"mnist": "MNIST", "pneumoniamnist": "PneumoniaMNIST"}.get(dataset, dataset),
            "auditor": auditor, "k": int(k), "kind": kind, "size": int(size), "draws": n,
            "forgotten": measured_rate(c[FORGOTTEN], n),
            "not_forgotten": measured_rate(c[NOT_FORGOTTEN], n),
            "inconclusive": measured_rate(c[INCONCLUSIVE], n),
        })  # fmt: skip
    path = Path(args.error_rates)
    if path.is_file():  # the auditors not run this time keep their rows
        kept = json.loads(path.read_text())
        rows = [r for r in kept["cells"] if r["auditor"] not in args.auditors] + rows
        kept["cells"] = rows
    else:
        kept = {"cells": rows}
    path.write_text(json.dumps(kept, indent=1))


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["mnist", "pneumoniamnist"])
    parser.add_argument(
        "--auditors", nargs="+", choices=AUDITORS, default=list(AUDITORS),
        help="benchmark these (the error-rate JSON keeps the other auditors' rows)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--null-draws", type=int, default=200)
    parser.add_argument("--draws", type=int, default=100)
    parser.add_argument("--ks-draws", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cache-dir", default="/tmp/monai-forget-papers-calibration")
    parser.add_argument("--out", help="also write the markdown here")
    parser.add_argument(
        "--error-rates",
        help="also write the rates as JSON (the report's measured_error_rates.json)",
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--report", action="store_true", help="render <cache-dir>/cells.json, run nothing"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.null_draws, args.draws, args.ks_draws = 10, 10, 2
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
