"""How a text is lettered: the project's 5x5 bitmap typeface, or a TrueType font.

A scanner or viewer burns annotations in its own typeface, anti-aliased; the canary
injector and the leak scan must draw a text exactly alike, so both take one lettering:

- :class:`BitmapLettering`: the 5x5 typeface at an integer scale; a boolean mask.
- :class:`TrueTypeLettering`: any TrueType/OpenType font file (the DejaVu fonts that
  matplotlib bundles by name: ``DejaVuSans``, ``DejaVuSansMono``, ``DejaVuSerif``, ...)
  at a size in pixels, rendered by Pillow's FreeType with anti-aliasing, as a viewer draws
  text; a float mask of ink coverage in ``[0, 1]``.

The box of a TrueType text depends on its length only, so the texts of one length (a
name and its decoys) share one box: ``ascent + descent`` rows of the font at that size,
and ``ceil(n * widest advance)`` columns, the widest advance over A-Z, a-z, 0-9 and
space, plus a margin on each side for glyphs that reach left of the pen (a J's hook);
the text is drawn from the box's top-left corner after that margin (Pillow's ``"la"``
anchor: left, ascender). A coverage ``c`` burns a pixel ``x`` to ``x + c * (value - x)``
(alpha compositing, :func:`~monai_forget.canary.render.paint`).
"""

from __future__ import annotations

import functools
import math
import string
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from monai_forget.canary.font import TYPEFACE
from monai_forget.canary.render import render_text, text_shape

__all__ = [
    "DEFAULT_FONT_SIZE",
    "BitmapLettering",
    "Lettering",
    "TrueTypeLettering",
    "as_lettering",
]

#: A TrueType font's size when none is given (pixels per em).
DEFAULT_FONT_SIZE = 12
#: Characters whose widest advance sets a TrueType box's width per character.
_WIDTH_CHARACTERS = string.ascii_letters + string.digits + " "


@dataclass(frozen=True)
class BitmapLettering:
    """The 5x5 typeface at an integer ``scale`` (:func:`~monai_forget.canary.render_text`)."""

    scale: int = 1

    @property
    def name(self) -> str:
        return TYPEFACE

    @property
    def cap_height(self) -> int:
        """A capital letter's height in pixels (every glyph is 5 rows at scale 1)."""
        return text_shape(1, self.scale)[0]

    def shape(self, n_chars: int) -> tuple[int, int]:
        return text_shape(n_chars, self.scale)

    def render(self, text: str) -> np.ndarray:
        return render_text(text, self.scale)

    def describe(self) -> str:
        return f"{TYPEFACE} at scale {self.scale}"

    def record(self) -> dict:
        """What a manifest or report records of the lettering."""
        return {"typeface": TYPEFACE, "scale": self.scale}


@functools.lru_cache(maxsize=32)
def font_path(font: str) -> Path:
    """The file of ``font``: a path to a font file, or the name of a font matplotlib
    bundles (e.g. ``DejaVuSans``, ``DejaVuSansMono``).

    Raises:
        FileNotFoundError: neither a file nor a bundled font.
    """
    path = Path(font)
    if path.suffix.lower() in (".ttf", ".otf") and path.is_file():
        return path
    import matplotlib

    bundled = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    candidate = bundled / f"{font}.ttf"
    if candidate.is_file():
        return candidate
    names = sorted(p.stem for p in bundled.glob("DejaVu*.ttf"))
    raise FileNotFoundError(
        f"font {font!r} is neither a .ttf/.otf file nor a bundled font; give a font file or "
        f"one of {', '.join(names)}"
    )


@functools.lru_cache(maxsize=16)
def _face(path: str, size: int):
    from PIL import ImageFont

    return ImageFont.truetype(path, size)


