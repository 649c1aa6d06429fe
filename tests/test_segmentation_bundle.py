"""The ACDC segmentation bundle and the pathology bundle's patient-level diagnosis,
through every command of ``bundles/acdc_segmentation/docs/README.md`` as a user types it.

One bounded scenario (module scope) runs the documented commands in order in copies of
both bundles: prepare -> train -> evaluate -> inference (NIfTI) -> TorchScript -> full
profile -> checks -> diagnosis from the predicted and the expert masks -> retrain
without a provider -> audit both models. Options appended to each command shrink the
network and the budget (:data:`DESIGN`, :data:`BUDGET`, :data:`SUBSET`); the diagnosis
classifier is the real one (80 patients' expert masks), so its accuracy is asserted.
"""

from __future__ import annotations

import csv
import json
import resource
import shutil
import subprocess
import time
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
import torch
from bundle_runs import IGNORED, _options
from commands import REPO, SCHEMA, check, commands_in, environment, needs_absent_schema, run_line

pytestmark = pytest.mark.slow  # end-to-end: trains models, runs commands

SEGMENTATION = REPO / "bundles" / "acdc_segmentation"
PATHOLOGY = REPO / "bundles" / "acdc_pathology_classification"
#: The documentation whose every command the scenario runs.
DOC = "bundles/acdc_segmentation/docs/README.md"
PROVIDER = "random2"

#: The cpu profile's UNet, shrunk: given to every command that builds the network.
DESIGN = {"channels": [4, 8, 16, 32, 64], "num_res_units": 1}
#: The training budget of every training (the target models and the audit's shadows).
BUDGET = {"patch_size": 64, "batch_size": 4, "epochs": 1, "steps_per_epoch": 3}
#: Four patients per group for training (enough known members for the reference-model
#: audit, whose unit is the patient; the budget, not the set, fixes the training time);
#: one per group evaluated.
SUBSET = {"max_per_class": 4}
VALIDATION = {"val_max_per_class": 1}
#: The audits' held-out calibration patients: the validation section (two per group),
#: and four reference models (two pairs, the fewest the audit takes).
CALIBRATION = {
    "calibration_sections": ["validation"],
    "calibration_max_per_class": 2,
    "n_references": 4,
}


def segmentation_commands() -> list[str]:
    """The commands of the segmentation bundle's docs, in their order."""
    return commands_in((REPO / DOC).read_text(encoding="utf-8"))


def _bounding(command: str, patients: list[str]) -> str:
    """The options appended to one documented command to bound it (``patients``: the
    test patients segmented and diagnosed from their predicted masks)."""
    design, few = _options(DESIGN), _options({"patients": patients})
    training = f"{design} {_options(BUDGET)} {_options(SUBSET)}"
    if "--mask_dir" in command:
        return few
    if "ckpt_export" in command:
        return design
    if "inference.json" in command:
        return f"{design} {few}"
    if "audit.json" in command:
        return f"{training} {_options(CALIBRATION)}"
    if "evaluate.json" in command:
        return f"{design} {_options(VALIDATION)}"
    if "multi_gpu_train.json" in command:  # it keeps the best epoch: validate every epoch
        return f"{training} {_options(VALIDATION)} --val_interval 1"
    if "configs/train.json" in command:
        return training
    return ""  # prepare, checks, the diagnosis classifier, expert-mask diagnosis


