"""``monai-forget canary inject`` end to end through the real dispatcher."""

from __future__ import annotations

import json
import shutil

import pydicom
import pytest
from pydicom_files import real_file

from monai_forget.cli import main


def test_single_file_with_manifest(tmp_path, capsys):
    out = tmp_path / "canary.dcm"
    code = main(
        [
            "canary",
            "inject",
            str(real_file("CT_small.dcm")),
            str(out),
            "--text",
            "JOHN DOE",
            "--position",
            "3",
            "4",
            "--scale",
            "2",
        ]
    )
    assert code == 0
    assert "wrote 1 file(s), 1 with burned-in text" in capsys.readouterr().out
    ds = pydicom.dcmread(out)
    assert ds.BurnedInAnnotation == "YES"
    manifest = json.loads((tmp_path / "canary.dcm.manifest.json").read_text())
    record = manifest["records"][0]
    assert (record["bbox_row"], record["bbox_col"], record["scale"]) == (3, 4, 2)
    assert record["bbox_width"] == (6 * 8 - 1) * 2
    assert "JOHN DOE" not in (tmp_path / "canary.dcm.manifest.csv").read_text()
    assert (tmp_path / "canary.dcm.manifest.csv").read_text().count("\n") == 2


def test_plain_text_flag_and_output_folder(tmp_path):
    out_dir = tmp_path / "outdir"
    out_dir.mkdir()
    code = main(
        [
            "canary",
            "inject",
            str(real_file("MR_small.dcm")),
            str(out_dir),
            "--text",
            "Ann",
            "--plain-text",
            "--manifest",
            str(tmp_path / "m"),
        ]
    )
    assert code == 0
    assert (out_dir / "MR_small.dcm").is_file()
    record = json.loads((tmp_path / "m.manifest.json").read_text())["records"][0]
    assert record["text"] == "Ann"


def test_folder_all_and_dry_run(tmp_path, capsys):
    src = tmp_path / "in" / "series"
    src.mkdir(parents=True)
    for name in ("MR_small.dcm", "MR_small_RLE.dcm"):
        shutil.copyfile(real_file(name), src / name)
    assert (
        main(
            [
                "canary",
                "inject",
                str(tmp_path / "in"),
                str(tmp_path / "dry"),
                "--all",
                "--text",
                "A",
                "--dry-run",
            ]
        )
        == 0
    )
    assert "would write 2 file(s), 2 with burned-in text" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]
    assert (
        main(
            [
                "canary",
                "inject",
                str(tmp_path / "in"),
                str(tmp_path / "out"),
                "--all",
                "--text",
                "A",
                "--frames",
                "0",
            ]
        )
        == 0
    )
    for name in ("MR_small.dcm", "MR_small_RLE.dcm"):
        assert pydicom.dcmread(tmp_path / "out" / "series" / name).BurnedInAnnotation == "YES"
    rows = (tmp_path / "out.manifest.csv").read_text().splitlines()
    assert len(rows) == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--text", "A", "--position", "200", "0"], "image is 128x128"),
        (["--text", "A_"], "a character outside the"),
        (["--text", "A", "--all"], "folder inputs only"),
        (["--random-canaries", "1"], "CT_small.dcm is not a folder"),
    ],
)
def test_errors_are_one_line_exit_2(tmp_path, capsys, args, message):
    out = tmp_path / "o.dcm"
    code = main(["canary", "inject", str(real_file("CT_small.dcm")), str(out), *args])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.startswith("monai-forget: error:")
    assert err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_existing_output_needs_overwrite(tmp_path, capsys):
    src, out = str(real_file("CT_small.dcm")), tmp_path / "o.dcm"
    assert main(["canary", "inject", src, str(out), "--text", "A"]) == 0
    first = out.read_bytes()
    assert main(["canary", "inject", src, str(out), "--text", "B"]) == 2
    assert "--overwrite" in capsys.readouterr().err and out.read_bytes() == first
    assert main(["canary", "inject", src, str(out), "--text", "B", "--overwrite"]) == 0
    assert out.read_bytes() != first


def test_missing_input(tmp_path, capsys):
    assert main(["canary", "inject", str(tmp_path / "nope.dcm"), str(tmp_path / "o.dcm")]) == 2
    assert "does not exist" in capsys.readouterr().err
