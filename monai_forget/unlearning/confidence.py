"""LiRA's logit-scaled confidence of a model on a data set.

``phi = log p_y - log(sum_{j != y} p_j)`` (Carlini et al. 2022, Sec. IV-B;
:func:`monai_forget.audit.refmodel.logit_confidence`) per sample, and its mean: on the
withdrawn data it is what the retrain-referenced test compares
(:mod:`~monai_forget.unlearning.retrain_reference`), and on non-members it is the
stopping target of Forsaken's generator
(:class:`~monai_forget.unlearning.dummy_gradient.DummyGradientGenerator`,
``target_confidence``).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from monai_forget.audit.refmodel import logit_confidence
from monai_forget.data import LabelledImages
from monai_forget.inference import predict

__all__ = ["logit_confidences", "mean_logit_confidence"]


def logit_confidences(
    model: nn.Module, data: LabelledImages, device: str | torch.device = "cpu"
) -> np.ndarray:
    """``phi`` of ``model`` for every sample of ``data`` (eval mode, no grad)."""
    out = predict(model, data, device=device)
    return logit_confidence(out.probs, out.labels)


def mean_logit_confidence(
    model: nn.Module, data: LabelledImages, *, device: str | torch.device = "cpu"
) -> float:
    """Mean ``phi`` of ``model`` on ``data``; on non-members, the generator's target."""
    if len(data) == 0:
        raise ValueError("no samples to measure the confidence on; pass non-member data")
    return float(logit_confidences(model, data, device).mean())
