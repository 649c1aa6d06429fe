"""Forsaken's dummy-gradient generator (Protocol 1, DummyG) of Liu et al. 2020.

Liu, Ma, Liu & Ma, "Learn to Forget: User-Level Memorization Elimination in Federated
Learning" (arXiv:2003.10933, 2020). A user who withdraws holds its elimination set
``D_e`` and the current model ``W_0``. It initialises a dummy gradient ``∇'`` with the
shapes of the model's parameters and tiny random values, and for ``e = 1..E``:

1. applies ``∇'`` to a copy of the model as SGD would (Protocol 1):
   ``W'_e = W_{e-1} - (η / |D_e|) ∇'`` (the SGD step with the *summed* gradient of
   ``|D_e|`` samples, learning rate ``η``);
2. runs ``D_e`` through the updated copy (``torch.func.functional_call``, so the
   autograd graph reaches ``∇'``);
3. optimises ``∇'`` (L-BFGS or Adam) on Eq. 4::

       L(∇') = 1/|D_e| Σ_{x ∈ D_e} || F(x; W'_e) - U ||_2^2      (distance to uniform, Def. 2)
             + λ_s || (η / |D_e|) ∇' ||_2^2                     (step-length constraint)
             + λ_r || W'_e - W_0 ||_2^2                          (change to the original model)

4. moves the copy to ``W_e = W'_e`` with the optimised ``∇'_e``.

Stopping at non-member confidence (ours, not the paper's; off by default). Eq. 4 pulls
``D_e``'s outputs toward uniform, further than a model that never saw ``D_e`` goes: on
federations that generalise, the paper's fixed E leaves the model *less* confident on
``D_e`` than models retrained without it (over-forgetting, measured in
``benchmarks/results/elimination_study.md``). With ``target_confidence`` set, iteration
stops at the first ``e`` whose mean LiRA logit confidence on ``D_e``
(``phi = z_y - logsumexp_{j != y} z_j``) is at or below the target, and that last step is
scaled back by bisection so the mean lands on the target: the paper's "best point"
(Sec. V, Fig. 10) read as "as confident as on data never trained on". The target is the
model's own mean ``phi`` on non-members the user holds
(:func:`~monai_forget.unlearning.confidence.mean_logit_confidence`), e.g. a validation
split it never trained on.

It returns the summed dummy gradient ``G = Σ_e ∇'_e``, so that one SGD step with ``G``
from the original model, ``W_0 - (η / |D_e|) G``, is the generator's final model
``W_E``. In federated training (Protocol 2, SecForget, :mod:`monai_forget.fl`)
the user sends that step as its update.

Reading of the paper. The issue this module implements restates Protocol 1 and Eq. 4 in
words; the norms (squared Euclidean) and the penalty form of the step-length constraint
are our choice, documented in ``docs/unlearning.md``. The optimiser works on the step
``s = (η / |D_e|) ∇'`` itself, a change of variables that leaves Eq. 4's minimiser
unchanged (``∇' = (|D_e| / η) s``) and makes optimiser settings independent of ``η``
and ``|D_e|``.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch
from torch import nn
from torch.func import functional_call

from monai_forget.audit.refmodel import logit_confidence
from monai_forget.checks import COUNT, NON_NEGATIVE, POSITIVE, check_choice, check_in
from monai_forget.data import LabelledImages
from monai_forget.unlearning.parameters import (
    Params,
    apply_dummy_gradient,
    check_elimination_set,
    trainable_parameters,
)

__all__ = ["DummyGradientGenerator", "DummyGradientResult", "Eq4Terms"]


@dataclass(frozen=True)
class Eq4Terms:
    """The three terms of Eq. 4 of Liu et al. 2020 and their weighted total.

    Attributes:
        distance: mean ``||F(x; W') - U||^2`` over the elimination set.
        step: ``||(η / |D_e|) ∇'||^2`` (unweighted).
        drift: ``||W' - W_0||^2`` (unweighted).
        total: ``distance + λ_s step + λ_r drift``.
    """

    distance: float
    step: float
    drift: float
    total: float


@dataclass
class DummyGradientResult:
    """What the generator returns: the summed dummy gradient and how it got there.

    Attributes:
        gradient: ``G = Σ_e ∇'_e`` by parameter name (CPU tensors).
        lr: The learning rate ``η`` the gradient is meant for.
        n: ``|D_e|``, the elimination-set size.
        history: Eq. 4 terms of the original model, then after every iteration.
        seconds: Wall-clock time of the generation.
        stopped_at: With ``target_confidence``: the iteration at which the target was
            reached (its step scaled back to land on it); ``None`` when it was not reached
            within ``iterations`` or no target was set.
        confidence: Mean logit confidence on ``D_e``: the original model's, then after
            every iteration (measured only with ``target_confidence``).
    """

    gradient: Params
    lr: float
    n: int
    history: list[Eq4Terms] = field(default_factory=list)
    seconds: float = 0.0
    stopped_at: int | None = None
    confidence: list[float] = field(default_factory=list)

    @property
    def step(self) -> Params:
        """The weight change ``-(η / |D_e|) G`` that one SGD step with ``G`` makes."""
        scale = self.lr / self.n
        return {k: -scale * g for k, g in self.gradient.items()}

    def apply(self, model: nn.Module) -> nn.Module:
        """A copy of ``model`` updated with ``G`` as SGD would: ``W_0 - (η / |D_e|) G``."""
        return apply_dummy_gradient(model, self.gradient, self.lr, self.n)


@dataclass
class _Elimination:
    """One generation's fixed inputs and its moving point ``W_e`` (``base``, updated in
    place after each iteration), shared by the objective, the optimiser and the
    confidence stop."""

    model: nn.Module
    base: dict[str, torch.Tensor]
    original: Mapping[str, torch.Tensor]
    images: torch.Tensor
    labels: np.ndarray

    def outputs(self, params: Mapping[str, torch.Tensor], chunk: slice) -> torch.Tensor:
        """The model's logits on ``images[chunk]`` at the weights ``params``."""
        buffers = dict(self.model.named_buffers())
        return functional_call(self.model, {**params, **buffers}, (self.images[chunk],))


