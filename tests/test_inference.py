"""Tests of monai_forget.inference: batched, cached prediction."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from monai_forget.cache import CacheEntryError
from monai_forget.data import LabelledImages
from monai_forget.inference import Predictions, predict
from monai_forget.networks import SmallCNN


class _Counting(torch.nn.Module):
    """Wraps a model and counts forward calls."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.inner(x)


def _data(n: int = 37, k: int = 3) -> LabelledImages:
    rng = np.random.default_rng(0)
    return LabelledImages(rng.random((n, 1, 8, 8)), np.arange(n) % k)


def _net(k: int = 3) -> torch.nn.Module:
    torch.manual_seed(0)
    return SmallCNN(1, k, channels=(4, 8))


def test_predict_matches_manual_forward() -> None:
    data, net = _data(), _net()
    net.train()
    pred = predict(net, data, batch_size=10)
    assert net.training  # flag restored
    assert pred.probs.shape == (37, 3) and pred.probs.dtype == np.float64
    np.testing.assert_allclose(pred.probs.sum(axis=1), 1.0, atol=1e-12)
    net.eval()
    with torch.no_grad():
        manual = torch.softmax(net(torch.from_numpy(data.images.copy())).double(), 1).numpy()
    np.testing.assert_allclose(pred.probs, manual, atol=1e-6)
    np.testing.assert_array_equal(pred.labels, data.labels)
    np.testing.assert_allclose(pred.confidence, manual[np.arange(37), data.labels], atol=1e-6)


def test_predict_does_not_modify_inputs() -> None:
    data = _data()
    before = data.images.copy()

    class Mutating(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x.mul_(0)  # a badly behaved model
            return x.flatten(1)[:, :3]

    predict(Mutating(), data)
    np.testing.assert_array_equal(data.images, before)


def test_cache_hit_skips_forward(tmp_path: Path) -> None:
    data, model = _data(), _Counting(_net())
    first = predict(model, data, batch_size=16, cache_dir=tmp_path)
    assert model.calls == 3
    files = list((tmp_path / "predictions").glob("*.npz"))
    assert len(files) == 1
    again = predict(model, data, batch_size=16, cache_dir=tmp_path)
    assert model.calls == 3
    np.testing.assert_array_equal(first.probs, again.probs)
    # Other data or changed weights -> miss.
    predict(model, data.subset(range(5)), cache_dir=tmp_path)
    assert model.calls == 4
    with torch.no_grad():
        model.inner.head.bias[0] += 1.0
    predict(model, data, batch_size=64, cache_dir=tmp_path)
    assert model.calls == 5
    assert len(list((tmp_path / "predictions").glob("*.npz"))) == 3


def test_outputs_probs_validated() -> None:
    data = _data(6)

    class Probs(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.full((len(x), 3), 1 / 3)

    pred = predict(Probs(), data, outputs="probs")
    np.testing.assert_allclose(pred.probs, 1 / 3)
    with pytest.raises(ValueError, match="outputs='logits'"):
        predict(_net(), data, outputs="probs")
    with pytest.raises(ValueError, match=r"outputs must be one of \('logits', 'probs'\)"):
        predict(_net(), data, outputs="scores")


def test_bad_output_shape_is_clear() -> None:
    class Seg(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x

    with pytest.raises(ValueError, match=r"expected \(\d+, K\)"):
        predict(Seg(), _data(4))
    with pytest.raises(ValueError, match="3 classes but the data has 5"):
        predict(_net(3), LabelledImages(np.zeros((5, 1, 8, 8)), np.arange(5)))


def test_predictions_validation() -> None:
    p = Predictions(np.array([[0.2, 0.8], [0.6, 0.4]]), np.array([1, 0]))
    np.testing.assert_allclose(p.confidence, [0.8, 0.6])
    with pytest.raises(ValueError, match="labels must lie"):
        Predictions(np.array([[0.2, 0.8]]), np.array([2]))


def test_progress_and_device_object() -> None:
    pred = predict(_net(), _data(5), device=torch.device("cpu"), progress=True)
    assert len(pred) == 5


def test_corrupt_cache_is_refused_then_recomputed_once_deleted(tmp_path: Path) -> None:
    """A damaged entry never decides: it is refused, naming the files to delete; once
    deleted the predictions are computed again, the same as before."""
    data, model = _data(), _Counting(_net())
    first = predict(model, data, cache_dir=tmp_path)
    (cache,) = (tmp_path / "predictions").glob("*.npz")
    cache.write_bytes(b"not a zip")
    with pytest.raises(CacheEntryError, match=f"delete {cache}"):
        predict(model, data, cache_dir=tmp_path)
    cache.unlink()
    again = predict(model, data, cache_dir=tmp_path)
    assert model.calls == 2
    np.testing.assert_array_equal(first.probs, again.probs)


def test_empty_data_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        predict(_net(), _data(4).subset([]))
