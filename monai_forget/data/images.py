"""The in-memory labelled image set every auditor consumes, and its seeded split.

A :class:`LabelledImages` holds images ``(N, C, H, W)`` float32, labels ``(N,)`` int64
and optional sample ids, as read-only copies. Being immutable, it computes its
per-sample content hashes and its data fingerprint once and keeps them
(:mod:`monai_forget.fingerprint` does the hashing).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from monai_forget import fingerprint as hashing
from monai_forget.checks import check_fraction

__all__ = ["LabelledImages", "concat"]


@dataclass(frozen=True)
class LabelledImages:
    """A labelled image set held in memory.

    Arrays are copied on construction and made read-only, so neither the caller's
    arrays nor this object can be changed through the other.

    Attributes:
        images: ``(N, C, H, W)`` float32, finite.
        labels: ``(N,)`` int64, in ``[0, num_classes)``.
        ids: Optional sample ids, one string per sample.
        num_classes: Number of classes; ``None`` means ``labels.max() + 1``.
    """

    images: np.ndarray
    labels: np.ndarray
    ids: tuple[str, ...] | None = None
    num_classes: int | None = field(default=None)

    def __post_init__(self) -> None:
        images = _as_images(self.images)
        labels = _as_labels(self.labels)
        if len(images) != len(labels):
            raise ValueError(
                f"images and labels have different lengths ({len(images)} vs {len(labels)}); "
                "pass one label per image"
            )
        ids = None
        if self.ids is not None:
            ids = tuple(str(i) for i in self.ids)
            if len(ids) != len(images):
                raise ValueError(
                    f"ids has {len(ids)} entries for {len(images)} images; pass one id per "
                    "image or ids=None"
                )
        num_classes = self.num_classes
        if num_classes is None:
            num_classes = int(labels.max()) + 1 if len(labels) else 0
        num_classes = int(num_classes)
        if len(labels) and labels.max() >= num_classes:
            raise ValueError(
                f"label {int(labels.max())} is outside the class range [0, {num_classes}); "
                "raise num_classes or fix the labels"
            )
        object.__setattr__(self, "images", images)
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "ids", ids)
        object.__setattr__(self, "num_classes", num_classes)

    def __len__(self) -> int:
        return len(self.labels)

    def __repr__(self) -> str:
        return (
            f"LabelledImages(n={len(self)}, shape={tuple(self.images.shape[1:])}, "
            f"num_classes={self.num_classes}, ids={'yes' if self.ids else 'no'})"
        )

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """Shape ``(C, H, W)`` of one image."""
        return tuple(self.images.shape[1:])  # type: ignore[return-value]

    # The arrays are read-only copies, so hashes computed once stay valid.
    @cached_property
    def sample_hashes(self) -> np.ndarray:
        """Read-only ``(N,)`` SHA-256 content hash of each image
        (:func:`monai_forget.fingerprint.image_hashes`), computed on first use."""
        hashes = hashing.image_hashes(self.images)
        hashes.flags.writeable = False
        return hashes

    @cached_property
    def fingerprint(self) -> str:
        """SHA-256 over the ordered sample hashes and labels
        (:func:`monai_forget.fingerprint.hashes_fingerprint`), computed on first use."""
        return hashing.hashes_fingerprint(self.sample_hashes, self.labels)

    def subset(self, indices: Sequence[int] | np.ndarray | slice) -> LabelledImages:
        """The samples at ``indices`` (integer indices, boolean mask or slice), in that order."""
        if isinstance(indices, slice):
            idx = np.arange(len(self))[indices]
        else:
            idx = np.asarray(indices)
            if idx.dtype == bool:
                if idx.shape != (len(self),):
                    raise ValueError(f"boolean mask has shape {idx.shape}; expected ({len(self)},)")
                idx = np.flatnonzero(idx)
            elif idx.size and not np.issubdtype(idx.dtype, np.integer):
                raise TypeError(f"indices must be integers or a boolean mask, got {idx.dtype}")
            idx = idx.astype(np.int64).ravel()
        ids = None if self.ids is None else tuple(self.ids[i] for i in idx)
        subset = LabelledImages(self.images[idx], self.labels[idx], ids, self.num_classes)
        if _HASHES in self.__dict__:  # same pixels, so the same hashes: no need to rehash
            _keep_hashes(subset, self.sample_hashes[idx])
        return subset

    def concat(self, *others: LabelledImages) -> LabelledImages:
        """This set followed by ``others`` (see :func:`concat`)."""
        return concat(self, *others)

    def split(self, fraction: float, seed: int = 0) -> tuple[LabelledImages, LabelledImages]:
        """Seeded random split into ``(first, rest)`` with ``len(first) ≈ fraction * N``.

        Stratified by label when every class has at least two samples and both parts
        can hold one sample per class; otherwise a plain seeded permutation. Each part
        keeps the original sample order.

        Args:
            fraction: Share of samples in the first part, strictly between 0 and 1.
            seed: Seed of the random split.
        """
        check_fraction("fraction", fraction)
        n = len(self)
        n_first = round(fraction * n)
        if n_first == 0 or n_first == n:
            raise ValueError(
                f"a {fraction} split of {n} samples leaves one part empty; "
                "use more samples or a fraction closer to 0.5"
            )
        first = _split_indices(self.labels, n_first, seed)
        mask = np.zeros(n, dtype=bool)
        mask[first] = True
        return self.subset(mask), self.subset(~mask)

    def to_dataset(self, transform: Callable[[dict], Any] | None = None) -> Dataset:
        """A torch ``Dataset`` of MONAI-style dicts ``{"image": (C,H,W) float32, "label": int64}``.

        This is what MONAI's ``SupervisedTrainer``/``SupervisedEvaluator`` default
        ``prepare_batch`` consumes.

        Args:
            transform: Optional callable applied to each dict (e.g. MONAI dictionary
                transforms).
        """
        return _LabelledImagesDataset(self, transform)


def concat(*sets: LabelledImages) -> LabelledImages:
    """Concatenate labelled image sets with the same image shape.

    Ids are kept when every set has them; ``num_classes`` is the largest of the sets'.
    """
    if not sets:
        raise ValueError("concat needs at least one LabelledImages")
    shapes = {s.images.shape[1:] for s in sets}
    if len(shapes) > 1:
        raise ValueError(
            f"cannot concatenate sets with different image shapes {sorted(shapes)}; "
            "resize them to one shape first"
        )
    ids = None
    if all(s.ids is not None for s in sets):
        ids = tuple(i for s in sets for i in s.ids)  # type: ignore[union-attr]
    joined = LabelledImages(
        np.concatenate([s.images for s in sets]),
        np.concatenate([s.labels for s in sets]),
        ids,
        max(int(s.num_classes or 0) for s in sets),
    )
    if all(_HASHES in s.__dict__ for s in sets):
        _keep_hashes(joined, np.concatenate([s.sample_hashes for s in sets]))
    return joined


_HASHES = "sample_hashes"  # where cached_property stores the hashes in an instance's __dict__


def _keep_hashes(data: LabelledImages, hashes: np.ndarray) -> None:
    """Give ``data`` the hashes of its images, already computed for the set they came from."""
    hashes = hashes.copy()
    hashes.flags.writeable = False
    data.__dict__[_HASHES] = hashes


class _LabelledImagesDataset(Dataset):
    """Map-style dataset over a :class:`LabelledImages`."""

    def __init__(self, data: LabelledImages, transform: Callable[[dict], Any] | None) -> None:
        self.data = data
        self.transform = transform

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int) -> Any:
        item = {
            # Copy: the stored array is read-only and must stay unchanged.
            "image": torch.from_numpy(self.data.images[index].copy()),
            "label": torch.tensor(self.data.labels[index], dtype=torch.int64),
        }
        return self.transform(item) if self.transform is not None else item


def _as_images(images: Any) -> np.ndarray:
    """Validated read-only float32 copy of an ``(N, C, H, W)`` array."""
    if isinstance(images, torch.Tensor):
        images = images.detach().cpu().numpy()
    arr = np.array(images, dtype=np.float32, copy=True)
    if arr.ndim != 4:
        hint = " (add a channel axis, e.g. images[:, None])" if arr.ndim == 3 else ""
        raise ValueError(f"images must have shape (N, C, H, W); got shape {arr.shape}{hint}")
    if not np.isfinite(arr).all():
        bad = np.flatnonzero(~np.isfinite(arr.reshape(len(arr), -1)).all(axis=1))
        raise ValueError(
            f"{len(bad)} image(s) contain NaN or inf (first indices {bad[:5].tolist()}); "
            "drop or repair them before auditing"
        )
    arr.flags.writeable = False
    return arr


def _as_labels(labels: Any) -> np.ndarray:
    """Validated read-only int64 copy of an ``(N,)`` label vector."""
    if isinstance(labels, torch.Tensor):
        labels = labels.detach().cpu().numpy()
    raw = np.asarray(labels)
    if raw.ndim == 2 and raw.shape[1] == 1:
        raw = raw[:, 0]  # MedMNIST-style (N, 1) column
    if raw.ndim != 1:
        raise ValueError(f"labels must have shape (N,); got shape {raw.shape}")
    if raw.size and not np.issubdtype(raw.dtype, np.integer):
        if raw.dtype == bool or not np.issubdtype(raw.dtype, np.number):
            raise TypeError(
                f"labels must be integer class indices, got dtype {raw.dtype}; map class "
                "names to 0..K-1 first"
            )
        if not (np.isfinite(raw).all() and np.array_equal(raw, np.round(raw))):
            raise ValueError("labels must be whole numbers (class indices), not scores")
    arr = np.array(raw, dtype=np.int64, copy=True)
    if arr.size and arr.min() < 0:
        raise ValueError(
            f"labels must be non-negative class indices; found {int(arr.min())} "
            f"at index {int(np.argmin(arr))}"
        )
    arr.flags.writeable = False
    return arr


def _split_indices(labels: np.ndarray, n_first: int, seed: int) -> np.ndarray:
    """Indices of the first part of a seeded, stratified-when-possible split."""
    from sklearn.model_selection import train_test_split

    idx = np.arange(len(labels))
    counts = np.bincount(labels)
    n_cls = int((counts > 0).sum())
    stratify = None
    if counts[counts > 0].min() >= 2 and min(n_first, len(labels) - n_first) >= n_cls:
        stratify = labels
    first, _ = train_test_split(idx, train_size=n_first, random_state=seed, stratify=stratify)
    return np.sort(first)
