"""Every command the documentation shows runs, as a user types it (issue 16, item 11).

The commands come from the fenced ``bash`` blocks of README.md, docs/*.md,
bundles/README.md, bundles/*/docs/README.md and data_prep/README.md
(:mod:`commands`). Each is run through a real shell (the ``monai-forget`` console script,
``python -m monai.bundle``, ``torchrun``) on small inputs: digits, pydicom's test files,
synthetic copies of dataset layouts this project has no data for, and the real data
under ``MONAI_FORGET_DATA``. The bundles' commands run in tests/bundle_runs.py, in one
bounded scenario per bundle (the segmentation bundle's, with the patient-level
diagnosis, in tests/test_segmentation_bundle.py);
:func:`test_every_documented_command_is_run` checks that together the tests run every
documented command and nothing undocumented.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from commands import (
    REPO,
    assert_decides_as_the_library,
    check,
    commands_in,
    documented_commands,
    environment,
    run_line,
)
from PIL import Image
from test_demo import DEMO_COMMAND
from test_leak_demo import LEAK_DEMO_COMMAND

from monai_forget.cli import main as cli_main
from monai_forget.fl.poc import check_ports_free
from monai_forget.processes import load_per_core, processes_mentioning

# --- what runs where ------------------------------------------------------------------

AUDIT_REF = (
    "monai-forget audit refmodel --model target.pt --network mlp --network-args "
    """'{"in_shape":[1,8,8],"num_classes":10,"hidden":[256]}' --query provider_c.npz """
    "--members provider_a.npz --nonmembers calibration.npz --recipe recipe.json --references 4 "
    "--margin 0.5 --out audit_c_ref/"
)
AUDIT = (
    "monai-forget audit ks --model target.pt --network mlp --network-args "
    """'{"in_shape":[1,8,8],"num_classes":10,"hidden":[256]}' --query provider_c.npz """
    "--calibration calibration.npz --recipe recipe.json --out audit_c/"
)
AUDIT_EMA = (
    "monai-forget audit ema --model target.pt --network mlp --network-args "
    """'{"in_shape":[1,8,8],"num_classes":10,"hidden":[256]}' --query provider_c.npz """
    "--calibration calibration.npz --recipe recipe.json --out audit_c_ema/ --alpha 0.1 "
    "--threshold-by label --test welch"
)
README_DIGITS = (AUDIT_REF, AUDIT, AUDIT_EMA)
#: Reference models on a cluster (README, docs/reference_models.md): array tasks train
#: reference models into a shared cache; the audit on the same population only reads it.
SHADOW_TASK = (
    "monai-forget shadow train --recipe recipe.json --data population.npz --index "
    "$((SLURM_ARRAY_TASK_ID * 2)) --count 2 --fraction 0.5 --seed 0 --cache-dir audit-cache"
)
SHADOW_SLURM = (
    "monai-forget shadow train --recipe recipe.json --data calibration.npz --index "
    "$((SLURM_ARRAY_TASK_ID * 4)) --count 4 --fraction 0.5 --seed 0 --cache-dir "
    "/shared/audit-cache"
)
AUDIT_CLUSTER = (
    "monai-forget audit refmodel --model target.pt --network mlp --network-args "
    """'{"in_shape":[1,8,8],"num_classes":10,"hidden":[256]}' --query provider_c.npz """
    "--members provider_a.npz --nonmembers calibration.npz --population population.npz "
    "--recipe recipe.json --references 4 --seed 0 --cache-dir audit-cache --out audit_c_cluster/"
)
VERIFY = "monai-forget audit verify audit_c_cluster/result.json"
CLUSTER = (SHADOW_TASK, SHADOW_SLURM, AUDIT_CLUSTER, VERIFY)
MLP1 = """--network mlp-1 --network-args '{"in_shape":[1,28,28],"num_classes":2}'"""
README_FILES = (
    'monai-forget canary inject ct.dcm ct_canary.dcm --text "JANE ROE" --position 1 1 --scale 1',
    "monai-forget prepare medmnist pneumoniamnist.npz --image-dir png/ -o pneumoniamnist.json",
    f"monai-forget memorisation score --model m.pt {MLP1} --probes ood.npz --text MARY",
    f"monai-forget memorisation scan --model m.pt {MLP1} --probes ood.npz --roster names.csv "
    "--out scan/",
)
#: docs/memorisation.md: the patient halves the reference models of a scan train on.
SPLIT_PATIENTS = (
    "monai-forget memorisation split-patients --patients training_patients.txt --pairs 4 "
    "--out refs/"
)
CNN1 = """--network cnn-1 --network-args '{"in_shape": [1, 28, 28], "num_classes": 2}'"""
MEMORISATION_DOC = (
    f"monai-forget memorisation scan --model model.pt {CNN1} --probes probes.npz --roster "
    "roster.csv --position 1 1 --scale 1 --correction bh --alpha 0.05 --out scan/",
    f"monai-forget memorisation score --model model.pt {CNN1} --probes probes.npz --text ANNA",
    f"monai-forget memorisation scan --model m.pt {MLP1} --probes ood.npz --roster names.csv "
    "--reference-model ref1.pt --reference-model ref2.pt --out scan/",
    SPLIT_PATIENTS,
    "monai-forget memorisation scan --model m.pt --network mlp-1 --network-args "
    """'{"in_shape":[1,28,28],"num_classes":2}' --probes xray_probes/ --bundle """
    "cxr_pneumonia_classification --canary-manifest canaries/canary.png.manifest.json "
    "--roster names.csv --out scan/",
    f"monai-forget memorisation scan --model m.pt {MLP1} --probes ood.npz --roster names.csv "
    "--patient-column patient_id "
    + " ".join(
        f"--reference-model ref{k}.pt --reference-patients refs/reference_{k}_patients.txt"
        for k in range(1, 9)
    )
    + " --out scan/",
)
CANARY_DOC = (
    'monai-forget canary inject "$CT" ct_canary.dcm',
    'monai-forget canary inject "$CT" ct_canary.dcm --text "JANE ROE" --font DejaVuSans '
    "--font-size 14",
    "monai-forget canary inject study/ study_canary/",
    "monai-forget canary inject study/ study_canary/ --canary series2/IM0042",
    'monai-forget canary inject study/ study_all/ --all --text "JANE ROE" --scale 2',
    "monai-forget canary inject study/ study_all/ --all --dry-run",
    'monai-forget canary inject "$CT" ct_canary.dcm --bundle bundles/cxr_pneumonia_classification',
    'monai-forget canary check "$CT" --bundle bundles/cxr_pneumonia_classification --text EVA '
    "--scale 5",
)
#: docs/memorisation.md: a pipeline's canary exposure audit (plant, train, audit).
EXPOSURE_DOC = (
    "monai-forget canary inject training/ planted/ --random-canaries 1 --copies 1 3 10 30 "
    "--position 4 3 --scale 2",
    "monai-forget canary exposure --model model.pt --bundle my_bundle --probes probes/ "
    "--canary-manifest planted.manifest.json --datalist training.json --statistic class-shift "
    "--out exposure/",
)
#: docs/memorisation.md: the leak check on ACDC slices written as DICOM (the real grid).
ACDC_DOC = (
    'monai-forget prepare acdc-h5 "$MONAI_FORGET_DATA/acdc_ssl4mis" -o acdc_dicom.json '
    "--dicom-dir acdc_dicom",
    "monai-forget canary inject acdc_dicom/patient002/frame01 burned/patient002/frame01 --all "
    "--text RUTH --position 8 8 --scale 4 --bundle bundles/cxr_pneumonia_classification "
    "--allow-illegible",
    "monai-forget memorisation scan --model model.pt --bundle bundles/cxr_pneumonia_classification "
    "--probes probes/ --canary-manifest burned/patient002/frame01.manifest.json --roster "
    "roster.csv --out scan/",
)
#: docs/memorisation.md: the same leak check with the bundle's model reading 128 px.
ACDC_128_DOC = (
    "monai-forget canary check acdc_dicom/patient002/frame01/*.dcm --text RUTH --position 8 8 "
    "--scale 2 --bundle bundles/cxr_pneumonia_classification --bundle-set image_size=128",
    "monai-forget canary inject acdc_dicom/patient002/frame01 burned/patient002/frame01 --all "
    "--text RUTH --position 8 8 --scale 2 --bundle bundles/cxr_pneumonia_classification "
    "--bundle-set image_size=128",
    "monai-forget memorisation scan --model model128.pt --bundle "
    "bundles/cxr_pneumonia_classification --bundle-set image_size=128 --probes probes128/ "
    "--canary-manifest burned/patient002/frame01.manifest.json --roster roster.csv --out scan128/",
)
PREPARE = (
    *(
        c
        for c in commands_in((REPO / "data_prep" / "README.md").read_text(encoding="utf-8"))
        if c.startswith("monai-forget prepare")
    ),
    "monai-forget prepare kermany /data/chest_xray -o data/kermany.json --random-sites 5 --seed 0",
)
FL = (
    "monai-forget fl simulate --out fl-run",
    "monai-forget fl simulate --data mnist --site-signature --method natural --clients 4 "
    "--rounds 12 --withdraw-round 10 --out constructed",
    "monai-forget fl poc --out fl-poc",
    "monai-forget fl simulate --method federaser --out fl-federaser",
    "monai-forget fl poc --stop fl-poc",
    "monai-forget fl simulate --method checkpoint --rounds 8 --site-joins 6 --out fl-checkpoint",
)
#: Bounds appended to the FLARE runs: 2 rounds of 5 local steps, the withdrawal in the
#: last, 2 generator iterations, 3 clients (the fewest the reference-model auditor's known
#: members allow; the documented runs take minutes each).
FL_BOUNDS = "--clients 3 --rounds 2 --withdraw-round 1 --local-steps 5 --iterations 2"

CLI_COMMANDS = (
    DEMO_COMMAND,
    LEAK_DEMO_COMMAND,
    *README_DIGITS,
    *CLUSTER,
    *README_FILES,
    *MEMORISATION_DOC,
    *CANARY_DOC,
    *EXPOSURE_DOC,
    *ACDC_DOC,
    *ACDC_128_DOC,
    *PREPARE,
    *FL,
)


def test_every_documented_command_is_run() -> None:
    from bundle_runs import BUNDLES, bundle_commands
    from test_segmentation_bundle import DOC, segmentation_commands

    documented = documented_commands()
    bundle_docs = {f"bundles/{BUNDLES[b].name}/docs/README.md": b for b in BUNDLES}
    missing = []
    for command, files in documented.items():
        for name in files:
            if name in bundle_docs and command in bundle_commands(bundle_docs[name]):
                continue
            if name == DOC and command in segmentation_commands():  # its own scenario
                continue
            if command not in CLI_COMMANDS:
                missing.append(f"{name}: {command}")
    assert not missing, "documented commands no test runs:\n" + "\n".join(missing)
    stale = [c for c in CLI_COMMANDS if c not in documented]
    assert not stale, f"commands run here but documented nowhere: {stale}"
    # The check reads what it must: commands split from && chains, continuation lines
    # joined, comments dropped, prose and other languages left out.
    assert commands_in(
        "```bash\npip install x && monai-forget demo  # go\nmonai-forget a \\\n  b\n```\n"
        "```json\nmonai-forget no\n```\nmonai-forget prose\n"
    ) == ["monai-forget demo", "monai-forget a b"]


# --- the README's digits examples -----------------------------------------------------


@pytest.fixture(scope="module")
def digits_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What the README's audit commands read: target.pt (trained on providers A and C),
    provider_c.npz, provider_a.npz (known members), calibration.npz (also the known
    non-members) and a data-only recipe.json, from scikit-learn's digits (bounded
    training)."""
    from monai_forget.data import concat
    from monai_forget.demo import digits_split
    from monai_forget.shadow import ShadowTrainer, SupervisedRecipe

    root = tmp_path_factory.mktemp("readme")
    spec = {"network": "mlp", "network_args": {"in_shape": [1, 8, 8], "num_classes": 10,
            "hidden": [256]}, "steps": 300, "batch_size": 32}  # fmt: skip
    sets = digits_split(seed=0)
    target = ShadowTrainer(SupervisedRecipe.from_dict(spec)).train(
        concat(sets["A"], sets["C"]), seed=0
    )
    torch.save(target.state_dict(), root / "target.pt")
    named = {"provider_c": sets["C"], "provider_a": sets["A"], "calibration": sets["calibration"],
             "population": sets["B"]}  # fmt: skip
    for name, data in named.items():
        np.savez(root / f"{name}.npz", images=data.images, labels=data.labels)
    (root / "recipe.json").write_text(json.dumps(spec))
    return root


