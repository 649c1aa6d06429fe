"""How fast a leak scan runs a model on a CPU: the model as given in batches of 1,024 (the
scan's default before) against the scan's CPU path now (a model with 2-D convolutions: a
channels-last copy in batches of 32; any other as given, in batches of 1,024;
:mod:`monai_forget.cpu_inference`).

Two measurements, one thread (as each shard of the detection curve runs), interleaved
rounds on a shared machine, medians:

- forward passes: milliseconds per image over random inputs, for the paper's MLP-1 and
  CNN-1 (28 px), the detection curve's networks (MLP-1 and its CNN-1 with 16/32 padded
  channels, 64 and 128 px) and MONAI's DenseNet-121 (64 px), with the largest output
  difference between the two paths;
- a whole scan (``leak_scan``: 10 names, 100 decoys, random controls) of the curve's 64-px
  CNN over 100 random probes, with the largest difference in any name's M.

Usage: ``python benchmarks/leak_scan_forward.py [--rounds 3] [--out FILE]``
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _markdown import log, say, write
from _timing import add_arguments, interleaved, machine, verdict, wait_options

from monai_forget.cpu_inference import batch_size_for, laid_out_for
from monai_forget.memorisation import LeakScanConfig, leak_scan
from monai_forget.networks import CNN1, MLP1

PREVIOUS_BATCH = 1024
CURVE_CNN = {"channels": (16, 32), "hidden": 128, "padding": 1, "pool_every": 1}
ROSTER = ["ANNA", "BOB", "EVE", "JOHN", "MARY", "LUCY", "TOM", "SAM", "ZOE", "IVY"]


def networks() -> list[tuple[str, int, torch.nn.Module, int]]:
    """(label, input px, untrained model, images timed)."""
    from monai.networks.nets import DenseNet121

    torch.manual_seed(0)
    return [
        ("MLP-1 (paper)", 28, MLP1((1, 28, 28), 10), 1024),
        ("CNN-1 (paper)", 28, CNN1((1, 28, 28), 10), 1024),
        ("MLP-1 (curve)", 64, MLP1((1, 64, 64), 5), 1024),
        ("CNN-1 16/32 (curve)", 64, CNN1((1, 64, 64), 5, **CURVE_CNN), 1024),
        ("CNN-1 16/32 (curve)", 128, CNN1((1, 128, 128), 5, **CURVE_CNN), 256),
        ("DenseNet-121 (MONAI)", 64, DenseNet121(2, 1, 5), 128),
    ]


def forward(model: torch.nn.Module, images: torch.Tensor, batch: int) -> Callable[[], torch.Tensor]:
    model.eval()

    def run() -> torch.Tensor:
        with torch.inference_mode():
            return torch.cat([model(images[i : i + batch]) for i in range(0, len(images), batch)])

    return run


def forward_rows(args: argparse.Namespace) -> list[float]:
    say("| network | input px | images | before: ms per image (as given, batch 1024) | now: "
        "ms per image (scan's CPU path) | speed-up | largest output difference |")  # fmt: skip
    say("|---" * 7 + "|")
    ratios = []
    for label, size, model, n in networks():
        images = torch.rand(n, 1, size, size, generator=torch.Generator().manual_seed(1))
        fast = forward(laid_out_for(model, "cpu"), images, batch_size_for(model, "cpu"))
        runs = {"before": forward(model, images, PREVIOUS_BATCH), "now": fast}
        times = interleaved(runs, args.rounds, **wait_options(args), log=log)
        gap = (runs["before"]() - runs["now"]()).abs().max().item()
        before, now = (1000 * times[k].median / n for k in ("before", "now"))
        ratios.append(before / now)
        say(f"| {label} | {size} | {n} | {before:.3f} | {now:.3f} | {before / now:.2f}x | "
            f"{gap:.1e} |")  # fmt: skip
    return ratios


def scan_row(args: argparse.Namespace) -> float:
    """One whole scan on each path; the M of every name compared."""
    torch.manual_seed(0)
    model = CNN1((1, 64, 64), 5, **CURVE_CNN).eval()
    probes = np.random.default_rng(2).random((100, 1, 64, 64)).astype(np.float32) * 0.3
    base = dict(position=(4, 4), decoys=100, decoy_seed=0, seed=0)
    results = {}

    def before() -> None:
        with mock.patch("monai_forget.memorisation.scan_models.laid_out_for", lambda m, d: m):
            results["before"] = leak_scan(model, probes, ROSTER, LeakScanConfig(**base,
                                          batch_size=PREVIOUS_BATCH))  # fmt: skip

    def now() -> None:
        results["now"] = leak_scan(model, probes, ROSTER, LeakScanConfig(**base))

    times = interleaved({"before": before, "now": now}, args.rounds, **wait_options(args), log=log)
    m = {
        k: np.array([r.m for r in sorted(v.rows, key=lambda r: r.name)]) for k, v in results.items()
    }
    gap = np.abs(m["before"] - m["now"]).max() / np.abs(m["before"]).max()
    same = [r.name for r in results["before"].rows] == [r.name for r in results["now"].rows]
    ratio = times["before"].median / times["now"].median
    say(f"\nA whole scan of the curve's 64-px CNN (10 names, 100 decoys per kind, 100 probes): "
        f"{times['before'].median:.1f} s before, {times['now'].median:.1f} s now, "
        f"**{ratio:.2f}x**; the names' M differ by at most {gap:.1e} of the largest |M| "
        f"(the same ranking: {'yes' if same else 'no'}).")  # fmt: skip
    return ratio


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    add_arguments(parser, rounds=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    say("## Leak-scan forward passes on a CPU (issue 65)\n")
    say(f"`python benchmarks/leak_scan_forward.py {' '.join(sys.argv[1:])}` · torch "
        f"{torch.__version__}, {args.threads} thread(s), {machine()}\n")  # fmt: skip
    ratios = forward_rows(args)
    scan = scan_row(args)
    convolutional = ratios[1:2] + ratios[3:]
    say(f"\nTarget: the scan's CPU path no slower for a CNN and a whole CNN scan faster: "
        f"CNN forward speed-ups {min(convolutional):.2f}-{max(convolutional):.2f}x, scan "
        f"{scan:.2f}x, " + verdict(min(convolutional) >= 1 and scan > 1) + ". MLPs run as "
        f"before (as given, batches of 1,024): {ratios[0]:.2f}x and {ratios[2]:.2f}x.")  # fmt: skip
    if args.out:
        write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
