"""The per-probe statistics a leak scan ranks texts by: Eq. 1's KL and the class shift,
against hand-worked values and scipy."""

import numpy as np
import pytest
import scipy.special

from monai_forget.memorisation.statistics import class_shift, per_probe


def test_the_class_shift_by_hand():
    """Two probes, three classes. Text 0 raises class 2 on both probes (log 2 and log 3)
    and class 0 on one only; text 1 raises class 0 most on average. Each probe's value is
    its rise in the text's own class, which may be negative on that probe."""
    clean = np.array([[0.5, 0.3, 0.2], [0.6, 0.3, 0.1]])
    carrying = np.array(
        [
            [[0.6, 0.0, 0.4], [0.3, 0.4, 0.3]],  # text 0: class 2 rises by log 2, log 3
            [[0.9, 0.05, 0.05], [0.4, 0.5, 0.1]],  # text 1: class 0 by log 1.8, log 2/3
        ]
    )
    out = class_shift(clean, carrying)
    np.testing.assert_allclose(out[0], [np.log(2.0), np.log(3.0)])
    np.testing.assert_allclose(out[1], [np.log(1.8), np.log(0.4 / 0.6)])
    # class 1 of text 0 fell to exactly 0: floored, not -inf, and not chosen
    assert np.isfinite(out).all()


def test_the_class_shift_is_the_largest_mean_rise_over_classes():
    """Brute force: for random outputs, the mean of the returned values is the largest
    mean log-ratio over classes, and no other class beats it."""
    rng = np.random.default_rng(0)
    clean = scipy.special.softmax(rng.normal(size=(50, 6)), axis=1)
    carrying = scipy.special.softmax(rng.normal(size=(7, 50, 6)), axis=2)
    out = class_shift(clean, carrying)
    for g in range(7):
        means = [np.mean(np.log(carrying[g, :, k] / clean[:, k])) for k in range(6)]
        assert out[g].mean() == pytest.approx(max(means))


def test_m_is_scipys_kl_of_clean_to_carrying():
    rng = np.random.default_rng(1)
    clean = scipy.special.softmax(rng.normal(size=(20, 4)), axis=1)
    carrying = scipy.special.softmax(rng.normal(size=(3, 20, 4)), axis=2)
    expected = scipy.special.rel_entr(clean[None], carrying).sum(axis=2)
    np.testing.assert_allclose(per_probe("m", clean, carrying), expected)
    with pytest.raises(ValueError, match="statistic must be one of"):
        per_probe("auc", clean, carrying)


def test_each_statistic_quotes_only_the_cells_measured_with_it():
    """The report's measured cells are keyed by the statistic and the path: a scan ranked
    by the class shift quotes the class-shift control scans of its path (through the
    pipeline, or on the model grid), never M's, nor another path's."""
    from monai_forget.memorisation.report import measured_detection, measured_false_alarms

    by_m = measured_false_alarms("bh", 0.05, decoy_source="names")
    assert by_m and all(r.get("statistic", "m") == "m" for r in by_m)
    assert measured_detection("bh", 0.05, decoy_source="names")
    kind = dict(decoy_source="names", statistic="class-shift")
    grid = measured_false_alarms("bh", 0.05, **kind)
    assert [(r["flagged"], r["scans"]) for r in grid] == [(0, 100)]  # the direct stamp
    piped = measured_false_alarms("bh", 0.05, **kind, path="pipeline")
    assert sorted((r["flagged"], r["scans"]) for r in piped) == [
        (0, 35),
        (0, 60),
        (1, 30),
        (2, 100),
    ]
    assert all(r["statistic"] == "class-shift" for r in grid + piped)
    assert [(r["detected"], r["runs"]) for r in measured_detection("bh", 0.05, **kind)] == [
        (11, 20)
    ]
    curve = measured_detection("bh", 0.05, **kind, path="pipeline", images=10)
    assert sorted((r["detected"], r["runs"]) for r in curve) == [
        (0, 30),
        (0, 30),
        (1, 60),
        (4, 100),
    ]
    wide = measured_detection("bh", 0.05, **kind, path="pipeline", input_shape=(64, 64))
    assert all(r["input_size"] == 64 for r in wide) and {r["images"] for r in wide} == {1, 10, 100}


def test_the_default_statistic_is_the_class_shift_through_a_pipeline_and_m_on_the_grid():
    """The measured defaults (monai_forget.defaults.PIPELINE_STATISTIC): a scan through
    the model's preprocessing ranks by the class shift, one on the model grid by M; an
    explicit statistic is kept either way."""
    import warnings

    from matched_filters import matched_filter

    from monai_forget.memorisation import LeakScanConfig, leak_scan
    from monai_forget.memorisation.pipeline import PipelineProbes

    images = np.random.default_rng(0).random((6, 1, 28, 28)).astype(np.float32)
    model = matched_filter(np.zeros((28, 28)))
    piped = PipelineProbes(images, lambda x: x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 5 decoys cannot reach alpha: said, not tested
        scans = {
            (where, stat): leak_scan(
                model, probes, ["ANNA"], LeakScanConfig(decoys=5, decoy_seed=0, statistic=stat)
            ).settings["statistic"]
            for where, probes in (("grid", images), ("pipeline", piped))
            for stat in (None, "m", "class-shift")
        }
    assert scans[("grid", None)] == "m" and scans[("pipeline", None)] == "class-shift"
    assert all(scans[(w, s)] == s for w in ("grid", "pipeline") for s in ("m", "class-shift"))
