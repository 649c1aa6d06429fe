"""Evaluation-time audits on the right data: the handlers check the evaluated samples
against the audited ones by content (order-free), and the reference-model handler,
run over the audit set, reproduces the offline audit."""

from __future__ import annotations

import dataclasses
import logging
import re

import numpy as np
import pytest
import torch
from monai.engines import SupervisedEvaluator

from monai_forget.audit import KSAuditor, ReferenceModelAuditor
from monai_forget.data import concat, load_digits
from monai_forget.handlers import KSCalibratedRatio, ReferenceModelAudit, batch_output
from monai_forget.handlers.evaluation_audits import decision_line
from monai_forget.metrics import SampleCheck
from monai_forget.shadow import ShadowTrainer, SupervisedRecipe

RECIPE = SupervisedRecipe(
    network="mlp",
    network_args={"in_shape": (1, 8, 8), "num_classes": 10, "hidden": (64,)},
    steps=200,
    batch_size=32,
)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    torch.set_num_threads(1)
    cache = tmp_path_factory.mktemp("check_cache")
    digits = load_digits()
    calibration, providers = digits.split(0.4, seed=0)
    query, other = providers.split(200 / len(providers), seed=0)
    target = ShadowTrainer(RECIPE, cache_dir=cache).train(concat(query, other), seed=1)
    ks = KSAuditor(recipe=RECIPE, cache_dir=cache).fit_reference(query, calibration)
    return {"cache": cache, "query": query, "other": other, "calibration": calibration,
            "target": target, "ks": ks}  # fmt: skip


def _evaluate(setup, data, handler, loader_kwargs=None) -> dict:
    loader = torch.utils.data.DataLoader(data.to_dataset(), batch_size=64, **(loader_kwargs or {}))
    evaluator = SupervisedEvaluator(
        device=torch.device("cpu"),
        val_data_loader=loader,
        network=setup["target"],
        key_val_metric={"stat": handler},
    )
    evaluator.run()
    return evaluator.state.metrics


def _ks_handler(setup, on_mismatch="error") -> KSCalibratedRatio:
    return KSCalibratedRatio(
        setup["ks"].query_confidence,
        setup["ks"].calibration_confidence,
        from_logits=True,
        output_transform=batch_output(image_key="image"),
        check=SampleCheck(setup["query"].sample_hashes, on_mismatch=on_mismatch),
    )


def test_the_whole_query_set_in_any_order_passes(setup) -> None:
    shuffled = setup["query"].subset(np.random.default_rng(0).permutation(len(setup["query"])))
    in_order = _evaluate(setup, setup["query"], _ks_handler(setup))["stat"]
    assert _evaluate(setup, shuffled, _ks_handler(setup))["stat"] == pytest.approx(in_order)


def test_a_partial_query_set_is_refused_naming_the_gap(setup) -> None:
    with pytest.raises(ValueError, match=r"160 of the 200 samples of the audited D_Q were not"):
        _evaluate(setup, setup["query"].subset(slice(0, 40)), _ks_handler(setup))
    with pytest.warns(UserWarning, match="were not evaluated"):
        _evaluate(setup, setup["query"].subset(slice(0, 40)), _ks_handler(setup, "warn"))


def test_repeated_and_foreign_samples_are_refused(setup) -> None:
    padded = setup["query"].concat(setup["query"].subset(slice(0, 3)))  # DistributedSampler-like
    with pytest.raises(ValueError, match=r"3 evaluation.s. repeated a sample"):
        _evaluate(setup, padded, _ks_handler(setup))
    swapped = setup["query"].subset(slice(0, 190)).concat(setup["other"].subset(slice(0, 10)))
    with pytest.raises(ValueError, match=r"10 evaluated sample.s. are not in the audited D_Q"):
        _evaluate(setup, swapped, _ks_handler(setup))
    with pytest.raises(ValueError, match="without their image"):
        handler = _ks_handler(setup)
        handler._output_transform = batch_output()  # the images are not handed over
        _evaluate(setup, setup["query"], handler)


def test_reference_model_handler_reproduces_the_offline_audit(setup) -> None:
    auditor = ReferenceModelAuditor(recipe=RECIPE, cache_dir=setup["cache"], n_references=2)
    members, nonmembers = setup["other"], setup["calibration"]
    offline = auditor.audit(setup["target"], setup["query"], (members, nonmembers))
    audit_set = concat(*(auditor.roles_[r] for r in ("nonmembers", "query", "members")))
    handler = ReferenceModelAudit(auditor.reference_, from_logits=True)
    metrics = _evaluate(setup, audit_set, handler, {"shuffle": False})
    online = handler.metric_fn.last_result
    assert metrics["stat"] == pytest.approx(offline.statistic, rel=1e-9, abs=1e-300)
    upper = offline.details["membership_strength_upper"]
    assert metrics["stat_upper"] == pytest.approx(min(max(upper, 0.0), 1.0), rel=1e-9)
    assert metrics["stat_forgotten"] == float(offline.decision == "forgotten")
    assert online.decision == offline.decision
    with pytest.raises(ValueError, match="were not evaluated"):
        _evaluate(
            setup,
            audit_set.subset(slice(0, len(audit_set) - 5)),
            ReferenceModelAudit(auditor.reference_),
        )


