"""MONAI dictionary transforms for ACDC volumes (the entries of :func:`group_volumes`)."""

from __future__ import annotations

import os
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np
import torch
from monai.data import MetaTensor
from monai.transforms import MapTransform

from monai_forget.acdc.volumes import read_volume
from monai_forget.io import atomic_write

__all__ = ["LoadACDCVolumed", "SaveACDCMaskd", "check_new_masks"]


class LoadACDCVolumed(MapTransform):
    """Read a volume entry into ``image`` and (optionally) ``label`` MetaTensors.

    Both are channel-first ``(1, H, W, D)``, short axis last (``SliceInferer``'s
    ``spatial_dim=2``), carrying the source's affine (identity for the h5 release) and
    ``filename_or_obj = "<patient>_<phase>"``, so ``SaveImaged`` writes
    ``<patient>_<phase>/<patient>_<phase>_seg.nii.gz``. ``spacing`` holds the voxel size
    from a NIfTI header, or NaNs (h5). Masks with unknown labels and volumes with missing
    slices are refused, naming the patient and the file
    (:func:`~monai_forget.acdc.volumes.read_volume`).

    Args:
        with_label: read the expert mask (``seg`` of the sources) into ``label``.
    """

    def __init__(self, with_label: bool = True) -> None:
        super().__init__(keys=("image",))
        self.with_label = with_label

    def __call__(self, data: Mapping[Hashable, Any]) -> dict[Hashable, Any]:
        d = dict(data)
        volume = read_volume(d, with_mask=self.with_label)
        meta = {
            "filename_or_obj": f"{volume.patient}_{volume.phase}",
            "source": volume.source,
            "geometry_known": volume.spacing is not None,
        }
        affine = torch.as_tensor(volume.affine, dtype=torch.float64)
        d["image"] = MetaTensor(volume.image[None], affine=affine, meta=dict(meta))
        if volume.mask is not None:
            d["label"] = MetaTensor(
                volume.mask[None].astype(np.float32), affine=affine, meta=dict(meta)
            )
        unknown = (np.nan, np.nan, np.nan)  # None would not collate into a batch
        d["spacing"] = np.asarray(volume.spacing or unknown, dtype=np.float64)
        d.pop("sources", None)  # paths of every slice: not needed downstream
        return d


class SaveACDCMaskd(MapTransform):
    """Write a segmentation (``(1, H, W, D)`` class indices) as NIfTI, atomically.

    The file is ``<output_dir>/<filename_or_obj>_seg.nii.gz`` (e.g.
    ``patient001_ED_seg.nii.gz``), uint8, with the source's affine (the NIfTI release's
    geometry); a source without geometry (the h5 release) gives a header without one
    (qform and sform codes 0), so no reader mistakes its pixels for 1 mm. An existing
    file is refused unless ``overwrite``.

    Args:
        output_dir: the output folder (created).
        key: the item holding the mask.
        overwrite: replace existing files.
    """

    def __init__(self, output_dir: str, key: str = "pred", overwrite: bool = False) -> None:
        super().__init__(keys=(key,))
        self.output_dir, self.key, self.overwrite = output_dir, key, overwrite

    def path_for(self, name: str) -> str:
        return os.path.join(self.output_dir, f"{name}_seg.nii.gz")

    def __call__(self, data: Mapping[Hashable, Any]) -> dict[Hashable, Any]:
        import gzip

        import nibabel as nib

        d = dict(data)
        mask = d[self.key]
        meta = getattr(mask, "meta", {}) or {}
        name = str(meta.get("filename_or_obj", "mask"))
        affine = np.asarray(getattr(mask, "affine", np.eye(4)), dtype=np.float64)
        array = np.asarray(torch.as_tensor(mask).detach().cpu())[0].astype(np.uint8)
        known = bool(np.asarray(meta.get("geometry_known", True)).ravel()[0])
        image = nib.Nifti1Image(array, affine if known else None)
        if known:
            image.header.set_xyzt_units("mm")
        with atomic_write(self.path_for(name), "wb", overwrite=self.overwrite) as handle:
            handle.write(gzip.compress(image.to_bytes(), mtime=0))
        d[f"{self.key}_file"] = self.path_for(name)
        return d


def check_new_masks(
    output_dir: str, volumes: list[Mapping[str, Any]], overwrite: bool = False
) -> list[str]:
    """The mask files :class:`SaveACDCMaskd` will write for ``volumes``, refused before
    any work when one exists (unless ``overwrite``) or when there is nothing to segment.

    Raises:
        ValueError: no volume (e.g. ``patients`` names none of the section's patients).
        FileExistsError: an output exists and ``overwrite`` is false.
    """
    from monai_forget.io import check_writable

    if not volumes:
        raise ValueError("no volume to segment: check the datalist section and `patients`")
    paths = [os.path.join(output_dir, f"{v['patient']}_{v['phase']}_seg.nii.gz") for v in volumes]
    for path in paths:
        check_writable(path, overwrite)
    return paths
