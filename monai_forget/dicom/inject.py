"""Burn canary text into a DICOM dataset: plan (validate, change nothing), then apply.

:func:`plan_dataset` checks everything it can from the header — pixel encoding, text,
scale and fit, frames against NumberOfFrames, the identity the derived image will
reference — and :meth:`DicomPlan.apply` decodes, paints and only then changes the
dataset. A refused option therefore leaves the dataset exactly as it was.
"""

from __future__ import annotations

import io
import os
import struct
from dataclasses import dataclass, field

import numpy as np
from pydicom.dataelem import RawDataElement
from pydicom.dataset import Dataset

from monai_forget import __version__
from monai_forget.canary import TYPEFACE, changed_ink, paint
from monai_forget.canary.lettering import BitmapLettering, Lettering
from monai_forget.dicom.decode import check_pixel_data, decoded_pixels, transfer_syntax
from monai_forget.dicom.display import colour_white, frame_white
from monai_forget.dicom.errors import InjectionError
from monai_forget.dicom.names import display_name
from monai_forget.dicom.options import (
    BurnInOptions,
    Placement,
    check_changes,
    check_frames,
    place_text,
)
from monai_forget.dicom.record import Recoding, Rendered
from monai_forget.dicom.tags import mark_derived


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
    pixels_changed: list[int] = field(default_factory=list)
    old_sop_instance_uid: str = ""
    new_sop_instance_uid: str = ""
    transfer_syntax_in: str = ""
    transfer_syntax_out: str = ""
    photometric_in: str = ""
    photometric_out: str = ""

    lettering: Lettering | None = None  # None: the 5x5 typeface at ``scale``

    @property
    def mask(self) -> np.ndarray:
        """The text mask that was burned in (ink coverage for a TrueType lettering)."""
        return (self.lettering or BitmapLettering(self.scale)).render(self.text)


def _resolve_text(ds: Dataset, options: BurnInOptions) -> tuple[str, str]:
    if options.text is not None:
        return options.text, "given"
    if "PatientName" not in ds:
        raise InjectionError("the file has no PatientName; pass the text to burn in (`text`)")
    return display_name(ds.PatientName), "PatientName"


@dataclass
class DicomPlan:
    """A checked burn-in of one dataset; :meth:`apply` is the only step that changes it."""

    dataset: Dataset
    placement: Placement
    frames: list[int]

    def apply(self) -> BurnInResult:
        """Decode, paint the displayed white under the mask and mark the dataset derived."""
        ds, place = self.dataset, self.placement
        ts_in, pi_in = transfer_syntax(ds), str(ds.PhotometricInterpretation)
        pixels, photometric = decoded_pixels(ds)
        mask = place.mask()
        bits_stored = int(ds.BitsStored)
        values: list = []
        changed: list[int] = []
        for f in self.frames:
            if photometric.startswith("MONOCHROME"):
                white = frame_white(ds, f, pixels[f, ..., 0])
                values.append(white)
                fill = np.array([white])
            else:
                fill = np.array(colour_white(photometric, bits_stored))
                values.append([int(v) for v in fill])
            fill = fill.astype(pixels.dtype)
            changed.append(changed_ink(pixels[f], mask, place.position, fill, axes=(0, 1)))
            paint(pixels[f], mask, place.position, fill, axes=(0, 1))
        check_changes(changed, [f"frame {f}" for f in self.frames], values)

        # Everything above only read the dataset; from here on it changes.
        original = Dataset()
        original.SOPClassUID, original.SOPInstanceUID = ds.SOPClassUID, ds.SOPInstanceUID
        had_frames = "NumberOfFrames" in ds
        out = pixels[..., 0] if pixels.shape[-1] == 1 else pixels
        ds.set_pixel_data(out[0] if out.shape[0] == 1 else out, photometric, bits_stored)
        if had_frames and "NumberOfFrames" not in ds:
            ds.NumberOfFrames = 1  # set_pixel_data drops it for one frame; keep the element
        row, col = place.position
        height, width = place.shape
        lettering = place.lettering or BitmapLettering(place.scale)
        typeface = f"{TYPEFACE}, scale {place.scale}" if place.lettering is None else None
        description = (
            f"Burned-in canary text added by monai-forget {__version__}: typeface "
            f"{typeface or lettering.describe()}, box rows {row}-{row + height - 1} "
            f"cols {col}-{col + width - 1}"
        )
        new_uid = mark_derived(ds, original, description)
        return BurnInResult(
            dataset=ds,
            text=place.text,
            text_source=place.text_source,
            position=place.position,
            mask_shape=place.shape,
            scale=place.scale,
            frames=self.frames,
            values=values,
            pixels_changed=changed,
            old_sop_instance_uid=str(original.SOPInstanceUID),
            new_sop_instance_uid=new_uid,
            transfer_syntax_in=str(ts_in),
            transfer_syntax_out=str(transfer_syntax(ds)),
            photometric_in=pi_in,
            photometric_out=photometric,
            lettering=place.lettering,
        )

    def render(self) -> Rendered:
        """Apply the plan and encode the file (the format step of the shared driver)."""
        result = self.apply()
        recoding = Recoding(
            result.transfer_syntax_in,
            result.transfer_syntax_out,
            result.photometric_in,
            result.photometric_out,
        )
        return Rendered(
            encode(result.dataset),
            self.placement,
            result.frames,
            result.values,
            result.old_sop_instance_uid,
            result.new_sop_instance_uid,
            recoding,
            result.pixels_changed,
        )


