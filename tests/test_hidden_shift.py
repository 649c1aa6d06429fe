"""A "forgotten" carries how far it holds against a shift the reference models cannot
see (issue 66, item 1; :mod:`monai_forget.audit.hidden_shift`)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import scipy.stats
from test_result_report import _refmodel_result  # one D_Q audited end to end

from monai_forget.audit.hidden_shift import (
    TOLERANCE_MAX,
    TOLERANCE_STEP,
    hidden_shift_tolerance,
    tolerance_text,
)
from monai_forget.audit.refmodel import refmodel_decision, set_test
from monai_forget.audit.refmodel_calibration import MembershipCalibration
from monai_forget.audit.result import FORGOTTEN

ALPHA, MARGIN = 0.05, 0.5


def _audit(rng, share: float, shift: float, size: int = 50, seed: int = 0):
    members, nonmembers = rng.normal(1.0, 1.0, 200), rng.normal(0.0, 1.0, 200)
    k = round(share * size)
    query = np.concatenate([rng.normal(1.0, 1.0, k), rng.normal(0.0, 1.0, size - k)]) + shift
    calibration = MembershipCalibration.fit(members, nonmembers, seed=seed)
    test = set_test(query, calibration, alpha=ALPHA, margin=MARGIN, seed=seed, n_resamples=99,
                    with_tolerance=True)  # fmt: skip
    return test, refmodel_decision(test, ALPHA), (query, calibration, nonmembers)


def _calibrated_shift(calibration, shift: float, rng) -> float:
    """The site's hidden shift on the tolerance's scale: its never-seen scores (raw N(0, 1)
    moved by ``shift``) against the known non-members, in membership probability, in sd
    of the known non-members'."""
    known = calibration.nonmembers
    unseen = calibration(rng.normal(0.0, 1.0, 4000) + shift)
    return float((known.mean() - unseen.mean()) / known.std(ddof=1))


def test_a_forgotten_that_covers_the_hidden_shift_keeps_its_level():
    """Half of D_Q remembered, its site 0.5 sd lower under the target alone: "forgotten"
    comes often (the hazard), but a "forgotten" whose tolerance covers the site's hidden
    shift (measured on the tolerance's scale) comes at most alpha of the time (a tolerance
    computed the wrong way round covers nearly all)."""
    rng = np.random.default_rng(7)
    draws, forgotten, covered = 200, 0, 0
    for i in range(draws):
        test, decision, (_, calibration, _) = _audit(rng, share=0.5, shift=-0.5, seed=i)
        if decision == FORGOTTEN:
            forgotten += 1
            hidden = _calibrated_shift(calibration, -0.5, rng)
            assert hidden > 0.2  # the site does sit lower on the calibrated scale
            covered += test.shift_tolerance >= hidden - 1e-9
    assert forgotten / draws > 0.3, forgotten
    upper = scipy.stats.binomtest(covered, draws).proportion_ci(0.95, method="wilson").high
    assert covered / draws <= ALPHA and upper <= 0.1, covered


def _decide(mapped: np.ndarray, test, calibration, seed: int) -> str:
    """The decision on membership probabilities ``mapped``, from its parts: the bound
    (``share_bound``), the permutation test (the same seed), the rule."""
    from monai_forget.audit.refmodel_calibration import permutation_pvalue
    from monai_forget.audit.remembered_share import KnownSets, share_bound

    n = calibration.nonmembers
    p = permutation_pvalue(mapped, calibration.query_maps(mapped.size), n,
                           calibration.nonmember_maps, n_resamples=99, seed=seed)  # fmt: skip
    upper = share_bound(mapped, KnownSets.of(calibration.members, n), ALPHA).upper
    return refmodel_decision(dataclasses.replace(test, pvalue=float(p), share_upper=upper), ALPHA)


