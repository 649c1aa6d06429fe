"""Sequential decoys (issue 65, item 3): Besag & Clifford's p-value against its definition
and its level under the null, the "undecided" rule against scipy's Clopper-Pearson and
BH's steps, and scans that draw decoys until a name is settled, up to the cap."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
import scipy.stats
from test_memorisation_scan import ROSTER, SIZE, knows

from monai_forget.cli import main
from monai_forget.memorisation import LeakScanConfig, leak_scan
from monai_forget.memorisation.scan_result import EVIDENCE, NO_EVIDENCE, UNDECIDED
from monai_forget.memorisation.sequential import (
    lower_bound,
    needed_decoys,
    sequential_decoy_test,
    settling_level,
)
from monai_forget.stats import benjamini_hochberg


def test_the_sequential_p_value_by_hand():
    """h = 3: decoys at or above 5.0 at positions 2, 4 and 7 (1-based): the 3rd at l = 7,
    p = 3/7; a stream that ends with 2 at or above among 5: p = (2 + 1) / (5 + 1)."""
    stream = [1.0, 5.0, 2.0, 6.0, 0.0, 3.0, 5.5, 9.0]
    stopped = sequential_decoy_test(5.0, stream, h=3)
    assert (stopped.pvalue, stopped.n_decoys, stopped.rank) == (3 / 7, 7, 4)
    assert stopped.exposure == pytest.approx(-math.log2(3 / 7))
    ended = sequential_decoy_test(5.0, stream[:5], h=3)
    assert (ended.pvalue, ended.n_decoys, ended.rank) == (3 / 6, 5, 3)
    above_all = sequential_decoy_test(10.0, stream, h=3)
    assert above_all.pvalue == 1 / 9 and above_all.rank == 1
    with pytest.raises(ValueError, match="must be an integer >= 1"):
        sequential_decoy_test(1.0, stream, h=0)


@pytest.mark.parametrize("h", [1, 5, 10])
def test_the_sequential_p_value_holds_its_level_under_the_null(h):
    """The name exchangeable with its decoys (all from one continuous law): P(p <= a) <= a
    at every a tested, within Monte Carlo error (20,000 draws, a stream of 199)."""
    rng = np.random.default_rng(h)
    draws = 20_000
    p = np.array([sequential_decoy_test(x[0], x[1:], h=h).pvalue
                  for x in rng.random((draws, 200))])  # fmt: skip
    for a in (0.01, 0.05, 0.1, 0.3):
        share = np.mean(p <= a)
        assert share <= a + 3 * math.sqrt(a * (1 - a) / draws), (a, share)
    # and it is not conservative to uselessness: near a at a = 0.1
    assert np.mean(p <= 0.1) > 0.08


@pytest.mark.parametrize(("g", "n"), [(1, 200), (3, 2000), (10, 133), (50, 60)])
def test_the_lower_bound_is_clopper_pearsons(g, n):
    """One-sided 95 %: the lower end of scipy's exact two-sided 90 % interval."""
    expected = scipy.stats.binomtest(g, n).proportion_ci(0.90, method="exact").low
    assert lower_bound(g, n) == pytest.approx(expected, rel=1e-9)
    assert lower_bound(0, n) == 0.0


def test_the_settling_level_is_bhs_next_step():
    """With R names flagged by BH among m, a further name is flagged (adjusted p below
    alpha) exactly when its p is below alpha (R + 1) / m (the others' p fixed, above that
    level): checked by running BH with the name just below the level and at it."""
    alpha, m = 0.05, 20
    flagged = [0.0001, 0.001]  # R = 2: BH flags both
    rest = [0.5 + 0.02 * k for k in range(m - 3)]
    level = settling_level("bh", alpha, m, len(flagged))
    assert level == alpha * 3 / m
    below = benjamini_hochberg(np.array([*flagged, level * 0.9999, *rest]))
    at = benjamini_hochberg(np.array([*flagged, level * 1.0000001, *rest]))
    assert below[2] < alpha <= at[2]
    assert settling_level("bonferroni", alpha, m, 2) == alpha / m
    assert settling_level("none", alpha, m, 2) == alpha


