"""Run a 2D segmentation model over labelled images and keep its per-image scores.

The images keep their own sizes (ACDC slices vary from 154x224 to 512x428), so each
is segmented on its own with MONAI's ``sliding_window_inference`` (window
``roi_size``; an image smaller than the window is padded, which makes it the padded
whole-image inference the bundle uses), under ``torch.inference_mode``. Results can be
cached on disk under the model's and the images' content fingerprints, so an audit
that needs the same model on the same images twice runs it once.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from monai_forget.cache import entry_hash, entry_lock, write_entry
from monai_forget.fingerprint import image_hashes, model_fingerprint
from monai_forget.segmentation.scores import SCORE_NAMES, SegmentationScores, segmentation_scores

__all__ = ["LabelledSlices", "score_model"]


class LabelledSlices:
    """2D images with their label maps, of any sizes, with ids and patients.

    Args:
        images: ``(1, H, W)`` float32 arrays.
        labels: ``(1, H, W)`` class-index arrays of the same sizes.
        ids: one id per image.
        groups: the patient of each image.
    """

    def __init__(
        self,
        images: Sequence[np.ndarray],
        labels: Sequence[np.ndarray],
        ids: Sequence[str],
        groups: Sequence[str],
    ) -> None:
        if not (len(images) == len(labels) == len(ids) == len(groups)) or not images:
            raise ValueError(
                f"need as many images ({len(images)}), labels ({len(labels)}), ids "
                f"({len(ids)}) and groups ({len(groups)}), at least one"
            )
        for i, (image, label) in enumerate(zip(images, labels, strict=True)):
            if image.ndim != 3 or image.shape != label.shape:
                raise ValueError(
                    f"{ids[i]}: image {image.shape} and label {label.shape} must both be (1, H, W)"
                )
        self.images = [np.array(x, dtype=np.float32) for x in images]
        self.labels = [np.array(x, dtype=np.uint8) for x in labels]
        self.ids, self.groups = tuple(ids), tuple(groups)

    @classmethod
    def from_samples(cls, samples: Iterable[Mapping[str, Any]]) -> LabelledSlices:
        """From transformed datalist entries (``image``, ``label``, ``patient``, ...)."""
        images, labels, ids, groups = [], [], [], []
        for s in samples:
            images.append(np.asarray(s["image"]))
            labels.append(np.asarray(s["label"]))
            groups.append(str(s.get("patient", len(groups))))
            ids.append(f"{groups[-1]} {s.get('phase', '')} slice {s.get('slice', len(ids))}")
        return cls(images, labels, ids, groups)

    def __len__(self) -> int:
        return len(self.images)

    @property
    def sample_hashes(self) -> np.ndarray:
        """Each image's content hash (as :attr:`LabelledImages.sample_hashes
        <monai_forget.data.LabelledImages.sample_hashes>`), for the handlers' check that
        an evaluation covers these images."""
        return np.concatenate([image_hashes(image[None]) for image in self.images])

    def fingerprint(self) -> str:
        """sha256 of every image and label (content, shape, order) and the ids."""
        h = hashlib.sha256()
        for image, label, name in zip(self.images, self.labels, self.ids, strict=True):
            for array in (image, label):
                h.update(str(array.shape).encode())
                h.update(np.ascontiguousarray(array).tobytes())
            h.update(name.encode())
        return h.hexdigest()


def score_model(
    model: torch.nn.Module,
    data: LabelledSlices,
    *,
    roi_size: Sequence[int] = (256, 256),
    device: str | torch.device = "cpu",
    cache_dir: str | os.PathLike | None = None,
) -> SegmentationScores:
    """The per-image :data:`SCORE_NAMES` of ``model`` (logits out) on every image.

    Raises:
        ValueError: the model's output does not cover the image (see
            :func:`segmentation_scores`).
        CacheEntryError: the cached scores are damaged or replaced.
    """
    if cache_dir is None:
        return _score_images(model, data, roi_size, device)
    key = hashlib.sha256(
        f"{model_fingerprint(model)}|{data.fingerprint()}|{tuple(roi_size)}".encode()
    ).hexdigest()
    cache = Path(cache_dir) / "segmentation_scores" / f"{key}.npz"
    with entry_lock(cache):
        if cache.is_file():
            entry_hash(cache)  # refuses a damaged or replaced entry
            with np.load(cache, allow_pickle=False) as npz:
                return SegmentationScores({n: npz[n] for n in SCORE_NAMES}, data.ids, data.groups)
        result = _score_images(model, data, roi_size, device)
        write_entry(cache, lambda handle: np.savez(handle, **result.scores))
    return result


def _score_images(
    model: torch.nn.Module,
    data: LabelledSlices,
    roi_size: Sequence[int],
    device: str | torch.device,
) -> SegmentationScores:
    from monai.inferers import sliding_window_inference

    was_training = model.training
    model.to(device).eval()
    rows: dict[str, list[float]] = {n: [] for n in SCORE_NAMES}
    try:
        with torch.inference_mode():
            for image, label in zip(data.images, data.labels, strict=True):
                x = torch.tensor(image[None], device=device)
                logits = sliding_window_inference(x, list(roi_size), 1, model, mode="constant")
                scores = segmentation_scores(logits, torch.from_numpy(label[None].astype(np.int64)))
                for name in SCORE_NAMES:
                    rows[name].append(float(scores[name][0]))
    finally:
        model.train(was_training)
    return SegmentationScores({n: np.asarray(v) for n, v in rows.items()}, data.ids, data.groups)
