"""What the reference-model auditor learned before seeing any target output, and the
audit of a target against it (statistics in :mod:`~monai_forget.audit.refmodel`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from monai_forget.audit.refmodel import (
    ROLES,
    MembershipCalibration,
    SetTest,
    ShiftCheck,
    auc,
    refmodel_decision,
    remembered_fraction,
    set_test,
    shift_check,
)
from monai_forget.audit.result import AuditResult

__all__ = ["RefModelReference", "refmodel_rule"]


@dataclass(frozen=True)
class RefModelReference:
    """What the reference-model auditor learned before seeing any target output.

    For each role (the query set D_Q, the known members and non-members of the target):
    the samples' content hashes, labels and the reference models' mean logit-scaled
    confidence; plus the pooled spread. At evaluation time the target's outputs on those
    samples, matched by content hash whatever their order, complete the audit.

    Attributes:
        hashes: role -> (N,) content hashes (``monai_forget.fingerprint``).
        labels: role -> (N,) labels.
        reference_mean: role -> (N,) mean over reference models of ``logit_confidence``.
        sigma: pooled spread of the reference models (:func:`pooled_sigma`).
        n_references: number of reference models.
        alpha: level of the test.
        min_power: power the test needs before D_Q is called forgotten.
        reference_accuracy: mean accuracy of the reference models on the known
            non-members (compared with the target's in the report).
        groups: role -> (N,) group of each sample (e.g. its patient), or ``None``. With
            groups, every statistic is computed on the groups' mean scores, one unit per
            group: slices of one patient are not independent, and a test that counts
            them as such overstates the evidence (too small p, too much power).
    """

    hashes: dict[str, np.ndarray]
    labels: dict[str, np.ndarray]
    reference_mean: dict[str, np.ndarray]
    sigma: float
    n_references: int
    alpha: float = 0.05
    min_power: float = 0.95
    reference_accuracy: float = float("nan")
    groups: dict[str, np.ndarray] | None = None
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if set(self.hashes) != set(ROLES):
            raise ValueError(f"a reference needs the roles {ROLES}, got {sorted(self.hashes)}")
        if not 0.0 < self.alpha < 1.0 or not 0.5 <= self.min_power < 1.0:
            raise ValueError("alpha must be in (0, 1) and min_power in [0.5, 1)")
        if self.groups is not None and any(
            len(self.groups[r]) != len(self.hashes[r]) for r in ROLES
        ):
            raise ValueError("groups must give one group per sample of every role")

    def sizes(self) -> dict[str, int]:
        return {role: len(self.hashes[role]) for role in ROLES}

    def decide(self, test: SetTest, shift: ShiftCheck | None = None) -> str:
        """:func:`refmodel_decision` at this reference's alpha and minimum power."""
        return refmodel_decision(test, self.alpha, self.min_power, shift)

    def shift(self) -> ShiftCheck:
        """Whether D_Q, the known members and non-members look alike to the references."""
        mu = self.units(self.reference_mean)
        return shift_check(mu["query"], mu["members"], mu["nonmembers"])

    def units(self, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Per-sample values of every role as the test's units: each group's mean with
        groups (in sorted group order), the values themselves without."""
        if self.groups is None:
            return values
        out = {}
        for role in ROLES:
            _, index = np.unique(self.groups[role], return_inverse=True)
            out[role] = np.bincount(index, weights=values[role]) / np.bincount(index)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "hashes": {r: self.hashes[r].tolist() for r in ROLES},
            "labels": {r: self.labels[r].tolist() for r in ROLES},
            "reference_mean": {r: self.reference_mean[r].tolist() for r in ROLES},
            "sigma": self.sigma,
            "n_references": self.n_references,
            "alpha": self.alpha,
            "min_power": self.min_power,
            "reference_accuracy": self.reference_accuracy,
            **({"groups": {r: self.groups[r].tolist() for r in ROLES}} if self.groups else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RefModelReference:
        return cls(
            hashes={r: np.asarray(data["hashes"][r], dtype=str) for r in ROLES},
            labels={r: np.asarray(data["labels"][r], dtype=np.int64) for r in ROLES},
            reference_mean={
                r: np.asarray(data["reference_mean"][r], dtype=np.float64) for r in ROLES
            },
            sigma=float(data["sigma"]),
            n_references=int(data["n_references"]),
            alpha=float(data.get("alpha", 0.05)),
            min_power=float(data.get("min_power", 0.95)),
            reference_accuracy=float(data.get("reference_accuracy", "nan")),
            groups=(
                {r: np.asarray(data["groups"][r], dtype=str) for r in ROLES}
                if data.get("groups")
                else None
            ),
        )

    def scores(self, target_phi: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Calibrated scores of every role from the target's logit confidences."""
        out = {}
        for role in ROLES:
            phi = np.asarray(target_phi[role], dtype=np.float64)
            if phi.shape != self.reference_mean[role].shape:
                raise ValueError(
                    f"the target's outputs cover {phi.size} {role} samples but the reference "
                    f"has {self.reference_mean[role].size}; score the whole audit set"
                )
            out[role] = (phi - self.reference_mean[role]) / self.sigma
        return out

    def audit(
        self,
        target_phi: dict[str, np.ndarray],
        *,
        label: str = "",
        target_accuracy: float = float("nan"),
        seed: int = 0,
        n_boot: int = 1000,
    ) -> AuditResult:
        """The audit of a target whose logit confidences on each role's samples (in this
        reference's order) are ``target_phi``."""
        samples = self.scores(target_phi)
        scores = self.units(samples)
        few = {r: scores[r].size for r in ("members", "nonmembers") if scores[r].size < 4}
        if self.groups is not None and few:
            raise ValueError(
                f"the scored known sets hold {few} groups (patients): with groups as the "
                "test's units the audit needs at least 4 of each; give more patients"
            )
        calibration = MembershipCalibration.fit(scores["members"], scores["nonmembers"], seed)
        test = set_test(
            scores["query"], calibration, alpha=self.alpha, min_power=self.min_power, seed=seed
        )
        fraction = remembered_fraction(scores["query"], calibration, n_boot=n_boot, seed=seed)
        shift = self.shift()
        warnings = self._warnings(test, target_accuracy, shift)
        return AuditResult(
            method="refmodel",
            decision=self.decide(test, shift),
            statistic_name="p_member",
            statistic=test.pvalue,
            rule=refmodel_rule(self.alpha, self.min_power),
            details={
                "alpha": self.alpha,
                "min_power": self.min_power,
                "query_membership": test.query_mean,
                "member_membership": test.member_mean,
                "nonmember_membership": test.nonmember_mean,
                "member_effect_low": test.member_effect_low,
                "member_auc": auc(scores["members"], scores["nonmembers"]),
                "power": test.power,
                "shift_pvalue_query": shift.pvalue_query,
                "shift_pvalue_members": shift.pvalue_members,
                "needed_query_size": test.needed_query_size,
                "remembered_fraction": fraction[0],
                "remembered_fraction_interval": [fraction[1], fraction[2]],
                "n_references": self.n_references,
                "sigma": self.sigma,
                "target_accuracy_nonmembers": target_accuracy,
                "reference_accuracy_nonmembers": self.reference_accuracy,
                "warnings": warnings,
                "unit": "group" if self.groups else "sample",
                "units": {role: int(scores[role].size) for role in ROLES},
            },
            sizes=self.sizes(),
            arrays={
                **{f"{role}_score": samples[role] for role in ROLES},
                **{f"{role}_target_logit": np.asarray(target_phi[role]) for role in ROLES},
                **{f"{role}_reference_logit": self.reference_mean[role] for role in ROLES},
                **{f"{role}_label": self.labels[role] for role in ROLES},
            },
            label=label,
        )

    def _warnings(self, test: SetTest, target_accuracy: float, shift: ShiftCheck) -> list[str]:
        out = []
        if shift.pvalue_query < shift.level:
            out.append(
                f"the known non-members do not look like D_Q to the reference models (K-S "
                f"p = {shift.pvalue_query:.2g}): compare D_Q with held-out data of the same "
                "source and quality; no decision is made"
            )
        if shift.pvalue_members < shift.level:
            out.append(
                f"the known members and non-members do not look alike to the reference "
                f"models (K-S p = {shift.pvalue_members:.2g}): one of them is of another "
                "source or quality (e.g. noisy or rotated images); no decision is made"
            )
        if self.n_references < 4:
            out.append(
                f"only {self.n_references} reference models: per-sample scores are noisy; "
                "use 8 or more for power"
            )
        if test.member_effect_low <= 0:
            out.append(
                "the known members score no higher than the known non-members: the target "
                "shows no measurable memorisation of its own training data, so no audit can "
                "tell whether D_Q is remembered"
            )
        gap = abs(target_accuracy - self.reference_accuracy)
        if np.isfinite(gap) and gap > 0.1:
            out.append(
                f"the reference models' accuracy on the known non-members "
                f"({self.reference_accuracy:.3f}) is far from the target's "
                f"({target_accuracy:.3f}): check that the recipe is the target's design"
            )
        return out


def refmodel_rule(alpha: float, min_power: float) -> str:
    """:func:`refmodel_decision` in words."""
    return (
        f"p_member <= {alpha:g} while the known members are measurably member-like: not "
        f"forgotten; p_member > {alpha:g} with power >= "
        f"{min_power:g} to see D_Q remembered like the known members: forgotten; "
        "otherwise inconclusive"
    )
