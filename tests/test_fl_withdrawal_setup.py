"""``fl simulate`` and a Python user build the same FederatedWithdrawal (issue 67, item
3): checked when built, before any data is read; the command line only parses and
prints."""

from __future__ import annotations

import ast
import dataclasses
import inspect

import pytest

from monai_forget.fl.withdrawal_setup import FederatedWithdrawal


def _from_command_line(*argv: str) -> FederatedWithdrawal:
    from monai_forget.cli import build_parser
    from monai_forget.cli.fl_run import setup_from

    return setup_from(build_parser().parse_args(["fl", "simulate", "--out", "o", *argv]))


def test_the_command_line_defaults_are_the_library_defaults():
    assert _from_command_line() == FederatedWithdrawal()


def test_the_command_line_builds_what_a_python_user_builds():
    given = _from_command_line(
        "--data", "mnist", "--clients", "4", "--per-client", "50", "--site-signature",
        "--rounds", "3", "--local-steps", "5", "--hidden", "64,32", "--withdraw", "site-2",
        "--method", "forsaken", "--withdraw-round", "2", "--iterations", "7",
        "--auditors", "ks", "ema", "--retrained", "0", "--seed", "3",
    )  # fmt: skip
    expected = FederatedWithdrawal(
        data="mnist", clients=4, per_client=50, site_signature=True, rounds=3,
        local_steps=5, hidden=(64, 32), withdraw="site-2", method="forsaken",
        withdraw_round=2, generator={"iterations": 7, "drift_weight": 0.03, "step_weight": 0.0},
        auditors=("ks", "ema"), retrained=0, seed=3,
    )  # fmt: skip
    assert given == expected


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"data": "cifar"}, "data must be one of"),
        ({"clients": 2, "auditors": ("refmodel",)}, "needs 3 or more providers"),
        ({"data": "acdc", "site_signature": True}, "constructed scenario"),
        ({"withdraw": "site-9"}, "is not one of"),
        ({"method": "erase"}, "method must be one of"),
        ({"retrained": 2}, "at least 3 models"),
        ({"method": "forsaken", "site_joins": 2}, "removed after training"),
        ({"auditors": ("reference",)}, "now called 'refmodel'"),
    ],
)
def test_a_bad_withdrawal_is_refused_when_built_before_any_data_is_read(
    options, message, monkeypatch, tmp_path
):
    monkeypatch.setenv("MONAI_FORGET_DATA", str(tmp_path / "no data here"))
    with pytest.raises(ValueError, match=message):
        FederatedWithdrawal(**options)


def test_the_defaults_make_a_runnable_setup_whose_auditors_follow_the_providers():
    assert FederatedWithdrawal().auditors == ("refmodel", "ema", "ks")
    assert FederatedWithdrawal(clients=2).auditors == ("ema", "ks")
    assert dataclasses.replace(FederatedWithdrawal(), clients=5).sites[-1] == "site-5"


def test_the_command_line_only_parses_and_prints():
    """No rule is decided in ``fl simulate``'s run: it builds the setup, runs it, prints."""
    from monai_forget.cli import fl_run

    for function in (fl_run.run_simulate, fl_run.setup_from):
        tree = ast.parse(inspect.getsource(function))
        branches = [n for n in ast.walk(tree) if isinstance(n, (ast.If, ast.IfExp, ast.Match))]
        assert not branches, f"{function.__name__} decides {len(branches)} rule(s)"
