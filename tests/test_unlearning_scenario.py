"""Patient providers, the patient-level oracle and EMA splits, and the FedAvg shadow
recipe, on small synthetic "patients" (no real data, no FLARE)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from monai_forget.audit import EMAAuditor
from monai_forget.data import LabelledImages
from monai_forget.fl.shadow import FedAvgShadowRecipe
from monai_forget.shadow import SupervisedRecipe
from monai_forget.unlearning import MembershipOracle
from monai_forget.unlearning.scenario import (
    add_site_frame,
    build_federation,
    build_patient_federation,
    patient_id,
)


def _patients(per_class: int = 12, classes: int = 3, slices: int = 4) -> LabelledImages:
    """``per_class`` patients per class, ``slices`` 6x6 slices each; a patient's slices
    share a random anatomy plus noise."""
    rng = np.random.default_rng(0)
    images, labels, ids = [], [], []
    for c in range(classes):
        for k in range(per_class):
            pid = f"patient{c * per_class + k + 1:03d}"
            anatomy = rng.uniform(0, 1, (1, 6, 6))
            for s in range(slices):
                images.append(anatomy + rng.normal(0, 0.05, (1, 6, 6)))
                labels.append(c)
                ids.append(f"{pid}_frame01_slice_{s}")
    return LabelledImages(np.array(images, np.float32), np.array(labels), tuple(ids), classes)


def test_patient_id_reads_acdc_ids() -> None:
    assert patient_id("patient007_frame02_slice_11") == "patient007"
    with pytest.raises(ValueError, match="patientNNN"):
        patient_id("mnist_test/3")


def test_patient_federation_keeps_every_patient_in_one_set() -> None:
    data = _patients(per_class=13)
    fed = build_patient_federation(
        data, n_clients=3, patients_per_class=2, calibration_per_class=2, shadow_per_class=4
    )
    sets = {
        **fed.clients,
        "calibration": fed.calibration["site-1"],
        "test": fed.test,
        "shadow": fed.shadow,
        "shadow_nonmembers": fed.shadow_nonmembers,
    }
    seen: dict[str, str] = {}
    for name, part in sets.items():
        for sid in part.ids:
            owner = seen.setdefault(patient_id(sid), name)
            assert owner == name, f"{patient_id(sid)} is in {owner} and {name}"
    # Every patient is used once: 3 classes x 13 patients.
    assert len(seen) == 39
    # Stratified by the patients' class: each provider has 2 patients of each class.
    for name in ("site-1", "site-2", "site-3"):
        assert np.bincount(fed.clients[name].labels).tolist() == [8, 8, 8]
    # 13 per class: 3 x 2 to providers, 2 to calibration, 4 to the oracle, 1 to test.
    assert len(fed.groups["site-1"]) == 6 and len(fed.groups["test"]) == 3
    # The EMA calibration split is by patient, and the calibration set is its union.
    members, nonmembers = fed.calibration_split["site-2"]
    assert not {patient_id(i) for i in members.ids} & {patient_id(i) for i in nonmembers.ids}
    assert len(members) + len(nonmembers) == len(fed.calibration["site-2"])
    assert fed.group_of is patient_id and fed.signed is None


def test_patient_federation_does_not_depend_on_the_label_numbering() -> None:
    """Renumbering the classes (another label order) sends every patient to the same set;
    the labels inside each set are renumbered, nothing else."""
    data = _patients(per_class=13)
    renumber = np.array([2, 0, 1])
    relabelled = LabelledImages(data.images, renumber[data.labels], data.ids, 3)
    before = build_patient_federation(data, patients_per_class=2, seed=5)
    after = build_patient_federation(relabelled, patients_per_class=2, seed=5)
    assert before.groups == after.groups
    for name in before.clients:
        np.testing.assert_array_equal(
            renumber[before.clients[name].labels], after.clients[name].labels
        )
    # A different seed does move patients (the check above is not vacuous).
    assert build_patient_federation(data, patients_per_class=2, seed=6).groups != before.groups


def test_patient_federation_centres_on_the_calibration_mean() -> None:
    data = _patients(per_class=13)
    raw = build_patient_federation(data, patients_per_class=2, centre=False)
    centred = build_patient_federation(data, patients_per_class=2, centre=True)
    offset = raw.calibration["site-1"].images.mean(axis=0)
    np.testing.assert_allclose(centred.calibration["site-1"].images.mean(axis=0), 0, atol=1e-6)
    np.testing.assert_allclose(
        centred.clients["site-3"].images, raw.clients["site-3"].images - offset, atol=1e-6
    )
    assert "centred" in centred.description and "raw inputs" in raw.description


def test_patient_federation_refuses_what_it_cannot_split() -> None:
    data = _patients(per_class=5)
    with pytest.raises(ValueError, match="patients but the split needs"):
        build_patient_federation(data, patients_per_class=2)
    with pytest.raises(ValueError, match="at least 2 providers"):
        build_patient_federation(data, n_clients=1)
    no_ids = LabelledImages(data.images, data.labels, None, 3)
    with pytest.raises(ValueError, match="sample ids"):
        build_patient_federation(no_ids)
    mixed = LabelledImages(data.images, np.roll(data.labels, 1), data.ids, 3)
    with pytest.raises(ValueError, match="one class per patient"):
        build_patient_federation(mixed)


def test_sample_federation_has_no_signature_unless_constructed() -> None:
    data = _patients(per_class=40, slices=5)
    plain = build_federation(data, per_client=50, calibration_size=20, test_size=40, shadow_size=40)
    assert plain.signed is None and "constructed" not in plain.description
    signed = build_federation(
        data, per_client=50, calibration_size=20, test_size=40, shadow_size=40, signed="site-2"
    )
    assert signed.signed == "site-2" and "constructed signature" in signed.description
    np.testing.assert_array_equal(signed.clients["site-2"].images[:, 0, 0, :], 1.0)
    np.testing.assert_array_equal(
        signed.clients["site-2"].images, add_site_frame(plain.clients["site-2"]).images
    )


def test_label_skewed_providers_have_their_class_shares_and_share_no_sample() -> None:
    data = _patients(per_class=100, classes=2, slices=5)  # 500 samples per class
    shares = (0.8, 0.2, 0.5)
    fed = build_federation(
        data, per_client=50, calibration_size=20, test_size=100, shadow_size=100,
        label_skew=shares, seed=1,
    )  # fmt: skip
    for name, share in zip(fed.clients, shares, strict=True):
        assert np.mean(fed.clients[name].labels) == pytest.approx(share)
        assert np.mean(fed.calibration[name].labels) == pytest.approx(share)
    sets = [*fed.clients.values(), *fed.calibration.values(), fed.test, fed.shadow]
    ids = [i for part in sets for i in part.ids]
    assert len(ids) == len(set(ids)) == 3 * 70 + 200
    assert "label skew (share of class 1): site-1 80 %" in fed.description
    with pytest.raises(ValueError, match="3 shares in"):
        build_federation(
            data, per_client=50, calibration_size=20, test_size=10, shadow_size=10,
            label_skew=(0.5, 0.5),
        )  # fmt: skip
    with pytest.raises(ValueError, match="not enough samples of each class"):
        build_federation(
            data, per_client=300, calibration_size=20, test_size=10, shadow_size=10,
            label_skew=(1.0, 1.0, 0.0),
        )  # fmt: skip
    three = _patients(per_class=100, classes=3, slices=2)
    with pytest.raises(ValueError, match="two-class data"):
        build_federation(
            three, per_client=20, calibration_size=5, test_size=10, shadow_size=10,
            label_skew=(0.5, 0.5, 0.5),
        )  # fmt: skip


def test_oracle_fit_split_uses_the_given_members() -> None:
    data = _patients()
    recipe = SupervisedRecipe(
        "mlp", {"in_shape": (1, 6, 6), "num_classes": 3, "hidden": (16,)}, steps=30, batch_size=8
    )
    members, nonmembers = data.subset(np.arange(0, 144, 2)), data.subset(np.arange(1, 144, 2))
    oracle = MembershipOracle(recipe).fit_split(members, nonmembers)
    # the oracle's training accuracy on its own shadow split: above chance (it learns the
    # members' outputs), as a boosted-trees oracle on 72 + 72 outputs does
    assert oracle.train_accuracy_ > 0.6
    with pytest.raises(ValueError, match="at least 2 shadow members"):
        MembershipOracle(recipe).fit_split(members.subset([0]), nonmembers)
    with pytest.raises(ValueError, match="pass recipe"):
        MembershipOracle().fit_split(members, nonmembers)


def test_ema_with_a_given_split_trains_the_reference_on_its_members(tmp_path) -> None:
    data = _patients(per_class=13)
    fed = build_patient_federation(data, patients_per_class=2)
    recipe = SupervisedRecipe(
        "mlp", {"in_shape": (1, 6, 6), "num_classes": 3, "hidden": (16,)}, steps=40, batch_size=8
    )
    auditor = EMAAuditor(recipe=recipe, cache_dir=tmp_path)
    torch.manual_seed(0)
    target = recipe.build()
    recipe.fit(target, fed.clients["site-1"], seed=0, device=torch.device("cpu"))
    target.eval()
    split = fed.calibration_split["site-1"]
    result = auditor.audit(target, fed.clients["site-1"], split, label="x")
    reference = auditor._train(split[0])
    expected = auditor.reference_from_predictions(
        auditor._predict(reference, split[0]), auditor._predict(reference, split[1])
    ).audit(auditor._predict(target, fed.clients["site-1"]))
    assert result.statistic == pytest.approx(expected.statistic)
    assert result.decision == expected.decision
    assert result.provenance["options"]["calibration_split"] == "given"
    with pytest.raises(ValueError, match="members and non-members share samples"):
        auditor.audit(target, fed.clients["site-1"], (split[0], split[0]))
    with pytest.raises(ValueError, match="calibration set"):
        auditor.audit(target, split[1], split)  # query inside calibration


def test_fedavg_shadow_recipe_is_the_mean_of_local_fits() -> None:
    data = _patients(per_class=4)
    local = SupervisedRecipe(
        "mlp", {"in_shape": (1, 6, 6), "num_classes": 3, "hidden": (8,)}, steps=5, batch_size=4
    )
    recipe = FedAvgShadowRecipe(local, clients=2, rounds=1, group_of=patient_id)
    parts = recipe.partition(data, seed=3)
    # Whole patients go to one simulated client.
    a, b = ({patient_id(i) for i in p.ids} for p in parts)
    assert a and b and not a & b and len(a | b) == 12
    torch.manual_seed(0)
    start = local.build()
    model = copy.deepcopy(start)
    recipe.fit(model, data, seed=3, device=torch.device("cpu"))
    fits = []
    for i, part in enumerate(parts):
        m = copy.deepcopy(start)
        local.fit(m, part, seed=3 * 100_003 + i, device=torch.device("cpu"))
        fits.append(m.state_dict())
    for k, v in model.state_dict().items():
        torch.testing.assert_close(v, (fits[0][k] + fits[1][k]) / 2)
    assert recipe.name.startswith("fedavg:") and recipe.name != FedAvgShadowRecipe(local, 3, 1).name
    with pytest.raises(ValueError, match="groups cannot fill"):
        FedAvgShadowRecipe(local, clients=13, rounds=1, group_of=patient_id).partition(data, 0)
    with pytest.raises(ValueError, match="must be an integer >= 1"):
        FedAvgShadowRecipe(local, clients=0, rounds=1)


@pytest.mark.slow
def test_withdrawal_evaluation_runs_the_reference_model_auditor(tmp_path) -> None:
    """The reference-model audit of a withdrawal: site-1's data is found remembered by the
    model trained with it, and far less of it by the model retrained without it; site-2,
    which stayed, is found remembered; the known members are the providers that stayed,
    other than the one audited (site-1's own data as a known member would overlap the
    query and be refused)."""
    from monai_forget.data import load_digits
    from monai_forget.unlearning.evaluation import AuditPlan, evaluate_withdrawal

    fed = build_federation(
        load_digits(), per_client=120, calibration_size=120, test_size=200, shadow_size=200
    )
    recipe = SupervisedRecipe(
        "mlp",
        {"in_shape": (1, 8, 8), "num_classes": 10, "hidden": (64,)},
        steps=300,
        learning_rate=3e-3,
    )
    oracle = MembershipOracle(recipe, cache_dir=tmp_path).fit(fed.shadow)

    def trained(*sites: str) -> torch.nn.Module:
        from monai_forget.data import concat

        torch.manual_seed(0)
        model = recipe.build()
        recipe.fit(model, concat(*(fed.clients[s] for s in sites)), seed=0, device="cpu")
        return model.eval()

    before, after = trained("site-1", "site-2", "site-3"), trained("site-2", "site-3")
    evaluation = evaluate_withdrawal(
        "retraining", before, after, fed, "site-1", ["site-2"], recipe,
        oracle=oracle, plan=AuditPlan(("refmodel",), cache_dir=tmp_path),
    )  # fmt: skip
    assert set(evaluation.audits) == {
        ("before", "site-1", "refmodel"),
        ("after", "site-1", "refmodel"),
        ("after", "site-2", "refmodel"),
    }
    # The data support "not forgotten" for both memberships: 120 remembered digits against
    # a per-sample AUC of about 0.65 (the power planning asks for fewer than 100). The
    # retrained model's decision is one draw of a test at alpha 0.05 (its false "not
    # forgotten" rate is measured in benchmarks/results/audit_calibration.md, not here);
    # its remembered share is asserted instead: far below the model trained with site-1.
    kept = evaluation.audits[("before", "site-1", "refmodel")]
    gone = evaluation.audits[("after", "site-1", "refmodel")]
    assert kept.decision == "not forgotten", kept.details["reason"]
    assert kept.details["needed_sizes"]["query"] < kept.sizes["query"]
    assert kept.details["membership_strength"] > 0.8
    assert gone.details["membership_strength"] < kept.details["membership_strength"] - 0.5
    assert gone.details["membership_strength_upper"] < kept.details["membership_strength"]
    assert kept.statistic < gone.statistic
    # site-2 stayed, and is found: 120 members against site-3's 60 known members.
    remaining = evaluation.audits[("after", "site-2", "refmodel")]
    assert remaining.decision == "not forgotten", remaining.details["reason"]
    assert remaining.sizes["members"] == 60 and remaining.sizes["query"] == 120
    # site-1's audits score half of site-2 and site-3 as known members.
    assert evaluation.audits[("after", "site-1", "refmodel")].sizes["members"] == 120
    two = build_federation(
        load_digits(), n_clients=2, per_client=100, calibration_size=100, test_size=100,
        shadow_size=100,
    )  # fmt: skip
    with pytest.raises(ValueError, match="needs known members"):
        evaluate_withdrawal(
            "x", before, after, two, "site-1", ["site-2"], recipe,
            oracle=oracle, plan=AuditPlan(("refmodel",), audit_before=False),
        )  # fmt: skip


def test_reference_model_roles_hold_no_copy_of_a_scored_image() -> None:
    """Public sets hold exact duplicates (PneumoniaMNIST): a copy of one image inside the
    calibration set, or of a query or known-member image, is kept out of the other roles
    the reference-model audit splits and scores."""
    import dataclasses

    from monai_forget.data import concat, load_digits
    from monai_forget.unlearning.evaluation import audit_calibration

    fed = build_federation(
        load_digits(), per_client=50, calibration_size=40, test_size=100, shadow_size=100
    )
    calibration = fed.calibration["site-2"]
    copies = concat(
        calibration.subset([0, 0]),  # a calibration image twice more
        fed.clients["site-2"].subset([3]),  # a query image
        fed.clients["site-3"].subset([5]),  # a known member's image
    )
    copied = LabelledImages(copies.images, copies.labels, [f"copy-{i}" for i in range(4)], 10)
    fed = dataclasses.replace(
        fed, calibration={**fed.calibration, "site-2": concat(calibration, copied)}
    )
    members, nonmembers = audit_calibration("refmodel", fed, "site-2", "site-1")
    hashes = [fed.clients["site-2"].sample_hashes, members.sample_hashes, nonmembers.sample_hashes]
    assert len(nonmembers) == 40 and len(members) == 50
    assert len(np.unique(nonmembers.sample_hashes)) == len(nonmembers)
    for i in range(3):
        for j in range(i + 1, 3):
            assert not set(hashes[i]) & set(hashes[j]), (i, j)


def test_an_audit_plan_refuses_an_unknown_auditor_before_any_training() -> None:
    """The plan is checked where it is built, so a federated run never trains for
    minutes and then fails on a misspelt auditor."""
    from monai_forget.unlearning.evaluation import AuditPlan

    with pytest.raises(ValueError, match=r"unknown auditor 'lira': choose from refmodel, ema, ks"):
        AuditPlan(("ks", "lira"))
    assert AuditPlan(["refmodel"]).auditors == ("refmodel",)
