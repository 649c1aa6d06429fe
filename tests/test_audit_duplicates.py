"""D_Q's copies collapsed before any auditor decides (issue 66, item 2): exact copies by
content hash, near copies by the thumbnails' correlation, checked against a brute-force
computation, on real images, and through every auditor's command."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components
from test_cli_audit import _args, _reference_args, files  # noqa: F401  (fixture)

from monai_forget.audit.duplicates import (
    NEAR_COPY_CORRELATION,
    collapse_duplicates,
    distinct_query,
    thumbnails,
)
from monai_forget.audit.result import AuditResult
from monai_forget.cli import main
from monai_forget.data import LabelledImages, load_digits


def _set(images: np.ndarray) -> LabelledImages:
    images = np.asarray(images, dtype=np.float32)
    return LabelledImages(images, np.zeros(len(images), dtype=int), num_classes=2)


def test_exact_and_near_copies_collapse_to_their_first():
    """Three digits, then a copy of the first (same bytes), a lightly noised copy of the
    second and a re-windowed copy of the third (2x + 0.1: r = 1, other bytes)."""
    digits = load_digits().images[:3]
    noise = np.random.default_rng(0).normal(0, 0.01 * digits[1].std(), digits[1].shape)
    images = np.concatenate([digits, digits[:1], digits[1:2] + noise, 2 * digits[2:3] + 0.1])
    collapsed = collapse_duplicates(_set(images))
    assert (collapsed.given, collapsed.exact, collapsed.near) == (6, 1, 2)
    np.testing.assert_array_equal(collapsed.distinct.images, digits)
    exact_only = collapse_duplicates(_set(images), threshold=1.01)
    assert (exact_only.exact, exact_only.near, len(exact_only.distinct)) == (1, 0, 5)


def test_near_copies_are_the_components_of_a_brute_force_correlation():
    """Chains of near copies (a ~ b ~ c, a and c further apart) are one group, kept at its
    first image: the components of the graph of pairs whose np.corrcoef reaches the
    threshold, computed here pair by pair."""
    rng = np.random.default_rng(1)
    base = rng.random((12, 1, 10, 10))
    images = [base]
    for k in range(12):  # each base image drifts in small steps: a chain of near copies
        step = base[k] + rng.normal(0, 0.006, base[k].shape) * (k % 3)
        images.append(step[None])
    images = np.concatenate(images)[rng.permutation(24)].astype(np.float32)
    flat = images.reshape(len(images), -1)
    edges = np.array([[np.corrcoef(a, b)[0, 1] >= NEAR_COPY_CORRELATION for b in flat]
                      for a in flat])  # fmt: skip
    _, label = connected_components(csr_matrix(edges), directed=False)
    expected = sorted(int(np.flatnonzero(label == c)[0]) for c in np.unique(label))
    collapsed = collapse_duplicates(_set(images))
    kept = [int(np.flatnonzero((flat == x.ravel()).all(1))[0]) for x in collapsed.distinct.images]
    assert kept == expected
    assert 0 < collapsed.near < 12  # the case holds both kinds of pair


@pytest.mark.parametrize("offset, collapsed", [(1e-9, True), (-1e-6, False)])
def test_the_threshold_is_inclusive(offset, collapsed):
    """Two images whose correlation is the threshold +- a hair, built from orthonormal
    zero-mean patterns: at or above, near copies; below, two images."""
    rng = np.random.default_rng(2)
    u, v = np.linalg.qr(rng.normal(size=(64, 2)) - 0)[0].T
    u, v = u - u.mean(), v - v.mean()
    v = v - (v @ u) / (u @ u) * u
    u, v = u / np.linalg.norm(u), v / np.linalg.norm(v)
    r = NEAR_COPY_CORRELATION + offset
    pair = np.stack([u, r * u + np.sqrt(1 - r**2) * v]).reshape(2, 1, 8, 8)
    assert np.corrcoef(pair.reshape(2, -1))[0, 1] == pytest.approx(r, abs=1e-12)
    assert collapse_duplicates(_set(pair)).near == int(collapsed)


def test_thumbnails_are_area_means():
    image = np.arange(128 * 128, dtype=np.float32).reshape(1, 1, 128, 128)
    expected = image[0, 0].reshape(64, 2, 64, 2).mean(axis=(1, 3)).ravel()
    np.testing.assert_allclose(thumbnails(image)[0], expected)


def test_distinct_real_images_are_kept(shared_data):
    """The digits have no copy; PneumoniaMNIST's test split holds 3 exact copies of its
    own (the data set's), and no near copy beyond them."""
    digits = collapse_duplicates(load_digits())
    assert (digits.exact, digits.near) == (0, 0)
    from monai_forget.data import load_pneumoniamnist

    try:
        test = load_pneumoniamnist(split="test", root=shared_data)
    except FileNotFoundError as err:
        pytest.skip(str(err))
    collapsed = collapse_duplicates(test)
    assert (collapsed.exact, collapsed.near) == (3, 0)


def test_a_query_of_copies_is_refused_with_its_count():
    one = load_digits().images[:1]
    with pytest.raises(ValueError, match=r"holds 50 images but only 1 distinct \(49 exact"):
        distinct_query(_set(np.repeat(one, 50, axis=0)))
    two = distinct_query(_set(np.repeat(load_digits().images[:2], 25, axis=0)))
    assert (len(two.distinct), two.exact) == (2, 48)


@pytest.mark.parametrize("method", ["ks", "ema", "refmodel"])
def test_every_auditor_decides_on_the_distinct_images(files, tmp_path, capsys, method):  # noqa: F811
    """A D_Q of 40 held-out images, each given twice: the audit scores 40, records 40
    exact copies collapsed and says so in its summary."""
    held_out = np.load(files / "B.npz")
    images, labels = held_out["images"][:40], held_out["labels"][:40]
    np.savez(files / "twice.npz", images=np.concatenate([images, images]),
             labels=np.concatenate([labels, labels]))  # fmt: skip
    out = tmp_path / method
    args = (_reference_args(files, "twice", out, "--references", "2") if method == "refmodel"
            else _args(files, method, "twice", out))  # fmt: skip
    assert main(args) in (0, 3, 4)
    printed = capsys.readouterr().out
    result = AuditResult.load(out / "result.json")
    assert result.sizes["query"] == 40
    assert (result.details["query_given"], result.details["query_exact_copies"]) == (80, 40)
    assert "40 exact and 0 near copies of others were collapsed" in result.summary()
    assert "decided on 40 distinct images" in printed
    assert json.loads((out / "result.json").read_text())["details"]["query_near_copies"] == 0


def test_a_correlation_equal_to_the_threshold_is_a_near_copy():
    """x and 3x + 5 on a 2x2 grid: centred and scaled, both are exactly (0.5, 0.5, -0.5,
    -0.5), so r is exactly 1.0; at a threshold of 1.0 they are near copies (at or above)."""
    x = np.array([[1.0, 1.0], [-1.0, -1.0]])
    pair = _set(np.stack([x, 3 * x + 5])[:, None])
    assert collapse_duplicates(pair, threshold=1.0).near == 1
    assert collapse_duplicates(pair, threshold=1.0 + 1e-12).near == 0
