"""One batched, cached inference pass from a model and a data set to probabilities.

Auditors need every model's softmax outputs on D_Q and D_C, often several times
(target, query shadow, calibration shadow; re-runs of an audit). :func:`predict`
runs one ``torch.inference_mode`` pass and, given a cache folder, stores the result
under a key made of the model's and the data's content fingerprints, so an audit
never recomputes what it already has.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from monai_forget.cache import CacheEntryError, entry_hash, entry_lock, write_entry
from monai_forget.checks import check_choice, check_parameter
from monai_forget.data import LabelledImages
from monai_forget.fingerprint import data_fingerprint, model_fingerprint

__all__ = ["Predictions", "predict", "prediction_cache_key"]

_PROB_TOL = 1e-4


@dataclass(frozen=True)
class Predictions:
    """Class probabilities of one model on one data set.

    Attributes:
        probs: ``(N, K)`` float64, rows on the probability simplex.
        labels: ``(N,)`` int64 ground-truth labels.
        cache_entry: ``(file, SHA-256)`` of the cache entry these were read from or
            written to (:func:`predict` with a cache), for provenance; else ``None``.
    """

    probs: np.ndarray
    labels: np.ndarray
    cache_entry: tuple[str, str] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        probs = np.array(self.probs, dtype=np.float64, copy=True)
        labels = np.array(self.labels, dtype=np.int64, copy=True).ravel()
        if probs.ndim != 2 or len(probs) != len(labels):
            raise ValueError(
                f"probs must be (N, K) with N = len(labels) = {len(labels)}; got {probs.shape}"
            )
        if len(labels) and (labels.min() < 0 or labels.max() >= probs.shape[1]):
            raise ValueError(
                f"labels must lie in [0, {probs.shape[1]}) for {probs.shape[1]} output "
                f"classes; found range [{labels.min()}, {labels.max()}]"
            )
        probs.flags.writeable = False
        labels.flags.writeable = False
        object.__setattr__(self, "probs", probs)
        object.__setattr__(self, "labels", labels)

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def confidence(self) -> np.ndarray:
        """Ground-truth-class confidence ``t[y]`` of each sample (Liu & Tsaftaris 2020, Alg. 1)."""
        return self.probs[np.arange(len(self.labels)), self.labels]


def prediction_cache_key(
    model: torch.nn.Module, data: LabelledImages, outputs: str = "logits"
) -> str:
    """Cache key: sha256 of the model fingerprint, data fingerprint and ``outputs`` mode."""
    h = hashlib.sha256()
    for part in (model_fingerprint(model), data_fingerprint(data), outputs):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def predict(
    model: torch.nn.Module,
    data: LabelledImages,
    *,
    batch_size: int = 256,
    device: str | torch.device = "cpu",
    cache_dir: str | os.PathLike | None = None,
    outputs: Literal["logits", "probs"] = "logits",
    progress: bool = False,
) -> Predictions:
    """Class probabilities of ``model`` on every sample of ``data``.

    The model is moved to ``device`` and run in eval mode under
    ``torch.inference_mode()``; its previous training flag is restored afterwards.

    Args:
        model: Maps a ``(B, C, H, W)`` float32 batch to ``(B, K)`` outputs.
        data: The samples; their labels are carried into the result.
        batch_size: Samples per forward pass.
        device: Torch device (``"cpu"``, ``"cuda:0"``, a ``torch.device``).
        cache_dir: If given, results are read from / written to
            ``<cache_dir>/predictions/<key>.npz`` (see :func:`prediction_cache_key`),
            checked against the SHA-256 recorded at write (:mod:`monai_forget.cache`).
        outputs: ``"logits"``: the model returns logits and softmax is applied in
            float64; ``"probs"``: the model already returns probabilities (validated).
        progress: Show a tqdm progress bar.

    Returns:
        The :class:`Predictions`.

    Raises:
        ValueError: Bad ``outputs``/``batch_size``, or model outputs of the wrong shape,
            non-finite, or (for ``"probs"``) not probabilities.
        CacheEntryError: a cached entry for this model and data is damaged or replaced.
    """
    check_choice("outputs", outputs, ("logits", "probs"))
    check_parameter("batch_size", batch_size)
    if cache_dir is None:
        return Predictions(
            _forward(model, data, batch_size, torch.device(device), outputs, progress),
            data.labels,
        )
    key = prediction_cache_key(model, data, outputs)
    cache_path = Path(cache_dir) / "predictions" / f"{key}.npz"
    with entry_lock(cache_path):
        cached = _read_cache(cache_path, data)
        if cached is not None:
            return cached
        probs = _forward(model, data, batch_size, torch.device(device), outputs, progress)
        result = Predictions(probs, data.labels)
        digest = write_entry(
            cache_path, lambda f: np.savez(f, probs=result.probs, labels=result.labels)
        )
    return replace(result, cache_entry=(str(cache_path), digest))


def _forward(
    model: torch.nn.Module,
    data: LabelledImages,
    batch_size: int,
    device: torch.device,
    outputs: str,
    progress: bool,
) -> np.ndarray:
    """Run the model over ``data`` in batches; returns ``(N, K)`` float64 probabilities."""
    from tqdm.auto import tqdm

    was_training = model.training
    model.to(device)
    model.eval()
    chunks: list[np.ndarray] = []
    starts = range(0, len(data), batch_size)
    try:
        with torch.inference_mode():
            for start in tqdm(starts, desc="inference", unit="batch", disable=not progress):
                # torch.tensor copies, so the read-only stored images are never touched.
                batch = torch.tensor(data.images[start : start + batch_size], device=device)
                out = model(batch)
                chunks.append(_to_probs(out, len(batch), outputs))
    finally:
        model.train(was_training)
    if not chunks:
        raise ValueError("cannot predict on an empty data set; pass at least one sample")
    probs = np.concatenate(chunks)
    if probs.shape[1] < max(int(data.num_classes or 0), 1):
        raise ValueError(
            f"model returns {probs.shape[1]} classes but the data has {data.num_classes}; "
            "use a model with one output per class"
        )
    return probs


def _to_probs(out: object, n: int, outputs: str) -> np.ndarray:
    if not isinstance(out, torch.Tensor):
        raise ValueError(
            f"model returned {type(out).__name__}, expected a (B, K) tensor; wrap the model "
            "so forward returns the class logits only"
        )
    if out.ndim != 2 or out.shape[0] != n:
        raise ValueError(
            f"model output has shape {tuple(out.shape)} for a batch of {n}; expected ({n}, K) "
            "class scores (a classification model, one row per sample)"
        )
    values = out.detach().to("cpu", torch.float64)
    if not torch.isfinite(values).all():
        raise ValueError("model output contains NaN or inf; check the model and the inputs")
    if outputs == "logits":
        return torch.softmax(values, dim=1).numpy()
    probs = values.numpy()
    if probs.min() < 0 or probs.max() > 1 or np.abs(probs.sum(1) - 1).max() > _PROB_TOL:
        raise ValueError(
            "outputs='probs' but the model outputs are not probabilities (outside [0, 1] or "
            "rows not summing to 1); use outputs='logits' for raw scores"
        )
    return probs / probs.sum(axis=1, keepdims=True)


def _read_cache(path: Path, data: LabelledImages) -> Predictions | None:
    """Cached predictions (their hash checked), or ``None`` when absent or computed for
    other samples (a key collision: recomputed).

    Raises:
        CacheEntryError: the entry is not the file that was written, or no predictions.
    """
    if not path.is_file():
        return None
    digest = entry_hash(path)
    try:
        with np.load(path, allow_pickle=False) as npz:
            probs, labels = npz["probs"], npz["labels"]
    except (OSError, EOFError, KeyError, ValueError, zipfile.BadZipFile) as err:
        raise CacheEntryError(
            f"the cache entry {path} holds no predictions ({type(err).__name__}); delete it "
            "and its .sha256 to compute it again"
        ) from None
    if len(probs) != len(data) or not np.array_equal(labels, data.labels):
        return None
    return Predictions(probs, labels, cache_entry=(str(path), digest))
