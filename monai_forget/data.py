"""In-memory labelled image sets, their loaders, and the D_Q / D_C overlap check.

Every auditor consumes a :class:`LabelledImages`: images ``(N, C, H, W)`` float32,
labels ``(N,)`` int64 and optional sample ids. Loaders read the formats users have
(a folder of class sub-folders, ``.npz``, MONAI datalist JSON) and the real data sets
used by tests and benchmarks (digits, PneumoniaMNIST, MNIST test, ACDC slices).

Conventions shared by every loader:

- ``uint8`` pixels are scaled to ``[0, 1]`` (divided by 255); other integer types
  (e.g. 16-bit DICOM stored values) are converted to float32 unchanged.
- Grayscale images get one channel; RGB images get three, channel first.
"""

from __future__ import annotations

import csv
import gzip
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

__all__ = [
    "ACDC_GROUPS",
    "IMAGE_SUFFIXES",
    "DataOverlapError",
    "LabelledImages",
    "check_disjoint",
    "concat",
    "data_root",
    "load_acdc_slices",
    "load_digits",
    "load_images",
    "load_mnist_test",
    "load_pneumoniamnist",
]

#: File suffixes read by :func:`load_images` from class sub-folders.
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".dcm", ".nii", ".nii.gz")

#: ACDC pathology groups in class-index order.
ACDC_GROUPS = ("DCM", "HCM", "MINF", "NOR", "RV")

_DATA_ENV = "MONAI_FORGET_DATA"


class DataOverlapError(ValueError):
    """The query set D_Q and the calibration set D_C share samples."""


def data_root() -> Path:
    """The real-data folder: ``$MONAI_FORGET_DATA``, else ``<repo>/../shared/data``."""
    env = os.environ.get(_DATA_ENV)
    if env:
        return Path(env).expanduser()
    return Path(__file__).resolve().parents[1].parent / "shared" / "data"


# --------------------------------------------------------------------------------------
# The container
# --------------------------------------------------------------------------------------


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
        return LabelledImages(self.images[idx], self.labels[idx], ids, self.num_classes)

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
        if not 0.0 < fraction < 1.0:
            raise ValueError(f"fraction must be strictly between 0 and 1, got {fraction}")
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
    return LabelledImages(
        np.concatenate([s.images for s in sets]),
        np.concatenate([s.labels for s in sets]),
        ids,
        max(int(s.num_classes or 0) for s in sets),
    )


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
            raise TypeError(f"labels must be integers, got dtype {raw.dtype}")
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


# --------------------------------------------------------------------------------------
# Generic loaders
# --------------------------------------------------------------------------------------


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
    if path.is_dir():
        return _load_folder(path)
    name = path.name.lower()
    if name.endswith(".npz"):
        return _load_npz(path, split)
    if name.endswith(".json"):
        return _load_datalist(path, section)
    raise ValueError(
        f"cannot load {path}: expected a folder of class sub-folders, a .npz file "
        "or a MONAI datalist .json"
    )


def _suffix_ok(p: Path) -> bool:
    return p.is_file() and not p.name.startswith(".") and p.name.lower().endswith(IMAGE_SUFFIXES)


def _load_folder(root: Path) -> LabelledImages:
    classes = sorted(d.name for d in root.iterdir() if d.is_dir() and not d.name.startswith("."))
    if not classes:
        raise ValueError(f"{root} has no class sub-folders; expected {root}/<class>/<image files>")
    images, labels, ids = [], [], []
    for label, cls in enumerate(classes):
        files = sorted(p for p in (root / cls).iterdir() if _suffix_ok(p))
        if not files:
            raise ValueError(
                f"class folder {root / cls} has no images with suffixes {IMAGE_SUFFIXES}"
            )
        for f in files:
            images.append(_read_image_file(f))
            labels.append(label)
            ids.append(f"{cls}/{f.name}")
    return LabelledImages(_stack(images, ids), np.asarray(labels), tuple(ids), len(classes))


def _read_image_file(path: Path) -> np.ndarray:
    """One 2D image as a float32 ``(C, H, W)`` array."""
    name = path.name.lower()
    if name.endswith((".png", ".jpg", ".jpeg")):
        arr = _read_pil(path)
    elif name.endswith(".dcm"):
        arr = _read_dicom(path)
    else:
        arr = _read_nifti(path)
    return _channel_first(_scale(arr), path)


def _read_pil(path: Path) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as img:
        if img.mode in ("1", "LA"):
            img = img.convert("L")
        elif img.mode not in ("L", "I", "I;16", "F", "RGB"):
            img = img.convert("RGB")
        return np.asarray(img)


def _read_dicom(path: Path) -> np.ndarray:
    import pydicom

    ds = pydicom.dcmread(path)
    arr = ds.pixel_array
    frames = int(getattr(ds, "NumberOfFrames", 1) or 1)
    if frames > 1:
        raise ValueError(f"{path} is a multi-frame DICOM ({frames} frames); only 2D images load")
    return arr


