"""Is an unlearned model indistinguishable from models retrained without the provider?

The field judges unlearning against its gold standard, retraining from scratch: U-LiRA
(Hayes et al., "Inexact Unlearning Needs More Careful Evaluations to Avoid a False
Sense of Privacy", 2024) fits, per example, the distribution of outputs of retrained
models and of unlearned models, and asks how well a likelihood-ratio test tells them
apart. Here (ours, an offline variant: one unlearned model, no unlearned shadows) k
models are retrained by the federation's own FedAvg without the provider, with seeds
the unlearned model never used, and the unlearned model's outputs on the withdrawn data
are compared with their spread:

- per example x: ``phi(x) = log p_y - log(sum_{j != y} p_j)`` (LiRA's logit-scaled
  confidence), and ``z(x) = (phi_u(x) - mean_k phi_k(x)) / (sd_k phi_k(x) sqrt(1 + 1/k))``,
  a predictive t statistic with k - 1 degrees of freedom; the share of examples with a
  two-sided p below 0.05 is reported (about 5 % when the model is like a retrained one;
  the examples are not independent, so this share is descriptive);
- set level (the decision): ``T(m) = mean_x phi_m(x)`` for each model; under the
  hypothesis that the unlearned model is one more draw of retraining, ``(T_u - mean
  T_k) / (sd T_k sqrt(1 + 1/k))`` follows a t distribution with k - 1 degrees of freedom
  (T is a mean over many examples, close to normal); two-sided, because an unlearned
  model *less* confident than retraining on the withdrawn data is as distinguishable as
  one more confident (the "Streisand effect" of over-forgetting).

The same comparison of the model *before* the withdrawal says whether there was
anything to forget: a provider the model never measurably learned is "already
forgotten", and an unlearning method gets no credit for it.

Not rejecting "like retraining" is not evidence of it: a test with little power never
rejects. :func:`equivalence_to_retraining` is the equivalence test (two one-sided
tests, Schuirmann 1987): with ``mu_R`` the mean of ``T`` over retraining, the unlearned
model is "equivalent to retraining" at margin ``delta`` only when the ``1 - 2 alpha``
confidence interval of ``T_u - mu_R``, ``T_u - mean T_k +- t_{1-alpha, k-1} sd(T_k) /
sqrt(k)``, lies inside ``(-delta, delta)``; the unlearned model is the one being judged,
so the interval carries retraining's uncertainty only. ``T`` is the mean ``phi`` on the
withdrawn data or (ours, given data none of the models trained on) its advantage over
that reference data, which cancels the seed-to-seed shift of a model's overall
confidence. The margin is declared before the judged model is seen;
``benchmarks/elimination_paper.py`` sets it to half the membership gap of retraining
(mean ``phi`` on its members minus on data it never saw), and runs the same test on the
never-withdrawn model and on one more retrained model to show it has power both ways.

A retrained model is itself judged by its own ``T``, which differs from ``mu_R`` by
retraining's seed-to-seed spread: where that spread is not small beside the margin, the
test calls exact retraining "not shown equivalent" too, and more references do not
remove it (the interval narrows, the spread stays). So the result also counts how many
of the k retrained models the same test passes, each judged against the other k - 1
(``retraining_passes``, k >= 4): a "not shown equivalent" is read against that count
(``benchmarks/equivalence_miss_rate.py`` measures the rate over many draws).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.stats
import torch
from torch import nn

from monai_forget.checks import HALF_LEVEL, POSITIVE, check_in
from monai_forget.data import LabelledImages
from monai_forget.defaults import RETRAINED_ALPHA
from monai_forget.results import Result
from monai_forget.unlearning.baselines import fedavg
from monai_forget.unlearning.confidence import logit_confidences

__all__ = [
    "RetrainComparison",
    "RetrainEquivalence",
    "compare_with_retraining",
    "equivalence_to_retraining",
    "retrained_models",
]

INDISTINGUISHABLE = "indistinguishable from retraining"
REMEMBERS = "distinguishable: more confident than retraining (remembers)"
OVERFORGETS = "distinguishable: less confident than retraining (over-forgets)"


@dataclass
class RetrainComparison(Result):
    """One model's outputs on the withdrawn data against k retrained models'.

    Attributes:
        decision: :data:`INDISTINGUISHABLE`, :data:`REMEMBERS` or :data:`OVERFORGETS`.
        pvalue: two-sided p-value of the set-level predictive t test.
        statistic: ``T_u - mean T_k`` (mean logit confidence, model minus retraining).
        t: the predictive t statistic.
        model_mean: ``T_u``.
        retrained_means: ``T_k`` of each retrained model.
        flagged_share: share of examples whose per-example two-sided p < 0.05.
        examples: number of withdrawn examples.
        alpha: the level of the decision.
    """

    decision: str
    pvalue: float
    statistic: float
    t: float
    model_mean: float
    retrained_means: list[float]
    flagged_share: float
    examples: int
    alpha: float

    def summary(self) -> str:
        return (
            f"{self.decision} (p = {self.pvalue:.3g}; mean logit confidence "
            f"{self.model_mean:.3f} vs retrained {np.mean(self.retrained_means):.3f} +- "
            f"{np.std(self.retrained_means, ddof=1):.3f}, k = {len(self.retrained_means)}; "
            f"{100 * self.flagged_share:.0f} % of {self.examples} examples flagged)"
        )


def compare_with_retraining(
    model: nn.Module | np.ndarray,
    retrained: Sequence[nn.Module] | np.ndarray,
    data: LabelledImages | None = None,
    *,
    alpha: float = RETRAINED_ALPHA,
    device: str | torch.device = "cpu",
) -> RetrainComparison:
    """Compare ``model`` with ``retrained`` on the withdrawn ``data`` (module docstring).

    Args:
        model: the unlearned (or any) model, or its ``(N,)`` logit confidences.
        retrained: k >= 3 models retrained without the provider, or their ``(k, N)``
            logit confidences on the same examples.
        data: the withdrawn provider's data (needed when models are given).
        alpha: level of the set-level decision.
        device: torch device.

    Raises:
        ValueError: fewer than 3 retrained models, or outputs of different lengths.
    """
    if (isinstance(model, nn.Module) or not isinstance(retrained, np.ndarray)) and data is None:
        raise ValueError("pass the withdrawn data to score the models on")
    phi_u = (
        logit_confidences(model, data, device)
        if isinstance(model, nn.Module)
        else np.asarray(model)
    )
    phi_k = (
        np.asarray(retrained, dtype=np.float64)
        if isinstance(retrained, np.ndarray)
        else np.stack([logit_confidences(m, data, device) for m in retrained])
    )
    k = phi_k.shape[0]
    if k < 3:
        raise ValueError(f"{k} retrained models: the spread of retraining needs at least 3")
    if phi_k.shape[1] != phi_u.shape[0]:
        raise ValueError(f"{phi_u.shape[0]} model outputs for {phi_k.shape[1]} retrained outputs")
    inflate = math.sqrt(1 + 1 / k)
    spread = phi_k.std(axis=0, ddof=1)
    gap = phi_u - phi_k.mean(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = gap / (spread * inflate)
    per_example = 2 * scipy.stats.t.sf(np.abs(z), df=k - 1)
    # No spread among the retrained models: only an identical output is like them.
    per_example = np.where(spread > 0, per_example, np.where(gap == 0, 1.0, 0.0))
    means = phi_k.mean(axis=1)
    t_u = float(phi_u.mean())
    diff = t_u - float(means.mean())
    scale = float(means.std(ddof=1)) * inflate
    t = diff / scale if scale > 0 else (0.0 if diff == 0 else math.copysign(math.inf, diff))
    pvalue = float(2 * scipy.stats.t.sf(abs(t), df=k - 1))
    decision = INDISTINGUISHABLE if pvalue > alpha else REMEMBERS if diff > 0 else OVERFORGETS
    return RetrainComparison(
        decision=decision,
        pvalue=pvalue,
        statistic=diff,
        t=float(t),
        model_mean=t_u,
        retrained_means=means.tolist(),
        flagged_share=float(np.mean(per_example < 0.05)),
        examples=int(phi_u.shape[0]),
        alpha=float(alpha),
    )


EQUIVALENT = "equivalent to retraining"
NOT_SHOWN_EQUIVALENT = "not shown equivalent to retraining"


@dataclass
class RetrainEquivalence(Result):
    """The equivalence test of one model against k retrained models (module docstring).

    Attributes:
        decision: :data:`EQUIVALENT` or :data:`NOT_SHOWN_EQUIVALENT`.
        difference: ``T_u - mean T_k`` (mean logit confidence on the withdrawn data, or
            its advantage over the reference data).
        interval: ``1 - 2 alpha`` confidence interval of ``T_u - mu_R``.
        margin: the equivalence margin ``delta``.
        model_mean: ``T_u``.
        retrained_means: ``T_k`` of each retrained model.
        alpha: level of each one-sided test.
        reference_pvalue: with reference data, the two-sided p of the model's mean
            confidence there against the retrained models' (the set-level predictive t
            test of :func:`compare_with_retraining`); ``None`` without.
        retraining_passes: how many of the k retrained models the same test (margin,
            alpha) calls equivalent when each is judged against the other k - 1: its pass
            rate on exact retraining with these references, the bar a "not shown
            equivalent" is read against (``None`` with k = 3: two references are too few).
    """

    decision: str
    difference: float
    interval: tuple[float, float]
    margin: float
    model_mean: float
    retrained_means: list[float]
    alpha: float
    reference_pvalue: float | None = None
    retraining_passes: int | None = None

    @property
    def changed_elsewhere(self) -> bool:
        """The model's confidence on data none of the models saw differs from retraining's."""
        return self.reference_pvalue is not None and self.reference_pvalue <= self.alpha

    def summary(self) -> str:
        low, high = self.interval
        text = (
            f"{self.decision}: T_u - mu_R = {self.difference:+.3f}, "
            f"{100 * (1 - 2 * self.alpha):.0f} % interval [{low:+.3f}, {high:+.3f}], "
            f"margin +-{self.margin:.3f} (k = {len(self.retrained_means)})"
        )
        if self.changed_elsewhere:
            text += (
                f"; its confidence on the reference data differs from retraining's "
                f"(p = {self.reference_pvalue:.3g})"
            )
        if self.retraining_passes is not None:
            text += (
                f"; the test passes {self.retraining_passes} of the "
                f"{len(self.retrained_means)} retrained models, each judged against the others"
            )
        return text


def equivalence_to_retraining(
    model_confidence: object,
    retrained_confidence: object,
    margin: float,
    *,
    model_reference: object | None = None,
    retrained_reference: object | None = None,
    alpha: float = RETRAINED_ALPHA,
) -> RetrainEquivalence:
    """Is the model within ``margin`` of retraining? Two one-sided tests on ``T``.

    ``T`` is a model's mean logit confidence on the withdrawn data or, with the
    ``*_reference`` confidences on data none of the models trained on, its advantage
    there: ``mean phi(withdrawn) - mean phi(reference)``. The advantage cancels what
    moves a model's confidence everywhere (retrained models differ from seed to seed
    far more in their overall confidence than in what they remember of a few hundred
    samples), so the test can have power with a handful of retrained models. A model
    whose advantage is like retraining's because it changed everywhere (e.g. uniform
    outputs on every input) is not like retraining: with references, "equivalent" also
    needs the model's mean confidence on the reference data within retraining's spread
    (:func:`compare_with_retraining`'s set-level test not rejecting at ``alpha``), a
    check that can only withhold "equivalent", never grant it.

    Args:
        model_confidence: the judged model's ``(N,)`` logit confidences on the withdrawn data.
        retrained_confidence: ``(k, N)`` logit confidences of k >= 3 retrained models.
        margin: ``delta > 0``, in units of mean logit confidence, declared beforehand.
        model_reference: the judged model's ``(M,)`` logit confidences on reference data
            none of the models trained on (given with ``retrained_reference``).
        retrained_reference: the retrained models' ``(k, M)`` confidences on it.
        alpha: level of each one-sided test (the interval is ``1 - 2 alpha``).

    Raises:
        ValueError: fewer than 3 retrained models, mismatched lengths, only one of the
            references, a margin that is not positive, or alpha outside (0, 0.5).
    """
    phi_u = np.asarray(model_confidence, dtype=np.float64)
    phi_k = np.asarray(retrained_confidence, dtype=np.float64)
    if phi_k.ndim != 2 or phi_k.shape[0] < 3:
        raise ValueError("pass the (k, N) confidences of at least 3 retrained models")
    if phi_u.shape != phi_k.shape[1:]:
        raise ValueError(f"{phi_u.shape} model confidences for {phi_k.shape[1:]} retrained ones")
    check_in("margin", margin, POSITIVE)
    check_in("alpha", alpha, HALF_LEVEL)
    if (model_reference is None) != (retrained_reference is None):
        raise ValueError("pass both model_reference and retrained_reference, or neither")
    ref_u = ref_k = None
    if model_reference is not None:
        ref_u = np.asarray(model_reference, dtype=np.float64)
        ref_k = np.asarray(retrained_reference, dtype=np.float64)
        if ref_k.ndim != 2 or ref_k.shape[0] != phi_k.shape[0] or ref_u.shape != ref_k.shape[1:]:
            raise ValueError(
                f"reference confidences {ref_u.shape} and {ref_k.shape} do not match "
                f"{phi_k.shape[0]} retrained models on the same reference samples"
            )
    found = _two_one_sided(phi_u, phi_k, margin, ref_u, ref_k, alpha)
    k = len(phi_k)
    if k >= 4:
        # each retrained model judged against the others: exact retraining's pass count
        found.retraining_passes = 0
        for i in range(k):
            others = np.arange(k) != i
            own, rest = (None, None) if ref_k is None else (ref_k[i], ref_k[others])
            retrained = _two_one_sided(phi_k[i], phi_k[others], margin, own, rest, alpha)
            found.retraining_passes += retrained.decision == EQUIVALENT
    return found


def _two_one_sided(
    phi_u: np.ndarray,
    phi_k: np.ndarray,
    margin: float,
    ref_u: np.ndarray | None,
    ref_k: np.ndarray | None,
    alpha: float,
) -> RetrainEquivalence:
    """:func:`equivalence_to_retraining`'s decision on checked arrays."""
    means = phi_k.mean(axis=1)
    t_u = float(phi_u.mean())
    reference_pvalue = None
    if ref_u is not None and ref_k is not None:
        t_u -= float(ref_u.mean())
        means = means - ref_k.mean(axis=1)
        reference_pvalue = compare_with_retraining(ref_u, ref_k, alpha=alpha).pvalue
    k = len(means)
    difference = t_u - float(means.mean())
    half = float(scipy.stats.t.ppf(1 - alpha, df=k - 1) * means.std(ddof=1) / math.sqrt(k))
    interval = (difference - half, difference + half)
    inside = -margin < interval[0] and interval[1] < margin
    elsewhere = reference_pvalue is not None and reference_pvalue <= alpha
    return RetrainEquivalence(
        decision=EQUIVALENT if inside and not elsewhere else NOT_SHOWN_EQUIVALENT,
        difference=difference,
        interval=interval,
        margin=float(margin),
        model_mean=t_u,
        retrained_means=means.tolist(),
        alpha=float(alpha),
        reference_pvalue=reference_pvalue,
    )


def retrained_models(
    clients: Mapping[str, LabelledImages],
    withdrawn: str,
    config: object,
    k: int,
    *,
    seed: int = 1000,
    device: str | torch.device = "cpu",
) -> list[nn.Module]:
    """k models trained from scratch by FedAvg over every client but ``withdrawn``, with
    the federation's local recipe and rounds (``config``: a
    :class:`~monai_forget.fl.spec.FederatedConfig`), seeds ``seed``, ``seed + 1``, ...
    (keep them apart from the seeds of the runs being judged)."""
    if withdrawn not in clients:
        raise ValueError(f"withdrawn client {withdrawn!r} is not one of {sorted(clients)}")
    remaining = [data for name, data in clients.items() if name != withdrawn]
    recipe = config.recipe()  # type: ignore[attr-defined]
    models = []
    for j in range(k):
        torch.manual_seed(seed + j)
        model = recipe.build()
        fedavg(model, remaining, recipe, config.rounds, seed=seed + j, device=torch.device(device))  # type: ignore[attr-defined]
        models.append(model.eval())
    return models
