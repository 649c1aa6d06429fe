"""Forsaken on the NVIDIA FLARE simulator with real ACDC providers: one provider
withdraws with SecForget, and the withdrawal auditors check the result (bounded: the
whole file takes about 2-3 minutes on 2 shared cores).

Federation (monai_forget.fl.run.acdc_federation, seed 0): ACDC cine-MRI slices (32x32,
centred on a reference mean image), pathology classification (5 classes); three
providers, each a disjoint group of 5 patients (one per pathology); the auditors'
calibration set, the oracle's shadow data and the test set are other patients. FedAvg
runs 9 rounds of 50 local Adam steps per client (MLP 1024-128-5) on the FLARE simulator;
in round 7 site-1 sends its dummy gradient (Protocol 1 of Liu et al. 2020, 20 L-BFGS
iterations) in place of its update and leaves; round 8 is trained by the two others.
"""

from __future__ import annotations

import pytest
import torch

from monai_forget.audit import FORGOTTEN, NOT_FORGOTTEN
from monai_forget.data import load_digits
from monai_forget.fl.spec import FederatedConfig, Withdrawal
from monai_forget.unlearning.scenario import patient_id

pytest.importorskip(
    "nvflare", reason="NVIDIA FLARE is not installed: pip install 'monai-forget[fl]'"
)

from monai_forget.fl.job import run_federated
from monai_forget.fl.poc import clients_that_left, poc_failure
from monai_forget.fl.run import DEFAULT_GENERATOR, acdc_federation, mlp_config, simulate_withdrawal
from monai_forget.unlearning.evaluation import AuditPlan

pytestmark = [pytest.mark.fl, pytest.mark.slow]  # pytest -m 'not fl' runs without NVIDIA FLARE


