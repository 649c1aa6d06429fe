"""MONAI transforms that burn a text mask into channel-first images."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import ClassVar

import numpy as np
import torch
from monai.config import KeysCollection
from monai.config.type_definitions import NdarrayOrTensor
from monai.transforms import MapTransform, Transform
from monai.utils import TransformBackends

from monai_forget.canary.render import render_text, stamp

__all__ = ["BurnInText", "BurnInTextD", "BurnInTextDict", "BurnInTextd"]


class BurnInText(Transform):
    """Burn ``text`` into a channel-first image ``(C, H, W[, D])``.

    The text mask (see :func:`~monai_forget.canary.render.render_text`) is placed with
    its top-left pixel at ``position`` in the first two spatial axes, in every channel
    and every slice of further spatial axes. The default matches the unique feature of
    Hartley & Tsaftaris (2022): one 5x5 letter, 1 pixel from the top-left corner.

    Args:
        text: the text to burn in.
        position: ``(row, col)`` of the text's top-left pixel.
        scale: integer glyph magnification.
        value: pixel value of the text, or ``"max"`` for the image's maximum (the
            displayed white of an auto-windowed image).
    """

    backend: ClassVar[list[TransformBackends]] = [TransformBackends.TORCH, TransformBackends.NUMPY]

    def __init__(
        self,
        text: str = "A",
        position: Sequence[int] = (1, 1),
        scale: int = 1,
        value: float | str = "max",
    ) -> None:
        if isinstance(value, str) and value != "max":
            raise ValueError(f"value must be a number or 'max', got {value!r}")
        self.text = text
        self.position = tuple(int(p) for p in position)
        self.scale = scale
        self.value = value
        self.mask = render_text(text, scale)

    def __call__(self, img: NdarrayOrTensor) -> NdarrayOrTensor:
        if img.ndim < 3:
            raise ValueError(
                f"expected a channel-first image (C, H, W[, D]), got shape {tuple(img.shape)}"
            )
        value = img.max() if self.value == "max" else self.value
        if isinstance(img, torch.Tensor) and isinstance(value, torch.Tensor):
            value = value.as_tensor() if hasattr(value, "as_tensor") else value
        elif isinstance(value, np.ndarray):
            value = value.item()
        return stamp(img, self.mask, self.position, value, axes=(1, 2))


class BurnInTextd(MapTransform):
    """Dictionary version of :class:`BurnInText`, applied to every key in ``keys``."""

    backend: ClassVar[list[TransformBackends]] = BurnInText.backend

    def __init__(
        self,
        keys: KeysCollection,
        text: str = "A",
        position: Sequence[int] = (1, 1),
        scale: int = 1,
        value: float | str = "max",
        allow_missing_keys: bool = False,
    ) -> None:
        super().__init__(keys, allow_missing_keys)
        self.burn_in = BurnInText(text, position, scale, value)

    def __call__(self, data: Mapping[Hashable, NdarrayOrTensor]) -> dict[Hashable, NdarrayOrTensor]:
        d = dict(data)
        for key in self.key_iterator(d):
            d[key] = self.burn_in(d[key])
        return d


BurnInTextD = BurnInTextDict = BurnInTextd
