"""The model's preprocessing, from a loaded acquisition image to the model input: a MONAI
chain given in Python, or the part of a bundle's ``inference.json`` after the image is
loaded, read with the parameters the model was trained with."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["Preprocessing", "as_array"]

#: Transforms that read a file into the image: a bundle's preprocessing after the last of
#: them works on the loaded acquisition image.
_LOADING = ("LoadImage", "LoadImaged", "EnsureChannelFirst", "EnsureChannelFirstd")


def as_array(image: Any) -> np.ndarray:
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
            return as_array(self.transform(image))
        return as_array(self.transform({self.key: image})[self.key])

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
        return [as_array(self.loader(str(p))) for p in paths]

    @classmethod
    def from_bundle(
        cls,
        bundle: str | os.PathLike,
        config: str = "configs/inference.json",
        overrides: Mapping[str, Any] | None = None,
    ) -> Preprocessing:
        """The preprocessing of a MONAI bundle's inference config, split where the image
        has been loaded: the transforms up to the last ``LoadImaged`` /
        ``EnsureChannelFirstd`` read a file (:meth:`load`), the rest map the loaded image
        to the model input. Only trusted bundles: the config runs code.

        Args:
            bundle: the bundle folder.
            config: its inference config, relative to the folder.
            overrides: parameters set before parsing, as ``python -m monai.bundle run
                --image_size 128`` sets them (the model input of a bundle trained so).

        Raises:
            FileNotFoundError: no such config in the bundle.
            ValueError: the config has no ``preprocessing`` Compose, or no loading step;
                an override names a parameter the config does not define.
        """
        from monai.bundle import ConfigParser
        from monai.transforms import Compose

        from monai_forget.data.readers import optional_decoders_quiet

        root = Path(bundle)
        path = root / config
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist; pass the bundle's folder (`bundle`)")
        parser = ConfigParser()
        parser.read_config(str(path))
        parser["bundle_root"] = str(root)
        for key, value in (overrides or {}).items():
            if key not in parser:
                raise ValueError(
                    f"{path} defines no parameter {key!r} to override; name one it defines "
                    "(e.g. image_size)"
                )
            parser[key] = value
        if "preprocessing" not in parser.get():
            raise ValueError(f"{path} defines no 'preprocessing'; name a bundle inference config")
        with optional_decoders_quiet():
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
        set_ = "".join(f", {k}={v}" for k, v in (overrides or {}).items())
        return cls(model_chain, key, loader, f"{path.name} of bundle {root.name}{set_}: {steps}")
