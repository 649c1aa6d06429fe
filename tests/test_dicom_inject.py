"""Burn-in on pydicom's bundled real files: every supported combination, re-read.

Each case checks, on the re-read output: pixels under the text mask are at the
displayed white (computed here from the DICOM window formula, independently of the
injector), every other pixel equals pydicom's decode of the input, the derivation
tags are set, all other elements are kept, and the input file's bytes are unchanged.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pydicom
import pytest
from pydicom_files import real_file

from monai_forget.canary import TYPEFACE, render_text
from monai_forget.dicom import BurnInOptions, burn_in, inject_file

# Elements the injector is allowed to change; everything else must be kept.
CHANGED = {
    "PixelData",
    "SOPInstanceUID",
    "BurnedInAnnotation",
    "ImageType",
    "DerivationDescription",
    "SourceImageSequence",
    # set_pixel_data / decompression rewrite the Image Pixel description
    "PhotometricInterpretation",
    "PlanarConfiguration",
}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def frames_of(ds: pydicom.Dataset) -> np.ndarray:
    """Decoded pixels (frames, rows, cols, samples) in the stored colour space."""
    ds.pixel_array_options(as_rgb=False)
    arr = ds.pixel_array
    return arr.reshape(
        int(ds.get("NumberOfFrames", 1) or 1), ds.Rows, ds.Columns, ds.get("SamplesPerPixel", 1)
    )


def window(ds: pydicom.Dataset) -> tuple[float, float] | None:
    if "WindowCenter" not in ds:
        return None
    values = [ds.WindowCenter, ds.WindowWidth]
    # several windows: viewers start with the first
    c, w = (float(v[0]) if isinstance(v, pydicom.multival.MultiValue) else float(v) for v in values)
    return c, w


def assert_displayed_white(ds_in, reference, frame, stored, photometric_out):
    """Check the stored value(s) of one frame's text pixels display as white."""
    bits = int(ds_in.BitsStored)
    if photometric_out == "RGB":
        assert (stored == 2**bits - 1).all()
        return
    if photometric_out == "YBR_FULL":
        assert (stored[:, 0] == 2**bits - 1).all()
        assert (stored[:, 1:] == 2 ** (bits - 1)).all()
        return
    values = np.unique(stored)
    assert values.size == 1, "one white value per frame"
    s = int(values[0])
    mono1 = ds_in.PhotometricInterpretation == "MONOCHROME1"
    win = window(ds_in)
    if win is None:  # auto-window: the frame's own extreme
        data = reference[frame, ..., 0]
        assert s == (data.min() if mono1 else data.max())
        return
    slope = float(ds_in.get("RescaleSlope", 1))
    intercept = float(ds_in.get("RescaleIntercept", 0))
    c, w = win
    top, bottom = c - 0.5 + (w - 1) / 2, c - 0.5 - (w - 1) / 2  # DICOM PS3.3 C.11.2.1.2
    modality = s * slope + intercept
    if mono1:  # displayed white is the bottom of the window, inverted
        assert modality <= bottom + 1e-6
        assert (s + 1) * slope + intercept > bottom  # least extreme such value
    else:
        assert modality >= top - 1e-6
        assert (s - 1) * slope + intercept < top


