"""What to burn where, and the checks every format shares before anything is drawn.

The text box is checked from the glyph arithmetic (:func:`~monai_forget.canary.text_shape`)
before a mask is rendered, so a huge ``scale`` is refused without allocating anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from monai_forget.canary import (
    check_fits,
    glyph,
    scale_for_height,
    text_shape,
    unsupported_characters,
)
from monai_forget.canary.lettering import (
    BitmapLettering,
    Lettering,
    TrueTypeLettering,
    as_lettering,
)
from monai_forget.checks import Interval
from monai_forget.dicom.errors import InjectionError


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
        font: a TrueType font (a font file, or a name matplotlib bundles, e.g.
            ``DejaVuSans``) instead of the 5x5 typeface, anti-aliased
            (:mod:`~monai_forget.canary.lettering`); ``scale`` is then unused.
        font_size: the font's size in pixels per em (with ``font``; default 12).
    """

    text: str | None = None
    position: tuple[int, int] = (1, 1)
    scale: int = 1
    height_fraction: float | None = None
    frames: tuple[int, ...] | None = None
    font: str | None = None
    font_size: int | None = None

    def lettering(self) -> Lettering:
        """The 5x5 typeface at ``scale``, or the TrueType ``font`` at ``font_size``."""
        if self.font is not None and self.height_fraction is not None:
            raise ValueError("`height_fraction` sizes the 5x5 typeface; give `font_size`")
        return as_lettering(self.scale, self.font, self.font_size)


def as_options(
    text: str | None = None,
    position: Sequence[int] = (1, 1),
    scale: int = 1,
    height_fraction: float | None = None,
    frames: Sequence[int] | None = None,
    font: str | None = None,
    font_size: int | None = None,
) -> BurnInOptions:
    """Build :class:`BurnInOptions` from loose arguments (lists from argparse)."""
    return BurnInOptions(
        text=text,
        position=(int(position[0]), int(position[1])),
        scale=int(scale),
        height_fraction=height_fraction,
        frames=None if frames is None else tuple(int(f) for f in frames),
        font=font,
        font_size=None if font_size is None else int(font_size),
    )


@dataclass(frozen=True)
class Placement:
    """A text box that has been checked to fit its image."""

    text: str
    text_source: str
    position: tuple[int, int]
    scale: int
    shape: tuple[int, int]
    lettering: Lettering | None = None  # None: the 5x5 typeface at ``scale``

    def mask(self) -> np.ndarray:
        """The rendered text mask (bounded: the box fits the image); ink coverage in
        ``[0, 1]`` for a TrueType lettering."""
        return (self.lettering or BitmapLettering(self.scale)).render(self.text)


def place_text(
    text: str, text_source: str, options: BurnInOptions, rows: int, cols: int
) -> Placement:
    """Check the characters, scale and fit of ``text`` in a ``rows x cols`` image.

    Raises:
        ValueError: a character outside the typeface, a bad scale or fraction, or a
            box that does not fit (nothing is rendered before these checks pass).
    """
    lettering = options.lettering()
    position = (int(options.position[0]), int(options.position[1]))
    if isinstance(lettering, TrueTypeLettering):
        if not text.isprintable():
            raise ValueError("the text has a character that is not printable; remove it")
        shape = lettering.shape(len(text))
        check_fits(shape, position, (rows, cols))
        return Placement(text, text_source, position, 1, shape, lettering)
    missing = unsupported_characters(text)
    if missing:
        glyph(missing[0])  # raises with the supported set in the message
    scale = (
        scale_for_height(options.height_fraction, rows)
        if options.height_fraction is not None
        else options.scale
    )
    shape = text_shape(len(text), scale)
    check_fits(shape, position, (rows, cols))
    return Placement(text, text_source, position, int(scale), shape)


def check_changes(
    changed: Sequence[int], targets: Sequence[str], values: Sequence[object]
) -> list[int]:
    """Refuse a burn-in that would change no pixel of some target (frame, slice, image).

    Args:
        changed: per target, how many of the text's pixels the burn-in changes
            (:func:`~monai_forget.canary.changed_ink`).
        targets: what each target is called in the message (e.g. ``"frame 0"``).
        values: the value burned into each target, named in the message.

    Returns:
        ``changed`` as a list (the manifest's ``pixels_changed``).

    Raises:
        InjectionError: a target whose text box already holds ``value`` under every ink
            pixel, where the canary would be invisible.
    """
    for count, target, value in zip(changed, targets, values, strict=True):
        if count == 0:
            raise InjectionError(
                f"{target}: every pixel under the text already holds the canary value "
                f"{value} (the value displayed as white), so the burn-in would change "
                "nothing; choose a `position` where the image is not already white (a "
                "constant image can carry no visible text)"
            )
    return [int(c) for c in changed]


def check_frames(frames: Sequence[int] | None, n_frames: int) -> list[int] | None:
    """Sorted distinct frames, or ``None`` for all; refuse indices outside the image.

    Raises:
        InjectionError: an empty selection or an index outside ``0..n_frames-1``.
    """
    if frames is None:
        return None
    bad = [f for f in frames if f not in Interval(0, n_frames - 1, "both", integer=True)]
    if bad or not frames:
        raise InjectionError(
            f"frames {list(frames)} are not valid for a {n_frames}-frame image; "
            f"use 0-based indices below {n_frames}"
        )
    return sorted(set(frames))
