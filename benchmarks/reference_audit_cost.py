"""Cost of a full reference-model audit on PneumoniaMNIST, as a user runs it.

The target (the grid's PneumoniaMNIST design) is trained first and not timed. Then
``monai-forget audit refmodel`` runs in a fresh process with an empty cache: 8
reference models trained by the recipe, every set scored, the test, the report. The
audited provider D_Q is 200 training images of the target; the known members are 1,000
other training images and the known non-members 1,000 training images the target never
saw (``--nonmembers-from held-out``: the validation and test splits instead); the
command's default population (half of each known set) trains the reference models.
Issue 32's target: under 3 minutes on 2 cores (issue 11's was 10).

``--site-images N``: the audit is also given N other images of D_Q's site (train images
the target never saw, none a known non-member), so it runs as a user given the site's
images does: both designs run, the offline reference models and online ones that also
train on the site's images (issue 50's target for the default under a site shift: under
5 minutes on 2 cores; the online models are paid per query set).

Run::

    python benchmarks/reference_audit_cost.py --out benchmarks/results/reference_audit_cost.md
    python benchmarks/reference_audit_cost.py --site-images 300 \
        --out benchmarks/results/reference_audit_cost_site.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PNEUMONIA_RECIPE, permuted, unique_images, without
from _markdown import say, write

from monai_forget.data import LabelledImages, concat, load_pneumoniamnist
from monai_forget.shadow import ShadowTrainer

TARGET_MINUTES = 3.0
SITE_TARGET_MINUTES = 5.0


def _save(data: LabelledImages, path: Path) -> str:
    np.savez(path, images=np.asarray(data.images)[:, 0], labels=np.asarray(data.labels))
    return str(path)


def run(args: argparse.Namespace, work: Path) -> dict:
    # Distinct images only: PneumoniaMNIST repeats some, and the audit refuses overlaps.
    # Shuffled: the split's files are not in random order.
    train = permuted(unique_images(load_pneumoniamnist("train")), args.seed)
    held_out = without(
        unique_images(concat(load_pneumoniamnist("val"), load_pneumoniamnist("test"))), train
    )
    target_data = train.subset(slice(0, 2400))
    # the train split's images after the target's (its site) or the val and test splits
    unseen = train.subset(slice(2400, 3400)) if args.nonmembers_from == "train" else held_out
    nonmembers = unseen.subset(slice(0, 1000))
    target = ShadowTrainer(PNEUMONIA_RECIPE).train(target_data, seed=args.seed + 1)
    torch.save(target.state_dict(), work / "target.pt")
    recipe = {k: v for k, v in asdict(PNEUMONIA_RECIPE).items() if v is not None}
    (work / "recipe.json").write_text(json.dumps(recipe))
    command = [
        "monai-forget", "audit", "reference",
        "--model", str(work / "target.pt"),
        "--network", PNEUMONIA_RECIPE.network,
        "--network-args", json.dumps(PNEUMONIA_RECIPE.network_args),
        "--recipe", str(work / "recipe.json"),
        "--query", _save(target_data.subset(slice(0, 200)), work / "query.npz"),
        "--members", _save(target_data.subset(slice(200, 1200)), work / "members.npz"),
        "--nonmembers", _save(nonmembers, work / "nonmembers.npz"),
        "--references", str(args.references),
        "--workers", str(args.workers),
        "--cache-dir", str(work / "cache"),
        "--out", str(work / "audit"),
        "--json",
    ]  # fmt: skip
    if args.site_images:
        site = train.subset(slice(3400, 3400 + args.site_images))  # never trained on
        if len(site) < args.site_images:
            raise ValueError(f"only {len(site)} train images are left for --site-images")
        command += ["--site-images", _save(site, work / "site.npz")]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 3, 4):
        raise RuntimeError(f"the audit failed ({done.returncode}): {done.stderr[-2000:]}")
    return {"seconds": seconds, "result": json.loads(done.stdout), "command": command}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--references", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--nonmembers-from", choices=["train", "held-out"], default="train")
    parser.add_argument(
        "--site-images",
        type=int,
        default=0,
        metavar="N",
        help="also give the audit N other images of D_Q's site (both designs run then)",
    )
    parser.add_argument("--out", help="also write the markdown here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        load_before = os.getloadavg()[0]
        measured = run(args, Path(tmp))
        load_after = os.getloadavg()[0]
    minutes = measured["seconds"] / 60
    result = measured["result"]
    goal = SITE_TARGET_MINUTES if args.site_images else TARGET_MINUTES
    mark = "**met**" if minutes < goal else "**missed**"
    say("## Cost of a reference-model audit (PneumoniaMNIST)")
    say()
    say(f"`python benchmarks/reference_audit_cost.py {' '.join(sys.argv[1:])}`; "
        f"{os.cpu_count()} cores, load average {load_before:.1f} before, {load_after:.1f} "
        f"after; torch {torch.__version__}")  # fmt: skip
    say()
    say(f"`monai-forget audit refmodel` with {args.references} reference models, "
        "trained as one group (`--workers` applies to recipes that cannot be grouped), an "
        "empty cache; D_Q 200 training images of the target, "
        f"1,000 known members, 1,000 known non-members from the {args.nonmembers_from} "
        "images the target never saw"
        + (f"; {args.site_images} other images of D_Q's site (`--site-images`): both "
           "designs, 8 offline and 8 online reference models"
           if args.site_images else "") + ".")  # fmt: skip
    say()
    say(
        f"- wall time of the command: {measured['seconds']:.0f} s = {minutes:.1f} min; "
        f"target < {goal:.0f} min: {mark}"
    )
    say(
        f"- its decision (D_Q is made of members): {result.get('decision')}, "
        f"p_member {result['statistic']:.3g}, membership strength "
        f"{result['details']['membership_strength']:.2f} (upper bound "
        f"{result['details']['membership_strength_upper']:.2f})"
    )
    for warning in result["details"]["warnings"]:
        say(f"  - warning: {warning}")
    say()
    if args.out:
        write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
