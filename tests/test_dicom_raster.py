"""NIfTI and PNG inputs through the same renderer (real image content)."""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path

import nibabel as nib
import numpy as np
import pydicom
import pytest
from PIL import Image
from pydicom.data import get_testdata_file

from monai_forget.canary import render_text
from monai_forget.dicom import BurnInOptions, InjectionError, inject_any


def real_pixels(name: str) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = get_testdata_file(name)
    if path is None:
        pytest.skip(f"pydicom test file {name} is not available")
    return pydicom.dcmread(path).pixel_array


def region(shape, text, position, scale=1) -> np.ndarray:
    mask = render_text(text, scale)
    out = np.zeros(shape, bool)
    r, c = position
    out[r : r + mask.shape[0], c : c + mask.shape[1]] = mask
    return out


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_nifti_from_real_ct_slices(tmp_path):
    volume = np.stack([real_pixels("CT_small.dcm")] * 3, axis=-1)  # (128, 128, 3) int16
    src = tmp_path / "ct.nii.gz"
    nib.save(nib.Nifti1Image(volume, np.diag([0.7, 0.7, 5.0, 1.0])), src)
    before = digest(src)
    dst = tmp_path / "out" / "ct.nii.gz"
    options = BurnInOptions(text="CT", position=(2, 3), scale=2, frames=(1,))
    record = inject_any(src, dst, options).to_dict()
    assert digest(src) == before and record["output_sha256"] == digest(dst)
    out_img = nib.load(dst)
    out = np.asanyarray(out_img.dataobj)
    assert out.dtype == volume.dtype
    np.testing.assert_array_equal(out_img.affine, nib.load(src).affine)
    sel = region(volume.shape[:2], "CT", (2, 3), 2)
    assert (out[sel, 1] == volume.max()).all()
    np.testing.assert_array_equal(out[~sel, 1], volume[~sel, 1])
    np.testing.assert_array_equal(out[..., [0, 2]], volume[..., [0, 2]])
    assert record["frames"] == [1] and record["value"] == volume.max()


def test_nifti_from_acdc_volume(tmp_path, shared_data):
    h5py = pytest.importorskip("h5py")
    path = shared_data / "acdc_ssl4mis" / "data" / "patient001_frame01.h5"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    with h5py.File(path) as f:
        volume = np.asarray(f["image"][:2]).transpose(1, 2, 0)  # (H, W, 2) float32
    src = tmp_path / "acdc.nii"
    nib.save(nib.Nifti1Image(volume, np.eye(4)), src)
    dst = tmp_path / "acdc_canary.nii"
    inject_any(src, dst, BurnInOptions(text="JOHN DOE"))
    out = np.asanyarray(nib.load(dst).dataobj)
    sel = region(volume.shape[:2], "JOHN DOE", (1, 1))
    assert (out[sel] == volume.max()).all()
    np.testing.assert_array_equal(out[~sel], volume[~sel])


@pytest.mark.parametrize(("kind", "white"), [("L", 255), ("I;16", 65535), ("RGB", (255, 255, 255))])
def test_png_modes(tmp_path, kind, white):
    if kind == "RGB":
        arr = real_pixels("examples_rgb_color.dcm")
    else:
        ct = real_pixels("CT_small.dcm").astype(np.int64)
        ct = (ct - ct.min()) / (ct.max() - ct.min())
        arr = (ct * (250 if kind == "L" else 60000)).astype(np.uint8 if kind == "L" else np.uint16)
    src = tmp_path / "in.png"
    Image.fromarray(arr).save(src)
    dst = tmp_path / "out.png"
    record = inject_any(src, dst, BurnInOptions(text="Ann", position=(4, 4), scale=2)).to_dict()
    with Image.open(dst) as img:
        assert img.mode == kind
        out = np.array(img)
    sel = region(arr.shape[:2], "Ann", (4, 4), 2)
    assert (out[sel] == np.array(white)).all()
    np.testing.assert_array_equal(out[~sel], arr[~sel])
    assert record["output_sha256"] == digest(dst)


def test_raster_refusals(tmp_path):
    src = tmp_path / "pal.png"
    Image.fromarray(real_pixels("examples_palette.dcm")).convert("P").save(src)
    with pytest.raises(InjectionError, match="mode P"):
        inject_any(src, tmp_path / "o.png", BurnInOptions(text="A"))
    grey = tmp_path / "grey.png"
    Image.fromarray(real_pixels("image_dfl.dcm")).save(grey)
    with pytest.raises(InjectionError, match="no PatientName"):
        inject_any(grey, tmp_path / "o.png", BurnInOptions())
    bad = tmp_path / "bad.nii"
    bad.write_text("not nifti")
    with pytest.raises(InjectionError, match="not a readable NIfTI"):
        inject_any(bad, tmp_path / "o.nii", BurnInOptions(text="A"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.nii", "grey.png", "pal.png"]


def test_output_named_as_another_format_is_refused(tmp_path):
    """Issue 34, item 10: a NIfTI input written to ``out.png`` held NIfTI bytes under a
    PNG name; the output keeps the input's format, so its name must say it."""
    volume = tmp_path / "scan.nii.gz"
    nib.save(nib.Nifti1Image(np.random.default_rng(0).random((32, 32, 2)), np.eye(4)), volume)
    grey = tmp_path / "grey.png"
    Image.fromarray(real_pixels("image_dfl.dcm")).save(grey)
    dicom = Path(get_testdata_file("CT_small.dcm"))
    cases = [
        (volume, "o.png", "a PNG", "a NIfTI volume"),
        (grey, "o.nii.gz", "a NIfTI volume", "a PNG"),
        (dicom, "o.png", "a PNG", "DICOM"),
        (grey, "o.dcm", "DICOM", "a PNG"),
    ]
    for src, name, named, have in cases:
        with pytest.raises(InjectionError, match=f"named as {named} but .* is {have}"):
            inject_any(src, tmp_path / name, BurnInOptions(text="A"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grey.png", "scan.nii.gz"]
    inject_any(volume, tmp_path / "o.nii", BurnInOptions(text="A"))  # .nii for .nii.gz: kept
    assert nib.load(tmp_path / "o.nii").shape == (32, 32, 2)


def test_an_encoder_failure_names_the_file(tmp_path, monkeypatch):
    """Pillow refuses some arrays with a bare OSError ("cannot write mode I as PNG");
    the refusal names the input file."""
    grey = tmp_path / "grey.png"
    Image.fromarray(real_pixels("image_dfl.dcm")).save(grey)
    original = Image.Image.save

    def wide_mode(image, fp, format=None, **params):  # what a 32-bit array gives
        return original(image.convert("I"), fp, format, **params)

    monkeypatch.setattr(Image.Image, "save", wide_mode)
    with pytest.raises(InjectionError, match=r"grey\.png: cannot write mode I as PNG"):
        inject_any(grey, tmp_path / "o.png", BurnInOptions(text="A"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grey.png"]