def _children_cpu() -> float:
    """CPU seconds used so far by finished child processes (user + system)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _test_patients(datalist: Path) -> list[str]:
    """The first test patient of each group."""
    first: dict[int, str] = {}
    for entry in json.loads(datalist.read_text())["test"]:
        first.setdefault(entry["label"], entry["patient"])
    return [first[g] for g in sorted(first)]


@pytest.fixture(scope="module")
def scenario(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Every documented command, in order, in copies of both bundles (siblings, as in
    the repository: the docs ``cd`` into the pathology bundle for the diagnosis)."""
    tmp = tmp_path_factory.mktemp("acdc_bundles")
    roots = {}
    for bundle in (SEGMENTATION, PATHOLOGY):
        roots[bundle.name] = tmp / "bundles" / bundle.name
        shutil.copytree(bundle, roots[bundle.name], ignore=shutil.ignore_patterns(*IGNORED))
    seg, path = roots[SEGMENTATION.name], roots[PATHOLOGY.name]
    schema = tmp / "meta_schema_20240725.json"
    if SCHEMA.is_file():
        shutil.copyfile(SCHEMA, schema)
    # One thread: the bounded networks are too small to gain from two, and two threads
    # on a busy 2-core machine made each slice's inference ~60x slower (measured).
    env = environment(shared_data, OMP_NUM_THREADS="1")
    runs: dict[str, subprocess.CompletedProcess] = {}
    patients: list[str] = []
    for command in segmentation_commands():
        if needs_absent_schema(command):
            continue
        if not patients and (seg / "data" / "acdc.json").is_file():
            patients = _test_patients(seg / "data" / "acdc.json")
        start, cpu = time.monotonic(), _children_cpu()
        runs[command] = check(
            run_line(
                command,
                path if "diagnosis" in command else seg,
                extra=_bounding(command, patients),
                replace={"/tmp/meta_schema_20240725.json": str(schema)},
                env=env,
                timeout=1200,
            )
        )
        wall, cpu = time.monotonic() - start, _children_cpu() - cpu
        print(f"{wall:6.1f} s wall {cpu:6.1f} s CPU  {command[:110]}")
    if SCHEMA.is_file():
        assert schema.read_bytes() == SCHEMA.read_bytes()  # verified offline, nothing downloaded
    return {"seg": seg, "path": path, "runs": runs, "patients": patients, "env": env}


def _command(scenario: dict, *parts: str, start: str = "python -m monai.bundle run") -> str:
    """The one documented command starting with ``start`` and containing every part."""
    (found,) = [c for c in scenario["runs"] if c.startswith(start) and all(p in c for p in parts)]
    return found


def test_every_documented_command_ran(scenario: dict) -> None:
    expected = [c for c in segmentation_commands() if not needs_absent_schema(c)]
    assert list(scenario["runs"]) == expected
    assert len(scenario["patients"]) == 5


def test_metadata_and_files() -> None:
    for name in (
        "LICENSE",
        "docs/README.md",
        "docs/data_license.txt",
        "large_files.yml",
        "configs/logging.conf",
    ):
        assert (SEGMENTATION / name).is_file(), name
    meta = json.loads((SEGMENTATION / "configs" / "metadata.json").read_text())
    assert meta["network_data_format"]["outputs"]["pred"]["channel_def"]["3"] == "LV"


@pytest.mark.parametrize("profile", [None, "cpu"])
def test_audit_shadows_get_the_profile_and_the_audited_design(profile: str | None) -> None:
    """audit.json overlaid on train.json (and a profile): the shadows are trained by the
    same configs, with the design the audit resolves, command-line options included."""
    from monai.bundle import ConfigParser

    configs = ["train.json", *([f"{profile}.json"] if profile else []), "audit.json"]
    parser = ConfigParser()
    parser.read_config([SEGMENTATION / "configs" / name for name in configs])
    parser["epochs"] = 2  # as `--epochs 2` would
    files = parser.get_parsed_content("shadow_trainer#config_files")
    assert [Path(f).name for f in files] == configs[:-1]
    overrides = parser.get_parsed_content("shadow_trainer#overrides")
    expected = json.loads((SEGMENTATION / "configs" / configs[-2]).read_text())["channels"]
    assert overrides["channels"] == expected and overrides["epochs"] == 2
    parser["shadow_settings"] = {"epochs": 3}
    assert parser.get_parsed_content("shadow_trainer#overrides")["epochs"] == 3


