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
    EQUIVALENT,
    INDISTINGUISHABLE,
    NOT_SHOWN_EQUIVALENT,
    OVERFORGETS,
    REMEMBERS,
    compare_with_retraining,
    equivalence_to_retraining,
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


def _tost(model_mean: float, retrained_means: np.ndarray, margin: float) -> float:
    """Schuirmann's two one-sided tests by scipy: the larger one-sided p that retraining's
    mean lies below ``model_mean - margin`` or above ``model_mean + margin``."""
    low = scipy.stats.ttest_1samp(retrained_means, model_mean - margin, alternative="greater")
    high = scipy.stats.ttest_1samp(retrained_means, model_mean + margin, alternative="less")
    return max(low.pvalue, high.pvalue)


@pytest.mark.parametrize("seed", range(6))
def test_equivalence_is_schuirmanns_two_one_sided_t_tests(seed) -> None:
    """Equivalent exactly when both of scipy's one-sided t tests reject at alpha, over
    draws that land on both sides of the margin and inside it."""
    rng = np.random.default_rng(seed)
    retrained = rng.normal(2.0, 0.5, (8, 40)) + rng.normal(0, 0.3, (8, 1))
    means = retrained.mean(axis=1)
    margin = 0.6
    for shift in np.linspace(-1.5, 1.5, 31):
        model = rng.normal(2.0 + shift, 0.5, 40)
        found = equivalence_to_retraining(model, retrained, margin, alpha=0.05)
        expected = _tost(model.mean(), means, margin) < 0.05
        assert (found.decision == EQUIVALENT) == expected, (shift, found.summary())
        assert found.difference == pytest.approx(model.mean() - means.mean())


def _reference_p(model_reference: np.ndarray, reference: np.ndarray) -> float:
    """Student's predictive test of one mean against k (scipy's t distribution)."""
    means, k = reference.mean(axis=1), len(reference)
    t = (model_reference.mean() - means.mean()) / (means.std(ddof=1) * math.sqrt(1 + 1 / k))
    return 2 * scipy.stats.t.sf(abs(t), df=k - 1)


def test_equivalence_on_the_advantage_over_reference_data() -> None:
    """With reference confidences, T is the advantage over them: a seed-to-seed shift of
    every confidence cancels, and the test is scipy's TOST on the differences; a model
    whose confidence moved everywhere is never called equivalent."""
    rng = np.random.default_rng(7)
    shift = rng.normal(0, 2.0, (6, 1))  # retrained models differ in overall confidence
    retrained = rng.normal(5.0, 0.3, (6, 50)) + shift
    reference = rng.normal(4.8, 0.3, (6, 80)) + shift
    advantages = retrained.mean(axis=1) - reference.mean(axis=1)
    own = float(shift.mean()) + 0.5  # the judged model's overall shift, like retraining's
    for model_shift in (-0.6, -0.1, 0.0, 0.15, 0.6):
        model = rng.normal(5.0 + model_shift, 0.3, 50) + own
        model_reference = rng.normal(4.8, 0.3, 80) + own
        found = equivalence_to_retraining(
            model, retrained, 0.3, model_reference=model_reference, retrained_reference=reference
        )
        advantage = model.mean() - model_reference.mean()
        assert found.difference == pytest.approx(advantage - advantages.mean())
        assert found.reference_pvalue == pytest.approx(_reference_p(model_reference, reference))
        expected = _tost(advantage, advantages, 0.3) < 0.05
        assert (found.decision == EQUIVALENT) == expected, (model_shift, found.summary())
    # the same advantage on a model whose confidence fell everywhere (uniform outputs)
    flat = rng.normal(5.0, 0.3, 50) - 30.0
    flat_reference = rng.normal(4.8, 0.3, 80) - 30.0
    collapsed = equivalence_to_retraining(
        flat, retrained, 0.3, model_reference=flat_reference, retrained_reference=reference
    )
    assert collapsed.interval[0] > -0.3 and collapsed.interval[1] < 0.3
    assert collapsed.changed_elsewhere and collapsed.decision == NOT_SHOWN_EQUIVALENT
    assert "differs from retraining's" in collapsed.summary()
    same = rng.normal(5.0, 0.3, 50) + own
    same_reference = rng.normal(4.8, 0.3, 80) + own
    assert (
        equivalence_to_retraining(
            same, retrained, 0.3, model_reference=same_reference, retrained_reference=reference
        ).decision
        == EQUIVALENT
    )
    # without the references the shifts swamp the test: nothing is shown equivalent
    assert equivalence_to_retraining(same, retrained, 0.3).decision == NOT_SHOWN_EQUIVALENT
    with pytest.raises(ValueError, match="both"):
        equivalence_to_retraining(same, retrained, 0.3, model_reference=same_reference)
    with pytest.raises(ValueError, match="do not match"):
        equivalence_to_retraining(
            same, retrained, 0.3, model_reference=same_reference,
            retrained_reference=reference[:4],
        )  # fmt: skip