@pytest.fixture()
def one_thread():
    """Shadow training in this process on one thread (2 cores, FLARE clients beside it)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def acdc(shared_data):
    if not (shared_data / "acdc_ssl4mis" / "groups.csv").is_file():
        pytest.skip(f"ACDC not found under {shared_data / 'acdc_ssl4mis'}")
    return acdc_federation(shared_data, seed=0)


@pytest.mark.slow
def test_secforget_on_flare_forgets_the_withdrawn_acdc_provider_only(
    acdc, tmp_path, one_thread
) -> None:
    # Providers are disjoint patient groups: nobody else has site-1's patients.
    owners = {patient_id(i): name for name, data in acdc.clients.items() for i in data.ids}
    assert len(owners) == 15 and sum(1 for o in owners.values() if o == "site-1") == 5
    others = {
        patient_id(i) for d in (acdc.test, acdc.shadow, acdc.calibration["site-1"]) for i in d.ids
    }
    assert not others & set(owners)
    config = mlp_config(acdc, seed=0)
    assert (config.rounds, config.local_steps, config.simulator_threads) == (9, 50, 3)

    withdrawal = Withdrawal("site-1", 7, "forsaken", DEFAULT_GENERATOR)
    outcome = simulate_withdrawal(
        acdc, config, withdrawal, tmp_path / "fl", remaining=["site-2"],
        plan=AuditPlan(cache_dir=tmp_path / "c"),
    )  # fmt: skip
    run, evaluation = outcome.run, outcome.evaluation

    # The withdrawing client ran Protocol 1 in round 7 and sent it through FedAvg.
    record = run.record
    assert record["method"] == "forsaken" and record["round"] == 7
    assert record["share"] == pytest.approx(1 / 3)
    assert record["eq4_after"]["distance"] < 0.5 * record["eq4_before"]["distance"]
    assert (run.workspace / "simulator.log").is_file()
    assert (run.log_dir / "server" / "log.txt").is_file()

    # Before elimination both audits see site-1 as remembered; afterwards EMA says it is
    # forgotten, and both still see the remaining provider site-2 as remembered.
    for method in ("ks", "ema"):
        assert evaluation.decision("before", "site-1", method) == NOT_FORGOTTEN, method
        assert evaluation.decision("after", "site-2", method) == NOT_FORGOTTEN, method
    assert evaluation.decision("after", "site-1", "ema") == FORGOTTEN
    # K-S: on ACDC the shadows separate completely (KS(query, calibration) = 1), so
    # rho_KS >= 1 needs the target fully separated from the query shadow too. After
    # elimination site-1 sits at that ceiling: rho_KS = 1 ("forgotten") in most runs,
    # just below it when one slice overlaps (FedAvg's summation order varies between
    # simulator runs). Asserted: site-1 moved from remembered to the ceiling.
    rho = {
        stage: evaluation.audits[(stage, "site-1", "ks")].statistic for stage in ("before", "after")
    }
    assert rho["after"] >= 0.95 and rho["after"] > rho["before"] + 0.2, rho
    # The oracle calls far fewer withdrawn samples members after than before, and most
    # it called members before are non-members after (benchmark, seed 0: A.R.R 0.90,
    # direct 0.89, natural forgetting 0.23 / 0.19). FedAvg's result moves with the
    # summation order between simulator runs and with the machine's floating point: on
    # another machine of the same kind this run gives 0.78 / 0.78 every time, so the
    # bound sits below that and far above natural forgetting.
    rate = evaluation.rate
    assert rate.true_after < 0.25 * rate.true_before, rate
    assert rate.arr > 0.7 and rate.direct > 0.7, rate
    assert evaluation.degree["after"] > evaluation.degree["before"] + 0.3
    # Accuracy on the remaining providers is kept; on the withdrawn one it falls.
    before, after = evaluation.accuracy["before"], evaluation.accuracy["after"]
    for site in ("site-2", "site-3"):
        assert after[site] >= before[site] - 0.05, site
    assert after["site-1"] < before["site-1"] - 0.3


def test_run_federated_refuses_bad_withdrawals_before_running(tmp_path) -> None:
    digits = load_digits()
    config = FederatedConfig(
        network="mlp",
        network_args={"in_shape": [1, 8, 8], "num_classes": 10, "hidden": [8]},
        rounds=2,
        local_steps=1,
    )
    clients = {"a": digits.subset(slice(0, 20)), "b": digits.subset(slice(20, 40))}
    with pytest.raises(ValueError, match="not one of"):
        run_federated(clients, config, tmp_path, withdrawal=Withdrawal("c", 1))
    with pytest.raises(ValueError, match="not within the 2 rounds"):
        run_federated(clients, config, tmp_path, withdrawal=Withdrawal("a", 2))
    empty = {**clients, "a": digits.subset(slice(0, 0))}
    with pytest.raises(ValueError, match="has no data, so there is nothing to withdraw"):
        run_federated(empty, config, tmp_path, withdrawal=Withdrawal("a", 1))
    small = FederatedConfig(
        network="mlp",
        network_args={"in_shape": [1, 8, 8], "num_classes": 5, "hidden": [8]},
        rounds=2,
        local_steps=1,
    )
    with pytest.raises(ValueError, match="outputs 5 classes"):
        run_federated(clients, small, tmp_path)
    with pytest.raises(ValueError, match="at least 2 clients"):
        run_federated({"a": clients["a"]}, config, tmp_path)
    with pytest.raises(ValueError, match="backend must be one of"):
        run_federated(clients, config, tmp_path, backend="prod")
    assert not (tmp_path / "flare").exists() and not (tmp_path / "poc").exists()  # nothing ran


def test_cli_fl_simulate_refuses_bad_options_before_loading_data(tmp_path, capsys) -> None:
    import argparse

    from monai_forget.cli import main
    from monai_forget.cli.fl import register

    parser = argparse.ArgumentParser(prog="monai-forget")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["fl", "simulate", "--withdraw", "site-9", "--out", str(tmp_path)])
    assert (args.data, args.clients, args.rounds, args.withdraw_round) == ("acdc", 3, 9, 7)
    with pytest.raises(ValueError, match="'site-9' is not one of"):
        args.func(args)
    out = str(tmp_path / "o")
    assert main(["fl", "simulate", "--clients", "1", "--out", out]) == 2
    assert "a federation needs at least 2 providers (--clients), got 1" in capsys.readouterr().err
    assert main(["fl", "simulate", "--site-signature", "--out", out]) == 2
    assert "constructed scenario" in capsys.readouterr().err
    assert main(["fl", "simulate", "--remaining", "site-1", "--out", out]) == 2
    assert "one that stays, not the withdrawing one" in capsys.readouterr().err
    assert main(["fl", "poc", "--retrained", "2", "--out", out]) == 2
    assert "at least 3 models" in capsys.readouterr().err
    two = ["fl", "simulate", "--clients", "2", "--out", out]
    assert main([*two, "--auditors", "refmodel", "ks"]) == 2
    assert "(refmodel) needs 3 or more providers" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_cli_generator_defaults_are_the_library_defaults() -> None:
    from monai_forget.cli import build_parser
    from monai_forget.fl import DEFAULT_GENERATOR

    args = build_parser().parse_args(["fl", "simulate", "--out", "x"])
    cli = {k: getattr(args, k) for k in DEFAULT_GENERATOR}
    assert cli == dict(DEFAULT_GENERATOR)  # the parser keeps torch out, so it repeats them


def test_a_poc_job_that_lost_a_client_names_it(tmp_path) -> None:
    """A client that drops out of a POC deployment mid-round (its processes killed at the
    start of its withdrawal round, as measured: the server notices at its heartbeat
    timeout and aborts the job) is named in the error, with what became of the model."""
    log = tmp_path / "poc" / "example_project" / "prod_00" / "server" / "log.txt"
    log.parent.mkdir(parents=True)
    log.write_text(
        "2026-11-24 10:26:30,657 - ClientManager - INFO - Client: New client site-1@192.0.2.2 "
        "joined. Sent token.  Total clients: 1\n"
        "2026-11-24 10:37:04,234 - ClientManager - INFO - Client Name:site-1 left.  Total "
        "clients: 2\n"
        "2026-11-24 10:37:04,236 - ServerEngine - WARNING - notified SJ of dead-job: "
        "job_id='a0bc'; client_name='site-1'; reason='client dead'\n"
        # at shutdown every client leaves in order: not a drop-out
        "2026-11-24 10:38:23,900 - ClientManager - INFO - Client Name:site-2 left.  Total "
        "clients: 1\n"
    )
    assert clients_that_left(log.read_text()) == ["site-1"]
    message = poc_failure("a0bc", "FINISHED:EXECUTION_EXCEPTION", tmp_path / "poc")
    assert "ended FINISHED:EXECUTION_EXCEPTION" in message
    assert "client(s) site-1 dropped out" in message
    assert "nothing of the interrupted round" in message and str(tmp_path / "poc") in message
    log.write_text("2026-11-24 10:38:23,900 - ClientManager - INFO - Client Name:site-2 left.\n")
    assert clients_that_left(log.read_text()) == []
    assert "dropped out" not in poc_failure("a0bc", "FINISHED:ABORTED", tmp_path / "poc")


def test_the_withdrawal_rules_are_the_library_s():
    """The rules `fl simulate` refuses by are the library's (one place): the same refusal
    from `check_withdrawal` as from the command line, and the default auditors."""
    from monai_forget.fl.run import check_withdrawal, default_auditors

    sites = ["site-1", "site-2", "site-3"]
    assert check_withdrawal(sites, "site-3") == ["site-1"]
    assert check_withdrawal(sites, "site-1", ["site-3"], ("refmodel",), 3) == ["site-3"]
    assert default_auditors(2) == ("ema", "ks")
    assert default_auditors(3) == ("refmodel", "ema", "ks")
    with pytest.raises(ValueError, match="needs 3 or more providers"):
        check_withdrawal(sites[:2], "site-2", auditors=("refmodel",))
    with pytest.raises(ValueError, match="not one of"):
        check_withdrawal(sites, "site-9")
    with pytest.raises(ValueError, match="not the withdrawing one"):
        check_withdrawal(sites, "site-1", ["site-1"])
    with pytest.raises(ValueError, match="not among those that stay"):
        check_withdrawal(sites, "site-1", ["site-7"])
    with pytest.raises(ValueError, match="at least 3 models"):
        check_withdrawal(sites, "site-1", retrained=2)
    assert check_withdrawal(sites, "site-1", retrained=0) == ["site-2"]
    with pytest.raises(ValueError, match="at least 2 providers"):
        check_withdrawal(sites[:1], "site-1")
