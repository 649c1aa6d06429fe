"""M against reference models: the prediction test by hand, its validity on a Gaussian
null, its direction, and the score and CLI that run it."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from test_memorisation_scan import ARGS, knows

from monai_forget.cli import main
from monai_forget.memorisation import (
    ProbeSettings,
    UniqueFeature,
    memorisation_score,
    reference_test,
)


def test_prediction_test_hand_worked():
    # References 0.1, 0.2, 0.3: mean 0.2, sd 0.1, n 3. M = 0.5:
    # t = 0.3 / (0.1 * sqrt(4/3)) = 3 sqrt(3) / 2; with 2 degrees of freedom the upper
    # tail has the closed form P(T >= t) = (1 - t / sqrt(2 + t^2)) / 2.
    res = reference_test(0.5, [0.1, 0.2, 0.3])
    t = 3 * math.sqrt(3) / 2
    assert res.statistic == pytest.approx(t)
    assert res.pvalue == pytest.approx((1 - t / math.sqrt(2 + t * t)) / 2)
    assert res.rank_pvalue == pytest.approx(1 / 4)  # above all three
    # A tie counts against the model: 0.3 reaches one reference -> (1 + 1) / 4.
    assert reference_test(0.3, [0.1, 0.2, 0.3]).rank_pvalue == pytest.approx(2 / 4)
    assert res.n == 3 and res.to_dict()["reference_m"] == [0.1, 0.2, 0.3]


def test_direction_more_memorisation_gives_smaller_p():
    refs = [0.01, 0.02, 0.0, 0.015, 0.005]
    high, low = reference_test(0.2, refs), reference_test(-0.2, refs)
    assert high.pvalue < 1e-3 and low.pvalue > 0.999
    assert high.rank_pvalue == pytest.approx(1 / 6) and low.rank_pvalue == 1.0


@pytest.mark.parametrize("n", [2, 4, 8])
def test_valid_on_a_gaussian_null(n):
    """M of the audited model and of n references i.i.d. Gaussian: p is uniform, so the
    test rejects at 0.05 in 5 % of draws. Dropping sqrt(1 + 1/n) (about 6.3 % at n = 4) or
    taking n degrees of freedom (about 3.9 %) fails this."""
    rng = np.random.default_rng(n)
    reps = 20000
    draws = rng.normal(3.0, 0.5, size=(reps, n + 1))
    p = np.array([reference_test(row[0], row[1:]).pvalue for row in draws])
    se = math.sqrt(0.05 * 0.95 / reps)
    assert abs(np.mean(p < 0.05) - 0.05) < 3.5 * se
    assert abs(np.mean(p < 0.5) - 0.5) < 0.015
    rank = np.array([reference_test(row[0], row[1:]).rank_pvalue for row in draws[:4000]])
    assert abs(np.mean(rank <= 1 / (n + 1)) - 1 / (n + 1)) < 0.02  # exact as well


def test_bad_references_are_refused():
    for refs, message in (
        ([0.1], "at least 2"),
        ([0.1, 0.1, 0.1], "same M"),
        ([0.1, float("nan")], "not finite"),
    ):
        with pytest.raises(ValueError, match=message):
            reference_test(0.2, refs)


@pytest.fixture(scope="module")
def probes() -> np.ndarray:
    return np.random.default_rng(1).random((60, 1, 28, 28)).astype(np.float32) * 0.3


def _references():
    return [knows(name) for name in ("ANNA", "BOB", "EVE", "TOM")]  # never MARY


def test_score_against_references(probes):
    mary = UniqueFeature.from_text("MARY", (1, 1))
    refs = _references()
    score = memorisation_score(knows("MARY"), probes, mary, ProbeSettings(seed=3), references=refs)
    # Each reference's M is what the plain score gives that model (same controls).
    alone = [memorisation_score(r, probes, mary, ProbeSettings(seed=3)).m for r in refs]
    np.testing.assert_allclose(score.reference.reference_m, alone)
    assert score.reference.m == score.m
    assert score.reference.pvalue < 0.01
    assert "reference models" in score.summary() and "reference" in score.to_dict()
    other = memorisation_score(knows("JOHN"), probes, mary, ProbeSettings(seed=3), references=refs)
    assert other.reference.pvalue > 0.05
    with pytest.raises(ValueError, match="at least 2 references"):
        memorisation_score(knows("MARY"), probes, mary, references=refs[:1])
    with pytest.raises(ValueError, match="integer seed"):
        ProbeSettings(seed=np.random.default_rng(0))  # type: ignore[arg-type]


def test_cli_score_with_reference_models(probes, tmp_path, capsys):
    np.savez(tmp_path / "probes.npz", images=probes, labels=np.zeros(len(probes), np.int64))
    torch.save(knows("MARY").state_dict(), tmp_path / "model.pt")
    refs = []
    for i, net in enumerate(_references()):
        refs.append(str(tmp_path / f"ref{i}.pt"))
        torch.save(net.state_dict(), refs[-1])

    def score(references: list[str], out: str) -> int:
        args = ["memorisation", "score", "--model", str(tmp_path / "model.pt"),
                "--network", "mlp-1", "--network-args", json.dumps(ARGS),
                "--probes", str(tmp_path / "probes.npz"), "--text", "MARY", "--decoys", "0",
                "--out", str(tmp_path / out)]  # fmt: skip
        return main(args + [a for path in references for a in ("--reference-model", path)])

    assert score(refs, "s.json") == 0
    printed = capsys.readouterr().out
    assert "evidence of memorisation" in printed and "against 4 reference models" in printed
    record = json.loads((tmp_path / "s.json").read_text())
    assert len(record["reference"]["reference_m"]) == 4 and record["reference"]["pvalue"] < 0.01
    assert score(refs[:1], "one.json") == 2
    assert "at least 2 references" in capsys.readouterr().err
    assert not (tmp_path / "one.json").exists()
