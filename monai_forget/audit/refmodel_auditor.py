"""The reference-model auditor: reference models trained by the target's recipe on data
the auditor controls, per-sample scores relative to them, and a set-level three-way
decision, and D_Q's membership strength relative to the known members with its upper bound
(:mod:`~monai_forget.audit.refmodel` holds the statistics).

Two settings (Carlini et al. 2022, Sec. IV-C; Zarifzadeh et al. 2024, Sec. 3):

- offline (the default): no reference model ever trains on a sample that is scored (the
  query set D_Q, the known members and known non-members of the target), so the audit
  costs no training on D_Q, and its reference models can be reused for any query set;
- online: reference models 2j and 2j + 1 train on the two complementary halves of one
  seeded split of the population together with every scored sample, so each scored
  sample (D_Q included) is in exactly half of them, and D_Q and the known non-members
  are treated alike. RMIA's ``Pr(x)`` is then the mean over all of them (half in, half
  out) instead of the offline approximation. The cost: the reference models depend on
  D_Q, so every query set trains its own.

D_Q from a site that looks different (measured both ways: docs/reference_auditor.md). A
never-seen D_Q of a site whose other images the target trained on scores above the known
non-members under reference models that never saw the site: at |D_Q| 20-50 it is called
"not forgotten" in up to 19 % of audits. Online reference models that trained on the
site's images hold that error, but certify a partly remembered D_Q of a site the target
barely knows "forgotten" too often; without them, the shift check holds that error. So
an audit given the site's images (``site``) runs both designs, this auditor's and online
reference models that also train on the site, and answers where they agree
(:func:`~monai_forget.audit.refmodel.both_designs`).
"""

from __future__ import annotations

import itertools
import re
import warnings
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from sklearn.model_selection import StratifiedGroupKFold
from torch import nn

from monai_forget.audit.auditors import ShadowAuditor, check_set_size
from monai_forget.audit.duplicates import Collapsed
from monai_forget.audit.query_checks import check_labels_fit, checked_query
from monai_forget.audit.refmodel import (
    ROLES,
    SCORES,
    membership_signal,
    pooled_sigma,
)
from monai_forget.audit.refmodel_designs import joint_answer
from monai_forget.audit.refmodel_reference import RefModelReference, check_levels
from monai_forget.audit.result import (
    AuditResult,
)
from monai_forget.audit.shift_check import shift_features
from monai_forget.checks import check_choice, check_fraction
from monai_forget.data import DataOverlapError, LabelledImages, check_disjoint, concat
from monai_forget.defaults import REFMODEL_ALPHA, REFMODEL_MARGIN
from monai_forget.fingerprint import model_fingerprint

__all__ = ["ReferenceModelAuditor"]

MIN_REFERENCES = 2
#: Where the reference models' training data stand to the scored samples (module docstring).
SETTINGS: tuple[str, ...] = ("offline", "online")
#: How errors name each role's set.
_ROLE_NAMES = {
    "query": "the query set",
    "members": "the known members",
    "nonmembers": "the known non-members",
}


def sample_groups(data: LabelledImages, pattern: str, name: str) -> np.ndarray:
    """Each sample's group: the first match of ``pattern`` in its id (the whole id when
    nothing matches, so an unmatched sample is a group of its own)."""
    if data.ids is None:
        raise ValueError(
            f"group_pattern={pattern!r} needs sample ids, and {name} has none: load it with "
            "its ids (file paths or datalist entries), or leave group_pattern unset"
        )
    regex = re.compile(pattern)
    return np.array([m.group(0) if (m := regex.search(i)) else i for i in data.ids])


def _halves(
    data: LabelledImages, seed: int, pattern: str | None, name: str
) -> tuple[LabelledImages, LabelledImages]:
    """(reference-model half, scored half) of a known set, by sample or by group."""
    if pattern is None:
        return data.split(0.5, seed=seed)
    groups = sample_groups(data, pattern, name)
    if len(set(groups)) < 2:
        raise ValueError(
            f"{name} holds {len(set(groups))} group(s) matching {pattern!r}; splitting it "
            "between the reference models and the scored half needs at least two"
        )
    folds = StratifiedGroupKFold(n_splits=2, shuffle=True, random_state=seed)
    with warnings.catch_warnings():  # a class with one group cannot be stratified: fine
        warnings.simplefilter("ignore", UserWarning)
        pool, scored = next(folds.split(np.zeros(len(data)), data.labels, groups))
    return data.subset(np.sort(pool)), data.subset(np.sort(scored))


