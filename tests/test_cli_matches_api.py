"""Issue 52: the command line only parses and prints. For ``memorisation split-patients``,
``canary inject`` and ``prepare medmnist`` the same inputs through the command (its
defaults) and through the library (its defaults) give the same outputs. (``audit``:
``test_cli_audit.py``; ``memorisation score|scan``: ``test_memorisation_scan.py``;
``canary exposure``: ``test_canary_exposure.py``; ``shadow train``:
``test_shadow_parallel.py``; ``audit verify``: ``test_cli_audit.py``; ``fl poc``:
``test_documented_commands.py::test_federated_poc_deployment``; ``demo`` and ``demo leak``:
``test_demo.py`` and ``test_leak_demo.py``.) And ``fl simulate`` against
``simulate_withdrawal``."""

from __future__ import annotations

import json

import numpy as np
import pydicom
import pytest
from commands import assert_decides_as_the_library
from pydicom_files import real_file

from monai_forget.cli import main


def test_split_patients_writes_the_librarys_splits(tmp_path, capsys) -> None:
    from monai_forget.memorisation.patient_references import read_patient_ids, split_patients

    patients = tmp_path / "patients.txt"
    patients.write_text("\n".join(f"patient{i:03d}" for i in range(40)) + "\n")
    out = tmp_path / "splits"
    assert main(["memorisation", "split-patients", "--patients", str(patients), "--seed",
                 "3", "--out", str(out)]) == 0  # fmt: skip
    written = sorted(out.glob("reference_*_patients.txt"), key=lambda p: int(p.stem.split("_")[1]))
    api = split_patients(read_patient_ids(patients), len(written) // 2, 3)
    assert [set(read_patient_ids(p)) for p in written] == [set(s) for s in api]
    assert f"{len(written)} reference models" in capsys.readouterr().out
    assert split_patients(read_patient_ids(patients), len(written) // 2, 4) != api  # seeded


def test_canary_inject_writes_the_librarys_pixels(tmp_path) -> None:
    from monai_forget.dicom import TextHasher, as_options, inject_and_publish

    source = real_file("CT_small.dcm")
    cli_out, api_out = tmp_path / "cli.dcm", tmp_path / "api.dcm"
    assert main(["canary", "inject", str(source), str(cli_out), "--text", "JOHN DOE",
                 "--position", "3", "4", "--scale", "2"]) == 0  # fmt: skip
    published = inject_and_publish(
        source, api_out, as_options("JOHN DOE", (3, 4), 2), hasher=TextHasher()
    )
    cli, api = pydicom.dcmread(cli_out), pydicom.dcmread(api_out)
    np.testing.assert_array_equal(cli.pixel_array, api.pixel_array)
    assert not np.array_equal(cli.pixel_array, pydicom.dcmread(source).pixel_array)
    assert cli.BurnedInAnnotation == api.BurnedInAnnotation == "YES"
    manifest = json.loads((tmp_path / "cli.dcm.manifest.json").read_text())["records"][0]
    placed = ("bbox_row", "bbox_col", "bbox_width", "bbox_height", "scale")
    record = published.records[0].to_dict()
    assert {k: manifest[k] for k in placed} == {k: record[k] for k in placed}


def test_prepare_medmnist_lists_the_librarys_samples(tmp_path) -> None:
    from monai_forget.data_prep import medmnist

    npz = tmp_path / "tiny.npz"
    rng = np.random.default_rng(0)
    arrays = {}
    for split, n in (("train", 12), ("val", 4), ("test", 4)):
        arrays[f"{split}_images"] = rng.integers(0, 255, (n, 28, 28), dtype=np.uint8)
        arrays[f"{split}_labels"] = rng.integers(0, 2, (n, 1), dtype=np.uint8)
    arrays["val_images"][0] = arrays["train_images"][0]  # a repeat: left out by default
    np.savez(npz, **arrays)
    listed = tmp_path / "list.json"
    assert main(["prepare", "medmnist", str(npz), "--image-dir", str(tmp_path / "png"),
                 "-o", str(listed), "--absolute"]) == 0  # fmt: skip
    datalist = json.loads(listed.read_text())
    cli = sorted(
        (e["image"], e["label"]) for key in ("training", "validation", "test")
        for e in datalist.get(key, [])
    )  # fmt: skip
    api = sorted(
        (str(s["image"]), s["label"]) for s in medmnist.collect(npz, tmp_path / "png")
    )  # fmt: skip
    assert cli == api and len(api) == 19


@pytest.mark.fl
@pytest.mark.slow
def test_fl_simulate_decides_as_the_library(shared_data, tmp_path, capsys) -> None:
    """``fl simulate`` and ``simulate_withdrawal`` on the same federation, configuration,
    withdrawal and audit plan: the same decisions, forgetting rates and comparison with
    the retrained models."""
    pytest.importorskip("nvflare", reason="NVIDIA FLARE is not installed")
    from monai_forget.fl.run import (
        default_auditors,
        mlp_config,
        sample_federation,
        simulate_withdrawal,
    )
    from monai_forget.fl.spec import Withdrawal
    from monai_forget.unlearning.evaluation import AuditPlan

    out = tmp_path / "cli"
    assert main(["fl", "simulate", "--data", "mnist", "--site-signature", "--method",
                 "natural", "--clients", "3", "--per-client", "40", "--rounds", "2",
                 "--withdraw-round", "1", "--local-steps", "5", "--retrained", "3",
                 "--out", str(out)]) == 0  # fmt: skip
    capsys.readouterr()
    cli = json.loads((out / "results.json").read_text())
    federation = sample_federation("mnist", n_clients=3, per_client=40, signed="site-1", seed=0)
    outcome = simulate_withdrawal(
        federation,
        mlp_config(federation, hidden=[128], rounds=2, local_steps=5, seed=0),
        Withdrawal("site-1", 1, "natural", {}),
        tmp_path / "api" / "workspace",
        plan=AuditPlan(default_auditors(3), seed=0, cache_dir=tmp_path / "api" / "cache"),
        retrained=3,
    )
    assert_decides_as_the_library(cli, outcome)
