"""What the evaluation-time audit metrics share: whole-batch buffers, labels, and the
optional check that the evaluated samples are the audited ones."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from monai.metrics import CumulativeIterationMetric

from monai_forget.metrics.buffer import BatchBuffered
from monai_forget.metrics.labels import to_probs_and_labels
from monai_forget.metrics.query_check import MISSING_ID, QueryCheck, SampleCheck, image_ids

__all__ = ["AuditMetric"]


class AuditMetric(BatchBuffered, CumulativeIterationMetric):
    """Accumulates the target's outputs (and, to check them, the images' content ids).

    Args:
        from_logits: apply a softmax to ``y_pred`` first.
        check: how ``aggregate`` checks that exactly the audited samples were evaluated
            (:class:`~monai_forget.metrics.query_check.SampleCheck`; ``None``: no check).
        audited: the audited samples' content hashes the reference carries (the check's
            default).
        copies: the hashes of those the audit collapsed as copies (the check's default).

    Raises:
        ValueError: the check is on but no hashes were given.
    """

    statistic = "the audit statistic"

    def __init__(
        self,
        from_logits: bool = False,
        check: SampleCheck | None = SampleCheck(),
        audited: Sequence[str] | None = None,
        copies: Sequence[str] = (),
    ) -> None:
        super().__init__()
        self.from_logits = from_logits
        self.check = None
        if check is None:
            return
        hashes = check.hashes if check.hashes is not None else audited
        if hashes is None:
            raise ValueError(
                f"{type(self).__name__} checks by content that the evaluated samples are the "
                "audited ones: pass check=SampleCheck(hashes=query.sample_hashes) (a reference "
                "from the auditor's fit_reference(query, ...) carries them), or check=None to "
                "evaluate without the check"
            )
        copies = check.copies if check.copies is not None else copies
        self.check = QueryCheck(hashes, on_mismatch=check.on_mismatch, on_extra=check.on_extra,
                                copies=copies)  # fmt: skip

    def _compute_tensor(  # type: ignore[override]
        self, y_pred: torch.Tensor, y: torch.Tensor | None = None, images: Any = None, **kwargs: Any
    ):
        if y is None:
            raise ValueError(f"{self.statistic} needs ground-truth labels y")
        if self.check is None:
            return y_pred, y
        if images is None:
            ids = torch.full((len(y_pred),), MISSING_ID, dtype=torch.int64)
        else:
            ids = image_ids(images)
        return y_pred, y, ids

    def outputs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(probabilities, labels, ids or None) of everything evaluated, checked."""
        buffers = self.get_buffer()
        if buffers is None:
            raise ValueError(f"nothing was evaluated: {self.statistic} needs the target's outputs")
        keep, ids = slice(None), None
        if self.check is not None:  # the data first: outputs of the wrong samples mean nothing
            ids = buffers[2].numpy()
            keep = self.check.check(ids, self.statistic)
            ids = ids[keep]
        probs, labels = to_probs_and_labels(buffers[0], buffers[1], from_logits=self.from_logits)
        return probs[keep], labels[keep], ids