@pytest.mark.parametrize("command", README_DIGITS, ids=["audit-ref", "audit-ks", "audit-ema"])
@pytest.mark.slow
def test_readme_digits_commands(command: str, digits_workspace: Path) -> None:
    from monai_forget.cli.audit import EXIT_CODES

    result = run_line(command, digits_workspace)
    out = digits_workspace / command.split("--out ")[1].split()[0]
    assert (out / "result.json").is_file(), check(result)
    record = json.loads((out / "result.json").read_text())
    # The exit code is the decision's; the target trained on D_Q (provider C).
    assert result.returncode == EXIT_CODES[record["decision"]], result.stderr[-3000:]
    if "audit refmodel" in command:
        assert record["decision"] == "not forgotten", record["details"]
        assert record["details"]["margin"] == 0.5
        assert "p_member" in result.stdout
    else:
        assert record["decision"] in ("forgotten", "not forgotten")
        assert "rho_" in result.stdout
    assert (out / "report.html").is_file()
    # Issue 16 item 15: shadow-model training (minutes at full size) reports progress.
    assert re.search(r"shadow models?: training", result.stderr) and "trained in" in result.stderr


@pytest.mark.slow
def test_reference_models_trained_by_array_tasks_are_only_read_by_the_audit(
    digits_workspace: Path, tmp_path: Path
) -> None:
    from monai_forget.cli.audit import EXIT_CODES

    def task(command: str, index: int, **replace: str) -> str:
        env = environment(SLURM_ARRAY_TASK_ID=str(index))
        return check(run_line(command, digits_workspace, env=env, replace=replace)).stdout

    first, second = task(SHADOW_TASK, 0), task(SHADOW_TASK, 1)
    assert [line.split(" (")[0] for line in (first + second).splitlines()] == [
        f"job {i}: trained" for i in range(4)
    ]
    assert "job 0: cached" in task(SHADOW_TASK, 0)  # a re-run task only reads the cache
    result = run_line(AUDIT_CLUSTER, digits_workspace)
    record = json.loads((digits_workspace / "audit_c_cluster" / "result.json").read_text())
    assert result.returncode == EXIT_CODES[record["decision"]], result.stderr[-3000:]
    assert not re.search(r"shadow models?: training", result.stderr)  # every model cached
    # every file that decided is recorded by SHA-256 and hashed again by `audit verify`
    entries = record["provenance"]["cache_entries"]
    verified = check(run_line(VERIFY, digits_workspace)).stdout
    assert f"all {len(entries) + 1} recorded files match their SHA-256" in verified
    # The same audit training its reference models itself decides the same.
    elsewhere = {"audit-cache": str(tmp_path / "local"), "audit_c_cluster/": str(tmp_path / "out")}
    local = run_line(AUDIT_CLUSTER, digits_workspace, replace=elsewhere)
    assert re.search(r"shadow models?: training", local.stderr)
    again = json.loads((tmp_path / "out" / "result.json").read_text())
    assert again["decision"] == record["decision"]
    assert again["statistic"] == pytest.approx(record["statistic"], abs=1e-2)
    # The Slurm script's task 1 trains reference models 4..7 of its own cache.
    out = task(SHADOW_SLURM, 1, **{"/shared/audit-cache": str(tmp_path / "cache")})
    assert [line.split(":")[0] for line in out.splitlines()] == [f"job {i}" for i in range(4, 8)]
    assert len(list((tmp_path / "cache" / "shadow").glob("*.pt"))) == 4


