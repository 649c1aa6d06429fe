"""Model files of the bundles: safe (``weights_only``) loading, atomic non-clobbering saving."""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import nn

from monai_forget.io import atomic_write, check_writable
from monai_forget.model_files import load_state_dict

__all__ = ["check_outputs", "load_weights", "save_weights"]


def check_outputs(*paths: str | os.PathLike | None, overwrite: bool = False) -> None:
    """Refuse, before any work starts, to replace existing outputs unless ``overwrite``.

    Raises:
        FileExistsError: one of ``paths`` exists and ``overwrite`` is false.
    """
    for path in paths:
        if path is not None:
            check_writable(path, overwrite)


def load_weights(
    model: nn.Module, path: str | os.PathLike, device: str | torch.device | None = None
) -> nn.Module:
    """Load a state dict saved by :func:`save_weights` (or MONAI's ``CheckpointSaver``).

    The file is read with ``torch.load(weights_only=True)``: nothing is unpickled. A
    dict holding the state dict under ``"model"`` or ``"state_dict"`` is accepted.

    Returns:
        ``model`` with the weights, on ``device`` (if given), in eval mode.

    Raises:
        FileNotFoundError: the file is missing (train the bundle first).
        ValueError: the file does not fit the network.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"model file {path} not found; train it first (configs/train.json) or pass "
            "the checkpoint path"
        )
    state = load_state_dict(path, "cpu")
    try:
        model.load_state_dict(state)
    except RuntimeError as err:
        raise ValueError(f"{path} does not fit the bundle's network: {err}") from err
    if device is not None:
        model = model.to(device)
    return model.eval()


def save_weights(model: nn.Module, path: str | os.PathLike, overwrite: bool = False) -> Path:
    """Save ``model.state_dict()`` (on CPU) atomically; refuse to replace a file unless asked."""
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    with atomic_write(path, "wb", overwrite=overwrite) as handle:
        torch.save(state, handle)
    return Path(path)