def test_the_tolerance_is_the_last_grid_shift_that_stays_forgotten():
    """Checked by deciding afresh on D_Q's membership probabilities raised by the
    tolerance and by one grid step beyond (the bound of ``share_bound``, the permutation
    test with the same seed, the decision rule)."""
    rng = np.random.default_rng(3)
    seen = 0
    for i in range(30):
        test, decision, (query, calibration, _) = _audit(rng, 0.2, 0.0, 100, i)
        if decision != FORGOTTEN:
            assert math.isnan(test.shift_tolerance)
            continue
        seen += 1
        n = calibration.nonmembers
        t, sd = test.shift_tolerance, np.std(n, ddof=1)
        assert abs(t / TOLERANCE_STEP - round(t / TOLERANCE_STEP)) < 1e-9
        mapped = calibration(query)
        assert _decide(mapped, test, calibration, i) == FORGOTTEN
        decided = [_decide(mapped + shift * sd, test, calibration, i)
                   for shift in (t, t + TOLERANCE_STEP)]  # fmt: skip
        assert decided[0] == FORGOTTEN
        if t < TOLERANCE_MAX:
            assert decided[1] != FORGOTTEN
    assert seen >= 10  # a D_Q of 100, a fifth remembered, is often forgotten at margin 0.5


def test_no_tolerance_without_a_forgotten_or_a_spread():
    rng = np.random.default_rng(0)
    test, decision, (query, _, _) = _audit(rng, share=1.0, shift=0.0)
    assert decision != FORGOTTEN and math.isnan(test.shift_tolerance)
    assert math.isnan(hidden_shift_tolerance(query, np.zeros(10), lambda scores: True))
    assert hidden_shift_tolerance(query, np.arange(10.0), lambda scores: True) == TOLERANCE_MAX


def test_every_forgotten_says_its_tolerance_and_nothing_else_does():
    from monai_forget.audit.report import plain_verdict

    forgotten = _refmodel_result(0.0, "site B", member_shift=3.0)
    remembered = _refmodel_result(1.5, "site B")
    assert forgotten.decision == FORGOTTEN and remembered.decision == "not forgotten"
    t = forgotten.details["hidden_shift_tolerance"]
    assert 0 < t < TOLERANCE_MAX
    sentence = f"by up to {t:.2f} sd of the known non-members' membership probabilities"
    assert sentence in forgotten.summary() and sentence in plain_verdict(forgotten)
    assert math.isnan(remembered.details["hidden_shift_tolerance"])
    assert "cannot see" not in remembered.summary() + plain_verdict(remembered)
    # saved and loaded (NaN and numbers through JSON), the sentence is the same
    from monai_forget.audit import AuditResult

    again = AuditResult.from_dict(forgotten.to_dict())
    assert again.summary() == forgotten.summary()


@pytest.mark.parametrize(
    ("tolerance", "expected"),
    [
        (0.0, "Even a small shift"),
        (0.35, "by up to 0.35 sd"),
        (TOLERANCE_MAX, "(the largest checked)"),
    ],
)
def test_the_tolerance_sentence_in_each_case(tolerance, expected):
    assert expected in tolerance_text(tolerance)
    assert tolerance_text(math.nan) == ""


def test_the_joint_answer_keeps_the_smaller_tolerance():
    from monai_forget.audit.refmodel_designs import joint_answer

    without = dataclasses.replace(
        _refmodel_result(0.0, "site B", member_shift=3.0),
        provenance={"models": {}, "data": {}, "cache_entries": {}},
    )
    with_site = dataclasses.replace(
        without, details={**without.details, "hidden_shift_tolerance": 0.1}
    )
    joint = joint_answer(without, with_site, n_site=10)
    assert joint.decision == FORGOTTEN
    assert joint.details["hidden_shift_tolerance"] == pytest.approx(0.1)
    unbounded = {**with_site.details, "hidden_shift_tolerance": math.nan}
    other = dataclasses.replace(with_site, details=unbounded)
    assert math.isnan(joint_answer(without, other, 10).details["hidden_shift_tolerance"])
