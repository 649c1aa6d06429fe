"""Seeded patient-level train/validation/test splits (no patient in two splits)."""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Mapping

import numpy as np

#: datalist keys, in the order of the fractions
SPLITS = ("training", "validation", "test")

#: split names of the source layouts mapped to datalist keys
SOURCE_SPLIT_KEYS = {"train": "training", "val": "validation", "test": "test"}

SPLIT_STREAM = 2  # independent of the site stream (sites.SITE_STREAM)


def parse_fractions(text: str) -> tuple[float, float, float]:
    """Parse ``"0.7,0.1,0.2"`` into (training, validation, test) fractions summing to 1.

    Raises:
        ValueError: not three non-negative numbers summing to 1.
    """
    try:
        values = tuple(float(part) for part in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 3 or any(v < 0 or not math.isfinite(v) for v in values):
        raise ValueError(
            f"`split` {text!r}: expected three non-negative fractions TRAIN,VAL,TEST "
            "such as 0.7,0.1,0.2"
        )
    if abs(sum(values) - 1.0) > 1e-6:
        raise ValueError(f"`split` {text!r}: the fractions sum to {sum(values):g}, not 1")
    return values  # type: ignore[return-value]


def split_patients(
    strata: Mapping[str, str], fractions: tuple[float, float, float], seed: int
) -> dict[str, str]:
    """Assign every patient to one split, stratified, seeded.

    Within each stratum (e.g. ``site|group``) patients are shuffled and cut by
    cumulative rounding over all strata, so every stratum is split in proportion
    (within one patient) and the overall sizes match the fractions.

    Args:
        strata: ``{patient: stratum}``.
        fractions: (training, validation, test) fractions summing to 1.
        seed: seed of the shuffle.

    Returns:
        ``{patient: "training" | "validation" | "test"}``.
    """
    rng = np.random.default_rng([seed, SPLIT_STREAM])
    cumulative = np.cumsum(fractions)
    cumulative[-1] = 1.0  # guard against float round-off losing the last patient

    def counts_before(position: int) -> list[int]:
        """Patients per split among the first ``position`` (rounded cumulative cuts)."""
        bounds = [0] + [math.floor(position * c + 0.5) for c in cumulative]
        return [b - a for a, b in itertools.pairwise(bounds)]

    by_stratum: dict[str, list[str]] = defaultdict(list)
    for patient, stratum in strata.items():
        by_stratum[stratum].append(patient)
    result: dict[str, str] = {}
    offset = 0
    for stratum in sorted(by_stratum):
        members = sorted(by_stratum[stratum])
        order = [members[i] for i in rng.permutation(len(members))]
        start, stop = counts_before(offset), counts_before(offset + len(members))
        counts = [b - a for a, b in zip(start, stop, strict=True)]
        position = 0
        for name, count in zip(SPLITS, counts, strict=True):
            for patient in order[position : position + count]:
                result[patient] = name
            position += count
        offset += len(members)
    return {p: result[p] for p in sorted(result)}


def patients_in_several_splits(samples: list[dict]) -> dict[str, list[str]]:
    """``{patient: splits}`` for patients whose samples fall into more than one split."""
    seen: dict[str, set[str]] = defaultdict(set)
    for sample in samples:
        seen[sample["patient"]].add(sample["split"])
    return {p: sorted(s) for p, s in sorted(seen.items()) if len(s) > 1}
