"""Turn MONAI-style (y_pred, y) pairs into (probabilities, class indices)."""

from __future__ import annotations

import numpy as np
import torch

from monai_forget.scores import check_probabilities


def to_probs_and_labels(
    y_pred: torch.Tensor | np.ndarray, y: torch.Tensor | np.ndarray, *, from_logits: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Labels as indices ``(B,)``/``(B, 1)`` or one-hot ``(B, K)``; probabilities validated."""
    y_pred = torch.as_tensor(y_pred).detach().cpu().double().numpy()
    y = torch.as_tensor(y).detach().cpu().numpy()
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    elif y.ndim == 2 and y_pred.ndim == 2 and y.shape[1] == y_pred.shape[1] > 1:
        y = y.argmax(axis=1)  # one-hot labels
    if y.dtype.kind == "f":
        if not np.all(y == np.round(y)):
            raise ValueError("labels must be class indices or one-hot vectors, got fractions")
        y = y.astype(np.int64)
    return check_probabilities(y_pred, y, from_logits=from_logits)
