"""Burn canary text into a DICOM dataset or file."""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydicom.dataset import Dataset

from monai_forget import __version__
from monai_forget.canary import TYPEFACE, check_fits, paint, render_text, scale_for_height
from monai_forget.dicom.decode import (
    check_pixel_data,
    editable_pixels,
    read_dataset,
    transfer_syntax,
)
from monai_forget.dicom.display import colour_white, frame_white
from monai_forget.dicom.errors import InjectionError
from monai_forget.dicom.hashing import TextHasher
from monai_forget.dicom.names import display_name
from monai_forget.dicom.tags import mark_derived
from monai_forget.io import atomic_write, check_writable


@dataclass(frozen=True)
class BurnInOptions:
    """Where and how to burn the text.

    Attributes:
        text: text to burn in; ``None`` uses the file's PatientName as a viewer shows it.
        position: ``(row, col)`` of the text's top-left pixel (default: 1 pixel from
            the top-left corner, as in Hartley & Tsaftaris 2022).
        scale: integer glyph magnification (glyphs are ``5*scale`` rows tall).
        height_fraction: if set, overrides ``scale`` with the largest scale whose text
            height is at most this fraction of the image rows.
        frames: 0-based frame indices to burn into; ``None`` means every frame.
    """

    text: str | None = None
    position: tuple[int, int] = (1, 1)
    scale: int = 1
    height_fraction: float | None = None
    frames: tuple[int, ...] | None = None


@dataclass
class BurnInResult:
    """What :func:`burn_in` did to a dataset."""

    dataset: Dataset
    text: str
    text_source: str
    position: tuple[int, int]
    mask_shape: tuple[int, int]
    scale: int
    frames: list[int]
    values: list = field(default_factory=list)
    old_sop_instance_uid: str = ""
    new_sop_instance_uid: str = ""
    transfer_syntax_in: str = ""
    transfer_syntax_out: str = ""
    photometric_in: str = ""
    photometric_out: str = ""

    @property
    def mask(self) -> np.ndarray:
        """The text mask that was burned in."""
        return render_text(self.text, self.scale)


def _resolve_text(ds: Dataset, options: BurnInOptions) -> tuple[str, str]:
    if options.text is not None:
        render_text(options.text)  # refuse unknown characters before any work
        return options.text, "given"
    if "PatientName" not in ds:
        raise InjectionError("the file has no PatientName; pass the text to burn in (--text)")
    return display_name(ds.PatientName), "PatientName"


def _frames(options: BurnInOptions, n_frames: int) -> list[int]:
    if options.frames is None:
        return list(range(n_frames))
    bad = [f for f in options.frames if not 0 <= f < n_frames]
    if bad or not options.frames:
        raise InjectionError(
            f"frames {list(options.frames)} are not valid for a {n_frames}-frame image; "
            f"use 0-based indices below {n_frames}"
        )
    return sorted(set(options.frames))


def burn_in(ds: Dataset, options: BurnInOptions | None = None) -> BurnInResult:
    """Burn text into ``ds`` in place and mark it as a new derived instance.

    Pixels under the text mask take the stored value displayed as white for each
    frame (see :mod:`monai_forget.dicom.display`); every other pixel keeps its value.
    Compressed data is decompressed (written back as Explicit VR Little Endian).

    Raises:
        InjectionError: unsupported data, unknown characters, or text that does not fit.
    """
    options = options or BurnInOptions()
    check_pixel_data(ds)
    text, source = _resolve_text(ds, options)
    rows, cols = int(ds.Rows), int(ds.Columns)
    scale = (
        scale_for_height(options.height_fraction, rows)
        if options.height_fraction is not None
        else options.scale
    )
    mask = render_text(text, scale)
    check_fits(mask.shape, options.position, (rows, cols))

    missing = [k for k in ("SOPClassUID", "SOPInstanceUID") if not ds.get(k)]
    if missing:
        raise InjectionError(
            f"the dataset has no {' or '.join(missing)}, so the derived image could not "
            "reference its source; fix the header first"
        )
    original = Dataset()
    original.SOPClassUID = ds.SOPClassUID
    original.SOPInstanceUID = ds.SOPInstanceUID
    ts_in, pi_in = transfer_syntax(ds), str(ds.PhotometricInterpretation)
    had_frames = "NumberOfFrames" in ds

    pixels, photometric = editable_pixels(ds)
    frames = _frames(options, pixels.shape[0])
    bits_stored = int(ds.BitsStored)
    values: list = []
    for f in frames:
        if photometric.startswith("MONOCHROME"):
            white = frame_white(ds, f, pixels[f, ..., 0])
            values.append(white)
            fill = np.array([white])
        else:
            fill = np.array(colour_white(photometric, bits_stored))
            values.append([int(v) for v in fill])
        paint(pixels[f], mask, options.position, fill.astype(pixels.dtype), axes=(0, 1))

    out = pixels[..., 0] if pixels.shape[-1] == 1 else pixels
    if out.shape[0] == 1:
        out = out[0]
    ds.set_pixel_data(out, photometric, bits_stored, generate_instance_uid=False)
    if had_frames and "NumberOfFrames" not in ds:
        ds.NumberOfFrames = 1  # set_pixel_data drops it for one frame; keep the element

    row, col = (int(p) for p in options.position)
    description = (
        f"Burned-in canary text added by monai-forget {__version__}: typeface {TYPEFACE}, "
        f"scale {scale}, box rows {row}-{row + mask.shape[0] - 1} "
        f"cols {col}-{col + mask.shape[1] - 1}"
    )
    new_uid = mark_derived(ds, original, description)
    return BurnInResult(
        dataset=ds,
        text=text,
        text_source=source,
        position=(row, col),
        mask_shape=(int(mask.shape[0]), int(mask.shape[1])),
        scale=scale,
        frames=frames,
        values=values,
        old_sop_instance_uid=str(original.SOPInstanceUID),
        new_sop_instance_uid=new_uid,
        transfer_syntax_in=str(ts_in),
        transfer_syntax_out=str(transfer_syntax(ds)),
        photometric_in=pi_in,
        photometric_out=photometric,
    )


