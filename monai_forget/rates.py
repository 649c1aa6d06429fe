"""Measured error rates stored as numbers (issue 67, item 4): a count out of a number of
draws, its rate and 95 % Wilson score interval. The display text is made from them
(:func:`rate_text`) and never parsed back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import scipy.stats

from monai_forget.checks import COUNT, Interval, check_in

__all__ = ["CLUSTER_BOOTSTRAP", "measured_rate", "rate_percent_text", "rate_text"]


#: How an interval was computed when it is not Wilson's (draws not independent).
CLUSTER_BOOTSTRAP = "cluster bootstrap over trainings"


def measured_rate(
    count: int,
    draws: int,
    *,
    interval: tuple[float, float] | None = None,
    method: str = "wilson",
) -> dict[str, Any]:
    """``{"count", "draws", "rate", "low", "high", "interval"}``: ``count`` of ``draws``
    with its 95 % interval: Wilson's score interval (``scipy.stats.binomtest``), or the
    ``interval`` given with the ``method`` that made it (e.g. :data:`CLUSTER_BOOTSTRAP`,
    when the draws of one training share its models)."""
    check_in("draws", draws, COUNT)
    check_in("count", count, Interval(0, draws, "both", integer=True), f"of {draws} draws")
    if interval is None:
        ci = scipy.stats.binomtest(int(count), int(draws)).proportion_ci(0.95, method="wilson")
        interval, method = (float(ci.low), float(ci.high)), "wilson"
    return {"count": int(count), "draws": int(draws), "rate": count / draws,
            "low": float(interval[0]), "high": float(interval[1]), "interval": method}  # fmt: skip


def rate_text(rate: Mapping[str, Any]) -> str:
    """``"0.055 [0.031, 0.096]"``: a measured rate and its interval, three decimals."""
    return f"{rate['rate']:.3f} [{rate['low']:.3f}, {rate['high']:.3f}]"


def rate_percent_text(rate: Mapping[str, Any]) -> str:
    """``"5.5 % of 200 audits (95 % interval 3.1 to 9.6 %)"``: a measured rate as a
    sentence reads it."""
    return (
        f"{100 * rate['rate']:.1f} % of {rate['draws']} audits (95 % interval "
        f"{100 * rate['low']:.1f} to {100 * rate['high']:.1f} %)"
    )