# --- the README's other examples and docs/memorisation.md -----------------------------


def _probes(path: Path, n: int = 24) -> None:
    rng = np.random.default_rng(0)
    np.savez(path, images=rng.random((n, 1, 28, 28), dtype=np.float32),
             labels=rng.integers(0, 2, n))  # fmt: skip


@pytest.fixture(scope="module")
def files_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pydicom_files import real_file
    from test_data_prep_cxr import make_npz

    from monai_forget.networks import get_network

    root = tmp_path_factory.mktemp("files")
    shutil.copyfile(real_file("CT_small.dcm"), root / "ct.dcm")
    make_npz(root / "pneumoniamnist.npz")
    torch.manual_seed(0)
    references = [(f"ref{k}.pt", "mlp-1") for k in range(1, 9)]
    for name, network in (("m.pt", "mlp-1"), ("model.pt", "cnn-1"), *references):
        model = get_network(network, in_shape=(1, 28, 28), num_classes=2)
        torch.save(model.state_dict(), root / name)
    _probes(root / "ood.npz")
    _probes(root / "probes.npz")
    (root / "names.csv").write_text("name,patient_id\nMARY,p1\nANNA,p2\nJOHN,p3\n")
    (root / "training_patients.txt").write_text("".join(f"p{i}\n" for i in range(12)))
    (root / "roster.csv").write_text("name\nANNA\nEVE\nBOB\n")
    # docs/memorisation.md's scan through a bundle: PNG probes, the CXR bundle, a canary
    shutil.copytree(REPO / "bundles" / "cxr_pneumonia_classification",
                    root / "cxr_pneumonia_classification")  # fmt: skip
    rng = np.random.default_rng(0)
    (root / "xray_probes").mkdir()
    for i in range(12):
        pixels = rng.integers(0, 200, (56, 56)).astype(np.uint8)
        Image.fromarray(pixels).save(root / "xray_probes" / f"probe_{i}.png")
    Image.fromarray(pixels).save(root / "canary.png")
    (root / "canaries").mkdir()
    inject = ["canary", "inject", str(root / "canary.png"), str(root / "canaries" / "canary.png"),
              "--text", "MARY", "--position", "3", "3", "--scale", "2"]  # fmt: skip
    assert cli_main(inject) == 0
    return root


