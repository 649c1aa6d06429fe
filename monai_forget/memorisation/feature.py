"""The unique feature z_u, its random controls z_r, and putting them on images.

Hartley & Tsaftaris, "Unintended memorisation of unique features in neural networks"
(2022), Sec. 2.1: a unique feature is a small pattern (a letter, a patient's name) that
occurs in exactly one training image, at a known place, in a known typeface. The
memorisation score (Sec. 2.3) compares the model's response to probes carrying z_u with
its response to the same probes carrying a random feature z_r *of the same size*.

The rendering and stamping are those of :mod:`monai_forget.canary` (the typeface shared
with the DICOM injector); this module adds the per-probe random controls and the checks
that a feature fits the probes.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

import numpy as np
import torch

from monai_forget.canary import check_fits, paint, random_text, render_text, stamp
from monai_forget.canary.font import TYPEFACE
from monai_forget.checks import check_choice

__all__ = [
    "RandomFeature",
    "UniqueFeature",
    "as_probe_images",
    "inject_feature",
    "stamp_each",
    "warn_if_in_distribution",
]

ArrayT = TypeVar("ArrayT", np.ndarray, torch.Tensor)

#: How the random control z_r is drawn: ``"patch"``, the paper's control: the feature's
#: whole block overwritten with random binary pixels (each on with probability 0.5);
#: ``"ink"``: a random mask with exactly z_u's ink count painted like z_u (ours);
#: ``"text"``: random capital letters of the same length in the same typeface (ours).
RandomFeature = Literal["patch", "ink", "text"]
_RANDOM_KINDS = ("patch", "ink", "text")


@dataclass(frozen=True)
class UniqueFeature:
    """A known feature z_u: a boolean mask placed at ``position`` with pixel ``value``.

    Args:
        mask: boolean ``(height, width)`` pattern; ``True`` pixels are set to ``value``.
        position: ``(row, col)`` of the mask's top-left pixel in every image.
        value: pixel value of the feature, or ``"max"`` for each image's own maximum
            (the displayed white of an auto-windowed image).
        text: the text the mask renders, when it is text (enables ``"text"`` controls).
        scale: the glyph scale of ``text``.

    Raises:
        ValueError: an empty mask, a mask without ink, or a bad value.
    """

    mask: np.ndarray
    position: tuple[int, int] = (1, 1)
    value: float | str = 1.0
    text: str | None = None
    scale: int = 1
    typeface: str | None = field(default=None)

    def __post_init__(self) -> None:
        mask = np.array(self.mask, dtype=bool, copy=True)
        if mask.ndim != 2 or mask.size == 0:
            raise ValueError(f"the feature mask must be a non-empty 2-D array, got {mask.shape}")
        if not mask.any():
            raise ValueError("the feature mask has no ink (no True pixel); nothing would change")
        if isinstance(self.value, str):
            if self.value != "max":
                raise ValueError(f"value must be a number or 'max', got {self.value!r}")
        elif not np.isfinite(float(self.value)):
            raise ValueError(f"value must be finite, got {self.value!r}")
        position = tuple(int(p) for p in self.position)
        if len(position) != 2:
            raise ValueError(f"position must be (row, col), got {self.position!r}")
        mask.flags.writeable = False
        object.__setattr__(self, "mask", mask)
        object.__setattr__(self, "position", position)
        if self.text is not None and self.typeface is None:
            object.__setattr__(self, "typeface", TYPEFACE)

    @classmethod
    def from_text(
        cls,
        text: str,
        position: Sequence[int] = (1, 1),
        scale: int = 1,
        value: float | str = 1.0,
    ) -> UniqueFeature:
        """``text`` in the project's 5x5 typeface (:func:`~monai_forget.canary.render_text`).

        The default, one letter at scale 1 one pixel from the top-left corner, is the
        unique feature of Hartley & Tsaftaris (2022): a 5x5 letter in a corner.
        """
        return cls(render_text(text, scale), tuple(position), value, text, scale)

    @property
    def shape(self) -> tuple[int, int]:
        """``(height, width)`` of the mask."""
        return self.mask.shape  # type: ignore[return-value]

    @property
    def ink(self) -> int:
        """Number of feature pixels (``True`` in the mask)."""
        return int(self.mask.sum())

    def describe(self) -> str:
        """A short description, e.g. ``text of 4 characters (5x23 at (1, 1))``; never
        the text (a patient's name)."""
        what = f"text of {len(self.text)} characters" if self.text is not None else "mask"
        h, w = self.shape
        return f"{what} ({h}x{w} at {self.position}, value {self.value})"

    def to_dict(self) -> dict:
        """JSON-friendly description (the mask as rows of 0/1 strings)."""
        return {
            "text": self.text,
            "typeface": self.typeface,
            "scale": self.scale,
            "position": list(self.position),
            "value": self.value,
            "shape": list(self.shape),
            "mask": ["".join("1" if v else "0" for v in row) for row in self.mask],
        }

    def check_fits(self, image_shape: Sequence[int]) -> None:
        """Refuse images the feature does not fit (``image_shape`` is ``(..., H, W)``).

        Raises:
            ValueError: naming the feature, the image size and the fix.
        """
        rows, cols = int(image_shape[-2]), int(image_shape[-1])
        try:
            check_fits(self.shape, self.position, (rows, cols))
        except ValueError as err:
            raise ValueError(f"the feature {self.describe()} does not fit: {err}") from None

    def _values(self, images: ArrayT) -> float | ArrayT:
        """The pixel value per image: a scalar, or ``(N, 1)`` maxima for ``"max"``."""
        if self.value != "max":
            return float(self.value)
        flat = images.reshape(images.shape[0], -1)
        if isinstance(flat, torch.Tensor):
            return flat.amax(dim=1, keepdim=True)
        return flat.max(axis=1, keepdims=True)

    def apply(self, images: ArrayT, out: np.ndarray | None = None) -> ArrayT:
        """A copy of ``(N, C, H, W)`` ``images`` carrying z_u (the inputs are not modified).

        Args:
            images: the probes.
            out: optional numpy array of the same shape to write the result into (saves a
                copy when stacking probe sets); it is returned.
        """
        _check_batch(images)
        self.check_fits(images.shape)
        values = self._values(images)
        if out is not None:
            out[...] = images
            return paint(out, self.mask, self.position, values)
        # A writable copy of the (read-only) mask: torch warns on read-only numpy arrays.
        return stamp(images, self.mask.copy(), self.position, values)

    def random_masks(
        self, n: int, rng: np.random.Generator | int | None = None, kind: RandomFeature = "patch"
    ) -> np.ndarray:
        """``n`` fresh random features z_r of the same size as z_u, ``(n, height, width)``.

        Args:
            n: number of masks (one per probe: "each probe with a fresh random feature").
            rng: generator or seed.
            kind: ``"patch"`` (the paper's control, Sec. 2.1: z_r ~ U of z_u's size):
                every pixel of the block on with probability 0.5; :meth:`apply_random`
                overwrites the whole block with it. ``"ink"``: exactly as many ink
                pixels as z_u, painted like z_u, so both arms change the same number of
                pixels (ours). ``"text"``: random capital letters of the same length,
                rendered in the same typeface and scale (needs a text feature; ours).
        """
        check_choice("random feature kind", kind, _RANDOM_KINDS)
        rng = np.random.default_rng(rng)
        h, w = self.shape
        if kind == "patch":
            return rng.random((n, h, w)) < 0.5
        if kind == "text":
            if self.text is None:
                raise ValueError(
                    "random text controls need a text feature; build it with "
                    "UniqueFeature.from_text or use kind='patch'"
                )
            return np.stack(
                [render_text(random_text(len(self.text), rng), self.scale) for _ in range(n)]
            ).reshape(n, h, w)
        # Exactly `ink` pixels on, uniformly: the `ink` smallest of n*h*w uniform keys per row.
        keys = rng.random((n, h * w))
        ranks = np.argsort(np.argsort(keys, axis=1), axis=1)
        return (ranks < self.ink).reshape(n, h, w)

    def apply_random(
        self,
        images: ArrayT,
        masks: np.ndarray,
        out: np.ndarray | None = None,
        kind: RandomFeature = "patch",
    ) -> ArrayT:
        """A copy of ``images`` with probe ``i`` carrying the random feature ``masks[i]``.

        ``kind="patch"`` overwrites the whole block (mask pixels get the feature's value,
        the others 0, as the paper's code does); the other kinds paint the mask's
        pixels only. ``out``: as in :meth:`apply`.
        """
        _check_batch(images)
        self.check_fits(images.shape)
        background = 0.0 if kind == "patch" else None
        return stamp_each(
            images, masks, self.position, self._values(images), out=out, background=background
        )


def _check_batch(images: np.ndarray | torch.Tensor) -> None:
    if images.ndim != 4:
        raise ValueError(
            f"probe images must have shape (N, C, H, W), got {tuple(images.shape)}; add the "
            "batch and channel axes (e.g. images[:, None] for (N, H, W))"
        )


def stamp_each(
    images: ArrayT,
    masks: np.ndarray,
    position: Sequence[int],
    value: float | np.ndarray | torch.Tensor,
    out: np.ndarray | None = None,
    background: float | None = None,
) -> ArrayT:
    """A copy of ``(N, C, H, W)`` ``images`` with mask ``masks[i]`` stamped on image ``i``.

    The per-probe counterpart of :func:`monai_forget.canary.stamp` (one mask for all),
    vectorised with ``where`` over the feature's region. ``value`` is a scalar or one
    value per image, shape ``(N, 1)``. With ``background`` the whole block is
    overwritten (pixels outside the mask get ``background``). With a numpy ``out`` of
    the same shape the result is written there (and returned) instead of into a new
    array.

    Raises:
        ValueError: ``masks`` is not ``(N, h, w)`` or does not fit at ``position``.
    """
    masks = np.asarray(masks, dtype=bool)
    n = images.shape[0]
    if masks.ndim != 3 or masks.shape[0] != n:
        raise ValueError(f"masks must be (N={n}, h, w), got shape {masks.shape}")
    h, w = masks.shape[1:]
    check_fits((h, w), position, images.shape[-2:])
    row, col = (int(p) for p in position)
    if isinstance(images, torch.Tensor):
        out = images.clone()
        region = out[..., row : row + h, col : col + w]
        sel = torch.as_tensor(masks, device=images.device)[:, None]
        fill = torch.as_tensor(value, dtype=images.dtype, device=images.device)
        fill = fill.reshape(n, 1, 1, 1) if fill.ndim else fill
        rest = region if background is None else torch.full_like(region, background)
        region.copy_(torch.where(sel, fill, rest))
        return out
    if out is None:
        out = np.array(images, copy=True)
    else:
        out[...] = images
    region = out[..., row : row + h, col : col + w]
    fill = np.asarray(value, dtype=out.dtype)
    fill = fill.reshape(n, 1, 1, 1) if fill.ndim else fill
    rest = region if background is None else np.asarray(background, dtype=out.dtype)
    region[...] = np.where(masks[:, None], fill, rest)
    return out


def as_probe_images(probes: object) -> np.ndarray:
    """The probe images as a float32 ``(N, C, H, W)`` array (read-only view allowed).

    Accepts a :class:`~monai_forget.data.LabelledImages`, a numpy array or a tensor.

    Raises:
        ValueError: not 4-D, fewer than 2 probes, or NaN/inf pixels.
    """
    images = getattr(probes, "images", probes)
    if isinstance(images, torch.Tensor):
        images = images.detach().cpu().numpy()
    arr = np.asarray(images, dtype=np.float32)
    _check_batch(arr)
    if len(arr) < 2:
        raise ValueError(
            f"the memorisation score needs at least 2 probes (got {len(arr)}) for its "
            "test; pass a larger out-of-distribution probe set (hundreds is typical)"
        )
    if not np.isfinite(arr).all():
        raise ValueError("probe images contain NaN or inf; drop or repair those probes")
    return arr


def warn_if_in_distribution(probes: object, training: object) -> int:
    """Warn when probes are identical (by content hash) to training samples.

    The score assumes out-of-distribution probes (Hartley & Tsaftaris 2022, Sec. 2.3):
    a probe the model was trained on measures its response to that sample, not to z_u.

    Args:
        probes: the probe set (``LabelledImages`` or ``(N, C, H, W)`` array).
        training: samples the model was trained on, or any in-distribution set.

    Returns:
        The number of probes found among ``training``.
    """
    from monai_forget.fingerprint import image_hashes

    def _hashes(x: object) -> np.ndarray:
        cached = getattr(x, "sample_hashes", None)  # a LabelledImages hashes itself once
        if cached is not None:
            return cached
        imgs = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else x
        return image_hashes(np.asarray(imgs, dtype=np.float32))

    found = int(np.isin(_hashes(probes), _hashes(training)).sum())
    if found:
        warnings.warn(
            f"{found} probe(s) are identical to training samples: the memorisation score "
            "assumes out-of-distribution probes; use probes from another data set",
            UserWarning,
            stacklevel=2,
        )
    return found


def inject_feature(data: object, index: int, feature: UniqueFeature) -> object:
    """A copy of ``data`` whose image ``index`` carries ``feature`` (a canary set).

    Builds the training set of a canary model: the unique feature occurs exactly once.
    The input is not modified.

    Args:
        data: a :class:`~monai_forget.data.LabelledImages`.
        index: the image to carry the feature.
        feature: the feature.
    """
    from monai_forget.data import LabelledImages

    if not isinstance(data, LabelledImages):
        raise TypeError("inject_feature needs a LabelledImages")
    if not -len(data) <= index < len(data):
        raise ValueError(f"index {index} is outside the {len(data)} samples")
    images = np.array(data.images, copy=True)
    images[index : index + 1] = feature.apply(images[index : index + 1])
    return LabelledImages(images, data.labels, data.ids, data.num_classes)
