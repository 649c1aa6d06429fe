"""A federated withdrawal's outcome through the Python API: what it writes, what its
summary says beside the forgetting rate, and what it refuses (no FLARE needed)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from monai_forget.audit import AuditResult
from monai_forget.data import load_digits
from monai_forget.fl.job import FederatedRun
from monai_forget.fl.outcome import OUTPUT_FILES, WithdrawalOutcome, check_outputs
from monai_forget.fl.run import mlp_config, simulate_withdrawal
from monai_forget.fl.spec import FederatedConfig, Withdrawal
from monai_forget.unlearning import forgetting_rate_from_counts
from monai_forget.unlearning.evaluation import WithdrawalEvaluation
from monai_forget.unlearning.retrain_reference import compare_with_retraining
from monai_forget.unlearning.scenario import build_federation


def _outcome(tmp_path, *, retraining_fr: float | None) -> WithdrawalOutcome:
    run = FederatedRun(
        torch.nn.Linear(2, 2), tmp_path / "workspace", ("site-1", "site-2", "site-3"),
        FederatedConfig(), Withdrawal("site-1", 2, "forsaken"),
        record={"client": "site-1", "round": 2, "method": "forsaken"},
    )  # fmt: skip
    rate = forgetting_rate_from_counts(18, 2, 3, 17)  # B.R.R 0.9, A.R.R 0.85
    audits = {
        (stage, site, "ks"): AuditResult("ks", decision, "rho_KS", value, "rho_KS >= 1")
        for stage, site, decision, value in (
            ("before", "site-1", "not forgotten", 0.4),
            ("after", "site-1", "forgotten", 1.2),
            ("after", "site-2", "not forgotten", 0.3),
        )
    }
    accuracy = {"before": {"site-1": 1.0, "test": 0.8}, "after": {"site-1": 0.5, "test": 0.79}}
    evaluation = WithdrawalEvaluation("forsaken", rate, audits, accuracy)
    rng = np.random.default_rng(0)
    versus = None
    if retraining_fr is not None:
        versus = compare_with_retraining(rng.normal(0, 1, 20), rng.normal(0, 1, (5, 20)))
    return WithdrawalOutcome(run, evaluation, "3 providers", versus, retraining_fr)


def test_outcome_writes_its_three_files_with_retraining_beside_the_rate(tmp_path) -> None:
    outcome = _outcome(tmp_path, retraining_fr=0.2125)
    out = tmp_path / "out"
    paths = outcome.write(out, data="digits", seed=3)
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUT_FILES)
    results = json.loads(paths["results.json"].read_text())
    assert results["retraining_forgetting_rate"] == 0.2125
    assert results["rate"]["fr"] == pytest.approx(0.9 * 0.85)
    assert results["data"] == "digits" and results["seed"] == 3
    assert results["withdrawal"]["client"] == "site-1"
    assert len(results["versus_retraining"]["retrained_means"]) == 5
    summary = paths["summary.md"].read_text()
    rate_line = next(line for line in summary.splitlines() if line.startswith("Forgetting rate"))
    assert "FR 76.50%" in rate_line  # the method's FR, and on the same line retraining's:
    assert "retraining from scratch on the same oracle: FR 21.25%" in rate_line
    assert "| after | site-2 | - | - | not forgotten (rho_KS = 0.3) |" in summary
    assert "<html" in paths["report.html"].read_text().lower()


def test_outcome_without_retraining_says_the_rate_alone_shows_nothing(tmp_path) -> None:
    outcome = _outcome(tmp_path, retraining_fr=None)
    summary = outcome.summary()
    assert "retraining's not measured: without it FR does not show elimination" in summary
    first = outcome.evaluation.summary().splitlines()[0]
    assert "FR 76.50%" in first and "beside the FR retraining gets" in first


def test_outputs_are_never_replaced_without_overwrite(tmp_path) -> None:
    outcome = _outcome(tmp_path, retraining_fr=0.1)
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.md").write_text("precious")
    with pytest.raises(FileExistsError, match=r"summary\.md"):
        check_outputs(out)
    with pytest.raises(FileExistsError):
        outcome.write(out)
    assert [p.name for p in out.iterdir()] == ["summary.md"]  # nothing half-written
    assert (out / "summary.md").read_text() == "precious"
    outcome.write(out, overwrite=True)
    assert "FR 10.00%" in (out / "summary.md").read_text()


@pytest.mark.parametrize("retrained", [-1, 1, 2])
def test_too_few_retrained_models_are_refused_before_flare_starts(tmp_path, retrained) -> None:
    federation = build_federation(
        load_digits(), per_client=30, calibration_size=30, test_size=30, shadow_size=30
    )
    withdrawal = Withdrawal("site-1", 1, "natural")
    with pytest.raises(ValueError, match="at least 3"):
        simulate_withdrawal(
            federation, mlp_config(federation, rounds=2), withdrawal, tmp_path / "ws",
            retrained=retrained,
        )  # fmt: skip
    assert not (tmp_path / "ws").exists()


def test_a_site_removed_after_training_reports_what_it_cost(tmp_path) -> None:
    from dataclasses import replace

    from monai_forget.unlearning.federaser import WithdrawalCost

    outcome = replace(
        _outcome(tmp_path, retraining_fr=0.2),
        site="site-3",
        cost=WithdrawalCost(local_steps=1200, rounds=1, seconds=2.5, server_bytes=3 * 2**20),
    )
    summary = outcome.summary()
    assert outcome.withdrawn == "site-3"  # not the run's own withdrawal
    assert (
        "Cost of removing site-3 (forsaken): 1,200 local steps by the sites that stay in 1 "
        "round, 2.5 s; the server kept 3.0 MiB from training for it"
    ) in summary
    assert outcome.to_dict()["cost"] == {
        "local_steps": 1200, "rounds": 1, "seconds": 2.5, "server_bytes": 3 * 2**20
    }  # fmt: skip
