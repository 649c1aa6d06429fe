"""How far apart distinct images are, and which copies the near-copy rule catches
(issue 66, item 2: :data:`monai_forget.audit.duplicates.NEAR_COPY_CORRELATION`).

For each real set: its exact copies (same content hash), and each image's highest
thumbnail correlation with any image of another hash (the distinct images' closest
likeness: the rule must stay above it); then 200 of its images copied with a change a
hospital's export makes (noise, a new window, 8-bit requantisation, a one-pixel shift),
and the share of those copies the rule collapses into their originals.

Usage::

    python benchmarks/near_copies.py --out benchmarks/results/near_copies.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _markdown import finish, say

from monai_forget.audit.duplicates import (
    NEAR_COPY_CORRELATION,
    THUMBNAIL,
    collapse_duplicates,
    thumbnails,
)
from monai_forget.data import (
    LabelledImages,
    load_acdc_slices,
    load_digits,
    load_mnist_test,
    load_pneumoniamnist,
)

SETS = {
    "digits (8 px)": load_digits,
    "PneumoniaMNIST train (28 px)": lambda: load_pneumoniamnist("train"),
    "PneumoniaMNIST test (28 px)": lambda: load_pneumoniamnist("test"),
    "MNIST test (28 px)": load_mnist_test,
    "ACDC slices (64 px)": load_acdc_slices,
}


def closest_other(data: LabelledImages) -> np.ndarray:
    """Each image's highest thumbnail correlation with an image of another hash."""
    flat = thumbnails(np.asarray(data.images))
    flat = flat - flat.mean(axis=1, keepdims=True)
    norms = np.linalg.norm(flat, axis=1)
    z = flat / np.where(norms > 0, norms, 1.0)[:, None]
    hashes = np.asarray(data.sample_hashes)
    best = np.empty(len(z))
    for start in range(0, len(z), 1024):
        r = z[start : start + 1024] @ z.T
        same = hashes[start : start + 1024, None] == hashes[None, :]
        best[start : start + 1024] = np.where(same, -2.0, r).max(axis=1)
    return best


def changed(images: np.ndarray, how: str, rng: np.random.Generator) -> np.ndarray:
    x = images.astype(np.float64)
    if how == "noise (1 % of the image's sd)":
        sd = x.reshape(len(x), -1).std(axis=1)[:, None, None, None]
        return x + rng.normal(0.0, 1.0, x.shape) * 0.01 * sd
    if how == "new window (1.5 x + 0.05)":
        return 1.5 * x + 0.05
    if how == "8-bit requantisation":
        low = x.min(axis=(1, 2, 3), keepdims=True)
        span = np.maximum(x.max(axis=(1, 2, 3), keepdims=True) - low, 1e-12)
        return np.round((x - low) / span * 255) / 255 * span + low
    return np.roll(x, 1, axis=-1)  # one-pixel shift


CHANGES = ("noise (1 % of the image's sd)", "new window (1.5 x + 0.05)",
           "8-bit requantisation", "one-pixel shift")  # fmt: skip


def caught(data: LabelledImages, how: str, rng: np.random.Generator) -> tuple[int, int]:
    """Of 200 changed copies of distinct images, how many the rule collapses."""
    first = np.unique(data.sample_hashes, return_index=True)[1]
    pick = rng.choice(np.sort(first), size=min(200, len(first)), replace=False)
    originals = data.subset(pick)
    copies = changed(np.asarray(originals.images), how, rng).astype(np.float32)
    both = LabelledImages(np.concatenate([np.asarray(originals.images), copies]),
                          np.concatenate([originals.labels, originals.labels]),
                          num_classes=data.num_classes)  # fmt: skip
    before = collapse_duplicates(originals)
    after = collapse_duplicates(both)
    return after.removed - before.removed, len(pick)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    say("### Near copies: distinct images' closest likeness, and the copies caught (issue 66)\n")
    say(f"`python benchmarks/near_copies.py {' '.join(sys.argv[1:])}`. Thumbnails: area means "
        f"on at most {THUMBNAIL}x{THUMBNAIL} pixels; near copies: Pearson r >= "
        f"{NEAR_COPY_CORRELATION}.\n")  # fmt: skip
    say(
        "| set | images | exact copies | closest distinct pair (max r) | 99.9th percentile | "
        "distinct images collapsed | " + " | ".join(f"caught: {c}" for c in CHANGES) + " |"
    )
    say("|---|---|---|---|---|---|" + "---|" * len(CHANGES))
    targets, highest = [], 0.0
    for name, load in SETS.items():
        try:
            data = load()
        except FileNotFoundError as err:
            say(f"| {name} | absent: {err} |")
            continue
        best = closest_other(data)
        collapsed = collapse_duplicates(data)
        hits = [caught(data, how, rng) for how in CHANGES]
        highest = max(highest, float(best.max()))
        say(f"| {name} | {len(data)} | {collapsed.exact} | {best.max():.4f} | "
            f"{np.quantile(best, 0.999):.4f} | {collapsed.near} | "
            + " | ".join(f"{k}/{n}" for k, n in hits) + " |")  # fmt: skip
    ok = highest < NEAR_COPY_CORRELATION
    targets.append(f"- no two distinct real images are near copies (max r {highest:.4f} < "
                   f"{NEAR_COPY_CORRELATION}): {'**met**' if ok else '**missed**'}")  # fmt: skip
    return finish(targets, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