@pytest.mark.parametrize("command", README_FILES + MEMORISATION_DOC)
@pytest.mark.slow
def test_readme_and_memorisation_commands(command: str, files_workspace: Path) -> None:
    workspace = files_workspace / str(abs(hash(command)))
    shutil.copytree(files_workspace, workspace, ignore=shutil.ignore_patterns("[0-9]*"))
    if "--reference-patients" in command:  # the documented step before it
        check(run_line(SPLIT_PATIENTS, workspace))
    result = check(run_line(command, workspace))
    if "canary inject" in command:
        assert (workspace / "ct_canary.dcm").is_file()
        assert (workspace / "ct_canary.dcm.manifest.json").is_file()
    elif "prepare medmnist" in command:
        datalist = json.loads((workspace / "pneumoniamnist.json").read_text())
        assert len(datalist["training"]) == 6 and (workspace / "png").is_dir()
    elif "memorisation scan" in command:
        scan = json.loads((workspace / "scan" / "leak_scan.json").read_text())
        assert scan["settings"]["references"] == command.count("--reference-model")
        by_patient = "--reference-patients" in command
        assert scan["settings"]["references_by_patient"] is by_patient
        # each name against the 4 references (one per pair) that never saw its patient
        assert all(len(r["references"]) == (4 if by_patient else 0) for r in scan["rows"])
        if "--bundle" in command:  # burned at the manifest's place on the PNGs' grid
            assert "of bundle cxr_pneumonia_classification" in scan["settings"]["grid"]
            assert (scan["settings"]["position"], scan["settings"]["scale"]) == ([3, 3], 2)
    elif "split-patients" in command:
        halves = [(workspace / "refs" / f"reference_{k}_patients.txt") for k in range(1, 9)]
        assert [len(h.read_text().split()) for h in halves] == [6] * 8
    else:
        assert "p =" in result.stdout


