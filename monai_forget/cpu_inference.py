"""How a scan runs a model over many images fast on a CPU without changing what it computes.

A leak scan passes thousands of texts over hundreds of probes through the model. On a CPU
two things decide its speed (``benchmarks/leak_scan_forward.py`` measures them):

- the batch: a convolution's activations for 1,024 images do not fit in cache, for 32 they
  do;
- the memory layout: PyTorch's CPU convolutions and poolings take oneDNN's vectorised path
  only for channels-last tensors, which a 1-channel input cannot select by itself (for
  C = 1 both layouts are the same), so the model's weights must be channels-last.

An MLP on a CPU and any model on an accelerator want large batches and run as given.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

__all__ = [
    "CPU_CONV_BATCH_SIZE",
    "LARGE_BATCH_SIZE",
    "batch_size_for",
    "convolutional",
    "laid_out_for",
]

#: Images per forward pass for a convolutional model on a CPU when none is given.
CPU_CONV_BATCH_SIZE = 32
#: Images per forward pass otherwise (an MLP's matrix products, an accelerator).
LARGE_BATCH_SIZE = 1024


def convolutional(model: nn.Module) -> bool:
    """Whether ``model`` holds a 2-D convolution (TorchScript modules are not looked into)."""
    return any(isinstance(m, nn.Conv2d) for m in model.modules())


def batch_size_for(model: nn.Module, device: str | torch.device) -> int:
    """Images per forward pass: 32 for a convolutional model on a CPU, else 1,024 (an
    MLP's matrix products are fastest in large batches)."""
    cpu = torch.device(device).type == "cpu"
    return CPU_CONV_BATCH_SIZE if cpu and convolutional(model) else LARGE_BATCH_SIZE


def laid_out_for(model: nn.Module, device: str | torch.device) -> nn.Module:
    """``model`` as a CPU runs it fastest: a channels-last copy when it has 2-D convolutions
    and ``device`` is a CPU, else ``model`` itself (TorchScript modules and models that
    cannot be copied included). The caller's model is never changed; the copy's outputs
    agree with the model's to float32 rounding (different summation order)."""
    if torch.device(device).type != "cpu":
        return model
    if not convolutional(model):
        return model
    try:
        twin = copy.deepcopy(model)
    except (TypeError, RuntimeError, copy.Error):  # e.g. an attribute that cannot be copied
        return model
    return twin.to(memory_format=torch.channels_last)
