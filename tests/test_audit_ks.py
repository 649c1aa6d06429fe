"""K-S calibrated ratio (Liu & Tsaftaris 2020, Eq. 4) against scipy and by hand."""

import numpy as np
import pytest
import scipy.stats

from monai_forget.audit import (
    FORGOTTEN,
    NOT_FORGOTTEN,
    KSReference,
    ks_calibrated_ratio,
)
from monai_forget.inference import Predictions
from monai_forget.metrics import compute_ks_calibrated_ratio


def test_ratio_equals_scipy_ks_statistics():
    rng = np.random.default_rng(3)
    for _ in range(20):
        q, t, c = rng.beta(5, 1, 40), rng.beta(4, 1, 55), rng.beta(2, 1, 33)
        ratio = ks_calibrated_ratio(t, q, c)
        expected_qt = scipy.stats.ks_2samp(q, t).statistic
        expected_qc = scipy.stats.ks_2samp(q, c).statistic
        assert ratio.ks_query_target == pytest.approx(expected_qt, abs=1e-12)
        assert ratio.ks_query_calibration == pytest.approx(expected_qc, abs=1e-12)
        assert ratio.rho == pytest.approx(expected_qt / expected_qc, rel=1e-12)


def test_hand_worked_ratio_and_decision():
    query = np.array([0.9, 0.95, 0.99, 1.0])
    target = np.array([0.9, 0.95, 0.99, 0.999])  # ECDFs differ only at 0.999 vs 1.0: 1/4
    calibration = np.array([0.2, 0.4, 0.6, 0.8])  # entirely below the query: distance 1
    ratio = ks_calibrated_ratio(target, query, calibration)
    assert ratio.ks_query_target == 0.25
    assert ratio.ks_query_calibration == 1.0
    assert ratio.rho == 0.25
    assert ratio.decision == NOT_FORGOTTEN
    assert ks_calibrated_ratio(calibration, query, calibration).decision == FORGOTTEN


def test_zero_calibration_distance_is_refused():
    same = np.array([0.5, 0.6, 0.7])
    with pytest.raises(ValueError, match="cannot be calibrated"):
        ks_calibrated_ratio(np.array([0.1, 0.2, 0.3]), same, same.copy())


def _predictions(conf: np.ndarray) -> Predictions:
    """Binary predictions whose ground-truth confidence is ``conf`` (label 1)."""
    return Predictions(np.stack([1 - conf, conf], axis=1), np.ones(len(conf), dtype=int))


def test_reference_audit_result_fields():
    rng = np.random.default_rng(0)
    q, t, c = rng.uniform(0.9, 1, 30), rng.uniform(0.85, 1, 30), rng.uniform(0.3, 1, 30)
    reference = KSReference.from_predictions(_predictions(q), _predictions(c))
    result = reference.audit(_predictions(t))
    expected = scipy.stats.ks_2samp(q, t).statistic / scipy.stats.ks_2samp(q, c).statistic
    assert result.statistic == pytest.approx(expected)
    assert result.method == "ks" and result.statistic_name == "rho_KS"
    assert result.decision == (FORGOTTEN if expected >= 1 else NOT_FORGOTTEN)
    assert result.sizes["query"] == 30
    np.testing.assert_allclose(result.arrays["target_confidence"], t)


def test_reference_audit_mismatched_lengths():
    a = _predictions(np.full(5, 0.9))
    b = _predictions(np.full(6, 0.9))
    with pytest.raises(ValueError, match="same query samples"):
        KSReference.from_predictions(a, a).audit(b)


def test_metric_twin_accepts_index_one_hot_and_logits():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(25, 3))
    labels = rng.integers(0, 3, 25)
    probs = scipy.special.softmax(logits, axis=1)
    q, c = rng.uniform(0.5, 1, 25), rng.uniform(0, 1, 25)
    expected = ks_calibrated_ratio(probs[np.arange(25), labels], q, c).rho
    assert compute_ks_calibrated_ratio(probs, labels, q, c).rho == pytest.approx(expected)
    assert compute_ks_calibrated_ratio(probs, np.eye(3)[labels], q, c).rho == pytest.approx(
        expected
    )
    got = compute_ks_calibrated_ratio(logits, labels[:, None], q, c, from_logits=True).rho
    assert got == pytest.approx(expected)
    with pytest.raises(ValueError, match="from_logits"):
        compute_ks_calibrated_ratio(logits, labels, q, c)
    with pytest.raises(ValueError, match="labels"):
        compute_ks_calibrated_ratio(probs, labels + 3, q, c)
