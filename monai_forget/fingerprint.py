"""Content hashes of samples, data sets and models.

They key the on-disk caches (predictions, shadow models) and are recorded as
provenance in every audit result, so they depend on content only: the same pixels
give the same hash whatever array or file they came from.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
    from monai_forget.data import LabelledImages

__all__ = ["data_fingerprint", "model_fingerprint", "sample_hashes"]


def sample_hashes(data: LabelledImages) -> np.ndarray:
    """SHA-256 hex digest of each image's content.

    Each digest covers the image shape and its C-contiguous float32 bytes, so two
    samples collide only when every pixel is bit-identical (labels are not included:
    the overlap check is about images).

    Args:
        data: The labelled images.

    Returns:
        Array of shape ``(N,)`` of 64-character hex strings.
    """
    images = np.ascontiguousarray(data.images, dtype=np.float32)
    shape_tag = repr(tuple(images.shape[1:])).encode()
    # One contiguous 2D byte view: each row is then a cheap slice, no per-row copy.
    rows = images.reshape(len(images), int(np.prod(images.shape[1:]))).view(np.uint8)
    out = np.empty(len(images), dtype="<U64")
    for i, row in enumerate(rows):
        h = hashlib.sha256(shape_tag)
        h.update(row.data)
        out[i] = h.hexdigest()
    return out


def data_fingerprint(data: LabelledImages) -> str:
    """SHA-256 over the ordered sample hashes and labels of a data set.

    Args:
        data: The labelled images.

    Returns:
        A 64-character hex string; it changes when any pixel, label or the order changes.
    """
    h = hashlib.sha256(b"monai-forget/data/v1")
    for digest in sample_hashes(data):
        h.update(digest.encode())
    h.update(np.ascontiguousarray(data.labels, dtype="<i8").tobytes())
    return h.hexdigest()


def model_fingerprint(model: torch.nn.Module) -> str:
    """SHA-256 over a model's class name and every parameter and buffer.

    Entries of ``state_dict()`` (parameters and persistent buffers) are hashed in
    sorted name order with their dtype, shape and bytes; non-persistent buffers are
    added too, since they also shape the outputs.

    Args:
        model: Any ``torch.nn.Module`` (TorchScript modules included).

    Returns:
        A 64-character hex string, equal for two models of the same class with
        identical weights and different when any single weight differs.
    """
    h = hashlib.sha256(b"monai-forget/model/v1")
    h.update(type(model).__qualname__.encode())
    if isinstance(model, torch.jit.ScriptModule):
        h.update(model.original_name.encode())
    tensors = dict(model.state_dict())
    for name, buf in model.named_buffers():
        tensors.setdefault(f"buffer:{name}", buf)
    for name in sorted(tensors):
        _update_tensor(h, name, tensors[name])
    return h.hexdigest()


def _update_tensor(h: hashlib._Hash, name: str, tensor: torch.Tensor) -> None:
    """Feed one named tensor (name, dtype, shape, raw bytes) into a hash."""
    t = tensor.detach().to("cpu").contiguous()
    h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
    # uint8 view gives raw bytes for every dtype, bfloat16 included (numpy lacks it).
    h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
