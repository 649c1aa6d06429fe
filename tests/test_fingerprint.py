"""Tests of monai_forget.fingerprint: content hashes of samples, data sets and models."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from monai_forget import fingerprint
from monai_forget.data import LabelledImages, check_disjoint, concat, without_overlap
from monai_forget.fingerprint import (
    data_fingerprint,
    hashes_fingerprint,
    model_fingerprint,
    sample_hashes,
)
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


def test_hash_values_are_pinned() -> None:
    # They key on-disk caches: a change here orphans every cached prediction and shadow.
    data = LabelledImages(np.arange(12, dtype=np.float32).reshape(2, 1, 2, 3) / 8, [1, 0])
    assert sample_hashes(data).tolist() == [
        "13655a0dc3a0b66ecf75f460b92397e6555ee115ae30b7023fff044fa468c341",
        "ea1421ef88de75732c0deba80c7890beaaf8589b0d9dc5e4719106026943ac0f",
    ]
    assert data_fingerprint(data) == (
        "d67fd2d3e5cc94be6b4ac4e919adf1e2ab371be62eb4695f2fd407d73189d555"
    )


def test_each_data_set_is_hashed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    hashed: list[int] = []  # number of images in each call to the hashing function
    image_hashes = fingerprint.image_hashes

    def counting(images: np.ndarray) -> np.ndarray:
        hashed.append(len(images))
        return image_hashes(images)

    monkeypatch.setattr(fingerprint, "image_hashes", counting)
    query = _data(8)
    calibration = LabelledImages(np.random.default_rng(1).random((5, 1, 5, 5)), np.zeros(5))
    for _ in range(3):  # cache keys, overlap checks and provenance all ask again
        data_fingerprint(query)
        sample_hashes(query)
        check_disjoint(query, calibration)
        without_overlap(calibration, query)
        data_fingerprint(calibration)
    assert hashed == [8, 5]

    # Subsets and concatenations take their images' hashes along: nothing is rehashed,
    # and the values are those of hashing their pixels afresh.
    part = query.subset([5, 1, 2])
    joined = concat(part, calibration)
    assert sample_hashes(part).tolist() == image_hashes(part.images).tolist()
    assert data_fingerprint(joined) == hashes_fingerprint(
        image_hashes(joined.images), joined.labels
    )
    assert hashed == [8, 5]
    with pytest.raises(ValueError):
        sample_hashes(query)[0] = "0" * 64  # the cache is read-only


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
