"""MedMNIST npz (PneumoniaMNIST layout) to datalist samples plus PNG files.

Layout: one ``.npz`` with ``{train,val,test}_images`` (``(N, H, W)`` or ``(N, H, W, 3)``
uint8) and ``{train,val,test}_labels`` (``(N, 1)``), as written by the ``medmnist``
package. A datalist needs image files that MONAI's ``LoadImaged`` reads, so every image
is exported as ``<image_dir>/<split>_<index:05d>.png`` (a few MB for PneumoniaMNIST);
the npz itself is only read.

MedMNIST carries no patient ids, so each image is its own "patient" (``<split>_<index>``)
and a patient-level split is an image-level split.

Some images repeat pixel for pixel (PneumoniaMNIST: 29 repeats of 27 images, 8 of them
across the train and val splits). A repeat defeats a withdrawal audit (the withdrawn
provider's image stays in the calibration set, or in another provider's data), so the
datalist keeps one copy of each image: the held-out one (test, then val, then train;
the first index within a split). The PNGs of every image are still exported.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from monai_forget.data_prep.splits import SOURCE_SPLIT_KEYS
from monai_forget.io import check_readable, staged_folder

#: PneumoniaMNIST's class names (medmnist ``INFO["pneumoniamnist"]["label"]``)
PNEUMONIA_LABELS = ("normal", "pneumonia")


def patient_id(split: str, index: int) -> str:
    """The "patient" of one image (MedMNIST has no patient ids), e.g. ``train_00042``."""
    return f"{split}_{index:05d}"


def image_name(split: str, index: int) -> str:
    """File name of an exported image, e.g. ``train_00042.png``."""
    return f"{patient_id(split, index)}.png"


def load_arrays(npz: str | Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{split: (images, labels)}`` for the splits present in a MedMNIST npz.

    Raises:
        FileNotFoundError: the npz is missing (IsADirectoryError: a folder).
        ValueError: not an npz archive of arrays (pickled objects are never loaded), no
            split, unpaired keys, multi-label labels, or mismatched lengths.
    """
    npz = check_readable(npz, "MedMNIST file")
    arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    try:
        data = np.load(npz, allow_pickle=False)
    except (ValueError, OSError, EOFError):  # pickled, truncated or not numpy at all
        data = None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise ValueError(
            f"MedMNIST file {npz} is not an .npz archive of arrays (MedMNIST's npz, as "
            "numpy.savez writes it); nothing in it was loaded"
        )
    with data:
        for split in SOURCE_SPLIT_KEYS:
            keys = (f"{split}_images", f"{split}_labels")
            present = [k for k in keys if k in data.files]
            if not present:
                continue
            if len(present) == 1:
                raise ValueError(f"{npz}: has {present[0]} but not its pair; expected {keys}")
            try:
                images, labels = data[keys[0]], data[keys[1]]
            except ValueError:  # object arrays: loading them would unpickle
                raise ValueError(
                    f"MedMNIST file {npz}: {keys[0]} or {keys[1]} holds Python objects, which "
                    "are never loaded (they would be unpickled); MedMNIST's arrays are numbers"
                ) from None
            if labels.ndim == 2 and labels.shape[1] == 1:
                labels = labels[:, 0]
            if labels.ndim != 1:
                raise ValueError(
                    f"{npz}: {keys[1]} has shape {labels.shape}; only single-label MedMNIST "
                    "sets (one label per image) are supported"
                )
            if images.ndim not in (3, 4) or len(images) != len(labels):
                raise ValueError(
                    f"{npz}: {keys[0]} shape {images.shape} does not match "
                    f"{keys[1]} shape {labels.shape}"
                )
            arrays[split] = (images, labels.astype(np.int64))
    if not arrays:
        raise ValueError(f"{npz}: no train/val/test _images/_labels arrays; not a MedMNIST file")
    return arrays


#: Which copy of a repeated image the datalist keeps: held-out splits first, so that the
#: evaluation sets stay whole.
KEEP_ORDER = ("test", "val", "train")


