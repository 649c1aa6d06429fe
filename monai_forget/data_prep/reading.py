"""Read the 2D (or 3D) array a datalist entry references.

ACDC entries point at a source volume plus ``frame_index`` / ``slice`` (see
``data_prep/README.md``) instead of copying slices; this module turns such an entry back
into pixels, for scripts and as the MONAI transform :class:`LoadReferencedSliced`.
Other layouts (PNG, JPEG, DICOM) are plain image files for ``monai.transforms.LoadImaged``.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import h5py
import nibabel as nib
import numpy as np
from monai.transforms import MapTransform

from monai_forget.acdc.volumes import check_mask_labels
from monai_forget.data_prep.acdc_h5 import H5_KEYS


def read_array(entry: Mapping[str, Any], key: str = "image") -> np.ndarray:
    """The array ``entry[key]`` references, reduced by ``frame_index`` and ``slice``.

    Args:
        entry: a datalist entry whose paths are absolute (as ``load_decathlon_datalist``
            returns them) or relative to the working directory.
        key: ``"image"`` or ``"seg"``.

    Returns:
        The array in the file's own axis order, without a channel dimension; 2D for a
        slice entry.

    Raises:
        FileNotFoundError: the file is missing.
        ValueError: an unsupported file type, or an index outside the array.
    """
    path = Path(entry[key])
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found (entry field {key!r})")
    axis = entry.get("slice_axis")
    index = entry.get("slice")
    if path.suffix == ".h5":
        with h5py.File(path, "r") as handle:
            dataset = handle[H5_KEYS.get(key, key)]
            if axis is None:
                return dataset[()]
            if axis != 0:
                raise ValueError(f"{path}: h5 volumes are sliced on axis 0, entry says {axis}")
            _check_index(path, index, dataset.shape[0])
            return dataset[index]  # reads one slice, not the volume
    if path.name.endswith((".nii", ".nii.gz")):
        proxy = nib.load(path).dataobj
        frame = entry.get("frame_index")
        if frame is not None and len(proxy.shape) == 4:  # the 3D ground truth has no T
            _check_index(path, frame, proxy.shape[3])
            array = np.asarray(proxy[..., frame])
        else:
            array = np.asarray(proxy)
        if axis is None:
            return array
        _check_index(path, index, array.shape[axis])
        return np.take(array, index, axis=axis)
    raise ValueError(f"{path}: not an h5 or NIfTI file; read it with monai LoadImaged")


def _check_index(path: Path, index: Any, size: int) -> None:
    if not isinstance(index, int) or not 0 <= index < size:
        raise ValueError(f"{path}: index {index!r} outside 0..{size - 1}")


class LoadReferencedSliced(MapTransform):
    """Dictionary transform: replace ``image``/``seg`` paths by the referenced arrays.

    Adds a leading channel dimension, so the output suits MONAI's channel-first
    transforms (``RandSpatialCropd`` etc.) directly. Keys in ``mask_keys`` hold ACDC
    segmentations: values outside 0-3 are refused with the patient and the file named.
    A key other than ``image``/``seg`` reads the h5 dataset of that name (``label``:
    the mask), so a segmentation pipeline can load the mask straight into ``label``.
    """

    def __init__(
        self,
        keys: Sequence[Hashable] = ("image",),
        dtype: np.dtype | type | None = np.float32,
        allow_missing_keys: bool = False,
        mask_keys: Sequence[Hashable] = (),
    ) -> None:
        super().__init__(keys, allow_missing_keys)
        self.dtype = dtype
        self.mask_keys = tuple(mask_keys)

    def __call__(self, data: Mapping[Hashable, Any]) -> dict[Hashable, Any]:
        d = dict(data)
        for key in self.key_iterator(d):
            array = read_array(d, str(key))
            if key in self.mask_keys:
                where = f"{d.get('patient', '?')} {d.get('phase') or ''} slice {d.get('slice')}"
                check_mask_labels(array, f"{where.strip()}, {d[key]}")
            d[key] = array[None].astype(self.dtype) if self.dtype is not None else array[None]
        return d
