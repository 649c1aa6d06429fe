"""Every refusal says what and why, and leaves nothing behind (no output, no temp file)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pydicom
import pytest
from pydicom.pixels import get_decoder
from pydicom.uid import JPEGBaseline8Bit
from pydicom_files import real_file

from monai_forget.dicom import BurnInOptions, InjectionError, display_name, inject_file


def refuse(src: Path, out_dir: Path, match: str, error=InjectionError, **options) -> None:
    before = hashlib.sha256(src.read_bytes()).hexdigest()
    out_dir.mkdir(exist_ok=True)
    with pytest.raises(error, match=match):
        inject_file(src, out_dir / "out.dcm", BurnInOptions(**options))
    assert list(out_dir.iterdir()) == [], "a refusal must not write anything"
    assert hashlib.sha256(src.read_bytes()).hexdigest() == before


def test_not_dicom(tmp_path):
    src = tmp_path / "notes.dcm"
    src.write_text("not an image")
    refuse(src, tmp_path / "out", "not a readable DICOM file", text="A")


def test_no_pixel_data(tmp_path):
    refuse(real_file("DICOMDIR"), tmp_path / "out", "has no Pixel Data", text="A")


def test_palette_colour(tmp_path):
    refuse(real_file("examples_palette.dcm"), tmp_path / "out", "PALETTE COLOR.*convert", text="A")


def test_float_pixel_data(tmp_path):
    ds = pydicom.dcmread(real_file("CT_small.dcm"))
    del ds.PixelData
    ds.FloatPixelData = np.zeros(ds.Rows * ds.Columns, np.float32).tobytes()
    src = tmp_path / "float.dcm"
    ds.save_as(src)
    refuse(src, tmp_path / "out", "FloatPixelData.*integer Pixel Data", text="A")


@pytest.mark.parametrize(
    ("name", "match"),
    [
        ("rtdose_1frame.dcm", "BitsAllocated 32"),
        ("liver_1frame.dcm", "BitsAllocated 1"),
        ("MR_small_bigendian.dcm", "big-endian.*dcmconv"),
    ],
)
def test_unsupported_encodings(tmp_path, name, match):
    refuse(real_file(name), tmp_path / "out", match, text="A")


def test_text_outside_image(tmp_path):
    refuse(real_file("SC_rgb_small_odd.dcm"), tmp_path / "out", "image is 3x3", text="A")
    refuse(
        real_file("CT_small.dcm"),
        tmp_path / "out2",
        "image is 128x128",
        text="A",
        position=(124, 0),
    )


def test_missing_decoder_names_the_package(tmp_path, monkeypatch):
    decoder = get_decoder(JPEGBaseline8Bit)
    monkeypatch.setattr(decoder, "_available", {})
    monkeypatch.setattr(decoder, "_unavailable", {"pylibjpeg": ("pylibjpeg", "pylibjpeg-libjpeg")})
    refuse(
        real_file("SC_rgb_jpeg_dcmtk.dcm"),
        tmp_path / "out",
        r"no decoder plug-in is installed.*pylibjpeg.*pip install 'monai-forget\[jpeg\]'",
        text="A",
    )


def test_syntax_without_any_decoder(tmp_path):
    ds = pydicom.dcmread(real_file("SC_rgb_jpeg_dcmtk.dcm"))
    ds.file_meta.TransferSyntaxUID = "1.2.840.10008.1.2.4.100"  # MPEG2 video
    src = tmp_path / "mpeg2.dcm"
    ds.save_as(src)
    refuse(src, tmp_path / "out", "MPEG2.*pydicom cannot decode", text="A")


def test_corrupt_compressed_data(tmp_path):
    # pydicom ships this file as an example its decoders cannot read
    refuse(real_file("JPEG-lossy.dcm"), tmp_path / "out", "could not be decoded", text="A")
    with pytest.raises(InjectionError) as err:
        inject_file(real_file("JPEG-lossy.dcm"), tmp_path / "o.dcm", BurnInOptions(text="A"))
    assert "\n" not in str(err.value), "the CLI prints errors on one line"


def test_empty_patient_name(tmp_path):
    refuse(real_file("image_dfl.dcm"), tmp_path / "out", "PatientName is empty.*--text")


def test_bad_frames_and_characters(tmp_path):
    refuse(
        real_file("SC_rgb_rle_2frame.dcm"), tmp_path / "o1", "frames \\[2\\]", text="A", frames=(2,)
    )
    refuse(
        real_file("CT_small.dcm"),
        tmp_path / "o2",
        "a character outside the monai-forget-5x5 typeface",
        error=ValueError,
        text="A_B",
    )


def test_existing_output_not_replaced(tmp_path):
    dst = tmp_path / "out.dcm"
    dst.write_bytes(b"keep me")
    with pytest.raises(FileExistsError, match="--overwrite"):
        inject_file(real_file("CT_small.dcm"), dst, BurnInOptions(text="A"))
    assert dst.read_bytes() == b"keep me"
    assert [p.name for p in tmp_path.iterdir()] == ["out.dcm"]


def test_output_is_input(tmp_path):
    src = tmp_path / "in.dcm"
    shutil.copyfile(real_file("CT_small.dcm"), src)
    before = src.read_bytes()
    with pytest.raises(InjectionError, match="is the input"):
        inject_file(src, src, BurnInOptions(text="A"), overwrite=True)
    assert src.read_bytes() == before


def test_display_name_viewer_order_and_refusal_without_leaking():
    assert display_name("DOE^JOHN") == "JOHN DOE"
    assert display_name("Doe^John^Q^Dr^Jr") == "Dr John Q Doe, Jr"
    assert display_name("Müller^Zoë") == "Zoe Muller"
    with pytest.raises(InjectionError, match="outside the typeface") as err:
        display_name("O_Brien^Ann")
    assert "Brien" not in str(err.value), "the message must not repeat PHI"


def test_missing_sop_instance_uid(tmp_path):
    ds = pydicom.dcmread(real_file("MR_small.dcm"))
    del ds.SOPInstanceUID
    src = tmp_path / "no_uid.dcm"
    ds.save_as(src)
    refuse(src, tmp_path / "out", "no SOPInstanceUID", text="A")
