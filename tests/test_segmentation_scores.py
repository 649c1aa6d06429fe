"""Per-image membership scores of segmentation models, the adapter to the auditors, the
segmentation metrics and handlers on a MONAI ``SupervisedEvaluator``."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from monai_forget.audit import EMAReference, KSReference
from monai_forget.handlers import EMAPValue, KSCalibratedRatio
from monai_forget.handlers.segmentation import (
    PerImageMetricsWriter,
    SegmentationMembershipScores,
    SlicewiseHausdorffDistance,
    membership_output,
)
from monai_forget.metrics import SampleCheck
from monai_forget.metrics.segmentation import compute_slicewise_hausdorff_distance
from monai_forget.segmentation import (
    SCORE_NAMES,
    LabelledSlices,
    SegmentationScores,
    score_model,
    segmentation_scores,
)


def _labels(batch: int = 3, size: int = 16) -> torch.Tensor:
    y = torch.zeros(batch, 1, size, size, dtype=torch.long)
    y[0, 0, 4:8, 4:8] = 1
    y[0, 0, 8:12, 8:12] = 3
    y[1, 0, 2:10, 2:10] = 2  # image 2 stays empty (no structure)
    return y


def test_scores_follow_their_definitions() -> None:
    y = _labels()
    logits = torch.randn(3, 4, 16, 16, dtype=torch.float64)
    s = segmentation_scores(logits, y)
    assert list(s) == list(SCORE_NAMES)
    log_p = torch.log_softmax(logits, dim=1)
    true = log_p.gather(1, y).exp()[:, 0]
    fg = y[:, 0] > 0
    assert s["foreground_confidence"][0] == pytest.approx(float(true[0][fg[0]].mean()))
    assert torch.isnan(s["foreground_confidence"][2])  # no structure in the label
    assert s["image_confidence"][1] == pytest.approx(float(true[1].mean()))
    ce = F.cross_entropy(logits, y[:, 0], reduction="none").flatten(1).mean(1)
    torch.testing.assert_close(s["likelihood"], torch.exp(-ce))  # the loss, one-to-one
    # A perfect, confident prediction: every score 1; an empty one against structures: Dice 0.
    perfect = F.one_hot(y[:, 0], 4).permute(0, 3, 1, 2).double() * 50.0
    p = segmentation_scores(perfect, y)
    assert torch.allclose(p["dice"], torch.ones(3, dtype=torch.float64))
    assert p["foreground_confidence"][0] == pytest.approx(1.0)
    background = torch.zeros(3, 4, 16, 16, dtype=torch.float64)
    background[:, 0] = 50.0
    b = segmentation_scores(background, y)
    assert b["dice"].tolist() == [0.0, 0.0, 1.0]
    # Probabilities and one-hot labels give the same scores.
    onehot = F.one_hot(y[:, 0], 4).permute(0, 3, 1, 2)
    again = segmentation_scores(torch.softmax(logits, 1), onehot, from_logits=False)
    torch.testing.assert_close(again["dice"], s["dice"])
    with pytest.raises(ValueError, match="labels must lie in"):
        segmentation_scores(logits, y + 4)
    with pytest.raises(ValueError, match="not probabilities"):
        segmentation_scores(logits, y, from_logits=False)


def test_adapter_gives_each_auditor_the_score() -> None:
    scores = SegmentationScores(
        {"foreground_confidence": [0.9, np.nan, 0.6], "dice": [0.8, 1.0, 0.5]},
        ids=("a", "b", "c"),
        groups=("p1", "p1", "p2"),
    )
    where = scores.defined("foreground_confidence")
    assert where.tolist() == [True, False, True]
    pred = scores.to_predictions("foreground_confidence", where)
    np.testing.assert_allclose(pred.confidence, [0.9, 0.6])  # K-S's t[y] is the score
    with pytest.raises(ValueError, match="undefined"):
        scores.to_predictions("foreground_confidence")
    with pytest.raises(KeyError, match="no score 'loss'"):
        scores["loss"]
    # K-S on the adapter equals K-S on the raw scores.
    rng = np.random.default_rng(0)
    q, c, t = (SegmentationScores({"dice": rng.uniform(size=40)}) for _ in range(3))
    ref = KSReference.from_predictions(q.to_predictions("dice"), c.to_predictions("dice"))
    assert ref.audit(t.to_predictions("dice")).statistic == pytest.approx(
        KSReference(q["dice"], c["dice"]).ratio(t["dice"]).rho
    )
    # EMA with the confidence metric thresholds the score itself.
    members = SegmentationScores({"dice": rng.uniform(0.8, 1.0, 50)})
    nonmembers = SegmentationScores({"dice": rng.uniform(0.0, 0.7, 50)})
    ema = EMAReference.from_predictions(
        members.to_predictions("dice"), nonmembers.to_predictions("dice"), metrics=("confidence",)
    )
    # The threshold separates the two sets (member iff score >= threshold).
    assert 0.7 < ema.thresholds.thresholds["confidence"][1] <= members["dice"].min()
    assert ema.audit(members.to_predictions("dice")).decision == "not forgotten"
    assert ema.audit(nonmembers.to_predictions("dice")).decision == "forgotten"
    joined = SegmentationScores.concat([scores, scores])
    assert len(joined) == 6 and joined.groups[3] == "p1"


def test_slicewise_hd95_measures_an_in_plane_shift() -> None:
    label = torch.zeros(1, 2, 32, 32, 3)
    label[0, 1, 8:20, 8:20, :2] = 1
    pred = torch.zeros_like(label)
    pred[0, 1, 8:20, 11:23, :] = 1  # shifted by 3 pixels; present on a third slice too
    label[:, 0], pred[:, 0] = 1 - label[:, 1], 1 - pred[:, 1]
    hd = compute_slicewise_hausdorff_distance(pred, label)
    assert hd.shape == (1, 1) and hd[0, 0] == pytest.approx(3.0)
    assert compute_slicewise_hausdorff_distance(pred, label, spacing=(1.5, 1.5))[
        0, 0
    ] == pytest.approx(4.5)
    empty = torch.zeros_like(label)
    empty[:, 0] = 1
    assert torch.isnan(compute_slicewise_hausdorff_distance(empty, label)[0, 0])


class _Toy(torch.nn.Module):
    """Logits that favour the label where the image is bright (a fixed 'segmenter')."""

    def __init__(self, sharpness: float) -> None:
        super().__init__()
        self.sharpness = torch.nn.Parameter(torch.tensor(sharpness))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        classes = torch.arange(4, dtype=x.dtype).view(1, 4, 1, 1)
        return -self.sharpness * (x * 3 - classes) ** 2


def _slices(n: int = 12, seed: int = 0) -> LabelledSlices:
    rng = np.random.default_rng(seed)
    labels = [rng.integers(0, 4, size=(1, 12 + i % 3, 14)).astype(np.uint8) for i in range(n)]
    labels[0][:] = 0  # one image without any structure
    images = [(lab / 3.0 + rng.normal(0, 0.05, lab.shape)).astype(np.float32) for lab in labels]
    return LabelledSlices(
        images, labels, [f"s{i}" for i in range(n)], [f"p{i // 2}" for i in range(n)]
    )


def test_score_model_caches_and_handlers_reproduce_the_audit(tmp_path: Path) -> None:
    """On a SupervisedEvaluator, the membership handlers give exactly the statistics the
    audit computes from score_model: the evaluation-time twin of the offline audit."""
    from monai.data import DataLoader, Dataset
    from monai.engines import SupervisedEvaluator
    from monai.inferers import SlidingWindowInferer

    data = _slices()
    target, query_shadow, calibration_shadow = _Toy(2.0), _Toy(8.0), _Toy(0.5)
    scores = {
        name: score_model(model, data, roi_size=(16, 16), cache_dir=tmp_path)
        for name, model in (("t", target), ("q", query_shadow), ("c", calibration_shadow))
    }
    again = score_model(target, data, roi_size=(16, 16), cache_dir=tmp_path)
    assert len(list((tmp_path / "segmentation_scores").glob("*.npz"))) == 3
    np.testing.assert_array_equal(again["dice"], scores["t"]["dice"])
    where = scores["t"].defined("foreground_confidence")
    assert where.tolist() == [False] + [True] * 11
    ks = KSReference.from_predictions(
        scores["q"].to_predictions("foreground_confidence", where),
        scores["c"].to_predictions("foreground_confidence", where),
    )
    ema = EMAReference.from_predictions(
        scores["q"].to_predictions("foreground_confidence", where),
        scores["c"].to_predictions("foreground_confidence", where),
        metrics=("confidence",),
    )
    expected_ks = ks.audit(scores["t"].to_predictions("foreground_confidence", where)).statistic
    expected_ema = ema.audit(scores["t"].to_predictions("foreground_confidence", where)).statistic

    items = [
        {"image": torch.as_tensor(i), "label": torch.as_tensor(lab)}
        for i, lab in zip(data.images, data.labels, strict=True)
    ]
    adapter = membership_output("foreground_confidence")
    audited = data.sample_hashes[where]  # the images with a defined score
    evaluator = SupervisedEvaluator(
        device=torch.device("cpu"),
        val_data_loader=DataLoader(Dataset(items), batch_size=1),
        network=target,
        inferer=SlidingWindowInferer(roi_size=(16, 16), mode="constant"),
        key_val_metric={"fg_conf": SegmentationMembershipScores("foreground_confidence")},
        additional_metrics={
            "rho_KS": KSCalibratedRatio(ks, output_transform=adapter, check=SampleCheck(audited)),
            "rho_EMA": EMAPValue(ema, output_transform=adapter, check=SampleCheck(audited)),
        },
    )
    evaluator.run()
    metrics = evaluator.state.metrics
    assert metrics["rho_KS"] == pytest.approx(expected_ks, rel=1e-9)
    assert metrics["rho_EMA"] == pytest.approx(expected_ema, rel=1e-6, abs=1e-12)
    assert metrics["fg_conf"] == pytest.approx(np.nanmean(scores["t"]["foreground_confidence"]))
    details = evaluator.state.metric_details["fg_conf"]
    np.testing.assert_allclose(details[:, 3].numpy(), scores["t"]["dice"])


def test_per_volume_writer_and_hd95_handler(tmp_path: Path) -> None:
    from monai.data import DataLoader, Dataset
    from monai.engines import SupervisedEvaluator
    from monai.handlers import MeanDice, from_engine
    from monai.transforms import AsDiscreted

    label = torch.zeros(1, 12, 12, 2)
    label[0, 3:9, 3:9, :] = 1
    items = [
        {"image": label.clone(), "label": label.clone(), "patient": f"p{i}", "phase": "ED"}
        for i in range(2)
    ]

    class Shift(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            moved = torch.roll(x, shifts=2, dims=3)
            return torch.cat([1 - moved, moved], dim=1) * 10

    out = tmp_path / "per_volume.csv"
    post = AsDiscreted(keys=["pred", "label"], argmax=[True, False], to_onehot=2)
    evaluator = SupervisedEvaluator(
        device=torch.device("cpu"),
        val_data_loader=DataLoader(Dataset(items), batch_size=1),
        network=Shift(),
        postprocessing=post,
        key_val_metric={
            "dice": MeanDice(
                include_background=False,
                reduction="mean_batch",
                output_transform=from_engine(["pred", "label"]),
            )
        },
        additional_metrics={"hd95": SlicewiseHausdorffDistance()},
        val_handlers=[PerImageMetricsWriter(out, ["dice", "hd95"], ["LV"])],
    )
    evaluator.run()
    assert evaluator.state.metrics["hd95"] == pytest.approx(2.0)
    rows = list(csv.reader(out.open()))
    assert rows[0] == ["patient", "phase", "dice_LV", "hd95_LV"]
    assert [r[0] for r in rows[1:]] == ["p0", "p1"]
    assert float(rows[1][2]) == pytest.approx(2 * 24 / 72) and float(rows[1][3]) == 2.0
    with pytest.raises(FileExistsError):
        PerImageMetricsWriter(out, ["dice"], ["LV"])
