"""The reference-model auditor's online setting: reference models in pairs on
complementary halves that hold every scored sample, and RMIA's ratio to their mean."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from monai_forget.audit import NOT_FORGOTTEN, ReferenceModelAuditor
from monai_forget.audit.refmodel import ROLES
from monai_forget.audit.refmodel_reference import RefModelReference
from monai_forget.data import LabelledImages, load_digits
from monai_forget.shadow import ShadowTrainer, SupervisedRecipe

RECIPE = SupervisedRecipe(
    network="mlp",
    network_args={"in_shape": (1, 8, 8), "num_classes": 10, "hidden": (64,)},
    steps=300,
    batch_size=32,
)


@pytest.fixture()
def trained_on(monkeypatch) -> list[set[str]]:
    """The sample hashes of every training set the reference models are trained on."""
    sets: list[set[str]] = []
    train_many = ShadowTrainer.train_many

    def spy(self, datasets, seeds, *args, **kwargs):
        sets.extend(set(d.sample_hashes) for d in datasets)
        return train_many(self, datasets, seeds, *args, **kwargs)

    monkeypatch.setattr(ShadowTrainer, "train_many", spy)
    return sets


def test_online_reference_sets_are_pairs_of_complementary_halves() -> None:
    """Models 2j and 2j + 1 split the pool between them, so each sample is in exactly
    half of the models; the pairs are different splits; seeds run from ``seed``."""
    pool = load_digits().subset(slice(0, 300))
    sets, seeds = ReferenceModelAuditor(n_references=6, setting="online", seed=3).reference_sets(
        pool
    )
    assert seeds == [3, 4, 5, 6, 7, 8]
    everyone = set(pool.sample_hashes)
    halves = [set(s.sample_hashes) for s in sets]
    for j in range(0, 6, 2):
        assert not halves[j] & halves[j + 1]
        assert halves[j] | halves[j + 1] == everyone
        assert abs(len(halves[j]) - 150) <= 5
    assert len({frozenset(h) for h in halves}) == 6
    counts = Counter(h for half in halves for h in half)
    assert set(counts.values()) == {3}
    # the offline setting's models never share that structure: seeded halves drawn apart
    offline, _ = ReferenceModelAuditor(n_references=6, seed=3).reference_sets(pool)
    assert set(Counter(h for s in offline for h in s.sample_hashes).values()) != {3}


def test_online_pairs_keep_a_patients_slices_together() -> None:
    digits = load_digits().subset(slice(0, 200))
    ids = tuple(f"/d/patient{i // 5:03d}_slice_{i % 5}.h5" for i in range(200))
    pool = LabelledImages(digits.images, digits.labels, ids, digits.num_classes)
    auditor = ReferenceModelAuditor(n_references=4, setting="online", group_pattern=r"patient\d+")
    sets, _ = auditor.reference_sets(pool)
    for j in (0, 2):
        first = {i[:13] for i in sets[j].ids}
        second = {i[:13] for i in sets[j + 1].ids}
        assert not first & second and len(first | second) == 40


def test_online_setting_refuses_what_it_cannot_do() -> None:
    with pytest.raises(ValueError, match="even number"):
        ReferenceModelAuditor(n_references=5, setting="online")
    with pytest.raises(ValueError, match="built for RMIA"):
        ReferenceModelAuditor(score="lira", setting="online")
    with pytest.raises(ValueError, match="setting must be one of"):
        ReferenceModelAuditor(setting="shadow")


def _reference(setting: str, score: str = "rmia") -> RefModelReference:
    two = {r: np.array(["a", "b"]) for r in ROLES}
    return RefModelReference(
        hashes=two,
        labels={r: np.zeros(2, np.int64) for r in ROLES},
        reference_mean={r: np.array([0.6, 0.4]) for r in ROLES},
        sigma=1.0,
        n_references=4,
        score=score,
        setting=setting,
    )


def test_online_score_is_the_ratio_to_the_reference_models_mean() -> None:
    """Zarifzadeh et al. 2024, Sec. 3: with half the models trained on x, Pr(x) is their
    mean; offline it is the approximation ((1 + a) p_out + (1 - a)) / 2 at a = 0."""
    target = {r: np.array([0.9, 0.2]) for r in ROLES}
    online = _reference("online").scores(target)["query"]
    np.testing.assert_allclose(online, np.log([0.9 / 0.6, 0.2 / 0.4]), rtol=1e-12)
    offline = _reference("offline").scores(target)["query"]
    np.testing.assert_allclose(offline, np.log([0.9 / 0.8, 0.2 / 0.7]), rtol=1e-12)
    again = RefModelReference.from_dict(json.loads(json.dumps(_reference("online").to_dict())))
    assert again.setting == "online"
    legacy = _reference("offline").to_dict()
    del legacy["setting"]
    assert RefModelReference.from_dict(legacy).setting == "offline"
    with pytest.raises(ValueError, match="'online' with RMIA"):
        _reference("online", score="lira")


def test_online_audit_trains_every_model_on_half_of_what_it_scores(tmp_path, trained_on):
    """Digits, shuffled so the sets are exchangeable (in file order they differ by
    writer, which the shift check rightly flags): the target trained on D_Q and the
    members. Each scored sample (D_Q, the scored known members and non-members) is in
    exactly half of the reference models' training sets; D_Q is found remembered, and a
    never-seen D_Q is not."""
    digits = load_digits()
    digits = digits.subset(np.random.default_rng(0).permutation(len(digits)))
    query, members, nonmembers, unseen = (
        digits.subset(slice(a, a + 300)) for a in (0, 300, 600, 900)
    )
    target = ShadowTrainer(RECIPE, cache_dir=tmp_path).train(query.concat(members), seed=1)
    auditor = ReferenceModelAuditor(
        recipe=RECIPE, cache_dir=tmp_path, n_references=4, workers=1, setting="online"
    )
    remembered = auditor.audit(target, query, (members, nonmembers))
    assert remembered.details["reference_setting"] == "online"
    assert len(trained_on) == 4
    for role in ROLES:
        for h in auditor.roles_[role].sample_hashes:
            assert sum(h in s for s in trained_on) == 2, role
    assert remembered.decision == NOT_FORGOTTEN, remembered.details["reason"]
    never = auditor.audit(target, unseen, (members, nonmembers))
    assert never.decision != NOT_FORGOTTEN, never.details["reason"]


def test_the_command_line_chooses_the_setting() -> None:
    from monai_forget.cli import build_parser
    from monai_forget.cli.audit_run import _auditor

    line = [
        "audit", "refmodel", "--model", "m.pt", "--network", "mlp", "--query", "q.npz",
        "--members", "m.npz", "--nonmembers", "n.npz", "--recipe", "r.json", "--out", "o/",
    ]  # fmt: skip
    parser = build_parser()
    assert _auditor(parser.parse_args(line), {}).setting == "offline"
    online = _auditor(parser.parse_args([*line, "--setting", "online"]), {})
    assert online.setting == "online" and online.score == "rmia"


def test_two_designs_answer_where_they_agree() -> None:
    """Issue 50: an audit given D_Q's site's images answers where the design without them
    and the one with them agree, else "inconclusive"; its p-value and bound are the
    larger of the two (each must hold), and the reason names a disagreement."""
    from monai_forget.audit import FORGOTTEN, INCONCLUSIVE, AuditResult
    from monai_forget.audit.refmodel import both_designs
    from monai_forget.audit.refmodel_designs import joint_answer as _both_designs

    decisions = (FORGOTTEN, NOT_FORGOTTEN, INCONCLUSIVE)
    for a in decisions:
        for b in decisions:
            assert both_designs(a, b) == (a if a == b else INCONCLUSIVE)

    def result(decision: str, p: float, upper: float, model: str) -> AuditResult:
        return AuditResult(
            "refmodel", decision, "p_member", p, "rule",
            details={"membership_strength_upper": upper, "membership_strength": upper / 2,
                     "reason": f"{decision} here", "alpha": 0.05, "margin": 0.5},
            provenance={"models": {"target": "t", "reference_0": model}, "data": {},
                        "cache_entries": {model: "sha"}},
        )  # fmt: skip

    agreed = _both_designs(result(FORGOTTEN, 0.4, 0.2, "a"), result(FORGOTTEN, 0.3, 0.35, "b"), 7)
    assert agreed.decision == FORGOTTEN and agreed.statistic == 0.4
    assert agreed.details["membership_strength_upper"] == 0.35
    assert agreed.details["site_images"] == 7
    assert agreed.details["designs"]["with_site"]["decision"] == FORGOTTEN
    assert set(agreed.provenance["cache_entries"]) == {"a", "b"}
    # the reason states the joint bound (35 %, the wider design's), not one design's
    assert agreed.details["reason"] == (
        "no evidence of remembering with or without D_Q's site's images (p = 0.4 without "
        "D_Q's site's images, 0.3 with them); D_Q's membership strength at most 35% of the "
        "known members' (95% upper bound) in both, below the margin 0.5"
    )
    assert agreed.details["membership_strength"] == 0.35 / 2  # beside the bound
    remembered_both = _both_designs(
        result(NOT_FORGOTTEN, 0.01, 0.9, "a"), result(NOT_FORGOTTEN, 0.02, 1.1, "b"), 7
    )
    assert remembered_both.details["reason"].startswith(
        "evidence of remembering with and without D_Q's site's images"
    )
    assert "audit again" not in remembered_both.details["reason"]  # the site was given
    assert agreed.provenance["models"]["with_site_reference_0"] == "b"
    remembered = result(NOT_FORGOTTEN, 0.01, 0.9, "b")
    split = _both_designs(result(FORGOTTEN, 0.4, 0.2, "a"), remembered, 7)
    assert split.decision == INCONCLUSIVE
    assert split.details["reason"].startswith("the audits disagree: without D_Q's site's images")


def test_the_sites_images_train_the_reference_models_and_never_overlap_d_q(
    tmp_path, trained_on
) -> None:
    """``site``: the audit also trains online reference models with the site's images,
    each of them in half of those models' training sets, as D_Q is (the design without
    them never sees either); the result records both designs and how many images were
    given; a site image that is also in D_Q is refused (it would be trained on and
    scored)."""
    from monai_forget.data import DataOverlapError

    digits = load_digits()
    digits = digits.subset(np.random.default_rng(1).permutation(len(digits)))
    query, members, nonmembers, site = (
        digits.subset(slice(a, a + 200)) for a in (0, 200, 400, 600)
    )
    target = ShadowTrainer(RECIPE, cache_dir=tmp_path).train(members.concat(site), seed=1)
    auditor = ReferenceModelAuditor(recipe=RECIPE, cache_dir=tmp_path, n_references=4, workers=1)
    result = auditor.audit(target, query, (members, nonmembers), site=site)
    assert result.details["site_images"] == 200
    assert set(result.details["designs"]) == {"without_site", "with_site"}
    assert result.details["designs"]["with_site"]["reference_setting"] == "online"
    assert len(trained_on) == 8  # 4 reference models per design
    for h in [*site.sample_hashes, *query.sample_hashes]:
        assert sum(h in s for s in trained_on) == 2
    with pytest.raises(DataOverlapError, match="query set and the reference models"):
        auditor.audit(
            target, query, (members, nonmembers), site=site.concat(query.subset(slice(0, 5)))
        )
