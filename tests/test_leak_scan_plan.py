"""A leak scan set up once (issue 67, item 3): ``memorisation scan`` builds a
LeakScanPlan, checked before any model is read, and prints what the library says with
its own flags (issue 67, item 2)."""

from __future__ import annotations

import numpy as np
import pytest

from monai_forget.leak_scan_plan import LeakScanPlan


def test_one_name_or_a_roster_never_both_or_neither(tmp_path):
    roster = tmp_path / "names.csv"
    roster.write_text("name,patient\nMARY,p1\nRUTH,p2\n")
    with pytest.raises(ValueError, match="give one `name` or a `roster`"):
        LeakScanPlan.build(name="MARY", roster=roster)
    with pytest.raises(ValueError, match="give one `name` or a `roster`"):
        LeakScanPlan.build()
    with pytest.raises(ValueError, match="`column` and `patient_column` read a `roster`"):
        LeakScanPlan.build(name="MARY", column="name")
    plan = LeakScanPlan.build(roster=roster, patient_column="patient")
    assert list(plan.names) == ["MARY", "RUTH"] and list(plan.names.patients) == ["p1", "p2"]
    assert list(LeakScanPlan.build(name="MARY").names) == ["MARY"]


def test_the_value_burned_is_the_pipelines_brightest_through_a_bundle():
    assert LeakScanPlan.build(name="A", through_bundle=True).config.value == "max"
    assert LeakScanPlan.build(name="A").config.value == 1.0
    assert LeakScanPlan.build(name="A", value=0.5, through_bundle=True).config.value == 0.5


class _Probes:
    def __init__(self, shape):
        self.shape = shape

    def clean(self):
        return np.zeros(self.shape)


def test_probes_at_another_model_input_than_the_canarys_are_refused():
    config = LeakScanPlan.build(name="A").config
    measured = {"input_shape": [1, 64, 64]}
    plan = LeakScanPlan(["A"], config, measured, "c.manifest.json", through_bundle=True)
    plan.check_probes(_Probes((3, 1, 64, 64)))
    with pytest.raises(ValueError, match="64x64 model input, but this scan's bundle delivers"):
        plan.check_probes(_Probes((3, 1, 128, 128)))
    LeakScanPlan(["A"], config, measured, "c.manifest.json").check_probes(_Probes((3, 1, 8, 8)))


def test_the_command_line_names_its_own_flags_where_the_library_names_parameters(tmp_path, capsys):
    from monai_forget.cli import as_flags, build_parser, main

    code = main(["memorisation", "scan", "--model", "m.pt", "--network", "mlp-1",
                 "--probes", "p.npz", "--name", "MARY", "--column", "name",
                 "--out", str(tmp_path / "scan")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert "--column and --patient-column read a --roster; drop them with --name" in err, err
    parser = build_parser()
    scan = parser.parse_args(["memorisation", "scan", "--model", "m", "--network", "n",
                              "--probes", "p", "--name", "A", "--out", "o"])  # fmt: skip
    said = "`manifest` and `remaining` and `patient_column`"
    assert as_flags(said, parser, scan) == "--canary-manifest and `remaining` and --patient-column"
    fl = parser.parse_args(["fl", "simulate", "--out", "o"])
    assert "--remaining" in as_flags(said, parser, fl)
    # a table entry applies only where the command has that flag: `canary inject` writes
    # its manifest with --manifest, `memorisation scan` reads one with --canary-manifest
    inject = parser.parse_args(["canary", "inject", "src", "dst", "--text", "A"])
    assert as_flags("`manifest`", parser, inject) == "--manifest"
    assert as_flags("`manifest`", parser, scan) == "--canary-manifest"
