"""Known-typeface text and random features, shared by the DICOM injector and the
unique-feature memorisation score (Hartley & Tsaftaris 2022).

The MONAI transforms (``BurnInText`` and its dictionary forms) are loaded on first use,
so importing the typeface and renderer does not import torch or MONAI.
"""

from __future__ import annotations

import importlib

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
    changed_ink,
    check_fits,
    paint,
    random_patch,
    random_text,
    render_text,
    scale_for_height,
    stamp,
    text_shape,
)

_TRANSFORMS = ("BurnInText", "BurnInTextD", "BurnInTextDict", "BurnInTextd")

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
    "changed_ink",
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


def __getattr__(name: str) -> object:
    # PEP 562: the transforms module imports MONAI, so load it only when asked for.
    if name in _TRANSFORMS:
        return getattr(importlib.import_module("monai_forget.canary.transforms"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