def test_training_writes_the_model_and_a_resumable_checkpoint(scenario: dict) -> None:
    for model in ("models/cpu/model.pt", "models/cpu/without_random2.pt", "models/model.pt"):
        model = scenario["seg"] / model
        summary = json.loads(model.with_name(model.stem + "_train.json").read_text())
        assert summary["epochs"] == 1 and summary["iterations"] == 3
        assert list(model.with_name(model.stem + "_resume").glob("resume_checkpoint_*.pt"))
        state = torch.load(model, weights_only=True)
        assert any(k.endswith("weight") for k in state)
    summary = json.loads((scenario["seg"] / "models/cpu/model_train.json").read_text())
    assert summary["training_data"]["patients"] == 5 * SUBSET["max_per_class"]  # whole patients
    without = json.loads((scenario["seg"] / "models/cpu/without_random2_train.json").read_text())
    assert PROVIDER in summary["training_data"]["entries_per_site"]
    assert list(without["training_data"]["entries_per_site"]) == ["random1"]


def test_training_logs_to_tensorboard_and_shadows_do_not(scenario: dict) -> None:
    """Issue 34, item 9: loss and validation Dice reach TensorBoard for the models the
    documented commands train; the audit's shadow models write no logs."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logs = scenario["seg"] / "logs"
    assert {p.name for p in logs.iterdir()} == {"model", "without_random2", "model_ddp"}
    events = EventAccumulator(str(logs / "model_ddp"))
    events.Reload()
    assert {"train_loss", "val_mean_dice"} <= set(events.Tags()["scalars"])
    summary = json.loads((scenario["seg"] / "models/cpu/model_ddp_train.json").read_text())
    assert len(events.Scalars("train_loss")) == summary["iterations"]  # one per iteration
    assert len(events.Scalars("val_mean_dice")) == summary["epochs"]


def test_multi_process_training_keeps_the_budget_and_the_best_epoch(scenario: dict) -> None:
    """The documented torchrun command (2 CPU processes, gloo): each process runs its
    share of the single-process budget, and the best validation epoch is saved, as a
    plain state dict of the unwrapped network."""
    import math

    model = scenario["seg"] / "models" / "cpu" / "model_ddp.pt"
    summary = json.loads(model.with_name("model_ddp_train.json").read_text())
    per_process = math.ceil(BUDGET["steps_per_epoch"] * BUDGET["batch_size"] / 2)
    assert summary["iterations_per_epoch"] == math.ceil(per_process / BUDGET["batch_size"])
    assert summary["checkpoint"]["selection"] == "best" and summary["checkpoint"]["epoch"] == 1
    state = torch.load(model, weights_only=True)
    assert not any(k.startswith("module.") for k in state)
    single = torch.load(scenario["seg"] / "models" / "cpu" / "model.pt", weights_only=True)
    assert state.keys() == single.keys()


def _validation_dice(log: str) -> dict[int, float]:
    """Epoch -> validation mean Dice, as the run printed them."""
    import re

    found = re.findall(r"Epoch\[(\d+)\] Metrics -- val_mean_dice: ([0-9.]+)", log)
    return {int(e): float(d) for e, d in found}


def test_the_best_epoch_is_kept_across_a_resume(scenario: dict, tmp_path: Path) -> None:
    """``--checkpoint_selection best`` with ``--resume True``: two epochs, stopped, then
    two more at a learning rate that wrecks the network, so the best epoch is one of the
    first two by construction. The resumed run must keep that model file untouched and
    name that epoch; one that forgot the best so far would take epoch 3 or 4."""
    import hashlib

    seg = tmp_path / "acdc_segmentation"
    shutil.copytree(scenario["seg"], seg, ignore=shutil.ignore_patterns("cache", "audit", "eval"))
    command = _command(
        scenario, "'configs/train.json','configs/cpu.json']\"", "--ckpt_file models/cpu/model.pt"
    )
    base = f"{_options(DESIGN)} {_options(SUBSET)} {_options(VALIDATION)} --val_interval 1"
    budget = {k: v for k, v in BUDGET.items() if k != "epochs"}
    extra = f"{base} {_options(budget)} --checkpoint_selection best"
    env, to = scenario["env"], {"models/cpu/model.pt": "models/best/model.pt"}
    first = check(
        run_line(command, seg, extra=f"{extra} --epochs 2", replace=to, env=env, timeout=1200)
    )
    model = seg / "models" / "best" / "model.pt"
    before = hashlib.sha256(model.read_bytes()).hexdigest()
    (seg / "models" / "best" / "model_train.json").unlink()  # stopped before the summary
    wreck = f"{extra} --epochs 4 --resume True --learning_rate 5.0"
    second = check(run_line(command, seg, extra=wreck, replace=to, env=env, timeout=1200))
    dice = {**_validation_dice(first.stdout + first.stderr)}
    dice.update(_validation_dice(second.stdout + second.stderr))
    assert sorted(dice) == [1, 2, 3, 4]
    best = max(dice, key=dice.get)
    assert best <= 2, dice  # the wrecked epochs are worse by construction
    summary = json.loads((seg / "models" / "best" / "model_train.json").read_text())
    assert summary["checkpoint"]["selection"] == "best" and summary["checkpoint"]["epoch"] == best
    assert summary["checkpoint"]["value"] == pytest.approx(dice[best], abs=1e-4)
    assert hashlib.sha256(model.read_bytes()).hexdigest() == before
    # the audit of such a model says it was chosen on the validation patients
    from monai_forget.bundles.segmentation import warn_if_selected_on_validation

    with pytest.warns(UserWarning, match="best validation epoch"):
        assert warn_if_selected_on_validation(model)
    assert not warn_if_selected_on_validation(scenario["seg"] / "models" / "cpu" / "model.pt")


def test_checkpoint_selection_is_checked_before_training() -> None:
    from monai_forget.bundles.segmentation import check_checkpoint_selection

    check_checkpoint_selection("best", 1, 1)
    check_checkpoint_selection("last", 10, 1)
    with pytest.raises(ValueError, match="one of"):
        check_checkpoint_selection("first", 1, 1)
    with pytest.raises(ValueError, match="val_interval 2 > epochs 1"):
        check_checkpoint_selection("best", 2, 1)


def test_latest_checkpoint_is_the_highest_epoch_saved(tmp_path: Path) -> None:
    """The names are ``CheckpointSaver``'s; epoch 10 is later than epoch 9 (not by text)."""
    from monai_forget.bundles.segmentation import latest_checkpoint

    for name in ("resume_checkpoint_epoch=9.pt", "resume_checkpoint_epoch=10.pt", "notes.pt"):
        (tmp_path / name).write_bytes(b"")
    assert Path(latest_checkpoint(tmp_path)).name == "resume_checkpoint_epoch=10.pt"
    with pytest.raises(FileNotFoundError, match="--resume True"):
        latest_checkpoint(tmp_path / "missing")


