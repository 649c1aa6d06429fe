"""LiRA's logit-scaled confidence computed from a model's logits, in torch.

``phi = z_y - logsumexp_{j != y} z_j`` (Carlini et al. 2022, Sec. IV-B, from logits rather
than probabilities); its mean on non-members is the stopping target of Forsaken's
generator (:class:`~monai_forget.unlearning.dummy_gradient.DummyGradientGenerator`,
``target_confidence``).
"""

from __future__ import annotations

import torch
from torch import nn

from monai_forget.data import LabelledImages

__all__ = ["logit_confidence_from_logits", "mean_logit_confidence"]


def logit_confidence_from_logits(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``phi = z_y - logsumexp_{j != y} z_j`` per row (LiRA's logit confidence, from logits)."""
    true = logits.gather(1, labels[:, None]).squeeze(1)
    others = logits.scatter(1, labels[:, None], float("-inf"))
    return true - torch.logsumexp(others, dim=1)


def mean_logit_confidence(
    model: nn.Module, data: LabelledImages, *, device: str | torch.device = "cpu"
) -> float:
    """Mean LiRA logit confidence ``phi`` of ``model`` on ``data`` (eval mode, no grad).

    On non-members (data the model never trained on) it is the stopping target of
    :class:`DummyGradientGenerator` (``target_confidence``).
    """
    if len(data) == 0:
        raise ValueError("no samples to measure the confidence on; pass non-member data")
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            logits = model(torch.tensor(data.images, device=device))
            labels = torch.tensor(data.labels, dtype=torch.long, device=logits.device)
            return float(logit_confidence_from_logits(logits.double(), labels).mean())
    finally:
        model.train(was_training)
