"""Refusals of a bad level, fraction or choice, written once and called at the
library's public boundary (the command line adds no rule of its own)."""

from __future__ import annotations

from collections.abc import Collection
from typing import TypeVar

__all__ = ["check_choice", "check_fraction"]

T = TypeVar("T")


def check_fraction(name: str, value: float, example: str = "") -> float:
    """``value`` as a float when it lies in the open interval (0, 1), else a ``ValueError``
    naming ``name`` (NaN is refused too).

    Args:
        name: the parameter's name as the caller knows it (e.g. ``"alpha"``).
        value: the level, share or fraction given.
        example: a sensible value, added to the message (e.g. ``"0.05"``).
    """
    if not 0.0 < value < 1.0:
        hint = f"; e.g. {example}" if example else ""
        raise ValueError(f"{name} must be in (0, 1), got {value}{hint}")
    return float(value)


def check_choice(name: str, value: T, choices: Collection[T]) -> T:
    """``value`` when it is one of ``choices``, else a ``ValueError`` naming ``name``, the
    value given and every choice.

    Args:
        name: the parameter's name as the caller knows it (e.g. ``"correction"``).
        value: what was given.
        choices: the values it may take.
    """
    if value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}")
    return value
