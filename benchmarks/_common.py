"""What several benchmark scripts share: the leak scans' 50-name roster, the 95 % Wilson
interval of a rate as the result tables print it, the withdrawal benchmarks' recipes, and
the data helpers that keep their sets disjoint."""

from __future__ import annotations

import numpy as np
import scipy.stats

from monai_forget.data import LabelledImages
from monai_forget.fingerprint import sample_hashes
from monai_forget.shadow import SupervisedRecipe

#: 50 candidate names of 3-4 letters (a 4-letter name is 23 px wide: it fits 28x28).
ROSTER = [
    "ADA", "ALI", "AMY", "ANNA", "BEA", "BEN", "BOB", "CARL", "DAN", "DORA", "EDDY", "EMMA",
    "EVA", "EVE", "FAY", "GUS", "HUGO", "IAN", "IDA", "IVY", "JACK", "JAN", "JOE", "JOHN",
    "KAI", "KATE", "KIM", "LEO", "LILY", "LUCY", "MAX", "MARY", "MIA", "NED", "NINA", "OLGA",
    "OTTO", "PAM", "PAUL", "RAY", "ROSA", "RUTH", "SAM", "SARA", "TED", "TINA", "TOM", "UMA",
    "VERA", "ZOE",
]  # fmt: skip
assert len(ROSTER) == 50 and len(set(ROSTER)) == 50


def scan_row(arm: str, series: list[dict], controls: list[dict]) -> str:
    """A leak-scan benchmark's table row for one scan ``arm``: over the models that carry
    a name (``series``: records with ``name`` and per-arm ``rank``, ``flagged``,
    ``attributed``) the name detected (flagged and ranked first), ranked first, flagged,
    another roster name flagged; over the ``controls``, scans flagging any name."""
    first = sum(r[arm]["rank"] == 1 for r in series)
    flagged = sum(r["name"] in r[arm]["flagged"] for r in series)
    found = sum(r[arm]["rank"] == 1 and r["name"] in r[arm]["flagged"] for r in series)
    others = sum(any(n != r["name"] for n in r[arm]["attributed"]) for r in series)
    alarms = sum(bool(r[arm]["flagged"]) for r in controls)
    cells = [wilson(k, len(series)) for k in (found, first, flagged, others)]
    cells.append(wilson(alarms, len(controls)))
    return f"| {arm} | {len(series)} / {len(controls)} | " + " | ".join(cells) + " |"


def wilson(k: int, n: int) -> str:
    """``k/n (x %; lo-hi %)`` with the 95 % Wilson score interval."""
    if n == 0:
        return "0/0"
    ci = scipy.stats.binomtest(k, n).proportion_ci(0.95, method="wilson")
    return f"{k}/{n} ({100 * k / n:.1f} %; {100 * ci.low:.1f}-{100 * ci.high:.1f} %)"


PNEUMONIA_RECIPE = SupervisedRecipe(
    network="Classifier",
    network_args={"in_shape": (1, 28, 28), "classes": 2, "channels": (8, 16), "strides": (2, 2)},
    steps=1500,
    batch_size=64,
    learning_rate=1e-3,
)
MNIST_RECIPE = SupervisedRecipe(
    network="mlp",
    network_args={"in_shape": (1, 28, 28), "num_classes": 10, "hidden": (256, 256)},
    steps=2000,
    batch_size=64,
    learning_rate=1e-3,
)


def unique_images(data: LabelledImages) -> LabelledImages:
    """The first occurrence of every distinct image (exact duplicates would break D_Q/D_C
    disjointness and double-count samples)."""
    _, first = np.unique(sample_hashes(data), return_index=True)
    return data.subset(np.sort(first))


def without(data: LabelledImages, *others: LabelledImages) -> LabelledImages:
    """``data`` without any image that also appears in ``others``."""
    seen = np.concatenate([sample_hashes(o) for o in others])
    return data.subset(~np.isin(sample_hashes(data), seen))


def permuted(data: LabelledImages, seed: int) -> LabelledImages:
    return data.subset(np.random.default_rng(seed).permutation(len(data)))
