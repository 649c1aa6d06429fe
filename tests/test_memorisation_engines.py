"""M on models, in MONAI engines, during training; early stopping; TracInCP.

Models here are tiny (digits 8x8, hand-built filters) so the file runs in seconds.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from monai_forget.data import LabelledImages, load_digits
from monai_forget.handlers import CheckpointRecorder, MemorisationTracker, UniqueFeatureMemorisation
from monai_forget.memorisation import (
    Checkpoint,
    EarlyStoppingTraining,
    FeatureProbe,
    ProbeSettings,
    UniqueFeature,
    memorisation_score,
    select_checkpoints,
    self_influence,
    white_box_score,
)
from monai_forget.metrics import (
    UniqueFeatureMemorisationMetric,
    compute_unique_feature_memorisation,
)
from monai_forget.networks import CNN2, MLP1

FEATURE = UniqueFeature.from_text("A", position=(1, 1), value=1.0)


class MatchedFilter(nn.Module):
    """Class-0 logit = gain x correlation of channel 0 with a template: "knows" that pattern."""

    def __init__(self, template: np.ndarray, gain: float = 4.0) -> None:
        super().__init__()
        self.register_buffer("template", torch.as_tensor(template, dtype=torch.float32))
        self.gain = gain

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.gain * (x[:, 0] * self.template).sum((1, 2))
        return torch.stack([s, -s, torch.zeros_like(s)], 1)


def _template(feature: UniqueFeature, size: int) -> np.ndarray:
    t = np.zeros((size, size), np.float32)
    r, c = feature.position
    h, w = feature.shape
    t[r : r + h, c : c + w] = np.where(feature.mask, 1.0, -1.0)
    return t


@pytest.fixture(scope="module")
def noise_probes() -> np.ndarray:
    return np.random.default_rng(0).random((60, 1, 12, 12)).astype(np.float32) * 0.5


# --------------------------------------------------------------------------- M on models


def test_a_model_that_knows_the_feature_is_detected(noise_probes):
    model = MatchedFilter(_template(FEATURE, 12))
    before = noise_probes.copy()
    s = memorisation_score(
        model, noise_probes, FEATURE, ProbeSettings(seed=1, random_feature="ink")
    )
    np.testing.assert_array_equal(noise_probes, before)
    assert s.m > 0 and s.n == 60
    for name, res in s.tests.items():
        assert res.pvalue < 1e-3, name
    # The paper's block-overwrite controls blank the block's other pixels too, which this
    # filter also weighs: still detected, less strongly.
    assert memorisation_score(model, noise_probes, FEATURE, ProbeSettings(seed=1)).pvalue < 0.01


def test_a_model_blind_to_the_feature_region_scores_zero(noise_probes):
    t = np.zeros((12, 12), np.float32)
    t[8:, 8:] = 1.0  # looks only at the bottom-right corner
    s = memorisation_score(MatchedFilter(t), noise_probes, FEATURE, ProbeSettings(seed=1))
    assert s.m == 0.0
    assert all(res.pvalue == 1.0 for res in s.tests.values())


def test_an_unrelated_pattern_is_not_detected(noise_probes):
    # The model knows "A"; asking about "T" (a different feature) gives no evidence.
    model = MatchedFilter(_template(FEATURE, 12))
    s = memorisation_score(
        model, noise_probes, UniqueFeature.from_text("T", (1, 1)), ProbeSettings(seed=1)
    )
    assert s.pvalue > 0.05


def test_score_is_reproducible_by_seed(noise_probes):
    model = MatchedFilter(_template(FEATURE, 12), gain=0.5)
    a = memorisation_score(model, noise_probes, FEATURE, ProbeSettings(seed=3))
    b = memorisation_score(model, noise_probes, FEATURE, ProbeSettings(seed=3))
    c = memorisation_score(model, noise_probes, FEATURE, ProbeSettings(seed=4))
    assert a.m == b.m and a.pvalue == b.pvalue
    assert a.m != c.m  # fresh random controls


def test_bad_probes_are_refused(noise_probes):
    conv = nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten(), nn.LazyLinear(2))
    with pytest.raises(ValueError, match=r"could not process.*\(3, 12, 12\).*channel count"):
        memorisation_score(conv, np.repeat(noise_probes, 3, axis=1), FEATURE)
    model = MatchedFilter(_template(FEATURE, 12))
    with pytest.raises(ValueError, match="at least 2 probes"):
        memorisation_score(model, noise_probes[:1], FEATURE)
    with pytest.raises(ValueError, match="does not fit"):
        memorisation_score(model, noise_probes[:, :, :5, :5], FEATURE)
    with pytest.raises(ValueError, match="not probabilities"):
        memorisation_score(model, noise_probes, FEATURE, ProbeSettings(outputs="probs"))


def test_in_distribution_probes_warn(noise_probes):
    model = MatchedFilter(_template(FEATURE, 12))
    with pytest.warns(UserWarning, match="identical to training samples"):
        memorisation_score(model, noise_probes, FEATURE, training_data=noise_probes[:5])


def test_white_box_uses_class_y_samples_only():
    rng = np.random.default_rng(0)
    images = rng.random((30, 1, 12, 12)).astype(np.float32) * 0.5
    data = LabelledImages(images, np.arange(30) % 3, num_classes=3)
    model = MatchedFilter(_template(FEATURE, 12), gain=0.3)
    res = white_box_score(model, data, FEATURE, label=0, seed=0)
    assert res.n == 10 and res.m_w > 0 and res.test.pvalue < 1e-3
    # The model pushes towards class 0, so for class 1 the feature lowers log P(y).
    assert white_box_score(model, data, FEATURE, label=1, seed=0).m_w < 0
    with pytest.raises(ValueError, match="at least 2 samples of class 5"):
        white_box_score(model, data, FEATURE, label=5)


# --------------------------------------------------------------------------- MONAI metric


def test_feature_probe_stacks_clean_unique_random(noise_probes):
    model = MatchedFilter(_template(FEATURE, 12))
    probe = FeatureProbe(model, FEATURE, seed=5)
    x = torch.from_numpy(noise_probes[:7])
    out = probe(x)
    assert out.shape == (7, 3, 3)
    masks = FEATURE.random_masks(7, 5)
    torch.testing.assert_close(out[:, 0], model(x))
    torch.testing.assert_close(out[:, 1], model(FEATURE.apply(x)))
    torch.testing.assert_close(out[:, 2], model(FEATURE.apply_random(x, masks)))


def test_metric_over_batches_equals_memorisation_score(noise_probes):
    model = MatchedFilter(_template(FEATURE, 12), gain=0.7)
    probe = FeatureProbe(model, FEATURE, seed=2)
    metric = UniqueFeatureMemorisationMetric()
    with torch.no_grad():
        for start in range(0, 60, 16):  # uneven batches: 16, 16, 16, 12
            metric(probe(torch.from_numpy(noise_probes[start : start + 16])))
    m = metric.aggregate()
    ref = memorisation_score(model, noise_probes, FEATURE, ProbeSettings(seed=2))
    assert m == pytest.approx(ref.m, rel=1e-5)
    assert metric.last_score.pvalue == pytest.approx(ref.pvalue, rel=1e-4)
    probe.reset()
    with torch.no_grad():
        stacked = probe(torch.from_numpy(noise_probes))
    assert compute_unique_feature_memorisation(stacked).m == pytest.approx(ref.m, rel=1e-5)
    with pytest.raises(ValueError, match=r"\(N, 3, K\).*FeatureProbe"):
        compute_unique_feature_memorisation(torch.zeros(4, 3))


def test_handler_in_a_supervised_evaluator(noise_probes):
    from monai.engines import SupervisedEvaluator

    model = MatchedFilter(_template(FEATURE, 12), gain=0.7)
    data = LabelledImages(noise_probes, np.zeros(60, np.int64), num_classes=3)
    loader = torch.utils.data.DataLoader(data.to_dataset(), batch_size=25)
    evaluator = SupervisedEvaluator(
        device=torch.device("cpu"),
        val_data_loader=loader,
        network=FeatureProbe(model, FEATURE, seed=2),
        key_val_metric={"M": UniqueFeatureMemorisation()},
    )
    evaluator.run()
    ref = memorisation_score(model, noise_probes, FEATURE, ProbeSettings(seed=2))
    assert evaluator.state.metrics["M"] == pytest.approx(ref.m, rel=1e-5)


# --------------------------------------------------------------------------- training


@pytest.fixture(scope="module")
def digits():
    d = load_digits()
    return d.subset(np.arange(300)), d.subset(np.arange(300, 450))


def _mlp() -> MLP1:
    return MLP1((1, 8, 8), 10, hidden=16)


def test_tracker_logs_m_each_epoch_of_a_supervised_trainer(digits, caplog):
    from monai.engines import SupervisedTrainer

    train, _ = digits
    torch.manual_seed(0)
    net = _mlp()
    probes = np.random.default_rng(1).random((40, 1, 8, 8)).astype(np.float32)
    tracker = MemorisationTracker(probes, FEATURE, seed=3, tests=("student", "paired"))
    trainer = SupervisedTrainer(
        device=torch.device("cpu"),
        max_epochs=3,
        train_data_loader=torch.utils.data.DataLoader(train.to_dataset(), 32, shuffle=True),
        network=net,
        optimizer=torch.optim.Adam(net.parameters(), 1e-2),
        loss_function=nn.CrossEntropyLoss(),
    )
    tracker.attach(trainer)
    with caplog.at_level("INFO", logger="monai_forget.memorisation"):
        trainer.run()
    epochs, m, p = tracker.curve()
    assert epochs.tolist() == [1, 2, 3]
    assert len(set(m.tolist())) == 3  # the network changed between epochs
    assert trainer.state.metrics["memorisation_M"] == m[-1]
    assert trainer.state.metrics["memorisation_M_p"] == p[-1]
    assert set(tracker.history[-1].score.tests) == {"student", "paired"}
    assert sum("epoch 3: M =" in r.getMessage() for r in caplog.records) == 1
    final = memorisation_score(net, probes, FEATURE, ProbeSettings(seed=3))
    assert final.m == pytest.approx(m[-1], rel=1e-9)
    assert net.training  # the tracker restores the training flag


def test_early_stopping_stops_and_restores_the_best_epoch(digits):
    train, val = digits
    # Validation labels shuffled: the validation loss soon rises, so training must stop.
    rng = np.random.default_rng(0)
    noisy_val = LabelledImages(val.images, rng.permutation(val.labels), num_classes=10)
    cfg = EarlyStoppingTraining("mlp-1", {"in_shape": (1, 8, 8), "num_classes": 10, "hidden": 16},
                                max_epochs=40, patience=2, learning_rate=1e-2)  # fmt: skip
    model, log = cfg.train(train, noisy_val, seed=0)
    assert log.epochs_run < 40
    assert log.epochs_run - log.best_epoch == 2  # stopped after `patience` worse epochs
    assert log.best_epoch == int(np.argmin(log.val_losses)) + 1
    x, y = (
        torch.from_numpy(np.array(noisy_val.images)),
        torch.from_numpy(np.array(noisy_val.labels)),
    )
    with torch.no_grad():
        restored = nn.functional.cross_entropy(model(x), y).item()
    assert restored == pytest.approx(log.best_val_loss, rel=1e-5)
    again, _ = cfg.train(train, noisy_val, seed=0)
    for a, b in zip(model.state_dict().values(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b)


# --------------------------------------------------------------------------- TracIn


def _brute_force_self_influence(model, checkpoints, images, labels):
    out = np.zeros(len(labels))
    model.eval()
    for ckpt in checkpoints:
        model.load_state_dict(ckpt.state_dict)
        for i in range(len(labels)):
            model.zero_grad()
            loss = nn.functional.cross_entropy(model(images[i : i + 1]), labels[i : i + 1])
            loss.backward()
            out[i] += ckpt.learning_rate * sum(
                float(p.grad.pow(2).sum()) for p in model.parameters()
            )
    return out


@pytest.mark.parametrize("arch", ["mlp-1", "cnn-2"])
def test_tracin_matches_a_per_sample_loop(digits, arch):
    train, val = digits
    args = {"in_shape": (1, 8, 8), "num_classes": 10}
    args.update({"hidden": 16} if arch == "mlp-1" else {"channels": (4, 8), "hidden": 16})
    recorder = CheckpointRecorder()
    cfg = EarlyStoppingTraining(arch, args, max_epochs=3, patience=5, learning_rate=5e-3)
    model, _ = cfg.train(train.subset(np.arange(120)), val, seed=1, handlers=[recorder])
    assert len(recorder.checkpoints) == 3
    assert all(c.learning_rate == 5e-3 for c in recorder.checkpoints)
    sub = train.subset(np.arange(40))
    fast = self_influence(model, recorder.checkpoints, sub, batch_size=16)
    x, y = torch.from_numpy(np.array(sub.images)), torch.from_numpy(np.array(sub.labels))
    slow = _brute_force_self_influence(cfg.build(), recorder.checkpoints, x, y)
    np.testing.assert_allclose(fast, slow, rtol=2e-4, atol=1e-9)
    assert fast.std() > 0


def test_tracin_weights_checkpoints_by_learning_rate(digits):
    train, _ = digits
    torch.manual_seed(0)
    net = CNN2((1, 8, 8), 10, channels=(4, 8), hidden=16)
    state = {k: v.clone() for k, v in net.state_dict().items()}
    sub = train.subset(np.arange(10))
    one = self_influence(net, [Checkpoint(state, 1.0)], sub)
    two = self_influence(net, [Checkpoint(state, 0.5), Checkpoint(state, 1.5)], sub)
    np.testing.assert_allclose(two, 2 * one, rtol=1e-6)
    with pytest.raises(ValueError, match="at least one checkpoint"):
        self_influence(net, [], sub)
    with pytest.raises(ValueError, match="lacks"):
        self_influence(net, [Checkpoint({"x": torch.zeros(1)}, 1.0)], sub)


def test_checkpoints_cover_95_percent_of_the_loss_fall_evenly_spaced():
    """App. A.5: 10 evenly spaced checkpoints accounting for 95 % of the loss reduction."""
    state = {"w": torch.zeros(1)}
    losses = [2.0, 1.0, 0.5, 0.3, 0.25, 0.2, 0.2]  # fall 1.8; 95 % of it reached at 0.25
    ckpts = [Checkpoint(state, 1e-3, e + 1, loss) for e, loss in enumerate(losses)]
    assert [c.epoch for c in select_checkpoints(ckpts, n=3)] == [1, 3, 5]
    assert [c.epoch for c in select_checkpoints(ckpts, n=10)] == [1, 2, 3, 4, 5]
    assert [c.epoch for c in select_checkpoints(ckpts, n=2, reduction=0.5)] == [1, 2]
    many = [Checkpoint(state, 1e-3, e + 1, 1.0 / (e + 1)) for e in range(100)]
    # Loss 1/e: 1 - 1/e >= 0.95 (1 - 1/100) first at e = 17; ten epochs spaced over 1..17.
    picked = [c.epoch for c in select_checkpoints(many)]
    assert picked == [1, 3, 5, 6, 8, 10, 12, 13, 15, 17]
    with pytest.raises(ValueError, match="training loss"):
        select_checkpoints([Checkpoint(state, 1e-3)])


def test_recorder_keeps_epoch_and_mean_training_loss(digits):
    train, val = digits
    recorder = CheckpointRecorder()
    args = {"in_shape": (1, 8, 8), "num_classes": 10, "hidden": 16}
    cfg = EarlyStoppingTraining("mlp-1", args, max_epochs=4, patience=5, learning_rate=1e-2)
    cfg.train(train, val, seed=0, handlers=[recorder])
    assert [c.epoch for c in recorder.checkpoints] == [1, 2, 3, 4]
    losses = [c.train_loss for c in recorder.checkpoints]
    assert all(np.isfinite(losses)) and losses[-1] < losses[0] < 2.5  # ln 10 = 2.30 at start


def test_paper_training_settings():
    """App. A.2/A.3: Adam 3e-4, patience 10, up to 500 epochs, batch 128 (CNN-2: 512)."""
    for arch, batch in (("mlp-1", 128), ("cnn-1", 128), ("CNN_2", 512)):
        cfg = EarlyStoppingTraining.paper(arch, {"num_classes": 10})
        assert (cfg.learning_rate, cfg.patience, cfg.max_epochs) == (3e-4, 10, 500)
        assert cfg.batch_size == batch and cfg.restore_best
    assert EarlyStoppingTraining.paper("mlp-1", max_epochs=5).max_epochs == 5
