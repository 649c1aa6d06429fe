"""Parameter mappings and the SGD step of Protocol 1 (Liu et al. 2020).

Shared by Forsaken's generator (:mod:`~monai_forget.unlearning.dummy_gradient`), the
baselines and the FLARE client: trainable parameters by name, shape checks with errors
that say what to recompute, the summed-gradient SGD step, and the elimination set's
checks.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

import torch
from torch import nn

from monai_forget.checks import COUNT, check_in
from monai_forget.data import LabelledImages

__all__ = [
    "Params",
    "apply_dummy_gradient",
    "check_elimination_set",
    "check_same_shapes",
    "sgd_step",
    "trainable_parameters",
]

Params = dict[str, torch.Tensor]


def trainable_parameters(model: nn.Module) -> Params:
    """Detached copies of the model's trainable floating-point parameters, by name."""
    params = {
        name: p.detach().clone()
        for name, p in model.named_parameters()
        if p.requires_grad and p.is_floating_point()
    }
    if not params:
        raise ValueError("the model has no trainable floating-point parameters to update")
    return params


def check_same_shapes(
    reference: Mapping[str, object], other: Mapping[str, torch.Tensor], what: str
) -> None:
    """Refuse a parameter mapping whose names or shapes differ from ``reference``.

    ``reference`` maps names to tensors or to shapes.

    Raises:
        ValueError: naming the missing/extra parameters or the first shape mismatch.
    """
    missing = sorted(set(reference) - set(other))
    extra = sorted(set(other) - set(reference))
    if missing or extra:
        raise ValueError(
            f"{what} does not match the model's parameters (missing {missing[:3]}, "
            f"unexpected {extra[:3]}); it must come from the same architecture"
        )
    for name, ref in reference.items():
        want = tuple(ref.shape) if hasattr(ref, "shape") else tuple(ref)
        got = tuple(other[name].shape)
        if got != want:
            raise ValueError(
                f"{what}: parameter {name!r} has shape {got} but the model's has shape "
                f"{want}; the model changed shape, so this {what} no longer applies: "
                "recompute it against the current model"
            )


def sgd_step(
    params: Mapping[str, torch.Tensor], gradient: Mapping[str, torch.Tensor], lr: float, n: int
) -> Params:
    """Apply a summed gradient as SGD would (Protocol 1 of Liu et al. 2020).

    ``W' = W - (η / n) ∇``, where ``∇`` is the gradient summed over ``n`` samples (so
    ``η / n`` times it is the usual mean-gradient step with learning rate ``η``).

    Args:
        params: The parameters ``W``.
        gradient: The summed (dummy) gradient, same names and shapes as ``params``.
        lr: Learning rate ``η``.
        n: Number of samples the gradient is summed over (``|D_e|``).
    """
    check_in("n (the elimination-set size)", n, COUNT)
    check_same_shapes(params, gradient, "gradient")
    scale = float(lr) / int(n)
    return {k: params[k] - scale * gradient[k].to(params[k]) for k in params}


def apply_dummy_gradient(
    model: nn.Module, gradient: Mapping[str, torch.Tensor], lr: float, n: int
) -> nn.Module:
    """A copy of ``model`` after one SGD step with ``gradient`` (see :func:`sgd_step`)."""
    new = copy.deepcopy(model)
    updated = sgd_step(trainable_parameters(model), gradient, lr, n)
    with torch.no_grad():
        for name, p in new.named_parameters():
            if name in updated:
                p.copy_(updated[name])
    return new


def check_elimination_set(model: nn.Module, data: LabelledImages, *, device: torch.device) -> int:
    """Refuse an empty elimination set or one with labels the model does not know.

    Returns:
        The number of classes K the model outputs.
    """
    if len(data) == 0:
        raise ValueError(
            "the elimination set is empty: a withdrawing user needs at least one of its "
            "samples to eliminate; pass the user's training data"
        )
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = model(torch.tensor(data.images[:1], device=device))
    finally:
        model.train(was_training)
    if out.ndim != 2:
        raise ValueError(
            f"the model returns shape {tuple(out.shape)}; the generator needs (B, K) class logits"
        )
    k = int(out.shape[1])
    if k < 2:
        raise ValueError(f"the model outputs {k} class; Definition 2 needs K >= 2 classes")
    top = int(data.labels.max())
    if top >= k:
        raise ValueError(
            f"the elimination set has label {top} but the model knows only classes 0..{k - 1}; "
            "the samples must come from the task the model was trained on"
        )
    return k
