"""The reference-model audit on a GPU against the same audit on the CPU (issue 34, item 11).

The demo's three withdrawal scenarios (scikit-learn's digits split into providers A, B,
C and the auditor's calibration set; the consortium's model and the model retrained
without C; the reference-model auditor with the demo's reference models) run once per
arm: the CPU, then each CUDA device given, in float32 and with the recipe's mixed
precision (``amp``: MONAI's ``SupervisedTrainer(amp=True)``). Every model of an arm
(targets and reference models) trains and scores on that arm's device. Printed per arm:
each scenario's decision against its right answer, p_member and the 95 % upper bound on
the remembered share, the wall time and the ratio to the CPU's.

Where no CUDA device is visible the GPU arms are skipped and said so: run it on a GPU
machine (one command, a few minutes)::

    python benchmarks/gpu_reference_audit.py --devices cuda:0 \\
        --out benchmarks/results/gpu_reference_audit.md
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _markdown import say, write

from monai_forget.audit import FORGOTTEN, NOT_FORGOTTEN, ReferenceModelAuditor
from monai_forget.data import concat
from monai_forget.demo import DEMO_REFERENCES, DIGITS_RECIPE, digits_split
from monai_forget.shadow import ShadowTrainer

#: (scenario, model, provider audited, right answer, retained providers: known members)
SCENARIOS = (
    ("original model, provider C", "original", "C", NOT_FORGOTTEN, ("A", "B")),
    ("retrained without C, provider C", "retrained", "C", FORGOTTEN, ("A", "B")),
    ("retrained without C, provider A", "retrained", "A", NOT_FORGOTTEN, ("B",)),
)


def run_arm(device: str, amp: bool, seed: int) -> dict:
    """Train the arm's models on ``device`` and run the three audits; timed."""
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    recipe = dataclasses.replace(DIGITS_RECIPE, amp=amp)
    sets = digits_split(seed)
    trainer = ShadowTrainer(recipe, device=device)
    models = {
        "original": trainer.train(concat(sets["A"], sets["B"], sets["C"]), seed=seed),
        "retrained": trainer.train(concat(sets["A"], sets["B"]), seed=seed),
    }
    auditor = ReferenceModelAuditor(
        recipe=recipe, n_references=DEMO_REFERENCES, seed=seed, device=device, workers=1
    )
    rows = []
    for name, model, provider, expected, retained in SCENARIOS:
        known = (concat(*(sets[r] for r in retained)), sets["calibration"])
        result = auditor.audit(models[model], sets[provider], known, label=name)
        rows.append((name, expected, result))
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
    return {"rows": rows, "seconds": time.perf_counter() - start}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", nargs="*", default=["cuda:0"], help="CUDA devices to check")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--out", help="also write the report to this file")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    arms = [("cpu", False)]
    missing = []
    for device in args.devices:
        index = int(device.split(":")[1]) if ":" in device else 0
        if torch.cuda.is_available() and index < torch.cuda.device_count():
            arms += [(device, False), (device, True)]
        else:
            missing.append(device)
    say("# The reference-model audit on a GPU and on the CPU\n")
    say(
        f"`python benchmarks/gpu_reference_audit.py {' '.join(sys.argv[1:])}`; the demo's "
        f"digits scenarios, {DEMO_REFERENCES} reference models, seed {args.seed}, torch "
        f"{torch.__version__}, {args.threads} CPU thread(s)"
        + (f"; GPU: {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else "")
        + ".\n"
    )
    if missing:
        say(f"No CUDA device {', '.join(missing)} is visible here: only the CPU arm ran.\n")
    say("| arm | scenario | right answer | decision | p_member | share upper bound (at most 1) |")
    say("|---|---|---|---|---|---|")
    results, wrong = {}, 0
    for device, amp in arms:
        label = device + (" (amp)" if amp else "")
        results[label] = run_arm(device, amp, args.seed)
        for name, expected, result in results[label]["rows"]:
            wrong += result.decision != expected
            upper = min(1.0, result.details.get("membership_strength_upper", float("nan")))
            say(
                f"| {label} | {name} | {expected} | {result.decision} | "
                f"{result.statistic:.4f} | {upper:.3f} |"
            )
    cpu = results["cpu"]["seconds"]
    say()
    for label, arm in results.items():
        ratio = "" if label == "cpu" else f"; CPU vs this arm: {cpu / arm['seconds']:.1f}x"
        say(
            f"- {label}: {arm['seconds']:.1f} s for the 2 targets, the reference models "
            f"and 3 audits{ratio}"
        )
    say(f"- decisions against the right answers: {wrong} wrong of {3 * len(results)}")
    if args.out:
        write(args.out)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