def plan_dataset(
    ds: Dataset, options: BurnInOptions | None = None, *, source: str | os.PathLike = "<dataset>"
) -> DicomPlan:
    """Check a burn-in into ``ds`` from its header; ``ds`` is not changed. ``source``
    names it in errors (the file it was read from).

    Raises:
        InjectionError: unsupported data, missing identity, bad frames or text, or a
            text box that does not fit.
    """
    options = options or BurnInOptions()
    check_pixel_data(ds, source)
    text, text_source = _resolve_text(ds, options)
    placement = place_text(text, text_source, options, int(ds.Rows), int(ds.Columns))
    n_frames = int(ds.get("NumberOfFrames", 1) or 1)
    frames = check_frames(options.frames, n_frames)
    missing = [k for k in ("SOPClassUID", "SOPInstanceUID") if not ds.get(k)]
    if missing:
        raise InjectionError(
            f"the dataset has no {' or '.join(missing)}, so the derived image could not "
            "reference its source; fix the header first"
        )
    return DicomPlan(ds, placement, list(range(n_frames)) if frames is None else frames)


def burn_in(ds: Dataset, options: BurnInOptions | None = None) -> BurnInResult:
    """Burn text into ``ds`` in place and mark it as a new derived instance.

    Pixels under the text mask take the stored value displayed as white for each
    frame (see :mod:`monai_forget.dicom.display`); every other pixel keeps its value.
    Compressed data is decompressed (written back as Explicit VR Little Endian).
    Every option is checked first: a refusal leaves ``ds`` unchanged.

    Raises:
        InjectionError: unsupported data, unknown characters, or text that does not fit.
    """
    return plan_dataset(ds, options).apply()


def _align_encoding(ds: Dataset) -> None:
    """Make elements read in the other VR encoding writable in the declared one.

    Some files declare explicit VR but hold implicit VR data (pydicom reads them with
    a warning). Their unread elements carry no VR, which the explicit writer cannot
    encode; reading every element gives each its VR from the data dictionary.
    """
    implicit = transfer_syntax(ds).is_implicit_VR
    if any(isinstance(e, RawDataElement) and e.is_implicit_VR != implicit for e in ds.elements()):
        for _ in ds.iterall():
            pass


def encode(ds: Dataset) -> bytes:
    """Serialise ``ds`` as a DICOM Part 10 file (preamble, file meta, dataset).

    Raises:
        InjectionError: pydicom could not encode the dataset in its transfer syntax.
    """
    buffer = io.BytesIO()
    # A dataset read from a Part 10 file already has a preamble and file meta (kept up
    # to date by set_pixel_data and mark_derived); pydicom's enforce_file_format check
    # costs a deep copy per file, so it only runs when something is missing.
    complete = getattr(ds, "preamble", None) and "TransferSyntaxUID" in ds.get("file_meta", {})
    try:
        _align_encoding(ds)
        ds.save_as(buffer, enforce_file_format=not complete)
    except (TypeError, ValueError, OverflowError, OSError, struct.error) as err:
        # pydicom's first line names the tag; later lines may quote the value (PHI)
        reason = (str(err).splitlines() or [type(err).__name__])[0]
        raise InjectionError(
            f"the dataset could not be encoded as {transfer_syntax(ds).name} ({reason}); "
            "an element's value does not match its VR: fix or remove that element"
        ) from err
    return buffer.getvalue()
