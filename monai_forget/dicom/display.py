"""The stored value that a viewer displays as white, per frame.

Monochrome images go through the modality transform (rescale slope/intercept or a
modality LUT) and the VOI transform (window centre/width or a VOI LUT) before display;
MONOCHROME1 then inverts. With a VOI transform, the canary value is the *least extreme*
stored value that displays at full white (the smallest for MONOCHROME2, the largest for
MONOCHROME1), found by evaluating pydicom's own transforms over the whole stored range.
Without one, viewers window to the frame's own range, so white is the frame maximum
(MONOCHROME2) or minimum (MONOCHROME1). Colour images use full-range white: RGB
``(max, max, max)``; YBR_FULL ``(max, mid, mid)``.
"""

from __future__ import annotations

import numpy as np
from pydicom.dataset import Dataset
from pydicom.pixels import apply_modality_lut, apply_voi_lut

# Elements that decide how a monochrome stored value is displayed.
_DISPLAY_KEYWORDS = (
    "RescaleSlope",
    "RescaleIntercept",
    "RescaleType",
    "ModalityLUTSequence",
    "WindowCenter",
    "WindowWidth",
    "VOILUTFunction",
    "VOILUTSequence",
)
_VOI_KEYWORDS = ("WindowCenter", "WindowWidth", "VOILUTSequence")
# Exhaustive evaluation up to 16 stored bits (65 536 values); binary search above.
_MAX_EXHAUSTIVE_BITS = 16


def stored_range(bits_stored: int, signed: bool) -> tuple[int, int]:
    """Smallest and largest stored value for ``bits_stored`` bits."""
    if signed:
        return -(2 ** (bits_stored - 1)), 2 ** (bits_stored - 1) - 1
    return 0, 2**bits_stored - 1


def colour_white(photometric: str, bits_stored: int) -> tuple[int, int, int]:
    """Full-range white in RGB or YBR_FULL samples."""
    top = 2**bits_stored - 1
    if photometric == "RGB":
        return top, top, top
    if photometric == "YBR_FULL":
        mid = 2 ** (bits_stored - 1)
        return top, mid, mid
    raise ValueError(f"no colour white defined for {photometric}")


def frame_display_dataset(ds: Dataset, frame: int) -> Dataset:
    """Collect the display elements that apply to ``frame`` into a small dataset.

    Top-level elements first, then the shared and per-frame functional groups of
    enhanced multi-frame objects (pixel value transformation and frame VOI LUT).
    """
    out = Dataset()
    for keyword in ("PhotometricInterpretation", "BitsStored", "PixelRepresentation"):
        setattr(out, keyword, ds[keyword].value)
    sources = [ds]
    for seq_keyword, index in (
        ("SharedFunctionalGroupsSequence", 0),
        ("PerFrameFunctionalGroupsSequence", frame),
    ):
        seq = ds.get(seq_keyword)
        if seq and index < len(seq):
            for group in ("PixelValueTransformationSequence", "FrameVOILUTSequence"):
                if seq[index].get(group):
                    sources.append(seq[index][group][0])
    for source in sources:
        for keyword in _DISPLAY_KEYWORDS:
            if keyword in source:
                out[keyword] = source[keyword]
    return out


def has_voi(display: Dataset) -> bool:
    """True when the dataset defines a VOI window or VOI LUT."""
    return any(display.get(k) not in (None, "") for k in _VOI_KEYWORDS)


def _displayed(values: np.ndarray, display: Dataset) -> np.ndarray:
    return apply_voi_lut(apply_modality_lut(values, display), display)


def _display_key(display: Dataset) -> tuple | None:
    """Hashable identity of the display settings, or None when they hold LUT tables."""
    if "VOILUTSequence" in display or "ModalityLUTSequence" in display:
        return None  # tables are not cheaply hashable; evaluate them every time
    keywords = (*_DISPLAY_KEYWORDS, "PhotometricInterpretation")
    settings = tuple((k, str(display[k].value)) for k in keywords if k in display)
    return (*settings, display.BitsStored, display.PixelRepresentation)


def _voi_white(display: Dataset) -> int:
    low, high = stored_range(display.BitsStored, bool(display.PixelRepresentation))
    inverted = display.PhotometricInterpretation == "MONOCHROME1"
    if display.BitsStored <= _MAX_EXHAUSTIVE_BITS:
        values = np.arange(low, high + 1, dtype=np.int64)
        shown = _displayed(values, display)
        if inverted:
            return int(values[shown <= shown.min()][-1])
        return int(values[shown >= shown.max()][0])
    # Wider data: the display transforms are monotonic, so bisect for the edge.
    target = _displayed(np.array([low, high], dtype=np.int64), display)[0 if inverted else 1]
    lo, hi = low, high
    while lo < hi:
        if inverted:
            mid = (lo + hi + 1) // 2
            ok = _displayed(np.array([mid]), display)[0] <= target
            lo, hi = (mid, hi) if ok else (lo, mid - 1)
        else:
            mid = (lo + hi) // 2
            ok = _displayed(np.array([mid]), display)[0] >= target
            lo, hi = (lo, mid) if ok else (mid + 1, hi)
    return int(lo)


def monochrome_white(display: Dataset, frame_pixels: np.ndarray) -> int:
    """Stored value displayed as white for one monochrome frame (see module docs).

    Args:
        display: the frame's display elements (see :func:`frame_display_dataset`).
        frame_pixels: the frame's stored values, used when there is no VOI transform.
    """
    if not has_voi(display):
        inverted = display.PhotometricInterpretation == "MONOCHROME1"
        return int(frame_pixels.min() if inverted else frame_pixels.max())
    key = _display_key(display)
    if key is None:
        return _voi_white(display)
    if key not in _WHITE_CACHE:
        if len(_WHITE_CACHE) > 1024:
            _WHITE_CACHE.clear()
        _WHITE_CACHE[key] = _voi_white(display)
    return _WHITE_CACHE[key]


# Folders of slices share display settings: evaluate each setting once per process.
_WHITE_CACHE: dict[tuple, int] = {}
_FRAME_GROUPS = ("SharedFunctionalGroupsSequence", "PerFrameFunctionalGroupsSequence")


def frame_white(ds: Dataset, frame: int, frame_pixels: np.ndarray) -> int:
    """Stored value displayed as white for ``frame`` of the monochrome dataset ``ds``.

    Without functional groups the top-level elements are the frame's display
    elements, so ``ds`` is used directly (building the small per-frame dataset costs
    more than a cached lookup, which matters for folders of thousands of slices).
    """
    if any(k in ds for k in _FRAME_GROUPS):
        return monochrome_white(frame_display_dataset(ds, frame), frame_pixels)
    return monochrome_white(ds, frame_pixels)