def test_needed_decoys_is_the_first_count_that_reaches_the_level():
    for g, level in ((0, 0.001), (2, 0.003), (5, 0.0025)):
        n = needed_decoys(g, level)
        assert (g + 1) / (n + 1) < level <= (g + 1) / n


@pytest.fixture(scope="module")
def probes() -> np.ndarray:
    return np.random.default_rng(0).random((80, 1, SIZE, SIZE)).astype(np.float32) * 0.3


def _scan(model, probes, checkpoint=None, **config):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short 3-letter name lists
        config = LeakScanConfig(seed=0, decoy_seed=1, **config)
        return leak_scan(model, probes, ROSTER, config, checkpoint=checkpoint)


def test_a_name_the_cap_cannot_settle_is_undecided_and_more_decoys_flag_it(probes):
    """LUCY scores above every decoy. With 30 decoys per kind, p = 1/31, BH over 10 names
    cannot flag it (it would need p <= 0.005): undecided, with the decoys that could tell
    (200). Up to the default cap it is flagged; names far below stay "no evidence"."""
    model = knows("LUCY")
    capped = _scan(model, probes, max_decoys=30)
    lucy = {r.name: r for r in capped.rows}["LUCY"]
    assert (lucy.decision, lucy.n_decoys, lucy.pvalue) == (UNDECIDED, 30, 1 / 31)
    assert lucy.decoys_needed == needed_decoys(0, 0.05 / 10) == 200
    assert capped.undecided_names() == ["LUCY"] and not capped.significant_names()
    assert "undecided for 1 (LUCY)" in capped.verdict() and "at least 200 decoys" in (
        capped.verdict()
    )
    full = _scan(model, probes)
    lucy = {r.name: r for r in full.rows}["LUCY"]
    assert (
        lucy.decision == EVIDENCE and lucy.n_decoys == 1998 and full.significant_names() == ["LUCY"]
    )
    others = [r for r in full.rows if r.name != "LUCY"]
    assert all(r.decision == NO_EVIDENCE for r in others) and not full.undecided_names()


def test_a_control_scan_stops_early_and_says_no_evidence(probes):
    """A model that knows no name: every name meets h decoys at or above it within the
    first chunk of each kind, so the streams stop there; no name is undecided."""
    model = knows()
    scan = _scan(model, probes)
    assert not scan.significant_names() and not scan.undecided_names()
    assert all(r.decision == NO_EVIDENCE for r in scan.rows)
    assert all(n <= 256 for n in scan.decoys_by_kind().values()), scan.decoys_by_kind()
    assert all(r.n_decoys <= 256 and r.max_decoys >= 500 for r in scan.rows)


def test_every_p_value_is_recomputed_from_the_recorded_stream(probes, tmp_path):
    """The JSON record holds each kind's decoys in the order scored: each name's p is
    Besag & Clifford's over that stream (an independent recomputation), and its decoys
    followed and the cap are in the row."""
    from monai_forget.memorisation import write_scan_report

    scan = _scan(knows("EVE", gain=0.05), probes)
    record = json.loads(write_scan_report(scan, tmp_path)[0].read_text())
    streams = {d["template"]: np.array(d["m"]) for d in record["decoys"]}
    h = record["settings"]["exceedances"]
    for row in record["rows"]:
        stream = streams["AAA" if len(row["name"]) == 3 else "AAAA"]
        above = np.flatnonzero(stream >= row["m"])
        if above.size >= h:
            expected, followed = h / (above[h - 1] + 1), above[h - 1] + 1
        else:
            expected, followed = (above.size + 1) / (stream.size + 1), stream.size
        assert row["pvalue"] == pytest.approx(expected) and row["n_decoys"] == followed
    assert record["settings"]["sequential_decoys"] is True


