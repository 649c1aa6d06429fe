"""The audit handlers inside a real MONAI ``SupervisedEvaluator``.

Reference outputs are computed beforehand (``KSAuditor.fit_reference``,
``EMAAuditor.fit_reference``); the evaluator then runs only the target over D_Q. The values
the handlers put in ``engine.state.metrics`` must equal the offline computations
(``KSReference.audit``, ``ks_calibrated_ratio``, ``ema_pvalue``, and the EMA auditor's
own reference's ``audit``) on the very outputs the evaluator produced.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import scipy.special
import torch
from ignite.engine import Events
from monai.engines import SupervisedEvaluator
from monai.handlers.utils import from_engine
from monai.metrics import Cumulative
from monai.transforms import Activationsd

from monai_forget.audit import (
    EMAAuditor,
    EMAReference,
    EMAThresholds,
    KSAuditor,
    KSReference,
    ema_membership,
    ema_pvalue,
    ks_calibrated_ratio,
)
from monai_forget.data import LabelledImages, concat, load_digits
from monai_forget.handlers import EMAPValue, KSCalibratedRatio
from monai_forget.inference import Predictions, predict
from monai_forget.metrics import (
    EMAPValueMetric,
    KSCalibratedRatioMetric,
    compute_ema_pvalue,
    compute_ks_calibrated_ratio,
)
from monai_forget.scores import confidence
from monai_forget.shadow import ShadowTrainer, SupervisedRecipe

# A deliberately small design so the module runs in seconds; it still memorises.
RECIPE = SupervisedRecipe(
    network="mlp",
    network_args={"in_shape": (1, 8, 8), "num_classes": 10, "hidden": (64,)},
    steps=200,
    batch_size=32,
    learning_rate=1e-3,
)
AUDIT_SEED = 0
TARGET_SEED = 1
BATCH = 64  # 200 query samples: three full batches and a partial one


@dataclass
class Setup:
    """A trained target, D_Q, D_C and the auditors' reference outputs."""

    target: torch.nn.Module
    query: LabelledImages
    calibration: LabelledImages
    ks: KSAuditor
    ema: EMAAuditor
    query_confidence: np.ndarray
    calibration_confidence: np.ndarray
    thresholds: EMAThresholds
    ks_reference: KSReference  # as fit_reference returns them: with D_Q's content hashes
    ema_reference: EMAReference


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny models run fastest single-threaded, and never stall on a busy machine."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> Setup:
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    cache = tmp_path_factory.mktemp("handlers_cache")
    calibration, providers = load_digits().split(0.4, seed=0)
    query, other = providers.split(200 / len(providers), seed=0)
    target = ShadowTrainer(RECIPE, cache_dir=cache).train(concat(query, other), seed=TARGET_SEED)
    ks = KSAuditor(recipe=RECIPE, seed=AUDIT_SEED, cache_dir=cache)
    ema = EMAAuditor(recipe=RECIPE, seed=AUDIT_SEED, cache_dir=cache)
    ks_reference = ks.fit_reference(query, calibration)
    query_conf, calibration_conf = (
        ks_reference.query_confidence,
        ks_reference.calibration_confidence,
    )
    ema_reference = ema.fit_reference(query, calibration)
    torch.set_num_threads(previous)
    return Setup(
        target, query, calibration, ks, ema, query_conf, calibration_conf,
        ema_reference.thresholds, ks_reference, ema_reference,
    )  # fmt: skip


