"""One protocol for every withdrawal auditor: the same leading parameters of
``fit_reference`` and ``audit``; every reference audits typed outputs by
``reference.audit(outputs, *, label)``; the offline route (a reference, then the target's
outputs) and the evaluation-time metric give the whole flow's result, every detail of it;
the result is frozen."""

from __future__ import annotations

import dataclasses
import inspect
import json

import numpy as np
import pytest

from monai_forget.audit import (
    EMAAuditor,
    EMAReference,
    KSAuditor,
    KSReference,
    Reference,
    ReferenceModelAuditor,
    RefModelReference,
    WithdrawalAuditor,
)
from monai_forget.audit.refmodel import ROLES
from monai_forget.data import load_digits
from monai_forget.inference import predict
from monai_forget.metrics.refmodel import compute_reference_model_audit
from monai_forget.shadow import ShadowTrainer, SupervisedRecipe

RECIPE = SupervisedRecipe("mlp", {"in_shape": (1, 8, 8), "num_classes": 10}, steps=40)
AUDITORS = (KSAuditor, EMAAuditor, ReferenceModelAuditor)
REFERENCES = (KSReference, EMAReference, RefModelReference)


def _leading(method, count: int) -> list[str]:
    names = [p for p in inspect.signature(method).parameters if p != "self"]
    return names[:count]


def _label_is_keyword_only(method) -> bool:
    label = inspect.signature(method).parameters["label"]
    return label.kind is inspect.Parameter.KEYWORD_ONLY and label.default == ""


@pytest.mark.parametrize("auditor", AUDITORS, ids=lambda a: a.__name__)
def test_every_auditor_has_the_protocols_signatures(auditor) -> None:
    assert isinstance(auditor(), WithdrawalAuditor)
    assert _leading(auditor.fit_reference, 2) == ["query", "calibration"]
    assert _leading(auditor.audit, 3) == ["target", "query", "calibration"]
    assert _label_is_keyword_only(auditor.audit)
    assert not hasattr(auditor, "audit_predictions")  # one route: reference.audit


@pytest.mark.parametrize("reference", REFERENCES, ids=lambda r: r.__name__)
def test_every_reference_audits_outputs_alone(reference) -> None:
    """``reference.audit(outputs, *, label)``: the outputs its one positional argument."""
    assert issubclass(reference, Reference)
    parameters = list(inspect.signature(reference.audit).parameters.values())[1:]
    assert parameters[0].kind is inspect.Parameter.POSITIONAL_ONLY
    assert [p.kind for p in parameters[1:]] == [inspect.Parameter.KEYWORD_ONLY]
    assert _label_is_keyword_only(reference.audit)


def test_a_reference_model_reference_refuses_untyped_outputs(scenario, tmp_path) -> None:
    """A dict of signals (the old route, which dropped the target's accuracy) is refused
    with the typed constructor named."""
    _, query, calibration = scenario
    auditor = ReferenceModelAuditor(recipe=RECIPE, cache_dir=tmp_path, n_references=2)
    reference = auditor.fit_reference(query, calibration.split(0.5, seed=1))
    signal = {role: np.zeros(n) for role, n in reference.sizes().items()}
    with pytest.raises(TypeError, match=r"reference.outputs\(\{role: Predictions\}\)"):
        reference.audit(signal)


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
        offline = auditor.fit_reference(query, calibration).audit(outputs, label="A")
        assert (offline.decision, offline.statistic) == (whole.decision, whole.statistic)
        assert offline.details == whole.details and offline.label == "A"
        with pytest.raises(dataclasses.FrozenInstanceError):
            whole.decision = "forgotten"  # type: ignore[misc]


def test_reference_model_routes_give_the_whole_flows_details(scenario, tmp_path) -> None:
    """The whole flow, the offline route and the evaluation-time metric on the same outputs:
    one decision, one p-value, every detail alike (the target's accuracy on the known
    non-members included, with which the "check the recipe" warning is decided)."""
    target, query, calibration = scenario
    known = calibration.split(0.5, seed=1)
    auditor = ReferenceModelAuditor(recipe=RECIPE, cache_dir=tmp_path, n_references=4, seed=3)
    population = load_digits().subset(np.arange(900, 1500))
    whole = auditor.audit(target, query, known, population=population, label="A")
    reference = auditor.fit_reference(query, known, population)
    offline = reference.audit(
        reference.outputs({role: predict(target, auditor.roles_[role]) for role in ROLES}),
        label="A",
    )
    audit_set = auditor.audit_set()
    metric = compute_reference_model_audit(
        predict(target, audit_set).probs, audit_set.labels, audit_set.images, reference
    )
    nonmembers = auditor.roles_["nonmembers"]
    accuracy = np.mean(predict(target, nonmembers).probs.argmax(1) == nonmembers.labels)
    assert whole.details["target_accuracy_nonmembers"] == pytest.approx(accuracy, abs=1e-12)
    # the whole flow adds what only it knows: how the known sets were halved, site images
    added = {"group_pattern": None, "site_images": 0}
    for route in (offline, metric):
        assert (route.decision, route.statistic) == (whole.decision, whole.statistic)
        np.testing.assert_equal({**route.details, **added}, whole.details)
    assert set(whole.provenance["cache_entries"]) >= {
        str(p) for p in tmp_path.rglob("*.pt")
    }  # every reference model that decided, by file and SHA-256


def test_a_saved_reference_keeps_the_auditors_seed(scenario, tmp_path) -> None:
    """``reference.json`` round trip: the seed of the audit's folds and permutations goes
    with the reference, so a handler built from the file gives the auditor's p-value."""
    target, query, calibration = scenario
    auditor = ReferenceModelAuditor(recipe=RECIPE, cache_dir=tmp_path, n_references=4, seed=7)
    reference = auditor.fit_reference(query, calibration.split(0.5, seed=1))
    again = RefModelReference.from_dict(json.loads(json.dumps(reference.to_dict())))
    outputs = reference.outputs({role: predict(target, auditor.roles_[role]) for role in ROLES})
    assert again.seed == 7
    assert again.audit(outputs).statistic == reference.audit(outputs).statistic
