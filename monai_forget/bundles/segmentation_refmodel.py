"""The reference-model audit of one provider for the ACDC segmentation bundle.

The statistics are the classifier auditor's (:mod:`monai_forget.audit.refmodel`: LiRA
offline scores, the set-level test with three outcomes, its power, the remembered
fraction); what changes is the unit. Slices of one patient are not independent (adjacent
slices look alike, and a model that trained on some of a patient's slices fits the
others better), so a test over slices would overstate its evidence. Here the unit is the
**patient**: a model's per-slice score ``s`` (:mod:`monai_forget.segmentation.scores`)
is put on LiRA's logit scale, ``log s - log(1 - s)``, and averaged over the patient's
slices; every split (each pair of reference models' complementary halves) is by
patient, stratified by group.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from torch import nn

from monai_forget.audit import AuditResult, RefModelReference, RoleOutputs, write_report
from monai_forget.audit.refmodel import (
    ROLES,
    logit_confidence,
    out_of_pair_logits,
    pooled_sigma,
)
from monai_forget.bundles.segmentation import SegmentationAuditSetup, split_by_patient
from monai_forget.bundles.weights import check_outputs
from monai_forget.defaults import REFMODEL_ALPHA, REFMODEL_MARGIN, REFMODEL_REFERENCES
from monai_forget.results import jsonable, write_json
from monai_forget.segmentation import SegmentationScores

__all__ = ["SegmentationReferenceAudit", "patient_logits"]


def patient_logits(scores: SegmentationScores, score: str) -> tuple[list[str], np.ndarray]:
    """Each patient's mean LiRA logit ``log s - log(1 - s)`` over its slices where
    ``score`` is defined, patients in order of first appearance.

    Raises:
        ValueError: the scores carry no patients, or a patient has no defined slice.
    """
    if len(scores.groups) != len(scores):
        raise ValueError("the scores carry no patient per slice (groups)")
    values = np.asarray(scores[score], dtype=np.float64)
    defined = np.isfinite(values)
    phi = np.full(values.shape, np.nan)
    rows = scores.to_predictions(score, defined)
    phi[defined] = logit_confidence(rows.probs, rows.labels)
    patients = list(dict.fromkeys(scores.groups))
    groups = np.asarray(scores.groups)
    means = []
    for patient in patients:
        mine = phi[(groups == patient) & defined]
        if mine.size == 0:
            raise ValueError(f"{patient}: no slice where {score!r} is defined")
        means.append(mine.mean())
    return patients, np.asarray(means)


class SegmentationReferenceAudit:
    """Has a segmentation model forgotten a provider's patients? Three-way answer.

    The reference models come in pairs, each pair trained, by the bundle's own
    ``train.json`` (:class:`BundleShadowTrainer`), on the two complementary halves of
    the known patients (training patients of the retained providers and held-out
    patients; pair j's halves are split by patient, stratified by group, with seed
    ``seed + j``). Every known patient is scored, each against the model of every pair
    that never trained on it, and every D_Q patient against one model of each pair at
    random (:func:`~monai_forget.audit.refmodel.out_of_pair_logits`): LiRA's offline
    setting for every score, with no known patient set aside to train the reference
    models (ours: ACDC's 30 held-out patients are all the known non-members there are,
    and with half of them training the reference models the test lacked the power to
    call a retrained model forgotten).

    Writes ``refmodel.json`` (the :class:`~monai_forget.audit.AuditResult`, per-patient
    arrays included), ``refmodel_reference.json`` (what the reference models learned)
    and ``refmodel_report.html``.

    Args:
        setup: the audited model, loading, reference-model training, scoring and outputs.
        query: D_Q entries (the provider's training slices).
        members: training entries of the retained providers (the target trained on them).
        nonmembers: held-out entries no model of the consortium trained on.
        n_references: reference models, an even number of at least 4 (pairs; 8 or more
            for power).
        alpha: level of the set-level test and error level of the membership strength's bound.
        margin: "forgotten" needs the upper bound of the membership strength below it.
        seed: seed of the splits and of the bootstrap.

    Raises:
        ValueError: an odd or too small ``n_references``, or two of the sets share a
            patient.
    """

    def __init__(
        self,
        setup: SegmentationAuditSetup,
        query: Sequence[Mapping[str, Any]],
        members: Sequence[Mapping[str, Any]],
        nonmembers: Sequence[Mapping[str, Any]],
        n_references: int = REFMODEL_REFERENCES,
        alpha: float = REFMODEL_ALPHA,
        margin: float = REFMODEL_MARGIN,
        seed: int = 0,
    ) -> None:
        if n_references < 4 or n_references % 2:
            raise ValueError(
                f"n_references={n_references}: the reference models come in pairs and the "
                "spread needs two of them per patient, so an even number of at least 4 (8 "
                "or more for power)"
            )
        sets = {"D_Q": query, "the known members": members, "the known non-members": nonmembers}
        names = list(sets)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                shared = {e["patient"] for e in sets[a]} & {e["patient"] for e in sets[b]}
                if shared:
                    raise ValueError(
                        f"{a} and {b} share patients {sorted(shared)[:5]}: a patient is a "
                        "member or not as a whole; keep these sets apart by patient"
                    )
        self.setup = setup
        self.entries = {
            "query": list(query),
            "members": list(members),
            "nonmembers": list(nonmembers),
        }
        self.population = [*members, *nonmembers]
        self.n_references, self.alpha, self.margin = int(n_references), alpha, margin
        self.seed = int(seed)

    def outputs(self) -> list[Path]:
        names = ["refmodel.json", "refmodel_reference.json", "refmodel_report.html"]
        return [self.setup.output_dir / n for n in names]

    @cached_property
    def data(self) -> dict[str, Any]:
        """Each role's slices, loaded once by the bundle's deterministic loading."""
        return {role: self.setup.slices(self.entries[role]) for role in ROLES}

    def reference_sets(self) -> list[list[dict[str, Any]]]:
        """The reference models' training entries: pair j (models 2j, 2j + 1) trains on
        the two halves of the known patients split with seed ``seed + j``."""
        sets = []
        for pair in range(self.n_references // 2):
            sets.extend(split_by_patient(self.population, 0.5, self.seed + pair))
        return sets

    def _logits(self, model: nn.Module) -> dict[str, tuple[list[str], np.ndarray]]:
        """Role -> (patients, the model's per-patient logits)."""
        scores = {role: self.setup.scores(model, self.data[role]) for role in ROLES}
        return {role: patient_logits(scores[role], self.setup.score) for role in ROLES}

    def fit_reference(self) -> RefModelReference:
        """Train (or reuse) the reference models and record, for every patient, the
        logits of the models of each pair that never trained on it."""
        per_model, trained = [], []
        for k, entries in enumerate(self.reference_sets()):
            model = self.setup.train(entries, f"reference model {k + 1}/{self.n_references}")
            per_model.append(self._logits(model))
            trained.append({e["patient"] for e in entries})
        patients = {role: per_model[0][role][0] for role in ROLES}
        phi = {
            role: out_of_pair_logits(
                np.stack([m[role][1] for m in per_model]),
                [[p in t for p in patients[role]] for t in trained],
                seed=[self.seed, i],
            )
            for i, role in enumerate(ROLES)
        }
        return RefModelReference(
            hashes={role: np.asarray(patients[role], dtype=str) for role in ROLES},
            labels={role: np.zeros(len(patients[role]), dtype=np.int64) for role in ROLES},
            reference_mean={role: phi[role].mean(axis=0) for role in ROLES},
            sigma=pooled_sigma(np.concatenate([phi[role] for role in ROLES], axis=1)),
            n_references=self.n_references,
            alpha=self.alpha,
            margin=self.margin,
            # per-patient means of LiRA's logits: the score this audit was measured with
            score="lira",
            seed=self.seed,
        )

    def run(self) -> AuditResult:
        """Train the reference models, score every patient, audit, write the outputs."""
        setup = self.setup
        check_outputs(*self.outputs(), overwrite=setup.overwrite)
        reference = self.fit_reference()
        target = {role: phi for role, (_, phi) in self._logits(setup.load()).items()}
        result = reference.audit(RoleOutputs(target), label=setup.label)
        patients = {role: len(reference.hashes[role]) for role in ROLES}
        result = result.adding(
            sizes={
                **{f"{role}_slices": len(self.data[role]) for role in ROLES},
                "reference_patients": len({e["patient"] for e in self.population}),
            },
            details={
                "score": setup.score,
                "unit": "patient",
                "patients": patients,
                "reference_design": "paired",  # measured_error_rates' design
                "references_per_patient": self.n_references // 2,
                "scenario": setup.scenario,
            },
        )
        result.save(setup.output_dir / "refmodel.json", overwrite=setup.overwrite)
        write_json(
            setup.output_dir / "refmodel_reference.json",
            jsonable(reference.to_dict()),
            overwrite=setup.overwrite,
        )
        write_report(
            [result],
            setup.output_dir / "refmodel_report.html",
            title=f"Segmentation withdrawal audit (reference models): provider {setup.provider}",
            overwrite=setup.overwrite,
        )
        print(result.summary())
        return result
