"""One auditor registry (issue 67, item 1): every place that takes or names a withdrawal
auditor takes it from :mod:`monai_forget.auditor_registry`, under one spelling; the old
``reference`` is refused everywhere with the name to use.

The places, each checked below: ``monai-forget audit NAME``, ``fl simulate --auditors``,
the federated run's :class:`~monai_forget.unlearning.evaluation.AuditPlan`, the bundles'
withdrawal audit (auditor objects), ``reference.json`` (:class:`AuditReference`), the
report's names and figures, the federated outcome's table, and the docs' commands."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

import pytest

from monai_forget.auditor_registry import AUDITORS, NAMES, RENAMED, auditor_kind, kind_of

ROOT = Path(__file__).resolve().parents[1]


def _subcommands(parser: argparse.ArgumentParser, *path: str) -> dict:
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def test_the_registry_names_each_auditor_once_with_its_classes():
    assert NAMES == ("refmodel", "ema", "ks")
    assert len(set(NAMES)) == len(NAMES)
    from monai_forget.audit import (
        EMAAuditor,
        EMAReference,
        KSAuditor,
        KSReference,
        ReferenceModelAuditor,
        RefModelReference,
    )

    classes = {k.name: (k.auditor, k.reference) for k in AUDITORS}
    assert classes == {
        "refmodel": (ReferenceModelAuditor, RefModelReference),
        "ema": (EMAAuditor, EMAReference),
        "ks": (KSAuditor, KSReference),
    }
    for kind in AUDITORS:
        assert kind_of(kind.auditor()) is kind
    with pytest.raises(TypeError, match="not a withdrawal auditor"):
        kind_of(object())


@pytest.mark.parametrize("old", sorted(RENAMED))
def test_a_renamed_auditor_is_refused_with_the_name_to_use(old):
    with pytest.raises(ValueError, match=f"now called '{RENAMED[old]}'"):
        auditor_kind(old)
    with pytest.raises(ValueError, match="choose from refmodel, ema, ks"):
        auditor_kind("lira")


def test_the_audit_command_has_one_subcommand_per_auditor_and_refuses_the_old_name(capsys):
    from monai_forget.cli import build_parser, main
    from monai_forget.cli.audit import OPTIONS

    commands = _subcommands(build_parser(), "audit")
    assert set(NAMES) <= set(commands)
    assert set(OPTIONS) == set(NAMES)
    assert set(commands) - set(NAMES) == {"verify", *RENAMED}
    for old, new in RENAMED.items():
        code = main(["audit", old, "--model", "m.pt", "--query", "q.npz"])
        err = capsys.readouterr().err
        assert code == 2 and f"use '{new}'" in err and "Traceback" not in err, err
    # the old name is not offered in the help
    with pytest.raises(SystemExit):
        build_parser().parse_args(["audit", "--help"])
    listed = capsys.readouterr().out.split("positional arguments")[1]
    assert "{refmodel,ema,ks,verify}" in listed
    assert not re.search(r"^\s+reference\s", listed, re.MULTILINE), listed


def test_fl_simulate_takes_the_registry_names_and_refuses_the_old_one(capsys):
    from monai_forget.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(["fl", "simulate", "--out", "o", "--auditors", *NAMES])
    assert args.auditors == list(NAMES)
    for old, new in RENAMED.items():
        with pytest.raises(SystemExit):
            parser.parse_args(["fl", "simulate", "--out", "o", "--auditors", old])
        assert f"use '{new}'" in capsys.readouterr().err


def test_the_federated_run_and_its_outcome_take_the_registry():
    from monai_forget.fl.run import check_withdrawal, default_auditors
    from monai_forget.unlearning.evaluation import AuditPlan

    assert AuditPlan(NAMES).auditors == NAMES
    for old in RENAMED:
        with pytest.raises(ValueError, match="now called"):
            AuditPlan((old,))
    assert default_auditors(3) == NAMES
    assert default_auditors(2) == tuple(k.name for k in AUDITORS if k.calibration == "whole")
    with pytest.raises(ValueError, match="needs 3 or more providers"):
        check_withdrawal(["a", "b"], "a", auditors=NAMES)


def test_reports_and_references_name_every_registered_auditor():
    from monai_forget.audit import AuditReference
    from monai_forget.audit.figures import FIGURES
    from monai_forget.audit.reference import METHODS
    from monai_forget.audit.report import NAMES as REPORT_NAMES
    from monai_forget.audit.report import PRECEDENCE

    fields = {f.name for f in dataclasses.fields(AuditReference)}
    assert set(NAMES) <= fields and METHODS == NAMES
    assert set(FIGURES) == set(NAMES)
    assert {k.name: k.title for k in AUDITORS} == REPORT_NAMES
    assert PRECEDENCE == NAMES


def _documented_commands() -> list[str]:
    texts = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [line for path in texts for line in path.read_text().splitlines()]


def test_the_docs_use_only_registered_auditor_names():
    lines = _documented_commands()
    audits = [m.group(1) for line in lines for m in re.finditer(r"monai-forget audit (\w+)", line)]
    assert audits and set(audits) <= {*NAMES, "verify"}, sorted(set(audits))
    given = [
        name
        for line in lines
        for m in re.finditer(r"--auditors((?: [a-z]+)+)", line)
        for name in m.group(1).split()
    ]
    assert set(given) <= set(NAMES), given
    assert not [line for line in lines if re.search(r"`audit reference\b", line)]