def test_an_interrupted_training_resumes_from_its_last_epoch(
    scenario: dict, tmp_path: Path
) -> None:
    """The documented training command with ``--resume True`` (as its comment says) in a
    copy of the bundle where the run stopped after epoch 1: only epoch 2 runs."""
    seg = tmp_path / "acdc_segmentation"
    shutil.copytree(scenario["seg"], seg)
    for name in ("model.pt", "model_train.json"):  # the run stopped before writing them
        (seg / "models" / "cpu" / name).unlink()
    command = _command(
        scenario, "'configs/train.json','configs/cpu.json']\"", "--ckpt_file models/cpu/model.pt"
    )
    budget = {**BUDGET, "epochs": 2}
    extra = f"{_options(DESIGN)} {_options(budget)} {_options(SUBSET)} --resume True"
    done = check(run_line(command, seg, extra=extra, env=scenario["env"], timeout=1200))
    log = done.stdout + done.stderr
    assert "Epoch[2] Complete" in log and "Epoch[1] Complete" not in log, log[-2000:]
    summary = json.loads((seg / "models" / "cpu" / "model_train.json").read_text())
    assert summary["epochs"] == 2 and summary["iterations"] == 2 * BUDGET["steps_per_epoch"]


def test_evaluation_reports_dice_and_hd95_per_structure(scenario: dict) -> None:
    folder = scenario["seg"] / "eval" / "test"
    record = json.loads((folder / "metrics.json").read_text())
    metrics = record["metrics"]
    assert record["section"] == "test" and record["patients"] == 5 and record["volumes"] == 10
    assert set(metrics["dice_by_class"]) == {"RV", "MYO", "LV"}
    assert set(metrics["hd95_by_class"]) == {"RV", "MYO", "LV"}
    rows = list(csv.DictReader((folder / "per_volume.csv").open()))
    assert len(rows) == 10 and {r["phase"] for r in rows} == {"ED", "ES"}
    dice = np.array([[float(r[f"dice_{s}"]) for s in ("RV", "MYO", "LV")] for r in rows])
    # The reported per-structure Dice is the mean of the per-volume values.
    np.testing.assert_allclose(
        dice.mean(0), [metrics["dice_by_class"][s] for s in ("RV", "MYO", "LV")], rtol=1e-4
    )
    # and the mean Dice is the mean over the structures
    assert metrics["mean_dice"] == pytest.approx(np.mean(dice), rel=1e-4)