def _read_nifti(path: Path) -> np.ndarray:
    import nibabel as nib

    # dataobj keeps the stored dtype, so uint8 scaling applies as for other formats.
    arr = np.asanyarray(nib.load(str(path)).dataobj)
    arr = np.squeeze(arr)
    if arr.ndim != 2:
        raise ValueError(f"{path} holds a {arr.ndim}D volume; only 2D NIfTI images load")
    return arr


def _scale(arr: np.ndarray) -> np.ndarray:
    """float32 pixels; uint8 scaled to [0, 1]."""
    if arr.dtype == np.uint8:
        return arr.astype(np.float32) / 255.0
    return arr.astype(np.float32)


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


def _load_npz(path: Path, split: str | None) -> LabelledImages:
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
    arr = _scale(arr)
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
    images, labels, ids = [], [], []
    for k, entry in enumerate(entries):
        if "image" not in entry or "label" not in entry:
            raise ValueError(f"{path}: entry {k} of {section!r} needs 'image' and 'label' keys")
        images.append(_load_with_monai(Path(entry["image"])))
        labels.append(_int_label(entry["label"], path, k))
        ids.append(str(entry["image"]))
    return LabelledImages(_stack(images, ids), np.asarray(labels), tuple(ids))


def _int_label(value: Any, path: Path, k: int) -> int:
    arr = np.asarray(value).ravel()
    if arr.size != 1 or not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f"{path}: entry {k} label {value!r} is not one integer class index")
    return int(arr[0])


def _load_with_monai(path: Path) -> np.ndarray:
    """Read one 2D image with ``monai.transforms.LoadImage`` as ``(C, H, W)`` float32."""
    from monai.data import NibabelReader, PILReader, PydicomReader
    from monai.transforms import LoadImage

    name = path.name.lower()
    # Readers chosen explicitly so rows stay rows: PIL/pydicom readers transpose by default.
    if name.endswith((".png", ".jpg", ".jpeg")):
        reader = PILReader(reverse_indexing=False)
    elif name.endswith(".dcm"):
        reader = PydicomReader(swap_ij=False)
    elif name.endswith((".nii", ".nii.gz")):
        reader = NibabelReader()
    else:
        raise ValueError(f"{path}: unsupported image type; use one of {IMAGE_SUFFIXES}")
    # dtype=None keeps the stored dtype so uint8 scaling matches the folder loader.
    img = LoadImage(reader=reader, image_only=True, dtype=None)(str(path))
    arr = np.squeeze(np.asarray(img))
    return _channel_first(_scale(arr), path)


# --------------------------------------------------------------------------------------
# Real data sets
# --------------------------------------------------------------------------------------


def _require(path: Path) -> Path:
    if not path.exists():
        raise FileNotFoundError(
            f"{path} not found; set the {_DATA_ENV} environment variable to the real-data "
            f"folder (currently {data_root()})"
        )
    return path


def load_digits() -> LabelledImages:
    """scikit-learn's bundled digits: 1797 images ``(N, 1, 8, 8)``, pixels /16 in [0, 1]."""
    from sklearn.datasets import load_digits as sk_load_digits

    bunch = sk_load_digits()
    images = (bunch.images / 16.0).astype(np.float32)[:, None]
    ids = tuple(f"digits/{i}" for i in range(len(images)))
    return LabelledImages(images, bunch.target, ids, 10)


def load_pneumoniamnist(
    split: str = "train", root: str | os.PathLike | None = None
) -> LabelledImages:
    """PneumoniaMNIST (28x28 chest X-rays; 0 normal, 1 pneumonia).

    Args:
        split: ``"train"`` (4708), ``"val"`` (524) or ``"test"`` (624).
        root: Real-data folder; default :func:`data_root`. Reads
            ``<root>/medmnist/pneumoniamnist.npz``.
    """
    path = _require(Path(root or data_root()) / "medmnist" / "pneumoniamnist.npz")
    data = _load_npz(path, split)
    return LabelledImages(data.images, data.labels, data.ids, 2)


def load_mnist_test(root: str | os.PathLike | None = None) -> LabelledImages:
    """The 10,000 MNIST test digits ``(N, 1, 28, 28)`` in [0, 1].

    Args:
        root: Real-data folder; default :func:`data_root`. Reads
            ``<root>/mnist/t10k-images-idx3-ubyte.gz`` and ``t10k-labels-idx1-ubyte.gz``.
    """
    folder = Path(root or data_root()) / "mnist"
    images = _read_idx(_require(folder / "t10k-images-idx3-ubyte.gz"))
    labels = _read_idx(_require(folder / "t10k-labels-idx1-ubyte.gz"))
    ids = tuple(f"mnist_test/{i}" for i in range(len(images)))
    return LabelledImages(_scale(images)[:, None], labels, ids, 10)


