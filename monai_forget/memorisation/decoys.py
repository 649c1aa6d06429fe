"""A calibrated test for M: the name ranked among decoys the model never saw.

The paper's one-tailed t-test (Hartley & Tsaftaris 2022, Sec. 2.3) asks whether the
unique feature z_u moves the model more than *random pixel patches*. A model that never
saw z_u can still react to a compact letter more than to scattered pixels, so that
test fires on models trained without the feature. The null used here is built from
**decoys of the same kind**: texts of the same length, in the same typeface, scale,
place and pixel value, that the model never saw. This is the exposure idea of Carlini
et al., "The Secret Sharer" (USENIX Security 2019, Sec. 4): rank the canary among all
candidates of its randomness space.

With M_1..M_n the scores of n decoys (Eq. 1 with the same probes and random controls),

    rank = 1 + #{j : M_j >= M},     p = rank / (n + 1),
    exposure = log2((n + 1) / rank) = -log2(p)   (bits; Carlini et al., Def. 3).

Under the null that the name is exchangeable with the decoys (the model never saw it,
and the name is a draw like the decoys), P(p <= a) <= a for every a: the test is exact
(ties counted against the name). The smallest attainable p is 1 / (n + 1).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from monai_forget.canary.space import CLASSES, draw_distinct, text_template
from monai_forget.results import Result

__all__ = [
    "DecoyTest",
    "decoy_template",
    "decoy_test",
    "draw_decoys",
    "draw_distinct",
    "feature_decoys",
    "fresh_seed",
]


@dataclass(frozen=True)
class DecoyTest(Result):
    """The feature's M ranked among decoys' M (a Monte Carlo / permutation p-value).

    Attributes:
        statistic: M of the feature.
        n_decoys: number of decoys n.
        rank: ``1 + #decoys with M >= statistic`` (1 = above every decoy).
        pvalue: ``rank / (n + 1)``.
        exposure: ``log2((n + 1) / rank)`` bits (Carlini et al. 2019).
        decoy_statistics: the decoys' M.
        decoys: the decoy texts, in the order of ``decoy_statistics``.
    """

    statistic: float
    n_decoys: int
    rank: int
    pvalue: float
    exposure: float
    decoy_statistics: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False)
    decoys: tuple[str, ...] = field(default=(), repr=False)

    @property
    def min_pvalue(self) -> float:
        """The smallest p-value these decoys allow, ``1 / (n + 1)``."""
        return 1.0 / (self.n_decoys + 1)

    def summary(self) -> str:
        return (
            f"calibrated (decoys): rank {self.rank} of {self.n_decoys + 1} candidates, "
            f"p = {self.pvalue:.4g}, exposure {self.exposure:.2f} bits"
        )

    def to_dict(self, decoys: bool = False) -> dict[str, Any]:
        """JSON-friendly record; ``decoys`` adds the decoy texts and their M."""
        out: dict[str, Any] = {
            "statistic": self.statistic,
            "n_decoys": self.n_decoys,
            "rank": self.rank,
            "pvalue": self.pvalue,
            "exposure": self.exposure,
        }
        if decoys:
            out["decoys"] = list(self.decoys)
            out["decoy_statistics"] = self.decoy_statistics.tolist()
        return out


def decoy_test(statistic: float, decoy_statistics: object, decoys: Sequence[str] = ()) -> DecoyTest:
    """Rank ``statistic`` among ``decoy_statistics``: p and exposure (module docstring).

    Args:
        statistic: M of the feature under test.
        decoy_statistics: M of each decoy (at least one, finite).
        decoys: the decoy texts, kept for the record.

    Raises:
        ValueError: no decoys, or a NaN statistic.
    """
    m = float(statistic)
    d = np.array(decoy_statistics, dtype=np.float64, copy=True).ravel()
    if d.size == 0:
        raise ValueError("the calibrated test needs at least one decoy; pass decoys >= 1")
    if math.isnan(m) or np.isnan(d).any():
        raise ValueError("M of the feature or of a decoy is NaN; check the model's outputs")
    rank = 1 + int(np.count_nonzero(d >= m))
    d.flags.writeable = False
    n = int(d.size)
    return DecoyTest(m, n, rank, rank / (n + 1), math.log2((n + 1) / rank), d, tuple(decoys))


def fresh_seed() -> int:
    """A new random seed (from the OS entropy pool), to be recorded with the result."""
    return int(np.random.SeedSequence().entropy % (2**63))


def decoy_template(text: str) -> str:
    """The kind of ``text`` (:func:`~monai_forget.canary.space.text_template`); texts of
    one template share their decoys."""
    return text_template(text)


def draw_decoys(
    template: str,
    n: int,
    rng: np.random.Generator | int | None = None,
    *,
    exclude: Iterable[str] = (),
    source: str = "letters",
) -> list[str]:
    """``n`` distinct decoys of the kind ``template``, none of them in ``exclude``.

    ``template`` is a text or its :func:`decoy_template`. With ``source="letters"`` every
    capital letter is drawn uniformly from A-Z, every small letter from a-z, every digit
    from 0-9; spaces and punctuation stay; every text of the space is equally likely.
    With ``source="names"`` every run of letters is a real name of its length in its
    letter case (:mod:`~monai_forget.memorisation.name_decoys`; ``exclude`` compared
    without case). When the space (minus the excluded texts) holds at most ``n`` texts,
    all of them are returned in order (e.g. the 25 other letters for the one-letter
    feature ``A``): the exact enumeration of Carlini et al.'s exposure.

    Raises:
        ValueError: an empty template, ``n`` below 1, an unknown source, a template the
            source cannot fill, or nothing left to draw.
    """
    template = decoy_template(template)
    if not template or n < 1:
        raise ValueError(f"decoys need a non-empty template and n >= 1, got {template!r}, {n}")
    if source == "names":
        # the names module builds on this one: imported here, not at the top
        from monai_forget.memorisation.name_decoys import name_space

        choices, compose, key = name_space(template)
    elif source == "letters":
        choices, compose, key = [CLASSES.get(c, c) for c in template], "".join, str
    else:
        raise ValueError(f"unknown decoy source {source!r}; choose 'letters' or 'names'")
    excluded = {key(str(e)) for e in exclude if len(str(e)) == len(template)}
    # At most n texts may be left: count them (excluded texts outside the space, e.g.
    # roster strings that are no real name, leave it as large as it was).
    if math.prod(len(c) for c in choices) - len(excluded) <= n:
        found = [compose(t) for t in itertools.product(*choices)]
        found = [t for t in found if key(t) not in excluded]
        if not found:
            raise ValueError(f"no decoy of the kind {template!r} is left once names are excluded")
        if len(found) <= n:
            return found
    return draw_distinct(choices, n, rng, compose, lambda text: key(text) not in excluded)


def feature_decoys(text: str | None, decoys: int | Sequence[str], seed: int) -> list[str]:
    """The decoys of a feature's ``text``: ``decoys`` random texts of its kind, or the
    given texts checked (each another text of the same length)."""
    if text is None:
        raise ValueError(
            "decoys are texts of the feature's kind: build the feature with "
            "UniqueFeature.from_text, or pass decoys=0"
        )
    if isinstance(decoys, int):
        return draw_decoys(text, decoys, seed, exclude=[text])
    texts = [str(t) for t in decoys]
    for i, other in enumerate(texts):
        if len(other) != len(text) or other == text:
            raise ValueError(
                f"decoy {i} must be another text of the feature's length "
                f"({len(text)} characters); fix or drop it"
            )
    return texts