# (file, text, position, scale, frames, expected output photometric)
CASES = [
    ("CT_small.dcm", "JOHN DOE", (1, 1), 1, None, "MONOCHROME2"),  # rescaled CT, signed
    ("MR_small_implicit.dcm", "MR1", (1, 1), 2, None, "MONOCHROME2"),  # implicit VR, window
    ("MR_small.dcm", "Doe^J", (10, 5), 1, None, "MONOCHROME2"),  # explicit VR LE
    ("MR_small_RLE.dcm", "MR1", (1, 1), 1, None, "MONOCHROME2"),  # RLE
    ("MR_small_jpeg_ls_lossless.dcm", "A", (1, 1), 3, None, "MONOCHROME2"),  # JPEG-LS
    ("MR_small_jp2klossless.dcm", "O'Neil", (1, 1), 1, None, "MONOCHROME2"),  # J2K lossless
    ("693_J2KI.dcm", "CQ500", (1, 1), 4, None, "MONOCHROME2"),  # J2K, 14-bit signed, rescale
    ("6154", "Do", (1, 1), 1, None, "MONOCHROME1"),  # MONOCHROME1, 12-bit, slope 0.684
    ("17106", "Ab", (2, 2), 1, None, "MONOCHROME2"),  # CT, signed, window 30/100
    ("examples_overlay.dcm", "S. Jsssss", (1, 1), 2, None, "MONOCHROME2"),  # 12-bit, 2 windows
    ("JPGExtended.dcm", "NM1", (1, 1), 2, None, "MONOCHROME2"),  # JPEG 12-bit, 1 frame
    ("image_dfl.dcm", "DEFLATE", (100, 200), 3, None, "MONOCHROME2"),  # deflated, 8-bit
    ("JPEGLSNearLossless_08.dcm", "A", (1, 1), 1, None, "MONOCHROME2"),  # JPEG-LS 8-bit
    ("examples_rgb_color.dcm", "US1", (1, 1), 2, None, "RGB"),  # RGB uncompressed
    ("SC_rgb_rle_2frame.dcm", "Lestrade", (1, 1), 1, (1,), "RGB"),  # multi-frame, chosen
    ("SC_rgb_rle_16bit_2frame.dcm", "G L", (50, 1), 1, None, "RGB"),  # 16-bit RGB, all
    ("SC_ybr_full_422_uncompressed.dcm", "YBR", (1, 1), 1, None, "YBR_FULL"),  # 4:2:2 native
    ("SC_rgb_jpeg_dcmtk.dcm", "Lestrade", (1, 1), 1, None, "YBR_FULL"),  # JPEG baseline YBR
    ("examples_ybr_color.dcm", "PLA", (5, 5), 2, (0, 29), "YBR_FULL"),  # 30-frame JPEG 4:2:2
    ("GDCMJ2K_TextGBR.dcm", "RCT", (1, 1), 1, None, "RGB"),  # J2K YBR_RCT
    ("SC_rgb_jpeg_gdcm.dcm", "ok", (1, 1), 1, None, "RGB"),  # JPEG lossless RGB
    ("SC_rgb_jpeg.dcm", "AB", (1, 1), 1, None, "RGB"),  # implicit VR data, explicit syntax
]


@pytest.mark.parametrize(("name", "text", "position", "scale", "frames", "photometric"), CASES)
def test_burn_in_real_file(tmp_path, name, text, position, scale, frames, photometric):
    src = real_file(name)
    before = sha256(src)
    dst = tmp_path / "out.dcm"
    options = BurnInOptions(text=text, position=position, scale=scale, frames=frames)
    record = inject_file(src, dst, options).to_dict()
    assert sha256(src) == before, "input bytes must be unchanged"
    assert record["output_sha256"] == sha256(dst)

    ds_in = pydicom.dcmread(src)
    reference = frames_of(pydicom.dcmread(src))
    ds_out = pydicom.dcmread(dst)
    out = frames_of(ds_out)
    assert out.shape == reference.shape and out.dtype == reference.dtype

    mask = render_text(text, scale)
    region = np.zeros(reference.shape[1:3], bool)
    r, c = position
    region[r : r + mask.shape[0], c : c + mask.shape[1]] = mask
    chosen = range(reference.shape[0]) if frames is None else frames
    for f in range(reference.shape[0]):
        np.testing.assert_array_equal(out[f][~region], reference[f][~region])
        if f in chosen:
            assert_displayed_white(ds_in, reference, f, out[f][region], photometric)
        else:
            np.testing.assert_array_equal(out[f], reference[f])
    assert record["bbox_row"] == r and record["bbox_col"] == c
    assert (record["bbox_height"], record["bbox_width"]) == mask.shape
    assert record["frames"] == list(chosen)

    # tags
    assert ds_out.PhotometricInterpretation == photometric
    assert ds_out.BurnedInAnnotation == "YES"
    assert ds_out.ImageType[0] == "DERIVED"
    if "ImageType" in ds_in:
        assert list(ds_out.ImageType)[1:] == list(ds_in.ImageType)[1:]
    else:
        assert list(ds_out.ImageType) == ["DERIVED", "SECONDARY"]
    assert ds_out.SOPInstanceUID != ds_in.SOPInstanceUID
    assert ds_out.file_meta.MediaStorageSOPInstanceUID == ds_out.SOPInstanceUID
    assert record["new_sop_instance_uid"] == ds_out.SOPInstanceUID
    assert record["old_sop_instance_uid"] == ds_in.SOPInstanceUID
    assert TYPEFACE in ds_out.DerivationDescription
    ref = ds_out.SourceImageSequence[-1]
    assert ref.ReferencedSOPInstanceUID == ds_in.SOPInstanceUID
    assert ref.ReferencedSOPClassUID == ds_in.SOPClassUID
    assert ds_out.file_meta.TransferSyntaxUID.is_little_endian
    assert not ds_out.file_meta.TransferSyntaxUID.is_compressed
    if not ds_in.file_meta.TransferSyntaxUID.is_compressed:
        assert ds_out.file_meta.TransferSyntaxUID == ds_in.file_meta.TransferSyntaxUID
    for elem in ds_in:
        if elem.keyword in CHANGED or elem.tag.element == 0:
            continue  # (gggg,0000) group lengths are retired; pydicom drops them on write
        assert elem.tag in ds_out, f"{elem.keyword or elem.tag} was dropped"
        assert ds_out[elem.tag].value == elem.value, f"{elem.keyword or elem.tag} changed"


