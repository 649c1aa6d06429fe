"""Forsaken's math by hand-worked examples (Liu et al. 2020): Definition 2, Protocol 1,
the forgetting rate, the oracle and the baselines."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from monai_forget.data import LabelledImages, load_digits
from monai_forget.networks import MLP
from monai_forget.unlearning import (
    DummyGradientGenerator,
    MembershipOracle,
    apply_dummy_gradient,
    forcible_forgetting,
    forgetting_degree,
    forgetting_rate,
    forgetting_rate_from_counts,
    mean_logit_confidence,
    natural_forgetting,
    oracle_features,
    sgd_step,
    totally_forgotten,
    uniform_distance,
    uniform_vector,
)

# ----------------------------------------------------------------------------- forgetting rate


def test_forgetting_rate_reproduces_table_iii_arithmetic() -> None:
    # 85.54% of the eliminated samples called members before, 99% non-members after.
    rate = forgetting_rate_from_counts(8554, 1446, 100, 9900)
    assert rate.brr == pytest.approx(0.8554)
    assert rate.arr == pytest.approx(0.99)
    assert rate.fr == pytest.approx(0.846846)
    assert round(100 * rate.fr, 2) == 84.68
    assert np.isnan(rate.direct)  # counts alone do not follow samples


def test_forgetting_rate_from_calls_by_hand() -> None:
    before = np.array([True, True, True, False])
    after = np.array([False, True, False, False])
    rate = forgetting_rate(before, after)
    # T_b = 3, F_b = 1, T_a = 1, F_a = 3
    assert (rate.true_before, rate.false_before, rate.true_after, rate.false_after) == (3, 1, 1, 3)
    assert rate.brr == 0.75 and rate.arr == 0.75 and rate.fr == 0.5625
    # members before: samples 0, 1, 2; of those, 0 and 2 are non-members after.
    assert rate.direct == pytest.approx(2 / 3)
    assert "FR 56.25%" in rate.summary()


def test_forgetting_rate_refuses_bad_input() -> None:
    with pytest.raises(TypeError, match="boolean"):
        forgetting_rate(np.array([1, 0]), np.array([0, 0]))
    with pytest.raises(ValueError, match="same samples"):
        forgetting_rate(np.array([True]), np.array([True, False]))
    with pytest.raises(ValueError, match="at least one"):
        forgetting_rate_from_counts(0, 0, 0, 0)


# ----------------------------------------------------------------------------- Definition 2


def test_definition_2_uniform_is_totally_forgotten() -> None:
    probs = np.array([[0.5, 0.5], [0.6, 0.4], [1.0, 0.0]])
    np.testing.assert_allclose(uniform_vector(4), [0.25] * 4)
    # ||p - U||^2: 0; 0.1^2 + 0.1^2 = 0.02; 0.5^2 + 0.5^2 = 0.5 = (K-1)/K
    np.testing.assert_allclose(uniform_distance(probs), [0.0, 0.02, 0.5])
    np.testing.assert_allclose(forgetting_degree(probs), [1.0, 0.96, 0.0])
    np.testing.assert_array_equal(totally_forgotten(probs), [True, False, False])
    np.testing.assert_array_equal(totally_forgotten(probs, atol=0.1), [True, True, False])
    three = np.full((1, 3), 1 / 3)
    assert totally_forgotten(three)[0]
    with pytest.raises(ValueError, match="from_logits"):
        uniform_distance(np.array([[2.0, -1.0]]))


# ----------------------------------------------------------------------------- Protocol 1


def test_sgd_step_by_hand() -> None:
    params = {"w": torch.tensor([1.0, 2.0])}
    grad = {"w": torch.tensor([4.0, 8.0])}  # summed over n = 4 samples
    out = sgd_step(params, grad, lr=0.5, n=4)
    torch.testing.assert_close(out["w"], torch.tensor([0.5, 1.0]))  # w - 0.5/4 * g
    with pytest.raises(ValueError, match="shape"):
        sgd_step(params, {"w": torch.zeros(3)}, lr=0.5, n=4)
    with pytest.raises(ValueError, match="missing"):
        sgd_step(params, {"v": torch.zeros(2)}, lr=0.5, n=4)


def test_dummy_gradient_applied_as_sgd_equals_a_real_sgd_step() -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    x = torch.randn(5, 3)
    y = torch.tensor([0, 1, 1, 0, 1])
    # The summed per-sample gradient of the cross-entropy...
    loss_sum = torch.nn.functional.cross_entropy(model(x), y, reduction="sum")
    grads = torch.autograd.grad(loss_sum, list(model.parameters()))
    summed = {name: g for (name, _), g in zip(model.named_parameters(), grads, strict=True)}
    stepped = apply_dummy_gradient(model, summed, lr=0.3, n=5)
    # ...applied as Protocol 1 says equals torch's SGD on the mean loss.
    reference = torch.nn.Linear(3, 2)
    reference.load_state_dict(model.state_dict())
    opt = torch.optim.SGD(reference.parameters(), lr=0.3)
    torch.nn.functional.cross_entropy(reference(x), y).backward()
    opt.step()
    for (name, a), (_, b) in zip(
        stepped.named_parameters(), reference.named_parameters(), strict=True
    ):
        torch.testing.assert_close(a, b, msg=name)
    assert not torch.equal(stepped.weight, model.weight)  # the original is untouched


def _digits_model() -> tuple[torch.nn.Module, LabelledImages]:
    data = load_digits().subset(np.arange(120))
    torch.manual_seed(0)
    model = MLP((1, 8, 8), 10, hidden=(32,))
    opt = torch.optim.Adam(model.parameters(), 1e-2)
    x, y = torch.tensor(data.images), torch.tensor(data.labels)
    for _ in range(150):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return model.eval(), data


@pytest.mark.parametrize("optimizer", ["lbfgs", "adam"])
def test_generator_lowers_eq4_and_returns_the_summed_gradient(optimizer: str) -> None:
    model, data = _digits_model()
    elimination = data.subset(np.arange(30))
    generator = DummyGradientGenerator(
        lr=0.1,
        iterations=3,
        optimizer=optimizer,
        inner_steps=5,
        adam_lr=0.05,
        step_weight=0.01,
        drift_weight=0.01,
    )
    before = [p.detach().clone() for p in model.parameters()]
    result = generator.generate(model, elimination)
    assert len(result.history) == 4 and result.n == 30 and result.seconds > 0
    first, last = result.history[0], result.history[-1]
    assert first.step == 0 and first.drift == 0
    assert last.total < first.total
    assert last.distance < 0.8 * first.distance
    # The model is untouched; applying G once as SGD reaches the generator's final model.
    for p, q in zip(model.parameters(), before, strict=True):
        assert torch.equal(p, q)
    after = result.apply(model)
    with torch.no_grad():
        probs = torch.softmax(after(torch.tensor(elimination.images)), 1).numpy()
    assert uniform_distance(probs).mean() == pytest.approx(last.distance, rel=1e-4)
    with torch.no_grad():
        drift = sum(
            ((a - b) ** 2).sum()
            for a, b in zip(after.parameters(), model.parameters(), strict=True)
        )
    assert float(drift) == pytest.approx(last.drift, rel=1e-4)


def test_generator_refuses_bad_elimination_sets() -> None:
    model, data = _digits_model()
    generator = DummyGradientGenerator(iterations=1)
    with pytest.raises(ValueError, match="empty"):
        generator.generate(model, data.subset(np.array([], dtype=int)))
    unknown = LabelledImages(data.images[:3], np.array([0, 1, 12]), num_classes=13)
    with pytest.raises(ValueError, match=r"label 12 but the model knows only classes 0\.\.9"):
        generator.generate(model, unknown)
    with pytest.raises(ValueError, match="optimizer"):
        DummyGradientGenerator(optimizer="sgd")  # type: ignore[arg-type]


def _phi(model: torch.nn.Module, data: LabelledImages) -> np.ndarray:
    """LiRA's logit confidence ``log p_y - log sum_{j != y} p_j`` written out with scipy
    from the logits (independent of the package's ``logit_confidence``)."""
    from scipy.special import log_softmax, logsumexp

    with torch.no_grad():
        logits = model(torch.tensor(data.images)).double().numpy()
    log_p = log_softmax(logits, axis=1)
    rows = np.arange(len(log_p))
    others = log_p.copy()
    others[rows, data.labels] = -np.inf
    return log_p[rows, data.labels] - logsumexp(others, axis=1)


def test_mean_logit_confidence_matches_the_probability_formula() -> None:
    model, data = _digits_model()
    held_out = load_digits().subset(np.arange(200, 260))
    assert mean_logit_confidence(model, held_out) == pytest.approx(
        _phi(model, held_out).mean(), rel=1e-6
    )
    # Training samples are more confident than held-out ones (the target is below).
    assert mean_logit_confidence(model, data) > mean_logit_confidence(model, held_out)


def test_generator_stops_on_the_non_member_confidence() -> None:
    model, data = _digits_model()
    elimination = data.subset(np.arange(30))
    settings = dict(lr=0.1, iterations=8, step_weight=0.0, drift_weight=0.01)
    paper = DummyGradientGenerator(**settings).generate(model, elimination)
    start, end = _phi(model, elimination).mean(), _phi(paper.apply(model), elimination).mean()
    target = start - 0.3 * (start - end)  # reached within the paper's iterations
    stopped = DummyGradientGenerator(**settings, target_confidence=target).generate(
        model, elimination
    )
    assert stopped.stopped_at is not None and 1 <= stopped.stopped_at < 8
    assert len(stopped.history) == stopped.stopped_at + 1
    # The last step is scaled back so that the final model lands on the target, from below.
    final = _phi(stopped.apply(model), elimination).mean()
    assert final <= target + 1e-6
    assert final == pytest.approx(target, abs=1e-3 * abs(start - end))
    assert stopped.confidence[0] == pytest.approx(start, rel=1e-6)
    assert all(c > target for c in stopped.confidence[:-1])
    # Already at or below the target: nothing to eliminate, a zero gradient.
    none = DummyGradientGenerator(**settings, target_confidence=start + 1.0).generate(
        model, elimination
    )
    assert none.stopped_at == 0 and all(float(g.abs().max()) == 0 for g in none.gradient.values())
    # Never reached: the paper's E iterations, the same gradient as without a target.
    never = DummyGradientGenerator(**settings, target_confidence=end - 100.0).generate(
        model, elimination
    )
    assert never.stopped_at is None and len(never.history) == 9
    for k, g in paper.gradient.items():
        torch.testing.assert_close(never.gradient[k], g)
    with pytest.raises(ValueError, match="finite"):
        DummyGradientGenerator(target_confidence=float("nan"))


# ----------------------------------------------------------------------------- oracle


def test_oracle_features_are_sorted_confidences() -> None:
    probs = np.array([[0.1, 0.7, 0.2], [0.3, 0.3, 0.4]])
    np.testing.assert_allclose(oracle_features(probs), [[0.7, 0.2, 0.1], [0.4, 0.3, 0.3]])
    np.testing.assert_allclose(oracle_features(probs, [0, 2])[:, -1], [0.1, 0.4])


@pytest.mark.parametrize(
    ("classifier", "kind"),
    [("gradient_boosting", "GradientBoostingClassifier"), ("xgboost", "XGBClassifier")],
)
def test_oracle_separates_confident_members_from_uncertain_nonmembers(classifier, kind) -> None:
    rng = np.random.default_rng(0)

    def rows(top: float, n: int) -> np.ndarray:
        p = np.full((n, 3), (1 - top) / 2)
        p[:, 0] = top
        return p

    members = rows(0.97, 50) + rng.uniform(-0.01, 0.01, (50, 1)) * np.array([1, -0.5, -0.5])
    nonmembers = rows(0.6, 50) + rng.uniform(-0.2, 0.2, (50, 1)) * np.array([1, -0.5, -0.5])
    oracle = MembershipOracle(classifier=classifier).fit_predictions(
        members, np.zeros(50, int), nonmembers, np.zeros(50, int)
    )
    assert type(oracle.classifier_).__name__ == kind  # the paper's XGBoost when asked
    assert oracle.train_accuracy_ > 0.95
    calls = oracle.is_member_probs(np.vstack([rows(0.99, 3), np.full((3, 3), 1 / 3)]))
    np.testing.assert_array_equal(calls, [True, True, True, False, False, False])
    with pytest.raises(ValueError, match="not fitted"):
        MembershipOracle().is_member_probs(members)
    with pytest.raises(ValueError, match=r"classifier must be one of \('gradient_boosting', "):
        MembershipOracle(classifier="xgb")


# ----------------------------------------------------------------------------- baselines


def test_forcible_subtracts_the_accumulated_contributions() -> None:
    model = torch.nn.Linear(2, 2)
    with torch.no_grad():
        model.weight.fill_(1.0)
        model.bias.fill_(0.0)
    contributions = [
        {"weight": torch.full((2, 2), 0.25), "bias": torch.tensor([0.1, 0.0])},
        {"weight": torch.full((2, 2), 0.5), "bias": torch.tensor([0.0, -0.2])},
    ]
    out = forcible_forgetting(model, contributions)
    torch.testing.assert_close(out.weight, torch.full((2, 2), 0.25))
    torch.testing.assert_close(out.bias, torch.tensor([-0.1, 0.2]))
    torch.testing.assert_close(model.weight, torch.ones(2, 2))  # untouched
    with pytest.raises(ValueError, match="changed shape"):
        forcible_forgetting(model, [{"weight": torch.zeros(3, 2), "bias": torch.zeros(2)}])


def test_natural_forgetting_trains_a_copy() -> None:
    from monai_forget.shadow import SupervisedRecipe

    model, data = _digits_model()
    recipe = SupervisedRecipe(
        "mlp", {"in_shape": (1, 8, 8), "num_classes": 10, "hidden": (32,)}, steps=3, batch_size=8
    )
    out = natural_forgetting(model, data, recipe, seed=1)
    assert not torch.equal(out.net[1].weight, model.net[1].weight)
    with pytest.raises(ValueError, match="remaining data"):
        natural_forgetting(model, data.subset(np.array([], dtype=int)), recipe)
