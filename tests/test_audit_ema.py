"""EMA (Huang, Li & Li 2021) Step 1 thresholds vs brute force, Step 2 vs scipy."""

import numpy as np
import pytest
import scipy.special
import scipy.stats

from monai_forget.audit import (
    FORGOTTEN,
    EMAAuditor,
    EMAThresholds,
    ema_membership,
    ema_pvalue,
    fit_ema_thresholds,
)
from monai_forget.inference import Predictions
from monai_forget.metrics import compute_ema_pvalue
from monai_forget.stats import best_balanced_threshold_exhaustive

K = 3
ALL_METRICS = ("correctness", "confidence", "entropy", "modified_entropy")


def _random_outputs(rng, n, sharpness):
    logits = rng.normal(size=(n, K)) * sharpness
    labels = rng.integers(0, K, n)
    logits[np.arange(n), labels] += sharpness  # members get sharper, more correct outputs
    return scipy.special.softmax(logits, axis=1), labels


def _brute_force_score(metric, probs, labels):
    """Membership scores written out independently (higher = more member-like)."""
    p_y = probs[np.arange(len(labels)), labels]
    if metric == "confidence":
        return p_y
    if metric == "entropy":
        return np.array([sum(p * np.log(p) for p in row if p > 0) for row in probs])
    if metric == "modified_entropy":
        out = []
        for row, y in zip(probs, labels, strict=True):
            value = -(1 - row[y]) * np.log(max(row[y], 1e-30))
            value -= sum(row[i] * np.log(max(1 - row[i], 1e-30)) for i in range(K) if i != y)
            out.append(-value)
        return np.array(out)
    raise AssertionError(metric)


@pytest.mark.parametrize("threshold_by", ["label", "prediction"])
def test_thresholds_equal_exhaustive_search_per_class(threshold_by):
    rng = np.random.default_rng(7)
    mp, ml = _random_outputs(rng, 120, 3.0)
    np_, nl = _random_outputs(rng, 90, 1.0)
    fitted = fit_ema_thresholds(mp, ml, np_, nl, threshold_by=threshold_by, metrics=ALL_METRICS)
    m_cls = ml if threshold_by == "label" else mp.argmax(1)
    n_cls = nl if threshold_by == "label" else np_.argmax(1)
    for metric in ("confidence", "entropy", "modified_entropy"):
        ms, ns = _brute_force_score(metric, mp, ml), _brute_force_score(metric, np_, nl)
        for c in range(K):
            best = best_balanced_threshold_exhaustive(ms[m_cls == c], ns[n_cls == c])
            assert fitted.thresholds[metric][c] == pytest.approx(best.threshold, rel=1e-12)
            assert fitted.balanced_accuracy[metric][c] == pytest.approx(best.balanced_accuracy)
    # Correctness is Song & Mittal's fixed rule: member iff correctly classified.
    np.testing.assert_array_equal(fitted.thresholds["correctness"], np.ones(K))


def test_class_without_calibration_members_falls_back_to_pooled_threshold():
    rng = np.random.default_rng(2)
    mp, ml = _random_outputs(rng, 60, 3.0)
    np_, nl = _random_outputs(rng, 60, 1.0)
    keep = ml != 2
    fitted = fit_ema_thresholds(mp[keep], ml[keep], np_, nl)
    assert fitted.fallback_classes == (2,)
    pooled = best_balanced_threshold_exhaustive(
        _brute_force_score("confidence", mp[keep], ml[keep]),
        _brute_force_score("confidence", np_, nl),
    )
    assert fitted.thresholds["confidence"][2] == pytest.approx(pooled.threshold)


