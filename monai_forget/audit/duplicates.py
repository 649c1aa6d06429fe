"""Collapse duplicated query images before a withdrawal audit decides.

Every auditor treats D_Q's samples as independent draws of the withdrawn site's data. A
D_Q of two images repeated 25 times is two samples, not fifty: scored as fifty, its mean
is as noisy as two images' but judged as fifty's, and a never-seen set is called "not
forgotten" far more often than alpha (issue 66's simulation: 38.5 % against 9 % for 50
distinct images; benchmarks/results/duplicated_query.md, 2,000 audits per row: 34.2 %
as given, 4.1 % collapsed, 4.5 % for 50 distinct images). So each auditor keeps one image
of each group of copies and decides on the distinct ones (the effective sample size), and
says how many it collapsed. Only D_Q's copies are collapsed; the known sets keep theirs
(a set of blank frames or copies among the known members or non-members is not
measured here).

Two images are copies when they have the same content hash (SHA-256 of their pixels),
or near copies when their thumbnails (area means on a grid of at most
:data:`THUMBNAIL` x :data:`THUMBNAIL` pixels) correlate at :data:`NEAR_COPY_CORRELATION`
or more: the same image re-encoded, re-windowed, rescaled or lightly noised. Pearson's r
ignores brightness and contrast, so constant frames (blank, empty) are not correlated
with anything; they are copies of each other by hash when they hold the same value, and
are otherwise left to :func:`~monai_forget.audit.query_checks.check_query_images`, which
accepts at most :data:`~monai_forget.audit.query_checks.OUTSIDE_SHARE` of them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import torch

from monai_forget.data import LabelledImages

__all__ = [
    "NEAR_COPY_CORRELATION",
    "THUMBNAIL",
    "Collapsed",
    "collapse_duplicates",
    "distinct_query",
]

#: Two thumbnails correlating at least this much are near copies of one image. Distinct
#: images of this project's real sets stay below it: at most 0.9988 (adjacent ACDC MR
#: slices), 0.994 (digits), 0.986 (MNIST), 0.975 (PneumoniaMNIST); benchmarks/near_copies.py.
NEAR_COPY_CORRELATION = 0.9995
#: The thumbnail's largest side (pixels): the model inputs audited here (28-64 px) whole;
#: a larger image is area-averaged to it, which noise and re-encoding do not survive.
THUMBNAIL = 64
#: Rows of the correlation matrix computed at once (memory: this x N floats).
_BLOCK = 1024


@dataclass(frozen=True)
class Collapsed:
    """D_Q with its copies collapsed.

    Attributes:
        distinct: one image of each group of copies, the first in D_Q's order.
        given_hashes: every given image's content hash, in D_Q's order.
        exact: images dropped as exact copies of a kept one (same content hash).
        near: images dropped as near copies (thumbnails correlating at the threshold).
    """

    distinct: LabelledImages
    given_hashes: tuple[str, ...]
    exact: int
    near: int

    @property
    def given(self) -> int:
        """How many images D_Q held."""
        return len(self.given_hashes)

    @property
    def removed(self) -> int:
        return self.exact + self.near

    @property
    def copies(self) -> tuple[str, ...]:
        """The content hashes of the images collapsed (an exact copy's is its original's)."""
        kept = Counter(self.distinct.sample_hashes.tolist())
        return tuple(sorted((Counter(self.given_hashes) - kept).elements()))

    def as_details(self) -> dict[str, int]:
        """The counts as an audit result's ``details`` record them (none when nothing
        was collapsed)."""
        if not self.removed:
            return {}
        return {"query_given": self.given, "query_exact_copies": self.exact,
                "query_near_copies": self.near}  # fmt: skip


def thumbnails(images: np.ndarray, side: int = THUMBNAIL) -> np.ndarray:
    """Each image's area means on a grid of at most ``side`` x ``side``, channels pooled,
    flattened ``(N, h * w)`` float64."""
    x = torch.tensor(np.asarray(images, dtype=np.float32)).mean(dim=1, keepdim=True)
    h, w = x.shape[-2:]
    x = torch.nn.functional.adaptive_avg_pool2d(x, (min(h, side), min(w, side)))
    return x.flatten(1).double().numpy()


def _near_groups(images: np.ndarray, threshold: float) -> np.ndarray:
    """For each image, the index of the first image it is a near copy of (itself if none),
    following chains of near copies (union-find over the pairs at the threshold)."""
    flat = thumbnails(images)
    flat = flat - flat.mean(axis=1, keepdims=True)
    norms = np.linalg.norm(flat, axis=1)
    varying = norms > 0
    z = np.where(varying[:, None], flat / np.where(varying, norms, 1.0)[:, None], 0.0)
    parent = np.arange(len(z))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for start in range(0, len(z), _BLOCK):
        r = z[start : start + _BLOCK] @ z.T
        rows, cols = np.nonzero(r >= threshold)
        for i, j in zip(rows + start, cols, strict=True):
            if i < j and varying[i] and varying[j]:
                a, b = root(int(i)), root(int(j))
                parent[max(a, b)] = min(a, b)
    return np.array([root(i) for i in range(len(z))])


def collapse_duplicates(
    query: LabelledImages, threshold: float = NEAR_COPY_CORRELATION
) -> Collapsed:
    """Keep one image of each group of exact or near copies in ``query`` (module docstring).

    Args:
        query: D_Q.
        threshold: the thumbnails' Pearson correlation at or above which two images are
            near copies (above ``1.0``: exact copies only).

    Returns:
        The distinct images (in D_Q's order, hashes and ids kept) and the counts.
    """
    n = len(query)
    _, first_of_hash = np.unique(query.sample_hashes, return_index=True)
    unique = np.sort(first_of_hash)
    exact = n - len(unique)
    if threshold > 1.0 or len(unique) < 2:
        keep = unique
    else:
        groups = _near_groups(np.asarray(query.images)[unique], threshold)
        keep = unique[groups == np.arange(len(unique))]
    hashes = tuple(str(h) for h in query.sample_hashes)
    return Collapsed(query.subset(keep), hashes, exact, len(unique) - len(keep))


def distinct_query(query: LabelledImages, minimum: int = 2) -> Collapsed:
    """:func:`collapse_duplicates` of D_Q, refused when fewer than ``minimum`` distinct
    images remain.

    Raises:
        ValueError: naming the counts and the fix.
    """
    collapsed = collapse_duplicates(query)
    if len(collapsed.distinct) < minimum:
        raise ValueError(
            f"the query set holds {collapsed.given} images but only {len(collapsed.distinct)} "
            f"distinct ({collapsed.exact} exact and {collapsed.near} near copies of others); "
            f"an audit needs at least {minimum} distinct images: pass the withdrawn "
            "provider's own, different images"
        )
    return collapsed
