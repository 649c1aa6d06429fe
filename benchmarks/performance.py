"""Audit-side speed, side by side: handler overhead, M vs a forward pass, parallel training.

Measured in one run on the real data under ``$MONAI_FORGET_DATA`` (nothing is copied),
the compared runs taking turns (interleaved rounds, medians; the 1-minute load average
before each run is recorded):

1. **Audit handlers on a SupervisedEvaluator**: the measurement of
   ``withdrawal_audit_grid.py`` (reused from there): a ``small_cnn`` PneumoniaMNIST model
   evaluated over the test split with and without ``KSCalibratedRatio`` + ``EMAPValue``,
   built from their auditors' references with the content check on (their default).
2. **M vs one forward pass** for every memorisation network: whatever
   ``get_network(name, in_shape=(1, 28, 28), num_classes=10)`` builds for ``mlp-1``,
   ``cnn-1`` and ``cnn-2`` in this checkout (untrained: the cost does not depend on the
   weights); M with all four tests over 2000 PneumoniaMNIST probes vs ``predict``.
3. **Reference-model training at 1 vs 2 workers**: ``ShadowTrainer.train_many`` over 4
   reference models (``reference_jobs`` on the PneumoniaMNIST training split, half each),
   one torch thread per model, in this process (the pool's workers already started)
   and as whole processes (``monai-forget shadow train --count 4``).

Targets: handlers <= 10 % overhead with the content check on (issue 34; issue 14 asked
<= 5 % without it); M <= 3.5x a forward pass for every
network; training at 2 workers >= 1.7x faster than at 1 worker on 2 cores.

Usage: ``python benchmarks/performance.py [--rounds 3] [--max-load 2.5] [--out FILE]``
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's package
from _audit_grid import (
    evaluator_setups,
    handler_overhead,
    load_pneumonia_spec,
)
from _common import PNEUMONIA_RECIPE
from _markdown import log, say, write
from _timing import (
    add_arguments,
    interleaved,
    load_average,
    machine,
    process,
    verdict,
    wait_options,
)

from monai_forget.data import data_root, load_pneumoniamnist
from monai_forget.inference import predict
from monai_forget.memorisation import UniqueFeature, memorisation_score
from monai_forget.networks import get_network
from monai_forget.shadow import ShadowTrainer, reference_jobs

NETWORKS = ("mlp-1", "cnn-1", "cnn-2")
#: The grid's PneumoniaMNIST design with a shorter budget, as a reference model.
REFERENCE_RECIPE = dataclasses.replace(PNEUMONIA_RECIPE, steps=300)
N_MODELS = 4


def handlers(root: Path, cache: Path, seed: int, repeats: int) -> list[str]:
    setup = evaluator_setups(root, load_pneumonia_spec(root, seed))[0]
    load = load_average()
    o = handler_overhead(setup, cache, seed, seed + 1, repeats)
    r = setup.recipe
    return [
        "### Audit handlers on a SupervisedEvaluator\n",
        f"SupervisedEvaluator over PneumoniaMNIST test ({o['n']} images, batch 64), "
        f"`{r.network}` {dict(r.network_args)}, median of {repeats} interleaved runs "
        f"(load {load:.1f} before, {load_average():.1f} after): {o['plain'] * 1e3:.1f} ms "
        f"without handlers, {o['audited'] * 1e3:.1f} ms with KSCalibratedRatio + EMAPValue "
        f"(content check on): **{o['overhead'] * 100:+.1f} %** (best-of "
        f"{o['best_overhead'] * 100:+.1f} %); target <= 10 %: {verdict(o['overhead'] <= 0.10)}\n",
    ]


def memorisation(root: Path, seed: int, rounds: int, wait: dict) -> list[str]:
    probes = load_pneumoniamnist("train", root).subset(np.arange(2000))
    feature = UniqueFeature.from_text("A", (1, 1), 1, 1.0)
    lines = [
        "### M vs one forward pass\n",
        f"M (Eq. 1, all four tests) over {len(probes)} PneumoniaMNIST probes vs one "
        f"batched forward pass (`predict`, batch 256), 1 torch thread, median of {rounds} "
        "interleaved rounds; networks as `get_network(name, in_shape=(1, 28, 28), "
        "num_classes=10)` builds them in this checkout.\n",
        "| network | parameters | forward (ms) | M (ms) | ratio | load | target <= 3.5x |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in NETWORKS:
        torch.manual_seed(seed)
        model = get_network(name, in_shape=(1, 28, 28), num_classes=10).eval()
        runs = {
            "forward": lambda m=model: predict(m, probes, batch_size=256),
            "M": lambda m=model: memorisation_score(m, probes, feature),
        }
        t = interleaved(runs, rounds, **wait)
        ratio = t["M"].median / t["forward"].median
        n_params = sum(p.numel() for p in model.parameters())
        lines.append(
            f"| {name} | {n_params:,} | {t['forward'].median * 1e3:.1f} | "
            f"{t['M'].median * 1e3:.1f} | **{ratio:.2f}x** | {t['M'].load} | "
            f"{verdict(ratio <= 3.5)} |"
        )
    return [*lines, ""]


def training(root: Path, work: Path, seed: int, rounds: int, wait: dict) -> list[str]:
    data = load_pneumoniamnist("train", root)
    datasets, seeds = reference_jobs(data, range(N_MODELS), 0.5, seed)
    counter = iter(range(10**6))

    def in_process(workers: int) -> None:
        cache = work / f"cache{next(counter)}"  # a fresh cache: every model is trained
        trainer = ShadowTrainer(REFERENCE_RECIPE, cache_dir=cache, threads=1)
        trainer.train_many(datasets, seeds, workers=workers)

    log("training: starting the worker pool once ...")
    one_step = dataclasses.replace(REFERENCE_RECIPE, steps=1)
    ShadowTrainer(one_step, threads=1).train_many(datasets[:2], seeds[:2], workers=2)
    warm = interleaved({"1": lambda: in_process(1), "2": lambda: in_process(2)}, rounds, **wait)

    npz, recipe = work / "data.npz", work / "recipe.json"
    np.savez(npz, images=data.images, labels=data.labels)
    recipe.write_text(json.dumps(dataclasses.asdict(REFERENCE_RECIPE)))
    command = ["-m", "monai_forget", "shadow", "train", "--recipe", str(recipe)]
    command += ["--data", str(npz), "--index", "0", "--count", str(N_MODELS)]
    command += ["--seed", str(seed), "--threads", "1"]
    runs = {
        n: process([*command, "--workers", n, "--cache-dir", str(work / f"cli{n}")])
        for n in ("1", "2")
    }

    def fresh(name: str) -> None:
        shutil.rmtree(work / f"cli{name}", ignore_errors=True)

    cold = interleaved(runs, rounds, after=fresh, **wait)
    lines = [
        "### Reference-model training at 1 vs 2 workers\n",
        f"{N_MODELS} reference models (`reference_jobs` on the PneumoniaMNIST training "
        f"split, fraction 0.5), `{REFERENCE_RECIPE.network}` "
        f"{dict(REFERENCE_RECIPE.network_args)}, {REFERENCE_RECIPE.steps} Adam steps of "
        f"batch {REFERENCE_RECIPE.batch_size}, 1 torch thread per model, a fresh cache per "
        f"run; median of {rounds} interleaved rounds.\n",
        "| run | 1 worker (s) | 2 workers (s) | speed-up | load (1 / 2) | target >= 1.7x |",
        "|---|---|---|---|---|---|",
    ]
    for label, t in (
        ("`train_many` in one process (workers started)", warm),
        ("whole process, `monai-forget shadow train --count 4`", cold),
    ):
        speedup = t["1"].median / t["2"].median
        lines.append(
            f"| {label} | {t['1'].median:.1f} | {t['2'].median:.1f} | **{speedup:.2f}x** | "
            f"{t['1'].load} / {t['2'].load} | {verdict(speedup >= 1.7)} |"
        )
    return [*lines, ""]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser, rounds=3)
    parser.add_argument("--fast-rounds", type=int, default=15, help="rounds for M, handlers")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip", nargs="*", default=(), choices=("handlers", "m", "training"))
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    wait = {**wait_options(args), "log": log}
    root = data_root()
    say("## Audit-side speed (issues 14 and 34)\n")
    say(
        f"`python benchmarks/performance.py --rounds {args.rounds} --fast-rounds "
        f"{args.fast_rounds}` · data `{root}` · torch {torch.__version__}, {machine()}\n"
    )
    with tempfile.TemporaryDirectory(prefix="performance-bench-") as tmp:
        work = Path(tmp)
        if "handlers" not in args.skip:
            log("handler overhead ...")
            for line in handlers(root, work / "grid-cache", args.seed, args.fast_rounds):
                say(line)
        if "m" not in args.skip:
            log("M vs forward ...")
            for line in memorisation(root, args.seed, args.fast_rounds, wait):
                say(line)
        if "training" not in args.skip:
            log("training 1 vs 2 workers ...")
            for line in training(root, work, args.seed, args.rounds, wait):
                say(line)
    say(f"Load average at the end: {load_average():.1f}.")
    if args.out:
        write(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
