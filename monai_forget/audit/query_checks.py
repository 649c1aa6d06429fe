"""Query sets no withdrawal audit can decide on, refused before any model runs.

A membership audit compares the target's outputs on D_Q with its outputs on known data.
A D_Q of blank frames, of NaN pixels, of one image repeated, or of another modality gives
outputs that say nothing about membership, and every auditor would still turn them into
"forgotten" (a set the model never saw scores like non-members). These checks turn such a
set into an error that says what is wrong. They compare D_Q with the known samples only
on coarse per-image intensity statistics (mean, spread, median), so a site that images
the same anatomy with another scanner passes (PneumoniaMNIST's separately collected test
split: 0.2 % of it outside; the same images darkened to half: none), while a set of
another kind does not (MNIST digits for a chest X-ray model: all of it outside).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from monai_forget.audit.duplicates import Collapsed, distinct_query
from monai_forget.data import LabelledImages

__all__ = ["OUTSIDE_SHARE", "check_labels_fit", "check_query_images", "checked_query"]

#: D_Q is refused when more than this share of it is constant images, or, of the rest, lies
#: outside the known samples' envelope (:func:`outside_share`): another kind of image.
OUTSIDE_SHARE = 0.2
#: The envelope: the known samples' 0.5-99.5 % range of each statistic, widened on both
#: sides by this share of that range.
_MARGIN = 0.5
_TAIL = 0.005


def _statistics(images: np.ndarray) -> np.ndarray:
    flat = images.reshape(len(images), -1).astype(np.float64)
    return np.stack([flat.mean(1), flat.std(1), np.median(flat, 1)], axis=1)


def outside_share(query: np.ndarray, known: np.ndarray) -> float:
    """The share of ``query`` images whose mean, spread or median pixel value lies outside
    the envelope of the ``known`` images' (their 0.5-99.5 % range widened by half of it
    on each side)."""
    q, k = _statistics(query), _statistics(known)
    low, high = np.quantile(k, _TAIL, axis=0), np.quantile(k, 1 - _TAIL, axis=0)
    span = high - low
    out = (q < low - _MARGIN * span) | (q > high + _MARGIN * span)
    return float(out.any(axis=1).mean())


def checked_query(query: LabelledImages, known: LabelledImages) -> Collapsed:
    """D_Q checked (:func:`check_query_images`) and its copies collapsed
    (:func:`~monai_forget.audit.duplicates.distinct_query`): what every auditor decides on.

    Raises:
        ValueError: naming what is wrong and what to pass instead.
    """
    check_query_images(query, known)
    return distinct_query(query)


def check_query_images(query: LabelledImages, known: LabelledImages) -> None:
    """Refuse a D_Q that holds non-finite pixels, more than :data:`OUTSIDE_SHARE` constant
    images, or more than that share of images unlike the known samples (another modality
    or scale). One image repeated is refused by :func:`checked_query`, with the count.

    Raises:
        ValueError: naming what is wrong and what to pass instead.
    """
    images = np.asarray(query.images)
    n = len(images)
    flat = images.reshape(n, -1)
    bad = ~np.isfinite(flat).all(axis=1)
    if bad.any():
        first = query.ids[int(np.flatnonzero(bad)[0])] if query.ids else int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"the query set has {int(bad.sum())} of {n} image(s) with NaN or inf pixels (first: "
            f"{first}); drop or repair them before the audit"
        )
    constant = np.ptp(flat, axis=1) == 0
    if constant.mean() > OUTSIDE_SHARE:  # outputs on blank frames say nothing of membership
        raise ValueError(
            f"{int(constant.sum())} of the query set's {n} images are constant (every pixel "
            "the same: blank or empty frames); no audit can tell whether the model remembers "
            "them. Pass the withdrawn provider's images"
        )
    share = outside_share(images[~constant], np.asarray(known.images))
    if share > OUTSIDE_SHARE:
        raise ValueError(
            f"the query set does not look like the model's data: {share:.0%} of its images "
            "have a mean, spread or median pixel value outside the range of the known samples "
            "(another modality, or another intensity scale?); pass images of the model's own "
            "kind, preprocessed as its training data"
        )


def check_labels_fit(model: nn.Module, sets: dict[str, LabelledImages]) -> None:
    """Refuse sets whose images the model cannot take or whose labels exceed its outputs,
    naming the set (``sets``: role -> data). One forward pass on one image of each set,
    on the CPU, before any model trains; every auditor's ``audit`` runs it.

    Raises:
        ValueError: the model cannot take a set's images, or a label is not one of its
            classes.
    """
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    for role, data in sets.items():
        if not len(data):
            continue
        with torch.no_grad():
            try:
                outputs = model(torch.tensor(data.images[:1], device=device)).shape[-1]
            except RuntimeError as err:
                raise ValueError(
                    f"{role}: the model cannot take its images of shape "
                    f"{tuple(data.images.shape[1:])} ({str(err).splitlines()[0]})"
                ) from None
        top = int(data.labels.max())
        if top >= outputs:
            raise ValueError(
                f"{role}: label {top} is outside the model's {outputs} classes (0..{outputs - 1});"
                " check the labels or the model"
            )
