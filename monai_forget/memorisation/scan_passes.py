"""The leak scan's model passes, in chunks of texts, saved as they finish so an
interrupted scan resumes where it stopped.

A roster of 10,000 names against its decoys takes minutes to hours; a scan killed half
way (SIGTERM from a scheduler, a closed laptop) kept nothing. Every ``CHUNK`` texts the
per-text results go to a checkpoint file (atomically): the mean divergence of every text
on every model (what Eq. 1's M needs) and, on the audited model, the per-probe
divergences of the names (what the paper's t-test needs). A restarted scan with the same
model, probes, roster and settings (its key) skips what is done; any other scan is
refused, so results of two scans are never mixed. Texts are processed in the same
chunks whether or not a scan resumes, so resuming gives the uninterrupted scan's numbers.
The file holds no name: texts enter the key as a hash.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from monai_forget.io import atomic_write

__all__ = ["CHUNK", "ScanCheckpoint", "ScanPasses", "run_passes", "scan_key"]

#: Texts per saved chunk: a few seconds of work on a CPU for MNIST-sized probes.
CHUNK = 256


def scan_key(settings: dict[str, Any], texts: Sequence[str]) -> str:
    """SHA-256 naming one scan: its settings (model and probe fingerprints included) and
    its texts (names and decoys, in order)."""
    h = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode())
    for text in texts:
        h.update(text.encode("utf-8") + b"\0")
    return h.hexdigest()


@dataclass
class ScanPasses:
    """What the passes of one scan produced (complete, or as far as a checkpoint got).

    Attributes:
        means: ``(models, texts)`` mean divergence of each text on each model (NaN: not
            yet computed); model 0 is the audited one, then the references.
        name_rows: ``(names, probes)`` per-probe divergences of the names on model 0.
        done: texts finished per model (with sequential decoys, fewer than the texts).
        decoy_seed: the seed the decoys were drawn with.
    """

    means: np.ndarray
    name_rows: np.ndarray
    done: np.ndarray
    decoy_seed: int

    @classmethod
    def empty(cls, models: int, texts: int, names: int, probes: int, decoy_seed: int):
        return cls(
            np.full((models, texts), np.nan),
            np.full((names, probes), np.nan),
            np.zeros(models, dtype=np.int64),
            int(decoy_seed),
        )


class ScanCheckpoint:
    """A scan's :class:`ScanPasses` on disk, under the scan's key.

    Args:
        path: the checkpoint file (``.npz``).
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def decoy_seed(self) -> int | None:
        """The decoy seed of the interrupted scan in the file, or None without a file."""
        if not self.path.is_file():
            return None
        with np.load(self.path, allow_pickle=False) as npz:
            return int(npz["decoy_seed"])

    def load(self, key: str, shape: tuple[int, int, int, int]) -> ScanPasses | None:
        """The saved passes of the scan named ``key``, or None without a file.

        Raises:
            ValueError: the file holds another scan, or is damaged.
        """
        if not self.path.is_file():
            return None
        try:
            with np.load(self.path, allow_pickle=False) as npz:
                saved = str(npz["key"])
                passes = ScanPasses(
                    npz["means"], npz["name_rows"], npz["done"], int(npz["decoy_seed"])
                )
        except (OSError, ValueError, KeyError) as err:
            raise ValueError(
                f"{self.path} is not a readable leak-scan checkpoint ({type(err).__name__}); "
                "delete it to start the scan afresh"
            ) from None
        models, texts, names, probes = shape
        same_shape = passes.means.shape == (models, texts) and passes.name_rows.shape == (
            names,
            probes,
        )
        if saved != key or not same_shape:
            raise ValueError(
                f"{self.path} holds an interrupted scan of another model, probe set, roster "
                "or settings; delete it to start this scan afresh (or scan into another "
                "folder)"
            )
        return passes

    def save(self, key: str, passes: ScanPasses) -> None:
        """Write the passes atomically (a kill leaves the previous checkpoint whole)."""
        with atomic_write(self.path, "wb", overwrite=True) as handle:
            np.savez(
                handle,
                key=np.asarray(key),
                means=passes.means,
                name_rows=passes.name_rows,
                done=passes.done,
                decoy_seed=np.asarray(passes.decoy_seed),
            )


def run_passes(
    models: Sequence[torch.nn.Module],
    texts: Sequence[str],
    n_names: int,
    n_probes: int,
    divergences: Callable[[int, Sequence[str]], np.ndarray],
    decoy_seed: int,
    key: str,
    checkpoint: ScanCheckpoint | None = None,
    progress: bool = False,
    segments: Sequence[tuple[int, int]] | None = None,
    settled: Callable[[ScanPasses, int, int], bool] | None = None,
) -> ScanPasses:
    """Every text's divergences on every model, ``CHUNK`` texts at a time.

    Args:
        models: the audited model, then the references.
        texts: names first (``n_names`` of them), then the decoys.
        n_names: how many of ``texts`` are names.
        n_probes: probes per text.
        divergences: ``(model index, texts) -> (len(texts), n_probes)`` divergences.
        decoy_seed: recorded with the passes.
        key: the scan's :func:`scan_key`.
        checkpoint: where to save after each chunk and resume from (None: nothing saved).
        progress: one bar over every model's texts.
        segments: ``(start, stop)`` runs of ``texts`` processed in order, each in chunks
            of ``CHUNK`` from its start (default: all texts as one run); the names' run
            first.
        settled: ``settled(passes, segment, stop)``: after the texts of ``segment`` up to
            ``stop`` are done on model 0, whether the rest of that segment can be left
            out (sequential decoys; one model only). Texts left out keep NaN means.
    """
    from tqdm.auto import tqdm

    shape = (len(models), len(texts), n_names, n_probes)
    passes = checkpoint.load(key, shape) if checkpoint is not None else None
    if passes is None:
        passes = ScanPasses.empty(*shape, decoy_seed)
    if settled is not None and len(models) != 1:
        raise ValueError("sequential decoys score one model; pass no reference models")
    segments = list(segments) if segments is not None else [(0, len(texts))]
    total = len(models) * len(texts)
    with tqdm(total=total, initial=int(passes.done.sum()), desc="texts", unit="text",
              disable=not progress) as bar:  # fmt: skip
        for m in range(len(models)):
            for index, (first, stop) in enumerate(segments):
                for start in range(first, stop, CHUNK):
                    end = min(start + CHUNK, stop)
                    if np.isnan(passes.means[m, start:end]).any():
                        _chunk(passes, m, texts, start, end, n_names, divergences)
                        if checkpoint is not None:
                            checkpoint.save(key, passes)
                        bar.update(end - start)
                    if settled is not None and end < stop and settled(passes, index, end):
                        bar.total -= stop - end  # the rest of this run is not needed
                        bar.refresh()
                        break
    return passes


def _chunk(passes: ScanPasses, m: int, texts, start: int, end: int, n_names: int,
           divergences: Callable[[int, Sequence[str]], np.ndarray]) -> None:  # fmt: skip
    """Texts ``start:end`` on model ``m``, kept in ``passes``."""
    d = divergences(m, texts[start:end])
    passes.means[m, start:end] = d.mean(axis=1)
    if m == 0 and start < n_names:
        rows = min(n_names, end) - start
        passes.name_rows[start : start + rows] = d[:rows]
    passes.done[m] += end - start
