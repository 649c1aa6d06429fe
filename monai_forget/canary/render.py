"""Text and random-feature masks, and stamping a mask onto images.

Geometry (the contract other modules and tests rely on): a string of ``n >= 1``
characters rendered at integer ``scale`` is a boolean mask of shape
``(5 * scale, (6 * n - 1) * scale)`` — 5x5 glyphs, a one-column gap between glyphs and
no trailing gap. Each font pixel becomes a ``scale x scale`` block.
"""

from __future__ import annotations

import string
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from monai_forget.canary.font import (
    GLYPH_ADVANCE,
    GLYPH_GAP,
    GLYPH_HEIGHT,
    GLYPH_WIDTH,
    glyph,
    unsupported_characters,
)
from monai_forget.checks import COUNT, SHARE, Interval, check_in

if TYPE_CHECKING:
    import torch

# torch is not imported here: the DICOM injector uses this module and must stay light.
# A tensor can only exist once torch is imported, so sys.modules tells them apart.
ArrayT = TypeVar("ArrayT", np.ndarray, "torch.Tensor")

# Letters only by default: random names for controls should look like names.
RANDOM_TEXT_ALPHABET = string.ascii_uppercase


def _is_tensor(value: object) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def _check_scale(scale: int) -> int:
    return int(check_in("scale", scale, COUNT))


def text_shape(n_chars: int, scale: int = 1) -> tuple[int, int]:
    """Return the ``(height, width)`` of the mask of ``n_chars`` characters.

    ``height = 5 * scale`` and ``width = (6 * n_chars - 1) * scale``.
    """
    scale = _check_scale(scale)
    if n_chars < 1:
        raise ValueError("text must contain at least one character")
    return GLYPH_HEIGHT * scale, (GLYPH_ADVANCE * n_chars - GLYPH_GAP) * scale


def render_text(text: str, scale: int = 1) -> np.ndarray:
    """Render ``text`` in the 5x5 typeface to a boolean mask.

    Args:
        text: characters from A-Z, a-z, 0-9, space and ``^ , . - '``.
        scale: integer magnification; each font pixel becomes ``scale x scale``.

    Returns:
        Boolean array of shape ``text_shape(len(text), scale)``; ``True`` is ink.

    Raises:
        ValueError: empty text, a character outside the typeface, or a bad scale.
    """
    if not text:
        raise ValueError("text must contain at least one character")
    missing = unsupported_characters(text)
    if missing:
        glyph(missing[0])  # raises with the supported set in the message
    scale = _check_scale(scale)
    mask = np.zeros((GLYPH_HEIGHT, GLYPH_ADVANCE * len(text) - GLYPH_GAP), dtype=bool)
    for i, char in enumerate(text):
        col = i * GLYPH_ADVANCE
        mask[:, col : col + GLYPH_WIDTH] = glyph(char)
    if scale > 1:
        mask = np.kron(mask, np.ones((scale, scale), dtype=bool))
    return mask


def scale_for_height(fraction: float, image_height: int) -> int:
    """Largest integer scale whose text height is at most ``fraction`` of the image.

    Raises:
        ValueError: ``fraction`` is not in (0, 1] or the image is too short for even
            scale 1 at that fraction.
    """
    check_in("height fraction", fraction, SHARE)
    scale = int(fraction * image_height) // GLYPH_HEIGHT
    if scale < 1:
        raise ValueError(
            f"a height of {fraction:g} x {image_height} rows is less than the "
            f"{GLYPH_HEIGHT}-row glyph; use a larger fraction or an explicit scale"
        )
    return scale


def random_text(length: int, rng: np.random.Generator | int | None = None) -> str:
    """Random capital letters, for a random-text control of the same length."""
    check_in("length", length, COUNT)
    rng = np.random.default_rng(rng)
    return "".join(rng.choice(list(RANDOM_TEXT_ALPHABET), size=length))


def random_patch(
    shape: tuple[int, int],
    rng: np.random.Generator | int | None = None,
    n_on: int | None = None,
) -> np.ndarray:
    """Random binary patch, the random-feature control of Hartley & Tsaftaris (2022).

    Args:
        shape: ``(height, width)`` of the patch, e.g. the shape of a text mask.
        rng: generator or seed.
        n_on: exact number of ``True`` pixels (e.g. the ink count of the unique
            feature); default: each pixel independently with probability 0.5.
    """
    height, width = shape
    check_in("patch height", height, COUNT)
    check_in("patch width", width, COUNT)
    rng = np.random.default_rng(rng)
    if n_on is None:
        return rng.random((height, width)) < 0.5
    check_in("n_on", n_on, Interval(0, height * width, "both", integer=True),
             f"the pixels of a {height}x{width} patch")  # fmt: skip
    flat = np.zeros(height * width, dtype=bool)
    flat[rng.choice(height * width, size=n_on, replace=False)] = True
    return flat.reshape(height, width)


class TextDoesNotFitError(ValueError):
    """A text box that would leave its image (:func:`check_fits`)."""


def check_fits(
    mask_shape: tuple[int, int], position: Sequence[int], image_shape: tuple[int, int]
) -> None:
    """Refuse a placement that would leave the image.

    Raises:
        TextDoesNotFitError: the mask at ``position`` does not lie inside ``image_shape``.
    """
    row, col = (int(p) for p in position)
    height, width = mask_shape
    rows, cols = image_shape
    if row < 0 or col < 0 or row + height > rows or col + width > cols:
        raise TextDoesNotFitError(
            f"the text needs {height}x{width} pixels at (row {row}, col {col}) but the "
            f"image is {rows}x{cols}; use a smaller scale, shorter text or another "
            "position"
        )


