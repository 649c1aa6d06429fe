"""`WithdrawalAudit` hands each auditor its own calibration data (digits, small models)."""

from __future__ import annotations

import json

import pytest

from monai_forget.audit import KSAuditor, ReferenceModelAuditor
from monai_forget.bundles import WithdrawalAudit
from monai_forget.data import concat
from monai_forget.demo import DIGITS_RECIPE, digits_split
from monai_forget.shadow import ShadowTrainer


@pytest.fixture(scope="module")
def sets():
    return digits_split(seed=0)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One model cache for the module: the tests share their target and reference models."""
    return tmp_path_factory.mktemp("cache")


def _audit(sets, cache, tmp_path, **kwargs) -> dict:
    """Run K-S and the reference-model auditor on a target trained on A and C; D_Q = B."""
    target = ShadowTrainer(DIGITS_RECIPE, cache_dir=cache).train(
        concat(sets["A"], sets["C"]), seed=1
    )
    held_out, other_collection = sets["calibration"].split(0.5, seed=0)
    options = {"recipe": DIGITS_RECIPE, "seed": 0, "cache_dir": cache}
    audit = WithdrawalAudit(
        target,
        sets["B"],
        (sets["A"], held_out),
        [ReferenceModelAuditor(**options, n_references=2, workers=1), KSAuditor(**options)],
        tmp_path / "out",
        provider="B",
        **({"papers_calibration": concat(sets["A"], held_out, other_collection)} | kwargs),
    )
    audit.run()
    return {m: json.loads((tmp_path / "out" / f"{m}.json").read_text()) for m in ("refmodel", "ks")}


@pytest.mark.slow
def test_papers_calibration_goes_to_ks_and_ema_only(sets, cache, tmp_path) -> None:
    """K-S calibrates on ``papers_calibration`` (A + both held-out halves); the reference-model
    auditor scores half of the pair's non-members, never the other collection."""
    held_out, other_collection = sets["calibration"].split(0.5, seed=0)
    results = _audit(sets, cache, tmp_path)
    papers = len(sets["A"]) + len(held_out) + len(other_collection)
    assert results["ks"]["sizes"]["calibration"] == papers
    refmodel = results["refmodel"]["sizes"]
    assert refmodel["nonmembers"] == pytest.approx(len(held_out) / 2, abs=1)
    assert refmodel["members"] == pytest.approx(len(sets["A"]) / 2, abs=1)
    audit_set = json.loads((tmp_path / "out" / "audit_set.json").read_text())
    assert len(audit_set["nonmembers"]) == refmodel["nonmembers"]


def test_without_papers_calibration_ks_calibrates_on_the_pair(sets, cache, tmp_path) -> None:
    held_out, _ = sets["calibration"].split(0.5, seed=0)
    results = _audit(sets, cache, tmp_path, papers_calibration=None)
    assert results["ks"]["sizes"]["calibration"] == len(sets["A"]) + len(held_out)
