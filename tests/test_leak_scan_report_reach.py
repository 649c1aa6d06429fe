"""The leak-scan report tells the truth per name (issue 54, item 5): which names the
decoys could flag, how many decoys each kind had, and p-values that never read as alpha."""

from __future__ import annotations

import numpy as np
import pytest

from monai_forget.memorisation.report import render_scan_report
from monai_forget.memorisation.scan_result import DecoyNull, LeakScanResult, NameResult
from monai_forget.reporting import pvalue_text

ALPHA = 0.05


def _letters(i: int, n: int) -> str:
    """The ``i``-th text of ``n`` capital letters (distinct for distinct ``i``)."""
    out = ""
    for _ in range(n):
        i, r = divmod(i, 26)
        out = chr(65 + r) + out
    return out


def _scan(n3: int, n4: int, decoys3: int = 500, decoys4: int = 1000) -> LeakScanResult:
    """A BH scan of ``n3`` 3-letter and ``n4`` 4-letter names (LILY first, flagged at the
    smallest p its decoys allow when it is reachable), with name decoys run short for 3
    letters as real names do (about 500)."""
    names = ["LILY"] * bool(n4) + [_letters(i, 4) for i in range(n4 - 1)]
    names += [_letters(i, 3) for i in range(n3)]
    m = len(names)
    rows = []
    for rank, name in enumerate(names, start=1):
        n = decoys4 if len(name) == 4 else decoys3
        p = 1 / (n + 1) if rank == 1 else 0.5
        adjusted = min(1.0, m * p) if rank == 1 else 0.9
        rows.append(
            NameResult(
                rank, name, 1.0, p, adjusted, adjusted < ALPHA, 0.0, 0, n, 0.0, 0.5, 0.0, 0.0
            )
        )
    nulls = tuple(
        DecoyNull(t, tuple(_letters(i, len(t)) for i in range(n)), np.zeros(n))
        for t, n in (("AAA", decoys3), ("AAAA", decoys4))
    )
    settings = {"decoys_per_kind": 1000, "decoy_source": "names", "decoy_seed": 1,
                "references": 0, "references_by_patient": False}  # fmt: skip
    return LeakScanResult(tuple(rows), "welch", "bh", ALPHA, 100, nulls, settings)


def test_pvalue_text_never_reads_below_alpha_as_alpha():
    assert pvalue_text(0.04995, ALPHA) == "0.04995"
    assert pvalue_text(50 / 1001, ALPHA) == "0.04995"
    assert pvalue_text(0.05, ALPHA) == "0.05" and pvalue_text(0.0123456, ALPHA) == "0.0123"
    rng = np.random.default_rng(0)
    for p in np.concatenate([rng.uniform(0.0499, 0.0501, 2000), [np.nextafter(0.05, 0)]]):
        assert (float(pvalue_text(p, ALPHA)) < ALPHA) == (p < ALPHA), p


def test_the_issue_roster_reads_consistently():
    """50 names, 29 of 3 letters with 500 decoys (BH: 50/501 >= 0.05, out of reach) and 21
    of 4 letters with 1000 (50/1001 = 0.04995, reachable); LILY flagged at 0.04995."""
    result = _scan(29, 21)
    out = result.out_of_reach()
    assert sorted(out) == sorted(_letters(i, 3) for i in range(29))
    assert result.reachable_pvalue(result.rows[0]) == pytest.approx(50 / 1001)
    assert result.decoys_by_kind() == {"AAA": 500, "AAAA": 1000}
    summary = result.summary(top=3)
    lily = summary.splitlines()[3]
    assert "LILY" in lily and "0.04995" in lily and "0.05 " not in lily
    assert "29 of 50 names cannot be flagged with the decoys of their kind" in summary
    page = render_scan_report(result)
    assert "evidence of memorisation for 1 of 50 names: LILY" in page
    assert "29 of 50 names cannot be flagged" in page and "no name can be flagged" not in page
    assert "AAA: 500, AAAA: 1000" in page
    assert page.count("out of reach with these decoys</td>") == 29
    assert "<td>0.04995</td>" in page
    record = result.to_dict()
    assert record["out_of_reach"] == out and record["decoys_by_kind"] == {"AAA": 500, "AAAA": 1000}
    assert record["rows"][0]["smallest_reachable_pvalue"] == pytest.approx(50 / 1001)


def test_every_name_reachable_or_none():
    every = _scan(5, 5)  # 10 names: 10/501 and 10/1001, both below alpha
    assert every.out_of_reach() == [] and every.reach_text() == ""
    page = render_scan_report(every)
    assert "Every name could be flagged" in page and "out of reach" not in page
    none = _scan(60, 0)  # 60 names of 3 letters: 60/501 >= alpha
    assert len(none.out_of_reach()) == 60
    page = render_scan_report(none)
    assert "no name can be flagged with these decoys" in page
    assert "Every name could be flagged" not in page


def test_a_name_that_can_reach_only_alpha_is_out_of_reach():
    """Without a correction, 19 decoys give a smallest p of exactly 1/20 = alpha: a flag
    needs p < alpha, so such a name is out of reach; 20 decoys (1/21) are enough."""

    def scan(decoys: int) -> LeakScanResult:
        row = NameResult(1, "EVE", 1.0, 0.5, 0.5, False, 0.0, 0, decoys, 0.0, 0.5, 0.0, 0.0)
        null = DecoyNull("AAA", tuple(_letters(i, 3) for i in range(decoys)), np.zeros(decoys))
        return LeakScanResult((row,), "welch", "none", ALPHA, 10, (null,), {})

    assert scan(19).reachable_pvalue(scan(19).rows[0]) == ALPHA
    assert scan(19).out_of_reach() == ["EVE"]
    assert scan(20).out_of_reach() == []


def test_out_of_reach_says_alone_and_bh_can_flag_several_together():
    """Under BH two names each out of reach alone can be flagged together (50 x (1/501) / 2
    < 0.05, as PAM and TOM were on control models through a pipeline): the sentence says
    so; Bonferroni's bound holds for every name, and its sentence does not."""
    bh = _scan(29, 21)
    assert "as the only leaked name" in bh.reach_text()
    assert "BH can still flag several such names together" in bh.reach_text()
    bonferroni = LeakScanResult(bh.rows, "welch", "bonferroni", ALPHA, 100, bh.nulls, bh.settings)
    assert bonferroni.out_of_reach() == bh.out_of_reach()
    assert "together" not in bonferroni.reach_text()
