"""One federated withdrawal end to end: providers -> FLARE run -> forgetting rate + audits.

The default federation is real data: ACDC cine-MRI slices (pathology classification,
5 classes), split into providers that are disjoint groups of patients
(:func:`acdc_federation`). :func:`simulate_withdrawal` runs FedAvg on the NVIDIA FLARE
simulator (:func:`~monai_forget.fl.job.run_federated`) with one provider withdrawing at
a chosen round, then measures the withdrawal (Liu et al. 2020, "Learn to Forget:
User-Level Memorization Elimination in Federated Learning": forgetting rate of Section
IV-A; this project's K-S and EMA withdrawal audits on the withdrawn provider and on a
remaining one; accuracy before and after). ``monai-forget fl simulate``, the CI test and
``benchmarks/memorisation_elimination.py`` all go through here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from monai_forget import defaults
from monai_forget.auditor_registry import AUDITORS, auditor_kind
from monai_forget.data import LabelledImages
from monai_forget.defaults import FORSAKEN_GENERATOR
from monai_forget.fl.job import run_federated
from monai_forget.fl.outcome import WithdrawalOutcome
from monai_forget.fl.shadow import FedAvgShadowRecipe
from monai_forget.fl.spec import FederatedConfig, Removal, Withdrawal
from monai_forget.shadow import SupervisedRecipe
from monai_forget.unlearning.evaluation import AuditPlan, evaluate_withdrawal
from monai_forget.unlearning.oracle import MembershipOracle
from monai_forget.unlearning.retrain_reference import compare_with_retraining, retrained_models
from monai_forget.unlearning.scenario import (
    Federation,
    build_federation,
    build_patient_federation,
)

__all__ = [
    "DEFAULT_GENERATOR",
    "acdc_feature_federation",
    "acdc_federation",
    "audit_recipe",
    "federated_oracle",
    "mlp_config",
    "sample_federation",
    "simulate_withdrawal",
]

#: Protocol 1 settings of the federated runs: 20 L-BFGS iterations (5 steps each),
#: λ_r (change from the original model) 0.03, no separate step-length penalty.
DEFAULT_GENERATOR: Mapping[str, Any] = dict(FORSAKEN_GENERATOR)  # picklable for FLARE


def acdc_federation(
    root: str | os.PathLike | None = None,
    *,
    size: int = defaults.FL_SLICE_SIZE,
    n_clients: int = defaults.FL_CLIENTS,
    patients_per_class: int = defaults.FL_PATIENTS_PER_CLASS["acdc"],
    centre: bool = True,
    seed: int = 0,
    data: LabelledImages | None = None,
) -> Federation:
    """ACDC providers: disjoint patient groups, one patient per class each by default.

    Loads the 2D slices (:func:`monai_forget.data.load_acdc_slices`, resized to
    ``size x size``) and splits the 70 patients with
    :func:`~monai_forget.unlearning.scenario.build_patient_federation` (2 calibration
    patients and 4 oracle-shadow patients per class; the rest is the test set).
    ``data`` skips the loading (slices loaded beforehand, e.g. to build several
    federations).
    """
    from monai_forget.data import load_acdc_slices

    if data is None:
        data = load_acdc_slices(root, size=size)
    return build_patient_federation(
        data,
        n_clients=n_clients,
        patients_per_class=patients_per_class,
        centre=centre,
        seed=seed,
    )


def acdc_feature_federation(
    root: str | os.PathLike | None = None,
    *,
    n_clients: int = defaults.FL_CLIENTS,
    patients_per_class: int = defaults.FL_PATIENTS_PER_CLASS["acdc-features"],
    seed: int = 0,
    data: LabelledImages | None = None,
) -> Federation:
    """ACDC patient diagnosis from clinical features: a federated task that generalises.

    Each sample is one patient: the spacing-free features of the expert ED and ES masks
    (:func:`monai_forget.acdc.release.expert_feature_rows`, Isensee et al. 2017), as a
    ``(1, 1, F)`` vector labelled with the patient's group. All 100 patients of the
    SSL4MIS release take part: ``n_clients`` providers x ``patients_per_class`` patients
    per group (by default 3 x 15), 2 calibration and 4 oracle-shadow patients per group,
    the rest (5 per group) is the test set. Features are standardised with the
    calibration patients' mean and deviation. ``data`` skips the loading
    (:func:`monai_forget.acdc.release.feature_images` computed beforehand).
    """
    from monai_forget.acdc.release import expert_feature_rows, feature_images
    from monai_forget.data import data_root

    if data is None:
        data = feature_images(expert_feature_rows(root or data_root()))
    return build_patient_federation(
        data,
        n_clients=n_clients,
        patients_per_class=patients_per_class,
        centre=True,
        scale=True,
        seed=seed,
    )


def sample_federation(
    name: str,
    root: str | os.PathLike | None = None,
    *,
    n_clients: int = defaults.FL_CLIENTS,
    per_client: int = defaults.FL_PER_CLIENT,
    signed: str | None = None,
    label_skew: Sequence[float] | None = None,
    seed: int = 0,
) -> Federation:
    """Random sample partitions of PneumoniaMNIST (``"pneumoniamnist"``, training split)
    or of the MNIST test digits (``"mnist"``); ``signed`` adds the constructed site
    signature (:func:`~monai_forget.unlearning.scenario.add_site_frame`); ``label_skew``
    gives each provider its share of class 1 (PneumoniaMNIST: pneumonia)."""
    from monai_forget.data import load_mnist_test, load_pneumoniamnist

    if name == "pneumoniamnist":
        data = load_pneumoniamnist("train", root)
    elif name == "mnist":
        data = load_mnist_test(root)
    else:
        raise ValueError(f"unknown data set {name!r}; use 'pneumoniamnist' or 'mnist'")
    return build_federation(
        data,
        n_clients=n_clients,
        per_client=per_client,
        signed=signed,
        label_skew=label_skew,
        seed=seed,
    )


def mlp_config(
    federation: Federation,
    *,
    hidden: Sequence[int] = defaults.FL_HIDDEN,
    rounds: int = defaults.FL_ROUNDS,
    local_steps: int = defaults.FL_LOCAL_STEPS,
    seed: int = 0,
) -> FederatedConfig:
    """FedAvg of an MLP sized for the federation's images and classes (Adam 1e-3,
    batch 32), one simulator thread per client."""
    first = next(iter(federation.clients.values()))
    return FederatedConfig(
        network="mlp",
        network_args={
            "in_shape": list(first.image_shape),
            "num_classes": int(first.num_classes),
            "hidden": [int(h) for h in hidden],
        },
        rounds=rounds,
        local_steps=local_steps,
        batch_size=32,
        learning_rate=1e-3,
        seed=seed,
        simulator_threads=len(federation.clients),
    )


def audit_recipe(config: FederatedConfig) -> SupervisedRecipe:
    """The auditors' shadow design: the clients' local recipe for the whole step budget
    of one client (``rounds x local_steps``)."""
    return config.recipe(steps=config.rounds * config.local_steps)


def federated_oracle(
    federation: Federation,
    config: FederatedConfig,
    *,
    label_confidence: bool = True,
    seed: int = 0,
    device: str | torch.device = "cpu",
    cache_dir: str | Path | None = None,
) -> MembershipOracle:
    """The forgetting rate's membership oracle with a shadow trained like the target.

    The shadow model is trained by FedAvg in one process
    (:class:`~monai_forget.fl.shadow.FedAvgShadowRecipe`: as many simulated clients as
    the federation has, the same rounds and local recipe, patients kept whole), on the
    federation's shadow members; the classifier learns from its outputs on the shadow
    members and non-members (split by patient for patient federations).

    Args:
        federation: The providers and the oracle's shadow data.
        config: The federation's training design.
        label_confidence: Append the true-class confidence to the sorted confidence
            vector (the class-aware input of Shokri et al.'s per-class attack models).
            With ``False`` the oracle sees the sorted vector only, which cannot tell a
            member from a confidently misclassified non-member.
        seed: Seeds the shadow and the trees.
        device: Torch device.
        cache_dir: Shadow and prediction cache.
    """
    recipe = FedAvgShadowRecipe(
        config.recipe(),
        clients=len(federation.clients),
        rounds=config.rounds,
        group_of=federation.group_of,
    )
    oracle = MembershipOracle(
        recipe, label_confidence=label_confidence, seed=seed, device=device, cache_dir=cache_dir
    )
    if federation.shadow_nonmembers is not None:
        return oracle.fit_split(federation.shadow, federation.shadow_nonmembers)
    return oracle.fit(federation.shadow)


#: Fewest providers the reference-model auditor can audit: its known members are the
#: providers that stayed other than the one audited.
REFMODEL_MIN_PROVIDERS = 3


def default_auditors(n_providers: int) -> tuple[str, ...]:
    """The auditors a withdrawal runs by default: the reference-model auditor (the
    product's default) where there are enough providers for it, and the papers' K-S and
    EMA auditors."""
    return tuple(
        kind.name
        for kind in AUDITORS
        if kind.calibration != "known" or n_providers >= REFMODEL_MIN_PROVIDERS
    )


def check_withdrawal(
    clients: Sequence[str],
    withdrawing: str,
    remaining: Sequence[str] | None = None,
    auditors: Sequence[str] = (),
    retrained: int = 0,
) -> list[str]:
    """Refuse a withdrawal that cannot be run or measured, before any data is read;
    return the remaining providers to audit (default: the first one that stays).

    Raises:
        ValueError: fewer than 2 providers, a withdrawing or remaining provider that is
            not one (or the withdrawing one), the reference-model auditor with fewer than
            :data:`REFMODEL_MIN_PROVIDERS` providers, or 1-2 retrained models.
    """
    if len(clients) < 2:
        raise ValueError(f"a federation needs at least 2 providers (`clients`), got {len(clients)}")
    if withdrawing not in clients:
        raise ValueError(f"withdrawing provider {withdrawing!r} is not one of {sorted(clients)}")
    stay = [c for c in clients if c != withdrawing]
    remaining = list(remaining) if remaining is not None else stay[:1]
    if withdrawing in remaining:
        raise ValueError("the remaining provider must be one that stays, not the withdrawing one")
    unknown = sorted(set(remaining) - set(stay))
    if unknown:
        raise ValueError(f"remaining providers {unknown} are not among those that stay {stay}")
    known = [k.name for k in map(auditor_kind, auditors) if k.calibration == "known"]
    if known and len(clients) < REFMODEL_MIN_PROVIDERS:
        raise ValueError(
            f"the reference-model auditor ({known[0]}) needs 3 or more providers: its known "
            "members are the providers that stayed other than the one audited; add providers "
            f"or drop {known[0]}"
        )
    if retrained < 0 or retrained in (1, 2):
        raise ValueError(
            f"{retrained} retrained models: the spread of retraining needs at least 3 models "
            "(or 0 to skip the comparison)"
        )
    return remaining


def simulate_withdrawal(
    federation: Federation,
    config: FederatedConfig,
    withdrawal: Withdrawal | Removal,
    workspace: str | Path,
    *,
    remaining: Sequence[str] | None = None,
    oracle: MembershipOracle | None = None,
    plan: AuditPlan | None = None,
    backend: str = "simulator",
    retrained: int = 0,
) -> WithdrawalOutcome:
    """Run FedAvg on FLARE with ``withdrawal``, then measure it.

    Args:
        federation: Providers and the auditors' and oracle's data.
        config: Local training and rounds.
        withdrawal: Who leaves, when and how: during training (:class:`Withdrawal`), or
            removed after it (:class:`~monai_forget.fl.spec.Removal`: the federation
            trains with every provider, then a second FLARE run removes it;
            :func:`~monai_forget.fl.erase.remove_after_training`). The model measured
            against is the one the provider left: the global model of its withdrawal
            round, or the trained federation's.
        workspace: The FLARE workspace (job files, client records, logs).
        remaining: Providers audited as controls (default: the first one that stays).
        oracle: A fitted oracle (default: :func:`federated_oracle`).
        plan: The auditors, their seed, device and cache (default
            :class:`~monai_forget.unlearning.evaluation.AuditPlan`'s: K-S and EMA).
        backend: ``"simulator"`` or ``"poc"`` (see :func:`~monai_forget.fl.job.run_federated`).
        retrained: k >= 3 models retrained by FedAvg without the provider (seeds
            ``1000 + seed``, ...) to compare the final model with, and whose forgetting
            rate on the same oracle is reported beside the method's; 0: none.

    Raises:
        ValueError: bad providers or withdrawal, or 1-2 retrained models (before FLARE
            starts).
        WithdrawalError: the withdrawing client could not compute its update.
    """
    plan = AuditPlan() if plan is None else plan
    site, seed, device = withdrawal.client, plan.seed, plan.device
    clients = list(federation.clients)
    remaining = check_withdrawal(clients, site, remaining, plan.auditors, retrained)
    cost = None
    if isinstance(withdrawal, Removal):
        from monai_forget.fl.erase import remove_after_training

        run, before, cost = remove_after_training(
            federation.clients, config, withdrawal, workspace, backend=backend
        )
    else:
        run = run_federated(
            federation.clients, config, workspace, withdrawal=withdrawal, backend=backend
        )
        before = run.model_before_withdrawal()
    if oracle is None:
        oracle = federated_oracle(
            federation, config, seed=seed, device=device, cache_dir=plan.cache_dir
        )
    evaluation = evaluate_withdrawal(
        withdrawal.method,
        before,
        run.global_model,
        federation,
        site,
        remaining,
        audit_recipe(config),
        oracle=oracle,
        plan=plan,
    )
    evaluation.seconds.update(
        {"flare_run": run.seconds, "elimination": float(run.record.get("seconds", 0.0))}
    )
    outcome = WithdrawalOutcome(run, evaluation, federation.description, site=site, cost=cost)
    if retrained:
        data = federation.clients[site]
        references = retrained_models(federation.clients, site, config, retrained, seed=1000 + seed)
        outcome.versus_retraining = compare_with_retraining(
            run.global_model, references, data, device=device
        )
        # B.R.R x the retrained models' mean share of the withdrawn samples called
        # non-members: the FR that retraining itself scores on this oracle.
        called_out = [1 - oracle.is_member(m, data).mean() for m in references]
        outcome.retraining_forgetting_rate = float(evaluation.rate.brr * np.mean(called_out))
    return outcome
