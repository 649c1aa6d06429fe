"""Directory mode, manifest and text hashing, on a tree of pydicom's real files."""

from __future__ import annotations

import csv
import hashlib
import hmac
import json
import shutil
from pathlib import Path

import pydicom
import pytest
from pydicom_files import real_file

from monai_forget.dicom import (
    BurnInOptions,
    InjectionError,
    TextHasher,
    inject_tree,
    write_manifest,
)

FILES = {
    "a/CT_small.dcm": "CT_small.dcm",
    "a/MR_small_RLE.dcm": "MR_small_RLE.dcm",
    "b/c/6154": "6154",
}


@pytest.fixture
def tree(tmp_path) -> Path:
    root = tmp_path / "in"
    for rel, name in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(real_file(name), root / rel)
    (root / "notes.txt").write_text("not an image")
    return root


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): digest(p) for p in root.rglob("*") if p.is_file()}


def test_canary_mode_injects_first_image_and_mirrors_the_rest(tree, tmp_path):
    before = snapshot(tree)
    out = tmp_path / "out"
    records = [r.to_dict() for r in inject_tree(tree, out, BurnInOptions(text="Ab"))]
    assert snapshot(tree) == before
    assert set(snapshot(out)) == set(before)
    actions = {Path(r["input"]).relative_to(tree).as_posix(): r["action"] for r in records}
    assert actions == {
        "a/CT_small.dcm": "injected",
        "a/MR_small_RLE.dcm": "copied",
        "b/c/6154": "copied",
        "notes.txt": "copied",
    }
    for record in records:
        assert digest(Path(record["output"])) == record["output_sha256"]
        if record["action"] == "copied":
            assert record["output_sha256"] == digest(Path(record["input"]))
    assert pydicom.dcmread(out / "a/CT_small.dcm").BurnedInAnnotation == "YES"
    assert "BurnedInAnnotation" not in pydicom.dcmread(out / "b/c/6154")
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]


def test_chosen_canary_and_all_mode(tree, tmp_path):
    records = inject_tree(tree, tmp_path / "one", BurnInOptions(text="Ab"), canary="b/c/6154")
    records = [r.to_dict() for r in records]
    assert [r["input"] for r in records if r["action"] == "injected"] == [str(tree / "b/c/6154")]
    records = inject_tree(tree, tmp_path / "all", BurnInOptions(text="Ab"), all_files=True)
    records = [r.to_dict() for r in records]
    injected = sorted(Path(r["input"]).name for r in records if r["action"] == "injected")
    assert injected == ["6154", "CT_small.dcm", "MR_small_RLE.dcm"]
    for rel in FILES:
        assert pydicom.dcmread(tmp_path / "all" / rel).BurnedInAnnotation == "YES"


def test_dry_run_writes_nothing(tree, tmp_path):
    records = inject_tree(tree, tmp_path / "out", BurnInOptions(text="Ab"), dry_run=True)
    records = [r.to_dict() for r in records]
    assert sum(r["action"] == "injected" for r in records) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]


def test_one_refusal_leaves_no_output(tree, tmp_path):
    shutil.copyfile(real_file("examples_palette.dcm"), tree / "b" / "palette.dcm")
    with pytest.raises(InjectionError, match="PALETTE COLOR"):
        inject_tree(tree, tmp_path / "out", BurnInOptions(text="Ab"), all_files=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]


def test_folder_refusals(tree, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("x")
    with pytest.raises(FileExistsError, match="not empty"):
        inject_tree(tree, out, BurnInOptions(text="Ab"))
    (tmp_path / "afile").write_text("x")
    with pytest.raises(FileExistsError, match="is a file"):
        inject_tree(tree, tmp_path / "afile", BurnInOptions(text="Ab"), overwrite=True)
    with pytest.raises(InjectionError, match="overlaps"):
        inject_tree(tree, tree / "sub", BurnInOptions(text="Ab"))
    with pytest.raises(FileNotFoundError, match=r"canary nope\.dcm"):
        inject_tree(tree, tmp_path / "o2", BurnInOptions(text="Ab"), canary="nope.dcm")
    assert [p.name for p in out.iterdir()] == ["old.txt"]


def test_overwrite_into_existing_folder(tree, tmp_path):
    out = tmp_path / "out"
    inject_tree(tree, out, BurnInOptions(text="Ab"))
    (out / "extra.txt").write_text("kept")
    records = [
        r.to_dict() for r in inject_tree(tree, out, BurnInOptions(text="Ab"), overwrite=True)
    ]
    assert (out / "extra.txt").read_text() == "kept"
    canary = next(r for r in records if r["action"] == "injected")
    assert digest(Path(canary["output"])) == canary["output_sha256"]


def test_manifest_hashes_text_by_default(tree, tmp_path):
    hasher = TextHasher(salt="a secret salt")
    records = [
        r.to_dict() for r in inject_tree(tree, tmp_path / "out", BurnInOptions(), hasher=hasher)
    ]
    json_path, csv_path = write_manifest(records, tmp_path / "out", hasher)
    document = json.loads(json_path.read_text())
    assert document["text_field"] == "text_hmac_sha256"
    raw = json_path.read_text() + csv_path.read_text()
    ct = next(r for r in document["records"] if r["input"].endswith("CT_small.dcm"))
    name = "CT1 CompressedSamples"  # CT_small's PatientName in viewer order
    assert name not in raw and "CompressedSamples" not in raw
    expected = hmac.new(b"a secret salt", name.encode(), hashlib.sha256).hexdigest()
    assert ct["text_hmac_sha256"] == expected
    for key in (
        "old_sop_instance_uid",
        "new_sop_instance_uid",
        "bbox_row",
        "bbox_col",
        "bbox_height",
        "bbox_width",
        "typeface",
        "scale",
        "value",
        "output_sha256",
    ):
        assert key in ct
    rows = list(csv.DictReader(csv_path.open()))
    assert len(rows) == len(records) == 4
    assert {r["output"] for r in rows} == {r["output"] for r in records}
    with pytest.raises(FileExistsError):
        write_manifest(records, tmp_path / "out", hasher)


def test_manifest_plain_text_only_on_request(tmp_path):
    plain = TextHasher(plain_text=True)
    random_a, random_b = TextHasher(), TextHasher()
    assert plain("JOHN DOE") == "JOHN DOE" and plain.field == "text"
    assert random_a("JOHN DOE") != random_b("JOHN DOE")  # fresh secret salt per run
    assert random_a("JOHN DOE") == random_a("JOHN DOE")
    with pytest.raises(ValueError, match=r"salt.s length \(bytes\) must be an integer >= 8"):
        TextHasher(salt="short")
    json_path, _ = write_manifest([{"action": "injected", "text": "X"}], tmp_path / "m", plain)
    assert json.loads(json_path.read_text())["text_recording"] == "plain text"
