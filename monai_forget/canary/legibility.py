"""How legible a burned-in text is where the model sees it: at the model input.

A canary exists for a model, and the model sees an image only after its preprocessing:
a 5-pixel name on a 2048-pixel radiograph area-resized to 28 pixels becomes a grey
smudge a fraction of a pixel high. Such a canary cannot be memorised as text, and a
leak scan that finds nothing for it says nothing. So a text is measured where the model
sees it, from the loaded acquisition image without and with the text (both read by the
model's own loader) and the model's preprocessing:

- ``cap_height``: the height of a capital letter at the model input, in model pixels
  (the lettering's capital height times the smaller of the two axes' resize factors).
  Legible needs at least :data:`MIN_CAP_HEIGHT`: one model pixel per pixel of the 5x5
  typeface's glyphs, the smallest size a bitmap font can draw a capital at.
- ``correlation``: Pearson's r between the text's change at the model input and the same
  text drawn directly at the model's size (its ink, exactly area-averaged onto the model
  grid: what an anti-aliased renderer would draw there), over the model pixels the
  text's box reaches (strokes and the gaps between them). A resize that samples instead
  of averaging, a crop, or a per-image normalisation that scrambles the strokes lowers
  it. Legible needs at least :data:`MIN_CORRELATION`.
- ``contrast``: the median change over the model pixels at least half covered by that
  ink, as a share of the input's range (what the preprocessing makes of the image's own
  black-to-white). Legible needs at least :data:`MIN_CONTRAST`.

These are this project's measures and thresholds (the papers define none): chosen so that
a text is called legible when each stroke of a capital covers at least a model pixel at
a tenth of the range, and kept as constants so the detection benchmark can relate them
to what a scan finds (``benchmarks/leak_scan_detection_curve.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from monai_forget.canary.font import GLYPH_ADVANCE, GLYPH_GAP, GLYPH_HEIGHT

__all__ = [
    "MIN_CAP_HEIGHT",
    "MIN_CONTRAST",
    "MIN_CORRELATION",
    "Legibility",
    "Suggestion",
    "area_matrix",
    "measure_legibility",
    "smallest_legible",
]

#: A capital letter at the model input must be at least this many model pixels high.
MIN_CAP_HEIGHT = float(GLYPH_HEIGHT)
#: The text's change must follow its shape drawn at the model's size at least this well.
MIN_CORRELATION = 0.8
#: The median change over the text's ink, as a share of the input's range.
MIN_CONTRAST = 0.1


def area_matrix(size_in: int, size_out: int) -> np.ndarray:
    """``(size_out, size_in)`` weights of exact area averaging along one axis: output
    pixel i is the mean of the input over ``[i, i + 1) * size_in / size_out``, partial
    pixels weighted by their overlap (rows sum to 1)."""
    step = size_in / size_out
    lo = np.arange(size_out)[:, None] * step
    left = np.arange(size_in)[None, :]
    overlap = np.clip(np.minimum(lo + step, left + 1) - np.maximum(lo, left), 0.0, None)
    return overlap / step


@dataclass(frozen=True)
class Legibility:
    """One text at the model input (module docstring).

    Attributes:
        cap_height: a capital's height in model pixels.
        correlation: Pearson's r of the text's change and its shape drawn at the
            model's size.
        contrast: median change over the ink at the model input, share of the range.
        largest: the largest change at the model input, share of the range.
        input_shape: the model input's shape.
        factor: the smaller of the two axes' resize factors (model / acquisition pixels).
    """

    cap_height: float
    correlation: float
    contrast: float
    largest: float
    input_shape: tuple[int, ...]
    factor: float

    @property
    def legible(self) -> bool:
        """Whether every measure reaches its threshold."""
        return not self.shortfalls()

    def shortfalls(self) -> list[str]:
        """What falls short, in words (empty when legible)."""
        out = []
        if self.cap_height < MIN_CAP_HEIGHT:
            out.append(
                f"a capital is {self.cap_height:.2g} model pixels high (needs "
                f">= {MIN_CAP_HEIGHT:g})"
            )
        if self.correlation < MIN_CORRELATION:
            out.append(
                f"its shape at the model input correlates {self.correlation:.2f} with the "
                f"text drawn at that size (needs >= {MIN_CORRELATION:g})"
            )
        if self.contrast < MIN_CONTRAST:
            out.append(
                f"its contrast is {self.contrast:.3f} of the input range (needs "
                f">= {MIN_CONTRAST:g})"
            )
        return out

    def describe(self) -> str:
        """One line: the measures and the verdict."""
        verdict = "legible" if self.legible else "NOT legible: " + "; ".join(self.shortfalls())
        return (
            f"at the model input {self.input_shape}: capital {self.cap_height:.1f} px high, "
            f"shape r {self.correlation:.2f}, contrast {self.contrast:.3f}, largest change "
            f"{self.largest:.3f} of the range: {verdict}"
        )

    def to_dict(self) -> dict:
        """The manifest's and reports' keys."""
        row = asdict(self)
        row["input_shape"] = list(self.input_shape)
        return {"legibility_" + k: v for k, v in row.items()} | {"legible": self.legible}


def _as_array(image: object) -> np.ndarray:
    if hasattr(image, "detach"):
        image = image.detach().cpu().numpy()
    return np.asarray(image, dtype=np.float64)


def measure_legibility(
    preprocessing: object,
    before: np.ndarray,
    after: np.ndarray,
    cap_height: float,
) -> Legibility:
    """How legible a text is at the model input.

    Args:
        preprocessing: the model's preprocessing after loading: a callable of a
            channel-first ``(C, H, W)`` acquisition image giving the model input.
        before, after: the loaded acquisition image without and with the text (as the
            model's loader reads the original and the injector's file).
        cap_height: a capital's height on the acquisition grid (the lettering's).

    Raises:
        ValueError: images of different shapes, or not channel-first 2-D.
    """
    before, after = _as_array(before), _as_array(after)
    if before.shape != after.shape or before.ndim != 3:
        raise ValueError(
            f"before and after must be one (C, H, W) image each, got {before.shape} and "
            f"{after.shape}"
        )
    clean, burned = _as_array(preprocessing(before)), _as_array(preprocessing(after))
    low = _as_array(preprocessing(np.full_like(before, before.min())))
    high = _as_array(preprocessing(np.full_like(before, max(before.max(), after.max()))))
    span = max(float(high.max() - low.min()), 1e-12)
    change = np.abs(burned - clean).mean(axis=0) / span  # channels alike (grey inputs)
    (rows_in, cols_in), (rows_out, cols_out) = before.shape[-2:], clean.shape[-2:]
    ink = (after != before).any(axis=0).astype(np.float64)
    to_rows, to_cols = area_matrix(rows_in, rows_out), area_matrix(cols_in, cols_out)
    drawn = to_rows @ ink @ to_cols.T
    factor = min(rows_out / rows_in, cols_out / cols_in)
    # the model pixels the text's box reaches: strokes and the gaps between them
    box = np.zeros_like(ink)
    if ink.any():
        rows, cols = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
        box[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1] = 1.0
    reached = (to_rows @ box @ to_cols.T) > 0
    correlation = 0.0
    if reached.sum() >= 3 and np.ptp(change[reached]) > 0 and np.ptp(drawn[reached]) > 0:
        correlation = float(np.corrcoef(change[reached], drawn[reached])[0, 1])
    covered = drawn >= 0.5
    contrast = float(np.median(change[covered])) if covered.any() else 0.0
    return Legibility(
        cap_height=float(cap_height) * factor,
        correlation=correlation,
        contrast=contrast,
        largest=float(change.max()),
        input_shape=tuple(int(s) for s in clean.shape),
        factor=float(factor),
    )


@dataclass(frozen=True)
class Suggestion:
    """The smallest lettering that reaches :data:`MIN_CAP_HEIGHT` at the model input,
    and a position where it fits (``None``: no position: the text is too long)."""

    scale: int | None
    font_size: int | None
    position: tuple[int, int] | None
    width: int
    max_characters: int

    def describe(self) -> str:
        size = (
            f"`scale` {self.scale}" if self.scale is not None else f"`font_size` {self.font_size}"
        )
        if self.position is None:
            return (
                f"none fits: at {size}, the smallest that could be legible, the text is "
                f"{self.width} pixels wide; a text of at most {self.max_characters} "
                "characters would fit (`text`)"
            )
        row, col = self.position
        return f"{size} `position` {row} {col}"


def smallest_legible(
    factor: float,
    grid: Sequence[int],
    n_chars: int,
    position: Sequence[int],
    font: str | None = None,
    font_size: int | None = None,
) -> Suggestion:
    """The smallest 5x5 scale (or TrueType size, with ``font``) whose capitals reach
    :data:`MIN_CAP_HEIGHT` model pixels at resize ``factor``, and the given position
    moved just enough for the text to fit the ``grid`` (rows, cols). Contrast and shape
    depend on the image under the text: check the suggestion with ``measure_legibility``.
    """
    from monai_forget.canary.lettering import TrueTypeLettering

    rows, cols = (int(g) for g in grid)
    needed = MIN_CAP_HEIGHT / max(factor, 1e-12)  # acquisition pixels a capital needs
    if font is None:
        scale = max(1, math.ceil(needed / GLYPH_HEIGHT - 1e-9))
        height, width = GLYPH_HEIGHT * scale, (GLYPH_ADVANCE * n_chars - GLYPH_GAP) * scale
        per_char, size = GLYPH_ADVANCE * scale, None
    else:
        size = max(4, int(font_size or 12))
        while TrueTypeLettering(font, size).cap_height < needed and size < 4096:
            size = max(
                size + 1, math.ceil(size * needed / TrueTypeLettering(font, size).cap_height)
            )
        height, width = TrueTypeLettering(font, size).shape(n_chars)
        per_char, scale = max(1, width // max(n_chars, 1)), None
    max_chars = max(0, (cols + GLYPH_GAP * (font is None) * (scale or 0)) // per_char)
    if height > rows or width > cols:
        return Suggestion(scale, size, None, width, int(max_chars))
    row = min(max(0, int(position[0])), rows - height)
    col = min(max(0, int(position[1])), cols - width)
    return Suggestion(scale, size, (row, col), width, int(max_chars))
