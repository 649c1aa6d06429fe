"""Tests of monai_forget.fingerprint: content hashes of samples, data sets and models."""

from __future__ import annotations

import time

import numpy as np
import torch

from monai_forget.data import LabelledImages
from monai_forget.fingerprint import data_fingerprint, model_fingerprint, sample_hashes
from monai_forget.networks import MLP, SmallCNN


def _data(n: int = 8) -> LabelledImages:
    rng = np.random.default_rng(0)
    return LabelledImages(rng.random((n, 1, 5, 5)), np.arange(n) % 2)


def test_sample_hashes_are_content_hashes() -> None:
    data = _data()
    h = sample_hashes(data)
    assert h.shape == (8,) and all(len(x) == 64 for x in h)
    assert len(set(h)) == 8
    # Same pixels, other container / ids / labels -> same hashes.
    same = LabelledImages(data.images.astype(np.float64), 1 - data.labels, ids=tuple("abcdefgh"))
    assert np.array_equal(sample_hashes(same), h)
    # One pixel changed -> only that sample's hash changes.
    images = data.images.copy()
    images[3, 0, 2, 2] = np.nextafter(images[3, 0, 2, 2], 2)
    changed = sample_hashes(LabelledImages(images, data.labels)) != h
    assert changed.tolist() == [i == 3 for i in range(8)]
    # Same bytes, other shape -> different hash.
    reshaped = LabelledImages(data.images.reshape(8, 1, 1, 25), data.labels)
    assert not np.any(sample_hashes(reshaped) == h)


def test_sample_hashes_speed_10k() -> None:
    data = LabelledImages(np.zeros((10_000, 1, 28, 28), dtype=np.float32), np.zeros(10_000))
    start = time.perf_counter()
    sample_hashes(data)
    assert time.perf_counter() - start < 2.0


def test_data_fingerprint_tracks_pixels_labels_order() -> None:
    data = _data()
    fp = data_fingerprint(data)
    assert fp == data_fingerprint(LabelledImages(data.images, data.labels))
    images = data.images.copy()
    images[0, 0, 0, 0] += 0.5
    assert data_fingerprint(LabelledImages(images, data.labels)) != fp
    labels = data.labels.copy()
    labels[0] = 1 - labels[0]
    assert data_fingerprint(LabelledImages(data.images, labels)) != fp
    assert data_fingerprint(data.subset(np.arange(8)[::-1])) != fp


def test_model_fingerprint_tracks_weights() -> None:
    torch.manual_seed(0)
    a = SmallCNN(1, 3)
    b = SmallCNN(1, 3)
    b.load_state_dict(a.state_dict())
    assert model_fingerprint(a) == model_fingerprint(b)
    with torch.no_grad():
        b.head.bias[1] += 1e-6
    assert model_fingerprint(a) != model_fingerprint(b)
    # Same class, other init -> different; other class -> different.
    assert model_fingerprint(SmallCNN(1, 3)) != model_fingerprint(a)
    assert model_fingerprint(MLP((1, 4, 4), 3)) != model_fingerprint(a)


def test_model_fingerprint_covers_buffers() -> None:
    torch.manual_seed(0)
    a = torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.BatchNorm1d(2))
    fp = model_fingerprint(a)
    with torch.no_grad():
        a[1].running_mean += 1.0
    assert model_fingerprint(a) != fp
