"""TrueType lettering (issue 54, item 3): a scanner's anti-aliased typeface, drawn alike
by the injector and the leak scan."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from matched_filters import matched_filter
from PIL import Image, ImageDraw, ImageFont

from monai_forget.canary import changed_ink, paint
from monai_forget.canary.lettering import TrueTypeLettering, font_path
from monai_forget.cli import main
from monai_forget.memorisation import LeakScanConfig, leak_scan
from monai_forget.memorisation.pipeline import PipelineProbes, Preprocessing

CXR_BUNDLE = Path(__file__).resolve().parents[1] / "bundles" / "cxr_pneumonia_classification"
ROSTER = ["ANNA", "BOB", "EVE", "JOHN", "MARY", "LUCY", "TOM", "SAM", "ZOE", "IVY"]


def test_a_truetype_text_is_grey_and_its_box_holds_all_its_ink():
    """Anti-aliased: grey edge pixels. The box depends on the length only, and holds every
    pixel of ink Pillow draws for the text on a canvas with room to spare."""
    face = TrueTypeLettering("DejaVuSans", 14)
    wide = face.render("WWWW")
    assert wide.shape == face.render("iiii").shape == face.shape(4)
    assert ((wide > 0) & (wide < 1)).sum() > (wide == 1).sum() / 4, "anti-aliased edges"
    pil = ImageFont.truetype(str(font_path("DejaVuSans")), 14)
    for text in ("WWWW", "Mjqy", "JANE ROE"):
        canvas = Image.new("L", (400, 60), 0)
        ImageDraw.Draw(canvas).text((20, 20), text, fill=255, font=pil, anchor="la")
        total = np.asarray(canvas, np.float64).sum() / 255
        assert face.render(text).sum() == pytest.approx(total, rel=1e-6), text
    with pytest.raises(FileNotFoundError, match="DejaVuSans"):
        TrueTypeLettering("NoSuchFont", 12)
    with pytest.raises(ValueError, match="at least 4 pixels"):
        TrueTypeLettering("DejaVuSans", 2)


def test_coverage_composites_the_value_over_the_image_by_hand():
    """x + c * (value - x), rounded for integer images; pixels with c = 0 untouched."""
    image = np.array([[100, 200, 300]], np.uint16)
    coverage = np.array([[0.25, 0.0, 1.0]], np.float32)
    # by hand: 100 + 0.25 * 3995 = 1098.75 -> 1099; 300 -> 4095
    assert changed_ink(image, coverage, (0, 0), 4095) == 2
    paint(image, coverage, (0, 0), 4095)
    np.testing.assert_array_equal(image, [[1099, 200, 4095]])
    frames = np.zeros((2, 1, 2), np.float32)
    paint(frames, np.array([[0.5, 1.0]], np.float32), (0, 0), np.array([1.0, 0.4]), (1, 2))
    np.testing.assert_allclose(frames[:, 0], [[0.5, 1.0], [0.2, 0.4]])
    assert changed_ink(np.full((1, 2), 9, np.uint8), np.array([[0.01, 0.0]]), (0, 0), 9) == 0
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        paint(np.zeros((2, 2)), np.full((1, 1), 1.5), (0, 0), 1.0)


@pytest.mark.parametrize("fmt", ["png", "dcm"])
def test_the_scan_renders_what_the_injector_burned_in_a_font(tmp_path, fmt):
    """A name the injector burned in DejaVu Sans, loaded by the CXR bundle, is the model
    input the scan renders for it on the clean file (to the injector's rounding)."""
    from pydicom_files import write_dicom

    from monai_forget.dicom import as_options, inject_any

    rng = np.random.default_rng(3)
    clean = []
    for k in range(2):
        pixels = (rng.random((48, 64)) * 150).astype(np.uint8)
        path = tmp_path / f"probe{k}.{fmt}"
        if fmt == "png":
            Image.fromarray(pixels).save(path)
        else:
            write_dicom(path, f"P{k}", pixels=pixels)
        clean.append(path)
    options = as_options(text="EVA", position=(3, 5), font="DejaVuSans", font_size=13)
    burned = tmp_path / f"burned.{fmt}"
    inject_any(clean[0], burned, options)
    pre = Preprocessing.from_bundle(CXR_BUNDLE)
    seen = pre(pre.load([burned])[0])
    probes = PipelineProbes.from_bundle(CXR_BUNDLE, clean)
    white = 255.0 if fmt == "png" else "max"
    scanned = probes.carrying_texts(["EVA"], (3, 5), TrueTypeLettering("DejaVuSans", 13), white)
    # the injector rounds to stored integers (at most half a stored level per pixel,
    # before the resize's averaging); the scan composites in float
    np.testing.assert_allclose(scanned[0, 0], seen, atol=1 / 255)
    assert np.abs(scanned[0, 0] - seen).mean() < 0.25 / 255
    assert np.abs(seen - probes.clean()[0]).max() > 0.1
    assert probes.shortcut, "coverage goes through the box-local path, checked exact"
    sums = [v for k, v in probes._responses.items() if k[-1] == "coverage"]
    assert sums and sums[0] is not None, "the per-pixel coverage sums were used"


def test_a_name_memorised_in_a_font_is_flagged_through_the_bundle(tmp_path, capsys):
    """Burned by `canary inject --font` into a PNG, learned as the CXR bundle delivers it,
    scanned with one command that takes the font from the manifest: flagged and first.
    The 5x5 typeface at the same place does not find it."""
    rng = np.random.default_rng(4)
    probes = tmp_path / "probes"
    probes.mkdir()
    for i in range(30):
        Image.fromarray(rng.integers(0, 60, (84, 84)).astype(np.uint8)).save(probes / f"{i}.png")
    source = tmp_path / "canary_in.png"
    Image.fromarray(rng.integers(0, 60, (84, 84)).astype(np.uint8)).save(source)
    (tmp_path / "out").mkdir()
    code = main(["canary", "inject", str(source), str(tmp_path / "out" / "c.png"), "--text",
                 "LUCY", "--font", "DejaVuSans", "--font-size", "16", "--position", "3",
                 "3"])  # fmt: skip
    assert code == 0
    manifest = tmp_path / "out" / "c.png.manifest.json"
    record = json.loads(manifest.read_text())["records"][0]
    assert (record["typeface"], record["font_size"]) == ("DejaVuSans", 16)
    pre = Preprocessing.from_bundle(CXR_BUNDLE)
    grey = pre(pre.load([tmp_path / "out" / "c.png"])[0])[0] - pre(pre.load([source])[0])[0]
    rows, cols = np.nonzero(np.abs(grey) > 1e-6)
    box = np.zeros_like(grey, dtype=bool)
    box[rows.min() : rows.max() + 1, cols.min() : cols.max() + 1] = True
    template = np.where(box, np.where(grey > 0, grey, -0.5), 0.0)
    model = torch.jit.script(matched_filter(template, gain=1.0))
    model.save(str(tmp_path / "model.pt"))
    (tmp_path / "roster.csv").write_text("name\n" + "\n".join(ROSTER) + "\n")
    scan = ["memorisation", "scan", "--model", str(tmp_path / "model.pt"), "--probes",
            str(probes), "--bundle", str(CXR_BUNDLE), "--canary-manifest", str(manifest),
            "--value", "255", "--roster", str(tmp_path / "roster.csv"), "--decoys", "300",
            "--out", str(tmp_path / "scan")]  # fmt: skip
    assert main(scan) == 0, capsys.readouterr().err
    found = json.loads((tmp_path / "scan" / "leak_scan.json").read_text())
    assert found["significant"] == ["LUCY"] and found["rows"][0]["name"] == "LUCY"
    assert found["settings"]["typeface"] == "DejaVuSans"
    assert found["settings"]["font_size"] == 16 and found["settings"]["attribution"] is False
    bitmap = leak_scan(
        torch.jit.load(str(tmp_path / "model.pt")),
        PipelineProbes.from_bundle(CXR_BUNDLE, probes),
        ROSTER,
        LeakScanConfig(position=(3, 3), scale=2, value=255.0, decoys=300, decoy_seed=1),
    )
    assert "LUCY" not in bitmap.significant_names()


def test_a_font_scan_needs_the_pipeline_and_patch_or_ink_controls():
    with pytest.raises(ValueError, match="patch or ink"):
        LeakScanConfig(font="DejaVuSans", random_feature="text")
    config = LeakScanConfig(font="DejaVuSans", font_size=10, decoys=5)
    model = matched_filter(np.zeros((28, 28)))
    with pytest.raises(ValueError, match="PipelineProbes"):
        leak_scan(model, np.zeros((4, 1, 28, 28), np.float32), ["ANNA"], config)
