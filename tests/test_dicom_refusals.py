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
    refuse(real_file("image_dfl.dcm"), tmp_path / "out", "PatientName is empty.*`text`")


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


# A canary that is there: a burn-in that would change no pixel is refused, never
# reported as injected (issue 54, item 4).


def _monochrome(tmp_path: Path, pixels: np.ndarray, photometric: str = "MONOCHROME2") -> Path:
    from pydicom_files import write_dicom

    src = tmp_path / f"in_{photometric}_{pixels.shape[0]}.dcm"
    write_dicom(src, "P1", pixels)
    ds = pydicom.dcmread(src)
    ds.PhotometricInterpretation = photometric
    ds.save_as(src)
    return src


def _gradient(size: int = 64) -> np.ndarray:
    return (np.arange(size * size, dtype=np.uint32) % 200 + 20).reshape(size, size).astype(np.uint8)


@pytest.mark.parametrize(
    ("pixels", "photometric"),
    [
        (np.full((64, 64), 7, np.uint8), "MONOCHROME2"),  # constant frame
        (np.zeros((8000, 8000), np.uint8), "MONOCHROME2"),  # a blank large image
        (np.where(np.arange(64)[:, None] + np.arange(64) < 20, 255, _gradient()), "MONOCHROME2"),
        (np.where(np.arange(64)[:, None] + np.arange(64) < 20, 0, _gradient()), "MONOCHROME1"),
    ],
    ids=["constant", "blank-8000", "corner-at-max", "monochrome1-corner-at-0"],
)
def test_a_burn_in_that_changes_no_pixel_is_refused(tmp_path, pixels, photometric):
    src = _monochrome(tmp_path, pixels.astype(np.uint8), photometric)
    refuse(src, tmp_path / "out", "frame 0: every pixel under the text already holds", text="A")


def test_pixels_changed_is_what_the_burn_in_changed(tmp_path):
    """The manifest's count equals a brute-force comparison of the pixels before and after,
    also where the box is partly white already."""
    pixels = _gradient()
    pixels[:4, :] = 255  # the top of the box is already white: fewer pixels change
    src = _monochrome(tmp_path, pixels)
    record = inject_file(src, tmp_path / "o.dcm", BurnInOptions(text="AB")).to_dict()
    after = pydicom.dcmread(tmp_path / "o.dcm").pixel_array
    changed = int((after != pixels).sum())
    assert record["pixels_changed"] == [changed]
    assert 0 < changed < int(render_text_ink("AB"))


def render_text_ink(text: str) -> int:
    from monai_forget.canary import render_text

    return int(render_text(text).sum())


@pytest.mark.parametrize("kind", ["png", "nifti"])
def test_a_white_png_or_constant_volume_is_refused(tmp_path, kind):
    from monai_forget.dicom import inject_any

    if kind == "png":
        from PIL import Image

        src = tmp_path / "white.png"
        Image.fromarray(np.full((32, 32), 255, np.uint8)).save(src)
        match = "the image: every pixel"
    else:
        import nibabel as nib

        src = tmp_path / "flat.nii.gz"
        nib.save(nib.Nifti1Image(np.full((32, 32, 3), 5, np.int16), np.eye(4)), src)
        match = "the volume: every pixel"
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(InjectionError, match=match):
        inject_any(src, out / src.name, BurnInOptions(text="A"))
    assert list(out.iterdir()) == []


def test_the_command_line_reports_no_injection_that_changed_nothing(tmp_path, capsys):
    from monai_forget.cli import main

    src = _monochrome(tmp_path, np.full((64, 64), 7, np.uint8))
    code = main(["canary", "inject", str(src), str(tmp_path / "o.dcm"), "--text", "A"])
    err = capsys.readouterr()
    assert code == 2 and "burned-in text" not in err.out
    assert "would change nothing" in err.err and not (tmp_path / "o.dcm").exists()
