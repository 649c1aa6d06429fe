"""The ACDC segmentation bundle: metadata, configs, and a bounded end-to-end run through
the documented command lines (``python -m monai.bundle run ...`` as a user types it):
prepare -> train -> evaluate -> inference (NIfTI) -> TorchScript export -> audit."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
#: the documented datalist: two seeded random providers, seed 0
SEEDED = ["--random-sites", "2", "--seed", "0"]
BUNDLE = REPO / "bundles" / "acdc_segmentation"
SCHEMA = REPO.parent / "shared" / "schemas" / "meta_schema_20240725.json"
CPU = "['configs/train.json','configs/cpu.json']"

#: A small network and budget for CI (the cpu profile's design, shrunk).
SMALL = [
    "--channels",
    "[8,16,32,64,128]",
    "--num_res_units",
    "1",
    "--patch_size",
    "64",
    "--batch_size",
    "4",
    "--epochs",
    "1",
    "--steps_per_epoch",
    "3",
    "--max_per_class",
    "2",
]


def test_metadata_and_files(tmp_path: Path) -> None:
    from monai.bundle import verify_metadata, verify_net_in_out

    for name in (
        "LICENSE",
        "docs/README.md",
        "docs/data_license.txt",
        "large_files.yml",
        "configs/logging.conf",
    ):
        assert (BUNDLE / name).is_file(), name
    if not SCHEMA.is_file():
        pytest.skip(f"MONAI metadata schema not found at {SCHEMA}")
    schema = tmp_path / "schema.json"
    shutil.copyfile(SCHEMA, schema)
    verify_metadata(meta_file=str(BUNDLE / "configs" / "metadata.json"), filepath=str(schema))
    assert schema.read_bytes() == SCHEMA.read_bytes()  # verified offline, nothing downloaded
    verify_net_in_out(
        net_id="network_def",
        meta_file=str(BUNDLE / "configs" / "metadata.json"),
        config_file=str(BUNDLE / "configs" / "inference.json"),
        device="cpu",
    )
    meta = json.loads((BUNDLE / "configs" / "metadata.json").read_text())
    assert meta["network_data_format"]["outputs"]["pred"]["channel_def"]["3"] == "LV"


def _run(*args: str, cwd: Path = BUNDLE) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), MPLBACKEND="Agg", PYTHONWARNINGS="ignore")
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )


def _ok(done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-4000:])


@pytest.fixture(scope="module")
def bounded(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Prepare, train (a small network, 3 steps), evaluate on the test patients, and
    segment one test patient: every step through its documented command line."""
    tmp = tmp_path_factory.mktemp("segmentation_bundle")
    datalist = tmp / "acdc.json"
    _ok(
        _run(
            "monai_forget",
            "prepare",
            "acdc-h5",
            str(shared_data / "acdc_ssl4mis"),
            "-o",
            str(datalist),
            *SEEDED,
        )
    )
    data = ["--data_file", str(datalist)]
    model = tmp / "model.pt"
    _ok(
        _run(
            "monai.bundle",
            "run",
            "--config_file",
            CPU,
            *data,
            "--ckpt_file",
            str(model),
            "--val_max_per_class",
            "1",
            *SMALL,
        )
    )
    evaluate = tmp / "eval"
    _ok(
        _run(
            "monai.bundle",
            "run",
            "--config_file",
            "['configs/train.json','configs/cpu.json','configs/evaluate.json']",
            *data,
            "--ckpt_file",
            str(model),
            "--output_dir",
            str(evaluate),
            "--val_max_per_class",
            "1",
            *SMALL,
        )
    )
    masks = tmp / "inference"
    infer = [
        "--config_file",
        "['configs/inference.json','configs/cpu.json']",
        *data,
        "--ckpt_file",
        str(model),
        "--output_dir",
        str(masks),
        "--patients",
        "['patient007']",
        "--channels",
        "[8,16,32,64,128]",
        "--num_res_units",
        "1",
    ]
    _ok(_run("monai.bundle", "run", *infer))
    return {
        "tmp": tmp,
        "datalist": datalist,
        "model": model,
        "eval": evaluate,
        "masks": masks,
        "infer": infer,
    }


def test_training_writes_the_model_and_a_resumable_checkpoint(bounded: dict) -> None:
    summary = json.loads(bounded["model"].with_name("model_train.json").read_text())
    assert summary["epochs"] == 1 and summary["iterations"] == 3
    assert summary["training_data"]["patients"] == 10  # 2 per group, all their slices
    assert list(bounded["model"].with_name("model_resume").glob("resume_checkpoint_*.pt"))
    state = torch.load(bounded["model"], weights_only=True)
    assert any(k.endswith("weight") for k in state)


