"""NIfTI and PNG inputs through the same renderer, for non-DICOM data sets (e.g. ACDC).

Placement is in array index space: ``position`` is (first axis, second axis) of the
array as stored, which may differ from a viewer's orientation for NIfTI (viewers apply
the affine). The text is burned into every index of the remaining axes, or into the
chosen ``frames`` along the third axis.

nibabel and Pillow are imported when a file of their format is planned, so the DICOM
path does not load them.
"""

from __future__ import annotations

import gzip
import io
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from monai_forget.canary import changed_ink, paint
from monai_forget.dicom.errors import InjectionError
from monai_forget.dicom.options import (
    BurnInOptions,
    Placement,
    check_changes,
    check_frames,
    place_text,
)
from monai_forget.dicom.record import Rendered

NIFTI_SUFFIXES = (".nii", ".nii.gz")
PNG_SUFFIXES = (".png",)
# PNG modes with a defined white: 8/16-bit grey, grey+alpha, RGB, RGBA.
_PNG_MODES = ("L", "LA", "I;16", "RGB", "RGBA")


def is_nifti(path: str | os.PathLike) -> bool:
    """True for ``.nii`` and ``.nii.gz`` paths."""
    return str(path).lower().endswith(NIFTI_SUFFIXES)


def is_png(path: str | os.PathLike) -> bool:
    """True for ``.png`` paths."""
    return str(path).lower().endswith(PNG_SUFFIXES)


def _place(options: BurnInOptions, shape: tuple[int, ...]) -> Placement:
    if options.text is None:
        raise InjectionError("NIfTI and PNG files have no PatientName; pass the text (`text`)")
    if len(shape) < 2:
        raise InjectionError(f"expected an image with at least 2 axes, got shape {shape}")
    return place_text(options.text, "given", options, shape[0], shape[1])


def burn_into_volume(
    data: np.ndarray, placement: Placement, frames: list[int] | None
) -> tuple[np.ndarray, float, list[int]]:
    """Burn the placed text into a copy of an array whose first two axes are (rows, cols).

    The value is the array maximum: viewers window NIfTI volumes to their range, so
    the maximum displays as white. ``frames`` index the third axis (``None`` = all).

    Returns:
        The new array, the value and the pixels changed per target (the whole volume,
        or each frame).

    Raises:
        InjectionError: a target whose text box already holds the value everywhere.
    """
    out = np.array(data, copy=True)
    value = out.max()
    mask = placement.mask()
    targets = [out] if frames is None else [out[:, :, f] if out.ndim > 2 else out for f in frames]
    changed = [changed_ink(t, mask, placement.position, value, axes=(0, 1)) for t in targets]
    names = ["the volume"] if frames is None else [f"frame {f}" for f in frames]
    changed = check_changes(changed, names, [value.item()] * len(targets))
    for target in targets:
        paint(target, mask, placement.position, value, axes=(0, 1))
    return out, value.item(), changed


@dataclass
class NiftiPlan:
    """A checked burn-in of one NIfTI volume (same header and affine on output)."""

    image: object  # nibabel image
    data: np.ndarray
    placement: Placement
    frames: list[int] | None
    gzipped: bool

    def render(self) -> Rendered:
        """Burn the text and encode the volume (gzip when the output name says so)."""
        import nibabel as nib

        out, value, changed = burn_into_volume(self.data, self.placement, self.frames)
        new = nib.Nifti1Image(out, self.image.affine, self.image.header)
        new.set_data_dtype(self.image.get_data_dtype())
        payload = new.to_bytes()
        if self.gzipped:
            payload = gzip.compress(payload, mtime=0)
        return Rendered(payload, self.placement, self.frames, value, pixels_changed=changed)


def plan_nifti(src: Path, dst: Path, options: BurnInOptions) -> NiftiPlan:
    """Read a NIfTI volume and check the text box and frames against its shape."""
    import nibabel as nib

    try:
        img = nib.load(src)
        shape = tuple(img.shape)
    except Exception as err:  # nibabel raises many types for unreadable files
        raise InjectionError(f"{src} is not a readable NIfTI file ({err})") from err
    placement = _place(options, shape)
    frames = check_frames(options.frames, shape[2] if len(shape) > 2 else 1)
    try:
        data = np.asanyarray(img.dataobj)
    except Exception as err:
        raise InjectionError(f"{src} is not a readable NIfTI file ({err})") from err
    return NiftiPlan(img, data, placement, frames, str(dst).lower().endswith(".gz"))


@dataclass
class PngPlan:
    """A checked burn-in of one PNG at full-range white (alpha made opaque)."""

    pixels: np.ndarray
    placement: Placement

    def render(self) -> Rendered:
        """Burn the text and encode the PNG."""
        from PIL import Image

        top = np.iinfo(self.pixels.dtype).max
        value = np.full(self.pixels.shape[2:], top, dtype=self.pixels.dtype)
        out = np.array(self.pixels, copy=True)
        fill = value.reshape(-1) if value.ndim else top
        mask, position = self.placement.mask(), self.placement.position
        changed = [changed_ink(out, mask, position, fill, axes=(0, 1))]
        recorded = value.tolist() if value.ndim else int(top)
        changed = check_changes(changed, ["the image"], [recorded])
        paint(out, mask, position, fill, axes=(0, 1))
        buffer = io.BytesIO()
        Image.fromarray(out).save(buffer, format="PNG")
        return Rendered(buffer.getvalue(), self.placement, None, recorded, pixels_changed=changed)


def plan_png(src: Path, dst: Path, options: BurnInOptions) -> PngPlan:
    """Read a PNG's header, check its mode and the text box, then read its pixels."""
    from PIL import Image

    try:
        img = Image.open(src)
    except Exception as err:  # Pillow raises many types for unreadable files
        raise InjectionError(f"{src} is not a readable PNG file ({err})") from err
    with img:
        if img.mode not in _PNG_MODES:
            raise InjectionError(
                f"{src} has PNG mode {img.mode}; supported: {', '.join(_PNG_MODES)} "
                "(palette images have no fixed white: convert to RGB first)"
            )
        placement = _place(options, (img.height, img.width))
        check_frames(options.frames, 1)
        try:
            img.load()
            pixels = np.array(img)
        except Exception as err:
            raise InjectionError(f"{src} is not a readable PNG file ({err})") from err
    return PngPlan(pixels, placement)
