"""Judge a withdrawal: forgetting rate, withdrawal audits and accuracy, before and after.

After a provider withdraws, three independent views say whether the model forgot it and
what it cost:

- the forgetting rate of Liu et al. 2020 (Section IV-A): a membership oracle's calls on
  the withdrawn samples before and after (:mod:`~monai_forget.unlearning.rate`);
- the withdrawal auditors (K-S calibrated ratio, EMA, the reference-model auditor) on
  the withdrawn provider's data and on a remaining provider's data, each with a
  calibration set from that provider's distribution (split by patient for EMA when the
  federation says how); the reference-model auditor's known members are the providers
  that stayed, other than the one audited;
- accuracy on every provider's training data and on held-out test data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from monai_forget.audit import AuditResult
from monai_forget.auditor_registry import auditor_kind
from monai_forget.data import LabelledImages, concat
from monai_forget.data.overlap import without_overlap
from monai_forget.defaults import DEVICE, SEED
from monai_forget.inference import predict
from monai_forget.results import Result
from monai_forget.shadow import Recipe
from monai_forget.unlearning.forgetting import forgetting_degree
from monai_forget.unlearning.oracle import MembershipOracle
from monai_forget.unlearning.rate import ForgettingRate, forgetting_rate
from monai_forget.unlearning.scenario import Federation

__all__ = [
    "AuditPlan",
    "WithdrawalEvaluation",
    "accuracy",
    "audit_calibration",
    "evaluate_withdrawal",
]


@dataclass(frozen=True)
class AuditPlan:
    """How a withdrawal is measured: which auditors run, on which models, and how their
    shadow or reference models (and the default oracle) are trained.

    Args:
        auditors: Which auditors to run (``"ks"``, ``"ema"``, ``"refmodel"``).
        audit_before: Also audit the model before the withdrawal on the withdrawn
            provider.
        seed: Seeds shadow training and splits.
        device: Torch device.
        cache_dir: Shadow and prediction cache.

    Raises:
        ValueError: an unknown auditor.
    """

    auditors: tuple[str, ...] = ("ks", "ema")
    audit_before: bool = True
    seed: int = SEED
    device: str | torch.device = DEVICE
    cache_dir: str | Path | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "auditors", tuple(self.auditors))
        for name in self.auditors:
            auditor_kind(name)  # refuses a renamed or unknown auditor, naming the choices


def accuracy(model: nn.Module, data: LabelledImages, device: str | torch.device = "cpu") -> float:
    """Share of ``data`` the model classifies correctly."""
    p = predict(model, data, device=device)
    return float(np.mean(p.probs.argmax(axis=1) == p.labels))


@dataclass
class WithdrawalEvaluation(Result):
    """Everything measured about one withdrawal.

    Attributes:
        label: Name of the method or scenario (e.g. ``"forsaken"``).
        rate: Forgetting rate of the withdrawn provider's samples.
        audits: ``(stage, site, method) -> AuditResult`` with stage ``before``/``after``.
        accuracy: ``stage -> {set name -> accuracy}``.
        degree: ``stage -> mean forgetting degree (Definition 2) on the withdrawn data``.
        seconds: Free-form timings (elimination, FLARE run, ...).
    """

    label: str
    rate: ForgettingRate
    audits: dict[tuple[str, str, str], AuditResult] = field(default_factory=dict)
    accuracy: dict[str, dict[str, float]] = field(default_factory=dict)
    degree: dict[str, float] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def decision(self, stage: str, site: str, method: str) -> str:
        return self.audits[(stage, site, method)].decision

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "rate": self.rate.to_dict(),
            "audits": {
                f"{stage}/{site}/{method}": {
                    "decision": r.decision,
                    "statistic_name": r.statistic_name,
                    "statistic": r.statistic,
                }
                for (stage, site, method), r in self.audits.items()
            },
            "accuracy": self.accuracy,
            "degree": self.degree,
            "seconds": self.seconds,
        }

    def summary(self) -> str:
        lines = [
            f"{self.label}: forgetting rate {self.rate.summary()} (alone it does not show "
            "elimination: read it beside the FR retraining gets on the same oracle)"
        ]
        lines += [
            f"  {stage} withdrawal, provider {site}, {method.upper()}: {r.statistic_name} = "
            f"{r.statistic:.4g} -> {r.decision}"
            for (stage, site, method), r in self.audits.items()
        ]
        return "\n".join(lines)


def evaluate_withdrawal(
    label: str,
    before: nn.Module,
    after: nn.Module,
    federation: Federation,
    withdrawn: str,
    remaining: Sequence[str],
    recipe: Recipe,
    *,
    oracle: MembershipOracle | None = None,
    plan: AuditPlan | None = None,
) -> WithdrawalEvaluation:
    """Measure a withdrawal of ``withdrawn`` from ``before`` to ``after``.

    Args:
        label: Name of what is evaluated.
        before: The model before the withdrawal.
        after: The model after it.
        federation: Providers, calibration and test data.
        withdrawn: The provider that left.
        remaining: Providers that stayed (audited as controls).
        recipe: The training design shadow models follow.
        oracle: A fitted membership oracle; if ``None``, fitted here on
            ``federation.shadow`` (and ``federation.shadow_nonmembers`` when the split
            is by patient).
        plan: The auditors and their settings (default :class:`AuditPlan`'s).
    """
    plan = AuditPlan() if plan is None else plan
    seed, device, cache_dir = plan.seed, plan.device, plan.cache_dir
    if oracle is None:
        oracle = MembershipOracle(recipe, seed=seed, device=device, cache_dir=cache_dir)
        if federation.shadow_nonmembers is not None:
            oracle.fit_split(federation.shadow, federation.shadow_nonmembers)
        else:
            oracle.fit(federation.shadow)
    query = federation.clients[withdrawn]
    rate = forgetting_rate(oracle.is_member(before, query), oracle.is_member(after, query))
    result = WithdrawalEvaluation(label, rate)
    sets = {**federation.clients, "test": federation.test}
    for stage, model in (("before", before), ("after", after)):
        result.accuracy[stage] = {name: accuracy(model, d, device) for name, d in sets.items()}
        probs = predict(model, query, device=device).probs
        result.degree[stage] = float(forgetting_degree(probs).mean())
    options = {"recipe": recipe, "seed": seed, "device": device, "cache_dir": cache_dir}
    audited = [("after", after, withdrawn)] + [("after", after, s) for s in remaining]
    if plan.audit_before:
        audited.insert(0, ("before", before, withdrawn))
    for stage, model, site in audited:
        for name in plan.auditors:
            auditor = auditor_kind(name).auditor(**options)
            text = f"{label}: {stage} withdrawal, provider {site}"
            calibration = audit_calibration(name, federation, site, withdrawn)
            result.audits[(stage, site, name)] = auditor.audit(
                model, federation.clients[site], calibration, label=text
            )
    return result


def audit_calibration(name: str, federation: Federation, site: str, withdrawn: str) -> object:
    """What auditor ``name`` (``"ks"``, ``"ema"``, ``"refmodel"``) calibrates on when it
    audits provider ``site`` after ``withdrawn`` left the federation."""
    if auditor_kind(name).calibration == "known":
        # Known members: the providers that stayed, other than the one audited (the
        # withdrawn provider is a member only before its withdrawal).
        members = [d for s, d in federation.clients.items() if s not in (site, withdrawn)]
        if not members:
            raise ValueError(
                f"the reference-model audit of provider {site} needs known members: a "
                f"provider other than {site} and {withdrawn} that stayed; the federation has "
                f"{sorted(federation.clients)}"
            )
        # Public data sets hold exact duplicates (PneumoniaMNIST): a copy of a scored
        # sample must not sit in another role.
        query = federation.clients[site]
        known = _distinct(without_overlap(concat(*members), query, "known members"))
        nonmembers = without_overlap(
            _distinct(federation.calibration[site]), concat(query, known), "known non-members"
        )
        return known, nonmembers
    # EMA takes the federation's calibration split (by patient) when it has one.
    split = federation.calibration_split.get(site) if name == "ema" else None
    return split if split is not None else federation.calibration[site]


def _distinct(data: LabelledImages) -> LabelledImages:
    """``data`` with one copy of each image (the reference-model audit splits a known set
    in halves, and two copies of one image must not end up in both)."""
    _, first = np.unique(data.sample_hashes, return_index=True)
    return data if len(first) == len(data) else data.subset(np.sort(first))