def test_patient_name_is_default_text_in_viewer_order():
    ds = pydicom.dcmread(real_file("CT_small.dcm"))  # CompressedSamples^CT1
    result = burn_in(ds, BurnInOptions())
    assert result.text == "CT1 CompressedSamples" and result.text_source == "PatientName"
    assert result.mask_shape == render_text("CT1 CompressedSamples").shape


def test_height_fraction_picks_largest_scale(tmp_path):
    record = inject_file(
        real_file("CT_small.dcm"), tmp_path / "o.dcm", BurnInOptions(text="A", height_fraction=0.2)
    ).to_dict()
    assert record["scale"] == 5 and record["bbox_height"] == 25  # 0.2 * 128 = 25.6 rows


def test_dry_run_writes_nothing(tmp_path):
    record = inject_file(
        real_file("MR_small.dcm"), tmp_path / "o.dcm", BurnInOptions(text="A"), dry_run=True
    ).to_dict()
    assert record["output_sha256"] == "" and record["bbox_width"] == 5
    assert not any(tmp_path.iterdir())


def test_overwrite_replaces_existing_output(tmp_path):
    dst = tmp_path / "o.dcm"
    first = inject_file(real_file("MR_small.dcm"), dst, BurnInOptions(text="A")).to_dict()
    second = inject_file(
        real_file("MR_small.dcm"), dst, BurnInOptions(text="B"), overwrite=True
    ).to_dict()
    assert first["new_sop_instance_uid"] != second["new_sop_instance_uid"]
    assert pydicom.dcmread(dst).SOPInstanceUID == second["new_sop_instance_uid"]


def _voi_item(center: float, width: float) -> pydicom.Dataset:
    voi = pydicom.Dataset()
    voi.WindowCenter, voi.WindowWidth = center, width
    group = pydicom.Dataset()
    group.FrameVOILUTSequence = [voi]
    return group


@pytest.mark.parametrize(("per_frame", "expected"), [(False, 199), (True, 59)])
def test_functional_group_windows_decide_white(tmp_path, per_frame, expected):
    """Enhanced objects carry the window in functional groups; per-frame wins."""
    ds = pydicom.dcmread(real_file("MR_small.dcm"))
    del ds.WindowCenter, ds.WindowWidth
    ds.SharedFunctionalGroupsSequence = [_voi_item(100, 200)]  # top edge 199
    if per_frame:
        ds.PerFrameFunctionalGroupsSequence = [_voi_item(50, 20)]  # top edge 59
    src = tmp_path / "enhanced.dcm"
    ds.save_as(src)
    record = inject_file(src, tmp_path / "out.dcm", BurnInOptions(text="A")).to_dict()
    assert record["value"] == [expected]
    out = frames_of(pydicom.dcmread(tmp_path / "out.dcm"))[0, ..., 0]
    assert (out[1:6, 1:6][render_text("A")] == expected).all()


def test_the_pixel_data_check_runs_once_per_file(tmp_path, monkeypatch):
    """Issue 37, item 4: reading and planning a file both checked its pixel data."""
    import importlib

    from monai_forget.dicom import inject_any

    calls = []
    for name in ("monai_forget.dicom.decode", "monai_forget.dicom.inject"):
        module = importlib.import_module(name)
        original = module.check_pixel_data
        monkeypatch.setattr(
            module, "check_pixel_data",
            lambda ds, path="<dataset>", _f=original: calls.append(str(path)) or _f(ds, path),
        )  # fmt: skip
    src = Path(real_file("CT_small.dcm"))
    inject_any(src, tmp_path / "o.dcm", BurnInOptions(text="A"))
    assert calls == [str(src)]  # once, naming the file
