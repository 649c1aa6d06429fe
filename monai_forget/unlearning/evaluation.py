"""Judge a withdrawal: forgetting rate, withdrawal audits and accuracy, before and after.

After a provider withdraws, three independent views say whether the model forgot it and
what it cost:

- the forgetting rate of Liu et al. 2020 (Section IV-A): a membership oracle's calls on
  the withdrawn samples before and after (:mod:`~monai_forget.unlearning.rate`);
- the withdrawal auditors (K-S calibrated ratio, EMA) on the withdrawn provider's data
  and on a remaining provider's data, each with a calibration set from that provider's
  distribution (split by patient for EMA when the federation says how);
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

from monai_forget.audit import AuditResult, EMAAuditor, KSAuditor
from monai_forget.data import DataOverlapError, LabelledImages, check_disjoint
from monai_forget.inference import predict
from monai_forget.shadow import Recipe
from monai_forget.unlearning.forgetting import forgetting_degree
from monai_forget.unlearning.oracle import MembershipOracle
from monai_forget.unlearning.rate import ForgettingRate, forgetting_rate
from monai_forget.unlearning.scenario import Federation

__all__ = ["WithdrawalEvaluation", "accuracy", "ema_audit_with_split", "evaluate_withdrawal"]

AUDITORS = {"ks": KSAuditor, "ema": EMAAuditor}


def accuracy(model: nn.Module, data: LabelledImages, device: str | torch.device = "cpu") -> float:
    """Share of ``data`` the model classifies correctly."""
    p = predict(model, data, device=device)
    return float(np.mean(p.probs.argmax(axis=1) == p.labels))


@dataclass
class WithdrawalEvaluation:
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
    auditors: Sequence[str] = ("ks", "ema"),
    audit_before: bool = True,
    seed: int = 0,
    device: str | torch.device = "cpu",
    cache_dir: str | Path | None = None,
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
        auditors: Which auditors to run (``"ks"``, ``"ema"``).
        audit_before: Also audit ``before`` on the withdrawn provider.
        seed: Seeds shadow training and splits.
        device: Torch device.
        cache_dir: Shadow and prediction cache.
    """
    unknown = set(auditors) - set(AUDITORS)
    if unknown:
        raise ValueError(f"unknown auditors {sorted(unknown)}; use 'ks' and/or 'ema'")
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
    plan = [("after", after, withdrawn)] + [("after", after, s) for s in remaining]
    if audit_before:
        plan.insert(0, ("before", before, withdrawn))
    for stage, model, site in plan:
        for name in auditors:
            auditor = AUDITORS[name](**options)
            text = f"{label}: {stage} withdrawal, provider {site}"
            split = federation.calibration_split.get(site)
            if name == "ema" and split is not None:
                audit = ema_audit_with_split(auditor, model, federation.clients[site], split, text)
            else:
                audit = auditor.audit(
                    model, federation.clients[site], federation.calibration[site], label=text
                )
            result.audits[(stage, site, name)] = audit
    return result


def ema_audit_with_split(
    auditor: EMAAuditor,
    target: nn.Module,
    query: LabelledImages,
    split: tuple[LabelledImages, LabelledImages],
    label: str = "",
) -> AuditResult:
    """EMA (Huang et al. 2021) with its calibration member / non-member split given.

    :meth:`EMAAuditor.audit` splits the calibration set at random. With correlated
    samples (the slices of one patient) that puts slices of the reference model's own
    training patients among its "non-members", and the thresholds it learns no longer
    separate members from unseen patients. Here the reference model trains on
    ``split[0]`` and the thresholds are fitted on its outputs on ``split[0]`` (members)
    and ``split[1]`` (non-members), split by patient by the caller.
    """
    members, nonmembers = split
    try:
        check_disjoint(members, nonmembers)
    except DataOverlapError as err:
        raise ValueError(
            f"the calibration split's members and non-members share samples ({err}); split "
            "the calibration set into disjoint parts (by patient)"
        ) from err
    calibration = members.concat(nonmembers)
    auditor._start(query, calibration)
    reference = target if auditor.calibration_outputs == "target" else auditor._train(members)
    result = auditor.audit_predictions(
        auditor._predict(target, query),
        auditor._predict(reference, members),
        auditor._predict(reference, nonmembers),
        label=label,
    )
    result.provenance = auditor._provenance(
        {"target": target, "calibration_reference": reference},
        {"query": query, "calibration": calibration},
        **auditor._options,
        calibration_split="given (by patient)",
    )
    return result
