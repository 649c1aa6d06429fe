"""Typeface, masks, random controls and stamping (monai_forget.canary)."""

from __future__ import annotations

import string

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from monai_forget.canary import (
    CHARACTERS,
    GLYPH_ADVANCE,
    GLYPH_HEIGHT,
    glyph,
    paint,
    random_patch,
    random_text,
    render_text,
    scale_for_height,
    stamp,
    text_shape,
)


def test_typeface_covers_person_name_characters():
    wanted = string.ascii_letters + string.digits + " ^,.-'"
    assert set(CHARACTERS) == set(wanted)


def test_glyphs_are_distinct_and_inked():
    bitmaps = {c: glyph(c).tobytes() for c in CHARACTERS}
    assert len(set(bitmaps.values())) == len(CHARACTERS)
    for char in CHARACTERS:
        assert glyph(char).shape == (5, 5)
        assert glyph(char).any() == (char != " ")


def test_single_letter_is_the_papers_5x5_feature():
    mask = render_text("A")
    assert mask.shape == (5, 5)
    np.testing.assert_array_equal(mask, glyph("A"))


@settings(max_examples=60, deadline=None)
@given(text=st.text(alphabet=CHARACTERS, min_size=1, max_size=12), scale=st.integers(1, 4))
def test_mask_geometry_property(text, scale):
    """Documented formula: height 5*scale, width (6*n - 1)*scale, glyph i at 6*i*scale."""
    mask = render_text(text, scale)
    n = len(text)
    assert mask.shape == (5 * scale, (6 * n - 1) * scale) == text_shape(n, scale)
    assert mask.dtype == bool
    for i, char in enumerate(text):
        col = i * GLYPH_ADVANCE * scale
        cell = mask[:, col : col + 5 * scale]
        np.testing.assert_array_equal(cell[::scale, ::scale], glyph(char))
        # every font pixel is a full scale x scale block
        np.testing.assert_array_equal(cell, np.kron(glyph(char), np.ones((scale, scale), bool)))
        if i < n - 1:  # the one-column gap after each glyph but the last stays empty
            assert not mask[:, col + 5 * scale : col + 6 * scale].any()
    assert mask.sum() == sum(int(glyph(c).sum()) for c in text) * scale * scale


@pytest.mark.parametrize(
    ("text", "scale", "message"),
    [
        ("", 1, "at least one character"),
        ("Zoë", 1, "a character outside the"),
        ("A_B", 1, "a character outside the"),
        ("AB", 0, "an integer >= 1"),
        ("AB", 1.5, "an integer >= 1"),
    ],
)
def test_render_refusals(text, scale, message):
    with pytest.raises(ValueError, match=message):
        render_text(text, scale)


def test_scale_for_height():
    assert scale_for_height(0.1, 256) == 5  # 25.6 rows -> 5 glyph rows of 5
    assert scale_for_height(1.0, 5) == 1
    with pytest.raises(ValueError, match="less than the 5-row glyph"):
        scale_for_height(0.01, 100)
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        scale_for_height(1.5, 100)


def test_random_controls_match_size_and_are_seeded():
    feature = render_text("JOHN", 2)
    patch = random_patch(feature.shape, rng=3, n_on=int(feature.sum()))
    assert patch.shape == feature.shape and patch.sum() == feature.sum()
    np.testing.assert_array_equal(
        patch, random_patch(feature.shape, rng=3, n_on=int(feature.sum()))
    )
    loose = random_patch((40, 40), rng=0)
    assert 0.4 < loose.mean() < 0.6
    word = random_text(4, rng=1)
    assert len(word) == 4 and word.isalpha() and word.isupper()
    assert render_text(word).shape == render_text("JOHN").shape
    assert random_text(12, rng=1) == random_text(12, rng=1)
    with pytest.raises(ValueError, match=r"n_on must be an integer in \[0, 4\], got 5"):
        random_patch((2, 2), n_on=5)


def test_stamp_numpy_probes_never_modifies_input():
    probes = np.random.default_rng(0).random((3, 2, 12, 20)).astype(np.float32)
    before = probes.copy()
    mask = render_text("B")
    out = stamp(probes, mask, (1, 1), 7.0)
    np.testing.assert_array_equal(probes, before)
    region = np.zeros((12, 20), bool)
    region[1:6, 1:6] = mask
    assert (out[..., region] == 7.0).all()
    np.testing.assert_array_equal(out[..., ~region], before[..., ~region])


def test_stamp_torch_keeps_device_and_dtype():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    probes = torch.zeros(2, 1, 8, 8, device=device, dtype=torch.float64)
    out = stamp(probes, render_text("I"), (2, 3), 1.5)
    assert out.device == probes.device and out.dtype == probes.dtype
    assert probes.sum().item() == 0
    expected = np.zeros((8, 8), bool)
    expected[2:7, 3:8] = glyph("I")
    got = out.cpu().numpy()
    assert (got[:, :, expected] == 1.5).all() and (got[:, :, ~expected] == 0).all()


def test_paint_per_index_values_on_other_axes():
    frames = np.zeros((2, 6, 7, 3), np.uint16)  # (frames, rows, cols, samples)
    value = np.array([1, 2, 3], np.uint16)
    paint(frames[1], render_text("L"), (0, 1), value, axes=(0, 1))
    sel = np.zeros((6, 7), bool)
    sel[0:5, 1:6] = glyph("L")
    assert (frames[1][sel] == value).all()
    assert not frames[0].any() and not frames[1][~sel].any()


@pytest.mark.parametrize("position", [(-1, 0), (0, -1), (4, 0), (0, 4)])
def test_stamp_refuses_outside_image(position):
    with pytest.raises(ValueError, match="image is 8x8"):
        stamp(np.zeros((8, 8)), render_text("A"), position, 1.0)


def test_glyph_height_constant():
    assert GLYPH_HEIGHT == 5 and GLYPH_ADVANCE == 6
