"""Volumes screened before inference: an unreadable, truncated, non-finite or constant
scan is refused by name, so it never becomes a silent all-background mask.

A UNet fed an all-NaN volume predicts NaN logits, whose argmax is class 0 everywhere: the
run would exit 0 with an empty mask that reads as "no heart found". A constant volume
(a blank export, a failed conversion) has no anatomy either. Both are refused here,
with unreadable and truncated files, and the run's summary says how many.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from monai_forget.acdc.volumes import read_volume, where

__all__ = ["VolumeScreen", "image_problem"]

logger = logging.getLogger(__name__)


def image_problem(image: np.ndarray) -> str | None:
    """Why ``image`` cannot be segmented (non-finite values, one value throughout), or
    None when it can."""
    finite = np.isfinite(image)
    if not finite.all():
        bad = int(image.size - finite.sum())
        return f"{bad} of {image.size} voxels are not finite (NaN or infinite)"
    if image.size == 0 or float(image.max()) == float(image.min()):
        return "the image is constant (no anatomy to segment)"
    return None


class VolumeScreen:
    """The volume entries of :func:`~monai_forget.acdc.volumes.group_volumes` that can be
    segmented, and the ones refused with their reason.

    Each volume is read once here (image only) and checked with :func:`image_problem`;
    a file that cannot be read (missing, truncated, damaged) is refused the same way.
    Every refusal is logged as a warning naming the patient, the phase and the file.

    Args:
        volumes: volume entries.

    Raises:
        ValueError: no volume is left to segment (each refusal is named).
    """

    def __init__(self, volumes: Sequence[Mapping[str, Any]]) -> None:
        self.accepted: list[Mapping[str, Any]] = []
        self.refused: list[tuple[str, str]] = []
        for volume in volumes:
            try:
                problem = image_problem(read_volume(volume, with_mask=False).image)
            except (OSError, ValueError) as err:
                problem = f"cannot be read ({err})"
            if problem is None:
                self.accepted.append(volume)
                continue
            self.refused.append((where(volume), problem))
            logger.warning("refused %s: %s", where(volume), problem)
        if volumes and not self.accepted:
            named = "; ".join(f"{where}: {why}" for where, why in self.refused)
            raise ValueError(f"none of the {len(volumes)} volumes can be segmented: {named}")

    def summary(self) -> str:
        """One line: how many volumes were segmented and how many refused."""
        total = len(self.accepted) + len(self.refused)
        line = f"segmented {len(self.accepted)} of {total} volumes"
        if self.refused:
            line += f"; {len(self.refused)} refused (named above): " + ", ".join(
                where.split(",")[0] for where, _ in self.refused
            )
        return line

    def log_summary(self) -> str:
        """Log :meth:`summary` (a warning when a volume was refused) and return it."""
        line = self.summary()
        (logger.warning if self.refused else logger.info)(line)
        return line
