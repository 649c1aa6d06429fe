"""Train K models of one :class:`SupervisedRecipe` at once, as one batched computation.

A tiny network trained one model at a time spends its time in the training loop, not in
arithmetic (on a GPU, the device idles between the launches of each step). Here the K
models' parameters are stacked along a new first axis and every step runs all K forward
and backward passes as one computation (``torch.func.functional_call`` under
``torch.func.vmap``), each model on its own mini-batch of its own training set.

The models are the recipe's: each is initialised exactly as
:meth:`ShadowTrainer.train <monai_forget.shadow.ShadowTrainer.train>` initialises it
(seeded with its own seed), sees the same mini-batches in the same order (the recipe's
own ``DataLoader`` sampler with its seeded generator, run over indices), and is updated
by the recipe's optimiser (Adam and SGD act on each parameter element alone, so one
optimiser over the stacked parameters is K optimisers, and each model's gradient is the
gradient of its own mean loss). Only the order of floating-point sums differs, so the
weights agree with one-at-a-time training to float tolerance (tests/test_grouped_training.py).
Randomness inside the network (dropout) is drawn per model but not from the same stream as
one-at-a-time training; networks with running statistics (batch norm) are not grouped.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from monai_forget.data import LabelledImages
from monai_forget.shadow.recipes import SupervisedRecipe

__all__ = ["fit_group", "group_refusal"]


def group_refusal(recipe: object, model: nn.Module) -> str | None:
    """Why models of ``recipe`` cannot be trained as a group, or ``None`` when they can."""
    if not isinstance(recipe, SupervisedRecipe):
        return f"{type(recipe).__name__} runs its own training loop"
    if recipe.amp:
        return "mixed precision keeps one gradient scaler per model"
    running = [name for name, m in model.named_modules() if getattr(m, "track_running_stats", 0)]
    if running:
        return f"running statistics are updated in place ({running[0]})"
    return None


def _index_batches(recipe: SupervisedRecipe, size: int, seed: int) -> torch.utils.data.DataLoader:
    """The recipe's mini-batch order for a set of ``size`` samples trained with ``seed``:
    the loader :meth:`SupervisedRecipe.fit` builds, over indices instead of samples
    (iterated once per epoch, a new iterator each time, as the trainer does)."""
    generator = torch.Generator().manual_seed(seed)
    indices = range(size)
    if recipe.steps is not None:
        sampler = torch.utils.data.RandomSampler(
            indices, num_samples=recipe.steps * recipe.batch_size, generator=generator
        )
        return torch.utils.data.DataLoader(indices, recipe.batch_size, sampler=sampler)
    return torch.utils.data.DataLoader(
        indices, recipe.batch_size, shuffle=True, generator=generator
    )


def fit_group(
    recipe: SupervisedRecipe,
    models: Sequence[nn.Module],
    datasets: Sequence[LabelledImages],
    seeds: Sequence[int],
    device: str | torch.device = "cpu",
) -> None:
    """Train ``models[k]`` on ``datasets[k]`` with ``seeds[k]`` in place, all at once.

    Args:
        recipe: the design (its optimiser, learning rate, batch size, steps or epochs).
        models: freshly initialised networks of the recipe (one architecture).
        datasets: one training set per model (any sizes with ``steps``; equal sizes with
            ``epochs``, whose passes would otherwise have different numbers of steps).
        seeds: one seed per model (its mini-batch order).
        device: where the group trains; the training sets are staged there once.

    Raises:
        ValueError: mismatched lengths, an empty set, a recipe or network that cannot be
            grouped (:func:`group_refusal`), or sets of different sizes with ``epochs``.
    """
    if not (len(models) == len(datasets) == len(seeds)) or not models:
        raise ValueError(
            f"got {len(models)} models, {len(datasets)} sets and {len(seeds)} seeds; pass one "
            "set and one seed per model"
        )
    refusal = group_refusal(recipe, models[0])
    if refusal:
        raise ValueError(f"these models cannot be trained as a group: {refusal}")
    sizes = [len(d) for d in datasets]
    if min(sizes) == 0:
        raise ValueError("cannot train a model on an empty data set")
    if recipe.steps is None and len(set(sizes)) > 1:
        raise ValueError(
            f"with epochs, a group needs training sets of one size (got {sorted(set(sizes))}): "
            "group the sets by size, or give the recipe steps"
        )
    device = torch.device(device)
    template = copy.deepcopy(models[0]).to("meta").train()
    names = [name for name, _ in models[0].named_parameters()]
    params = {
        name: torch.stack([dict(m.named_parameters())[name].detach() for m in models])
        .to(device)
        .requires_grad_()
        for name in names
    }
    buffers = {
        name: torch.stack([dict(m.named_buffers())[name] for m in models]).to(device)
        for name, _ in models[0].named_buffers()
    }
    optimizer = recipe.make_optimizer(list(params.values()))
    images, labels = _staged(datasets, device)
    rows = torch.arange(len(models), device=device)[:, None]

    def loss_of(p, b, x, y):
        out = torch.func.functional_call(template, (p, b), (x,))
        return nn.functional.cross_entropy(out, y)

    batched_loss = torch.func.vmap(loss_of, randomness="different")
    loaders = [_index_batches(recipe, n, s) for n, s in zip(sizes, seeds, strict=True)]
    epochs = 1 if recipe.steps is not None else recipe.epochs
    # Every step's mini-batch indices, on the device before the first step: the loop then
    # copies nothing from the host.
    batches = [
        torch.stack(batch).to(device) for _ in range(epochs) for batch in zip(*loaders, strict=True)
    ]
    for index in batches:
        optimizer.zero_grad(set_to_none=True)
        batched_loss(params, buffers, images[rows, index], labels[rows, index]).sum().backward()
        optimizer.step()
    with torch.no_grad():
        for k, model in enumerate(models):
            for name, param in model.named_parameters():
                param.copy_(params[name][k].to(param.device))


def _staged(datasets: Sequence[LabelledImages], device: torch.device):
    """The training sets as one ``(K, N_max, ...)`` image and ``(K, N_max)`` label tensor on
    ``device`` (shorter sets padded; a model's indices never reach its padding)."""
    longest = max(len(d) for d in datasets)
    shape = datasets[0].images.shape[1:]
    images = np.zeros((len(datasets), longest, *shape), np.float32)
    labels = np.zeros((len(datasets), longest), np.int64)
    for k, data in enumerate(datasets):
        images[k, : len(data)] = data.images
        labels[k, : len(data)] = data.labels
    return torch.from_numpy(images).to(device), torch.from_numpy(labels).to(device)
