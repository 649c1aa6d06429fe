"""A model with a known memory, shared by the leak-scan tests: an MLP-1 whose first hidden
unit responds to one pattern (a text as the model sees it), and nothing else."""

from __future__ import annotations

import numpy as np
import torch

from monai_forget.networks import MLP1


def matched_filter(template: np.ndarray, gain: float = 0.5) -> MLP1:
    """An MLP-1 on ``(1, *template.shape)`` inputs whose first hidden unit responds to
    ``template`` with ``gain``; the second class's logit is that unit."""
    net = MLP1((1, *template.shape), 2, hidden=2)
    with torch.no_grad():
        for layer in (net.head[1], net.head[3]):
            layer.weight.zero_()
            layer.bias.zero_()
        net.head[1].weight[0] = gain * torch.from_numpy(template.astype(np.float32).ravel())
        net.head[3].weight[0, 0] = 1.0
    return net.eval()