def test_inference_writes_nifti_masks_and_never_replaces_them(scenario: dict) -> None:
    from monai_forget.data_prep.reading import read_array

    masks = scenario["seg"] / "inference"
    files = sorted(p.name for p in masks.iterdir())
    assert files == sorted(
        f"{p}_{f}_seg.nii.gz" for p in scenario["patients"] for f in ("ED", "ES")
    )
    patient = scenario["patients"][0]
    mask = nib.load(masks / f"{patient}_ED_seg.nii.gz")
    test = json.loads((scenario["seg"] / "data" / "acdc.json").read_text())["test"]
    slices = [e for e in test if e["patient"] == patient and e["phase"] == "ED"]
    entry = {**slices[0], "image": str(scenario["seg"] / "data" / slices[0]["image"])}
    (h, w), depth = read_array(entry).shape, len(slices)
    assert mask.shape == (h, w, depth) and mask.get_data_dtype() == np.uint8
    assert int(mask.header["sform_code"]) == int(mask.header["qform_code"]) == 0  # h5: no geometry
    assert set(np.unique(np.asarray(mask.dataobj))) <= {0, 1, 2, 3}
    command = _command(scenario, "inference.json")
    bounds = _bounding(command, scenario["patients"])
    again = run_line(command, scenario["seg"], extra=bounds, env=scenario["env"])
    assert again.returncode != 0
    assert "FileExistsError" in again.stderr and "_seg.nii.gz" in again.stderr


def test_torchscript_export_matches_the_network(scenario: dict) -> None:
    from monai.networks.nets import UNet

    model = scenario["seg"] / "models" / "cpu" / "model.pt"
    net = UNet(2, 1, 4, DESIGN["channels"], (2, 2, 2, 2), num_res_units=1, norm="batch")
    net.load_state_dict(torch.load(model, weights_only=True))
    scripted = torch.jit.load(str(model.with_suffix(".ts")))
    x = torch.rand(2, 1, 96, 112)
    torch.testing.assert_close(scripted(x), net.eval()(x))


def _shapes(path: Path) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in torch.load(path, weights_only=True).items()}