def _placed(target, mask, position, axes) -> tuple[np.ndarray, tuple[int, int], tuple]:
    """The mask (boolean, or float32 ink coverage), the (row, column) axes made positive
    and the checked box ``(row, col, height, width)`` of ``mask`` at ``position``."""
    mask = np.asarray(mask)
    if mask.dtype != bool:
        mask = mask.astype(np.float32)
        if mask.size and (mask.min() < 0 or mask.max() > 1):
            raise ValueError("an ink coverage mask must hold values in [0, 1]")
    ndim = target.ndim
    axes = (axes[0] % ndim, axes[1] % ndim)
    check_fits(mask.shape, position, (target.shape[axes[0]], target.shape[axes[1]]))
    return mask, axes, (int(position[0]), int(position[1]), *mask.shape)


def paint(
    target: ArrayT,
    mask: np.ndarray,
    position: Sequence[int],
    value: float | np.ndarray | torch.Tensor,
    axes: tuple[int, int] = (-2, -1),
) -> ArrayT:
    """Set the pixels of ``mask`` placed at ``position`` to ``value``, in place.

    ``axes`` are the (row, column) axes of ``target``; the mask is applied to every
    index of the other axes. ``value`` is a scalar or broadcasts against the other
    axes (in their order, e.g. one value per frame). A float mask is ink coverage ``c``
    (anti-aliased text, :mod:`~monai_forget.canary.lettering`): each pixel ``x`` of the
    box becomes ``x + c * (value - x)``, rounded for integer images. Use :func:`stamp`
    for a copy.
    """
    mask, axes, (row, col, height, width) = _placed(target, mask, position, axes)
    if mask.dtype != bool:
        return _blend(target, mask, (row, col, height, width), value, axes)
    if _is_tensor(target):
        import torch

        view = torch.movedim(target, axes, (-2, -1))
        region = view[..., row : row + height, col : col + width]
        sel = torch.as_tensor(mask, device=target.device)
        fill = torch.as_tensor(value, dtype=target.dtype, device=target.device)
        fill = fill.reshape(*fill.shape, 1) if fill.ndim else fill
        region[..., sel] = fill.expand(*region.shape[:-2], int(mask.sum())).clone()
    else:
        view = np.moveaxis(target, axes, (-2, -1))
        region = view[..., row : row + height, col : col + width]
        fill = np.asarray(value)
        fill = fill[..., None] if fill.ndim else fill
        region[..., mask] = fill
    return target


def _blended(region, coverage, value):
    """``region`` (``(..., h, w)``) with ``value`` composited over it at ``coverage``."""
    if _is_tensor(region):
        import torch

        cover = torch.as_tensor(coverage, device=region.device, dtype=torch.float64)
        fill = torch.as_tensor(value, device=region.device, dtype=torch.float64)
        fill = fill.reshape(*fill.shape, 1, 1) if fill.ndim else fill
        out = region.double() + cover * (fill - region.double())
        return out.round() if not region.is_floating_point() else out
    fill = np.asarray(value, dtype=np.float64)
    fill = fill[..., None, None] if fill.ndim else fill
    out = region.astype(np.float64) + coverage * (fill - region)
    return np.rint(out) if not np.issubdtype(region.dtype, np.floating) else out


def _blend(target, coverage, box, value, axes):
    row, col, height, width = box
    if _is_tensor(target):
        import torch

        view = torch.movedim(target, axes, (-2, -1))
    else:
        view = np.moveaxis(target, axes, (-2, -1))
    region = view[..., row : row + height, col : col + width]
    region[...] = _blended(region, coverage, value)
    return target


def changed_ink(
    target: np.ndarray,
    mask: np.ndarray,
    position: Sequence[int],
    value: float | np.ndarray,
    axes: tuple[int, int] = (-2, -1),
) -> int:
    """How many of the mask's pixels :func:`paint` with ``value`` would change.

    A pixel counts once when any of its values along the other axes (colour samples,
    slices) differs from ``value``; ``value`` broadcasts as in :func:`paint`. Zero means
    the text box already holds the value under every ink pixel: the canary would be
    invisible.
    """
    mask, axes, (row, col, height, width) = _placed(target, mask, position, axes)
    view = np.moveaxis(target, axes, (-2, -1))
    if mask.dtype != bool:  # coverage: the pixels the compositing would change
        region = view[..., row : row + height, col : col + width]
        differs = (_blended(region, mask, value) != region) & (mask > 0)
        return int(differs.reshape(-1, height, width).any(axis=0).sum())
    ink = view[..., row : row + height, col : col + width][..., mask]
    fill = np.asarray(value)
    differs = ink != (fill[..., None] if fill.ndim else fill)
    return int(differs.reshape(-1, differs.shape[-1]).any(axis=0).sum())


def stamp(
    images: ArrayT,
    mask: np.ndarray,
    position: Sequence[int],
    value: float | np.ndarray | torch.Tensor,
    axes: tuple[int, int] = (-2, -1),
) -> ArrayT:
    """Return a copy of ``images`` with ``mask`` stamped at ``position`` as ``value``.

    Works on NumPy arrays and torch tensors on any device, e.g. probes ``(N, C, H, W)``
    for the unique-feature memorisation score (Hartley & Tsaftaris 2022): the feature
    sits at a known place with a known value. The input is never modified.

    Args:
        images: array whose ``axes`` are (rows, columns).
        mask: boolean ``(height, width)`` feature, e.g. from :func:`render_text`.
        position: ``(row, col)`` of the mask's top-left pixel.
        value: pixel value inside the mask (scalar or broadcastable, see :func:`paint`).
        axes: the (row, column) axes of ``images``.

    Raises:
        ValueError: the mask does not fit inside the image at ``position``.
    """
    out = images.clone() if _is_tensor(images) else np.array(images, copy=True)
    return paint(out, mask, position, value, axes)
