"""Which of several flagged names leaked: each tested against its likeness to another.

A model that memorised one burned-in name reacts to its glyphs' strokes, and so to every
roster name whose rendering overlaps them: with a name on a 10-image series, names
sharing its strokes were flagged beside it (issue 36). The scan's decoys cannot carry
that, since they are random texts. This step asks, for every ordered pair (X, Y) of
flagged names, whether X moves the model more than random texts that look at least as
much like Y as X does:

    likeness(t, Y) = <ink(t), ink(Y)> / sqrt(|ink(t)| |ink(Y)|)   (cosine of the rendered
    masks, aligned where the text is stamped);

    decoys of X given Y: random texts of X's kind (the scan's random-letter space, no
    roster name) with likeness(t, Y) >= likeness(X, Y), up to ``decoys`` of them;

    p(X | Y) = (1 + #{decoys with M >= M(X)}) / (1 + n).

If X moved the model only through its likeness to a memorised Y, decoys at least as like
Y move it at least as much (conservative where M grows with likeness), so p(X | Y) is
large; a memorised X moves it more than all of them. The p-values are corrected over
the tested pairs with the scan's correction.

- X is *explained by* Y when the adjusted p(X | Y) is at or above alpha while its decoys
  could have given p below alpha (at least ``ceil(1 / alpha)`` of them);
- a pair with fewer decoys cannot be tested (X and Y look too much alike for this scan
  to tell which one it reacts to);
- a flagged name explained by no other flagged name is *attributed*; when each is
  explained by another, all stay attributed: the step never clears every flag.

Letter identity alone does not work: tried first, on a model that matches KATE's pixels,
it kept ERIC (whose E and K share a vertical stroke, at the same place) and set KATE
aside. This step is the product's, not a method of Hartley & Tsaftaris 2022: the paper
scores one known feature; a roster scan needs it because its candidates overlap.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from monai_forget.canary.render import render_text, text_shape
from monai_forget.memorisation.decoys import draw_decoys
from monai_forget.stats import benjamini_hochberg, bonferroni

__all__ = ["Attribution", "attribute_flags", "attributed_names", "attribution_decoys", "likeness"]

#: Decoys per tested pair.
ATTRIBUTION_DECOYS = 999
#: Random texts drawn per pair before keeping those at least as like the other name.
ATTRIBUTION_POOL = 50_000


@dataclass(frozen=True)
class Attribution:
    """One flagged name tested against its likeness to another.

    Attributes:
        name: the flagged name tested (X).
        given: the other flagged name (Y).
        likeness: likeness(X, Y), the cosine of their rendered ink.
        pvalue: p(X | Y) (module docstring).
        pvalue_adjusted: after the scan's correction over the tested pairs (``None``
            when the pair could not be tested).
        n_decoys: random texts at least as like Y as X is (at most ``decoys``).
        testable: whether there were enough of them for p below alpha.
        explained: whether X's M is no more than such texts give (testable only).
    """

    name: str
    given: str
    likeness: float
    pvalue: float
    pvalue_adjusted: float | None
    n_decoys: int
    testable: bool
    explained: bool


def _ink(texts: Sequence[str], scale: int, shape: tuple[int, int]) -> np.ndarray:
    """``(len(texts), h * w)`` float masks, each padded to ``shape`` at the top left."""
    out = np.zeros((len(texts), *shape), dtype=np.float32)
    for i, text in enumerate(texts):
        mask = render_text(text, scale)
        out[i, : mask.shape[0], : mask.shape[1]] = mask
    return out.reshape(len(texts), -1)


def likeness(texts: Sequence[str], other: str, scale: int = 1) -> np.ndarray:
    """Cosine of each text's rendered ink with ``other``'s, aligned at the stamp origin
    (texts of any lengths: each is padded on the right to the longest)."""
    shape = text_shape(max(len(t) for t in [*texts, other]), scale)
    a, b = _ink(texts, scale, shape), _ink([other], scale, shape)[0]
    norms = np.sqrt(a.sum(axis=1) * b.sum())
    return np.divide(a @ b, norms, out=np.zeros(len(texts)), where=norms > 0)


def attribution_decoys(
    name: str,
    given: str,
    n: int,
    rng: np.random.Generator,
    *,
    exclude: Sequence[str] = (),
    scale: int = 1,
    pool: int = ATTRIBUTION_POOL,
) -> list[str]:
    """Random texts of ``name``'s kind at least as like ``given`` as ``name`` is, none in
    ``exclude`` (nor ``name``): the first ``n`` of ``pool`` draws that qualify."""
    drawn = draw_decoys(name, pool, rng, exclude=[name, *exclude])
    near = likeness(drawn, given, scale) >= likeness([name], given, scale)[0]
    return [t for t, keep in zip(drawn, near, strict=True) if keep][:n]


def attribute_flags(
    flagged: Sequence[str],
    m_of: Callable[[Sequence[str]], np.ndarray],
    *,
    roster: Sequence[str],
    alpha: float,
    correction: str,
    seed: int,
    scale: int = 1,
    decoys: int = ATTRIBUTION_DECOYS,
) -> tuple[Attribution, ...]:
    """Test every flagged name against every other (module docstring).

    Args:
        flagged: the names the scan flagged.
        m_of: M of each text on the audited model (Eq. 1, the scan's probes, controls
            and stamp), in the texts' order.
        roster: every candidate name (never used as a decoy).
        alpha, correction: the scan's level and correction (applied over the pairs).
        seed: seed of the decoys (one stream per pair).
        scale: glyph scale of the scan's text.
        decoys: decoys per pair.

    Returns:
        One :class:`Attribution` per ordered pair of flagged names.
    """
    enough = math.ceil(1 / alpha)
    pairs = []
    for x in flagged:
        for y in (y for y in flagged if y != x):
            rng = np.random.default_rng([int(seed), zlib.crc32(f"{x}|{y}".encode())])
            texts = attribution_decoys(x, y, decoys, rng, exclude=roster, scale=scale)
            m = m_of([x, *texts])
            p = (1 + int(np.sum(m[1:] >= m[0]))) / (1 + len(texts))
            pairs.append((x, y, float(likeness([x], y, scale)[0]), p, len(texts)))
    tested = [p for *_, p, n in pairs if n >= enough]
    adjust = {"bh": benjamini_hochberg, "bonferroni": bonferroni}.get(correction, np.copy)
    adjusted = iter(adjust(np.array(tested)) if tested else ())
    out = []
    for x, y, like, p, n in pairs:
        p_adj = float(next(adjusted)) if n >= enough else None
        explained = p_adj is not None and p_adj >= alpha
        out.append(Attribution(x, y, like, p, p_adj, n, p_adj is not None, explained))
    return tuple(out)


def attributed_names(flagged: Sequence[str], attributions: Sequence[Attribution]) -> list[str]:
    """The flagged names no other flagged name explains, in ``flagged``'s order; all of
    them when each is explained by another (the step never clears every flag)."""
    explained = {a.name for a in attributions if a.explained}
    kept = [n for n in flagged if n not in explained]
    return kept or list(flagged)
