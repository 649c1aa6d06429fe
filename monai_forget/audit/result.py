"""The outcome of a withdrawal audit, as a record that round-trips through JSON."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from monai_forget.audit.hidden_shift import tolerance_text
from monai_forget.checks import check_choice
from monai_forget.results import Result

__all__ = ["DECISIONS", "FORGOTTEN", "INCONCLUSIVE", "NOT_FORGOTTEN", "AuditResult", "share_text"]

FORGOTTEN = "forgotten"
NOT_FORGOTTEN = "not forgotten"
#: The reference-model auditor's third outcome: the data cannot tell (the result says
#: what is short).
INCONCLUSIVE = "inconclusive"
DECISIONS = (FORGOTTEN, NOT_FORGOTTEN, INCONCLUSIVE)


#: Statistics a reader could take the wrong way round, in words (issue 66: "p_member =
#: 0.0001 ... not forgotten" read as a small membership).
STATISTIC_MEANINGS = {"p_member": "a p-value: small means evidence the model still remembers"}


def share_text(value: float) -> str:
    """A share for a reader: a whole percentage clipped to [0 %, 100 %] (an estimate
    outside is sampling noise at the ends), or "any share" when unbounded."""
    value = float(value)
    if not math.isfinite(value):
        return "any share"
    return f"{min(max(value, 0.0), 1.0):.0%}"


def bound_share(upper: float) -> str | None:
    """The upper bound as a reader's share, or ``None`` where it bounds nothing: unbounded,
    or reading 100 % or more ("at most 100%" excludes nothing; issue 66)."""
    bound = share_text(upper)
    return None if bound in ("any share", "100%") else bound


def strength_text(upper: float, alpha: float = 0.05) -> str:
    """The reference-model audit's bound in words: D_Q's **membership strength relative
    to the known members** (0 % scores like never-seen data, 100 % like the known
    members), not a share of D_Q's samples. The two agree when every sample is either
    remembered as the members are or not at all; a D_Q wholly remembered at 40 % of the
    members' strength reads 40 % too (:mod:`~monai_forget.audit.remembered_share`)."""
    bound = bound_share(upper)
    if bound is None:
        return (
            "D_Q's membership strength relative to the known members: no bound (the audit "
            "cannot exclude full membership)"
        )
    return (
        f"D_Q's membership strength at most {bound} of the known members' "
        f"({1 - alpha:.0%} upper bound)"
    )


@dataclass(frozen=True)
class AuditResult(Result):
    """What an auditor concluded, with everything needed to check and reproduce it.

    Frozen: an auditor builds it once; what a caller adds (the sizes of its own sets, an
    audit trail) makes a new record (:meth:`adding`), and no field of a made decision
    can be reassigned.

    Attributes:
        method: ``"ks"`` (Liu & Tsaftaris 2020), ``"ema"`` (Huang et al. 2021) or
            ``"refmodel"`` (reference models, :mod:`~monai_forget.audit.refmodel`).
        decision: ``"forgotten"``, ``"not forgotten"`` or (reference models only)
            ``"inconclusive"``.
        statistic_name: ``"rho_KS"``, ``"rho_EMA"`` or ``"p_member"``.
        statistic: the value the decision is made on.
        rule: the decision rule in words, e.g. ``"rho_KS >= 1 means forgotten"``.
        details: intermediate statistics (K-S distances, t statistic, thresholds, ...).
        sizes: sample counts of every set involved.
        provenance: model and data fingerprints, seed, options, package versions.
        arrays: per-sample values behind the figures (confidences, membership metrics).
        label: a free-text name of the audited scenario (e.g. the provider).
        created: UTC time of the audit, ISO 8601.
    """

    method: str
    decision: str
    statistic_name: str
    statistic: float
    rule: str
    details: dict[str, Any] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, Any] = field(default_factory=dict)
    label: str = ""
    created: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat())

    def __post_init__(self) -> None:
        check_choice("decision", self.decision, DECISIONS)

    def adding(
        self,
        *,
        sizes: dict[str, int] | None = None,
        details: dict[str, Any] | None = None,
        provenance: dict[str, Any] | None = None,
    ) -> AuditResult:
        """A copy with entries merged into ``sizes``, ``details`` and ``provenance``; the
        decision and its statistic are never changed."""
        return replace(
            self,
            sizes={**self.sizes, **(sizes or {})},
            details={**self.details, **(details or {})},
            provenance={**self.provenance, **(provenance or {})},
        )

    @property
    def forgotten(self) -> bool:
        """True when the auditor concluded that the query set has been forgotten."""
        return self.decision == FORGOTTEN

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AuditResult:
        data = dict(data)
        data["statistic"] = float(data["statistic"])  # "inf" strings come back as floats
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> AuditResult:
        return cls.from_dict(json.loads(text))

    @classmethod
    def load(cls, path: str | Path) -> AuditResult:
        return cls.from_json(Path(path).read_text())

    def summary(self) -> str:
        """One sentence in plain words: what the test shows, never more (and a second
        when D_Q's copies were collapsed)."""
        return self._verdict() + self.hidden_shift_sentence() + self._collapsed()

    def hidden_shift_sentence(self) -> str:
        """What a reference-model "forgotten" stands against: its hidden-shift tolerance
        (:mod:`~monai_forget.audit.hidden_shift`), one leading space; else empty."""
        if self.decision != FORGOTTEN or "hidden_shift_tolerance" not in self.details:
            return ""
        text = tolerance_text(float(self.details["hidden_shift_tolerance"]))
        return f" {text}" if text else ""

    def _collapsed(self) -> str:
        exact = self.details.get("query_exact_copies", 0)
        near = self.details.get("query_near_copies", 0)
        if not exact + near:
            return ""
        return (
            f" D_Q held {self.details['query_given']} images: {exact} exact and {near} near "
            f"copies of others were collapsed, so it decided on {self.sizes.get('query')} "
            "distinct images."
        )

    def _verdict(self) -> str:
        if "reason" in self.details:
            meaning = STATISTIC_MEANINGS.get(self.statistic_name)
            return (
                f"{self.method.upper()}: {self.decision} ({self.statistic_name} = "
                f"{self.statistic:.4g}{f', {meaning}' if meaning else ''}): "
                f"{self.details['reason']}."
            )
        verdict = {
            FORGOTTEN: "no evidence that the model remembers the query set",
            NOT_FORGOTTEN: "evidence that the model still remembers the query set",
            INCONCLUSIVE: "the data cannot tell whether the model remembers the query set",
        }[self.decision]
        return (
            f"{self.method.upper()}: {self.statistic_name} = {self.statistic:.4g} "
            f"({self.rule}) -> {self.decision}: {verdict}."
        )
