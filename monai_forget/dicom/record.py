"""One manifest record per input file, for every format and action.

:meth:`ManifestRecord.to_dict` gives the keys, in the order, that the manifest JSON and
CSV have always used; parts that do not apply to a record are left out, not blanked.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from monai_forget.canary import TYPEFACE
from monai_forget.dicom.hashing import TextHasher
from monai_forget.dicom.options import Placement


@dataclass(frozen=True)
class Recoding:
    """How a DICOM file's encoding changed on the way through the injector."""

    transfer_syntax_in: str
    transfer_syntax_out: str
    photometric_in: str
    photometric_out: str


@dataclass(frozen=True)
class Rendered:
    """What a format's write step produced: the file's bytes and what was burned."""

    payload: bytes
    placement: Placement
    frames: list[int] | None  # None: every frame (NIfTI and PNG without --frames)
    value: object  # the burned value(s), per frame for DICOM
    old_sop_instance_uid: str = ""
    new_sop_instance_uid: str = ""
    recoding: Recoding | None = None
    pixels_changed: list[int] | None = None  # per burned frame / slice set / image


@dataclass(frozen=True)
class TextBox:
    """Where and what text was burned into one file (the text only as recorded)."""

    row: int
    col: int
    height: int
    width: int
    frames: list[int] | None
    scale: int
    value: object
    text_source: str
    n_chars: int
    text_field: str  # "text" or "text_hmac_sha256" (see TextHasher.field)
    text_recorded: str
    old_sop_instance_uid: str = ""
    new_sop_instance_uid: str = ""
    pixels_changed: list[int] | None = None
    font: dict | None = None  # a TrueType lettering's record; None: the 5x5 typeface

    @classmethod
    def burned(cls, rendered: Rendered, hasher: TextHasher) -> TextBox:
        """The record of ``rendered``, its text hashed (or kept) by ``hasher``."""
        place = rendered.placement
        return cls(
            *place.position,
            *place.shape,
            frames=rendered.frames,
            scale=place.scale,
            value=rendered.value,
            text_source=place.text_source,
            n_chars=len(place.text),
            text_field=hasher.field,
            text_recorded=hasher(place.text),
            old_sop_instance_uid=rendered.old_sop_instance_uid,
            new_sop_instance_uid=rendered.new_sop_instance_uid,
            pixels_changed=rendered.pixels_changed,
            font=None if place.lettering is None else place.lettering.record(),
        )


@dataclass(frozen=True)
class ManifestRecord:
    """What happened to one input file.

    Attributes:
        action: ``injected``, ``copied`` or ``skipped``.
        input: the input path.
        output: the final output path (empty for skipped files).
        output_sha256: sha256 of the written bytes; ``""`` when a dry run wrote
            nothing, ``None`` when not recorded (dry-run copies, skipped files).
        box: the burned-in text, for ``injected``.
        recoding: DICOM transfer syntax and photometric, for injected DICOM files.
        reason: why a file was skipped.
        legibility: the canary at the model input, when measured
            (:mod:`monai_forget.dicom.legible`): the ``legibility_*`` keys and ``legible``.
    """

    action: str
    input: str
    output: str
    output_sha256: str | None = None
    box: TextBox | None = None
    recoding: Recoding | None = None
    reason: str | None = None
    legibility: dict | None = None

    def replace(self, **changes: object) -> ManifestRecord:
        """A copy with some fields changed (e.g. the staged output's final path)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """The manifest row: the keys and values the JSON and CSV files hold."""
        row: dict = {"action": self.action, "input": self.input, "output": self.output}
        box = self.box
        if box is not None:
            row.update(
                old_sop_instance_uid=box.old_sop_instance_uid,
                new_sop_instance_uid=box.new_sop_instance_uid,
                bbox_row=box.row,
                bbox_col=box.col,
                bbox_height=box.height,
                bbox_width=box.width,
                frames=box.frames,
                # a TrueType font: its name as the typeface, its file and size
                **(box.font or {"typeface": TYPEFACE}),
                scale=box.scale,
                value=box.value,
                text_source=box.text_source,
                n_chars=box.n_chars,
            )
            row[box.text_field] = box.text_recorded
            if box.pixels_changed is not None:
                row["pixels_changed"] = box.pixels_changed
        if self.recoding is not None:
            row.update(dataclasses.asdict(self.recoding))
        if self.output_sha256 is not None:
            row["output_sha256"] = self.output_sha256
        if self.reason is not None:
            row["reason"] = self.reason
        if self.legibility is not None:
            row.update(self.legibility)
        return row