def test_audit_of_a_provider_is_consistent(scenario: dict) -> None:
    """audit.json with shadows trained by the bundle itself, with the audited model's
    design: the outputs exist and every statistic is reproduced from the per-image
    scores written."""
    from monai_forget.audit import EMAReference, KSReference
    from monai_forget.segmentation import SegmentationScores

    out = scenario["seg"] / "audit" / PROVIDER
    record = json.loads((out / "scores.json").read_text())
    assert set(record["by_score"]) == {
        "foreground_confidence",
        "image_confidence",
        "likelihood",
        "dice",
    }
    sets = {
        k: SegmentationScores(
            {n: np.asarray(v[n], dtype=float) for n in ("foreground_confidence", "dice")}
        )
        for k, v in record["scores"].items()
    }
    patients = {k: set(v["patients"]) for k, v in record["scores"].items()}
    assert not patients["target/query"] & (
        patients["ema_reference/members"] | patients["ema_reference/nonmembers"]
    )
    q = sets["target/query"].defined("foreground_confidence")
    ks = KSReference.from_predictions(
        sets["query_shadow/query"].to_predictions("foreground_confidence", q),
        sets["calibration_shadow/query"].to_predictions("foreground_confidence", q),
    ).audit(sets["target/query"].to_predictions("foreground_confidence", q))
    saved = json.loads((out / "ks.json").read_text())
    assert saved["statistic"] == pytest.approx(ks.statistic) and saved["decision"] == ks.decision
    m, n = sets["ema_reference/members"], sets["ema_reference/nonmembers"]
    ema = EMAReference.from_predictions(
        m.to_predictions("foreground_confidence", m.defined("foreground_confidence")),
        n.to_predictions("foreground_confidence", n.defined("foreground_confidence")),
        metrics=("confidence",),
    ).audit(sets["target/query"].to_predictions("foreground_confidence", q))
    assert json.loads((out / "ema.json").read_text())["statistic"] == pytest.approx(ema.statistic)
    reference = json.loads((out / "reference.json").read_text())
    assert reference["provider"] == PROVIDER and reference["query_size"] == int(q.sum())
    assert (out / "report.html").is_file()


def test_audit_shadows_have_the_audited_design_and_are_reused(scenario: dict) -> None:
    """The shadows are built like the audited model (review item: the profile was lost),
    and the second documented audit reuses the first one's shadows."""
    seg = scenario["seg"]
    shadows = sorted((seg / "cache" / "segmentation_shadows").glob("*.pt"))
    assert len(shadows) == 3 + CALIBRATION["n_references"]  # K-S, EMA; reference models
    target = _shapes(seg / "models" / "cpu" / "model.pt")
    assert all(_shapes(s) == target for s in shadows)
    first, second = (
        [line for line in r.stdout.splitlines() if line.startswith("training ") and " -> " in line]
        for c, r in scenario["runs"].items()
        if "audit.json" in c
    )
    assert len(first) == len(shadows) and not second, (first, second)
    retrained = json.loads((seg / "audit" / f"{PROVIDER}_retrained" / "ks.json").read_text())
    assert "retrained without the provider" in json.dumps(retrained)


@pytest.mark.parametrize("folder", [PROVIDER, f"{PROVIDER}_retrained"])
def test_reference_model_audit_of_a_provider(scenario: dict, folder: str) -> None:
    """audit.json's reference-model audit, by patient: D_Q, the scored known members and
    non-members are disjoint sets of patients; the written decision and p-value are
    reproduced from the written reference and the target's per-patient logits.

    These models take 3 steps: none of them can have memorised a patient, so the data
    cannot support a decision either way, and the right answer for both models is
    "inconclusive" for want of a measurable member effect, with no share excluded and
    no size of any set that would give "forgotten" power; a chance member effect can
    instead give a false "not forgotten" (at most alpha of the time), never "forgotten".
    That is what is asserted.

    A test with the power to get both models right (the trained-with model "not
    forgotten", the retrained one "forgotten") does not fit CI: with 10 training and 10
    held-out patients, 4 reference models and 1,000 steps (70 s a model, 7.4 min for the
    6 models on one core), the known members' per-patient AUC was 0.43-0.80 and all 16
    audits inconclusive (4 scores, 2 learning rates; docs/reference_auditor.md). The
    decision rates of models with the power (the cpu profile, per-patient AUC 0.80) are
    measured over 5 trainings in benchmarks/results/acdc_audit_calibration.md."""
    from monai_forget.audit import RefModelReference, RoleOutputs

    out = scenario["seg"] / "audit" / folder
    saved = json.loads((out / "refmodel.json").read_text())
    reference = RefModelReference.from_dict(
        json.loads((out / "refmodel_reference.json").read_text())
    )
    patients = {role: set(reference.hashes[role]) for role in ("query", "members", "nonmembers")}
    assert all(p.startswith("patient") for ps in patients.values() for p in ps)
    assert not (patients["query"] & patients["members"]) | (
        patients["query"] & patients["nonmembers"]
    )
    assert saved["details"]["unit"] == "patient"
    assert reference.n_references == CALIBRATION["n_references"]
    assert saved["sizes"]["query"] == len(patients["query"]) >= 4
    target = {r: np.asarray(saved["arrays"][f"{r}_target_signal"]) for r in patients}
    again = reference.audit(RoleOutputs(target))
    assert saved["statistic"] == pytest.approx(again.statistic)
    assert saved["decision"] == again.decision
    details = saved["details"]
    assert (out / "refmodel_report.html").is_file()
    # No model of 3 steps can be certified "forgotten": nothing bounds its strength.
    assert saved["decision"] != "forgotten", details
    if saved["decision"] == "not forgotten":
        # A chance member effect (the known members' lower bound just above 0) with D_Q
        # above the non-members at alpha: a false "not forgotten", at most alpha of the
        # time, which the reason ties to D_Q's site (seen on 2026-12-02 after a dependency
        # update: the retrained model, p = 0.0068, member effect bound 0.015).
        assert saved["statistic"] <= details["alpha"] and details["member_effect_low"] > 0
        assert "Never-seen images of a site whose other images" in details["reason"]
        return
    # either reason the auditor gives when the known members show no member effect (the
    # second when D_Q happens to score above the non-members at alpha)
    reasons = (
        "the target shows no measurable memorisation of its own training data",
        "but the known members do not",
    )
    assert any(r in details["reason"] for r in reasons), details
    assert details["member_effect_low"] <= 0 and details["membership_strength_upper"] == "inf"
    assert details["power_forgotten"] < 0.5
    assert set(details["needed_sizes"].values()) == {"inf"}, details["needed_sizes"]