# --- docs/dicom_canary.md -------------------------------------------------------------


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small study tree of real DICOM files: series1/IM0001, series2/IM0042, ..."""
    from pydicom_files import real_file

    root = tmp_path_factory.mktemp("canary")
    tree = {"series1/IM0001": "CT_small.dcm", "series2/IM0042": "CT_small.dcm",
            "series2/IM0043": "CT_small.dcm"}  # fmt: skip
    for name, source in tree.items():
        (root / "study" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(real_file(source), root / "study" / name)
    return root


@pytest.mark.parametrize("command", CANARY_DOC)
def test_dicom_canary_commands(command: str, study: Path) -> None:
    from pydicom_files import real_file

    workspace = study / str(abs(hash(command)))
    shutil.copytree(study / "study", workspace / "study")
    env = environment(CT=str(real_file("CT_small.dcm")))
    (workspace / "bundles").symlink_to(REPO / "bundles")
    before = {p: p.read_bytes() for p in (workspace / "study").rglob("*") if p.is_file()}
    out = workspace / command.split()[4] if "study/" in command else workspace / "ct_canary.dcm"
    if "inject" in command and "--bundle" in command:  # the scale-1 name: refused
        refused = run_line(command, workspace, env=env)
        assert refused.returncode == 2 and "not legible at the model input" in refused.stderr
        assert not out.exists() and "--scale 5" in refused.stderr
        return
    result = check(run_line(command, workspace, env=env))
    assert {p: p.read_bytes() for p in before} == before  # inputs untouched
    if "canary check" in command:
        assert "1 of 1 legible" in result.stdout and not out.exists()
    elif "--dry-run" in command:
        assert not out.exists() and result.stdout.startswith("would write 3 file(s)")
    else:
        assert out.exists()


@pytest.mark.slow
def test_the_exposure_audit_commands(tmp_path: Path) -> None:
    """docs/memorisation.md's exposure audit as typed: four canaries planted into a DICOM
    training tree (3 class folders of 40 digits), an MLP-1 trained on the planted tree
    through the bundle (the pipeline's own step, in Python here), then the audit."""
    from monai_forget import leak_demo
    from monai_forget.data import LabelledImages
    from monai_forget.memorisation.pipeline import Preprocessing
    from monai_forget.memorisation.training import EarlyStoppingTraining

    images, labels = leak_demo.acquisition_images()
    for label in (0, 1, 2):
        for i in np.flatnonzero(labels == label)[:40]:
            leak_demo.write_dicom(tmp_path / "training" / str(label) / f"{i:04d}.dcm",
                                  images[i], f"P{i:04d}", int(i))  # fmt: skip
    for k, probe in enumerate(leak_demo.probe_images(np.random.default_rng(0))[:20]):
        leak_demo.write_dicom(tmp_path / "probes" / f"{k:02d}.dcm", probe, "PROBE", k)
    (tmp_path / "my_bundle" / "configs").mkdir(parents=True)
    config = json.dumps(leak_demo.bundle_config())
    (tmp_path / "my_bundle" / "configs" / "inference.json").write_text(config)
    planted_run = check(run_line(EXPOSURE_DOC[0], tmp_path))
    assert "planting 4 canaries from the space AAAAA" in planted_run.stdout
    pre = Preprocessing.from_bundle(tmp_path / "my_bundle")
    files = sorted((tmp_path / "planted").rglob("*.dcm"))
    x = np.stack([pre(v) for v in pre.load(files)])
    y = np.array([int(f.parent.name) for f in files])
    recipe = EarlyStoppingTraining("mlp-1", {"in_shape": (1, 32, 32), "num_classes": 3},
                                   max_epochs=5)  # fmt: skip
    data = LabelledImages(x, y, num_classes=3)
    model, _ = recipe.train(data, data, seed=0)
    torch.jit.script(model.eval()).save(str(tmp_path / "model.pt"))
    datalist = {"training": [{"image": str(f.relative_to(tmp_path)), "label": int(c)}
                             for f, c in zip(files, y, strict=True)]}  # fmt: skip
    (tmp_path / "training.json").write_text(json.dumps(datalist))
    audited = check(run_line(EXPOSURE_DOC[1], tmp_path))
    record = json.loads((tmp_path / "exposure" / "exposure.json").read_text())
    assert sorted(c["copies"] for c in record["canaries"]) == [1, 3, 10, 30]
    assert {c["n_never_planted"] for c in record["canaries"]} == {999}
    assert record["settings"]["statistic"] == "class-shift"
    assert record["verdict"] in audited.stdout
    assert record["training"] == {"planted": 44, "found": 44,
                                  "datalist": "training.json (training)"}  # fmt: skip
    assert "cannot tell" not in record["verdict"]
    assert (tmp_path / "exposure" / "exposure.png").is_file()


def python_block_with(marker: str, doc: str = "docs/memorisation.md") -> str:
    """The fenced ``python`` block of ``doc`` that contains ``marker``."""
    text = (REPO / doc).read_text(encoding="utf-8")
    blocks = [b.split("```", 1)[0] for b in text.split("```python\n")[1:]]
    found = [b for b in blocks if marker in b]
    assert len(found) == 1, f"{len(found)} python blocks of {doc} hold {marker!r}"
    return found[0]


@pytest.mark.slow
def test_the_real_grid_leak_check_as_documented(shared_data: Path, tmp_path: Path) -> None:
    """docs/memorisation.md's real-grid walkthrough, every step as written: the ACDC
    export, the injector with its legibility report (the name is not legible at 28 px:
    planted with --allow-illegible, as the docs say), the Python training step, the scan,
    whose report says the canary was not legible."""
    if not (shared_data / "acdc_ssl4mis" / "data").is_dir():
        pytest.skip(f"{shared_data / 'acdc_ssl4mis'} absent")
    env = environment(shared_data)
    (tmp_path / "bundles").symlink_to(REPO / "bundles")
    exported = check(run_line(ACDC_DOC[0], tmp_path, env=env))
    assert "exported 1902 slices" in exported.stdout
    injected = check(run_line(ACDC_DOC[1], tmp_path, env=env))
    assert "10 with burned-in text" in injected.stdout
    assert injected.stdout.count("NOT legible (planted: --allow-illegible)") == 10
    assert "illegible canaries were planted" in injected.stderr
    training = python_block_with(
        'Preprocessing.from_bundle("bundles/cxr_pneumonia_classification")'
    )
    ran = subprocess.run([sys.executable, "-c", training], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=1200)  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert len(list((tmp_path / "probes").iterdir())) > 50
    check(run_line(ACDC_DOC[2], tmp_path, env=env))
    result = json.loads((tmp_path / "scan" / "leak_scan.json").read_text())
    settings = result["settings"]
    assert (settings["position"], settings["scale"]) == ([8, 8], 4)  # from the manifest
    assert settings["statistic"] == "class-shift" and "Resized" in settings["grid"]
    assert {row["name"] for row in result["rows"]} >= {"RUTH", "ANNA"}
    assert result["canary"]["legible"] is False and result["canary"]["files"] == 10
    page = (tmp_path / "scan" / "leak_scan.html").read_text()
    assert "not legible at the model input" in page


@pytest.mark.slow
def test_the_128px_leak_check_as_documented(shared_data: Path, tmp_path: Path) -> None:
    """docs/memorisation.md's clinical-size walkthrough, every step as written: the check
    answers "legible" without writing, the injector plants without --allow-illegible and
    records the 128-px input, the Python training step, and the scan through the bundle at
    128 px (refused without --bundle-set), whose report quotes its own path's cells."""
    if not (shared_data / "acdc_ssl4mis" / "data").is_dir():
        pytest.skip(f"{shared_data / 'acdc_ssl4mis'} absent")
    env = environment(shared_data)
    (tmp_path / "bundles").symlink_to(REPO / "bundles")
    check(run_line(ACDC_DOC[0], tmp_path, env=env))
    checked = check(run_line(ACDC_128_DOC[0], tmp_path, env=env))
    assert "10 of 10 legible" in checked.stdout and "image_size=128" in checked.stdout
    assert not (tmp_path / "burned").exists()
    injected = check(run_line(ACDC_128_DOC[1], tmp_path, env=env))
    assert injected.stdout.count(": legible") == 10 and "illegible" not in injected.stderr
    training = python_block_with('overrides={"image_size": 128}')
    ran = subprocess.run([sys.executable, "-c", training], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=1200)  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    without = ACDC_128_DOC[2].replace(" --bundle-set image_size=128", "")
    refused = subprocess.run(["bash", "-c", without], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=600)  # fmt: skip
    assert refused.returncode == 2 and "delivers 28x28" in refused.stderr
    check(run_line(ACDC_128_DOC[2], tmp_path, env=env))
    result = json.loads((tmp_path / "scan128" / "leak_scan.json").read_text())
    assert result["settings"]["input_shape"] == [128, 128]
    assert result["canary"]["legible"] is True and result["canary"]["files"] == 10
    assert "RUTH" in {row["name"] for row in result["rows"]}
    page = (tmp_path / "scan128" / "leak_scan.html").read_text()
    assert "a 128x128 model input" in page and "(legible at the model input" in page
    assert "not measured on this path" not in page, "the 128-px cells are packaged"


# --- data_prep/README.md and the Kermany example of the chest X-ray bundle -----------


@pytest.fixture(scope="module")
def layouts(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Synthetic copies of the layouts this project has no data for, standing for the
    documented paths, and a site map for the real ACDC release."""
    from test_data_prep_acdc import make_acdc
    from test_data_prep_cxr import make_covidx, make_kermany, make_rsna

    root = tmp_path_factory.mktemp("layouts")
    (root / "field_strength.csv").write_text(
        "patient,site\n"
        + "".join(f"patient{i:03d},{'1.5T' if i % 2 else '3T'}\n" for i in range(1, 101))
    )
    return {
        "/data/ACDC/database": str(make_acdc(root / "database")),
        "/data/chest_xray": str(make_kermany(root / "chest_xray")),
        "/data/covidx": str(make_covidx(root / "covidx")),
        "/data/rsna-pneumonia": str(make_rsna(root / "rsna-pneumonia")),
        "field_strength.csv": str(root / "field_strength.csv"),
    }


@pytest.mark.parametrize("command", PREPARE)
@pytest.mark.slow
def test_data_preparation_commands(
    command: str, layouts: dict[str, str], shared_data: Path, tmp_path: Path
) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "data").mkdir()
    before = {p: p.stat().st_mtime_ns for p in Path(layouts["/data/chest_xray"]).rglob("*")}
    check(run_line(command, tmp_path, replace=layouts, env=environment(shared_data)))
    output = tmp_path / command.split(" -o ")[1].split()[0]
    datalist = json.loads(output.read_text())
    assert datalist["training"] and "provenance" in datalist
    assert {p: p.stat().st_mtime_ns for p in before} == before


# --- docs/unlearning.md and README: NVIDIA FLARE --------------------------------------


@pytest.mark.fl
@pytest.mark.slow
@pytest.mark.parametrize("command", FL[:2], ids=["acdc", "mnist-constructed"])
@pytest.mark.slow
def test_federated_commands(command: str, shared_data: Path, tmp_path: Path) -> None:
    pytest.importorskip("nvflare", reason="NVIDIA FLARE is not installed")
    extra = FL_BOUNDS + (" --per-client 40" if "--data mnist" in command else "")
    result = check(run_line(command, tmp_path, extra=extra, env=environment(shared_data)))
    out = tmp_path / command.split("--out ")[1].split()[0]
    assert (out / "report.html").is_file() and (out / "results.json").is_file(), result.stdout
    versus = json.loads((out / "results.json").read_text())["versus_retraining"]
    assert len(versus["retrained_means"]) == 5 and "retraining" in versus["decision"]
    summary = (out / "summary.md").read_text()
    assert "models retrained without site-1" in summary
    retraining_fr = json.loads((out / "results.json").read_text())["retraining_forgetting_rate"]
    # measured on the same oracle, and printed beside the method's FR
    assert f"retraining from scratch on the same oracle: FR {100 * retraining_fr:.2f}%" in summary
    audits = json.loads((out / "results.json").read_text())["audits"]
    assert {"before/site-1/refmodel", "after/site-1/refmodel", "after/site-2/refmodel"} <= set(
        audits
    )
    assert audits["after/site-2/refmodel"]["decision"] in summary


@pytest.mark.fl
@pytest.mark.slow
def test_federated_removal_after_training(shared_data: Path, tmp_path: Path) -> None:
    """``fl simulate --method federaser``: FedAvg whose server keeps FedEraser's history,
    then a second FLARE job removes site-1; 4 rounds (retained: 0 and 2), so one
    calibration round of ceil(0.5 x 5) = 3 steps by each of the 2 sites that stay."""
    pytest.importorskip("nvflare", reason="NVIDIA FLARE is not installed")
    check(run_line(FL[3], tmp_path, extra=FL_BOUNDS + " --rounds 4", env=environment(shared_data)))
    out = tmp_path / "fl-federaser"
    results = json.loads((out / "results.json").read_text())
    assert results["label"] == "federaser" and results["withdrawal"] == {}
    assert (results["cost"]["rounds"], results["cost"]["local_steps"]) == (1, 6)
    assert results["cost"]["server_bytes"] > 0
    assert len(results["versus_retraining"]["retrained_means"]) == 5
    summary = (out / "summary.md").read_text()
    assert "Cost of removing site-1 (federaser): 6 local steps" in summary
    assert (out / "workspace" / "train" / "job" / "server" / "history.pt").is_file()


@pytest.mark.fl
@pytest.mark.slow
def test_federated_removal_of_a_late_joiner_from_its_checkpoint(
    shared_data: Path, tmp_path: Path
) -> None:
    """``fl simulate --method checkpoint``: site-1 joins in round 6 of 8; the server keeps
    the global model of round 6 and a second FLARE job reruns rounds 6-7 without it: 2
    sites x 2 rounds x 5 steps, a quarter of retraining's 2 x 8 x 5."""
    pytest.importorskip("nvflare", reason="NVIDIA FLARE is not installed")
    bounds = "--clients 3 --local-steps 5 --retrained 3"
    result = check(run_line(FL[5], tmp_path, extra=bounds, env=environment(shared_data)))
    out = tmp_path / "fl-checkpoint"
    results = json.loads((out / "results.json").read_text())
    assert results["label"] == "checkpoint"
    assert results["withdrawal"] == {"client": "site-1", "method": "checkpoint", "joined": 6}
    assert (results["cost"]["rounds"], results["cost"]["local_steps"]) == (2, 2 * 2 * 5)
    assert results["cost"]["server_bytes"] > 0
    assert "Cost of removing site-1 (checkpoint): 20 local steps" in result.stdout
    assert len(results["versus_retraining"]["retrained_means"]) == 3
    kits = out / "workspace" / "checkpoint" / "job" / "clients"
    assert sorted(p.name for p in kits.iterdir()) == ["site-2", "site-3"]


@pytest.mark.fl
@pytest.mark.slow
def test_federated_poc_deployment(shared_data: Path, tmp_path: Path) -> None:
    """``fl poc``: a provisioned server and clients as separate processes, the job
    submitted through the admin API, a 2-round withdrawal, every service stopped."""
    pytest.importorskip("nvflare", reason="NVIDIA FLARE is not installed")
    command = FL[2]
    result = check(run_line(command, tmp_path, extra=FL_BOUNDS, env=environment(shared_data)))
    out = tmp_path / "fl-poc"
    results = json.loads((out / "results.json").read_text())
    # the default removes site-1 after training by retraining: two deployments, the
    # federation with every site, then the one without it
    assert results["label"] == "retrain" and results["cost"]["local_steps"] == 2 * 2 * 5
    assert len(results["versus_retraining"]["retrained_means"]) == 5
    poc = out / "workspace" / "retrain" / "poc"
    assert results["logs"]["flare"] == str(poc.resolve())
    stay = {"site-2", "site-3"}
    for job, sites in (("train", {"site-1", *stay}), ("retrain", stay)):
        kits = {p.name for p in (out / "workspace" / job / "poc").glob("*/prod_00/*")}
        assert {"server", "admin@nvidia.com", *sites} <= kits, kits
        log = (out / "workspace" / job / "simulator.log").read_text()
        assert "FINISHED:COMPLETED" in log, job
    assert "site-1" not in {p.name for p in poc.glob("*/prod_00/*")}
    assert any(poc.glob("*/prod_00/server/startup/*.crt")), "no provisioned certificates"
    assert not processes_mentioning(str(out)), "POC services still running"
    assert (out / "report.html").is_file(), result.stdout
    _decides_as_the_library(results, shared_data, tmp_path / "api")


def _decides_as_the_library(results: dict, shared_data: Path, workspace: Path) -> None:
    """Issue 52: ``fl poc`` (its defaults and ``FL_BOUNDS``) against
    ``simulate_withdrawal`` on the same federation, configuration and removal, run on the
    simulator: the same decisions, statistics, forgetting rate and comparison with the
    retrained models (the deployment changes where the sites run, not what they compute)."""
    import torch

    from monai_forget.defaults import RETRAINED_MODELS
    from monai_forget.fl.run import (
        acdc_federation,
        default_auditors,
        mlp_config,
        simulate_withdrawal,
    )
    from monai_forget.fl.spec import Removal
    from monai_forget.unlearning.evaluation import AuditPlan

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the command runs
    try:
        with pytest.MonkeyPatch.context() as env:
            env.setenv("MONAI_FORGET_DATA", str(shared_data))
            federation = acdc_federation(size=32, n_clients=3, patients_per_class=1, seed=0)
            outcome = simulate_withdrawal(
                federation,
                mlp_config(federation, hidden=[128], rounds=2, local_steps=5, seed=0),
                Removal("site-1", "retrain"),
                workspace / "workspace",
                plan=AuditPlan(default_auditors(3), seed=0, cache_dir=workspace / "cache"),
                retrained=RETRAINED_MODELS,
            )
    finally:
        torch.set_num_threads(threads)
    assert_decides_as_the_library(results, outcome)


def _poc_once_its_services_run(out: Path, shared_data: Path, running) -> subprocess.Popen:
    """``fl poc`` (Forsaken in round 1 of 2: one deployment) started, returned 5 s after
    ``running(poc_folder)`` first says its services run."""
    command = [sys.executable, "-m", "monai_forget", "fl", "poc", "--out", str(out),
               "--method", "forsaken", "--clients", "3", "--rounds", "2", "--withdraw-round",
               "1", "--local-steps", "5", "--iterations", "2"]  # fmt: skip
    run = subprocess.Popen(command, env=environment(shared_data), stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)  # fmt: skip
    poc = out / "workspace" / "poc"
    deadline = time.monotonic() + 600 * load_per_core()
    while time.monotonic() < deadline and run.poll() is None and not running(poc):
        time.sleep(1)
    assert run.poll() is None, f"the POC ended before its services ran: {run.stderr.read()}"
    time.sleep(5)
    return run


@pytest.mark.fl
@pytest.mark.slow
def test_a_terminated_poc_leaves_no_service_or_port(shared_data: Path, tmp_path: Path) -> None:
    """``fl poc`` killed with SIGTERM once its services run: it exits 143 and no FLARE
    process or listening POC port remains (beside the other POC test: one xdist worker
    runs a file, so the two deployments never contend for FLARE's fixed ports)."""
    pytest.importorskip("nvflare", reason="NVIDIA FLARE is not installed")
    out = tmp_path / "fl-poc"
    poc = out / "workspace" / "poc"
    # the server and a client
    run = _poc_once_its_services_run(
        out, shared_data, lambda p: len(processes_mentioning(str(p.resolve()))) >= 2
    )
    run.send_signal(signal.SIGTERM)
    assert run.wait(timeout=180 * load_per_core()) == 128 + signal.SIGTERM
    assert processes_mentioning(str(poc.resolve())) == []
    check_ports_free()  # raises if a POC port is still listened on
    assert not (out / "results.json").exists()  # nothing half-written


@pytest.mark.fl
@pytest.mark.slow
def test_a_killed_poc_is_cleared_by_its_stop_command(shared_data: Path, tmp_path: Path) -> None:
    """``fl poc`` killed with SIGKILL (no handler runs): its services stay up, as the docs
    say, and ``fl poc --stop OUT`` stops them by their recorded ids and frees the ports."""
    pytest.importorskip("nvflare", reason="NVIDIA FLARE is not installed")
    out = tmp_path / "fl-poc"
    poc = out / "workspace" / "poc"

    def recorded(folder: Path) -> bool:
        record = folder / "services.json"
        return record.is_file() and len(json.loads(record.read_text())) >= 2

    run = _poc_once_its_services_run(out, shared_data, recorded)
    run.kill()
    assert run.wait(timeout=60 * load_per_core()) == -signal.SIGKILL
    assert processes_mentioning(str(poc.resolve())), "a hard kill left nothing (docs say it does)"
    result = check(run_line(FL[4], tmp_path, env=environment(shared_data)))
    assert "FLARE's POC ports are free" in result.stdout
    assert processes_mentioning(str(poc.resolve())) == []
    check_ports_free()
