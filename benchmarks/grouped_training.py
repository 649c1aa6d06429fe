"""Reference models trained as a group against one at a time (issue 51, item 1).

The PneumoniaMNIST benchmark recipe (``PNEUMONIA_RECIPE``: MONAI's ``Classifier``, 1,500
steps of 64) trains the 8 reference models of a default audit three ways, each into an
empty cache of its own:

- ``one at a time``: one model after another in this process (``workers=1``);
- ``worker pool``: the models over worker processes, one model at a time each (the
  default before grouping: one worker per core);
- ``grouped``: all 8 as one batched computation (``ShadowTrainer`` default now).

The target (2,400 training images, untimed) and the audit's sets are the same for every
arm: 1,000 known members, 1,000 known non-members (training images it never saw), and
three query sets of 200: remembered (other training images of the target), never seen,
half and half. Each arm's audits then read its own reference models: decisions, the
membership strength and the per-sample AUC of the known sets show whether the grouped
models are the recipe's models (within sampling error: their weights differ in the last
bits, which training amplifies).

Run::

    python benchmarks/grouped_training.py --out benchmarks/results/grouped_training.md
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PNEUMONIA_RECIPE, permuted, unique_images, without
from _markdown import log, say, write

from monai_forget.audit import ReferenceModelAuditor
from monai_forget.data import concat, load_pneumoniamnist
from monai_forget.shadow import ShadowTrainer
from monai_forget.shadow import trainer as shadow_trainer

ARMS = {"one at a time": (1, False), "worker pool": (None, False), "grouped": (None, True)}


def sets(seed: int):
    train = permuted(unique_images(load_pneumoniamnist("train")), seed)
    held = without(
        unique_images(concat(load_pneumoniamnist("val"), load_pneumoniamnist("test"))), train
    )
    target_data = train.subset(slice(0, 2400))
    target = ShadowTrainer(PNEUMONIA_RECIPE).train(target_data, seed=seed + 1)
    known = (target_data.subset(slice(400, 1400)), train.subset(slice(2400, 3400)))
    never = held.subset(slice(0, 200))
    queries = {
        "remembered": target_data.subset(slice(0, 200)),
        "never seen": never,
        "half": concat(target_data.subset(slice(200, 300)), held.subset(slice(200, 300))),
    }
    return target, known, queries


def run_arm(name: str, target, known, queries, seed: int, cache: Path, device: str) -> dict:
    workers, grouped = ARMS[name]
    # The auditor builds its own ShadowTrainer: the arm sets the trainer's default.
    defaults = shadow_trainer.ShadowTrainer.__init__.__kwdefaults__
    previous, defaults["grouped"] = defaults["grouped"], grouped
    try:
        auditor = ReferenceModelAuditor(
            recipe=PNEUMONIA_RECIPE,
            n_references=8,
            seed=seed,
            cache_dir=cache,
            workers=workers,
            device=device,
        )
        start = time.perf_counter()
        auditor.fit_reference(queries["remembered"], known)
        seconds = time.perf_counter() - start
        results = {q: auditor.audit(target, d, known) for q, d in queries.items()}
    finally:
        defaults["grouped"] = previous
    log(f"{name}: {seconds:.1f} s")
    return {"seconds": seconds, "results": results}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(ARMS))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    target, known, queries = sets(args.seed)
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.arms:
            runs[name] = run_arm(
                name, target, known, queries, args.seed, Path(tmp) / name, args.device
            )
    say("## Reference models trained as a group (issue 51)\n")
    say(
        f"`python benchmarks/grouped_training.py --seed {args.seed} --device {args.device}`; "
        f"torch {torch.__version__}, "
        f"{os.cpu_count()} cores, {torch.get_num_threads()} torch threads, load average "
        f"{load:.1f} at start, {os.getloadavg()[0]:.1f} at the end. 8 reference models of "
        "the PneumoniaMNIST benchmark recipe (MONAI Classifier, 1,500 steps of 64) on halves "
        "of the 2,000 known images, each arm into an empty cache; then three audits of 200 "
        "images each reading that arm's models.\n"
    )
    base = runs.get("one at a time", {}).get("seconds")
    pool = runs.get("worker pool", {}).get("seconds")
    say("| arm | seconds (8 models + scoring) | vs one at a time | vs worker pool |")
    say("|---|---|---|---|")
    for name, run in runs.items():
        ratio = f"{base / run['seconds']:.2f}x" if base else "-"
        against = f"{pool / run['seconds']:.2f}x" if pool else "-"
        say(f"| {name} | {run['seconds']:.1f} | {ratio} | {against} |")
    say("\n| query set | " + " | ".join(runs) + " |")
    say("|---|" + "---|" * len(runs))
    for q in queries:
        cells = []
        for run in runs.values():
            r = run["results"][q]
            d = r.details
            cells.append(
                f"{r.decision}, p {r.statistic:.3g}, strength "
                f"{d.get('membership_strength', float('nan')):.2f}"
            )
        say(f"| {q} | " + " | ".join(cells) + " |")
    aucs = [f"{run['results']['remembered'].details.get('member_auc', float('nan')):.3f}"
            for run in runs.values()]  # fmt: skip
    say("| per-sample AUC, known members vs non-members | " + " | ".join(aucs) + " |")
    if args.out:
        write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