def test_diagnosis_from_the_predicted_masks(scenario: dict) -> None:
    """diagnosis.json --mask_dir reads the masks inference.json wrote: its features are
    those of the NIfTI files, and its metrics match its table."""
    from monai_forget.acdc import patient_features

    folder = scenario["path"] / "eval" / "diagnosis_test_predicted"
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["patients"] == 5 and metrics["mask_source"] == "../acdc_segmentation/inference"
    rows = list(csv.DictReader((folder / "diagnosis.csv").open()))
    assert sorted(r["patient"] for r in rows) == sorted(scenario["patients"])
    masks = scenario["seg"] / "inference"
    for row in rows:
        ed, es = (
            np.asarray(nib.load(masks / f"{row['patient']}_{p}_seg.nii.gz").dataobj)
            for p in ("ED", "ES")
        )
        expected = patient_features(ed, es, row["patient"])
        found = {k: float(row[k]) for k in expected}
        assert found == pytest.approx(expected, rel=1e-5), row["patient"]
    truth = [r["group"] for r in rows]
    predicted = [r["predicted"] for r in rows]
    assert metrics["accuracy"] == pytest.approx(np.mean(np.equal(truth, predicted)))
    assert np.sum(metrics["confusion_matrix"]) == 5


def test_diagnosis_from_the_expert_masks(scenario: dict) -> None:
    """diagnosis_train.json on the 80 training and validation patients, diagnosis.json on
    the 20 test patients (expert masks). Measured: 19 of 20 (0.95), seed 0."""
    trained = json.loads((scenario["path"] / "models" / "diagnosis.json").read_text())["training"]
    assert trained["patients"] == 80 and trained["cv_accuracy_mean"] > 0.8
    out = scenario["path"] / "eval" / "diagnosis_test_expert"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["patients"] == 20 and metrics["mask_source"] == "expert"
    assert metrics["accuracy"] >= 0.85, metrics
    assert np.sum(metrics["confusion_matrix"]) == 20
    rows = (out / "diagnosis.csv").read_text().splitlines()
    assert rows[0].startswith("patient,group,predicted,p_NOR") and len(rows) == 21
    # Outputs are never replaced silently.
    (command,) = [c for c in scenario["runs"] if "diagnosis.json" in c and "--mask_dir" not in c]
    again = run_line(command, scenario["path"], env=scenario["env"])
    assert again.returncode != 0 and "FileExistsError" in again.stderr
