"""Which way a bundle's loader lays out a file's pixels.

The injector burns a text along the rows of the file's pixel grid (DICOM ``Rows x
Columns``, a PNG's height x width). MONAI's readers return 2-D images with the file's
columns first (``PydicomReader(swap_ij=True)``, ``PILReader(reverse_indexing=True)``,
``ITKReader``): a text burned along a DICOM's rows reaches the model along the loaded
image's first spatial axis. A scan that burned its texts along the loaded image's rows
would show the model a transposed text, a feature it never saw. The layout is read off
the probe files themselves: their shape where rows and columns differ, their pixels where
they do not.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = ["loader_transposes"]


def _file_pixels(path: Path) -> np.ndarray | None:
    """The file's first 2-D grey frame as stored (rows, columns), or ``None`` for a
    format other than PNG and DICOM."""
    if path.suffix.lower() == ".png":
        from PIL import Image

        with Image.open(path) as image:
            return np.asarray(image.convert("F"), dtype=np.float64)
    import pydicom
    from pydicom.errors import InvalidDicomError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dataset = pydicom.dcmread(path)
            pixels = dataset.pixel_array
    except (InvalidDicomError, AttributeError, ValueError, RuntimeError, OSError):
        return None
    pixels = pixels[0] if int(dataset.get("NumberOfFrames", 1) or 1) > 1 else pixels
    return np.asarray(pixels[..., 0] if pixels.ndim == 3 else pixels, dtype=np.float64)


def _similarity(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.ravel() - a.mean(), b.ravel() - b.mean()
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return abs(float(a @ b)) / norm if norm > 0 else 0.0


def loader_transposes(files: Sequence[Path], loaded: Sequence[np.ndarray]) -> bool:
    """Whether the loader returned each file ``(C, W, H)``: columns first.

    Decided by the first file that tells: one whose rows and columns differ in number (by
    the shapes), or a square one whose pixels match the stored grid better one way than
    the other (the loader may window the values, so by correlation). Formats read neither
    by PIL nor by pydicom (e.g. NIfTI, whose array axes the injector burns as loaded) are
    taken as loaded.

    Raises:
        ValueError: every probe is square and symmetric under transposition, so the
            layout cannot be told; add a probe that is not.
    """
    readable = False
    for path, image in zip(files, loaded, strict=True):
        stored = _file_pixels(Path(path))
        if stored is None:
            continue
        readable = True
        spatial = tuple(np.shape(image)[-2:])
        if stored.shape != stored.shape[::-1] and spatial in (stored.shape, stored.shape[::-1]):
            return spatial != stored.shape
        plane = np.asarray(image, dtype=np.float64).reshape(-1, *spatial)[0]
        if plane.shape != stored.shape:
            continue  # resized by the loader: another file may tell
        as_stored, swapped = _similarity(plane, stored), _similarity(plane, stored.T)
        if abs(as_stored - swapped) > 1e-3:
            return swapped > as_stored
    if readable:
        raise ValueError(
            "cannot tell whether the bundle's loader transposes the probes (every probe is "
            "square and looks the same transposed); add a probe image that is not"
        )
    return False