def encode(ds: Dataset) -> bytes:
    """Serialise ``ds`` as a DICOM Part 10 file (preamble, file meta, dataset)."""
    buffer = io.BytesIO()
    # A dataset read from a Part 10 file already has a preamble and file meta (kept up
    # to date by set_pixel_data and mark_derived); pydicom's enforce_file_format check
    # costs a deep copy per file, so it only runs when something is missing.
    complete = getattr(ds, "preamble", None) and "TransferSyntaxUID" in ds.get("file_meta", {})
    ds.save_as(buffer, enforce_file_format=not complete)
    return buffer.getvalue()


def manifest_record(
    result: BurnInResult,
    src: str | os.PathLike,
    dst: str | os.PathLike,
    output_sha256: str,
    hasher: TextHasher,
) -> dict:
    """One manifest row for an injected file (text hashed unless ``hasher`` is plain)."""
    return {
        "action": "injected",
        "input": str(src),
        "output": str(dst),
        "old_sop_instance_uid": result.old_sop_instance_uid,
        "new_sop_instance_uid": result.new_sop_instance_uid,
        "bbox_row": result.position[0],
        "bbox_col": result.position[1],
        "bbox_height": result.mask_shape[0],
        "bbox_width": result.mask_shape[1],
        "frames": result.frames,
        "typeface": TYPEFACE,
        "scale": result.scale,
        "value": result.values,
        "text_source": result.text_source,
        "n_chars": len(result.text),
        hasher.field: hasher(result.text),
        "transfer_syntax_in": result.transfer_syntax_in,
        "transfer_syntax_out": result.transfer_syntax_out,
        "photometric_in": result.photometric_in,
        "photometric_out": result.photometric_out,
        "output_sha256": output_sha256,
    }


def inject_file(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    options: BurnInOptions | None = None,
    *,
    overwrite: bool = False,
    dry_run: bool = False,
    hasher: TextHasher | None = None,
    durable: bool = True,
) -> dict:
    """Burn canary text into the DICOM file ``src`` and write it atomically to ``dst``.

    ``src`` is only read. With ``dry_run`` every check and the burn-in run in memory
    but nothing is written (``output_sha256`` is then empty).

    Returns:
        The manifest record (see :func:`manifest_record`).

    Raises:
        InjectionError, FileNotFoundError, FileExistsError: nothing is written.
    """
    src, dst = Path(src), Path(dst)
    if src.resolve() == dst.resolve():
        raise InjectionError(f"output {dst} is the input; the input is never modified")
    check_writable(dst, overwrite)
    hasher = hasher or TextHasher()
    ds = read_dataset(src)
    try:
        result = burn_in(ds, options)
    except ValueError as err:  # name the file: folder runs touch many
        raise InjectionError(f"{src}: {err}") from err
    if dry_run:
        return manifest_record(result, src, dst, "", hasher)
    data = encode(result.dataset)
    with atomic_write(dst, "wb", overwrite=overwrite, durable=durable) as handle:
        handle.write(data)
    return manifest_record(result, src, dst, hashlib.sha256(data).hexdigest(), hasher)


def as_options(
    text: str | None = None,
    position: Sequence[int] = (1, 1),
    scale: int = 1,
    height_fraction: float | None = None,
    frames: Sequence[int] | None = None,
) -> BurnInOptions:
    """Build :class:`BurnInOptions` from loose arguments (lists from argparse)."""
    return BurnInOptions(
        text=text,
        position=(int(position[0]), int(position[1])),
        scale=int(scale),
        height_fraction=height_fraction,
        frames=None if frames is None else tuple(int(f) for f in frames),
    )
