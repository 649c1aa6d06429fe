"""One protocol for every withdrawal auditor: the same leading parameters of
``fit_reference``, ``audit`` and ``audit_predictions``; the offline route (a reference,
then the target's outputs) decides exactly as the whole flow does; the result is frozen."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

from monai_forget.audit import (
    EMAAuditor,
    KSAuditor,
    ReferenceModelAuditor,
    WithdrawalAuditor,
)
from monai_forget.audit.refmodel import ROLES
from monai_forget.data import load_digits
from monai_forget.inference import predict
from monai_forget.shadow import ShadowTrainer, SupervisedRecipe

RECIPE = SupervisedRecipe("mlp", {"in_shape": (1, 8, 8), "num_classes": 10}, steps=40)
AUDITORS = (KSAuditor, EMAAuditor, ReferenceModelAuditor)


def _leading(method, count: int) -> list[str]:
    names = [p for p in inspect.signature(method).parameters if p != "self"]
    return names[:count]


@pytest.mark.parametrize("auditor", AUDITORS, ids=lambda a: a.__name__)
def test_every_auditor_has_the_protocols_signatures(auditor) -> None:
    assert isinstance(auditor(), WithdrawalAuditor)
    assert _leading(auditor.fit_reference, 2) == ["query", "calibration"]
    assert _leading(auditor.audit, 3) == ["target", "query", "calibration"]
    assert _leading(auditor.audit_predictions, 2) == ["reference", "target"]
    for method in (auditor.audit, auditor.audit_predictions):
        label = inspect.signature(method).parameters["label"]
        assert label.kind is inspect.Parameter.KEYWORD_ONLY and label.default == ""


@pytest.fixture(scope="module")
def scenario():
    digits = load_digits()
    query, calibration = digits.subset(np.arange(0, 150)), digits.subset(np.arange(150, 750))
    target = ShadowTrainer(RECIPE).train(query.concat(digits.subset(np.arange(750, 900))), 5)
    return target, query, calibration


def test_ks_and_ema_offline_route_decides_as_the_whole_flow(scenario, tmp_path) -> None:
    target, query, calibration = scenario
    outputs = predict(target, query)
    for auditor in (KSAuditor(recipe=RECIPE, cache_dir=tmp_path),
                    EMAAuditor(recipe=RECIPE, cache_dir=tmp_path)):  # fmt: skip
        whole = auditor.audit(target, query, calibration, label="A")
        offline = auditor.audit_predictions(
            auditor.fit_reference(query, calibration), outputs, label="A"
        )
        assert (offline.decision, offline.statistic) == (whole.decision, whole.statistic)
        assert offline.details == whole.details and offline.label == "A"
        with pytest.raises(dataclasses.FrozenInstanceError):
            whole.decision = "forgotten"  # type: ignore[misc]


def test_reference_model_offline_route_decides_as_the_whole_flow(scenario, tmp_path) -> None:
    target, query, calibration = scenario
    known = calibration.split(0.5, seed=1)
    auditor = ReferenceModelAuditor(recipe=RECIPE, cache_dir=tmp_path, n_references=4)
    population = load_digits().subset(np.arange(900, 1500))
    whole = auditor.audit(target, query, known, population=population)
    reference = auditor.fit_reference(query, known, population)
    signal = {}
    for role in ROLES:
        out = predict(target, auditor.roles_[role])
        signal[role] = reference.signal(out.probs, out.labels)
    offline = auditor.audit_predictions(reference, signal)
    assert (offline.decision, offline.statistic) == (whole.decision, whole.statistic)
    assert (
        offline.details["membership_strength_upper"] == whole.details["membership_strength_upper"]
    )
    assert set(whole.provenance["cache_entries"]) >= {
        str(p) for p in tmp_path.rglob("*.pt")
    }  # every reference model that decided, by file and SHA-256