@pytest.mark.parametrize("seed", range(4))
def test_equivalence_counts_the_retrained_models_it_passes(seed) -> None:
    """Each retrained model judged against the other k - 1 by scipy's TOST on the
    advantages and Student's predictive test on the reference data: the count of those
    called equivalent is what the result reports (the test's pass rate on exact
    retraining), at margins where it passes all, some and none."""
    rng = np.random.default_rng(seed)
    k = 7
    shift = rng.normal(0, 1.0, (k, 1))
    retrained = rng.normal(3.0, 0.3, (k, 30)) + shift + rng.normal(0, 0.1, (k, 1))
    reference = rng.normal(2.5, 0.3, (k, 60)) + shift
    advantages = retrained.mean(axis=1) - reference.mean(axis=1)
    counts = []
    for margin in (0.01, 0.1, 0.2, 0.4, 5.0):
        expected = sum(
            _tost(advantages[i], np.delete(advantages, i), margin) < 0.05
            and _reference_p(reference[i], np.delete(reference, i, axis=0)) > 0.05
            for i in range(k)
        )
        found = equivalence_to_retraining(
            retrained[0], retrained, margin, model_reference=reference[0],
            retrained_reference=reference,
        )  # fmt: skip
        assert found.retraining_passes == expected, margin
        assert f"passes {expected} of the {k} retrained" in found.summary()
        counts.append(expected)
    assert counts[0] == 0 and counts[-1] >= k - 1, counts  # none at a tiny margin, ~all at a wide
    # three retrained models leave two references per judgement: no count
    assert equivalence_to_retraining(retrained[0], retrained[:3], 5.0).retraining_passes is None


def test_equivalence_by_hand_and_its_refusals() -> None:
    # T_k = 0, 1, 2: mean 1, sd 1, k = 3; half-width t_{0.95, 2} / sqrt(3) = 1.6887
    retrained = np.repeat(np.array([[0.0], [1.0], [2.0]]), 4, axis=1)
    half = scipy.stats.t.ppf(0.95, 2) / math.sqrt(3)
    inside = equivalence_to_retraining(np.full(4, 1.2), retrained, margin=half + 0.21)
    assert inside.decision == EQUIVALENT
    assert inside.interval == pytest.approx((0.2 - half, 0.2 + half))
    outside = equivalence_to_retraining(np.full(4, 1.2), retrained, margin=half + 0.19)
    assert outside.decision == NOT_SHOWN_EQUIVALENT  # the interval's top, 0.2 + half, is out
    # a model far from retraining is never equivalent, whichever side it is on
    for far in (-5.0, 7.0):
        assert equivalence_to_retraining(np.full(4, far), retrained, 3.0).decision != EQUIVALENT
    with pytest.raises(ValueError, match="at least 3"):
        equivalence_to_retraining(np.zeros(4), np.zeros((2, 4)), 1.0)
    with pytest.raises(ValueError, match="margin"):
        equivalence_to_retraining(np.zeros(4), retrained, 0.0)
    with pytest.raises(ValueError, match="alpha"):
        equivalence_to_retraining(np.zeros(4), retrained, 1.0, alpha=0.5)


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
