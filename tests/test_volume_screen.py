"""Issue 34, item 5: a scan that cannot be segmented (all-NaN, constant, truncated h5) is
refused by name before inference, never written as a silent all-background mask, and
the run's summary says how many were refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from bundle_runs import IGNORED
from commands import REPO, environment, run_line

from monai_forget.acdc import VolumeScreen, group_volumes, image_problem

BUNDLE = REPO / "bundles" / "acdc_segmentation"
INFERENCE = (
    "python -m monai.bundle run --config_file \"['configs/inference.json','configs/cpu.json']\""
    " --ckpt_file models/cpu/model.pt"
)
DESIGN = {"channels": [4, 8, 16, 32, 64], "num_res_units": 1}
SHAPE = (3, 32, 32)  # slices, H, W: the SSL4MIS h5 layout


def _write(path: Path, image: np.ndarray) -> None:
    with h5py.File(path, "w") as handle:
        handle["image"] = image
        handle["label"] = np.zeros(image.shape, dtype=np.uint8)


def _release(root: Path) -> list[dict]:
    """Slice entries of five patients' ED and ES volumes: patient001 sound; patient002's
    ED all NaN and ES constant; patient003's ED a truncated file; patient004's ES holding
    one infinite voxel; patient005's ED missing."""
    rng = np.random.default_rng(0)
    entries = []
    for patient in ("patient001", "patient002", "patient003", "patient004", "patient005"):
        for phase in ("ED", "ES"):
            image = rng.random(SHAPE, dtype=np.float32)
            path = root / f"{patient}_{phase}.h5"
            if (patient, phase) == ("patient002", "ED"):
                image[:] = np.nan
            elif (patient, phase) == ("patient002", "ES"):
                image[:] = 0.25
            elif (patient, phase) == ("patient004", "ES"):
                image[1, 2, 3] = np.inf
            _write(path, image)
            if (patient, phase) == ("patient003", "ED"):
                path.write_bytes(path.read_bytes()[:900])
            elif (patient, phase) == ("patient005", "ED"):
                path.unlink()
            entries += [
                {
                    "image": path.name,
                    "seg": path.name,
                    "patient": patient,
                    "phase": phase,
                    "label": 0,
                    "slice": i,
                    "slice_axis": 0,
                }
                for i in range(SHAPE[0])
            ]
    return entries


REFUSED = {
    "patient002 ED": "not finite",
    "patient002 ES": "constant",
    "patient003 ED": "cannot be read",
    "patient004 ES": "1 of 3072 voxels are not finite",
    "patient005 ED": "file not found",
}


def test_image_problem_names_each_fault() -> None:
    sound = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert image_problem(sound) is None
    nan = sound.copy()
    nan[0, 0] = np.nan
    assert "1 of 12 voxels are not finite" in image_problem(nan)
    assert "constant" in image_problem(np.full((3, 4), 7.0))
    assert image_problem(np.array([[0.0, 1e-30]])) is None  # faint is not constant


def test_screen_refuses_each_fault_by_name(tmp_path: Path, monkeypatch, caplog) -> None:
    monkeypatch.chdir(tmp_path)
    volumes = group_volumes(_release(tmp_path))
    with caplog.at_level("WARNING", logger="monai_forget.acdc.screening"):
        screen = VolumeScreen(volumes)
    accepted = {(v["patient"], v["phase"]) for v in screen.accepted}
    assert accepted == {("patient001", "ED"), ("patient001", "ES"), ("patient003", "ES"),
                        ("patient004", "ED"), ("patient005", "ES")}  # fmt: skip
    assert len(screen.refused) == len(REFUSED)
    for (where, why), (name, reason) in zip(screen.refused, REFUSED.items(), strict=True):
        assert where.startswith(name) and reason in why, (where, why)
        assert any(name in r.getMessage() for r in caplog.records)
    assert screen.summary().startswith("segmented 5 of 10 volumes; 5 refused")
    with pytest.raises(ValueError, match="none of the 2 volumes can be segmented"):
        VolumeScreen([v for v in volumes if v["patient"] == "patient002"])


def test_inference_refuses_bad_scans_and_segments_the_rest(tmp_path: Path) -> None:
    from monai.networks.nets import UNet

    bundle = tmp_path / "bundle"
    shutil.copytree(BUNDLE, bundle, ignore=shutil.ignore_patterns(*IGNORED))
    (bundle / "data").mkdir(exist_ok=True)
    entries = _release(bundle / "data")
    (bundle / "data" / "acdc.json").write_text(json.dumps({"test": entries}))
    torch.manual_seed(0)
    net = UNet(2, 1, 4, DESIGN["channels"], (2, 2, 2, 2), num_res_units=1, norm="batch")
    (bundle / "models" / "cpu").mkdir(parents=True, exist_ok=True)
    torch.save(net.state_dict(), bundle / "models" / "cpu" / "model.pt")
    options = "--channels '[4, 8, 16, 32, 64]' --num_res_units 1 --infer_roi '[32, 32]'"
    run = run_line(INFERENCE, bundle, extra=options, env=environment(OMP_NUM_THREADS="1"))
    assert run.returncode == 0, run.stderr[-3000:]
    written = sorted(p.name for p in (bundle / "inference").iterdir())
    assert written == ["patient001_ED_seg.nii.gz", "patient001_ES_seg.nii.gz",
                       "patient003_ES_seg.nii.gz", "patient004_ED_seg.nii.gz",
                       "patient005_ES_seg.nii.gz"]  # fmt: skip
    log = run.stdout + run.stderr
    for name, reason in REFUSED.items():
        assert any(name in line and reason in line for line in log.splitlines()), name
    assert "segmented 5 of 10 volumes; 5 refused" in log
    assert "Traceback" not in log