@functools.lru_cache(maxsize=16)
def _metrics(path: str, size: int) -> tuple[int, float, int]:
    """Rows of the box, the widest advance, and the columns glyphs may reach left of the
    pen (e.g. a J's hook), over the characters that size the box."""
    face = _face(path, size)
    ascent, descent = face.getmetrics()
    widest = max(face.getlength(c) for c in _WIDTH_CHARACTERS)
    pad = max(0, -min(face.getbbox(c, anchor="la")[0] for c in _WIDTH_CHARACTERS))
    return ascent + descent, widest, pad


@dataclass(frozen=True)
class TrueTypeLettering:
    """A TrueType font at ``size`` pixels per em, anti-aliased (module docstring).

    Raises:
        ValueError: a size below 4 pixels.
        FileNotFoundError: an unknown font.
    """

    font: str = "DejaVuSans"
    size: int = DEFAULT_FONT_SIZE

    def __post_init__(self) -> None:
        if isinstance(self.size, bool) or int(self.size) != self.size or self.size < 4:
            raise ValueError(f"font size must be an integer of at least 4 pixels, got {self.size}")
        font_path(self.font)  # refuse an unknown font now, not at the first text

    @property
    def name(self) -> str:
        return Path(self.font).stem

    def _pil(self):
        return _face(str(font_path(self.font)), int(self.size))

    def _metrics(self) -> tuple[int, float, int]:
        return _metrics(str(font_path(self.font)), int(self.size))

    @property
    def cap_height(self) -> int:
        """A capital letter's height in pixels: the ink of ``H`` above the baseline."""
        top, bottom = self._pil().getbbox("H", anchor="ls")[1::2]
        return int(bottom - top)

    def shape(self, n_chars: int) -> tuple[int, int]:
        if n_chars < 1:
            raise ValueError("text must contain at least one character")
        rows, widest, pad = self._metrics()
        return rows, math.ceil(n_chars * widest) + 2 * pad

    def render(self, text: str) -> np.ndarray:
        """Ink coverage ``(rows, cols)`` float32 in ``[0, 1]`` of ``text`` in its box.

        Raises:
            ValueError: an empty or unprintable text, or ink outside the box (a character
                wider or taller than the letters and digits that size the box).
        """
        from PIL import Image, ImageDraw

        if not text or not text.isprintable():
            raise ValueError("text must be at least one printable character")
        rows, cols = self.shape(len(text))
        margin = 2 * int(self.size)  # room to see ink that would leave the box
        canvas = Image.new("L", (cols + 2 * margin, rows + 2 * margin), 0)
        start = (margin + self._metrics()[2], margin)
        ImageDraw.Draw(canvas).text(start, text, fill=255, font=self._pil(), anchor="la")
        drawn = np.asarray(canvas, dtype=np.float32) / 255.0
        coverage = drawn[margin : margin + rows, margin : margin + cols]
        if not coverage.any():
            raise ValueError(f"the font {self.name} draws no ink for the text; use another font")
        if drawn.sum() > coverage.sum() + 1e-3:
            raise ValueError(
                f"a character of the text leaves its box in {self.name} (the box fits "
                "letters, digits and spaces); transliterate the text"
            )
        return coverage

    def describe(self) -> str:
        return f"{self.name} {self.size} px, anti-aliased"

    def record(self) -> dict:
        return {"typeface": self.name, "font": self.font, "font_size": int(self.size)}


Lettering = BitmapLettering | TrueTypeLettering


def as_lettering(
    scale_or_lettering: int | Lettering, font: str | None = None, font_size: int | None = None
) -> Lettering:
    """A lettering (returned as is), the TrueType ``font`` at ``font_size`` (default
    :data:`DEFAULT_FONT_SIZE`), or the 5x5 typeface at a scale (an integer)."""
    if isinstance(scale_or_lettering, (BitmapLettering, TrueTypeLettering)):
        return scale_or_lettering
    if font is not None:
        return TrueTypeLettering(font, DEFAULT_FONT_SIZE if font_size is None else font_size)
    if font_size is not None:
        raise ValueError("a font size needs a font (`font`)")
    return BitmapLettering(int(scale_or_lettering))
