"""Math of the unique-feature memorisation score (Hartley & Tsaftaris 2022).

Hand-worked examples and independent computations (scipy) for KL, M (Eq. 1), the
one-tailed tests and M_w (Sec. 2.2); the random controls and the stamping of features.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats
import torch

from monai_forget.canary import render_text, stamp
from monai_forget.data import LabelledImages
from monai_forget.memorisation import (
    PAPER_TEST,
    TESTS,
    UniqueFeature,
    compute_m_score,
    compute_white_box_score,
    inject_feature,
    m_score_from_divergences,
    one_tailed_test,
    paired_ttest,
    stamp_each,
    warn_if_in_distribution,
)

# --------------------------------------------------------------------------- M by hand


def test_m_score_hand_worked_two_probes():
    # KL([.5,.5] || [.25,.75]) = .5 ln 2 + .5 ln(2/3) = 0.1438410362
    # KL([.5,.5] || [.4,.6])   = .5 ln 1.25 + .5 ln(5/6) = 0.0204110826
    clean = [[0.5, 0.5], [0.5, 0.5]]
    unique = [[0.25, 0.75], [0.75, 0.25]]
    random = [[0.5, 0.5], [0.4, 0.6]]
    s = compute_m_score(clean, unique, random)
    d_u = 0.5 * math.log(2) + 0.5 * math.log(2 / 3)
    d_r = 0.5 * math.log(1.25) + 0.5 * math.log(5 / 6)
    np.testing.assert_allclose(s.d_unique, [d_u, d_u], rtol=1e-12)
    np.testing.assert_allclose(s.d_random, [0.0, d_r], rtol=1e-12, atol=1e-15)
    assert s.m == pytest.approx(d_u - d_r / 2, rel=1e-12)
    assert s.m == pytest.approx(0.1336355, abs=1e-7)
    # Student, by hand: var(d_u) = 0, var(d_r) = d_r^2 / 2, pooled = var(d_r) / 2, df = 2,
    # t = M / sqrt(pooled * (1/2 + 1/2)) = M / (d_r / 2).
    student = s.tests["student"]
    assert student.statistic == pytest.approx(s.m / (d_r / 2), rel=1e-10)
    assert student.df == 2
    assert student.pvalue == pytest.approx(scipy.stats.t.sf(student.statistic, 2), rel=1e-10)
    assert s.test == PAPER_TEST == "student"
    assert s.pvalue == student.pvalue


def test_m_score_from_logits_equals_softmax_first():
    rng = np.random.default_rng(0)
    logits = [rng.normal(size=(20, 4)) for _ in range(3)]
    probs = [scipy.special.softmax(x, axis=1) for x in logits]
    a = compute_m_score(*logits, from_logits=True)
    b = compute_m_score(*probs)
    assert a.m == pytest.approx(b.m, rel=1e-12)
    for name in TESTS:
        assert a.tests[name].pvalue == pytest.approx(b.tests[name].pvalue, rel=1e-9)


def test_divergences_match_scipy_entropy():
    rng = np.random.default_rng(1)
    pc, pu, pr = (rng.dirichlet(np.ones(5), size=30) for _ in range(3))
    s = compute_m_score(pc, pu, pr)
    ref_u = np.array([scipy.stats.entropy(a, b) for a, b in zip(pc, pu, strict=True)])
    ref_r = np.array([scipy.stats.entropy(a, b) for a, b in zip(pc, pr, strict=True)])
    np.testing.assert_allclose(s.d_unique, ref_u, rtol=1e-12)
    np.testing.assert_allclose(s.d_random, ref_r, rtol=1e-12)
    assert s.m == pytest.approx(ref_u.mean() - ref_r.mean(), rel=1e-12)
    assert s.mean_d_unique == pytest.approx(ref_u.mean())


# --------------------------------------------------------------------------- tests


def test_paired_ttest_hand_worked():
    # differences [2, 3, 2]: mean 7/3, sd sqrt(1/3), t = (7/3) / (sqrt(1/3)/sqrt(3)) = 7
    res = paired_ttest([3.0, 5.0, 4.0], [1.0, 2.0, 2.0])
    assert res.statistic == pytest.approx(7.0, rel=1e-12)
    assert res.df == 2
    assert res.pvalue == pytest.approx(scipy.stats.t.sf(7.0, 2), rel=1e-12)


def test_wilcoxon_hand_worked_exact():
    # differences [1, -2, 3, 4, 5]: R+ = 1 + 3 + 4 + 5 = 13. Of the 2^5 sign patterns,
    # R+ >= 13 iff the negative ranks sum to <= 2: {}, {1}, {2} -> p = 3/32.
    res = one_tailed_test([1.0, 0.0, 3.0, 4.0, 5.0], [0.0, 2.0, 0.0, 0.0, 0.0], "wilcoxon")
    assert res.statistic == 13
    assert res.pvalue == pytest.approx(3 / 32, rel=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tests_match_scipy(seed):
    rng = np.random.default_rng(seed)
    d_r = rng.gamma(2.0, 0.01, size=40)
    d_u = d_r + rng.normal(0.004, 0.01, size=40)
    d_u = np.abs(d_u)
    student = one_tailed_test(d_u, d_r, "student")
    welch = one_tailed_test(d_u, d_r, "welch")
    paired = one_tailed_test(d_u, d_r, "paired")
    wilcoxon = one_tailed_test(d_u, d_r, "wilcoxon")
    ref = scipy.stats.ttest_ind(d_u, d_r, alternative="greater")
    assert student.statistic == pytest.approx(ref.statistic, rel=1e-10)
    assert student.pvalue == pytest.approx(ref.pvalue, rel=1e-9)
    ref = scipy.stats.ttest_ind(d_u, d_r, equal_var=False, alternative="greater")
    assert welch.statistic == pytest.approx(ref.statistic, rel=1e-10)
    assert welch.pvalue == pytest.approx(ref.pvalue, rel=1e-9)
    ref = scipy.stats.ttest_rel(d_u, d_r, alternative="greater")
    assert paired.statistic == pytest.approx(ref.statistic, rel=1e-10)
    assert paired.pvalue == pytest.approx(ref.pvalue, rel=1e-9)
    ref = scipy.stats.wilcoxon(d_u - d_r, alternative="greater")
    assert wilcoxon.statistic == pytest.approx(ref.statistic)
    assert wilcoxon.pvalue == pytest.approx(ref.pvalue, rel=1e-9)


def test_tests_are_one_tailed():
    # z_u moving the outputs LESS than random features is no evidence of memorisation.
    d_r = np.linspace(0.1, 0.2, 30)
    d_u = d_r - 0.05
    s = m_score_from_divergences(d_u, d_r)
    assert s.m < 0
    for name in TESTS:
        assert s.tests[name].pvalue > 0.5, name


def test_degenerate_equal_divergences_give_p_one():
    # A model that ignores the feature region: every divergence is 0.
    s = m_score_from_divergences(np.zeros(10), np.zeros(10))
    assert s.m == 0
    for name in TESTS:
        assert s.tests[name].pvalue == 1.0, name


def test_paired_constant_positive_difference_is_certain():
    res = paired_ttest([2.0, 3.0, 4.0], [1.0, 2.0, 3.0])
    assert res.statistic == math.inf and res.pvalue == 0.0


def test_test_selection_and_unknown_test():
    s = m_score_from_divergences([0.2, 0.3, 0.4], [0.1, 0.1, 0.2], test="paired", tests=["welch"])
    assert set(s.tests) == {"paired", "welch"} and s.test == "paired"
    with pytest.raises(ValueError, match=r"test must be one of .*, got 'z'"):
        m_score_from_divergences([0.2, 0.3], [0.1, 0.1], test="z")


# --------------------------------------------------------------------------- bad outputs


def test_outputs_that_are_not_probabilities_are_refused():
    logits = np.array([[2.0, -1.0], [0.5, 0.1]])
    probs = np.full((2, 2), 0.5)
    with pytest.raises(ValueError, match=r"p_unique.*from_logits=True"):
        compute_m_score(probs, logits, probs)
    with pytest.raises(ValueError, match="same shape"):
        compute_m_score(probs, probs, np.full((3, 2), 0.5))
    with pytest.raises(ValueError, match="at least 2 probes"):
        compute_m_score(probs[:1], probs[:1], probs[:1])
    with pytest.raises(ValueError, match="NaN"):
        compute_m_score(probs, np.array([[np.nan, 1.0], [0.5, 0.5]]), probs)


def test_zero_probability_gives_a_clear_error():
    clean = np.array([[0.5, 0.5], [0.5, 0.5]])
    hard = np.array([[1.0, 0.0], [0.5, 0.5]])
    with pytest.raises(ValueError, match=r"probability of exactly 0.*logits"):
        compute_m_score(clean, hard, clean)


# --------------------------------------------------------------------------- M_w


def test_white_box_hand_worked():
    # terms: ln(0.8/0.6) = 0.2876821, ln(0.5/0.75) = -0.4054651 -> M_w = -0.0588915
    res = compute_white_box_score([[0.2, 0.8], [0.5, 0.5]], [[0.4, 0.6], [0.25, 0.75]], label=1)
    np.testing.assert_allclose(res.terms, [math.log(0.8 / 0.6), math.log(0.5 / 0.75)])
    assert res.m_w == pytest.approx(-0.0588915, abs=1e-7)
    assert res.n == 2 and res.label == 1


def test_white_box_refusals():
    p = [[0.5, 0.5], [0.5, 0.5]]
    with pytest.raises(ValueError, match=r"label must be an integer in \[0, 1\], got 2: one of"):
        compute_white_box_score(p, p, label=2)
    with pytest.raises(ValueError, match="at least 2"):
        compute_white_box_score(p[:1], p[:1], label=0)


# --------------------------------------------------------------------------- features


def test_feature_from_text_is_the_canary_rendering():
    f = UniqueFeature.from_text("AB", position=(2, 3), scale=2, value=0.7)
    np.testing.assert_array_equal(f.mask, render_text("AB", 2))
    assert f.shape == (10, 22) and f.ink == int(render_text("AB", 2).sum())
    assert f.to_dict()["typeface"] == "monai-forget-5x5"


def test_random_patches_same_size_same_ink_fresh_per_probe():
    f = UniqueFeature.from_text("ANNA")
    masks = f.random_masks(200, rng=3, kind="ink")
    assert masks.shape == (200, *f.shape) and masks.dtype == bool
    assert (masks.reshape(200, -1).sum(1) == f.ink).all()
    assert len({m.tobytes() for m in masks}) == 200
    np.testing.assert_array_equal(masks, f.random_masks(200, rng=3, kind="ink"))
    # Every pixel is equally likely: the mean over many masks is flat (ink / area).
    many = f.random_masks(4000, rng=4, kind="ink").mean(0)
    assert np.abs(many - f.ink / many.size).max() < 0.05


def test_paper_patch_overwrites_the_whole_block_with_fair_coin_pixels():
    """The paper's control: z_r ~ U over the feature's block, each pixel on with p = 0.5,
    written over the whole block (off pixels black), not only over z_u's ink."""
    f = UniqueFeature.from_text("A", position=(2, 3), value=0.75)
    masks = f.random_masks(4000, rng=0)  # default kind: the paper's patch
    assert masks.shape == (4000, 5, 5)
    assert abs(masks.mean() - 0.5) < 0.01 and np.abs(masks.mean(0) - 0.5).max() < 0.04
    assert len({m.tobytes() for m in masks[:200]}) == 200
    images = np.full((3, 2, 10, 10), 0.4, np.float32)
    before = images.copy()
    for x_r in (f.apply_random(images, masks[:3]), f.apply_random(torch.from_numpy(images),
                                                                  masks[:3]).numpy()):  # fmt: skip
        np.testing.assert_array_equal(images, before)
        block = x_r[:, :, 2:7, 3:8]
        np.testing.assert_array_equal(block, np.where(masks[:3, None], 0.75, 0.0).repeat(2, 1))
        outside = np.ones((10, 10), bool)
        outside[2:7, 3:8] = False
        np.testing.assert_array_equal(x_r[:, :, outside], before[:, :, outside])
    painted = f.apply_random(images, masks[:3], kind="ink")  # ink and text kinds paint only
    expected = np.where(masks[:3, None], 0.75, np.float32(0.4)).repeat(2, 1)
    np.testing.assert_array_equal(painted[:, :, 2:7, 3:8], expected)
    with pytest.raises(ValueError, match="one of"):
        f.random_masks(3, kind="noise")


