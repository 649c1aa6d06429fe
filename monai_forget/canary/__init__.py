"""Known-typeface text and random features, shared by the DICOM injector and the
unique-feature memorisation score (Hartley & Tsaftaris 2022)."""

from monai_forget.canary.font import (
    CHARACTERS,
    GLYPH_ADVANCE,
    GLYPH_GAP,
    GLYPH_HEIGHT,
    GLYPH_WIDTH,
    TYPEFACE,
    glyph,
    unsupported_characters,
)
from monai_forget.canary.render import (
    check_fits,
    paint,
    random_patch,
    random_text,
    render_text,
    scale_for_height,
    stamp,
    text_shape,
)
from monai_forget.canary.transforms import BurnInText, BurnInTextD, BurnInTextd, BurnInTextDict

__all__ = [
    "CHARACTERS",
    "GLYPH_ADVANCE",
    "GLYPH_GAP",
    "GLYPH_HEIGHT",
    "GLYPH_WIDTH",
    "TYPEFACE",
    "BurnInText",
    "BurnInTextD",
    "BurnInTextDict",
    "BurnInTextd",
    "check_fits",
    "glyph",
    "paint",
    "random_patch",
    "random_text",
    "render_text",
    "scale_for_height",
    "stamp",
    "text_shape",
    "unsupported_characters",
]
