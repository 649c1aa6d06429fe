"""Is the evaluated data the audited query set? Order-free checks by content hash.

Evaluation-time audit metrics reproduce an audit only on the very samples it audited:
evaluating the first 40 samples of a 200-sample D_Q gave rho_KS 1.14 ("forgotten")
where the whole set gives 0.58. The metrics identify each evaluated image by the same
content hash the audit recorded (:func:`monai_forget.fingerprint.image_hashes`, kept as
a 64-bit prefix so it travels in a tensor buffer and across ranks) and compare the
multisets, whatever the order.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from monai_forget.checks import check_choice
from monai_forget.fingerprint import image_hashes

__all__ = ["MISSING_ID", "QueryCheck", "SampleCheck", "hash_ids", "image_ids"]

#: Buffer value of a sample evaluated without its image (nothing to check it with).
MISSING_ID = 0
_FIX = (
    "evaluate every sample of the audited set exactly once (DataLoader drop_last=False, no "
    "DistributedSampler padding, the same selection and preprocessing as the audit)"
)


def hash_ids(hashes: Sequence[str] | np.ndarray) -> np.ndarray:
    """64-bit ids (int64) from hex content hashes: their first 16 hex digits."""
    out = np.array([int(str(h)[:16], 16) for h in hashes], dtype=np.uint64).view(np.int64)
    out[out == MISSING_ID] = 1  # keep the sentinel free (probability 2**-64)
    return out


_last: tuple[torch.Tensor, int, torch.Tensor] | None = None  # (images, version, ids)


def image_ids(images: Any) -> torch.Tensor:
    """Ids of a batch of images ``(B, C, H, W)``, hashed as float32 like the audit's data.

    The last batch's ids are kept: handlers sharing one output transform get the very
    same tensor (held here, so its identity cannot be reused), hashed once; a tensor
    changed in place since (its version counter moved) is hashed again. The entry is
    read and replaced whole, so threads never pair one batch with another's ids.
    """
    global _last
    entry = _last
    if entry is not None and entry[0] is images and entry[1] == images._version:
        return entry[2].clone()
    given = images
    if isinstance(images, (list, tuple)):
        images = torch.stack([torch.as_tensor(i) for i in images])
    array = torch.as_tensor(images).detach().cpu().numpy().astype(np.float32, copy=False)
    ids = torch.from_numpy(hash_ids(image_hashes(array)))
    if isinstance(given, torch.Tensor):
        _last = (given, given._version, ids)
    return ids.clone()


@dataclass(frozen=True)
class SampleCheck:
    """How an evaluation-time audit metric (or handler) checks, by content, that it
    evaluated exactly the audited samples. The check is on by default, since a statistic
    over the wrong samples (40 of 150, another provider) looks like any other; a metric
    given ``check=None`` runs without it, for data that cannot be hashed.

    Attributes:
        hashes: content hashes of the audited samples (``None``: those the reference
            carries, from the auditor's ``fit_reference(query, ...)``). Each update must
            then come with the images (``images=``, see
            ``handlers.batch_output(image_key=...)``).
        on_mismatch: ``"error"`` or ``"warn"`` when other samples were evaluated.
        on_extra: evaluated samples outside the audited set are an ``"error"``, or are
            ``"ignore"``d (the evaluation ran over a larger set, e.g. the reference-model
            audit set).
        copies: hashes of the audited set's images the audit collapsed as copies of others
            (:func:`~monai_forget.audit.duplicates.collapse_duplicates`; ``None``: those the
            reference carries): evaluated, checked, and left out of the statistic.
    """

    hashes: Sequence[str] | None = None
    on_mismatch: str = "error"
    on_extra: str = "error"
    copies: Sequence[str] | None = None


class QueryCheck:
    """The expected samples of an evaluation (their ids) and what to do on a mismatch.

    Args:
        expected: content hashes (hex) of the audited samples.
        name: how messages name the set (e.g. "D_Q").
        on_mismatch: ``"error"`` (raise) or ``"warn"``.
        on_extra: evaluated samples outside the set are an ``"error"`` (a mismatch), or
            ``"ignore"``d: the evaluation ran over a larger set (the reference-model
            audit's) and the statistic uses the audited samples among it.
        copies: hashes, among ``expected``, of images the audit collapsed as copies of
            others: the statistic uses each image the audit decided on once.
    """

    def __init__(
        self,
        expected: Sequence[str],
        name: str = "D_Q",
        on_mismatch: str = "error",
        on_extra: str = "error",
        copies: Sequence[str] = (),
    ):
        check_choice("on_mismatch", on_mismatch, ("error", "warn"))
        check_choice("on_extra", on_extra, ("error", "ignore"))
        self.expected = hash_ids(expected)
        kept = Counter(self.expected.tolist()) - Counter(hash_ids(list(copies)).tolist())
        self.decided = np.array(sorted(kept), dtype=np.int64)
        self.name = name
        self.on_mismatch = on_mismatch
        self.on_extra = on_extra

    def problems(self, evaluated: np.ndarray) -> list[str]:
        """What differs between the evaluated ids and the expected ones (empty: nothing)."""
        if np.any(evaluated == MISSING_ID):
            return [
                "some evaluated samples came without their image, so the data could not be "
                "checked against the audit (pass image_key to batch_output)"
            ]
        want, got = Counter(self.expected.tolist()), Counter(np.asarray(evaluated).tolist())
        missing = sum((want - got).values())
        # A sample D_Q itself holds twice (data sets have exact duplicates) is evaluated
        # twice; only evaluations beyond its count in D_Q are repeats.
        repeated = sum(c - want[k] for k, c in got.items() if k in want and c > want[k])
        foreign = sum(c for k, c in got.items() if k not in want)
        out = []
        if missing:
            out.append(
                f"{missing} of the {len(self.expected)} samples of the audited {self.name} "
                "were not evaluated"
            )
        if repeated:
            out.append(
                f"{repeated} evaluation(s) repeated a sample (e.g. DistributedSampler padding)"
            )
        if foreign and self.on_extra == "error":
            out.append(f"{foreign} evaluated sample(s) are not in the audited {self.name}")
        return out

    def check(self, evaluated: np.ndarray, statistic: str) -> np.ndarray:
        """Raise or warn, naming the problem and the fix, when the sets differ.

        Returns:
            The mask of evaluated samples the statistic uses: the first evaluation of each
            image the audit decided on (its copies, collapsed by the audit, left out), and
            with ``on_extra="error"`` (a mismatch only warned of) the samples outside it.
        """
        evaluated = np.asarray(evaluated)
        keep = np.isin(evaluated, self.expected)
        found = self.problems(evaluated[keep] if self.on_extra == "ignore" else evaluated)
        first = np.zeros(len(evaluated), dtype=bool)
        first[np.unique(evaluated, return_index=True)[1]] = True
        keep = first & np.isin(evaluated, self.decided)
        if self.on_extra == "error":  # a warned mismatch: the statistic over what was evaluated
            keep |= ~np.isin(evaluated, self.expected)
        if not found:
            return keep
        message = (
            f"{statistic} reproduces the audit only on the audited {self.name}: "
            f"{'; '.join(found)}; {_FIX}"
        )
        if self.on_mismatch == "error":
            raise ValueError(message)
        warnings.warn(message, stacklevel=3)
        return keep