def test_the_check_is_on_by_default(setup) -> None:
    """Issue 34, item 8: handlers built the plain way, from what fit_reference returned,
    refuse the first 40 of 200 D_Q samples and another provider's data; without hashes
    they refuse to start, naming both fixes; only an explicit opt-out runs unchecked."""
    from monai_forget.audit import EMAAuditor
    from monai_forget.handlers import EMAPValue

    ema = EMAAuditor(recipe=RECIPE, cache_dir=setup["cache"])
    ema_reference = ema.fit_reference(setup["query"], setup["calibration"])
    partial, foreign = setup["query"].subset(slice(0, 40)), setup["other"].subset(slice(0, 200))
    for make in (
        lambda: KSCalibratedRatio(setup["ks"], from_logits=True),
        lambda: EMAPValue(ema_reference, from_logits=True),
    ):
        assert np.isfinite(_evaluate(setup, setup["query"], make())["stat"])
        with pytest.raises(ValueError, match=r"160 of the 200 samples .* were not evaluated"):
            _evaluate(setup, partial, make())
        with pytest.raises(ValueError, match=r"200 evaluated sample.s. are not in the audited"):
            _evaluate(setup, foreign, make())
    ks = setup["ks"]
    with pytest.raises(ValueError, match=r"pass check=SampleCheck\(hashes=.*or check=None"):
        KSCalibratedRatio(ks.query_confidence, ks.calibration_confidence, from_logits=True)
    with pytest.raises(ValueError, match=r"pass check=SampleCheck\(hashes=.*or check=None"):
        EMAPValue(ema_reference.thresholds, from_logits=True)
    unchecked = KSCalibratedRatio(setup["ks"], from_logits=True, check=None)
    assert np.isfinite(_evaluate(setup, partial, unchecked)["stat"])  # the user's choice


def test_a_checks_own_hashes_override_the_references(setup) -> None:
    """``SampleCheck(hashes)`` names the audited samples even where the reference carries
    D_Q's: the evaluation is checked against the given set, not the reference's."""
    first = setup["query"].subset(slice(0, 40))
    given = SampleCheck(first.sample_hashes, on_extra="ignore")
    handler = KSCalibratedRatio(setup["ks"], from_logits=True, check=given)
    assert np.isfinite(_evaluate(setup, setup["query"], handler)["stat"])  # 40 found
    missing = SampleCheck(setup["other"].subset(slice(0, 5)).sample_hashes, on_extra="ignore")
    with pytest.raises(ValueError, match=r"5 of the 5 samples .* were not evaluated"):
        _evaluate(
            setup, setup["query"], KSCalibratedRatio(setup["ks"], from_logits=True, check=missing)
        )


def test_a_query_set_holding_exact_duplicates_is_whole_when_each_copy_is_evaluated(setup):
    """Real data sets hold exact duplicates (PneumoniaMNIST's test split: 3 images twice):
    a D_Q with a duplicate evaluated whole passes; one evaluation more is a repeat."""
    query = setup["query"]
    with_copy = query.concat(query.subset(slice(0, 2)))  # D_Q itself holds 2 images twice
    ks = KSAuditor(recipe=RECIPE, cache_dir=setup["cache"]).fit_reference(
        with_copy, setup["calibration"]
    )
    handler = lambda: KSCalibratedRatio(ks, from_logits=True)  # noqa: E731
    assert np.isfinite(_evaluate(setup, with_copy, handler())["stat"])
    once_more = with_copy.concat(query.subset(slice(0, 1)))
    with pytest.raises(ValueError, match=r"1 evaluation.s. repeated a sample"):
        _evaluate(setup, once_more, handler())
    with pytest.raises(ValueError, match=r"1 of the 202 samples .* were not evaluated"):
        _evaluate(setup, query.concat(query.subset(slice(0, 1))), handler())


def test_a_batch_is_hashed_once_for_every_handler_but_again_when_changed() -> None:
    """The handlers sharing one output transform hash each batch once (the overhead
    target); a batch changed in place since is hashed again, never answered from the
    cache."""
    from monai_forget.fingerprint import image_hashes
    from monai_forget.metrics.query_check import hash_ids, image_ids

    batch = torch.rand(3, 1, 4, 4)
    first = image_ids(batch)
    assert torch.equal(image_ids(batch), first)
    batch[0] += 1.0
    changed = image_ids(batch)
    expected = torch.from_numpy(hash_ids(image_hashes(batch.numpy())))
    assert torch.equal(changed, expected) and not torch.equal(changed[:1], first[:1])
    transform = batch_output(image_key="image")
    output = [{"pred": torch.zeros(2), "label": torch.tensor(1), "image": batch[i]}
              for i in range(3)]  # fmt: skip
    assert transform(output) is transform(output)  # one stacking for every handler


