"""Features defined where the PHI lives and seen where the model sees them.

A name burned into a DICOM sits on the acquisition grid, in the scanner's pixels; the
model sees it only after the pipeline's own preprocessing (intensity scaling, resizing)
has turned it into a grey, blurred pattern on a smaller grid. A leak scan that stamps a
binary glyph on the model's input grid measures a path no hospital has. Here every text
(a roster name, a decoy, a random control) is burned into the probes at acquisition
resolution by the injector's renderer (:func:`monai_forget.canary.paint`: same typeface,
position, scale and value rule as ``canary inject``) and then passed through the model's
own preprocessing:

- :class:`Preprocessing`: acquisition image ``(C, H, W)`` -> model input ``(C, h, w)``, a
  MONAI transform chain given in Python, or the part of a bundle's ``inference.json``
  preprocessing after the image is loaded (:meth:`Preprocessing.from_bundle`);
- :class:`PipelineProbes`: out-of-distribution probes at acquisition resolution and the
  preprocessing; :meth:`PipelineProbes.carrying` gives the model inputs of the probes
  carrying a mask, which :func:`~monai_forget.memorisation.passes.pipeline_divergences`
  feeds to the model for many texts at once.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from monai_forget.canary import check_fits, paint

__all__ = ["PipelineProbes", "Preprocessing"]

#: Transforms that read a file into the image: a bundle's preprocessing after the last of
#: them works on the loaded acquisition image.
_LOADING = ("LoadImage", "LoadImaged", "EnsureChannelFirst", "EnsureChannelFirstd")


def _as_array(image: Any) -> np.ndarray:
    if isinstance(image, torch.Tensor):
        image = image.detach().cpu().numpy()
    return np.asarray(image, dtype=np.float32)


@dataclass(frozen=True)
class Preprocessing:
    """The model's preprocessing from a loaded acquisition image to the model input.

    Args:
        transform: a callable (e.g. a MONAI ``Compose``) of a channel-first image, or,
            with ``key``, of a dictionary holding it under ``key`` (MONAI's dictionary
            transforms).
        key: the image's key for dictionary transforms; ``None`` for array transforms.
        loader: optional callable of a file path to the loaded acquisition image
            ``(C, H, W)`` (a bundle's loading transforms), used by :meth:`load`.
        description: what the preprocessing is, for reports.
    """

    transform: Callable[[Any], Any]
    key: str | None = None
    loader: Callable[[str], Any] | None = None
    description: str = "a transform chain given in Python"

    def __call__(self, image: np.ndarray) -> np.ndarray:
        """The model input ``(C, h, w)`` float32 of one ``(C, H, W)`` acquisition image."""
        if self.key is None:
            return _as_array(self.transform(image))
        return _as_array(self.transform({self.key: image})[self.key])

    def load(self, paths: Sequence[str | os.PathLike]) -> list[np.ndarray]:
        """Read acquisition images with the pipeline's own loader.

        Raises:
            ValueError: no loader (a chain given in Python), or a file it cannot read.
        """
        if self.loader is None:
            raise ValueError(
                "this preprocessing has no loader; pass loaded (C, H, W) images, or build it "
                "with Preprocessing.from_bundle"
            )
        return [_as_array(self.loader(str(p))) for p in paths]

    @classmethod
    def from_bundle(
        cls, bundle: str | os.PathLike, config: str = "configs/inference.json"
    ) -> Preprocessing:
        """The preprocessing of a MONAI bundle's inference config, split where the image
        has been loaded: the transforms up to the last ``LoadImaged`` /
        ``EnsureChannelFirstd`` read a file (:meth:`load`), the rest map the loaded image
        to the model input. Only trusted bundles: the config runs code.

        Raises:
            FileNotFoundError: no such config in the bundle.
            ValueError: the config has no ``preprocessing`` Compose, or no loading step.
        """
        from monai.bundle import ConfigParser
        from monai.transforms import Compose

        root = Path(bundle)
        path = root / config
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist; pass the bundle's folder (--bundle)")
        parser = ConfigParser()
        parser.read_config(str(path))
        parser["bundle_root"] = str(root)
        if "preprocessing" not in parser.get():
            raise ValueError(f"{path} defines no 'preprocessing'; name a bundle inference config")
        chain = parser.get_parsed_content("preprocessing")
        transforms = list(getattr(chain, "transforms", ()))
        names = [type(t).__name__ for t in transforms]
        loading = [i for i, n in enumerate(names) if n in _LOADING]
        if not loading:
            raise ValueError(
                f"{path}: its preprocessing loads no image (no LoadImaged); pass the "
                "preprocessing in Python instead"
            )
        split = loading[-1] + 1
        keys = getattr(transforms[loading[-1]], "keys", ("image",))
        key = str(keys[0])
        load_chain, model_chain = Compose(transforms[:split]), Compose(transforms[split:])

        def loader(file: str) -> Any:
            return load_chain({key: file})[key]

        steps = ", ".join(names[split:]) or "nothing"
        return cls(model_chain, key, loader, f"{path.name} of bundle {root.name}: {steps}")


@dataclass
class PipelineProbes:
    """Out-of-distribution probes at acquisition resolution and the model's preprocessing.

    Texts and masks are burned into copies of the probes by the injector's renderer at
    ``position`` (acquisition pixels) with ``value`` per probe: ``"max"``, each probe's
    maximum (the displayed white of an auto-windowed image: the injector's rule without a
    VOI window), or a number (a stored value, e.g. the ``value`` of an injector manifest).
    The probes are copied; the inputs are never modified.

    Args:
        images: the probes, each ``(C, H, W)`` (sizes may differ) or one ``(N, C, H, W)``
            array.
        preprocessing: the model's preprocessing (:class:`Preprocessing`, or any callable
            of a ``(C, H, W)`` array).

    Raises:
        ValueError: fewer than 2 probes, a probe that is not 3-D, or NaN/inf pixels.
    """

    images: Sequence[np.ndarray]
    preprocessing: Callable[[np.ndarray], np.ndarray]
    _clean: np.ndarray | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        images = [np.array(_as_array(x), copy=True) for x in self.images]
        if len(images) < 2:
            raise ValueError(
                f"the scan needs at least 2 probes (got {len(images)}); pass a larger "
                "out-of-distribution probe set (hundreds is typical)"
            )
        for i, x in enumerate(images):
            if x.ndim != 3:
                raise ValueError(
                    f"probe {i} has shape {x.shape}; acquisition probes are (C, H, W) "
                    "(add the channel axis: image[None])"
                )
            if not np.isfinite(x).all():
                raise ValueError(f"probe {i} has NaN or inf pixels; drop or repair it")
            x.flags.writeable = False
        self.images = images

    def __len__(self) -> int:
        return len(self.images)

    @property
    def grid(self) -> tuple[int, int]:
        """The smallest acquisition ``(H, W)`` over the probes (what a text must fit)."""
        return (min(x.shape[-2] for x in self.images), min(x.shape[-1] for x in self.images))

    def describe(self) -> str:
        """Where the features are defined and how they reach the model."""
        how = getattr(self.preprocessing, "description", type(self.preprocessing).__name__)
        h, w = self.grid
        return f"burned at acquisition resolution (at least {h}x{w}), then {how}"

    def values(self, value: float | str) -> list[float]:
        """The burned value per probe."""
        if value == "max":
            return [float(x.max()) for x in self.images]
        return [float(value)] * len(self.images)

    def clean(self) -> np.ndarray:
        """The model inputs of the clean probes ``(N, C, h, w)`` float32 (computed once)."""
        if self._clean is None:
            # a writable copy each: transforms may convert to tensors, which warn on views
            clean = np.stack([self.preprocessing(np.array(x)) for x in self.images])
            clean.flags.writeable = False
            self._clean = clean
        return self._clean

    def carrying(
        self,
        masks: np.ndarray,
        position: Sequence[int],
        value: float | str = "max",
        background: float | None = None,
    ) -> np.ndarray:
        """The model inputs ``(N, C, h, w)`` of the probes carrying ``masks``.

        Args:
            masks: one boolean ``(h, w)`` mask for every probe, or ``(N, h, w)``, one per
                probe (the random controls).
            position: ``(row, col)`` of the masks' top-left pixel on the acquisition grid.
            value: ``"max"`` or a number (see the class).
            background: with a number, the whole box is overwritten and the pixels
                outside the mask get it (the paper's random patch); ``None`` paints
                the mask's pixels only.

        Raises:
            ValueError: a mask that does not fit a probe at ``position``.
        """
        masks = np.asarray(masks, dtype=bool)
        per_probe = masks if masks.ndim == 3 else np.broadcast_to(masks, (len(self), *masks.shape))
        if len(per_probe) != len(self):
            raise ValueError(f"{len(per_probe)} masks for {len(self)} probes")
        out = None
        row, col = (int(p) for p in position)
        for i, (x, v) in enumerate(zip(self.images, self.values(value), strict=True)):
            check_fits(per_probe[i].shape, position, x.shape[-2:])
            burned = np.array(x, copy=True)
            if background is not None:
                h, w = per_probe[i].shape
                burned[..., row : row + h, col : col + w] = background
            paint(burned, per_probe[i], position, v)
            model_input = self.preprocessing(burned)
            if out is None:
                out = np.empty((len(self), *model_input.shape), dtype=np.float32)
            out[i] = model_input
        return out

    def fingerprint(self) -> str:
        """SHA-256 of the acquisition probes (shapes and pixels) and the preprocessing's
        description: identifies the probe set in records and scan checkpoints."""
        digest = hashlib.sha256(self.describe().encode("utf-8"))
        for x in self.images:
            digest.update(repr(x.shape).encode("ascii"))
            digest.update(np.ascontiguousarray(x).tobytes())
        return digest.hexdigest()
