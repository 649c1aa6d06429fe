"""Random canaries for a pipeline's exposure audit: which texts go into which files.

Carlini et al., "The Secret Sharer" (USENIX Security 2019, Sec. 4) measure how much a
model memorises by inserting random canaries, drawn uniformly from a stated randomness
space, a known number of times each, and ranking each one among the canaries of the same
space that were never inserted. Here a canary is a random text (e.g. five capital
letters: 26^5 = 11,881,376 texts) burned by the injector into ``copies`` images.

Where the copies go: by default all copies of one canary sit in one folder, the way a
burned-in name rides on one patient's series (a PACS export's patient/study/series
folders, or a class folder), so it can become a cue for that series' label; ``"tree"``
spreads them over the whole tree. Canaries never share a file, and different canaries
take different folders while there are folders to spare.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from monai_forget.canary.space import random_texts, space_size
from monai_forget.checks import check_choice

__all__ = ["CANARY_SPACE", "MIN_SPACE_SIZE", "CanaryPlan", "plan_canaries"]

#: The default randomness space: five capital letters (26^5 = 11,881,376 texts).
CANARY_SPACE = "AAAAA"
#: The smallest space a plan accepts (the issue's stated 10^6): a smaller space makes a
#: never-inserted canary too likely to be another's look-alike.
MIN_SPACE_SIZE = 10**6

CopiesFrom = Literal["folder", "tree"]


@dataclass(frozen=True)
class CanaryPlan:
    """Which random canary goes into which files.

    Attributes:
        space: the template of the randomness space (e.g. ``"AAAAA"``).
        seed: the seed that drew the texts and the files.
        files: per canary text, its files (paths relative to the input folder).
    """

    space: str
    seed: int
    files: dict[str, tuple[str, ...]]

    def planted(self) -> dict[str, str]:
        """Each planted file (relative path) with its canary text."""
        return {rel: text for text, rels in self.files.items() for rel in rels}

    def copies(self) -> dict[str, int]:
        """Each canary text with the number of files it is burned into."""
        return {text: len(rels) for text, rels in self.files.items()}


def _image_folders(source: Path, copies_from: CopiesFrom) -> dict[Path, list[Path]]:
    """The images under ``source``, grouped by folder (one group for ``"tree"``)."""
    from monai_forget.dicom.folder import _is_image, walk

    groups: dict[Path, list[Path]] = {}
    for path, reason in walk(source):
        if reason is None and _is_image(path):
            key = path.parent if copies_from == "folder" else source
            groups.setdefault(key, []).append(path)
    return groups


def plan_canaries(
    source: str | os.PathLike,
    n_canaries: int,
    copies: int | Sequence[int],
    *,
    space: str = CANARY_SPACE,
    seed: int = 0,
    copies_from: CopiesFrom = "folder",
) -> CanaryPlan:
    """Draw ``n_canaries`` random texts per entry of ``copies`` and choose their files.

    Args:
        source: the folder of training images the canaries go into.
        n_canaries: canaries per number of copies.
        copies: files per canary; several numbers plant ``n_canaries`` canaries at each
            (the exposure curve of one training).
        space: the randomness space as a template (``A`` a capital letter, ``a`` a small
            one, ``0`` a digit); at least :data:`MIN_SPACE_SIZE` texts.
        seed: draws the texts and the files (the same seed, the same plan).
        copies_from: ``"folder"``: all copies of a canary in one folder; ``"tree"``: anywhere.

    Raises:
        ValueError: ``source`` is not a folder, a space under :data:`MIN_SPACE_SIZE`,
            counts below 1, or no folder with enough images left for a canary (the
            message gives the largest).
    """
    counts = [copies] if isinstance(copies, int) else [int(c) for c in copies]
    if n_canaries < 1 or not counts or min(counts) < 1:
        raise ValueError(f"need at least 1 canary and 1 copy, got {n_canaries} and {counts}")
    check_choice("copies_from", copies_from, ("folder", "tree"))
    size = space_size(space)
    if size < MIN_SPACE_SIZE:
        raise ValueError(
            f"the canary space {space!r} holds {size:,} texts, fewer than {MIN_SPACE_SIZE:,}; "
            "use a longer template (e.g. AAAAA: 26^5 texts)"
        )
    source = Path(source)
    if not source.is_dir():
        raise ValueError(
            f"random canaries are planted across a folder of training images; {source} is "
            "not a folder"
        )
    rng = np.random.default_rng(seed)
    wanted = sorted((c for c in counts for _ in range(n_canaries)), reverse=True)
    texts = random_texts(space, len(wanted), rng)
    left = {folder: sorted(paths) for folder, paths in _image_folders(source, copies_from).items()}
    used: set[Path] = set()
    files: dict[str, tuple[str, ...]] = {}
    for text, count in zip(texts, wanted, strict=True):
        fits = sorted(f for f, paths in left.items() if len(paths) >= count)
        if not fits:
            largest = max((len(p) for p in left.values()), default=0)
            where = "folder" if copies_from == "folder" else "tree"
            spread = ", or pass `copies_from` tree"
            raise ValueError(
                f"no {where} under {source} has {count} images left for a canary (the most "
                f"left: {largest}); plant fewer copies or canaries"
                + (spread if where == "folder" else "")
            )
        fresh = [f for f in fits if f not in used] or fits
        folder = fresh[int(rng.integers(len(fresh)))]
        picks = set(rng.choice(len(left[folder]), size=count, replace=False).tolist())
        chosen = [p for i, p in enumerate(left[folder]) if i in picks]
        left[folder] = [p for i, p in enumerate(left[folder]) if i not in picks]
        used.add(folder)
        files[text] = tuple(p.relative_to(source).as_posix() for p in chosen)
    return CanaryPlan(space, int(seed), files)
