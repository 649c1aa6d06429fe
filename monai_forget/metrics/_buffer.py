"""Whole-batch buffering for the audit metrics.

MONAI's ``Cumulative.extend`` splits every mini-batch into per-sample tensors, and
``get_buffer`` stacks them back at the end. The audit metrics only need the
concatenated outputs at epoch end, and that per-sample bookkeeping was most of the
evaluation overhead of the audit handlers. :class:`BatchBuffered` keeps each
mini-batch whole and concatenates when syncing; ``get_buffer`` returns the same
tensors as MONAI's default (gathered across ranks the same way).
"""

from __future__ import annotations

from typing import Any

import torch
from monai.utils import convert_data_type
from monai.utils.dist import evenly_divisible_all_gather


class BatchBuffered:
    """Mixin placed before ``monai.metrics.CumulativeIterationMetric``: whole-batch buffers."""

    _buffers: list[list[torch.Tensor]] | None
    _synced_tensors: list[torch.Tensor] | None
    _synced: bool

    def extend(self, *data: Any) -> None:
        """Add a batch-first item per buffer (kept whole, concatenated on sync)."""
        if self._buffers is None:
            self._buffers = [[] for _ in data]
        for buffer, item in zip(self._buffers, data, strict=True):
            tensor, *_ = convert_data_type(item, output_type=torch.Tensor, wrap_sequence=True)
            if tensor.ndim == 0:
                raise TypeError("`data` should be batch-first tensors, got a scalar")
            buffer.append(tensor)
        self._synced = False

    def append(self, *data: Any) -> None:
        """Add a single sample per buffer (stored as a batch of one)."""
        if self._buffers is None:
            self._buffers = [[] for _ in data]
        for buffer, item in zip(self._buffers, data, strict=True):
            tensor, *_ = convert_data_type(item, output_type=torch.Tensor, wrap_sequence=True)
            buffer.append(tensor.unsqueeze(0))
        self._synced = False

    def _sync(self) -> None:
        if self._synced or self._buffers is None:
            return
        try:
            self._synced_tensors = [
                evenly_divisible_all_gather(torch.cat(b, dim=0), concat=True) for b in self._buffers
            ]
        except (RuntimeError, TypeError, ValueError) as err:
            raise TypeError(f"{err}. unable to sync the metric's buffers") from err
        self._synced = True