def test_a_fixed_number_ranks_every_name_among_all_decoys(probes):
    """decoys=N keeps the fixed design (every name against all N, p = rank / (N + 1))."""
    scan = _scan(knows("LUCY"), probes, decoys=300, decoy_source="letters")
    assert scan.decoys_by_kind() == {"AAAA": 300, "AAA": 300}
    assert all(r.n_decoys == 300 for r in scan.rows)
    assert scan.settings["sequential_decoys"] is False
    with pytest.raises(ValueError, match="exclude each other"):
        LeakScanConfig(decoys=300, max_decoys=600)


def test_no_stream_goes_past_its_cap(probes, monkeypatch):
    """The cost bound: however strong the name, no kind scores more decoys than the cap."""
    import importlib

    module = importlib.import_module("monai_forget.memorisation.scan_models")

    scored = []
    real = module._text_divergences

    def counting(model, images, clean, texts, *args):
        scored.append(len(texts))
        return real(model, images, clean, texts, *args)

    monkeypatch.setattr(module, "_text_divergences", counting)
    scan = _scan(knows("LUCY", "ZOE"), probes, max_decoys=700, decoy_source="letters",
                 attribution=False)  # fmt: skip
    assert sum(scored) <= len(ROSTER) + 2 * 700
    assert scan.decoys_by_kind() == {"AAAA": 700, "AAA": 700}


def test_one_name_alone_has_its_own_alpha(probes, tmp_path, capsys):
    """--name scans one name: no correction over a roster, the scan's alpha; LUCY known
    to the model is flagged, BOB is not."""
    import torch

    torch.save(knows("LUCY").state_dict(), tmp_path / "model.pt")
    np.savez(tmp_path / "probes.npz", images=probes, labels=np.zeros(len(probes), np.int64))
    base = ["memorisation", "scan", "--model", str(tmp_path / "model.pt"), "--network", "mlp-1",
            "--network-args", json.dumps({"in_shape": [1, SIZE, SIZE], "num_classes": 2,
                                          "hidden": 2}),
            "--probes", str(tmp_path / "probes.npz"), "--decoy-seed", "1"]  # fmt: skip
    for name, flagged in (("LUCY", True), ("BOB", False)):
        out = tmp_path / name
        assert main([*base, "--name", name, "--out", str(out)]) == 0
        record = json.loads((out / "leak_scan.json").read_text())
        assert len(record["rows"]) == 1 and (record["significant"] == [name]) is flagged
        said = capsys.readouterr().out
        assert (f"evidence of memorisation for the name {name}" in said) is flagged
        assert ("no evidence of memorisation for the name" in said) is not flagged
    with pytest.raises(SystemExit):
        main([*base, "--name", "EVE", "--roster", "x.csv", "--out", str(tmp_path / "x")])


def test_an_interrupted_sequential_scan_resumes_to_the_same_decisions(probes, tmp_path):
    """Killed after two chunks of texts, the same scan run again with its checkpoint scores
    only what is left and stops its streams where the uninterrupted scan did."""
    import importlib

    module = importlib.import_module("monai_forget.memorisation.scan_models")
    real, runs = module._text_divergences, []

    def dying(*args):
        if len(runs) == 2:
            raise KeyboardInterrupt
        runs.append(len(args[3]))
        return real(*args)

    model = knows("LUCY")
    whole = _scan(model, probes, max_decoys=700)
    checkpoint = tmp_path / "scan.partial.npz"
    module._text_divergences = dying
    try:
        with pytest.raises(KeyboardInterrupt):
            _scan(model, probes, max_decoys=700, checkpoint=checkpoint)
    finally:
        module._text_divergences = real
    resumed = leak_scan(model, probes, ROSTER, LeakScanConfig(seed=0, decoy_seed=1,
                        max_decoys=700), checkpoint=checkpoint)  # fmt: skip
    assert [r.__dict__ for r in resumed.rows] == [r.__dict__ for r in whole.rows]
    assert resumed.decoys_by_kind() == whole.decoys_by_kind()
