"""Refusals of a bad number, level, fraction or choice, declared once and called at the
library's public boundary (the command line adds no rule of its own).

A numeric constraint is an :class:`Interval` (scikit-learn's ``_param_validation`` in
small); the ranges the library uses are named here once (:data:`LEVEL`, :data:`SHARE`,
...), and a parameter checked at more than one public boundary has its interval in
:data:`PARAMETERS`, so each range is written once and every refusal of it reads alike.
The command line's types (:func:`monai_forget.cli.options.positive_int`) refuse with
the same intervals.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal, TypeVar

__all__ = [
    "COUNT",
    "HALF_LEVEL",
    "INDEX",
    "LEVEL",
    "NON_NEGATIVE",
    "PARAMETERS",
    "POSITIVE",
    "SHARE",
    "UNIT",
    "Interval",
    "check_choice",
    "check_fraction",
    "check_in",
    "check_parameter",
]

T = TypeVar("T")


@dataclass(frozen=True)
class Interval:
    """The numbers a parameter may take.

    Attributes:
        low: the lower end (``-inf``: none).
        high: the upper end (``inf``: none).
        closed: which ends belong to it.
        integer: whole numbers only (a ``bool`` is never one).
    """

    low: float
    high: float
    closed: Literal["neither", "left", "right", "both"] = "neither"
    integer: bool = False

    def __contains__(self, value: object) -> bool:
        if isinstance(value, (bool, str)):
            return False
        try:
            x = float(value)  # numpy scalars too
        except (TypeError, ValueError):
            return False
        if math.isnan(x) or (self.integer and not x.is_integer()):
            return False
        above = x >= self.low if self.closed in ("left", "both") else x > self.low
        below = x <= self.high if self.closed in ("right", "both") else x < self.high
        return above and below

    def __str__(self) -> str:
        if self.integer and math.isinf(self.high):
            return f"an integer >= {self.low:g}"
        if math.isinf(self.high):
            return f">= {self.low:g}" if self.closed in ("left", "both") else f"> {self.low:g}"
        left = "[" if self.closed in ("left", "both") else "("
        right = "]" if self.closed in ("right", "both") else ")"
        kind = "an integer in " if self.integer else "in "
        return f"{kind}{left}{self.low:g}, {self.high:g}{right}"


#: A significance level or a fraction strictly between 0 and 1.
LEVEL = Interval(0.0, 1.0)
#: A share that may be whole: (0, 1] (a margin of membership strength, a step share).
SHARE = Interval(0.0, 1.0, "right")
#: A coefficient in [0, 1].
UNIT = Interval(0.0, 1.0, "both")
#: Each side's level of a two-sided equivalence test: (0, 0.5).
HALF_LEVEL = Interval(0.0, 0.5)
#: A positive number (a learning rate, an equivalence margin).
POSITIVE = Interval(0.0, math.inf)
#: A number of at least 0 (a tolerance, a weight).
NON_NEGATIVE = Interval(0.0, math.inf, "left")
#: A count of at least 1 (epochs, rounds, samples, workers).
COUNT = Interval(1, math.inf, "left", integer=True)
#: A 0-based index (a round).
INDEX = Interval(0, math.inf, "left", integer=True)

#: Parameters checked at more than one public boundary: their interval, declared once.
PARAMETERS: dict[str, Interval] = {
    "alpha": LEVEL,  # a test's level (every auditor's and scan's)
    "margin": SHARE,  # the membership strength still counted as forgotten
    "calibration_ratio": SHARE,  # FedEraser's calibration steps over the usual local steps
    "every": COUNT,  # epochs between evaluation-time checks
    "batch_size": COUNT,
}


def check_in(name: str, value: T, interval: Interval, why: str = "") -> T:
    """``value`` when it lies in ``interval``, else a ``ValueError`` naming ``name``, the
    interval and the value given (and ``why`` the range is what it is, when given)."""
    if value not in interval:
        reason = f": {why}" if why else ""
        raise ValueError(f"{name} must be {interval}, got {value}{reason}")
    return value


def check_parameter(name: str, value: T) -> T:
    """``value`` checked against ``name``'s interval in :data:`PARAMETERS`."""
    return check_in(name, value, PARAMETERS[name])


def check_fraction(name: str, value: float, example: str = "") -> float:
    """``value`` as a float when it lies in :data:`LEVEL` (NaN is refused too), else a
    ``ValueError`` naming ``name``.

    Args:
        name: the parameter's name as the caller knows it (e.g. ``"alpha"``).
        value: the level, share or fraction given.
        example: a sensible value, added to the message (e.g. ``"0.05"``).
    """
    check_in(name, value, LEVEL, f"e.g. {example}" if example else "")
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