def test_evaluation_reports_dice_and_hd95_per_structure(bounded: dict) -> None:
    record = json.loads((bounded["eval"] / "metrics.json").read_text())
    metrics = record["metrics"]
    assert record["section"] == "test" and record["patients"] == 5 and record["volumes"] == 10
    assert set(metrics["dice_by_class"]) == {"RV", "MYO", "LV"}
    assert set(metrics["hd95_by_class"]) == {"RV", "MYO", "LV"}
    assert 0.0 <= metrics["mean_dice"] <= 1.0
    rows = list(csv.DictReader((bounded["eval"] / "per_volume.csv").open()))
    assert len(rows) == 10 and {r["phase"] for r in rows} == {"ED", "ES"}
    dice = np.array([[float(r[f"dice_{s}"]) for s in ("RV", "MYO", "LV")] for r in rows])
    # The reported per-structure Dice is the mean of the per-volume values.
    np.testing.assert_allclose(
        dice.mean(0), [metrics["dice_by_class"][s] for s in ("RV", "MYO", "LV")], rtol=1e-4
    )


def test_inference_writes_nifti_masks_and_never_replaces_them(bounded: dict) -> None:
    import h5py

    files = sorted(p.name for p in bounded["masks"].iterdir())
    assert files == ["patient007_ED_seg.nii.gz", "patient007_ES_seg.nii.gz"]
    mask = nib.load(bounded["masks"] / files[0])
    source = Path(os.environ.get("MONAI_FORGET_DATA", REPO.parent / "shared" / "data"))
    with h5py.File(source / "acdc_ssl4mis" / "data" / "patient007_frame01.h5") as f:
        depth, h, w = f["image"].shape
    assert mask.shape == (h, w, depth) and mask.get_data_dtype() == np.uint8
    assert int(mask.header["sform_code"]) == int(mask.header["qform_code"]) == 0  # h5: no geometry
    assert set(np.unique(np.asarray(mask.dataobj))) <= {0, 1, 2, 3}
    again = _run("monai.bundle", "run", *bounded["infer"])
    assert again.returncode != 0
    assert "FileExistsError" in again.stderr and "patient007_ED_seg.nii.gz" in again.stderr


def test_torchscript_export_matches_the_network(bounded: dict) -> None:
    ts = bounded["tmp"] / "model.ts"
    _ok(
        _run(
            "monai.bundle",
            "ckpt_export",
            "network_def",
            "--filepath",
            str(ts),
            "--ckpt_file",
            str(bounded["model"]),
            "--meta_file",
            "configs/metadata.json",
            "--config_file",
            "['configs/inference.json','configs/cpu.json']",
            "--channels",
            "[8,16,32,64,128]",
            "--num_res_units",
            "1",
        )
    )
    from monai.networks.nets import UNet

    net = UNet(2, 1, 4, (8, 16, 32, 64, 128), (2, 2, 2, 2), num_res_units=1, norm="batch")
    net.load_state_dict(torch.load(bounded["model"], weights_only=True))
    scripted = torch.jit.load(str(ts))
    x = torch.rand(2, 1, 96, 112)
    torch.testing.assert_close(scripted(x), net.eval()(x))


def test_audit_of_a_provider_is_consistent(bounded: dict) -> None:
    """audit.json with shadows trained by the bundle itself (same small design): the
    outputs exist and every statistic is reproduced from the per-image scores written."""
    out = bounded["tmp"] / "audit"
    shadow = {
        "channels": [8, 16, 32, 64, 128],
        "num_res_units": 1,
        "patch_size": 64,
        "batch_size": 4,
        "epochs": 1,
        "steps_per_epoch": 3,
        "max_per_class": None,
    }
    _ok(
        _run(
            "monai.bundle",
            "run",
            "--config_file",
            "['configs/train.json','configs/cpu.json','configs/audit.json']",
            "--data_file",
            str(bounded["datalist"]),
            "--target_ckpt",
            str(bounded["model"]),
            "--output_dir",
            str(out),
            "--cache_dir",
            str(bounded["tmp"] / "cache"),
            "--calibration_max_per_class",
            "1",
            "--shadow_settings",
            repr(shadow),
            *SMALL,
        )
    )
    from monai_forget.audit import EMAReference, KSReference
    from monai_forget.segmentation import SegmentationScores

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
    assert reference["provider"] == "random2" and reference["query_size"] == int(q.sum())
    assert (out / "report.html").is_file()
    assert len(list((bounded["tmp"] / "cache" / "segmentation_shadows").glob("*.pt"))) == 3