def test_random_text_controls_are_letters_of_the_same_length():
    f = UniqueFeature.from_text("EVE", scale=1)
    masks = f.random_masks(50, rng=0, kind="text")
    assert masks.shape == (50, 5, 17)
    letters = [render_text(c) for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"]
    for m in masks[:5]:
        for k in range(3):
            glyph = m[:, 6 * k : 6 * k + 5]
            assert any(np.array_equal(glyph, g) for g in letters)
    with pytest.raises(ValueError, match="need a text feature"):
        UniqueFeature(np.ones((2, 2), bool)).random_masks(3, kind="text")


def test_apply_and_apply_random_do_not_modify_inputs():
    rng = np.random.default_rng(0)
    images = rng.random((4, 2, 12, 12)).astype(np.float32)
    before = images.copy()
    f = UniqueFeature.from_text("A", position=(3, 4), value=5.0)
    x_u = f.apply(images)
    np.testing.assert_array_equal(images, before)
    region = x_u[:, :, 3:8, 4:9]
    assert (region[:, :, f.mask] == 5.0).all()
    np.testing.assert_array_equal(region[:, :, ~f.mask], before[:, :, 3:8, 4:9][:, :, ~f.mask])
    outside = np.ones((12, 12), bool)
    outside[3:8, 4:9] = False
    np.testing.assert_array_equal(x_u[:, :, outside], before[:, :, outside])
    masks = f.random_masks(4, rng=1, kind="ink")
    x_r = f.apply_random(images, masks, kind="ink")
    np.testing.assert_array_equal(images, before)
    for i in range(4):  # reference: one canary.stamp per probe
        np.testing.assert_array_equal(
            x_r[i : i + 1], stamp(images[i : i + 1], masks[i], (3, 4), 5.0)
        )


def test_stamp_each_torch_matches_numpy_and_max_value():
    rng = np.random.default_rng(2)
    images = rng.random((3, 1, 9, 9)).astype(np.float32)
    f = UniqueFeature.from_text("T", position=(0, 0), value="max")
    masks = f.random_masks(3, rng=0)
    out_np = f.apply_random(images, masks)
    out_t = f.apply_random(torch.from_numpy(images), masks)
    np.testing.assert_array_equal(out_np, out_t.numpy())
    for i in range(3):
        assert (out_np[i, 0, :5, :5][masks[i]] == images[i].max()).all()
    with pytest.raises(ValueError, match="masks must be"):
        stamp_each(images, masks[:2], (0, 0), 1.0)


def test_feature_that_does_not_fit_is_refused():
    f = UniqueFeature.from_text("JOHN", position=(1, 1))
    with pytest.raises(ValueError, match=r"does not fit.*5x23.*smaller scale"):
        f.apply(np.zeros((2, 1, 8, 8), np.float32))
    with pytest.raises(ValueError, match=r"\(N, C, H, W\)"):
        f.apply(np.zeros((2, 28, 28), np.float32))


def test_bad_feature_definitions_are_refused():
    with pytest.raises(ValueError, match="no ink"):
        UniqueFeature(np.zeros((3, 3), bool))
    with pytest.raises(ValueError, match="number or 'max'"):
        UniqueFeature(np.ones((3, 3), bool), value="white")
    with pytest.raises(ValueError, match="character"):
        UniqueFeature.from_text("Ann@")


def test_inject_feature_changes_exactly_one_image():
    rng = np.random.default_rng(0)
    data = LabelledImages(rng.random((5, 1, 10, 10)), np.arange(5), num_classes=5)
    f = UniqueFeature.from_text("E", position=(2, 2), value=1.0)
    canary = inject_feature(data, 3, f)
    changed = np.flatnonzero((canary.images != data.images).reshape(5, -1).any(1))
    assert changed.tolist() == [3]
    np.testing.assert_array_equal(canary.images[3, 0, 2:7, 2:7][f.mask], 1.0)
    np.testing.assert_array_equal(canary.labels, data.labels)


def test_warns_about_in_distribution_probes():
    rng = np.random.default_rng(0)
    train = rng.random((6, 1, 8, 8)).astype(np.float32)
    probes = np.concatenate([train[:2], rng.random((3, 1, 8, 8)).astype(np.float32)])
    with pytest.warns(UserWarning, match="2 probe\\(s\\) are identical to training samples"):
        assert warn_if_in_distribution(probes, train) == 2


def test_apply_into_a_given_array_equals_apply():
    rng = np.random.default_rng(5)
    images = rng.random((3, 1, 10, 10)).astype(np.float32)
    f = UniqueFeature.from_text("K", position=(4, 4), value="max")
    out = np.empty_like(images)
    assert f.apply(images, out=out) is out
    np.testing.assert_array_equal(out, f.apply(images))
    masks = f.random_masks(3, rng=1)
    f.apply_random(images, masks, out=out)
    np.testing.assert_array_equal(out, f.apply_random(images, masks))
