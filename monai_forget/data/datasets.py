"""The real data sets used by tests and benchmarks: scikit-learn's digits, PneumoniaMNIST,
the MNIST test digits and ACDC cine-MRI slices, read from :func:`data_root`."""

from __future__ import annotations

import csv
import gzip
import os
import re
from pathlib import Path

import numpy as np

from monai_forget.data.acdc import ACDC_GROUPS, acdc_label
from monai_forget.data.images import LabelledImages
from monai_forget.data.readers import load_npz, scale_pixels

__all__ = [
    "data_root",
    "load_acdc_slices",
    "load_digits",
    "load_mnist_test",
    "load_pneumoniamnist",
]

_DATA_ENV = "MONAI_FORGET_DATA"


def data_root() -> Path:
    """The real-data folder: ``$MONAI_FORGET_DATA``, else ``<repo>/../shared/data``."""
    env = os.environ.get(_DATA_ENV)
    if env:
        return Path(env).expanduser()
    # this file is <repo>/monai_forget/data/datasets.py
    return Path(__file__).resolve().parents[3] / "shared" / "data"


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
    data = load_npz(path, split)
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
    return LabelledImages(scale_pixels(images)[:, None], labels, ids, 10)


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
    70 patients) and the ``groups.csv`` group of each patient, mapped to class indices
    in the package's one ACDC order :data:`~monai_forget.data.ACDC_GROUPS`
    (``NOR, MINF, DCM, HCM, RV -> 0..4``). In-plane sizes vary, so each slice's
    ``image`` (already in [0, 1]) is resized to ``size x size`` with
    ``skimage.transform.resize`` (bilinear, anti-aliasing, range preserved); the
    aspect ratio is not kept. Ids look like ``patient001_frame01_slice_3``.

    Not MONAI's ``Resize(anti_aliasing=True)``: its Gaussian pre-filter pads with zeros,
    so every slice would get a dark frame (a constant image loses up to 18% at its
    border, 0.15 of the [0, 1] range on real slices); scikit-image mirrors at the border
    and keeps a constant image constant.

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
        return {
            row[cols["patient"]].strip(): acdc_label(row[cols["group"]].strip().upper(), str(path))
            for row in reader
        }
