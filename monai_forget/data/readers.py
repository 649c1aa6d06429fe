"""Load a :class:`LabelledImages` from the formats users have: a folder of class
sub-folders, an ``.npz`` file or a MONAI datalist ``.json``.

Conventions shared by every loader:

- Every image file is read with MONAI's ``LoadImage``.
- ``uint8`` pixels are scaled to ``[0, 1]`` (divided by 255); other integer types
  (e.g. 16-bit DICOM stored values) are converted to float32 unchanged.
- Grayscale images get one channel; RGB images get three, channel first.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import threading
import warnings
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from monai.data import NibabelReader, PILReader, PydicomReader
from monai.transforms import LoadImage

from monai_forget.data.images import LabelledImages

__all__ = ["IMAGE_SUFFIXES", "load_images", "load_npz", "read_image", "scale_pixels"]

#: File suffixes read by :func:`load_images` from class sub-folders and datalists.
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".dcm", ".nii", ".nii.gz")


def load_images(
    path: str | os.PathLike,
    *,
    split: str | None = None,
    section: str = "training",
) -> LabelledImages:
    """Load a labelled image set from a folder, an ``.npz`` file or a MONAI datalist.

    Formats:

    - **folder**: ``path/<class>/*.png|jpg|jpeg|dcm|nii|nii.gz``; the class index
      is the position of ``<class>`` among the sorted sub-folder names, ids are
      ``<class>/<file name>``. All images must share one shape.
    - **.npz**: keys ``images`` + ``labels``, or the MedMNIST layout
      ``{split}_images`` / ``{split}_labels`` (``split`` required when the file has
      several splits). ``(N, H, W)`` and channel-last ``(N, H, W, 3)`` are accepted.
    - **.json**: a MONAI datalist (``monai.data.load_decathlon_datalist`` format)
      whose ``section`` entries have an ``image`` path and an integer ``label``.

    Args:
        path: Folder, ``.npz`` or ``.json`` file.
        split: Split name for MedMNIST-layout ``.npz`` files.
        section: Datalist section key for ``.json`` files.

    Returns:
        The images, with ``uint8`` pixels scaled to ``[0, 1]``.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    name = path.name.lower()
    try:
        if path.is_dir():
            return _load_folder(path)
        if name.endswith(".npz"):
            return load_npz(path, split)
        if name.endswith(".json"):
            return _load_datalist(path, section)
    except (TypeError, ValueError) as err:  # LabelledImages' checks: name the file
        message = str(err)
        if str(path) not in message:
            where = f"{path}" + (f" (split {split})" if split else "")
            message = f"{where}: {message}"
        raise ValueError(message) from None
    raise ValueError(
        f"cannot load {path}: expected a folder of class sub-folders, a .npz file "
        "or a MONAI datalist .json"
    )


def scale_pixels(arr: np.ndarray) -> np.ndarray:
    """float32 pixels; uint8 scaled to [0, 1]."""
    if arr.dtype == np.uint8:
        return arr.astype(np.float32) / 255.0
    return arr.astype(np.float32)


# --------------------------------------------------------------------------------------
# Image files
# --------------------------------------------------------------------------------------


def read_image(path: Path) -> np.ndarray:
    """One 2D image file as a float32 ``(C, H, W)`` array, read with ``monai.transforms.LoadImage``.

    Raises:
        ValueError: an unsupported suffix, a multi-frame DICOM, a 3D NIfTI volume or an
            image that is neither grayscale nor RGB; the message names the file.
    """
    name = path.name.lower()
    if name.endswith((".png", ".jpg", ".jpeg")):
        kind = "PNG/JPEG"
    elif name.endswith(".dcm"):
        kind = "DICOM"
    elif name.endswith((".nii", ".nii.gz")):
        kind = "NIfTI"
    else:
        raise ValueError(f"{path}: unsupported image type; use one of {IMAGE_SUFFIXES}")
    with _READING, warnings.catch_warnings():
        # Not relevant here: the pixels are copied before use, and a 2D image needs no affine.
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        warnings.filterwarnings("ignore", message="PydicomReader: ImageOrientationPatient")
        try:
            arr = np.asarray(_loader(kind)(str(path)))
        except RuntimeError as err:  # LoadImage found no reader that could open the file
            raise ValueError(
                f"{path} cannot be read as a {kind} file; check that it is complete and that "
                "its suffix matches its format"
            ) from err
    if kind == "NIfTI":
        arr = np.squeeze(arr)
        if arr.ndim != 2:
            raise ValueError(f"{path} holds a {arr.ndim}D volume; only 2D NIfTI images load")
    return _channel_first(scale_pixels(arr), path)


# The readers keep the current file names between read() and get_data(): one file at a time.
_READING = threading.Lock()


@functools.cache
def _loader(kind: str) -> LoadImage:
    """One ``LoadImage`` per format: building one sets up every MONAI reader (slow, and it
    logs about optional GPU decoders each time)."""
    # Readers chosen explicitly so rows stay rows: PIL/pydicom readers transpose by default.
    if kind == "PNG/JPEG":
        reader = PILReader(converter=_grey_or_rgb, reverse_indexing=False)
    elif kind == "DICOM":
        reader = _StoredValuesDicomReader(swap_ij=False)
    else:
        reader = NibabelReader()
    with optional_decoders_quiet():
        # dtype=None keeps the stored dtype, so uint8 scaling applies to every format.
        return LoadImage(reader=reader, image_only=True, dtype=None)


@contextlib.contextmanager
def optional_decoders_quiet() -> Iterator[None]:
    """Build MONAI loaders without its notice that the optional GPU DICOM decoder
    (nvImageCodec) is absent: ``LoadImage`` sets up every reader it knows, and that one
    logs and warns each time though no reader used here decodes with it."""
    logger = logging.getLogger("monai.data.nvimgcodec_pydicom_plugin")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="NvImgCodecPydicomReader")
            yield
    finally:
        logger.setLevel(level)


def _grey_or_rgb(img: Any) -> Any:
    """PIL image in a mode numpy reads as grayscale or RGB (alpha and palettes dropped)."""
    if img.mode in ("1", "LA"):
        return img.convert("L")
    if img.mode not in ("L", "I", "I;16", "F", "RGB"):
        return img.convert("RGB")
    return img


class _StoredValuesDicomReader(PydicomReader):
    """``PydicomReader`` giving stored pixel values of single-frame files.

    ``PydicomReader`` applies Rescale Slope/Intercept; the loaders' convention is the
    stored values (integers stay integers), so this reader returns ``pixel_array`` as is.
    """

    def _get_array_data(self, img: Any, filename: Any) -> np.ndarray:
        frames = int(getattr(img, "NumberOfFrames", 1) or 1)
        if frames > 1:
            raise ValueError(
                f"{filename} is a multi-frame DICOM ({frames} frames); only 2D images load"
            )
        return img.pixel_array


def _channel_first(arr: np.ndarray, source: Any) -> np.ndarray:
    if arr.ndim == 2:
        return arr[None]
    if arr.ndim == 3 and arr.shape[-1] in (3, 4):
        return np.moveaxis(arr[..., :3], -1, 0)
    raise ValueError(f"{source}: expected a 2D grayscale or RGB image, got shape {arr.shape}")


def _stack(images: list[np.ndarray], ids: Sequence[str]) -> np.ndarray:
    shapes: dict[tuple[int, ...], str] = {}
    for img, i in zip(images, ids, strict=True):
        shapes.setdefault(img.shape, i)
    if len(shapes) > 1:
        examples = ", ".join(f"{s} ({i})" for s, i in list(shapes.items())[:3])
        raise ValueError(
            f"images have {len(shapes)} different shapes, e.g. {examples}; all images must "
            "share one shape: resize them first (e.g. monai.transforms.Resize)"
        )
    return np.stack(images)


# --------------------------------------------------------------------------------------
# Folder, .npz and datalist
# --------------------------------------------------------------------------------------


def _is_image_file(p: Path) -> bool:
    return p.is_file() and not p.name.startswith(".") and p.name.lower().endswith(IMAGE_SUFFIXES)


def _load_folder(root: Path) -> LabelledImages:
    classes = sorted(d.name for d in root.iterdir() if d.is_dir() and not d.name.startswith("."))
    if not classes:
        raise ValueError(f"{root} has no class sub-folders; expected {root}/<class>/<image files>")
    images, labels, ids = [], [], []
    for label, cls in enumerate(classes):
        files = sorted(p for p in (root / cls).iterdir() if _is_image_file(p))
        if not files:
            raise ValueError(
                f"class folder {root / cls} has no images with suffixes {IMAGE_SUFFIXES}"
            )
        for f in files:
            images.append(read_image(f))
            labels.append(label)
            ids.append(f"{cls}/{f.name}")
    return LabelledImages(_stack(images, ids), np.asarray(labels), tuple(ids), len(classes))


def check_npz(path: Path) -> None:
    """Refuse, before anything is allocated, an ``.npz`` that is not a zip archive, holds
    Python objects, or whose array headers claim more data than the file holds.

    Raises:
        ValueError: naming the file and the array.
    """
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path} is not an .npz file (not a zip archive); save with np.savez")
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if not info.filename.endswith(".npy"):
                continue
            key = info.filename[: -len(".npy")]
            with archive.open(info) as member:
                try:
                    version = np.lib.format.read_magic(member)
                    read_header = (
                        np.lib.format.read_array_header_1_0
                        if version == (1, 0)
                        else np.lib.format.read_array_header_2_0
                    )
                    shape, _, dtype = read_header(member)
                except ValueError as err:
                    raise ValueError(
                        f"{path}: array {key!r} has a damaged header ({err})"
                    ) from None
            if dtype.hasobject:
                raise ValueError(
                    f"{path}: array {key!r} holds Python objects (dtype object), which are not "
                    "loaded for safety; save numeric arrays (images float/uint8, labels int)"
                )
            claimed = math.prod(shape) * dtype.itemsize
            if claimed > info.file_size:
                raise ValueError(
                    f"{path}: array {key!r} claims shape {shape} ({claimed:,} bytes) but the "
                    f"file holds {info.file_size:,} bytes for it; the file is damaged"
                )


def load_npz(path: Path, split: str | None) -> LabelledImages:
    """The ``.npz`` layouts of :func:`load_images`; ids default to ``<stem>/<split>_<i>``."""
    check_npz(path)
    with np.load(path, allow_pickle=False) as npz:
        keys = sorted(npz.files)
        splits = sorted(
            k[: -len("_images")]
            for k in keys
            if k.endswith("_images") and f"{k[: -len('_images')]}_labels" in keys
        )
        if split is None and {"images", "labels"} <= set(keys):
            img_key, lab_key, prefix = "images", "labels", ""
        else:
            if split is None:
                if len(splits) != 1:
                    raise ValueError(
                        f"{path} has keys {keys}; "
                        + (
                            f"pass split= one of {splits}"
                            if splits
                            else "expected 'images' + 'labels' or '<split>_images' + "
                            "'<split>_labels'"
                        )
                    )
                split = splits[0]
            if split not in splits:
                raise ValueError(f"split {split!r} not in {path} (splits {splits}; keys {keys})")
            img_key, lab_key, prefix = f"{split}_images", f"{split}_labels", f"{split}_"
        images = _npz_images(npz[img_key], path)
        labels = npz[lab_key]
        ids_key = f"{prefix}ids"
        ids = tuple(npz[ids_key].astype(str)) if ids_key in keys else None
    if ids is None:
        stem = path.name[: -len(".npz")]
        ids = tuple(f"{stem}/{prefix}{i}" for i in range(len(images)))
    return LabelledImages(images, labels, ids)


def _npz_images(arr: np.ndarray, path: Path) -> np.ndarray:
    """``(N, C, H, W)`` float32 from ``(N, H, W)``, ``(N, H, W, C)`` or ``(N, C, H, W)``."""
    arr = scale_pixels(arr)
    if arr.ndim == 3:
        return arr[:, None]
    if arr.ndim == 4 and arr.shape[-1] in (1, 3) and arr.shape[1] not in (1, 3):
        return np.moveaxis(arr, -1, 1)
    if arr.ndim == 4:
        return arr
    raise ValueError(f"{path}: images must be (N, H, W) or (N, C, H, W), got {arr.shape}")


def _load_datalist(path: Path, section: str) -> LabelledImages:
    from monai.data import load_decathlon_datalist

    try:
        entries = load_decathlon_datalist(path, is_segmentation=False, data_list_key=section)
    except ValueError as err:
        raise ValueError(f"{path}: {err}; pass section= the datalist key to read") from err
    if not entries:
        raise ValueError(f"{path}: section {section!r} has no entries")
    missing = [str(e.get("image")) for e in entries if not Path(str(e.get("image"))).is_file()]
    if missing:
        raise FileNotFoundError(
            f"{path}: {len(missing)} image file(s) of section {section!r} do not exist, e.g. "
            f"{missing[0]}; relative paths are read from the datalist's folder"
        )
    images, labels, ids = [], [], []
    for k, entry in enumerate(entries):
        if "image" not in entry or "label" not in entry:
            raise ValueError(f"{path}: entry {k} of {section!r} needs 'image' and 'label' keys")
        images.append(read_image(Path(entry["image"])))
        labels.append(_int_label(entry["label"], path, k))
        ids.append(str(entry["image"]))
    return LabelledImages(_stack(images, ids), np.asarray(labels), tuple(ids))


def _int_label(value: Any, path: Path, k: int) -> int:
    arr = np.asarray(value).ravel()
    if arr.size != 1 or not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f"{path}: entry {k} label {value!r} is not one integer class index")
    return int(arr[0])
