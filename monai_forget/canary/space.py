"""Randomness spaces of texts: a template, its size, and uniform draws from it.

A template writes each character class as one symbol: ``A`` a capital letter, ``a`` a
small letter, ``0`` a digit; any other character stands for itself. ``"AAAAA"`` is the
space of five capital letters (26^5 texts). The decoys of a leak scan are texts of a
name's template, and the random canaries of an exposure audit are drawn from a stated
template (Carlini et al. 2019: canaries drawn uniformly from a randomness space).
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable, Iterable, Sequence

import numpy as np

__all__ = ["CLASSES", "draw_distinct", "random_texts", "space_size", "text_template"]

#: The character classes of a template.
CLASSES = {"A": string.ascii_uppercase, "a": string.ascii_lowercase, "0": string.digits}


def text_template(text: str) -> str:
    """The template of ``text``: each capital letter as ``A``, small letter as ``a``,
    digit as ``0``; spaces and punctuation kept."""
    return "".join(next((k for k, v in CLASSES.items() if c in v), c) for c in text)


def space_size(template: str) -> int:
    """How many texts the space of ``template`` (or of a text of it) holds."""
    return math.prod(len(CLASSES.get(c, c)) for c in text_template(template))


def draw_distinct(
    choices: Sequence[Sequence[str]],
    n: int,
    rng: np.random.Generator | int | None,
    compose: Callable[[tuple[str, ...]], str],
    allowed: Callable[[str], bool],
) -> list[str]:
    """``n`` distinct texts ``compose(picks)``, one uniform pick from each of ``choices``
    per text, keeping only ``allowed`` ones, in the order drawn (the space must hold more
    than ``n`` allowed texts)."""
    rng = np.random.default_rng(rng)
    drawn: dict[str, None] = {}  # an insertion-ordered set
    while len(drawn) < n:
        picks = [rng.integers(len(c), size=2 * (n - len(drawn))) for c in choices]
        for row in zip(*picks, strict=True):
            text = compose(tuple(c[i] for c, i in zip(choices, row, strict=True)))
            if allowed(text):
                drawn.setdefault(text)
                if len(drawn) == n:
                    break
    return list(drawn)


def random_texts(
    template: str,
    n: int,
    rng: np.random.Generator | int | None = None,
    exclude: Iterable[str] = (),
) -> list[str]:
    """``n`` distinct texts drawn uniformly from the space of ``template``, none in
    ``exclude``, in the order drawn.

    Raises:
        ValueError: ``n`` below 1, or a space that does not hold more than ``n`` texts
            besides the excluded ones.
    """
    template = text_template(template)
    excluded = set(exclude)
    if n < 1 or space_size(template) - len(excluded) <= n:
        raise ValueError(
            f"cannot draw {n} distinct texts from the space {template!r} "
            f"({space_size(template):,} texts, {len(excluded)} excluded)"
        )
    choices = [CLASSES.get(c, c) for c in template]
    return draw_distinct(choices, n, rng, "".join, lambda text: text not in excluded)