@dataclass
class DummyGradientGenerator:
    """Forsaken (Liu et al. 2020), Protocol 1 (DummyG): a dummy gradient that makes a model forget.

    Args:
        lr: The SGD learning rate ``η`` of Protocol 1 (the step is ``η / |D_e|`` times
            the summed dummy gradient).
        iterations: ``E``, the number of generator iterations.
        optimizer: ``"lbfgs"`` (strong-Wolfe line search) or ``"adam"``.
        inner_steps: Optimiser steps per iteration (L-BFGS ``max_iter``; Adam steps).
        adam_lr: Adam's step size on the weight change (only for ``"adam"``).
        step_weight: ``λ_s``, weight of the step-length constraint of Eq. 4.
        drift_weight: ``λ_r``, weight of the regulariser penalising change from the
            original model.
        init_scale: Standard deviation of the tiny random initial dummy gradient (as a
            weight change).
        chunk_size: Samples per forward pass inside one objective evaluation (memory
            bound only; the objective is always the full-set mean).
        seed: Seeds the random initialisation.
        device: Where the model and the dummy gradient live (``"cpu"``, ``"cuda"``).
        target_confidence: Stop once the mean logit confidence on ``D_e`` falls to this
            value (see the module docstring; ours, not the paper's). ``None``: the
            paper's fixed ``iterations``.
    """

    lr: float = 0.1
    iterations: int = 10
    optimizer: Literal["lbfgs", "adam"] = "lbfgs"
    inner_steps: int = 5
    adam_lr: float = 1e-3
    step_weight: float = 0.1
    drift_weight: float = 0.1
    init_scale: float = 1e-6
    chunk_size: int = 1024
    seed: int = 0
    device: str | torch.device = "cpu"
    target_confidence: float | None = None

    def __post_init__(self) -> None:
        check_choice("optimizer", self.optimizer, ("lbfgs", "adam"))
        for name in ("iterations", "inner_steps", "chunk_size"):
            check_in(name, getattr(self, name), COUNT)
        check_in("lr (η)", self.lr, POSITIVE)
        for name in ("step_weight", "drift_weight", "init_scale"):
            check_in(name, getattr(self, name), NON_NEGATIVE)
        if self.target_confidence is not None and not math.isfinite(self.target_confidence):
            raise ValueError(
                f"target_confidence must be a finite mean logit confidence, got "
                f"{self.target_confidence}; measure it with mean_logit_confidence"
            )

    # ------------------------------------------------------------------ the objective

    def _objective(
        self,
        problem: _Elimination,
        step: Mapping[str, torch.Tensor],
        *,
        backward: bool = False,
    ) -> Eq4Terms:
        """Eq. 4 at ``W' = W_e + step`` (``step = -(η / |D_e|) ∇'``), optionally
        backpropagated.

        The distance term is accumulated over chunks of ``D_e``; with ``backward=True``
        the gradients of the full objective reach ``step``'s tensors.
        """
        base, original = problem.base, problem.original
        n = len(problem.images)
        distance = 0.0
        for start in range(0, n, self.chunk_size):
            current = {k: base[k] + step[k] for k in base}
            logits = problem.outputs(current, slice(start, start + self.chunk_size))
            probs = torch.softmax(logits, dim=1)
            uniform = 1.0 / probs.shape[1]
            part = ((probs - uniform) ** 2).sum() / n
            if backward:
                part.backward()
            distance += float(part.detach())
        step_norm = sum((s**2).sum() for s in step.values())
        drift = sum(((base[k] + step[k] - original[k]) ** 2).sum() for k in base)
        penalty = self.step_weight * step_norm + self.drift_weight * drift
        if backward:
            penalty.backward()
        return Eq4Terms(
            distance=distance,
            step=float(step_norm.detach()),
            drift=float(drift.detach()),
            total=distance + float(penalty.detach()),
        )

    # ------------------------------------------------------------------ Protocol 1

    def generate(self, model: nn.Module, data: LabelledImages) -> DummyGradientResult:
        """Run Protocol 1 on ``model`` (left unchanged) with elimination set ``data``.

        Returns:
            The summed dummy gradient ``G``; ``result.apply(model)`` is the model after
            elimination.

        Raises:
            ValueError: empty elimination set, labels the model does not know, or a
                generation that produced non-finite values (the model is untouched).
        """
        device = torch.device(self.device)
        start_time = time.perf_counter()
        work = copy.deepcopy(model).to(device).eval()
        for p in work.parameters():
            p.requires_grad_(False)
        check_elimination_set(work, data, device=device)
        n = len(data)
        images = torch.tensor(data.images, device=device)
        original = {k: v.to(device) for k, v in trainable_parameters(model).items()}
        base = {k: v.clone() for k, v in original.items()}
        generator = torch.Generator(device="cpu").manual_seed(self.seed)
        step = {
            k: (torch.randn(v.shape, generator=generator) * self.init_scale)
            .to(device=device, dtype=v.dtype)
            .requires_grad_(True)
            for k, v in original.items()
        }
        zero = {k: torch.zeros_like(v) for k, v in original.items()}
        problem = _Elimination(work, base, original, images, data.labels)
        history = [self._objective(problem, zero)]
        total_step = {k: torch.zeros_like(v) for k, v in original.items()}
        target = self.target_confidence
        confidence = [] if target is None else [self._confidence(problem)]
        stopped_at = None
        if target is not None and confidence[0] <= target:
            stopped_at = 0  # already as confident as on non-members: nothing to eliminate
        for e in range(1, 1 + (self.iterations if stopped_at is None else 0)):
            self._optimise(problem, step)
            with torch.no_grad():
                if not all(torch.isfinite(s).all() for s in step.values()):
                    raise ValueError(
                        "the dummy-gradient optimisation diverged (non-finite values); "
                        "lower adam_lr or raise step_weight/drift_weight; the model is "
                        "unchanged"
                    )
                scale = 1.0
                if target is not None:
                    reached = self._confidence(problem, step)
                    if reached <= target:
                        scale, reached = self._scale_to(problem, step, target)
                        stopped_at = e
                    confidence.append(reached)
                for k in base:
                    base[k] = base[k] + scale * step[k]
                    total_step[k] += scale * step[k]
            history.append(self._objective(problem, zero))
            if stopped_at is not None:
                break
        scale = n / self.lr  # ∇' = -(|D_e| / η) * step
        gradient = {k: (-scale * s).detach().cpu() for k, s in total_step.items()}
        return DummyGradientResult(
            gradient=gradient,
            lr=self.lr,
            n=n,
            history=history,
            seconds=time.perf_counter() - start_time,
            stopped_at=stopped_at,
            confidence=confidence,
        )

    def _confidence(
        self,
        problem: _Elimination,
        step: Mapping[str, torch.Tensor] | None = None,
        scale: float = 1.0,
    ) -> float:
        """Mean LiRA logit confidence on ``D_e`` at ``W_e + scale * step`` (no grad)."""
        base, n = problem.base, len(problem.images)
        params = base if step is None else {k: base[k] + scale * step[k] for k in base}
        total = 0.0
        with torch.no_grad():
            for start in range(0, n, self.chunk_size):
                chunk = slice(start, start + self.chunk_size)
                probs = torch.softmax(problem.outputs(params, chunk).double(), dim=1)
                total += float(logit_confidence(probs.cpu().numpy(), problem.labels[chunk]).sum())
        return total / n

    def _scale_to(
        self,
        problem: _Elimination,
        step: Mapping[str, torch.Tensor],
        target: float,
        rounds: int = 30,
    ) -> tuple[float, float]:
        """The fraction of ``step`` at which the mean confidence reaches ``target``, and
        the confidence there.

        Bisection on ``[0, 1]``: at 0 the confidence is above the target, at 1 at or
        below it; the returned end keeps it at or below (the confidence along one
        step is taken as monotone, which the bracket does not need for termination).
        """
        low, high = 0.0, 1.0
        at_high = self._confidence(problem, step, high)
        for _ in range(rounds):
            mid = 0.5 * (low + high)
            at_mid = self._confidence(problem, step, mid)
            if at_mid <= target:
                high, at_high = mid, at_mid
            else:
                low = mid
        return high, at_high

    def _optimise(self, problem: _Elimination, step: Mapping[str, torch.Tensor]) -> None:
        """Optimise the current dummy step on Eq. 4 (one Protocol 1 iteration)."""
        tensors = list(step.values())

        def closure() -> torch.Tensor:
            for t in tensors:
                t.grad = None
            terms = self._objective(problem, step, backward=True)
            return torch.tensor(terms.total)

        if self.optimizer == "lbfgs":
            opt = torch.optim.LBFGS(
                tensors, lr=1.0, max_iter=self.inner_steps, line_search_fn="strong_wolfe"
            )
            opt.step(closure)
        else:
            opt = torch.optim.Adam(tensors, lr=self.adam_lr)
            for _ in range(self.inner_steps):
                opt.zero_grad()
                closure()
                opt.step()