def _split_roles(
    members: LabelledImages, nonmembers: LabelledImages, seed: int, pattern: str | None = None
) -> tuple[LabelledImages, LabelledImages, LabelledImages]:
    """(pool, scored members, scored non-members): half of each known set trains the
    reference models, the other half is scored, so no scored sample was trained on. With
    ``pattern``, whole groups (patients) go to one half: a reference model that trained
    on some slices of a patient would know that patient's other slices."""
    m_pool, m_scored = _halves(members, seed, pattern, _ROLE_NAMES["members"])
    n_pool, n_scored = _halves(nonmembers, seed, pattern, _ROLE_NAMES["nonmembers"])
    return concat(m_pool, n_pool), m_scored, n_scored


def refuse_target_as_reference(target: nn.Module, references: list[nn.Module]) -> None:
    """Refuse reference models with the target's own weights (by SHA-256 of the weights).

    Such a "reference" knows D_Q exactly as the target does, so the target looks like a
    model that never saw it: a cache entry or reference file replaced by the target, its
    ``.sha256`` record rewritten beside it, made the audit decide from the substitute.

    Raises:
        ValueError: naming the reference models and the fix.
    """
    target_print = model_fingerprint(target)
    same = [k for k, m in enumerate(references) if model_fingerprint(m) == target_print]
    if same:
        raise ValueError(
            f"reference model(s) {', '.join(map(str, same))} of {len(references)} hold the "
            f"target's own weights (SHA-256 {target_print[:16]}...): a cache entry or a "
            "reference file was replaced by the target. Delete the reference models' cache "
            "entries (or pass other reference files) and audit again"
        )


def _check_roles(
    query: LabelledImages,
    members: LabelledImages,
    nonmembers: LabelledImages,
    population: LabelledImages,
) -> None:
    check_set_size("query", query)
    check_set_size("known members", members)
    check_set_size("known non-members", nonmembers)
    sets = {
        "query set": ("D_Q", query),
        "known members": ("members", members),
        "known non-members": ("non-members", nonmembers),
        "reference models' training data": ("population", population),
    }
    for (a_name, (a_symbol, a)), (b_name, (b_symbol, b)) in itertools.combinations(sets.items(), 2):
        try:
            check_disjoint(a, b, names=(a_name, b_name), symbols=(a_symbol, b_symbol))
        except DataOverlapError as err:
            raise DataOverlapError(
                f"the {a_name} and the {b_name} share samples: {err}. A reference-model audit "
                "scores each sample against models that never trained on it; keep these sets "
                "apart"
            ) from err


