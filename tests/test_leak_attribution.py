"""Issue 36, item 4: several flagged names, each tested against its likeness to the
others, so the report names the leaked name and not the names that look like it."""

from __future__ import annotations

import numpy as np
import pytest
from test_memorisation_scan import ROSTER, SIZE, knows

from monai_forget.canary.render import render_text
from monai_forget.memorisation import LeakScanConfig, leak_scan
from monai_forget.memorisation.attribution import (
    attribute_flags,
    attributed_names,
    attribution_decoys,
    likeness,
)
from monai_forget.memorisation.decoys import decoy_template
from monai_forget.memorisation.report import render_scan_report

LEAKED = "KATE"


def _cosine_by_hand(a: str, b: str) -> float:
    """The cosine of two rendered texts, both padded on the right to the longer one."""
    x, y = render_text(a).astype(float), render_text(b).astype(float)
    width = max(x.shape[1], y.shape[1])
    x = np.pad(x, ((0, 0), (0, width - x.shape[1])))
    y = np.pad(y, ((0, 0), (0, width - y.shape[1])))
    return float((x * y).sum() / np.sqrt(x.sum() * y.sum()))


def test_likeness_is_the_cosine_of_the_rendered_ink():
    for a, b in (("ERIC", "KATE"), ("KAT", "KATE"), ("KATE", "KAT"), ("BOB", "KATE")):
        assert likeness([a], b)[0] == pytest.approx(_cosine_by_hand(a, b), abs=1e-6)
    assert likeness([LEAKED], LEAKED)[0] == pytest.approx(1.0)
    # texts of several lengths at once, each as alone
    mixed = likeness(["KAT", "ERIC", "BO"], LEAKED)
    assert mixed == pytest.approx([_cosine_by_hand(t, LEAKED) for t in ("KAT", "ERIC", "BO")])
    # a text that shares no ink position with the other is at 0
    assert likeness(["I"], "L")[0] < likeness(["E"], "F")[0]


def test_decoys_are_at_least_as_alike_and_never_a_roster_name():
    rng = np.random.default_rng(0)
    roster = ["ERIC", "KATE", "EVAN"]
    decoys = attribution_decoys("ERIC", LEAKED, 300, rng, exclude=roster)
    assert len(decoys) == len(set(decoys)) == 300
    assert not set(decoys) & set(roster)
    assert {decoy_template(d) for d in decoys} == {"AAAA"}
    floor = _cosine_by_hand("ERIC", LEAKED)
    assert min(_cosine_by_hand(d, LEAKED) for d in decoys) >= floor - 1e-6
    # they are the qualifying ones of the random draws, not all of them
    rng = np.random.default_rng(0)
    everything = attribution_decoys("ERIC", "ZZZZ", 10_000, rng, exclude=roster, pool=2000)
    assert len(everything) < 2000


def _memorised_kate(texts) -> np.ndarray:
    """A model that memorised KATE's pixels: M is the likeness to KATE, and KATE itself
    moves it more than any other text."""
    m = likeness(list(texts), LEAKED)
    return m + np.array([t == LEAKED for t in texts], dtype=float)


def test_a_lookalike_is_explained_and_the_leaked_name_is_not():
    found = attribute_flags(
        [LEAKED, "ERIC"], _memorised_kate, roster=ROSTER, alpha=0.05, correction="bh", seed=3
    )
    by_pair = {(a.name, a.given): a for a in found}
    eric, kate = by_pair["ERIC", LEAKED], by_pair[LEAKED, "ERIC"]
    # ERIC's decoys look at least as much like KATE, so they move the model at least
    # as much: every one is at or above ERIC (ties count against the name)
    assert eric.testable and eric.pvalue == 1.0 and eric.explained
    # KATE beats every decoy: the smallest p its decoys allow
    assert kate.testable and not kate.explained
    assert kate.pvalue == pytest.approx(1 / (kate.n_decoys + 1))
    assert kate.n_decoys == 999
    assert attributed_names([LEAKED, "ERIC"], found) == [LEAKED]


def test_names_too_alike_cannot_be_told_apart():
    """KATE and NATE differ in one letter: almost no random text is as like either, so the
    pair is not tested, and neither name is set aside."""
    found = attribute_flags(
        [LEAKED, "NATE"], _memorised_kate, roster=ROSTER, alpha=0.05, correction="bh", seed=3
    )
    assert all(not a.testable and a.pvalue_adjusted is None and not a.explained for a in found)
    assert all(a.n_decoys < 20 for a in found)
    assert attributed_names([LEAKED, "NATE"], found) == [LEAKED, "NATE"]


def test_the_step_never_clears_every_flag():
    """Two names each explained by the other stay flagged both."""
    flat = attribute_flags(
        ["ERIC", "EVAN"],
        lambda texts: np.zeros(len(texts)),
        roster=ROSTER,
        alpha=0.05,
        correction="bh",
        seed=0,
    )
    assert all(a.explained for a in flat)
    assert attributed_names(["ERIC", "EVAN"], flat) == ["ERIC", "EVAN"]


def test_scan_sets_aside_names_that_only_look_like_the_leaked_one(tmp_path):
    """A model that matches KATE's pixels: the scan flags names that share its strokes
    too; the report keeps KATE and sets ERIC and WADE aside, naming KATE as the reason."""
    probes = np.random.default_rng(0).random((80, 1, SIZE, SIZE)).astype(np.float32) * 0.3
    roster = [*ROSTER, LEAKED, "ZANE", "WADE", "ERIC", "NATE", "KAT"]
    # random letters: real-name decoys (the default) carry ERIC's and WADE's likeness
    # themselves here (they flag KATE, NATE and KAT only), leaving nothing to set aside
    result = leak_scan(
        knows(LEAKED),
        probes,
        roster,
        LeakScanConfig(seed=0, decoy_seed=1, decoy_source="letters", decoys=999),  # as measured
    )
    assert {LEAKED, "WADE", "ERIC"} <= set(result.significant_names())
    assert LEAKED in result.attributed_names()
    explained = result.explained_names()
    assert LEAKED in explained["ERIC"] and LEAKED in explained["WADE"]
    assert LEAKED not in explained
    # KAT is KATE's first three letters: no text is as alike, so it cannot be set aside
    assert "KAT" in result.attributed_names()
    assert "no evidence beyond the likeness to another flagged name" in result.summary()
    page = render_scan_report(result)
    assert "against its likeness to" in page and "no evidence beyond its likeness to" in page
    record = result.to_dict()
    assert record["attributed"] == result.attributed_names()
    assert len(record["attributions"]) == len(result.significant_names()) * (
        len(result.significant_names()) - 1
    )
    # off: the flags stay, nothing is attributed
    off = leak_scan(
        knows(LEAKED),
        probes,
        roster,
        LeakScanConfig(seed=0, decoy_seed=1, decoy_source="letters", decoys=999, attribution=False),
    )
    assert off.significant_names() == result.significant_names() and not off.attributions
