"""Cost of a leak-scan text through the model's preprocessing against one stamped directly.

Issue 54's cost target: a text scanned through the pipeline (burned at acquisition
resolution, then intensity-scaled and area-resized to the model's 28x28 grid, as the CXR
bundle's inference preprocessing does) costs <= 2x a text stamped directly on the model
grid, on the same model and probes, at 256- and 2048-px acquisition grids, on 2 cores.

Arms (seconds per text, median of ``--rounds`` interleaved rounds over ``--texts`` texts;
the ratio is the median of the rounds' ratios):

- direct: :func:`~monai_forget.memorisation.passes.text_divergences` on the clean model
  inputs (the scan's path before issue 54);
- pipeline: :func:`~monai_forget.memorisation.passes.pipeline_divergences` with the
  box-local shortcut (checked against the whole chain on first use);
- whole chain: the same with every text run through the whole preprocessing (what a
  chain the shortcut does not describe costs), over fewer texts at 2048 px;
- TrueType: the pipeline with the texts in DejaVu Sans at ``6 * scale`` px, anti-aliased
  (item 3): coverage masks take the box-local path without the glyph sums of the 5x5
  typeface.

Data: random 12-bit acquisition images (the cost does not depend on their content),
random 4-letter texts at scale ``grid // 128``; an untrained MLP-1.

Usage: ``python benchmarks/leak_scan_pipeline_cost.py [--probes 64] [--texts 64]
[--rounds 3] [--out FILE]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
from monai.transforms import Compose, Resized, ScaleIntensityRanged

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's package
from _markdown import log, say, write

from monai_forget.canary import random_text
from monai_forget.canary.lettering import TrueTypeLettering
from monai_forget.memorisation.passes import pipeline_divergences, predict_probs, text_divergences
from monai_forget.memorisation.pipeline import PipelineProbes, Preprocessing
from monai_forget.networks import MLP1

SIZE = 28


def chain() -> Preprocessing:
    """The CXR bundle's preprocessing after loading: scale to [0, 1], area-resize."""
    steps = [
        ScaleIntensityRanged("image", 0, 4095, 0.0, 1.0, clip=True),
        Resized("image", (SIZE, SIZE), mode="area"),
    ]
    return Preprocessing(Compose(steps), "image", description="scale, area-resize to 28")


def per_text(run, texts: list[str]) -> float:
    start = time.perf_counter()
    run(texts)
    return (time.perf_counter() - start) / len(texts)


def measure(grid: int, n_probes: int, n_texts: int, rounds: int) -> dict[str, float]:
    rng = np.random.default_rng(grid)
    images = rng.integers(0, 4096, (n_probes, 1, grid, grid)).astype(np.float32)
    model = MLP1((1, SIZE, SIZE), 2, hidden=64).eval()
    probes = PipelineProbes(images, chain())
    whole = PipelineProbes(images, chain(), box_local=False)
    clean_inputs = probes.clean()
    clean = predict_probs(model, clean_inputs, "clean")
    texts = [random_text(4, rng) for _ in range(n_texts)]
    scale, place = max(1, grid // 128), (grid // 64, grid // 64)
    few = texts[: max(2, n_texts // (8 if grid > 512 else 1))]
    font = TrueTypeLettering("DejaVuSans", 6 * scale)
    arms = {
        "direct": lambda t: text_divergences(
            model, clean_inputs, clean, t, position=(1, 1), value=1.0
        ),
        "pipeline": lambda t: pipeline_divergences(
            model, probes, clean, t, position=place, scale=scale, value="max"
        ),
        "whole chain": lambda t: pipeline_divergences(
            model, whole, clean, t, position=place, scale=scale, value="max"
        ),
        "TrueType": lambda t: pipeline_divergences(
            model, probes, clean, t, position=place, scale=font, value="max"
        ),
    }
    arms["pipeline"](texts[:1])  # the first use checks the shortcut and reads the resize
    arms["TrueType"](texts[:2])  # and computes the per-pixel responses of the font's box
    assert probes.shortcut, "the shortcut should describe this chain"
    times: dict[str, list[float]] = {k: [] for k in arms}
    for r in range(rounds):
        order = list(arms)[r % len(arms) :] + list(arms)[: r % len(arms)]
        for arm in order:
            times[arm].append(per_text(arms[arm], few if arm == "whole chain" else texts))
            log(f"grid {grid} round {r + 1} {arm}: {times[arm][-1] * 1e3:.2f} ms/text")
    out = {k: statistics.median(v) for k, v in times.items()}
    # the ratio of each round (its arms ran back to back), then their median: a drift in
    # the machine's load between rounds moves both arms of a round alike
    out["ratio"] = statistics.median(
        p / d for p, d in zip(times["pipeline"], times["direct"], strict=True)
    )
    out["font ratio"] = statistics.median(
        p / d for p, d in zip(times["TrueType"], times["direct"], strict=True)
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--probes", type=int, default=64)
    parser.add_argument("--texts", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--grids", type=int, nargs="+", default=[256, 2048])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.manual_seed(0)
    say("## Leak-scan cost through the pipeline (issue 54)")
    say()
    say(
        f"`python benchmarks/leak_scan_pipeline_cost.py --probes {args.probes} --texts "
        f"{args.texts} --rounds {args.rounds}` · torch {torch.__version__}, "
        f"{len(os.sched_getaffinity(0))} cores, load average at start {os.getloadavg()[0]:.1f}"
    )
    say()
    say(
        "Seconds per text (median of interleaved rounds); MLP-1, 28x28 model grid, "
        f"{args.probes} probes. Pipeline: scale + area resize from the acquisition grid."
    )
    say()
    say(
        "| acquisition grid | direct stamp | pipeline (box-local) | ratio | whole chain | ratio "
        "| TrueType (box-local) | ratio |"
    )
    say("|---|---|---|---|---|---|---|---|")
    ratios = {}
    for grid in args.grids:
        t = measure(grid, args.probes, args.texts, args.rounds)
        ratios[grid] = t["ratio"]
        say(
            f"| {grid} px | {t['direct'] * 1e3:.2f} ms | {t['pipeline'] * 1e3:.2f} ms | "
            f"**{ratios[grid]:.2f}x** | {t['whole chain'] * 1e3:.1f} ms | "
            f"{t['whole chain'] / t['direct']:.0f}x | {t['TrueType'] * 1e3:.2f} ms | "
            f"{t['font ratio']:.2f}x |"
        )
    say()
    worst = max(ratios.values())
    say(
        f"Target: a text through the pipeline <= 2x a text stamped directly: worst "
        f"{worst:.2f}x, **{'met' if worst <= 2 else 'missed'}**."
    )
    if args.out:
        write(args.out)


if __name__ == "__main__":
    main()
