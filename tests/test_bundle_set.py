"""A bundle read at the parameters its model was trained with (issue 65, item 5):
``--bundle-set image_size=128`` as ``python -m monai.bundle run --image_size 128`` sets it,
in the injector's legibility check, ``canary check`` and the scan; a scan whose model
input is not the one the canary was measured at is refused."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from monai_forget.cli import main
from monai_forget.cli.options import bundle_parameter
from monai_forget.dicom.manifest import check_model_input, manifest_placement
from monai_forget.memorisation.pipeline import Preprocessing

CXR_BUNDLE = str(Path(__file__).resolve().parents[1] / "bundles" / "cxr_pneumonia_classification")


def _png(path: Path, size: int, seed: int) -> Path:
    pixels = np.random.default_rng(seed).integers(20, 120, (size, size)).astype(np.uint8)
    Image.fromarray(pixels).save(path)
    return path


def test_a_bundle_parameter_sets_the_model_input(tmp_path):
    """image_size=112 on a 224-px PNG: the model input is its 2x2 block means / 255 (by
    hand), not the 28-px default; a parameter the config lacks is refused by name."""
    path = _png(tmp_path / "cr.png", 224, 0)
    pre = Preprocessing.from_bundle(CXR_BUNDLE, overrides={"image_size": 112})
    (loaded,) = pre.load([path])
    blocks = (loaded[0] / 255.0).reshape(112, 2, 112, 2).mean(axis=(1, 3))
    np.testing.assert_allclose(pre(loaded)[0], blocks, atol=1e-6)
    assert "image_size=112" in pre.description
    assert Preprocessing.from_bundle(CXR_BUNDLE)(loaded).shape == (1, 28, 28)
    with pytest.raises(ValueError, match="no parameter 'imagesize'"):
        Preprocessing.from_bundle(CXR_BUNDLE, overrides={"imagesize": 112})


def test_a_bundle_parameter_is_read_as_json_where_it_is_json():
    assert bundle_parameter("image_size=128") == ("image_size", 128)
    assert bundle_parameter("device=cpu") == ("device", "cpu")
    assert bundle_parameter("exclude_sites=[1, 2]") == ("exclude_sites", [1, 2])
    with pytest.raises(argparse.ArgumentTypeError, match="KEY=VALUE"):
        bundle_parameter("128")


def test_canary_check_reads_the_bundle_at_its_trained_size(tmp_path, capsys):
    """ANNA at scale 4 on 256 px: a capital 20 px high is 2.2 px at the 28-px default
    (not legible, exit 1) and 10 px at image_size=128 (legible, exit 0)."""
    path = _png(tmp_path / "cr.png", 256, 1)
    args = ["canary", "check", str(path), "--bundle", CXR_BUNDLE, "--text", "ANNA",
            "--scale", "4", "--position", "4", "4"]  # fmt: skip
    assert main(args) == 1
    assert "1 of 1 NOT legible" in capsys.readouterr().out
    assert main([*args, "--bundle-set", "image_size=128"]) == 0
    out = capsys.readouterr().out
    assert "1 of 1 legible" in out and "image_size=128" in out
    assert main([*args, "--bundle-set", "imagesize=128"]) == 2
    assert "no parameter 'imagesize'" in capsys.readouterr().err


def test_a_scan_at_another_model_input_than_the_canarys_is_refused(tmp_path, capsys):
    """Planted with image_size=112, the manifest records the 112-px input; a scan through
    the bundle without that parameter (28 px) is refused before scanning, naming both
    sizes and --bundle-set; with it, the scan runs."""
    canary = _png(tmp_path / "canary.png", 224, 2)
    planted = tmp_path / "planted"
    planted.mkdir()
    code = main(["canary", "inject", str(canary), str(planted / "c.png"), "--text", "LUCY",
                 "--scale", "3", "--position", "3", "3", "--bundle", CXR_BUNDLE,
                 "--bundle-set", "image_size=112"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    (manifest,) = planted.glob("*.manifest.json")
    assert manifest_placement(manifest)["input_shape"] == (1, 112, 112)
    probes = tmp_path / "probes"
    probes.mkdir()
    for i in range(6):
        _png(probes / f"{i}.png", 224, 10 + i)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(112 * 112, 2))
    torch.jit.script(net.eval()).save(str(tmp_path / "model.pt"))
    (tmp_path / "roster.csv").write_text("name\nLUCY\nANNA\nJOHN\nMARY\n")
    scan = ["memorisation", "scan", "--model", str(tmp_path / "model.pt"), "--probes",
            str(probes), "--bundle", CXR_BUNDLE, "--canary-manifest", str(manifest),
            "--roster", str(tmp_path / "roster.csv"), "--decoys", "20", "--out",
            str(tmp_path / "scan")]  # fmt: skip
    assert main(scan) == 2
    err = capsys.readouterr().err
    assert "112x112 model input" in err and "delivers 28x28" in err and "--bundle-set" in err
    assert not (tmp_path / "scan" / "leak_scan.json").exists()
    assert main([*scan, "--bundle-set", "image_size=112"]) == 0
    record = json.loads((tmp_path / "scan" / "leak_scan.json").read_text())
    assert record["settings"]["input_shape"] == [112, 112]


def test_the_model_input_check_passes_what_matches_or_was_not_measured():
    check_model_input({"input_shape": (1, 64, 64)}, (200, 1, 64, 64), "m.json")
    check_model_input({"input_shape": None}, (200, 1, 28, 28), "m.json")
    with pytest.raises(ValueError, match=r"64x64 model input.*delivers 64x32"):
        check_model_input({"input_shape": (1, 64, 64)}, (200, 1, 64, 32), "m.json")
