"""What the reference-model auditor learned before seeing any target output, and the
audit of a target against it (statistics in :mod:`~monai_forget.audit.refmodel`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from monai_forget.audit.refmodel import (
    PLANNING_POWER,
    RMIA_OFFLINE_A,
    ROLES,
    SCORES,
    MembershipCalibration,
    SetTest,
    auc,
    check_margin,
    membership_signal,
    refmodel_decision,
    rmia_scores,
    set_test,
)
from monai_forget.audit.result import (
    FORGOTTEN,
    NOT_FORGOTTEN,
    AuditResult,
    share_text,
    strength_text,
)
from monai_forget.audit.shift_check import ShiftCheck, shift_check
from monai_forget.checks import check_choice, check_fraction
from monai_forget.defaults import REFMODEL_ALPHA, REFMODEL_MARGIN
from monai_forget.inference import Predictions
from monai_forget.stats import auc_upper_bound

__all__ = ["RefModelReference", "RoleOutputs", "check_levels", "decision_reason", "refmodel_rule"]


@dataclass(frozen=True)
class RoleOutputs:
    """A target's outputs on a reference's audit set, role by role, in the reference's
    order: what :meth:`RefModelReference.audit` takes (built from class probabilities by
    :meth:`RefModelReference.outputs`).

    Attributes:
        signal: role -> (N,) the target's signal (:meth:`RefModelReference.signal`).
        accuracy: the target's accuracy on the known non-members, compared with the
            reference models' (NaN where the outputs are not a classifier's, e.g. a
            segmentation network's per-patient scores).
    """

    signal: Mapping[str, np.ndarray]
    accuracy: float = float("nan")


@dataclass(frozen=True)
class RefModelReference:
    """What the reference-model auditor learned before seeing any target output.

    For each role (the query set D_Q, the known members and non-members of the target):
    the samples' content hashes, labels and the reference models' mean signal of the
    per-sample score (:func:`~monai_forget.audit.refmodel.membership_signal`); plus the
    pooled spread. At evaluation time the target's outputs on those samples, matched by
    content hash whatever their order, complete the audit.

    Attributes:
        hashes: role -> (N,) content hashes (``monai_forget.fingerprint``).
        labels: role -> (N,) labels.
        reference_mean: role -> (N,) mean over reference models of the score's signal
            (the true-class probability for ``"rmia"``, the logit-scaled confidence for
            ``"lira"``).
        sigma: pooled spread of the reference models' signal (:func:`pooled_sigma`;
            LiRA's fixed variance, unused by ``"rmia"``).
        n_references: number of reference models.
        alpha: level of the test and error level of the share's upper bound.
        margin: "forgotten" needs the upper bound of the membership strength below it.
        reference_accuracy: mean accuracy of the reference models on the known
            non-members (compared with the target's in the report).
        groups: role -> (N,) group of each sample (e.g. its patient), or ``None``. With
            groups, every statistic is computed on the groups' mean scores, one unit per
            group: slices of one patient are not independent, and a test that counts
            them as such overstates the evidence (too small p, too much power).
        score: the per-sample score (:data:`~monai_forget.audit.refmodel.SCORES`).
        shift_mean: role -> (N,) or (N, F) what the shift check compares
            (:func:`~monai_forget.audit.refmodel.shift_features`; ``None``:
            ``reference_mean``).
        setting: ``"offline"``: no reference model trained on a scored sample, and
            RMIA's ``Pr(x)`` is the offline approximation; ``"online"``: each scored
            sample is in half of them (pairs on complementary halves), and ``Pr(x)`` is
            their mean (RMIA with ``a = 1``).
        seed: seeds the audit's cross-fitting folds and permutations (the auditor's), so
            every route to an audit of the same outputs gives the same p-value.
        query_copies: content hashes of the given D_Q's images the audit collapsed as
            copies of others (``hashes["query"]`` holds the distinct ones): an evaluation
            over the given D_Q evaluates them, and the statistic leaves them out.
    """

    hashes: dict[str, np.ndarray]
    labels: dict[str, np.ndarray]
    reference_mean: dict[str, np.ndarray]
    sigma: float
    n_references: int
    alpha: float = REFMODEL_ALPHA
    margin: float = REFMODEL_MARGIN
    reference_accuracy: float = float("nan")
    groups: dict[str, np.ndarray] | None = None
    score: str = "rmia"
    shift_mean: dict[str, np.ndarray] | None = None
    setting: str = "offline"
    seed: int = 0
    query_copies: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if set(self.hashes) != set(ROLES):
            raise ValueError(f"a reference needs the roles {ROLES}, got {sorted(self.hashes)}")
        check_levels(self.alpha, self.margin)
        check_choice("score", self.score, SCORES)
        if self.setting not in ("offline", "online") or (
            self.setting == "online" and self.score != "rmia"
        ):
            raise ValueError(
                f"setting {self.setting!r} with score {self.score!r}: the setting is 'offline', "
                "or 'online' with RMIA's score"
            )
        if self.groups is not None and any(
            len(self.groups[r]) != len(self.hashes[r]) for r in ROLES
        ):
            raise ValueError("groups must give one group per sample of every role")

    def sizes(self) -> dict[str, int]:
        return {role: len(self.hashes[role]) for role in ROLES}

    def decide(self, test: SetTest, shift: ShiftCheck | None = None) -> str:
        """:func:`refmodel_decision` at this reference's alpha (the margin is the test's)."""
        return refmodel_decision(test, self.alpha, shift)

    def signal(self, probs: object, labels: object) -> np.ndarray:
        """A model's signal for this reference's score (:attr:`RoleOutputs.signal`)."""
        return membership_signal(self.score, probs, labels)

    def outputs(self, predictions: Mapping[str, Predictions]) -> RoleOutputs:
        """What :meth:`audit` takes, from a target's class probabilities on each role's
        samples (in this reference's order)."""
        missing = set(ROLES) - set(predictions)
        if missing:
            raise ValueError(f"the target's outputs lack the roles {sorted(missing)}")
        nonmembers = predictions["nonmembers"]
        return RoleOutputs(
            {role: self.signal(predictions[role].probs, predictions[role].labels)
             for role in ROLES},
            float(np.mean(nonmembers.probs.argmax(1) == nonmembers.labels)),
        )  # fmt: skip

    def shift(self) -> ShiftCheck:
        """Whether D_Q, the known members and non-members look alike to the references."""
        mu = self.units(self.shift_mean or self.reference_mean)
        # within labels where each unit is one labelled sample (a group mixes labels)
        labels = None if self.groups is not None else tuple(self.labels[r] for r in ROLES)
        return shift_check(mu["query"], mu["members"], mu["nonmembers"], labels=labels)

    def units(self, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Per-sample values of every role as the test's units: each group's mean with
        groups (in sorted group order), the values themselves without."""
        if self.groups is None:
            return values
        out = {}
        for role in ROLES:
            _, index = np.unique(self.groups[role], return_inverse=True)
            one_hot = np.eye(index.max() + 1)[index]  # (N, groups)
            out[role] = (one_hot.T @ values[role]) / one_hot.sum(axis=0).reshape(
                (-1,) + (1,) * (values[role].ndim - 1)
            )
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "hashes": {r: self.hashes[r].tolist() for r in ROLES},
            "labels": {r: self.labels[r].tolist() for r in ROLES},
            "reference_mean": {r: self.reference_mean[r].tolist() for r in ROLES},
            "sigma": self.sigma,
            "n_references": self.n_references,
            "alpha": self.alpha,
            "margin": self.margin,
            "score": self.score,
            "setting": self.setting,
            "reference_accuracy": self.reference_accuracy,
            "seed": self.seed,
            **({"query_copies": list(self.query_copies)} if self.query_copies else {}),
            **({"groups": {r: self.groups[r].tolist() for r in ROLES}} if self.groups else {}),
            **(
                {"shift_mean": {r: self.shift_mean[r].tolist() for r in ROLES}}
                if self.shift_mean
                else {}
            ),
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
            alpha=float(data.get("alpha", REFMODEL_ALPHA)),
            margin=float(data.get("margin", REFMODEL_MARGIN)),
            # references written before the score was recorded hold LiRA's logits
            score=str(data.get("score", "lira")),
            setting=str(data.get("setting", "offline")),
            reference_accuracy=float(data.get("reference_accuracy", "nan")),
            seed=int(data.get("seed", 0)),
            query_copies=tuple(data.get("query_copies", ())),
            groups=(
                {r: np.asarray(data["groups"][r], dtype=str) for r in ROLES}
                if data.get("groups")
                else None
            ),
            shift_mean=(
                {r: np.asarray(data["shift_mean"][r], dtype=np.float64) for r in ROLES}
                if data.get("shift_mean")
                else None
            ),
        )

    def scores(self, target_signal: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Per-sample membership scores of every role from the target's signal."""
        out = {}
        for role in ROLES:
            signal = np.asarray(target_signal[role], dtype=np.float64)
            if signal.shape != self.reference_mean[role].shape:
                raise ValueError(
                    f"the target's outputs cover {signal.size} {role} samples but the "
                    f"reference has {self.reference_mean[role].size}; score the whole audit set"
                )
            if self.score == "rmia":
                # online, half the models trained on x: their mean is Pr(x) itself (a = 1)
                a = 1.0 if self.setting == "online" else RMIA_OFFLINE_A
                out[role] = rmia_scores(signal, self.reference_mean[role], a)
            else:
                out[role] = (signal - self.reference_mean[role]) / self.sigma
        return out

    def audit(self, outputs: RoleOutputs, /, *, label: str = "") -> AuditResult:
        """The audit of a target's outputs on this reference's audit set."""
        if not isinstance(outputs, RoleOutputs):
            raise TypeError(
                f"audit takes the target's RoleOutputs, not {type(outputs).__name__}; build "
                "them with reference.outputs({role: Predictions}) or RoleOutputs(signal)"
            )
        target_signal, target_accuracy, seed = outputs.signal, outputs.accuracy, self.seed
        samples = self.scores(target_signal)
        scores = self.units(samples)
        few = {r: scores[r].size for r in ("members", "nonmembers") if scores[r].size < 4}
        if self.groups is not None and few:
            raise ValueError(
                f"the scored known sets hold {few} groups (patients): with groups as the "
                "test's units the audit needs at least 4 of each; give more patients"
            )
        calibration = MembershipCalibration.fit(scores["members"], scores["nonmembers"], seed)
        test = set_test(
            scores["query"], calibration, alpha=self.alpha, margin=self.margin, seed=seed,
            with_tolerance=True,
        )  # fmt: skip
        shift = self.shift()
        decision = self.decide(test, shift)
        n = {role: scores[role].size for role in ROLES}
        member_auc = auc(scores["members"], scores["nonmembers"])
        query_auc = auc(scores["query"], scores["nonmembers"])
        separability = Separability(
            member_auc,
            auc_upper_bound(member_auc, n["members"], n["nonmembers"], self.alpha),
            query_auc,
            auc_upper_bound(query_auc, n["query"], n["nonmembers"], self.alpha),
        )
        warnings = self._warnings(test, target_accuracy, shift)
        return AuditResult(
            method="refmodel",
            decision=decision,
            statistic_name="p_member",
            statistic=test.pvalue,
            rule=refmodel_rule(self.alpha, self.margin),
            details={
                "alpha": self.alpha,
                "margin": self.margin,
                "membership_score": self.score,
                "reference_setting": self.setting,
                "membership_strength": test.share,
                "membership_strength_upper": test.share_upper,
                "reason": decision_reason(decision, test, shift, self.alpha, separability),
                "query_membership": test.query_mean,
                "member_membership": test.member_mean,
                "nonmember_membership": test.nonmember_mean,
                "member_effect_low": test.member_effect_low,
                "member_auc": member_auc,
                "member_auc_upper": separability.member_upper,
                "query_auc": query_auc,
                "query_auc_upper": separability.query_upper,
                "power_forgotten": test.power_forgotten,
                "power_remembered": test.power_remembered,
                "hidden_shift_tolerance": (
                    test.shift_tolerance if decision == FORGOTTEN else math.nan
                ),
                "needed_sizes": test.needed,
                "shift_pvalue_query": shift.pvalue_query,
                "shift_pvalue_members": shift.pvalue_members,
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
                **{f"{role}_target_signal": np.asarray(target_signal[role]) for role in ROLES},
                **{f"{role}_reference_signal": self.reference_mean[role] for role in ROLES},
                **{f"{role}_label": self.labels[role] for role in ROLES},
            },
            label=label,
        )

    def _warnings(self, test: SetTest, target_accuracy: float, shift: ShiftCheck) -> list[str]:
        out = []
        if shift.pvalue_query < shift.level:
            out.append(
                f"the known non-members do not look like D_Q to the reference models (shift check "
                f"p = {shift.pvalue_query:.2g}): compare D_Q with held-out data of the same "
                "source and quality; no decision is made"
            )
        if shift.pvalue_members < shift.level:
            out.append(
                f"the known members and non-members do not look alike to the reference "
                f"models (shift check p = {shift.pvalue_members:.2g}): one of them is of another "
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


def check_levels(alpha: float, margin: float) -> None:
    """Refuse a level or margin outside its range, naming the fix."""
    check_fraction("alpha", alpha, "0.05")
    check_margin(margin)


def refmodel_rule(alpha: float, margin: float) -> str:
    """:func:`refmodel_decision` in words."""
    return (
        f"p_member <= {alpha:g} while the known members are measurably member-like: not "
        f"forgotten (evidence of remembering); else the {1 - alpha:.0%} upper bound of D_Q's "
        f"membership strength relative to the known members below {margin:g}: forgotten; "
        "otherwise inconclusive"
    )


@dataclass(frozen=True)
class Separability:
    """How well the audit's membership score tells sets apart, as AUCs with one-sided
    upper bounds (:func:`~monai_forget.stats.auc_upper_bound`): the known members from the
    known non-members (the target's memorisation of its own training data), and D_Q from
    the known non-members (never-seen data)."""

    member_auc: float
    member_upper: float
    query_auc: float
    query_upper: float

    def finding(self, alpha: float) -> str:
        """The finding when the target shows no measurable memorisation (issue 50)."""
        level = f"{1 - alpha:.0%}"
        return (
            "the target shows no measurable memorisation of its own training data: this "
            f"audit's score tells its known members from known non-members with AUC "
            f"{self.member_auc:.2f} ({level} upper bound {self.member_upper:.2f}; 0.5 is "
            "chance), so no membership strength of D_Q can be bounded; of D_Q it can say "
            f"that the score tells it from never-seen data with AUC {self.query_auc:.2f} "
            f"({level} upper bound {self.query_upper:.2f})"
        )


def decision_reason(
    decision: str,
    test: SetTest,
    shift: ShiftCheck,
    alpha: float,
    separability: Separability | None = None,
) -> str:
    """Why the audit decided as it did; for "inconclusive", what is short and by how much
    (or, when the target shows no measurable memorisation, that finding with its bounds)."""
    bound = share_text(test.share_upper)
    if decision == NOT_FORGOTTEN:
        return (
            f"evidence of remembering: D_Q scores more member-like than the known non-members "
            f"(p = {test.pvalue:.2g} <= {alpha:g}); its membership strength is an estimated "
            f"{share_text(test.share)} of the known members' ({1 - alpha:.0%} upper bound "
            f"{bound}). Never-seen images of a site whose other images the target trained on "
            "score so too: if D_Q's site gave the target other data, audit again with that "
            "site's other images (ReferenceModelAuditor's site=, audit refmodel --site-images)"
        )
    if decision == FORGOTTEN:
        return (
            f"no evidence of remembering (p = {test.pvalue:.2g}); "
            f"{strength_text(test.share_upper, alpha)}, below the margin {test.margin:g}"
        )
    if shift.shifted:
        return (
            "the reference models see D_Q, the known members and the known non-members as "
            f"differently distributed (shift check p = {shift.pvalue_query:.2g} for D_Q, "
            f"{shift.pvalue_members:.2g} for the members): give known non-members from D_Q's "
            "own source (site, scanner, split)"
        )
    if test.pvalue <= alpha:
        return (
            f"D_Q scores more member-like than the known non-members (p = {test.pvalue:.2g}) "
            "but the known members do not: the difference is not memorisation the target "
            "shows on its own training data (another source or split?)"
        )
    if not np.isfinite(test.share_upper):
        if separability is not None and test.member_effect_low <= 0:
            return separability.finding(alpha)  # true only when no bound exists
        return (
            "the known members score no measurably higher than the known non-members, so no "
            "membership strength of D_Q can be excluded: more known members and non-members, "
            "or more reference models, are needed"
        )
    have = {"query": "D_Q", "members": "known members", "nonmembers": "known non-members"}
    wants = [f"{int(n)} {have[k]}" for k, n in test.needed.items() if np.isfinite(n)]
    plan = (
        f"for {PLANNING_POWER:.0%} power it would take " + " or ".join(wants)
        if wants
        else "no size of one set alone would give it power"
    )
    return (
        f"{strength_text(test.share_upper, alpha)}, not below the "
        f"margin {test.margin:g}; a wholly forgotten D_Q of this size would be certified with "
        f"power {test.power_forgotten:.2f}: {plan} (each with the other sets as they are)"
    )