def test_each_handler_logs_its_decision_in_words(setup, caplog) -> None:
    """Issue 50, item 5: at evaluation time each audit handler logs the decision, the bound
    as a share (0-100 %) and why, not only numbers."""
    auditor = ReferenceModelAuditor(recipe=RECIPE, cache_dir=setup["cache"], n_references=2)
    auditor.audit(setup["target"], setup["query"], (setup["other"], setup["calibration"]))
    audit_set = concat(*(auditor.roles_[r] for r in ("nonmembers", "query", "members")))
    caplog.set_level(logging.INFO)
    for data, handler in (
        (setup["query"], KSCalibratedRatio(setup["ks"], from_logits=True)),
        (audit_set, ReferenceModelAudit(auditor.reference_, from_logits=True)),
    ):
        caplog.clear()
        _evaluate(setup, data, handler)
        result = handler.metric_fn.last_result
        lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("stat: ")]
        assert lines == [decision_line("stat", result)], caplog.text[-2000:]
        assert result.decision in lines[0]
    bound = re.search(
        r"D_Q's membership strength (at most (\d+)% of the known members'|relative to the "
        r"known members: no bound)",
        lines[0],
    )
    assert bound, lines[0]
    assert bound.group(2) is None or 0 <= int(bound.group(2)) <= 100
    # the case, a bound of 1.5034: the metric is stored as a share, <= 1
    from types import SimpleNamespace

    from monai.handlers import IgniteMetricHandler

    details = {**result.details, "membership_strength_upper": 1.5034}
    handler.metric_fn.last_result = dataclasses.replace(result, details=details)
    engine = SimpleNamespace(state=SimpleNamespace(metrics={}), logger=logging.getLogger("t"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(IgniteMetricHandler, "completed", lambda self, engine, name: None)
        handler.completed(engine, "stat")
    assert engine.state.metrics["stat_upper"] == 1.0


def test_a_bound_past_one_is_logged_and_stored_as_a_share() -> None:
    """The issue's case: an upper bound of 1.5034 was logged as p_member_upper: 1.5034."""
    from monai_forget.audit import AuditResult

    result = AuditResult(
        method="refmodel", decision="not forgotten", statistic_name="p_member",
        statistic=0.001, rule="p < alpha",
        details={"membership_strength_upper": 1.5034, "reason": "evidence of remembering"},
    )  # fmt: skip
    line = decision_line("audit", result)
    assert "no bound (the audit cannot exclude full membership)" in line
    assert "100%" not in line and "150" not in line
    assert line.startswith("audit: not forgotten") and line.endswith("evidence of remembering")


def _with_copies(query):
    """D_Q given with 20 exact copies and 10 near copies (re-windowed: r = 1, new bytes)."""
    from monai_forget.data import LabelledImages

    near = query.subset(slice(20, 30))
    near = LabelledImages(near.images * 1.5 + 0.05, near.labels, num_classes=near.num_classes)
    return query.concat(query.subset(slice(0, 20)), near)


def test_handlers_leave_out_the_copies_the_audit_collapsed(setup) -> None:
    """Issue 66, item 2: the audit decides on D_Q's 200 distinct images; the K-S and
    reference-model handlers, evaluating the 230 given, leave the copies out as it did
    and reproduce its statistic (with the copies counted, K-S differs)."""
    given = _with_copies(setup["query"])
    ks = KSAuditor(recipe=RECIPE, cache_dir=setup["cache"])
    whole = ks.audit(setup["target"], given, setup["calibration"])
    assert whole.sizes["query"] == 200
    assert (whole.details["query_exact_copies"], whole.details["query_near_copies"]) == (20, 10)
    reference = ks.fit_reference(given, setup["calibration"])
    handler = KSCalibratedRatio(reference, from_logits=True,
                                output_transform=batch_output(image_key="image"))  # fmt: skip
    assert _evaluate(setup, given, handler)["stat"] == pytest.approx(whole.statistic, rel=1e-9)
    counted = KSCalibratedRatio(reference, from_logits=True,
                                output_transform=batch_output(image_key="image"),
                                check=SampleCheck(given.sample_hashes, copies=()))  # fmt: skip
    assert _evaluate(setup, given, counted)["stat"] != pytest.approx(whole.statistic, rel=1e-9)

    auditor = ReferenceModelAuditor(recipe=RECIPE, cache_dir=setup["cache"], n_references=2)
    offline = auditor.audit(setup["target"], given, (setup["other"], setup["calibration"]))
    assert offline.sizes["query"] == 200
    audit_set = concat(auditor.roles_["nonmembers"], given, auditor.roles_["members"])
    handler = ReferenceModelAudit(auditor.reference_, from_logits=True)
    stat = _evaluate(setup, audit_set, handler, {"shuffle": False})["stat"]
    assert stat == pytest.approx(offline.statistic, rel=1e-9, abs=1e-300)
