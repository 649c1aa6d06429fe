"""White-box memorisation M_w (Hartley & Tsaftaris 2022, Sec. 2.2).

For an auditor who *does* have in-distribution data and knows the label y of the
training image that carried z_u: take the samples of class y, put z_u on each (x_u) and,
separately, a random feature z_r of the same size (x_r), and average the change in the
log-likelihood of the true class,

    M_w = (1/|X_y|) sum_{x in X_y} [ log P(y | x_u) - log P(y | x_r) ].

M_w > 0: the model associates z_u with class y more than a random pattern; a model
that memorised the canary's (feature, label) pair pushes class-y samples towards y.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch

from monai_forget.checks import Interval, check_in
from monai_forget.memorisation.feature import RandomFeature, UniqueFeature
from monai_forget.memorisation.significance import OneTailedResult, paired_ttest
from monai_forget.results import Result
from monai_forget.scores import check_probabilities

__all__ = ["WhiteBoxScore", "compute_white_box_score", "white_box_score"]

#: Probabilities are floored here before the log (float64 softmax only reaches 0 for
#: logit gaps above ~745, so this never binds in practice).
_TINY = np.finfo(np.float64).tiny


@dataclass(frozen=True)
class WhiteBoxScore(Result):
    """M_w and its per-sample terms.

    Attributes:
        m_w: mean of ``log P(y|x_u) - log P(y|x_r)`` over the class-y samples (nats).
        label: the class y.
        n: number of class-y samples used.
        test: one-tailed paired t-test that the mean term is > 0 (our addition; the
            paper reports M_w itself).
        terms: the per-sample terms.
    """

    m_w: float
    label: int
    n: int
    test: OneTailedResult
    terms: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "m_w": self.m_w,
            "label": self.label,
            "n": self.n,
            "statistic": self.test.statistic,
            "pvalue": self.test.pvalue,
        }

    def summary(self) -> str:
        return (
            f"M_w = {self.m_w:.6g} nats over {self.n} training images of class {self.label} "
            f"(one-tailed paired t = {self.test.statistic:.4g}, p = {self.test.pvalue:.4g})"
        )


def compute_white_box_score(
    p_unique: object, p_random: object, label: int, *, from_logits: bool = False
) -> WhiteBoxScore:
    """M_w (Sec. 2.2) from the outputs on class-y samples carrying z_u and z_r.

    Args:
        p_unique: ``(n, K)`` probabilities on the class-y samples with z_u.
        p_random: ``(n, K)`` on the same samples with random features.
        label: the class y (the label of the training image that carried z_u).
        from_logits: apply a softmax first.

    Raises:
        ValueError: outputs that are not probabilities, shape mismatch, ``label`` not a
            column, or fewer than 2 samples.
    """
    pu, _ = check_probabilities(p_unique, from_logits=from_logits)
    pr, _ = check_probabilities(p_random, from_logits=from_logits)
    if pu.shape != pr.shape:
        raise ValueError(f"outputs must have the same shape, got {pu.shape} and {pr.shape}")
    check_in("label", int(label), Interval(0, pu.shape[1] - 1, "both", integer=True),
             f"one of the model's {pu.shape[1]} classes")  # fmt: skip
    if pu.shape[0] < 2:
        raise ValueError(f"M_w needs at least 2 class-{label} samples, got {pu.shape[0]}")
    y = int(label)
    terms = np.log(np.maximum(pu[:, y], _TINY)) - np.log(np.maximum(pr[:, y], _TINY))
    terms.flags.writeable = False
    return WhiteBoxScore(
        float(terms.mean()), y, int(terms.size), paired_ttest(terms, 0 * terms), terms
    )


def white_box_score(
    model: torch.nn.Module,
    data: object,
    feature: UniqueFeature,
    label: int,
    *,
    random_feature: RandomFeature = "patch",
    seed: int | np.random.Generator | None = 0,
    batch_size: int = 256,
    device: str | torch.device = "cpu",
    outputs: Literal["logits", "probs"] = "logits",
) -> WhiteBoxScore:
    """M_w of ``model`` for ``feature`` learnt with class ``label`` (Sec. 2.2).

    Args:
        model: the classifier (white-box setting: in-distribution data and the label).
        data: a :class:`~monai_forget.data.LabelledImages`; its class-``label`` samples
            are used. The paper's D_y is the class-y *training* images (Sec. 2.2).
        feature: the unique feature z_u.
        label: the class y the feature was trained with.
        random_feature, seed: the random controls z_r (one fresh per sample).
        batch_size, device, outputs: see :func:`monai_forget.inference.predict`.

    Raises:
        ValueError: ``data`` has fewer than 2 samples of class ``label``.
    """
    from monai_forget.memorisation.passes import FeatureCarrying, predict_probs, probe_set

    labels = np.asarray(data.labels)
    idx = np.flatnonzero(labels == int(label))
    if idx.size < 2:
        raise ValueError(
            f"M_w needs at least 2 samples of class {label} in the data, found {idx.size}; "
            "pass more in-distribution samples of that class"
        )
    images = np.asarray(data.images)[idx]
    feature.check_fits(images.shape)
    masks = feature.random_masks(len(images), seed, random_feature)
    kwargs = dict(batch_size=batch_size, device=device, outputs=outputs)
    data_y = probe_set(images)
    pu = predict_probs(FeatureCarrying(model, feature), data_y, "unique-feature", **kwargs)
    carrying = FeatureCarrying(model, feature, masks, random_feature)
    pr = predict_probs(carrying, data_y, "random-feature", **kwargs)
    return compute_white_box_score(pu, pr, int(label))