def repeated_images(npz: str | Path | dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, str]:
    """``{patient id dropped: patient id kept}`` for every image whose pixels repeat
    another's (the kept copy chosen by :data:`KEEP_ORDER`, then the smaller index).
    ``npz``: the file, or its arrays as :func:`load_arrays` returns them."""
    arrays = npz if isinstance(npz, dict) else load_arrays(npz)
    kept: dict[bytes, str] = {}
    dropped: dict[str, str] = {}
    for split in sorted(arrays, key=KEEP_ORDER.index):
        for index, pixels in enumerate(arrays[split][0]):
            digest = hashlib.sha256(np.ascontiguousarray(pixels).tobytes()).digest()
            patient = patient_id(split, index)
            if digest in kept:
                dropped[patient] = kept[digest]
            else:
                kept[digest] = patient
    return dropped


def collect(
    npz: str | Path,
    image_dir: str | Path,
    label_names: Sequence[str] = PNEUMONIA_LABELS,
    keep_repeats: bool = False,
) -> list[dict[str, Any]]:
    """One sample per image; ``image`` points at the PNG :func:`export_pngs` writes.

    Args:
        npz: the MedMNIST file.
        image_dir: where the PNGs are (or will be) exported.
        label_names: class names by label index.
        keep_repeats: keep every copy of a repeated image (default: one copy, see
            :func:`repeated_images`).

    Returns:
        Samples with ``image``, ``label``, ``patient``, ``group`` (class name),
        ``source_split`` and ``index`` (row in the npz), and the source ``split``.

    Raises:
        ValueError: a label outside ``0..len(label_names)-1``.
    """
    image_dir = Path(image_dir)
    arrays = load_arrays(npz)
    dropped = {} if keep_repeats else repeated_images(arrays)
    samples = []
    for split, (_, labels) in arrays.items():
        bad = labels[(labels < 0) | (labels >= len(label_names))]
        if bad.size:
            raise ValueError(
                f"{npz}: {split}_labels has value {int(bad[0])} but only {len(label_names)} "
                f"label names {list(label_names)} were given; pass `label_names`"
            )
        for index, label in enumerate(labels.tolist()):
            if patient_id(split, index) in dropped:
                continue
            samples.append(
                {
                    "image": image_dir / image_name(split, index),
                    "label": label,
                    "patient": patient_id(split, index),
                    "group": label_names[label],
                    "source_split": split,
                    "index": index,
                    "split": SOURCE_SPLIT_KEYS[split],
                }
            )
    return samples


def check_image_dir(image_dir: str | Path, overwrite: bool) -> bool:
    """Return whether ``image_dir`` holds files; refuse that without ``overwrite``.

    Raises:
        FileExistsError: ``image_dir`` is a file, or a non-empty folder without
            ``overwrite``.
    """
    image_dir = Path(image_dir)
    if image_dir.exists() and not image_dir.is_dir():
        raise FileExistsError(f"{image_dir} exists and is not a folder")
    existing = image_dir.is_dir() and any(image_dir.iterdir())
    if existing and not overwrite:
        raise FileExistsError(
            f"{image_dir} is not empty; pass `overwrite` to replace its PNGs or choose "
            "another `image_dir`"
        )
    return existing


def export_pngs(npz: str | Path, image_dir: str | Path, overwrite: bool = False) -> int:
    """Write every image of the npz as a PNG into ``image_dir``; return the count.

    A new folder is filled under a temporary name and renamed into place, so a failed
    export leaves nothing behind; an existing non-empty folder needs ``overwrite``
    (same-named files are replaced one by one, other files are left alone).

    Raises:
        FileExistsError: ``image_dir`` is a non-empty folder and ``overwrite`` is false.
    """
    image_dir = Path(image_dir)
    existing = check_image_dir(image_dir, overwrite)
    arrays = load_arrays(npz)
    if existing:
        return _write_all(arrays, image_dir, replace=True)
    with staged_folder(image_dir) as staging:
        count = _write_all(arrays, staging, replace=False)
    return count


def _write_all(
    arrays: dict[str, tuple[np.ndarray, np.ndarray]], folder: Path, replace: bool
) -> int:
    count = 0
    for split, (images, _) in arrays.items():
        for index, pixels in enumerate(images):
            target = folder / image_name(split, index)
            # PNG (lossless) keeps the uint8 values exactly.
            if replace:  # write beside, then swap, so a reader never sees half a file
                partial = target.with_name(f".{target.name}.tmp")
                Image.fromarray(np.ascontiguousarray(pixels)).save(partial, format="PNG")
                os.replace(partial, target)
            else:
                Image.fromarray(np.ascontiguousarray(pixels)).save(target)
            count += 1
    return count
