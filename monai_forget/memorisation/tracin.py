"""TracInCP self-influence, to choose high- and low-influence canaries.

Hartley & Tsaftaris (2022), Appendix A.5, rank training images by the self-influence of
TracInCP (Pruthi et al., "Estimating training data influence by tracing gradient
descent", NeurIPS 2020, Eq. 3 with z' = z):

    SelfInf(z) = sum_k eta_k * || grad_theta loss(theta_k; z) ||^2,

over saved checkpoints theta_k with learning rates eta_k (the paper: 10 evenly spaced
checkpoints covering 95 % of the fall in training loss, :func:`select_checkpoints`).
High self-influence images are
those the model had to bend towards (atypical, hard, mislabelled); the paper injects the
unique feature into images of high and of low self-influence and finds the feature
memorised in both.

Per-sample gradients come from ``torch.func``: ``vmap`` over ``grad`` of a
``functional_call`` of the model on one sample, so a batch of per-sample squared
gradient norms is one vectorised computation (no Python loop over samples or
parameters' entries). The model is evaluated in eval mode (batch-norm running
statistics, no dropout), the usual choice for influence estimates.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from monai_forget.checks import POSITIVE, check_in

__all__ = ["Checkpoint", "select_checkpoints", "self_influence"]


@dataclass(frozen=True)
class Checkpoint:
    """Weights theta_k saved during training and the learning rate eta_k in use then.

    ``epoch`` and ``train_loss`` (the epoch's mean mini-batch loss, as Keras reports it)
    let :func:`select_checkpoints` pick the checkpoints of App. A.5.
    """

    state_dict: Mapping[str, torch.Tensor]
    learning_rate: float
    epoch: int = 0
    train_loss: float = float("nan")

    def __post_init__(self) -> None:
        check_in("learning_rate", self.learning_rate, POSITIVE)


def select_checkpoints(
    checkpoints: Sequence[Checkpoint], n: int = 10, reduction: float = 0.95
) -> list[Checkpoint]:
    """The checkpoints of Hartley & Tsaftaris (2022), App. A.5: ``n`` evenly spaced ones
    that account for ``reduction`` of the reduction in training loss.

    With per-epoch losses l_1..l_E, the cut-off is the first epoch e* whose loss has
    fallen by ``reduction`` of the total fall, ``l_1 - l_e* >= reduction (l_1 - min l)``;
    the selection is ``n`` epochs evenly spaced over 1..e* (rounded; fewer when e* < n).

    Raises:
        ValueError: no checkpoints, or checkpoints without a training loss.
    """
    if not checkpoints:
        raise ValueError("no checkpoints to select from; record them while training")
    losses = np.array([c.train_loss for c in checkpoints], dtype=np.float64)
    if not np.isfinite(losses).all():
        raise ValueError(
            "checkpoints lack their training loss; record them with "
            "monai_forget.handlers.CheckpointRecorder"
        )
    fall = losses[0] - losses.min()
    cut = int(np.argmax(losses[0] - losses >= reduction * fall)) if fall > 0 else 0
    picks = np.unique(np.round(np.linspace(0, cut, num=min(n, cut + 1))).astype(int))
    return [checkpoints[i] for i in picks]


def _cross_entropy(logits: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(logits, label)


def self_influence(
    model: nn.Module,
    checkpoints: Sequence[Checkpoint],
    data: object,
    *,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = _cross_entropy,
    batch_size: int = 128,
    device: str | torch.device = "cpu",
) -> np.ndarray:
    """TracInCP self-influence of every sample (Appendix A.5; Pruthi et al. 2020, Eq. 3).

    Args:
        model: a network of the trained architecture (its own weights are not used and
            not changed: each checkpoint's weights are passed functionally).
        checkpoints: the checkpoints theta_k with their learning rates eta_k.
        data: a :class:`~monai_forget.data.LabelledImages` (or a pair ``(images,
            labels)``) of the samples to score.
        loss_fn: ``loss(logits (1, K), label (1,)) -> scalar``; default cross-entropy.
        batch_size: samples per vectorised gradient computation.
        device: where to compute.

    Returns:
        float64 ``(N,)``: ``sum_k eta_k ||grad loss(theta_k; z_i)||^2``.

    Raises:
        ValueError: no checkpoints, or a checkpoint that does not fit the model.
    """
    if not checkpoints:
        raise ValueError("TracInCP needs at least one checkpoint; record them while training")
    if isinstance(data, tuple):
        images, labels = data
    else:
        images, labels = data.images, data.labels
    images = torch.tensor(np.asarray(images), dtype=torch.float32)  # a copy: inputs stay as given
    labels = torch.tensor(np.asarray(labels), dtype=torch.int64)
    device = torch.device(device)
    was_training = model.training
    model.eval()
    names = [name for name, _ in model.named_parameters()]
    buffer_names = [name for name, _ in model.named_buffers()]

    def sample_loss(params, buffers, x, y):
        out = functional_call(model, (params, buffers), (x.unsqueeze(0),))
        return loss_fn(out, y.unsqueeze(0))

    def squared_grad_norm(params, buffers, x, y):
        grads = grad(sample_loss)(params, buffers, x, y)
        return torch.stack([g.pow(2).sum() for g in grads.values()]).sum()

    per_sample = vmap(squared_grad_norm, in_dims=(None, None, 0, 0))
    total = torch.zeros(len(labels), dtype=torch.float64)
    try:
        for ckpt in checkpoints:
            missing = [n for n in names + buffer_names if n not in ckpt.state_dict]
            if missing:
                raise ValueError(
                    f"checkpoint lacks {missing[:3]} of the model's tensors; record "
                    "checkpoints of this architecture"
                )
            params = {n: ckpt.state_dict[n].detach().to(device) for n in names}
            buffers = {n: ckpt.state_dict[n].detach().to(device) for n in buffer_names}
            for start in range(0, len(labels), batch_size):
                x = images[start : start + batch_size].to(device)
                y = labels[start : start + batch_size].to(device)
                sq = per_sample(params, buffers, x, y).detach().to("cpu", torch.float64)
                total[start : start + len(y)] += ckpt.learning_rate * sq
    finally:
        model.train(was_training)
    return total.numpy()
