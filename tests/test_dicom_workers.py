"""Folder runs over several worker processes give what one process gives, byte for byte.

The new SOP Instance UIDs are derived from each input (not random), so two runs of the
same command write the same bytes; the manifests are compared whole, except the
``created`` time stamp and the output folder's name.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pydicom
import pytest
from pydicom_files import real_file

from monai_forget.cli import main
from monai_forget.dicom import BurnInOptions, InjectionError, TextHasher, inject_tree
from monai_forget.dicom.pool import ordered_map

FILES = {
    "s1/ct.dcm": "CT_small.dcm",
    "s1/mr.dcm": "MR_small.dcm",
    "s1/mr_rle.dcm": "MR_small_RLE.dcm",
    "s2/rgb_2frame.dcm": "SC_rgb_rle_2frame.dcm",
    "s2/rgb_jpeg.dcm": "SC_rgb_jpeg_dcmtk.dcm",
    "s2/deflated.dcm": "image_dfl.dcm",
    "s2/6154": "6154",
    "s3/dicomdir": "DICOMDIR",  # DICOM without pixel data: copied unchanged
}


@pytest.fixture
def tree(tmp_path) -> Path:
    root = tmp_path / "in"
    for i in range(3):  # enough files for several chunks per worker
        for rel, name in FILES.items():
            path = root / f"p{i}" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(real_file(name), path)
    (root / "p0" / "notes.txt").write_text("not an image")
    (root / "p0" / "link.dcm").symlink_to(root / "p0" / "s1" / "ct.dcm")
    return root


def hashes(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root``, by relative path."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def manifest(prefix: Path) -> dict:
    """The JSON manifest without its time stamp, output paths made relative."""
    document = json.loads(prefix.with_name(prefix.name + ".manifest.json").read_text())
    del document["created"]
    for record in document["records"]:
        if record["output"]:
            record["output"] = Path(record["output"]).relative_to(prefix).as_posix()
    return document


@pytest.mark.parametrize("mode", [["--all"], []], ids=["all", "canary"])
def test_two_workers_write_what_one_writes(tree, tmp_path, mode):
    runs = {}
    for workers in (1, 2):
        out = tmp_path / f"out{workers}"
        command = ["canary", "inject", str(tree), str(out), *mode, "--text", "AB"]
        command += ["--salt", "a secret salt"]
        assert main([*command, "--workers", str(workers)]) == 0
        runs[workers] = (hashes(out), manifest(out))
    (files_1, manifest_1), (files_2, manifest_2) = runs[1], runs[2]
    assert files_1 == files_2
    assert manifest_1 == manifest_2
    records = manifest_1["records"]
    assert [r["input"] for r in records] == sorted(r["input"] for r in records)
    injected = [r for r in records if r["action"] == "injected"]
    assert len(injected) == (21 if mode else 1)
    for record in injected:  # the records describe the bytes written
        written = tmp_path / "out2" / record["output"]
        assert files_2[record["output"]] == record["output_sha256"]
        assert pydicom.dcmread(written).SOPInstanceUID == record["new_sop_instance_uid"]
    assert {r["action"] for r in records} == {"injected", "copied", "skipped"}


def test_same_file_same_uid_other_text_other_uid(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    shutil.copyfile(real_file("CT_small.dcm"), src / "ct.dcm")
    uids = []
    for run, text in enumerate(("A", "A", "B")):
        (record,) = inject_tree(src, tmp_path / f"out{run}", BurnInOptions(text=text))
        uids.append(record.box.new_sop_instance_uid)
    assert uids[0] == uids[1] != uids[2]
    assert uids[0] != pydicom.dcmread(src / "ct.dcm").SOPInstanceUID


def test_dry_run_and_progress_with_workers(tree, tmp_path):
    seen: dict[int, list[Path]] = {1: [], 2: []}
    records = {}
    for workers in (1, 2):

        def progress(paths, seen=seen[workers]):
            for path in paths:
                seen.append(path)
                yield path

        records[workers] = inject_tree(
            tree,
            tmp_path / "out",
            BurnInOptions(text="AB"),
            all_files=True,
            dry_run=True,
            hasher=TextHasher(plain_text=True),
            progress=progress,
            workers=workers,
        )
    assert records[1] == records[2]
    assert seen[1] == seen[2] == [Path(r.input) for r in records[1]]
    assert not (tmp_path / "out").exists()


def test_a_refusal_in_a_worker_stops_the_run_and_leaves_nothing(tree, tmp_path):
    bad = tree / "p1" / "s1" / "ct.dcm"
    ds = pydicom.dcmread(bad)
    del ds.SOPInstanceUID
    ds.save_as(bad)
    out = tmp_path / "out"
    errors = []
    for workers in (1, 2):
        with pytest.raises(InjectionError, match="no SOPInstanceUID") as caught:
            inject_tree(tree, out, BurnInOptions(text="AB"), all_files=True, workers=workers)
        errors.append(str(caught.value))
    assert errors[0] == errors[1] and str(bad) in errors[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]


def _die(item: int) -> int:
    if item == 3:
        os._exit(1)  # a worker killed mid-run, as by the out-of-memory killer
    return item


def test_a_dead_worker_is_an_error_not_a_hang():
    dying = ordered_map(_die, list(range(8)), workers=2)
    with pytest.raises(InjectionError, match="worker process died"), dying as results:
        list(results)
    with ordered_map(_die, [0, 1, 2], workers=2) as results:
        assert list(results) == [0, 1, 2]


def test_workers_must_be_positive(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["canary", "inject", str(tmp_path), str(tmp_path / "out"), "--workers", "0"])
    assert stop.value.code == 2
    assert "--workers: must be an integer >= 1, got 0" in capsys.readouterr().err
