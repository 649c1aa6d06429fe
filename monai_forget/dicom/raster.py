"""NIfTI and PNG inputs through the same renderer, for non-DICOM data sets (e.g. ACDC).

Placement is in array index space: ``position`` is (first axis, second axis) of the
array as stored, which may differ from a viewer's orientation for NIfTI (viewers apply
the affine). The text is burned into every index of the remaining axes, or into the
chosen ``frames`` along the third axis.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
from pathlib import Path

import nibabel as nib
import numpy as np
from PIL import Image

from monai_forget.canary import TYPEFACE, check_fits, paint, render_text, scale_for_height
from monai_forget.dicom.errors import InjectionError
from monai_forget.dicom.hashing import TextHasher
from monai_forget.dicom.inject import BurnInOptions
from monai_forget.io import atomic_write, check_writable

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


def _plan(options: BurnInOptions, rows: int, cols: int) -> tuple[np.ndarray, int]:
    if options.text is None:
        raise InjectionError("NIfTI and PNG files have no PatientName; pass the text (--text)")
    scale = (
        scale_for_height(options.height_fraction, rows)
        if options.height_fraction is not None
        else options.scale
    )
    mask = render_text(options.text, scale)
    check_fits(mask.shape, options.position, (rows, cols))
    return mask, scale


def _record(src, dst, options, mask, scale, frames, value, sha, hasher) -> dict:
    return {
        "action": "injected",
        "input": str(src),
        "output": str(dst),
        "old_sop_instance_uid": "",
        "new_sop_instance_uid": "",
        "bbox_row": int(options.position[0]),
        "bbox_col": int(options.position[1]),
        "bbox_height": int(mask.shape[0]),
        "bbox_width": int(mask.shape[1]),
        "frames": frames,
        "typeface": TYPEFACE,
        "scale": scale,
        "value": value,
        "text_source": "given",
        "n_chars": len(options.text),
        hasher.field: hasher(options.text),
        "output_sha256": sha,
    }


def burn_into_volume(
    data: np.ndarray, options: BurnInOptions
) -> tuple[np.ndarray, np.ndarray, int, list[int] | None, float]:
    """Burn text into a copy of an array whose first two axes are (rows, columns).

    The value is the array maximum: viewers window NIfTI volumes to their range, so
    the maximum displays as white.

    Returns:
        The new array, the mask, the scale, the frames (``None`` = all) and the value.
    """
    if data.ndim < 2:
        raise InjectionError(f"expected an image with at least 2 axes, got shape {data.shape}")
    mask, scale = _plan(options, data.shape[0], data.shape[1])
    out = np.array(data, copy=True)
    value = out.max()
    if options.frames is None:
        paint(out, mask, options.position, value, axes=(0, 1))
        return out, mask, scale, None, value.item()
    n_frames = data.shape[2] if data.ndim > 2 else 1
    if any(not 0 <= f < n_frames for f in options.frames):
        raise InjectionError(f"frames {list(options.frames)} are outside 0..{n_frames - 1}")
    for f in sorted(set(options.frames)):
        target = out[:, :, f] if data.ndim > 2 else out
        paint(target, mask, options.position, value, axes=(0, 1))
    return out, mask, scale, sorted(set(options.frames)), value.item()


def inject_nifti(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    options: BurnInOptions,
    *,
    overwrite: bool = False,
    dry_run: bool = False,
    hasher: TextHasher | None = None,
    durable: bool = True,
) -> dict:
    """Burn text into a NIfTI volume and write it atomically (same header and affine)."""
    src, dst = Path(src), Path(dst)
    check_writable(dst, overwrite)
    hasher = hasher or TextHasher()
    try:
        img = nib.load(src)
        data = np.asanyarray(img.dataobj)
    except Exception as err:  # nibabel raises many types for unreadable files
        raise InjectionError(f"{src} is not a readable NIfTI file ({err})") from err
    out, mask, scale, frames, value = burn_into_volume(data, options)
    if dry_run:
        return _record(src, dst, options, mask, scale, frames, value, "", hasher)
    new = nib.Nifti1Image(out, img.affine, img.header)
    new.set_data_dtype(img.get_data_dtype())
    payload = new.to_bytes()
    if str(dst).lower().endswith(".gz"):
        payload = gzip.compress(payload, mtime=0)
    with atomic_write(dst, "wb", overwrite=overwrite, durable=durable) as handle:
        handle.write(payload)
    sha = hashlib.sha256(payload).hexdigest()
    return _record(src, dst, options, mask, scale, frames, value, sha, hasher)


def inject_png(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    options: BurnInOptions,
    *,
    overwrite: bool = False,
    dry_run: bool = False,
    hasher: TextHasher | None = None,
    durable: bool = True,
) -> dict:
    """Burn text into a PNG at full-range white (alpha made opaque) and write it."""
    src, dst = Path(src), Path(dst)
    check_writable(dst, overwrite)
    hasher = hasher or TextHasher()
    try:
        with Image.open(src) as img:
            img.load()
            mode = img.mode
            arr = np.array(img)
    except Exception as err:  # Pillow raises many types for unreadable files
        raise InjectionError(f"{src} is not a readable PNG file ({err})") from err
    if mode not in _PNG_MODES:
        raise InjectionError(
            f"{src} has PNG mode {mode}; supported: {', '.join(_PNG_MODES)} "
            "(palette images have no fixed white: convert to RGB first)"
        )
    mask, scale = _plan(options, arr.shape[0], arr.shape[1])
    top = np.iinfo(arr.dtype).max
    value = np.full(arr.shape[2:], top, dtype=arr.dtype)
    out = np.array(arr, copy=True)
    paint(out, mask, options.position, value.reshape(-1) if value.ndim else top, axes=(0, 1))
    value_list = value.tolist() if value.ndim else int(top)
    if dry_run:
        return _record(src, dst, options, mask, scale, None, value_list, "", hasher)
    buffer = io.BytesIO()
    Image.fromarray(out).save(buffer, format="PNG")
    payload = buffer.getvalue()
    with atomic_write(dst, "wb", overwrite=overwrite, durable=durable) as handle:
        handle.write(payload)
    sha = hashlib.sha256(payload).hexdigest()
    return _record(src, dst, options, mask, scale, None, value_list, sha, hasher)