@dataclass
class ReferenceModelAuditor(ShadowAuditor):
    """Withdrawal audit against reference models, with three-way decisions.

    ``calibration`` is ``(members, non-members)``: samples the auditor knows the target
    was trained on (e.g. the retained providers' data) and samples it knows the target
    never saw, from the same distribution as D_Q. Reference model k trains on a seeded
    ``reference_fraction`` subset of the population (``population``, or by default half
    of each known set, the other half being scored), with seed ``seed + k``.

    Args:
        n_references: reference models to train (more give more power; at least 2).
        reference_fraction: share of the population each reference model trains on.
        alpha: level of the set-level test and error level of the membership strength's
            upper bound.
        margin: "forgotten" means the upper bound of D_Q's membership strength relative
            to the known members is below this (default 0.5,
            ``monai_forget.defaults.REFMODEL_MARGIN``).
        score: the per-sample score, ``"rmia"`` (RMIA, the default) or ``"lira"`` (LiRA
            offline, fixed variance).
        setting: ``"offline"`` (the default) or ``"online"`` (module docstring: the
            reference models train on pairs of complementary halves that include every
            scored sample; RMIA only, an even ``n_references``, and new reference models
            for every query set).
        workers: processes training reference models side by side (``None``: one per
            available core; see :meth:`~monai_forget.shadow.ShadowTrainer.train_many`).
            Reference model k is :func:`~monai_forget.shadow.reference_subset` job k, so
            ``monai-forget shadow train`` can train them into a shared cache elsewhere.
        group_pattern: a regular expression whose first match in a sample's id names its
            group, e.g. ``patient\\d+`` for slices of one patient. The known sets are then
            halved by group (stratified by label, scikit-learn's ``StratifiedGroupKFold``),
            so no patient has samples both in the reference models' training data and
            among the scored ones, and the statistics take each group's mean score as
            one unit (a patient's slices are not independent). Every set then needs
            ids, D_Q too. ``None``: samples are the units (one sample per patient).

    Attributes:
        reference_: what the last ``fit_reference``/``audit`` learned.
        roles_: the sets it scored (D_Q, the scored known members and non-members): the
            audit set an evaluation-time check runs over.
        reference_models_: the reference models of the last fit (their SHA-256 are in
            each result's provenance).
        query_collapsed_: D_Q's copies collapsed by the last fit
            (:func:`~monai_forget.audit.duplicates.distinct_query`).
    """

    n_references: int = 8
    reference_fraction: float = 0.5
    alpha: float = REFMODEL_ALPHA
    margin: float = REFMODEL_MARGIN
    score: str = "rmia"
    setting: str = "offline"
    workers: int | None = None
    group_pattern: str | None = None
    roles_: dict[str, LabelledImages] = field(default_factory=dict, init=False, repr=False)
    reference_models_: list[nn.Module] = field(default_factory=list, init=False, repr=False)
    query_collapsed_: Collapsed | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.n_references < MIN_REFERENCES:
            raise ValueError(
                f"n_references={self.n_references}: the reference-model audit needs at least "
                f"{MIN_REFERENCES} reference models (8 or more for power)"
            )
        check_fraction("reference_fraction", self.reference_fraction)
        check_levels(self.alpha, self.margin)
        check_choice("score", self.score, SCORES)
        self._check_setting()
        if self.group_pattern is not None:
            try:
                re.compile(self.group_pattern)
            except re.error as err:
                raise ValueError(
                    f"group_pattern {self.group_pattern!r} is not a regular expression ({err}); "
                    r"e.g. 'patient\d+' groups the slices of each patient"
                ) from err

    def _check_setting(self) -> None:
        check_choice("setting", self.setting, SETTINGS)
        if self.setting == "online" and self.score != "rmia":
            raise ValueError(
                f"the online setting is built for RMIA's score, not {self.score!r}: use "
                "score='rmia', or the offline setting for LiRA"
            )
        if self.setting == "online" and self.n_references % 2:
            raise ValueError(
                f"n_references={self.n_references}: the online setting trains pairs of "
                "reference models on complementary halves; give an even number, e.g. 8"
            )

    def reference_sets(self, population: LabelledImages) -> tuple[list[LabelledImages], list[int]]:
        """The training sets and seeds of the reference models (job k: seed + k).

        Offline: job k's seeded ``reference_fraction`` of ``population``
        (:func:`~monai_forget.shadow.reference_jobs`). Online: ``population`` holds every
        scored sample too, and jobs 2j and 2j + 1 take the two halves of one split of it
        (seed + 2j; by group with ``group_pattern``, so a patient's slices stay together).
        """
        from monai_forget.shadow import reference_jobs

        if self.setting == "offline":
            return reference_jobs(
                population, range(self.n_references), self.reference_fraction, self.seed
            )
        sets = []
        for k in range(self.n_references):
            halves = _halves(population, self.seed + k - k % 2, self.group_pattern, "the pool")
            sets.append(halves[k % 2])
        return sets, [self.seed + k for k in range(self.n_references)]

    def reference_models(self, population: LabelledImages) -> list[nn.Module]:
        """Train (or read from the cache) every reference model, over worker processes."""

        if self.recipe is None:
            raise ValueError(
                "this audit trains reference models: pass recipe=... (the target's design)"
            )
        trainer = self._trainer()
        datasets, seeds = self.reference_sets(population)
        models = trainer.train_many(datasets, seeds, self.workers, progress=self.progress)
        self.cache_entries_.update(trainer.cache_entries)
        return models

    def _roles(
        self,
        query: LabelledImages,
        calibration: Any,
        population: LabelledImages | None,
        site: LabelledImages | None = None,
    ) -> tuple[dict[str, LabelledImages], LabelledImages]:
        if not isinstance(calibration, tuple) or len(calibration) != 2:
            raise ValueError(
                "the reference-model auditor needs the target's known members and known "
                "non-members: pass calibration=(members, nonmembers)"
            )
        members, nonmembers = calibration
        if population is None:
            population, members, nonmembers = _split_roles(
                members, nonmembers, self.seed, self.group_pattern
            )
        if site is not None:
            check_set_size("images of D_Q's site", site)
            population = concat(population, site)
        # copies of one image are one sample: scored as many, they shrink the test's spread
        self.query_collapsed_ = checked_query(query, concat(members, nonmembers))
        query = self.query_collapsed_.distinct
        _check_roles(query, members, nonmembers, population)
        return {"query": query, "members": members, "nonmembers": nonmembers}, population

    def fit_reference(
        self,
        query: LabelledImages,
        calibration: tuple[LabelledImages, LabelledImages],
        population: LabelledImages | None = None,
    ) -> RefModelReference:
        """Train the reference models and record what the audit needs from them."""
        return self._fit(query, calibration, population)[0]

    def _fit(
        self,
        query: LabelledImages,
        calibration: Any,
        population: LabelledImages | None,
        site: LabelledImages | None = None,
    ) -> tuple[RefModelReference, dict[str, LabelledImages], LabelledImages]:
        roles, population = self._roles(query, calibration, population, site)
        self.roles_ = roles
        self.cache_entries_ = {}
        scored = concat(*(roles[r] for r in ROLES))
        phis, probs, accuracies = [], [], []
        online = self.setting == "online"
        models = self.reference_models(concat(population, scored) if online else population)
        self.reference_models_ = models
        for model in models:
            out = self._predict(model, scored)
            phis.append(membership_signal(self.score, out.probs, out.labels))
            probs.append(out.probs)
            nonmembers = self._predict(model, roles["nonmembers"])
            accuracies.append(float(np.mean(nonmembers.probs.argmax(1) == nonmembers.labels)))
        phi = np.stack(phis)
        bounds = np.cumsum([0] + [len(roles[r]) for r in ROLES])

        def by_role(values: np.ndarray) -> dict[str, np.ndarray]:
            return {r: values[bounds[i] : bounds[i + 1]] for i, r in enumerate(ROLES)}

        self.reference_ = RefModelReference(
            hashes={r: roles[r].sample_hashes for r in ROLES},
            labels={r: np.asarray(roles[r].labels) for r in ROLES},
            reference_mean=by_role(phi.mean(axis=0)),
            sigma=pooled_sigma(phi),
            n_references=self.n_references,
            alpha=self.alpha,
            margin=self.margin,
            reference_accuracy=float(np.mean(accuracies)),
            groups=self._groups(roles),
            score=self.score,
            setting=self.setting,
            seed=self.seed,
            query_copies=self.query_collapsed_.copies,
            shift_mean=(
                by_role(shift_features(self.score, phi, np.stack(probs)))
                if self.score == "rmia"
                else None
            ),
        )
        return self.reference_, roles, population

    def _groups(self, roles: dict[str, LabelledImages]) -> dict[str, np.ndarray] | None:
        """Each role's sample groups with ``group_pattern`` (the test's units), else None."""
        if self.group_pattern is None:
            return None
        return {r: sample_groups(roles[r], self.group_pattern, _ROLE_NAMES[r]) for r in ROLES}

    def audit_set(self) -> LabelledImages:
        """What a :class:`~monai_forget.handlers.ReferenceModelAudit` handler must evaluate
        after the last ``fit_reference`` or ``audit``: D_Q and the scored known members and
        non-members (the handler matches each sample to its role by content).

        Raises:
            ValueError: the auditor has not been fitted.
        """
        if not self.roles_:
            raise ValueError("fit the auditor first: fit_reference(query, (members, nonmembers))")
        return concat(*(self.roles_[role] for role in ROLES))

    def audit(
        self,
        target: nn.Module,
        query: LabelledImages,
        calibration: tuple[LabelledImages, LabelledImages],
        *,
        population: LabelledImages | None = None,
        site: LabelledImages | None = None,
        label: str = "",
    ) -> AuditResult:
        """Has ``target`` forgotten ``query``? Three-way answer with the bound on its
        membership strength relative to the known members.

        Args:
            population: the reference models' training data (default: half of each known
                set; the other halves are scored).
            site: other images of D_Q's site (not D_Q; e.g. the site's retained data).
                The audit then also runs online reference models that train on them, and
                answers where both designs agree (module docstring); the result records
                each design's answer under ``details["designs"]``.
        """
        if site is None:
            return self._audit(target, query, calibration, population, None, label)
        try:
            online = replace(self, setting="online")
        except ValueError as err:
            raise ValueError(
                f"an audit given D_Q's site's images also runs online reference models: {err}"
            ) from err
        without = self._audit(target, query, calibration, population, None, label)
        models = self.reference_models_
        with_site = online._audit(target, query, calibration, population, site, label)
        self.reference_models_ = [*models, *online.reference_models_]
        self.cache_entries_ = {**self.cache_entries_, **online.cache_entries_}
        return joint_answer(without, with_site, len(site))

    def _audit(
        self,
        target: nn.Module,
        query: LabelledImages,
        calibration: tuple[LabelledImages, LabelledImages],
        population: LabelledImages | None,
        site: LabelledImages | None,
        label: str,
    ) -> AuditResult:
        if isinstance(calibration, tuple) and len(calibration) == 2:
            known = {"known members": calibration[0], "known non-members": calibration[1]}
            extra = {"population": population} if population is not None else {}
            extra |= {"images of D_Q's site": site} if site is not None else {}
            check_labels_fit(target, {"query set D_Q": query, **known, **extra})
        reference, roles, population = self._fit(query, calibration, population, site)
        refuse_target_as_reference(target, self.reference_models_)
        outputs = reference.outputs({role: self._predict(target, roles[role]) for role in ROLES})
        result = reference.audit(outputs, label=label)
        # every model that decided, by content (SHA-256 of its weights)
        references = {f"reference_{k}": m for k, m in enumerate(self.reference_models_)}
        return result.adding(
            sizes={"population": len(population)},
            details={
                "group_pattern": self.group_pattern,
                "site_images": 0 if site is None else len(site),
                **self.query_collapsed_.as_details(),
            },
            provenance=self._provenance(
                {"target": target, **references}, {**roles, "population": population}
            ),
        )