def _run(setup: Setup, *, softmax_postprocessing: bool) -> tuple[dict, np.ndarray, np.ndarray]:
    """Evaluate the target over D_Q with both handlers; return metrics and the outputs seen."""
    from_logits = not softmax_postprocessing
    evaluator = SupervisedEvaluator(
        device=torch.device("cpu"),
        val_data_loader=torch.utils.data.DataLoader(setup.query.to_dataset(), batch_size=BATCH),
        network=setup.target,
        postprocessing=Activationsd(keys="pred", softmax=True) if softmax_postprocessing else None,
        key_val_metric={"rho_KS": KSCalibratedRatio(setup.ks_reference, from_logits=from_logits)},
        additional_metrics={"rho_EMA": EMAPValue(setup.ema_reference, from_logits=from_logits)},
    )
    seen_pred: list[np.ndarray] = []
    seen_label: list[np.ndarray] = []

    @evaluator.on(Events.ITERATION_COMPLETED)
    def _capture(engine) -> None:  # runs after decollation and postprocessing
        pred, label = from_engine(["pred", "label"])(engine.state.output)
        seen_pred.extend(p.detach().cpu().numpy() for p in pred)
        seen_label.extend(int(y) for y in label)

    evaluator.run()
    return dict(evaluator.state.metrics), np.stack(seen_pred), np.asarray(seen_label)


def _shadow_predictions(setup: Setup) -> tuple[Predictions, Predictions, Predictions, Predictions]:
    """The shadow models' outputs, rebuilt through ShadowTrainer + predict (same design/seed).

    Returns (query shadow on D_Q, calibration shadow on D_Q, EMA reference on its
    calibration members, EMA reference on its non-members).
    """
    trainer = ShadowTrainer(RECIPE, cache_dir=setup.ks.cache_dir)
    q = predict(trainer.train(setup.query, seed=AUDIT_SEED), setup.query)
    c = predict(trainer.train(setup.calibration, seed=AUDIT_SEED), setup.query)
    members, nonmembers = setup.calibration.split(setup.ema.member_fraction, seed=AUDIT_SEED)
    reference = trainer.train(members, seed=AUDIT_SEED)
    return q, c, predict(reference, members), predict(reference, nonmembers)


def _check_against_offline(setup: Setup, metrics: dict, probs: np.ndarray, labels: np.ndarray):
    """Every handler value equals the offline computations on the same outputs."""
    np.testing.assert_array_equal(labels, setup.query.labels)
    q, c, members, nonmembers = _shadow_predictions(setup)
    np.testing.assert_allclose(q.confidence, setup.query_confidence, rtol=0, atol=0)
    np.testing.assert_allclose(c.confidence, setup.calibration_confidence, rtol=0, atol=0)
    target = Predictions(probs, labels)

    ks_offline = KSReference.from_predictions(q, c).audit(target)
    ratio = ks_calibrated_ratio(
        confidence(probs, labels), setup.query_confidence, setup.calibration_confidence
    )
    assert metrics["rho_KS"] == pytest.approx(ks_offline.statistic, rel=1e-12, abs=0)
    assert metrics["rho_KS"] == pytest.approx(ratio.rho, rel=1e-12, abs=0)

    pvalue = ema_pvalue(ema_membership(probs, labels, setup.thresholds), setup.ema.test).pvalue
    ema_offline = setup.ema.reference_from_predictions(members, nonmembers).audit(target)
    assert metrics["rho_EMA"] == pytest.approx(pvalue, rel=1e-12, abs=1e-300)
    assert metrics["rho_EMA"] == pytest.approx(ema_offline.statistic, rel=1e-12, abs=1e-300)
    # The evaluator really ran the target on D_Q: same outputs as the inference module.
    np.testing.assert_allclose(probs, predict(setup.target, setup.query).probs, atol=1e-6)


def test_handlers_with_logits_match_offline_audit(setup: Setup) -> None:
    metrics, logits, labels = _run(setup, softmax_postprocessing=False)
    assert logits.shape == (len(setup.query), 10)
    assert np.abs(logits.sum(axis=1) - 1).max() > 1e-2  # really logits, not probabilities
    probs = scipy.special.softmax(logits.astype(np.float64), axis=1)
    _check_against_offline(setup, metrics, probs, labels)


def test_handlers_after_softmax_postprocessing_match_offline_audit(setup: Setup) -> None:
    metrics, probs, labels = _run(setup, softmax_postprocessing=True)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-5)
    _check_against_offline(setup, metrics, probs.astype(np.float64), labels)


