"""Measured error rates are stored as numbers (issue 67, item 4) and printed from them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from monai_forget.rates import CLUSTER_BOOTSTRAP, measured_rate, rate_text

PACKAGED = Path(__file__).resolve().parents[1] / "monai_forget" / "audit"
PACKAGED = PACKAGED / "measured_error_rates.json"


def _wilson_by_hand(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


@pytest.mark.parametrize(("k", "n"), [(11, 200), (0, 400), (400, 400), (76, 1500)])
def test_a_rate_carries_its_count_and_wilson_interval(k, n):
    rate = measured_rate(k, n)
    low, high = _wilson_by_hand(k, n)
    assert rate["count"] == k and rate["draws"] == n and rate["rate"] == k / n
    assert rate["low"] == pytest.approx(low, abs=1e-12)
    assert rate["high"] == pytest.approx(high, abs=1e-12)
    assert rate["interval"] == "wilson"


def test_the_text_is_made_from_the_numbers():
    assert rate_text(measured_rate(11, 200)) == "0.055 [0.031, 0.096]"
    given = measured_rate(3, 30, interval=(0.003, 0.2), method=CLUSTER_BOOTSTRAP)
    assert rate_text(given) == "0.100 [0.003, 0.200]" and given["interval"] == CLUSTER_BOOTSTRAP
    with pytest.raises(ValueError, match=r"count must be an integer in \[0, 4\], got 5: of 4"):
        measured_rate(5, 4)


def test_every_packaged_rate_is_a_number_with_its_interval():
    cells = json.loads(PACKAGED.read_text())["cells"]
    assert len(cells) > 500
    for cell in cells:
        for decision in ("forgotten", "not_forgotten", "inconclusive"):
            rate = cell[decision]
            assert isinstance(rate, dict), (cell["auditor"], decision, rate)
            assert rate["draws"] == cell["draws"]
            assert rate["rate"] == pytest.approx(rate["count"] / rate["draws"])
            assert rate["low"] <= rate["rate"] <= rate["high"]
            if rate["interval"] == "wilson":
                assert (rate["low"], rate["high"]) == pytest.approx(
                    _wilson_by_hand(rate["count"], rate["draws"]), abs=1e-9
                )
        counts = [cell[d]["count"] for d in ("forgotten", "not_forgotten", "inconclusive")]
        assert sum(counts) == cell["draws"]
