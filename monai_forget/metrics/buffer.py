"""Whole-batch buffering for the audit metrics.

MONAI's ``Cumulative.extend`` splits every mini-batch into per-sample tensors, and
``get_buffer`` stacks them back at the end. The audit metrics only need the
concatenated outputs at epoch end, and that per-sample bookkeeping was most of the
evaluation overhead of the audit handlers. :class:`BatchBuffered` keeps each
mini-batch whole in buffers of its own (MONAI's private fields are never written) and
concatenates when asked; ``get_buffer`` returns the same tensors as MONAI's default,
gathered across ranks the same way (``evenly_divisible_all_gather``).
"""

from __future__ import annotations

from typing import Any

import torch
from monai.utils import convert_data_type
from monai.utils.dist import evenly_divisible_all_gather

__all__ = ["BatchBuffered"]


class BatchBuffered:
    """Mixin placed before ``monai.metrics.CumulativeIterationMetric``: whole-batch buffers.

    It replaces the public buffer interface of ``monai.metrics.Cumulative``
    (``reset``, ``extend``, ``append``, ``get_buffer``, ``len``) with one that keeps each
    added batch as one tensor.
    """

    _batches: list[list[torch.Tensor]] | None = None
    _gathered: list[torch.Tensor] | None = None

    def reset(self) -> None:
        """Forget every buffered batch."""
        self._batches = None
        self._gathered = None

    def _add(self, data: tuple[Any, ...], single: bool) -> None:
        if self._batches is None:
            self._batches = [[] for _ in data]
        for buffer, item in zip(self._batches, data, strict=True):
            tensor, *_ = convert_data_type(item, output_type=torch.Tensor, wrap_sequence=True)
            if single:
                tensor = tensor.unsqueeze(0)
            elif tensor.ndim == 0:
                raise TypeError("`data` should be batch-first tensors, got a scalar")
            buffer.append(tensor)
        self._gathered = None

    def extend(self, *data: Any) -> None:
        """Add a batch-first item per buffer (kept whole, concatenated when read)."""
        self._add(data, single=False)

    def append(self, *data: Any) -> None:
        """Add a single sample per buffer (stored as a batch of one)."""
        self._add(data, single=True)

    def _gather(self) -> list[torch.Tensor] | None:
        if self._gathered is None and self._batches is not None:
            try:
                self._gathered = [
                    evenly_divisible_all_gather(torch.cat(b, dim=0), concat=True)
                    for b in self._batches
                ]
            except (RuntimeError, TypeError, ValueError) as err:
                raise TypeError(f"{err}. unable to gather the metric's buffers") from err
        return self._gathered

    def __len__(self) -> int:
        gathered = self._gather()
        return 0 if gathered is None else max(len(t) for t in gathered)

    def get_buffer(self) -> torch.Tensor | list[torch.Tensor] | None:
        """The buffered batches, concatenated (one tensor, or a list for several buffers)."""
        gathered = self._gather()
        if gathered is None:
            return None
        copies = [t.detach().clone() for t in gathered]
        return copies[0] if len(copies) == 1 else copies
