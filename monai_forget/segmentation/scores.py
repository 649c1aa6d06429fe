"""Per-image membership scores of a segmentation model, from its per-pixel outputs.

The withdrawal auditors were written for classifiers: a sample is one row of class
probabilities and its label. A segmentation model gives a probability row per *pixel*.
These scores reduce an image's pixels to numbers that play the role of the
classifier's ground-truth confidence t[y] (Liu & Tsaftaris 2020, Alg. 1; Song & Mittal
2021, Sec. 3.2), all in [0, 1] and all higher when the model fits the image better (as
it does on images it was trained on):

- ``foreground_confidence``: mean of p[y] over the pixels the label marks as a
  structure (RV, MYO, LV); undefined (NaN) on an image whose label has no structure;
- ``image_confidence``: mean of p[y] over every pixel;
- ``likelihood``: ``exp(-mean cross-entropy)``, the geometric mean of p[y] over every
  pixel, so the training loss maps one-to-one onto a score in (0, 1];
- ``dice``: mean Dice of the argmax prediction over the structures present in the
  label or the prediction (1 when both are empty).

:meth:`SegmentationScores.to_predictions` is the adapter to the auditors' input: one
score ``s`` becomes the two-column row ``(1 - s, s)`` with label 1, so the row's
ground-truth confidence *is* ``s``. How each auditor's statistic reads it is written
in ``bundles/acdc_segmentation/docs/README.md`` ("Withdrawal audits").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from monai_forget.inference import Predictions

__all__ = ["SCORE_NAMES", "SegmentationScores", "segmentation_scores"]

#: The per-image scores, in the order :func:`segmentation_scores` returns them.
SCORE_NAMES: tuple[str, ...] = ("foreground_confidence", "image_confidence", "likelihood", "dice")


def _label_indices(y: torch.Tensor, num_classes: int) -> torch.Tensor:
    """``(B, 1, ...)`` class indices or ``(B, K, ...)`` one-hot -> ``(B, ...)`` int64."""
    if y.shape[1] == num_classes and num_classes > 1:
        return y.argmax(dim=1)
    if y.shape[1] != 1:
        raise ValueError(
            f"labels must be (B, 1, ...) class indices or (B, {num_classes}, ...) one-hot, "
            f"got shape {tuple(y.shape)}"
        )
    labels = y[:, 0]
    if labels.is_floating_point() and not torch.equal(labels, labels.round()):
        raise ValueError("labels must be class indices, got fractions")
    labels = labels.long()
    if labels.min() < 0 or labels.max() >= num_classes:
        raise ValueError(
            f"labels must lie in [0, {num_classes}), found [{int(labels.min())}, "
            f"{int(labels.max())}]"
        )
    return labels


def segmentation_scores(
    y_pred: torch.Tensor | np.ndarray,
    y: torch.Tensor | np.ndarray,
    *,
    from_logits: bool = True,
) -> dict[str, torch.Tensor]:
    """The :data:`SCORE_NAMES` of every image of a batch, as ``(B,)`` float64 tensors.

    Args:
        y_pred: per-pixel logits (``from_logits``) or probabilities, ``(B, K, *spatial)``.
        y: the labels, ``(B, 1, *spatial)`` class indices or ``(B, K, *spatial)`` one-hot.
        from_logits: apply the softmax (in float64) first.

    Raises:
        ValueError: mismatched shapes, non-finite outputs, probabilities off the simplex,
            or labels outside the classes.
    """
    pred = torch.as_tensor(y_pred).detach().to("cpu", torch.float64)
    target = torch.as_tensor(y).detach().to("cpu")
    if pred.ndim < 3 or target.ndim != pred.ndim or target.shape[2:] != pred.shape[2:]:
        raise ValueError(
            f"y_pred {tuple(pred.shape)} and y {tuple(target.shape)} must be (B, K, *spatial) "
            "and (B, 1 or K, *spatial) over the same pixels"
        )
    if not torch.isfinite(pred).all():
        raise ValueError("y_pred contains NaN or inf; check the model and the inputs")
    num_classes = pred.shape[1]
    labels = _label_indices(target, num_classes)
    if from_logits:
        log_probs = torch.log_softmax(pred, dim=1)
    else:
        if pred.min() < 0 or (pred.sum(dim=1) - 1).abs().max() > 1e-4:
            raise ValueError("y_pred are not probabilities; pass from_logits=True for logits")
        log_probs = torch.log(pred.clamp_min(1e-300))
    true_log_prob = log_probs.gather(1, labels[:, None]).flatten(1)  # (B, pixels)
    true_prob = true_log_prob.exp()
    labels = labels.flatten(1)
    foreground = (labels > 0).double()
    count = foreground.sum(dim=1)
    fg_conf = (true_prob * foreground).sum(dim=1) / count
    fg_conf[count == 0] = float("nan")
    predicted = log_probs.argmax(dim=1).flatten(1)
    dice = []
    for b in range(len(labels)):
        per_class = []
        for c in range(1, num_classes):
            a, p = labels[b] == c, predicted[b] == c
            total = int(a.sum() + p.sum())
            if total:
                per_class.append(2.0 * float((a & p).sum()) / total)
        dice.append(float(np.mean(per_class)) if per_class else 1.0)
    return {
        "foreground_confidence": fg_conf,
        "image_confidence": true_prob.mean(dim=1),
        "likelihood": true_log_prob.mean(dim=1).exp(),
        "dice": torch.tensor(dice, dtype=torch.float64),
    }


@dataclass(frozen=True)
class SegmentationScores:
    """One model's per-image scores on one image set.

    Attributes:
        scores: score name -> ``(N,)`` float64 (NaN where undefined).
        ids: an id per image (e.g. ``patient001 ED slice 3``), or empty.
        groups: the patient of each image (for splits by patient), or empty.
    """

    scores: dict[str, np.ndarray]
    ids: tuple[str, ...] = ()
    groups: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        sizes = {len(np.asarray(v)) for v in self.scores.values()}
        if len(sizes) != 1:
            raise ValueError(f"every score needs one value per image; got lengths {sizes}")
        n = sizes.pop()
        for name, values in (("ids", self.ids), ("groups", self.groups)):
            if values and len(values) != n:
                raise ValueError(f"{name} has {len(values)} entries for {n} images")
        frozen = {}
        for name, values in self.scores.items():
            array = np.array(values, dtype=np.float64, copy=True)
            array.flags.writeable = False
            frozen[name] = array
        object.__setattr__(self, "scores", frozen)
        object.__setattr__(self, "ids", tuple(self.ids))
        object.__setattr__(self, "groups", tuple(self.groups))

    def __len__(self) -> int:
        return len(next(iter(self.scores.values())))

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self.scores:
            raise KeyError(f"no score {name!r}; scores: {sorted(self.scores)}")
        return self.scores[name]

    def defined(self, name: str) -> np.ndarray:
        """Boolean mask of the images where score ``name`` is defined."""
        return np.isfinite(self[name])

    @classmethod
    def concat(cls, parts: Sequence[SegmentationScores]) -> SegmentationScores:
        """The images of several score sets, in order (same score names)."""
        names = list(parts[0].scores)
        if any(list(p.scores) != names for p in parts):
            raise ValueError("score sets with different score names cannot be joined")
        return cls(
            {n: np.concatenate([p.scores[n] for p in parts]) for n in names},
            tuple(i for p in parts for i in p.ids),
            tuple(g for p in parts for g in p.groups),
        )

    def to_predictions(self, name: str, where: np.ndarray | None = None) -> Predictions:
        """The auditors' input for score ``name``: rows ``(1 - s, s)`` with label 1.

        The ground-truth confidence of each row is exactly ``s``, so K-S compares the
        distributions of ``s`` and EMA thresholds ``s``. Images where the score is
        undefined must be left out by ``where`` (e.g. the same :meth:`defined` mask for
        the target and the shadow models, so they cover the same images).

        Raises:
            ValueError: the selection contains an undefined score.
        """
        values = self[name] if where is None else self[name][np.asarray(where, dtype=bool)]
        if not np.all(np.isfinite(values)):
            raise ValueError(
                f"score {name!r} is undefined (NaN) on {int(np.sum(~np.isfinite(values)))} "
                "image(s) (no labelled structure); select images with .defined(name)"
            )
        s = np.clip(values, 0.0, 1.0)
        return Predictions(np.stack([1.0 - s, s], axis=1), np.ones(len(s), dtype=np.int64))
