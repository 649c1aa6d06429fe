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
    with pytest.raises(ValueError, match=r"^margin must be in \(0, 1\), got .*; e.g. 0.5$"):
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
