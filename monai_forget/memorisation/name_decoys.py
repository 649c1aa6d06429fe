"""Decoys that are names: real given and family names in place of random letters.

The decoy p-value of :mod:`~monai_forget.memorisation.decoys` is exact only if the name
under test is exchangeable with its decoys while the model never saw it. Random letter
strings are not exchangeable with real names: a model reacts to the letter shapes and
pairs that names share (control scans flagged names like UMA and ADA in 3 of 20), so a
name's M sits higher among random strings than among other names.

Here the decoys of a name are drawn from the names of Faker's per-locale person
providers (given names, male and female, and family names, every locale whose names
are written in A-Z), the population a roster's names come from:

- every run of letters of the name's kind (:func:`~.decoys.decoy_template`, e.g.
  ``AAAA AAA`` for ``JANE ROE``) is replaced by a name of the same length, with the
  run's letter case (``Aaaa`` -> ``Mary``); spaces and punctuation stay;
- a decoy is never a roster name (compared without case);
- the pool is the set of those names, sorted, so a seed gives the same draw with the
  same Faker release (its version is recorded with the scan).

Fewer names than decoys asked for (3-letter names: about 530) gives every one of them,
in order, as the letter decoys enumerate a small space.
"""

from __future__ import annotations

import importlib
import itertools
import math
import re
from collections.abc import Iterable
from functools import cache

import numpy as np

from monai_forget.memorisation.decoys import decoy_template

__all__ = ["draw_name_decoys", "faker_version", "name_pool"]

#: The person providers' lists of names: given (any sex) and family names.
_NAME_LISTS = ("first_names", "first_names_male", "first_names_female", "last_names")
_RUNS = re.compile(r"[Aa]+")


def faker_version() -> str:
    """The Faker release the name pool comes from."""
    from faker import VERSION

    return str(VERSION)


@cache
def name_pool() -> dict[int, tuple[str, ...]]:
    """Length -> every distinct A-Z name (upper case, sorted) of Faker's person providers.

    Raises:
        ImportError: Faker is not installed (``pip install faker``).
    """
    from faker.config import AVAILABLE_LOCALES

    names: set[str] = set()
    for locale in AVAILABLE_LOCALES:
        try:
            provider = importlib.import_module(f"faker.providers.person.{locale}").Provider
        except ModuleNotFoundError:  # a locale without a person provider
            continue
        for attribute in _NAME_LISTS:
            listed = vars(provider).get(attribute)
            if isinstance(listed, (dict, list, tuple)):
                names.update(n.upper() for n in listed if n.isascii() and n.isalpha())
    by_length: dict[int, list[str]] = {}
    for name in names:
        by_length.setdefault(len(name), []).append(name)
    return {length: tuple(sorted(group)) for length, group in by_length.items()}


def _cased(name: str, run: str) -> str:
    """``name`` in the letter case of ``run`` (``A``: capital, ``a``: small), letter by letter."""
    return "".join(c if k == "A" else c.lower() for c, k in zip(name, run, strict=True))


def draw_name_decoys(
    template: str,
    n: int,
    rng: np.random.Generator | int | None = None,
    *,
    exclude: Iterable[str] = (),
) -> list[str]:
    """``n`` distinct name decoys of the kind ``template`` (module docstring).

    Args:
        template: a text or its :func:`~.decoys.decoy_template` of letters (``A``/``a``),
            spaces and punctuation.
        n: decoys wanted (all there are when the names allow fewer).
        rng: random generator or seed.
        exclude: texts never drawn (the roster), compared without case.

    Raises:
        ValueError: ``n`` below 1, a template with digits or no letters, or a run of
            letters no name has the length of.
    """
    template = decoy_template(template)
    if n < 1 or "0" in template or not _RUNS.search(template):
        raise ValueError(
            f"name decoys need n >= 1 and a template of letters (digits have no name "
            f"decoys: use random-letter decoys), got {template!r}, {n}"
        )
    pool = name_pool()
    runs = list(_RUNS.finditer(template))
    choices = []
    for run in runs:
        names = pool.get(len(run.group()), ())
        if not names:
            raise ValueError(
                f"no name of {len(run.group())} letters in the name lists: use "
                "random-letter decoys for this roster"
            )
        choices.append(names)
    excluded = {str(e).upper() for e in exclude}

    def text(picked: tuple[str, ...]) -> str:
        out, end = [], 0
        for run, name in zip(runs, picked, strict=True):
            out += [template[end : run.start()], _cased(name, run.group())]
            end = run.end()
        return "".join([*out, template[end:]])

    if math.prod(len(c) for c in choices) <= n + len(excluded):
        found = [text(p) for p in itertools.product(*choices)]
        found = [t for t in found if t.upper() not in excluded]
        if not found:
            raise ValueError(
                f"no name decoy of the kind {template!r} is left once the roster is excluded"
            )
        return found
    rng = np.random.default_rng(rng)
    drawn: dict[str, None] = {}  # an insertion-ordered set
    while len(drawn) < n:
        picks = [rng.integers(len(c), size=2 * (n - len(drawn))) for c in choices]
        for row in zip(*picks, strict=True):
            candidate = text(tuple(c[i] for c, i in zip(choices, row, strict=True)))
            if candidate.upper() not in excluded:
                drawn.setdefault(candidate)
                if len(drawn) == n:
                    break
    return list(drawn)