def test_membership_hand_worked():
    thresholds = EMAThresholds(
        thresholds={"correctness": np.ones(2), "confidence": np.array([0.9, 0.6])},
        balanced_accuracy={"correctness": np.ones(2), "confidence": np.ones(2)},
    )
    probs = np.array([[0.95, 0.05], [0.7, 0.3], [0.45, 0.55], [0.2, 0.8]])
    labels = np.array([0, 0, 1, 0])
    # sample 0: correct -> 1; sample 1: correct -> 1; sample 2: p_y=0.55 < 0.6 but correct -> 1;
    # sample 3: wrong and p_y = 0.2 < 0.9 -> 0
    np.testing.assert_array_equal(ema_membership(probs, labels, thresholds), [1, 1, 1, 0])
    only_conf = EMAThresholds(
        thresholds={"confidence": np.array([0.9, 0.6])},
        balanced_accuracy={"confidence": np.ones(2)},
    )
    np.testing.assert_array_equal(ema_membership(probs, labels, only_conf), [1, 0, 0, 0])


def test_pvalue_matches_scipy_and_degenerate_case():
    m = np.array([1, 1, 0, 1, 1, 1, 0, 1, 1, 1], dtype=float)
    ones = np.ones_like(m)
    welch = scipy.stats.ttest_ind(m, ones, equal_var=False)
    student = scipy.stats.ttest_ind(m, ones, equal_var=True)
    assert ema_pvalue(m, "welch").pvalue == pytest.approx(welch.pvalue)
    assert ema_pvalue(m, "student").pvalue == pytest.approx(student.pvalue)
    assert ema_pvalue(ones, "welch").pvalue == 1.0
    assert ema_pvalue(np.zeros(10), "welch").pvalue == 0.0
    with pytest.raises(ValueError, match="welch"):
        ema_pvalue(m, "z-test")


def test_thresholds_round_trip_and_metric_twin():
    rng = np.random.default_rng(5)
    mp, ml = _random_outputs(rng, 80, 3.0)
    np_, nl = _random_outputs(rng, 80, 1.0)
    fitted = fit_ema_thresholds(mp, ml, np_, nl)
    again = EMAThresholds.from_dict(fitted.to_dict())
    qp, ql = _random_outputs(rng, 40, 2.0)
    expected = ema_pvalue(ema_membership(qp, ql, fitted)).pvalue
    assert compute_ema_pvalue(qp, ql, again) == pytest.approx(expected)
    assert compute_ema_pvalue(np.log(qp), ql, again, from_logits=True) == pytest.approx(expected)


def test_reference_audit_decisions():
    rng = np.random.default_rng(11)
    mp, ml = _random_outputs(rng, 200, 4.0)
    np_, nl = _random_outputs(rng, 200, 0.5)
    auditor = EMAAuditor(alpha=0.1)
    members, nonmembers = Predictions(mp, ml), Predictions(np_, nl)
    qm = Predictions(*_random_outputs(rng, 100, 4.0))
    qn = Predictions(*_random_outputs(rng, 100, 0.5))
    reference = auditor.reference_from_predictions(members, nonmembers)
    remembered = reference.audit(qm)
    forgotten = reference.audit(qn)
    assert forgotten.decision == FORGOTTEN and forgotten.statistic <= 0.1
    assert remembered.details["membership_rate"] > forgotten.details["membership_rate"]
    assert remembered.statistic > forgotten.statistic
    # Ground truth: the remembered query is made of members, so "not forgotten". EMA as
    # the paper defines it calls it "forgotten": 96 % of its samples pass the thresholds,
    # and Welch's test of 100 values against all-ones rejects at rho_EMA 0.045 <= 0.1
    # (docs/ema_auditor.md). Pinned as measured: the published rule stays as published.
    assert remembered.details["membership_rate"] == pytest.approx(0.96)
    assert remembered.statistic == pytest.approx(0.0449, abs=0.001)
    assert remembered.decision == FORGOTTEN  # wrong: these are members


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"alpha": 0.0}, "alpha"),
        ({"member_fraction": 1.0}, "member_fraction"),
        ({"calibration_outputs": "both"}, "calibration_outputs"),
    ],
)
def test_bad_options(kwargs, message):
    with pytest.raises(ValueError, match=message):
        EMAAuditor(**kwargs)


def test_unknown_metric_refused():
    rng = np.random.default_rng(0)
    p, y = _random_outputs(rng, 10, 1.0)
    with pytest.raises(ValueError, match="subset"):
        fit_ema_thresholds(p, y, p, y, metrics=("loss",))
