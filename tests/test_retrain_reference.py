"""The retrain-referenced evaluation of a withdrawal
(``monai_forget.unlearning.retrain_reference``): hand-worked and scipy checks of the
statistics, then real FedAvg models on scikit-learn's digits."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from monai_forget.data import load_digits
from monai_forget.fl.spec import FederatedConfig
from monai_forget.unlearning.baselines import fedavg
from monai_forget.unlearning.retrain_reference import (
    INDISTINGUISHABLE,
    OVERFORGETS,
    REMEMBERS,
    compare_with_retraining,
    retrained_models,
)


def test_set_level_test_is_students_test_of_one_draw_against_k() -> None:
    """The predictive t test of T_u against T_1..T_k is Student's two-sample t test of a
    sample of one against the k retrained means (pooled variance, k - 1 df)."""
    rng = np.random.default_rng(0)
    retrained = rng.normal(0.0, 1.0, (5, 40))
    for shift in (0.0, 0.3, -0.6, 2.0):
        model = rng.normal(shift, 1.0, 40)
        found = compare_with_retraining(model, retrained)
        means = retrained.mean(axis=1)
        expected = scipy.stats.ttest_ind([model.mean()], means, equal_var=True)
        assert found.t == pytest.approx(expected.statistic)
        assert found.pvalue == pytest.approx(expected.pvalue)
        assert found.statistic == pytest.approx(model.mean() - means.mean())


def test_decisions_by_hand() -> None:
    """Retrained means 0, 1, 2 (mean 1, sd 1): a model at 1 is one more draw; far above is
    remembering, far below over-forgetting; the boundary p = alpha is distinguishable."""
    retrained = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]])
    same = compare_with_retraining(np.array([1.0, 1.0]), retrained)
    assert same.decision == INDISTINGUISHABLE and same.pvalue == pytest.approx(1.0)
    up = compare_with_retraining(np.array([12.0, 12.0]), retrained)
    assert up.decision == REMEMBERS
    # t = 11 / sqrt(1 + 1/3), 2 df
    assert up.t == pytest.approx(11 / math.sqrt(4 / 3))
    assert up.pvalue == pytest.approx(2 * scipy.stats.t.sf(11 / math.sqrt(4 / 3), 2))
    assert compare_with_retraining(np.array([-10.0, -10.0]), retrained).decision == OVERFORGETS
    t_crit = scipy.stats.t.isf(0.025, 2) * math.sqrt(4 / 3)
    edge = compare_with_retraining(np.array([1 + t_crit, 1 + t_crit]), retrained)
    assert edge.pvalue == pytest.approx(0.05)
    at_alpha = compare_with_retraining(
        np.array([1 + t_crit, 1 + t_crit]), retrained, alpha=edge.pvalue
    )
    assert at_alpha.decision == REMEMBERS


def test_per_example_share() -> None:
    """Per example: z = (phi_u - mean) / (sd sqrt(1 + 1/k)) against t with k - 1 df."""
    retrained = np.array([[0.0, 0.0, 0.0, 5.0], [1.0, 1.0, 2.0, 5.0], [2.0, 2.0, 4.0, 5.0]])
    model = np.array([1.0, 30.0, -40.0, 5.0])  # inside, far above, far below, no spread
    found = compare_with_retraining(model, retrained)
    assert found.flagged_share == pytest.approx(2 / 4)
    assert found.examples == 4


def test_refuses_too_few_retrained_models_and_mismatched_outputs() -> None:
    with pytest.raises(ValueError, match="at least 3"):
        compare_with_retraining(np.zeros(3), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="3 model outputs for 4"):
        compare_with_retraining(np.zeros(3), np.zeros((3, 4)))
    with pytest.raises(ValueError, match="withdrawn data"):
        compare_with_retraining(np.zeros(3), [object()])


def test_fedavg_models_on_digits() -> None:
    """k = 5 FedAvg models retrained without provider a: the model trained with a is told
    apart (it remembers a); one more retraining with a new seed is not; the retrained
    models never saw a and the caller's clients are left as they were."""
    import torch

    digits = load_digits()
    order = np.random.default_rng(0).permutation(len(digits))
    clients = {
        "a": digits.subset(order[:40]),
        "b": digits.subset(order[40:240]),
        "c": digits.subset(order[240:440]),
    }
    config = FederatedConfig(
        network="mlp",
        network_args={"in_shape": list(digits.image_shape), "num_classes": 10, "hidden": [64]},
        rounds=4,
        local_steps=40,
        batch_size=32,
        learning_rate=1e-3,
    )
    sizes = {k: len(v) for k, v in clients.items()}
    retrained = retrained_models(clients, "a", config, k=5, seed=100)
    assert {k: len(v) for k, v in clients.items()} == sizes
    recipe = config.recipe()

    def trained(parts, seed):
        torch.manual_seed(seed)
        return fedavg(recipe.build(), parts, recipe, config.rounds, seed=seed, device="cpu").eval()

    with_a = trained(list(clients.values()), 7)
    without_a = trained([clients["b"], clients["c"]], 7)
    remembered = compare_with_retraining(with_a, retrained, clients["a"])
    fresh = compare_with_retraining(without_a, retrained, clients["a"])
    assert remembered.decision == REMEMBERS, remembered.summary()
    assert fresh.decision == INDISTINGUISHABLE, fresh.summary()
    assert remembered.statistic > fresh.statistic
