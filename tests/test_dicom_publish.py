"""``dicom.inject_and_publish``: the command line's guarantees through the Python API
(an output only with its manifest, every check before anything is written)."""

from __future__ import annotations

import json
import shutil

import pydicom
import pytest
from pydicom_files import real_file

from monai_forget.dicom import as_options, inject_and_publish


def _folder(tmp_path):
    source = tmp_path / "in" / "study"
    source.mkdir(parents=True)
    for name in ("CT_small.dcm", "MR_small.dcm"):
        shutil.copy(real_file(name), source / name)
    return source.parent


def test_a_folder_is_published_with_its_manifest(tmp_path) -> None:
    source = _folder(tmp_path)
    options = as_options("JOHN DOE", (2, 2))
    published = inject_and_publish(source, tmp_path / "out", options, all_files=True, workers=1)
    outputs = sorted(p.name for p in (tmp_path / "out").rglob("*.dcm"))
    assert outputs == ["CT_small.dcm", "MR_small.dcm"]
    assert {r.action for r in published.records} == {"injected"}
    json_path, csv_path = published.manifest
    manifest = json.loads(json_path.read_text())
    assert len(manifest["records"]) == 2 and csv_path.is_file()
    for path in (tmp_path / "out").rglob("*.dcm"):
        assert pydicom.dcmread(path).BurnedInAnnotation == "YES"
    assert "JOHN DOE" not in json_path.read_text()  # the text is recorded salted and hashed


def test_a_dry_run_writes_nothing(tmp_path) -> None:
    source = _folder(tmp_path)
    options = as_options("JOHN DOE")
    published = inject_and_publish(
        source, tmp_path / "out", options, canary="study/CT_small.dcm", dry_run=True
    )
    assert published.manifest is None and len(published.records) == 2
    assert not (tmp_path / "out").exists()


def test_an_existing_manifest_is_refused_before_any_image_is_written(tmp_path) -> None:
    out = tmp_path / "canary.dcm"
    (tmp_path / "canary.dcm.manifest.json").write_text("precious")
    options = as_options("AB")
    with pytest.raises(FileExistsError):
        inject_and_publish(real_file("CT_small.dcm"), out, options)
    assert not out.exists()
    assert (tmp_path / "canary.dcm.manifest.json").read_text() == "precious"
    published = inject_and_publish(real_file("CT_small.dcm"), out, options, overwrite=True)
    assert out.is_file() and published.manifest[0].read_text() != "precious"


def test_contradicting_options_are_refused(tmp_path) -> None:
    options = as_options("AB")
    with pytest.raises(ValueError, match="mutually exclusive"):
        inject_and_publish(
            _folder(tmp_path), tmp_path / "o", options, canary="a.dcm", all_files=True
        )
    with pytest.raises(ValueError, match="folder inputs only"):
        inject_and_publish(real_file("CT_small.dcm"), tmp_path / "o.dcm", options, canary="a.dcm")
