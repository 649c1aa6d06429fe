"""Content hashes of samples, data sets and models.

They key the on-disk caches (predictions, shadow models) and are recorded as
provenance in every audit result, so they depend on content only: the same pixels
give the same hash whatever array or file they came from.

The hashing here is pure (arrays in, digests out). A
:class:`~monai_forget.data.LabelledImages` computes its hashes with it once and keeps
them, so :func:`sample_hashes` and :func:`data_fingerprint` return the cached values.
"""

from __future__ import annotations

import hashlib
import os
from typing import Protocol

import numpy as np
import torch

__all__ = [
    "data_fingerprint",
    "file_sha256",
    "hashes_fingerprint",
    "image_hashes",
    "model_fingerprint",
    "sample_hashes",
]


class HashedImages(Protocol):
    """A data set that keeps its own content hashes (e.g. ``LabelledImages``)."""

    @property
    def sample_hashes(self) -> np.ndarray: ...

    @property
    def fingerprint(self) -> str: ...


def image_hashes(images: np.ndarray) -> np.ndarray:
    """SHA-256 hex digest of each image's content.

    Each digest covers the image shape and its C-contiguous float32 bytes, so two
    samples collide only when every pixel is bit-identical (labels are not included:
    the overlap check is about images).

    Args:
        images: Array of shape ``(N, C, H, W)``.

    Returns:
        Array of shape ``(N,)`` of 64-character hex strings.
    """
    images = np.ascontiguousarray(images, dtype=np.float32)
    shape_tag = repr(tuple(images.shape[1:])).encode()
    # One contiguous 2D byte view: each row is then a cheap slice, no per-row copy.
    rows = images.reshape(len(images), int(np.prod(images.shape[1:]))).view(np.uint8)
    out = np.empty(len(images), dtype="<U64")
    for i, row in enumerate(rows):
        h = hashlib.sha256(shape_tag)
        h.update(row.data)
        out[i] = h.hexdigest()
    return out


def hashes_fingerprint(hashes: np.ndarray, labels: np.ndarray) -> str:
    """SHA-256 over ordered sample hashes (:func:`image_hashes`) and their labels.

    Args:
        hashes: ``(N,)`` hex digests, one per sample.
        labels: ``(N,)`` integer labels.

    Returns:
        A 64-character hex string; it changes when any pixel, label or the order changes.
    """
    h = hashlib.sha256(b"monai-forget/data/v1")
    for digest in hashes:
        h.update(digest.encode())
    h.update(np.ascontiguousarray(labels, dtype="<i8").tobytes())
    return h.hexdigest()


def sample_hashes(data: HashedImages) -> np.ndarray:
    """The per-image content hashes of a data set (:func:`image_hashes`), computed once per set.

    Args:
        data: The labelled images.

    Returns:
        Read-only array of shape ``(N,)`` of 64-character hex strings.
    """
    return data.sample_hashes


def data_fingerprint(data: HashedImages) -> str:
    """The fingerprint of a data set's pixels, labels and order (:func:`hashes_fingerprint`).

    Args:
        data: The labelled images.

    Returns:
        A 64-character hex string, computed once per set.
    """
    return data.fingerprint


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


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 of a file's bytes, as 64 hex digits."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
