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
in order, as the letter decoys enumerate a small space. Drawn by
``draw_decoys(template, n, rng, exclude=roster, source="names")``.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from functools import cache

__all__ = ["faker_version", "name_pool", "name_space"]

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


def name_space(
    template: str,
) -> tuple[list[tuple[str, ...]], Callable[[tuple[str, ...]], str], Callable[[str], str]]:
    """The names that fill each run of letters of ``template`` (a
    :func:`~.decoys.decoy_template`), how a pick of one per run becomes a text, and the
    key texts are compared by (upper case): what :func:`~.decoys.draw_decoys` draws
    from with ``source="names"``.

    Raises:
        ValueError: a template with digits or no letters, or a run of letters no name
            has the length of.
    """
    if "0" in template or not _RUNS.search(template):
        raise ValueError(
            f"name decoys need a template of letters (digits have no name decoys: use "
            f"random-letter decoys), got {template!r}"
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

    def compose(picked: tuple[str, ...]) -> str:
        out, end = [], 0
        for run, name in zip(runs, picked, strict=True):
            out += [template[end : run.start()], _cased(name, run.group())]
            end = run.end()
        return "".join([*out, template[end:]])

    return choices, compose, str.upper
