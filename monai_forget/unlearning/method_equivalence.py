"""Is an unlearning *method* equivalent to retraining? (issue 66, item 3)

:func:`~monai_forget.unlearning.retrain_reference.equivalence_to_retraining` judges one
unlearned model against k retrained models: its interval carries retraining's
uncertainty only, so it ignores the method's own run-to-run spread, and read as a test
of the method it passes a method that sits at the margin about 22 % of the time (k = 6).
Here the method is judged by several runs of it (seeds of its own randomness: the
generator's, the calibration batches') against several exact retrainings, on one
federation, each model summarised by its ``T`` (the mean logit-scaled confidence on the
withdrawn data, or its advantage over data no model trained on, as in
:mod:`~monai_forget.unlearning.retrain_reference`).

The test is the two one-sided tests (Schuirmann 1987) on the unequal-variance t: with
``r`` runs of the method and ``k`` retrainings, the method is "equivalent to retraining"
at margin ``delta`` when the ``1 - 2 alpha`` interval of ``mean T_method - mean
T_retrained``, ``D +- t_{1 - alpha, nu} sqrt(s_M^2 / r + s_R^2 / k)``, lies inside
``(-delta, delta)``. The degrees of freedom are Hsu's conservative ``nu = min(r, k) - 1``
(Hsu 1938), not Welch's approximation: at a true difference of exactly ``delta``, three
runs twice as spread as six retrainings, Welch's ``nu`` passed 5.25 % of 4,000 draws
(over alpha 0.05), Hsu's stays at most alpha for normal ``T`` whatever the two spreads
(tests/test_method_equivalence.py). Exact retraining judged against itself passes with
the test's power, which grows with ``r`` and ``k`` and with ``delta`` over the spread.
``delta`` is declared before any run is seen (``benchmarks/method_equivalence.py``
measures both rates).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.stats

from monai_forget.checks import HALF_LEVEL, POSITIVE, Interval, check_in
from monai_forget.defaults import RETRAINED_ALPHA
from monai_forget.results import Result

__all__ = ["MethodEquivalence", "method_equivalence"]

#: At least two runs of each, or no spread can be estimated.
_RUNS = Interval(2, math.inf, "left", integer=True)


@dataclass(frozen=True)
class MethodEquivalence(Result):
    """The method-level equivalence test's outcome.

    Attributes:
        difference: mean ``T`` of the method's runs minus that of the retrained models.
        low, high: the ``1 - 2 alpha`` Welch interval of the difference.
        margin: the equivalence margin ``delta``, declared before the runs.
        alpha: each one-sided test's level.
        df: the degrees of freedom, ``min(runs, retrained) - 1`` (Hsu's).
        runs: the method's runs ``r``.
        retrained: the retrained models ``k``.
        equivalent: the interval lies inside ``(-margin, margin)``.
    """

    difference: float
    low: float
    high: float
    margin: float
    alpha: float
    df: float
    runs: int
    retrained: int
    equivalent: bool

    def summary(self) -> str:
        verdict = (
            "evidence that the method is equivalent to retraining"
            if self.equivalent
            else "no evidence that the method is equivalent to retraining"
        )
        return (
            f"{verdict}: {self.runs} runs against {self.retrained} retrained models, mean "
            f"difference {self.difference:+.3g}, {1 - 2 * self.alpha:.0%} interval "
            f"[{self.low:+.3g}, {self.high:+.3g}] against the margin +-{self.margin:.3g}"
        )


def method_equivalence(
    method: Sequence[float],
    retrained: Sequence[float],
    margin: float,
    alpha: float = RETRAINED_ALPHA,
) -> MethodEquivalence:
    """Two one-sided unequal-variance t tests of ``|mean T_method - mean T_retrained| <
    margin`` (module docstring: Hsu's degrees of freedom).

    Args:
        method: ``T`` of each run of the method (at least 2, different seeds of its own
            randomness, on the same federation).
        retrained: ``T`` of each model retrained without the provider (at least 2).
        margin: the equivalence margin ``delta`` (declared before the runs).
        alpha: each one-sided test's level, in (0, 0.5).
    """
    m = np.asarray(method, dtype=np.float64)
    r = np.asarray(retrained, dtype=np.float64)
    check_in("the method's runs", m.size, _RUNS)
    check_in("the retrained models", r.size, _RUNS)
    check_in("margin", margin, POSITIVE)
    check_in("alpha", alpha, HALF_LEVEL)
    if not (np.isfinite(m).all() and np.isfinite(r).all()):
        raise ValueError("every T must be finite")
    se = math.sqrt(m.var(ddof=1) / m.size + r.var(ddof=1) / r.size)
    df = min(m.size, r.size) - 1
    difference = float(m.mean() - r.mean())
    half = float(scipy.stats.t.ppf(1 - alpha, df)) * se
    low, high = difference - half, difference + half
    return MethodEquivalence(
        difference=difference, low=low, high=high, margin=float(margin), alpha=float(alpha),
        df=float(df), runs=int(m.size), retrained=int(r.size),
        equivalent=bool(-margin < low and high < margin),
    )  # fmt: skip
