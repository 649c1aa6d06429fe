"""The one refusal of a level, share or fraction outside (0, 1) and of a choice outside
its set (``monai_forget.checks``), and that the public boundaries call them: the command
line adds no rule of its own."""

from __future__ import annotations

import math

import pytest

from monai_forget.checks import check_choice, check_fraction


@pytest.mark.parametrize("value", [1e-12, 0.05, 0.5, 1 - 1e-12])
def test_a_value_inside_the_open_interval_is_returned_as_a_float(value) -> None:
    assert check_fraction("alpha", value) == value
    assert isinstance(check_fraction("alpha", value), float)


@pytest.mark.parametrize("value", [0.0, 1.0, -0.1, 1.5, math.nan])
def test_the_ends_outside_values_and_nan_are_refused_by_name(value) -> None:
    with pytest.raises(ValueError, match=r"^margin must be in \(0, 1\), got .*: e.g. 0.5$"):
        check_fraction("margin", value, "0.5")


def test_every_boundary_refuses_a_level_of_one() -> None:
    """A level of 1 would call everything significant: each public object that takes one
    refuses it (the memorisation verdict, the leak scan, the auditors, the gate)."""
    from monai_forget.audit import EMAAuditor, ReferenceModelAuditor
    from monai_forget.handlers import ComplianceGate
    from monai_forget.memorisation import LeakScanConfig
    from monai_forget.memorisation.score import m_score_from_divergences

    score = m_score_from_divergences([0.3, 0.4, 0.5], [0.1, 0.2, 0.1])
    refusals = [
        lambda: score.significant(1.0),
        lambda: LeakScanConfig(alpha=1.0),
        lambda: EMAAuditor(alpha=1.0),
        lambda: ReferenceModelAuditor(alpha=1.0),
        lambda: ComplianceGate("A", ks_metric="rho_KS", alpha=1.0),
    ]
    for refuse in refusals:
        with pytest.raises(ValueError, match=r"alpha must be in \(0, 1\), got 1.0"):
            refuse()
    assert score.significant(0.999) is True  # the same score decides inside the interval


def test_a_choice_is_returned_or_refused_naming_every_option() -> None:
    assert check_choice("correction", "bh", ("bh", "bonferroni", "none")) == "bh"
    with pytest.raises(ValueError) as err:
        check_choice("correction", "holm", ("bh", "bonferroni", "none"))
    assert str(err.value) == "correction must be one of ('bh', 'bonferroni', 'none'), got 'holm'"


def test_the_boundaries_refuse_an_unknown_choice_by_its_parameter() -> None:
    from monai_forget.audit import EMAAuditor, ReferenceModelAuditor
    from monai_forget.memorisation import LeakScanConfig, ProbeSettings
    from monai_forget.metrics import SampleCheck
    from monai_forget.metrics.base import AuditMetric

    for make, name in (
        (lambda: LeakScanConfig(correction="holm"), "correction"),
        (lambda: ProbeSettings(random_feature="noise"), "random_feature"),
        (lambda: EMAAuditor(test="z"), "test"),
        (lambda: ReferenceModelAuditor(setting="semi"), "setting"),
        (lambda: AuditMetric(check=SampleCheck(("ab" * 32,), on_extra="keep")), "on_extra"),
    ):
        with pytest.raises(ValueError, match=rf"^{name} must be one of \("):
            make()


@pytest.mark.parametrize(
    ("interval", "inside", "outside"),
    [
        ("SHARE", [1.0, 0.5, 1e-9], [0.0, -0.1, 1.0000001, math.nan, True, "0.5"]),
        ("LEVEL", [0.5, 1e-9], [0.0, 1.0]),
        ("UNIT", [0.0, 1.0], [-1e-9, 1.0 + 1e-9]),
        ("COUNT", [1, 7, 2.0], [0, -3, 1.5, math.inf]),
        ("INDEX", [0, 4], [-1, 0.5]),
        ("POSITIVE", [1e-12, 3.0], [0.0, -1.0, math.inf]),
        ("HALF_LEVEL", [0.25], [0.5, 0.0]),
    ],
)
def test_each_declared_interval_holds_its_ends(interval, inside, outside) -> None:
    import numpy as np

    from monai_forget import checks

    declared = getattr(checks, interval)
    assert all(v in declared for v in inside), interval
    assert all(np.float64(v) in declared for v in inside if not isinstance(v, bool))
    assert not any(v in declared for v in outside), interval


def test_a_refusal_names_the_parameter_the_interval_and_the_value() -> None:
    from monai_forget.checks import COUNT, SHARE, check_in, check_parameter

    with pytest.raises(ValueError) as err:
        check_in("margin", 1.5, SHARE, "e.g. 0.5")
    assert str(err.value) == "margin must be in (0, 1], got 1.5: e.g. 0.5"
    with pytest.raises(ValueError, match=r"^workers must be an integer >= 1, got 0$"):
        check_in("workers", 0, COUNT)
    assert check_parameter("calibration_ratio", 1.0) == 1.0


def test_a_parameter_checked_at_several_boundaries_is_refused_alike() -> None:
    """``calibration_ratio`` (the withdrawal spec, the FLARE erase and FedEraser's
    calibration) and ``every`` (both evaluation-time handlers) read one interval."""
    from monai_forget.checks import check_parameter
    from monai_forget.fl.erase import run_federaser
    from monai_forget.fl.spec import Removal
    from monai_forget.handlers.memorisation import CheckpointRecorder
    from monai_forget.unlearning.federaser import federaser

    with pytest.raises(ValueError) as expected:
        check_parameter("calibration_ratio", 1.5)
    for refuse in (
        lambda: Removal("site-1", method="federaser", calibration_ratio=1.5),
        lambda: run_federaser(None, "site-1", {}, "w", calibration_ratio=1.5),
        lambda: federaser(None, {}, None, calibration_ratio=1.5),
    ):
        with pytest.raises(ValueError) as err:
            refuse()
        assert str(err.value) == str(expected.value)
    with pytest.raises(ValueError, match=r"^every must be an integer >= 1, got 0$"):
        CheckpointRecorder(every=0)


def test_no_range_is_written_outside_the_declared_intervals() -> None:
    """Every numeric range the library refuses is an Interval of monai_forget.checks: no
    module compares a parameter with the ends of a range and raises on its own."""
    import re
    from pathlib import Path

    package = Path(__file__).resolve().parents[1] / "monai_forget"
    own_range = re.compile(
        r"must be (in [(\[]|(a )?positive|at least \d|>=? ?\d|non-negative|0 or more)"
    )
    inline = re.compile(r"if not -?\d+(\.\d+)? <=? ")
    # the values inside an array (class labels, counts), not a parameter's range
    arrays = ("labels must be non-negative class indices", "counts must be non-negative")
    found = [
        f"{path.relative_to(package)}:{i}: {line.strip()}"
        for path in sorted(package.rglob("*.py"))
        # stats lies below every layer and imports nothing of the package: its own checks
        if path.name not in ("checks.py", "stats.py")
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if (own_range.search(line) or inline.search(line)) and not any(a in line for a in arrays)
    ]
    assert not found, "\n".join(found)


def test_the_command_line_refuses_with_the_library_interval(capsys) -> None:
    from monai_forget.checks import COUNT
    from monai_forget.cli import main

    with pytest.raises(SystemExit):
        main(["shadow", "train", "--index", "-1"])
    assert "--index: must be an integer >= 0, got -1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["audit", "ks", "--model", "m.pt", "--batch-size", "0"])
    assert f"--batch-size: must be {COUNT}, got 0" in capsys.readouterr().err
