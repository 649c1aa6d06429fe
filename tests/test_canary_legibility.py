"""Legibility at the model input (issue 65, item 1): the measures against independent
computations, the thresholds at their edges, and the injector's refusal through the CXR
bundle of a canary its 28-px model cannot read."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pydicom_files import write_dicom

from monai_forget.canary import render_text
from monai_forget.canary.legibility import (
    MIN_CAP_HEIGHT,
    MIN_CONTRAST,
    MIN_CORRELATION,
    area_matrix,
    measure_legibility,
    smallest_legible,
)
from monai_forget.canary.lettering import BitmapLettering, TrueTypeLettering
from monai_forget.cli import main

CXR_BUNDLE = str(Path(__file__).resolve().parents[1] / "bundles" / "cxr_pneumonia_classification")


def _area_resize(size_out: int):
    """A preprocessing that area-averages a (1, H, W) image to size_out (exactly)."""

    def pre(image):
        rows, cols = image.shape[-2:]
        return area_matrix(rows, size_out) @ image[0] @ area_matrix(cols, size_out).T

    return lambda image: pre(image)[None]


@pytest.mark.parametrize(("size_in", "size_out"), [(12, 4), (10, 4), (7, 3), (5, 5)])
def test_area_matrix_is_the_mean_of_a_supersampled_grid(size_in, size_out):
    """Each output pixel is the mean of the input over its footprint: checked against
    repeating every input pixel size_out times and every output pixel size_in times (a
    common grid where both are whole pixels), then block means."""
    rng = np.random.default_rng(size_in)
    x = rng.random(size_in)
    fine = np.repeat(x, size_out)  # size_in * size_out cells
    expected = fine.reshape(size_out, size_in).mean(axis=1)
    np.testing.assert_allclose(area_matrix(size_in, size_out) @ x, expected, rtol=1e-12)


def test_cap_heights_are_the_glyphs_ink():
    """The 5x5 typeface's capital is 5 rows per scale; a TrueType capital is the rows of
    ink an H draws (counted from the rendered coverage, not from the font's metrics)."""
    assert BitmapLettering(3).cap_height == render_text("H", 3).shape[0] == 15
    font = TrueTypeLettering("DejaVuSans", 40)
    inked = np.flatnonzero(font.render("H").max(axis=1) > 0.5)
    assert abs(font.cap_height - (inked[-1] - inked[0] + 1)) <= 1


def _burned(size: int, scale: int, background: float = 0.3, ink: float = 1.0):
    rng = np.random.default_rng(0)
    before = (background + 0.05 * rng.random((1, size, size))).astype(np.float32)
    after = before.copy()
    mask = render_text("ANNA", scale)
    after[0, 2 : 2 + mask.shape[0], 2 : 2 + mask.shape[1]][mask] = ink
    return before, after


def test_a_text_the_resize_keeps_is_legible_and_one_it_shrinks_is_not():
    """Scale 4 through a 4x area resize: capitals 5 model pixels high, the shape kept
    (r near 1); ink 0.7 above the background, so half- to fully covered model pixels
    change by 0.35-0.7 of the range; scale 3: 3.75 pixels, not legible."""
    pre = _area_resize(64)
    seen = measure_legibility(pre, *_burned(256, 4), cap_height=20)
    assert seen.cap_height == pytest.approx(5.0) and seen.legible
    assert seen.correlation > 0.95 and 0.35 < seen.contrast < 0.7
    small = measure_legibility(pre, *_burned(256, 3), cap_height=15)
    assert small.cap_height == pytest.approx(3.75) and not small.legible
    assert "a capital is 3.8 model pixels high" in small.shortfalls()[0]


def test_a_text_the_model_sees_unresized_is_legible():
    """No resize (a 64-px acquisition read by a 64-px model): the change is the text
    itself, strokes against the gaps between them (r near 1 over the box)."""
    before, after = _burned(64, 1)
    seen = measure_legibility(lambda x: x, before, after, cap_height=5)
    assert seen.cap_height == 5.0 and seen.correlation > 0.99 and seen.legible


def test_each_threshold_is_inclusive_at_its_edge():
    """Legible needs every measure at or above its threshold, and fails on each alone."""
    from monai_forget.canary.legibility import Legibility

    edge = Legibility(MIN_CAP_HEIGHT, MIN_CORRELATION, MIN_CONTRAST, 1.0, (1, 8, 8), 1.0)
    assert edge.legible
    for field in ("cap_height", "correlation", "contrast"):
        below = {**edge.__dict__, field: getattr(edge, field) - 1e-9}
        assert not Legibility(**below).legible, field


def test_a_sampling_resize_scrambles_the_shape_and_white_on_white_has_no_contrast():
    """A nearest-neighbour resize keeps one acquisition pixel in 16: the text's shape at
    the model input no longer follows the text drawn at that size. Ink on a white
    background changes nothing: no contrast."""
    before, after = _burned(256, 4)

    def nearest(image):
        return image[:, 1::4, 1::4]

    sampled = measure_legibility(nearest, before, after, cap_height=20)
    assert sampled.correlation < MIN_CORRELATION and not sampled.legible
    white = measure_legibility(_area_resize(64), *_burned(256, 4, ink=0.33), cap_height=20)
    assert white.contrast < MIN_CONTRAST and not white.legible


@pytest.mark.parametrize(("factor", "expected"), [(0.25, 4), (0.2, 5), (28 / 1024, 37)])
def test_the_smallest_legible_scale_is_the_first_that_reaches_the_height(factor, expected):
    """Off by one at the threshold: the suggested scale reaches MIN_CAP_HEIGHT model
    pixels, the one below does not."""
    hint = smallest_legible(factor, (4096, 4096), 4, (1, 1))
    assert hint.scale == expected
    assert 5 * expected * factor >= MIN_CAP_HEIGHT - 1e-9 > 5 * (expected - 1) * factor


def test_a_suggestion_moves_the_text_to_fit_or_says_none_fits():
    hint = smallest_legible(0.25, (256, 216), 4, (240, 200))
    assert hint.scale == 4 and hint.position == (256 - 20, 216 - 92)
    long = smallest_legible(28 / 1024, (1024, 1024), 21, (1, 1))
    assert long.position is None and long.max_characters == 4
    assert "none fits" in long.describe() and "at most 4 characters" in long.describe()
    size = smallest_legible(0.5, (512, 512), 4, (1, 1), font="DejaVuSans")
    assert TrueTypeLettering("DejaVuSans", size.font_size).cap_height * 0.5 >= MIN_CAP_HEIGHT
    assert TrueTypeLettering("DejaVuSans", size.font_size - 1).cap_height * 0.5 < MIN_CAP_HEIGHT


@pytest.fixture(scope="module")
def radiographs(tmp_path_factory):
    """Chest-X-ray-sized DICOMs (1,024 and 2,048 px) with a patient name, and a 256-px one."""
    root = tmp_path_factory.mktemp("radiographs")
    rng = np.random.default_rng(0)
    files = {}
    for size in (1024, 2048, 256):
        files[size] = root / f"cr{size}.dcm"
        pixels = rng.integers(20, 120, (size, size)).astype(np.uint16)
        write_dicom(files[size], f"P{size}", pixels=pixels, name="ROE^JANE")
    return files


@pytest.mark.parametrize("size", [1024, 2048])
def test_the_default_text_on_a_radiograph_is_refused_through_the_28px_bundle(
    radiographs, size, tmp_path, capsys
):
    """Issue 65's target: the default text (the PatientName, scale 1) on 1,024 and 2,048
    px images through the 28-px CXR bundle is not legible: refused, non-zero exit,
    nothing written, the smallest legible scale named; --allow-illegible plants it and
    the manifest says so."""
    out = tmp_path / "canary.dcm"
    args = ["canary", "inject", str(radiographs[size]), str(out), "--bundle", CXR_BUNDLE]
    assert main(args) == 2
    err = capsys.readouterr().err
    scale = int(np.ceil(size / 28))
    assert "not legible at the model input" in err and f"--scale {scale}" in err
    assert "none fits" in err and "--allow-illegible" in err
    assert list(tmp_path.iterdir()) == [], "nothing written"
    assert main([*args, "--allow-illegible"]) == 0
    said = capsys.readouterr()
    assert "NOT legible" in said.out and "illegible canaries were planted" in said.err
    (row,) = json.loads((tmp_path / "canary.dcm.manifest.json").read_text())["records"]
    assert row["legible"] is False and row["legibility_cap_height"] < 1
    assert out.is_file()


def test_a_legible_canary_is_planted_with_its_figures_in_the_manifest(radiographs, tmp_path):
    """256 px to 28: scale 10 makes 5.5-pixel capitals; ANNA fits and is planted."""
    out = tmp_path / "canary.dcm"
    args = ["canary", "inject", str(radiographs[256]), str(out), "--text", "ANNA", "--scale",
            "10", "--position", "4", "4", "--bundle", CXR_BUNDLE]  # fmt: skip
    assert main(args) == 0
    (row,) = json.loads((tmp_path / "canary.dcm.manifest.json").read_text())["records"]
    assert row["legible"] is True
    assert row["legibility_cap_height"] == pytest.approx(50 * 28 / 256)
    assert row["legibility_input_shape"] == [1, 28, 28]


def test_canary_check_answers_for_a_roster_without_writing(radiographs, tmp_path, capsys):
    """`canary check` burns every roster name in memory: exit 1 when any is not legible,
    by roster entry (no name printed), 0 when all are; nothing is written."""
    roster = tmp_path / "roster.csv"
    roster.write_text("name\nANNA\nEVA\nJANE ROE\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    base = ["canary", "check", str(radiographs[256]), "--bundle", CXR_BUNDLE]
    where = ["--scale", "10", "--position", "4", "4"]
    assert main([*base, "--roster", str(roster), *where]) == 1
    out = capsys.readouterr().out
    # JANE ROE does not fit at scale 10 on 256 px; ANNA and EVA are legible
    assert "1 of 3 NOT legible (roster entries 3)" in out and "2 of 3 legible" in out
    assert "JANE" not in out and "ANNA" not in out
    assert main([*base, "--text", "EVA", *where]) == 0
    assert "1 of 1 legible" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    # the file's own PatientName, at scale 1 on 2,048 px: not legible
    assert main(["canary", "check", str(radiographs[2048]), "--bundle", CXR_BUNDLE]) == 1
    out = capsys.readouterr().out
    assert "1 of 1 NOT legible; first:" in out and "0 of 1 legible" in out
