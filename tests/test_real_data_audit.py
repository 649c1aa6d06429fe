"""A bounded withdrawal audit on real chest X-rays (PneumoniaMNIST), both auditors.

The consortium trains a small CNN on providers A and B; provider C never contributed.
Auditing A (a member) must give "not forgotten" with both auditors; auditing C must
give "forgotten" with EMA. The calibration set shares no sample with any provider.
Runs in well under 90 s on 2 CPU cores; skips with a reason when the data is absent.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from monai_forget.audit import FORGOTTEN, NOT_FORGOTTEN, EMAAuditor, KSAuditor
from monai_forget.data import LabelledImages, concat, load_pneumoniamnist
from monai_forget.fingerprint import sample_hashes
from monai_forget.shadow import ShadowTrainer, SupervisedRecipe

pytestmark = pytest.mark.slow

# The benchmark's PneumoniaMNIST design (MONAI's Classifier, residual units, instance
# norm) with a smaller step budget: it still fits its 400 training images exactly.
RECIPE = SupervisedRecipe(
    network="Classifier",
    network_args={"in_shape": (1, 28, 28), "classes": 2, "channels": (8, 16), "strides": (2, 2)},
    steps=250,
    batch_size=32,
    learning_rate=1e-3,
)
AUDIT_SEED = 0
TARGET_SEED = 1
PROVIDER_SIZE = 200
CALIBRATION_SIZE = 400


def _unique(data: LabelledImages) -> LabelledImages:
    """Drop repeated images (PneumoniaMNIST holds a few exact duplicates)."""
    _, first = np.unique(sample_hashes(data), return_index=True)
    return data.subset(np.sort(first))


@pytest.fixture(scope="module")
def audits(shared_data: Path, tmp_path_factory) -> dict:
    previous = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: one thread is fastest and robust to a busy host
    try:
        cache = tmp_path_factory.mktemp("real_audit_cache")
        pool = _unique(load_pneumoniamnist("train", root=shared_data))
        calibration, rest = pool.split(CALIBRATION_SIZE / len(pool), seed=0)
        a, rest = rest.split(PROVIDER_SIZE / len(rest), seed=0)
        b, rest = rest.split(PROVIDER_SIZE / len(rest), seed=0)
        c, _ = rest.split(PROVIDER_SIZE / len(rest), seed=0)
        target = ShadowTrainer(RECIPE, cache_dir=cache).train(concat(a, b), seed=TARGET_SEED)
        options = {"recipe": RECIPE, "seed": AUDIT_SEED, "cache_dir": cache}
        ks, ema = KSAuditor(**options), EMAAuditor(**options)
        return {
            ("ks", "member"): ks.audit(target, a, calibration, label="member A"),
            ("ema", "member"): ema.audit(target, a, calibration, label="member A"),
            ("ks", "withdrawn"): ks.audit(target, c, calibration, label="non-member C"),
            ("ema", "withdrawn"): ema.audit(target, c, calibration, label="non-member C"),
        }
    finally:
        torch.set_num_threads(previous)


def test_member_provider_is_not_forgotten(audits: dict) -> None:
    ks, ema = audits["ks", "member"], audits["ema", "member"]
    assert ks.statistic < 1.0
    assert ks.decision == NOT_FORGOTTEN
    assert ema.statistic > ema.details["alpha"]
    assert ema.decision == NOT_FORGOTTEN
    assert ks.sizes["query"] == ema.sizes["query"] == PROVIDER_SIZE


def test_withdrawn_provider_is_forgotten_by_ema(audits: dict) -> None:
    ema = audits["ema", "withdrawn"]
    assert ema.statistic <= ema.details["alpha"]
    assert ema.decision == FORGOTTEN
    # The member audit saw more memorised samples than the non-member audit.
    member_rate = audits["ema", "member"].details["membership_rate"]
    assert ema.details["membership_rate"] < member_rate


def test_ks_calls_the_never_seen_provider_not_forgotten_as_published(audits: dict) -> None:
    """Ground truth: C never contributed, so the right answer is "forgotten". K-S as the
    paper defines it gets it wrong here: the target's confidences on C sit closer to the
    query shadow's than the calibration shadow's do (rho_KS 0.86 < 1), the paper's false
    negative for query data like the training data (docs/ks_auditor.md). Pinned as
    measured, so the published rule stays as published."""
    ks = audits["ks", "withdrawn"]
    d_qt, d_qc = ks.details["ks_query_target"], ks.details["ks_query_calibration"]
    assert ks.statistic == pytest.approx(d_qt / d_qc)
    assert ks.statistic == pytest.approx(0.857, abs=0.05)
    assert ks.decision == NOT_FORGOTTEN  # wrong: C was never trained on
