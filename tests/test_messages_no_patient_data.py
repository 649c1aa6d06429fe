"""One rule for every message: name the file, line and field, never a value that can
identify a patient. Each error path of ``prepare``, ``canary`` and ``memorisation`` is
driven here with identifying values (a DICOM PatientID, a patient's name in a
non-Latin script, a label-file row, clinical values), and none may appear in stdout,
stderr, a log record or the name of any file left behind."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pydicom
import pytest
import torch
from pydicom_files import real_file, write_dicom

from monai_forget.cli import main
from monai_forget.networks import get_network

PATIENT_ID = "ZQX4471PID"
CJK_NAME = "小李龍"
NET = {"in_shape": [1, 8, 8], "num_classes": 10, "hidden": [16]}


def _run_and_check(argv: list[str], secrets: tuple[str, ...], tmp_path: Path, capsys,
                   caplog) -> str:  # fmt: skip
    """Run a command that must fail cleanly; no secret in its output, logs or files."""
    with caplog.at_level(logging.DEBUG):
        code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert err.startswith("monai-forget: error:") and err.count("\n") == 1, err
    names = [p.name for p in tmp_path.rglob("*")]
    for secret in secrets:
        for where, text in (("stdout", out), ("stderr", err), ("log", caplog.text)):
            assert secret not in text, f"{secret!r} in {where}: {text}"
        assert not any(secret in name for name in names), names
    return err


def test_prepare_rsna_never_repeats_a_dicom_patient_id(tmp_path, capsys, caplog) -> None:
    root = tmp_path / "rsna"
    (root / "stage_2_train_labels.csv").parent.mkdir(parents=True)
    (root / "stage_2_train_labels.csv").write_text("patientId,x,y,width,height,Target\nccc,,,,,0\n")
    write_dicom(root / "stage_2_train_images" / "ccc.dcm", PATIENT_ID)
    err = _run_and_check(["prepare", "rsna", str(root), "-o", str(tmp_path / "d.json")],
                         (PATIENT_ID,), tmp_path, capsys, caplog)  # fmt: skip
    assert "ccc.dcm: its PatientID differs from its file name" in err


def test_prepare_covidx_never_repeats_a_label_row(tmp_path, capsys, caplog) -> None:
    root = tmp_path / "covidx"
    (root / "train").mkdir(parents=True)
    (root / "train.txt").write_text(f"{PATIENT_ID} only-three-fields positive\n")
    err = _run_and_check(["prepare", "covidx", str(root), "-o", str(tmp_path / "d.json")],
                         (PATIENT_ID,), tmp_path, capsys, caplog)  # fmt: skip
    assert "train.txt, line 1: expected the four fields" in err
    (root / "train" / "a.png").write_bytes(b"")
    (root / "train" / "b.png").write_bytes(b"")
    (root / "train.txt").write_text(
        f"{PATIENT_ID} a.png positive cohen\n{PATIENT_ID} b.png positive rsna\n"
    )
    err = _run_and_check(["prepare", "covidx", str(root), "-o", str(tmp_path / "d.json")],
                         (PATIENT_ID,), tmp_path, capsys, caplog)  # fmt: skip
    assert "line 2: its patient has source 'rsna' but" in err


def test_acdc_clinical_values_are_never_repeated(tmp_path) -> None:
    from monai_forget.data_prep.acdc import read_info

    info = tmp_path / "Info.cfg"
    info.write_text("ED: 1\nES: 3\nGroup: NOR\nHeight: 184cm-ZQX\nNbFrame: 30\nWeight: 80\n")
    with pytest.raises(ValueError, match="field Height is not a number") as caught:
        read_info(info)
    assert "184" not in str(caught.value)
    info.write_text("ED: 1\nWeight 93.5 ZQX\n")
    with pytest.raises(ValueError, match="line 2: expected 'Key: value'") as caught:
        read_info(info)
    assert "93.5" not in str(caught.value)


def test_canary_never_repeats_a_name_it_cannot_draw(tmp_path, capsys, caplog) -> None:
    source = real_file("CT_small.dcm")
    argv = ["canary", "inject", str(source), str(tmp_path / "out.dcm"), "--text", CJK_NAME]
    err = _run_and_check(argv, tuple(CJK_NAME), tmp_path, capsys, caplog)
    assert "outside" in err and "typeface" in err
    # the default text, the DICOM's own PatientName, in a script the typeface lacks
    named = tmp_path / "named.dcm"
    ds = pydicom.dcmread(source)
    ds.PatientName = CJK_NAME
    ds.SpecificCharacterSet = "ISO_IR 192"
    ds.save_as(named)
    err = _run_and_check(["canary", "inject", str(named), str(tmp_path / "out2.dcm")],
                         tuple(CJK_NAME), tmp_path, capsys, caplog)  # fmt: skip
    assert "PatientName has 3 character(s) outside the typeface" in err


def test_memorisation_never_repeats_a_roster_name(tmp_path, capsys, caplog) -> None:
    torch.manual_seed(0)
    torch.save(get_network("mlp", **NET).state_dict(), tmp_path / "model.pt")
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "probes.npz", images=rng.random((20, 1, 8, 8), dtype=np.float32),
             labels=rng.integers(0, 10, 20))  # fmt: skip
    roster = tmp_path / "roster.csv"
    roster.write_text(f"name\nANNA\n{CJK_NAME}\n")
    argv = ["memorisation", "scan", "--model", str(tmp_path / "model.pt"), "--network", "mlp",
            "--network-args", json.dumps(NET), "--probes", str(tmp_path / "probes.npz"),
            "--out", str(tmp_path / "scan"), "--roster", str(roster)]  # fmt: skip
    err = _run_and_check(argv, (*CJK_NAME, "ANNA"), tmp_path, capsys, caplog)
    assert "entry 2 (line 3 of roster.csv) of the roster has 3 character(s) outside" in err


def test_a_feature_is_described_without_its_text() -> None:
    from monai_forget.memorisation.feature import UniqueFeature

    feature = UniqueFeature.from_text("KATE", position=(1, 1))
    assert "KATE" not in feature.describe() and "4 characters" in feature.describe()