def test_handlers_without_decollation_give_the_same_values(setup: Setup) -> None:
    """Batch tensors (``decollate=False``) and per-sample lists give identical metrics."""
    decollated, _, _ = _run(setup, softmax_postprocessing=False)
    evaluator = SupervisedEvaluator(
        device=torch.device("cpu"),
        val_data_loader=torch.utils.data.DataLoader(setup.query.to_dataset(), batch_size=BATCH),
        network=setup.target,
        decollate=False,
        key_val_metric={"rho_KS": KSCalibratedRatio(setup.ks_reference, from_logits=True)},
        additional_metrics={"rho_EMA": EMAPValue(setup.ema_reference, from_logits=True)},
    )
    evaluator.run()
    assert evaluator.state.metrics == pytest.approx(decollated, rel=1e-12, abs=1e-300)


def test_logits_without_from_logits_are_refused(setup: Setup) -> None:
    """Logits handed to a handler that expects probabilities stop the run with the fix."""
    evaluator = SupervisedEvaluator(
        device=torch.device("cpu"),
        val_data_loader=torch.utils.data.DataLoader(setup.query.to_dataset(), batch_size=BATCH),
        network=setup.target,
        key_val_metric={"rho_EMA": EMAPValue(setup.ema_reference)},
    )
    with pytest.raises(ValueError, match="from_logits=True"):
        evaluator.run()


@pytest.mark.parametrize("kind", ["ks", "ema"])
def test_metric_buffers_equal_monai_cumulative(setup: Setup, kind: str) -> None:
    """Whole-batch buffering gives exactly MONAI's Cumulative buffers and the same value,
    whether fed batches, single samples or decollated per-sample lists."""
    n = len(setup.query)
    if kind == "ks":
        metric = KSCalibratedRatioMetric(
            setup.query_confidence, setup.calibration_confidence, from_logits=True, check=None,
        )  # fmt: skip
    else:  # random logits, no images: nothing to check the samples with
        metric = EMAPValueMetric(setup.thresholds, from_logits=True, check=None)
    reference = Cumulative()
    logits = torch.randn(n, 10, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    labels = torch.tensor(setup.query.labels)
    assert metric.get_buffer() is None
    metric.extend(logits[:64], labels[:64])
    reference.extend(logits[:64], labels[:64])
    metric.append(logits[64], labels[64])
    reference.append(logits[64], labels[64])
    decollated = (list(logits[65:]), list(labels[65:]))
    metric(*decollated)  # IterationMetric's per-sample path, then extend
    reference.extend(logits[65:], labels[65:])
    for ours, monai_default in zip(metric.get_buffer(), reference.get_buffer(), strict=True):
        torch.testing.assert_close(ours, monai_default, rtol=0, atol=0)
    if kind == "ks":
        expected = compute_ks_calibrated_ratio(
            logits,
            labels,
            setup.query_confidence,
            setup.calibration_confidence,
            from_logits=True,
        ).rho
    else:
        expected = compute_ema_pvalue(logits, labels, setup.thresholds, from_logits=True)
    assert metric.aggregate() == pytest.approx(expected, rel=1e-12, abs=1e-300)
    metric.reset()
    assert metric.get_buffer() is None


def test_batch_output_stacks_the_named_item_of_decollated_output() -> None:
    from monai_forget.handlers import batch_output

    output = [
        {"pred": torch.tensor([0.5, 0.5]), "logits": torch.tensor([1.0, 1.0]), "label": 0},
        {"pred": torch.tensor([0.1, 0.9]), "logits": torch.tensor([0.0, 2.2]), "label": 1},
    ]
    logits, label = batch_output("logits")(output)
    assert torch.equal(logits, torch.tensor([[1.0, 1.0], [0.0, 2.2]]))
    assert label.tolist() == [0, 1]
    pred, _ = batch_output()(output)
    assert torch.equal(pred, torch.tensor([[0.5, 0.5], [0.1, 0.9]]))
