"""Membership metrics against hand-worked probability vectors; input validation."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from monai_forget.scores import (
    MEMBERSHIP_METRICS,
    MODIFIED_ENTROPY_EPS,
    check_probabilities,
    confidence,
    correctness,
    entropy,
    membership_scores,
    modified_entropy,
)
from monai_forget.stats import best_balanced_threshold

# two samples, three classes; sample 0 is right (y=0), sample 1 is wrong (y=2, argmax 1)
P = np.array([[0.7, 0.2, 0.1], [0.0, 1.0, 0.0]])
Y = np.array([0, 2])


def _hand_entropy(row):
    return -sum(p * math.log(p) for p in row if p > 0)


def _hand_mentr(row, y):
    eps = 1e-30
    total = -(1 - row[y]) * math.log(max(row[y], eps))
    for i, p in enumerate(row):
        if i != y:
            total -= p * math.log(max(1 - p, eps))
    return total


def test_correctness_and_confidence_hand_worked():
    np.testing.assert_array_equal(correctness(P, Y), [1.0, 0.0])
    np.testing.assert_array_equal(confidence(P, Y), [0.7, 0.0])


def test_entropy_hand_worked():
    want0 = -(0.7 * math.log(0.7) + 0.2 * math.log(0.2) + 0.1 * math.log(0.1))
    assert want0 == pytest.approx(_hand_entropy(P[0]))
    np.testing.assert_allclose(entropy(P), [want0, 0.0], rtol=1e-14)  # 0 log 0 = 0
    np.testing.assert_allclose(entropy(np.full((1, 4), 0.25)), [math.log(4)])


def test_modified_entropy_hand_worked():
    want0 = -0.3 * math.log(0.7) - 0.2 * math.log(0.8) - 0.1 * math.log(0.9)
    # sample 1: p_y = 0 -> -(1-0) log(eps); other terms: -1*log(max(0, eps)) - 0
    want1 = -math.log(MODIFIED_ENTROPY_EPS) - 1.0 * math.log(MODIFIED_ENTROPY_EPS)
    np.testing.assert_allclose(modified_entropy(P, Y), [want0, want1], rtol=1e-14)
    assert want0 == pytest.approx(_hand_mentr(P[0], 0))
    # a perfect, correct prediction has Mentr exactly 0
    assert modified_entropy(np.array([[0.0, 1.0]]), [1])[0] == 0.0


def test_metrics_random_rows_match_plain_math():
    rng = np.random.default_rng(1)
    probs = rng.dirichlet(np.full(5, 0.3), size=20)
    labels = rng.integers(0, 5, size=20)
    np.testing.assert_allclose(entropy(probs), [_hand_entropy(r) for r in probs], rtol=1e-12)
    np.testing.assert_allclose(
        modified_entropy(probs, labels),
        [_hand_mentr(r, y) for r, y in zip(probs, labels, strict=True)],
        rtol=1e-12,
    )


def test_registry_and_orientation():
    assert list(MEMBERSHIP_METRICS) == ["correctness", "confidence", "entropy", "modified_entropy"]
    direction = {k: m.higher_is_member for k, m in MEMBERSHIP_METRICS.items()}
    assert direction == {
        "correctness": True,
        "confidence": True,
        "entropy": False,
        "modified_entropy": False,
    }
    with pytest.raises(dataclasses.FrozenInstanceError):
        MEMBERSHIP_METRICS["entropy"].higher_is_member = True  # type: ignore[misc]
    s = membership_scores(P, Y)
    np.testing.assert_array_equal(s["correctness"], correctness(P, Y))
    np.testing.assert_array_equal(s["confidence"], confidence(P, Y))
    np.testing.assert_array_equal(s["entropy"], -entropy(P))
    np.testing.assert_array_equal(s["modified_entropy"], -modified_entropy(P, Y))
    assert list(membership_scores(P, Y, metrics=("entropy",))) == ["entropy"]
    with pytest.raises(ValueError, match="unknown membership metric"):
        membership_scores(P, Y, metrics=("loss",))


def test_oriented_scores_rank_confident_members_higher():
    # members: confident and correct; non-members: uncertain -> every score separates them
    members = np.array([[0.95, 0.05], [0.05, 0.95]])
    nonmembers = np.array([[0.6, 0.4], [0.45, 0.55]])
    y = np.array([0, 1])
    sm, sn = membership_scores(members, y), membership_scores(nonmembers, y)
    for name in ("confidence", "entropy", "modified_entropy"):
        assert sm[name].min() > sn[name].max(), name
        assert best_balanced_threshold(sm[name], sn[name]).balanced_accuracy == 1.0


def test_check_probabilities_accepts_torch_and_returns_dtypes():
    p, y = check_probabilities(torch.tensor(P, dtype=torch.float32), torch.tensor(Y))
    assert p.dtype == np.float64 and p.shape == (2, 3)
    assert y is not None and y.dtype == np.int64
    assert check_probabilities(P)[1] is None
    np.testing.assert_array_equal(confidence(torch.tensor(P), torch.tensor(Y)), [0.7, 0.0])


def test_from_logits_stable_softmax():
    logits = np.array([[1000.0, 0.0, -1000.0], [1.0, 2.0, 3.0]])
    p, _ = check_probabilities(logits, from_logits=True)
    assert np.all(np.isfinite(p))
    np.testing.assert_allclose(p[0], [1.0, 0.0, 0.0])
    e = np.exp([1.0, 2.0, 3.0])
    np.testing.assert_allclose(p[1], e / e.sum())


@pytest.mark.parametrize(
    ("probs", "labels", "kwargs", "words"),
    [
        (np.array([0.5, 0.5]), None, {}, "must be 2-D"),
        (np.zeros((0, 3)), None, {}, "empty"),
        (np.array([[np.nan, 1.0]]), None, {}, "NaN or inf"),
        (np.array([[np.inf, 0.0]]), None, {}, "NaN or inf"),
        (np.array([[2.0, -1.0]]), None, {}, "outside \\[0, 1\\].*from_logits=True"),
        (np.array([[0.5, 0.4]]), None, {}, "sum to 1.*from_logits=True"),
        (P, None, {"num_classes": 4}, "num_classes=4"),
        (P, np.array([[0], [2]]), {}, "labels must be 1-D"),
        (P, np.array([0.0, 2.0]), {}, "labels must be integers"),
        (P, np.array([0, 1, 2]), {}, "length mismatch"),
        (P, np.array([0, 3]), {}, "outside the class range"),
        (P, np.array([-1, 0]), {}, "outside the class range"),
        (np.array([["a", "b"]]), None, {}, "numeric"),
    ],
)
def test_check_probabilities_bad_input(probs, labels, kwargs, words):
    with pytest.raises(ValueError, match=words):
        check_probabilities(probs, labels, **kwargs)


def test_row_sum_tolerance():
    check_probabilities(np.array([[0.5, 0.5 + 5e-5]]))  # within 1e-4: accepted
    with pytest.raises(ValueError, match="sum to 1"):
        check_probabilities(np.array([[0.5, 0.5 - 2e-4]]))


def test_label_metrics_require_labels():
    with pytest.raises(ValueError, match="labels are required"):
        confidence(P, None)