def _read_idx(path: Path) -> np.ndarray:
    """Parse a gzip IDX file: magic (0, 0, dtype code, ndim), big-endian dims, data."""
    codes = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
    with gzip.open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in codes:
        raise ValueError(f"{path} is not an IDX file (bad magic number)")
    ndim = raw[3]
    dims = np.frombuffer(raw, dtype=">u4", count=ndim, offset=4).astype(int)
    dtype = np.dtype(codes[raw[2]])
    offset = 4 + 4 * ndim
    expected = int(np.prod(dims)) * dtype.itemsize
    if len(raw) - offset != expected:
        raise ValueError(f"{path}: header says {expected} data bytes, found {len(raw) - offset}")
    data = np.frombuffer(raw, dtype=dtype, offset=offset).reshape(dims)
    return data.astype(dtype.newbyteorder("="))


_ACDC_SLICE = re.compile(r"^(patient\d+)_frame(\d+)_slice_(\d+)\.h5$")


def load_acdc_slices(root: str | os.PathLike | None = None, size: int = 64) -> LabelledImages:
    """ACDC cine-MRI 2D slices (SSL4MIS h5 release) labelled by pathology group.

    Reads ``<root>/acdc_ssl4mis/data/patientNNN_frameFF_slice_S.h5`` (1312 slices of
    70 patients) and the ``groups.csv`` group of each patient, mapped to
    ``DCM, HCM, MINF, NOR, RV -> 0..4``. In-plane sizes vary, so each slice's
    ``image`` (already in [0, 1]) is resized to ``size x size`` with
    ``skimage.transform.resize`` (bilinear, anti-aliasing, range preserved); the
    aspect ratio is not kept. Ids look like ``patient001_frame01_slice_3``.

    Args:
        root: Real-data folder; default :func:`data_root`.
        size: Output height and width.
    """
    import h5py
    from skimage.transform import resize

    base = Path(root or data_root()) / "acdc_ssl4mis"
    folder = _require(base / "data")
    groups = _acdc_groups(_require(base / "groups.csv"))
    files = _acdc_slice_files(folder)
    if not files:
        raise FileNotFoundError(f"no patient*_frame*_slice_*.h5 files in {folder}")
    images = np.empty((len(files), 1, size, size), dtype=np.float32)
    labels, ids = [], []
    for k, (patient, path) in enumerate(files):
        with h5py.File(path, "r") as h5:
            img = np.asarray(h5["image"], dtype=np.float32)
        images[k, 0] = resize(img, (size, size), order=1, anti_aliasing=True, preserve_range=True)
        if patient not in groups:
            raise ValueError(f"{patient} has no group in {base / 'groups.csv'}")
        labels.append(groups[patient])
        ids.append(path.name[: -len(".h5")])
    return LabelledImages(images, np.asarray(labels), tuple(ids), len(ACDC_GROUPS))


def _acdc_slice_files(folder: Path) -> list[tuple[str, Path]]:
    found = []
    for p in folder.iterdir():
        m = _ACDC_SLICE.match(p.name)
        if m:
            key = (m.group(1), int(m.group(2)), int(m.group(3)))
            found.append((key, p))
    found.sort(key=lambda t: t[0])
    return [(key[0], p) for key, p in found]


def _acdc_groups(path: Path) -> dict[str, int]:
    """``patientNNN -> class index`` from ``groups.csv`` (columns matched case-insensitively)."""
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        cols = {c.strip().lower(): c for c in reader.fieldnames or []}
        if "patient" not in cols or "group" not in cols:
            raise ValueError(f"{path} needs 'patient' and 'group' columns, has {reader.fieldnames}")
        out = {}
        for row in reader:
            group = row[cols["group"]].strip().upper()
            if group not in ACDC_GROUPS:
                raise ValueError(f"{path}: unknown group {group!r}; expected one of {ACDC_GROUPS}")
            out[row[cols["patient"]].strip()] = ACDC_GROUPS.index(group)
    return out


# --------------------------------------------------------------------------------------
# Overlap check
# --------------------------------------------------------------------------------------


def check_disjoint(query: LabelledImages, calibration: LabelledImages) -> None:
    """Refuse a calibration set that shares any sample with the query set.

    Samples are compared by content hash (:func:`monai_forget.fingerprint.sample_hashes`),
    so copies are found whatever their ids or order; images differing in a single
    pixel are different samples.

    Raises:
        DataOverlapError: Some query images also appear in the calibration set.
    """
    from monai_forget.fingerprint import sample_hashes

    q_hash = sample_hashes(query)
    c_hash = sample_hashes(calibration)
    overlap = np.flatnonzero(np.isin(q_hash, c_hash))
    if overlap.size == 0:
        return
    first_c = {h: i for i, h in reversed(list(enumerate(c_hash)))}
    shown = [
        _describe(query, int(i), "D_Q") + " = " + _describe(calibration, first_c[q_hash[i]], "D_C")
        for i in overlap[:5]
    ]
    raise DataOverlapError(
        f"{overlap.size} of {len(query)} query samples also appear in the calibration set "
        f"(e.g. {'; '.join(shown)}); remove these samples from the calibration set; "
        "D_C must share no sample with D_Q"
    )


def _describe(data: LabelledImages, i: int, name: str) -> str:
    return f"{name}[{i}]" + (f" ({data.ids[i]})" if data.ids else "")
