"""What a leak scan found, and how it reads: one row per candidate name, the decoys'
null per kind of name, and the ranked result with its summary and JSON record
(:func:`~monai_forget.memorisation.leak_scan.leak_scan` computes it)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from monai_forget.memorisation.attribution import Attribution, attributed_names
from monai_forget.reporting import pvalue_text
from monai_forget.results import Result

__all__ = ["EVIDENCE", "NO_EVIDENCE", "UNDECIDED", "DecoyNull", "LeakScanResult", "NameResult"]

#: A name's decision: flagged; not flagged, and more decoys would (with 95 % confidence)
#: not flag it either; not flagged, and the decoys drawn cannot tell.
EVIDENCE, NO_EVIDENCE, UNDECIDED = "evidence of memorisation", "no evidence", "undecided"


@dataclass(frozen=True)
class NameResult:
    """One candidate name's score, calibrated test and standing in the scan.

    ``m`` is the statistic ranked among the decoys: M (Eq. 1) on the audited model; with
    reference models, that M minus ``m_references`` (their mean for the text), both in
    units of each model's decoys, over their spread for the text (0 without them).
    ``pvalue`` is the calibrated (decoy) p-value, ``pvalue_adjusted`` its correction
    over the roster and ``significant`` whether that is below alpha; ``test_statistic``
    and ``test_pvalue`` are the uncalibrated t-test's (the paper's) on the model alone.
    ``references``: with references by patient, the indices of those the name was
    judged against (they never saw its patient); empty otherwise. ``n_decoys``: the
    decoys this name was compared with (sequential decoys: its kind's stream up to the
    ``exceedances``-th decoy at or above it, or as far as the stream went);
    ``max_decoys``: the most its kind could draw (the cap, or all the source holds);
    ``decision``: :data:`EVIDENCE`, :data:`NO_EVIDENCE` or :data:`UNDECIDED`
    (:mod:`~monai_forget.memorisation.sequential`); ``decoys_needed``: the decoys with
    which, none more above it, the name would reach the level it needs.
    """

    rank: int
    name: str
    m: float
    pvalue: float
    pvalue_adjusted: float
    significant: bool
    exposure: float
    decoys_at_or_above: int
    n_decoys: int
    test_statistic: float
    test_pvalue: float
    mean_d_unique: float
    mean_d_random: float
    m_references: float = 0.0
    references: tuple[int, ...] = ()
    decision: str = NO_EVIDENCE
    max_decoys: int = 0
    decoys_needed: int = 0


@dataclass(frozen=True)
class DecoyNull:
    """The decoys of one kind of name (``template``, see ``decoy_template``) and their
    statistic (M, relative to the reference models when the scan has them; with
    references by patient, to the ``references`` that never saw the patient of the
    names this null judges, one null per kind and set of references)."""

    template: str
    texts: tuple[str, ...]
    m: np.ndarray = field(repr=False)
    references: tuple[int, ...] = ()


@dataclass(frozen=True)
class LeakScanResult(Result):
    """The ranked scan. Rows are sorted by calibrated p-value (ties: larger M first).

    Attributes:
        rows: one :class:`NameResult` per name, best-ranked first.
        test: the uncalibrated t-test reported beside the calibrated p (the paper's).
        correction: ``"bh"``, ``"bonferroni"`` or ``"none"`` (on the calibrated p).
        alpha: level below which an adjusted p-value is evidence of memorisation.
        n_probes: number of probes.
        nulls: the decoys of each kind of name and their M.
        settings: feature placement, controls, decoys and their seed.
        provenance: model and probe fingerprints, package versions, seeds.
        attributions: each flagged name tested against its likeness to every other
            flagged name (empty when fewer than two were flagged).
    """

    rows: tuple[NameResult, ...]
    test: str
    correction: str
    alpha: float
    n_probes: int
    nulls: tuple[DecoyNull, ...] = ()
    settings: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    attributions: tuple[Attribution, ...] = ()

    @property
    def top(self) -> NameResult:
        """The best-ranked name."""
        return self.rows[0]

    def significant_names(self) -> list[str]:
        """Names whose adjusted calibrated p-value is below ``alpha``, in rank order."""
        return [r.name for r in self.rows if r.significant]

    def attributed_names(self) -> list[str]:
        """The flagged names that their likeness to no other flagged name explains, in
        rank order (every flagged name when fewer than two were flagged)."""
        return attributed_names(self.significant_names(), self.attributions)

    def explained_names(self) -> dict[str, list[str]]:
        """Flagged names set aside: each with the flagged names whose likeness explains it."""
        kept = set(self.attributed_names())
        out: dict[str, list[str]] = {}
        for a in self.attributions:
            if a.explained and a.name not in kept:
                out.setdefault(a.name, []).append(a.given)
        return out

    @property
    def n_tests(self) -> int:
        """How many p-values the correction spans (1 without a correction)."""
        return len(self.rows) if self.correction in ("bh", "bonferroni") else 1

    def reachable_pvalue(self, row: NameResult) -> float:
        """The smallest adjusted p-value ``row``'s name could reach as the one leaked name.

        Its ``n`` decoys bound its calibrated p below by 1 / (n + 1) (no decoy at or above
        it); Bonferroni over m names, and BH when the other names are not flagged,
        multiply that by m. A name whose bound is not below alpha cannot be flagged
        however strongly the model reacts to it.
        """
        return min(1.0, self.n_tests / (max(row.n_decoys, row.max_decoys) + 1))

    def out_of_reach(self) -> list[str]:
        """The names that could not be flagged with their decoys, in rank order."""
        return [r.name for r in self.rows if self.reachable_pvalue(r) >= self.alpha]

    def decoys_by_kind(self) -> dict[str, int]:
        """How many decoys each kind of name was ranked among (real names run short for
        short kinds: about 500 of 3 letters)."""
        return {n.template: len(n.texts) for n in self.nulls}

    def reach_text(self) -> str:
        """One sentence on which names could be flagged with these decoys, or ``""``
        when every name could."""
        out = self.out_of_reach()
        if not out:
            return ""
        kinds = ", ".join(f"{k}: {n}" for k, n in self.decoys_by_kind().items())
        if len(out) == len(self.rows):
            lead = "no name can be flagged with these decoys"
        else:
            lead = (
                f"{len(out)} of {len(self.rows)} names cannot be flagged with the decoys of "
                f"their kind ({', '.join(out)})"
            )
        best = min(self.reachable_pvalue(r) for r in self.rows if r.name in out)
        # BH lets several names with small p through together (measured: two 3-letter
        # names on control models), so under BH the bound holds for a name on its own
        together = (
            "; BH can still flag several such names together" if self.correction == "bh" else ""
        )
        return (
            f"{lead} as the only leaked name: the smallest {self.correction}-adjusted p it "
            f"could reach alone is {pvalue_text(best, self.alpha)}, not below alpha "
            f"{self.alpha} (decoys per kind {kinds}){together}; scan again with more decoys, "
            "or random-letter decoys for short names"
        )

    def rank_of(self, name: str) -> int:
        """The rank (1 = first) of ``name``."""
        for r in self.rows:
            if r.name == name:
                return r.rank
        raise KeyError("that name was not scanned (the roster holds no such entry)")

    @property
    def statistic_label(self) -> str:
        """What the names were ranked by, short: ``M`` (Eq. 1) or ``class shift``."""
        return "class shift" if self.settings.get("statistic") == "class-shift" else "M"

    @property
    def statistic_axis(self) -> str:
        """The statistic with its definition and unit, for a figure's axis."""
        if self.settings.get("statistic") == "class-shift":
            return "class shift = rise in log-probability of the class raised most, less control's"
        return "M = mean d_u - mean d_r (nats, Eq. 1)"

    def undecided_names(self) -> list[str]:
        """Unflagged names the decoys drawn could not settle, in rank order."""
        return [r.name for r in self.rows if r.decision == UNDECIDED]

    def verdict(self) -> str:
        """The scan's finding in one sentence: the flagged names, or no evidence, and the
        names the decoys could not settle."""
        sig, undecided = self.significant_names(), self.undecided_names()
        n = len(self.rows)
        of = "the name" if n == 1 else f"any of the {n} names"
        if sig:
            head = f"{EVIDENCE} for {len(sig)} of {n} names: {', '.join(sig)}"
            if n == 1:
                head = f"{EVIDENCE} for the name {sig[0]}"
        elif undecided:
            head = f"{NO_EVIDENCE} of memorisation for {n - len(undecided)} of {n} names"
        else:
            head = f"{NO_EVIDENCE} of memorisation for {of}"
        if undecided:
            needed = max(r.decoys_needed for r in self.rows if r.decision == UNDECIDED)
            head += (
                f"; {UNDECIDED} for {len(undecided)} ({', '.join(undecided[:5])}"
                + (", ..." if len(undecided) > 5 else "")
                + f"): the decoys drawn cannot tell; scanning with at least {needed} decoys "
                "per kind could"
            )
        return head

    def summary(self, top: int = 10) -> str:
        """A plain-text table of the ``top`` best-ranked names."""
        kinds = ", ".join(f"{k} {n}" for k, n in self.decoys_by_kind().items())
        head = (
            f"leak scan of {len(self.rows)} names on {self.n_probes} probes, ranked by the "
            f"{self.statistic_label} against the decoys of each kind of name ({kinds}), "
            f"{self.correction} correction, alpha {self.alpha}: {self.verdict()}"
        )
        explained = self.explained_names()
        if explained:
            head += (
                "; flagged, but no evidence beyond the likeness to another flagged name: "
                + ", ".join(f"{n} ({' or '.join(by)})" for n, by in explained.items())
            )
        reach = self.reach_text()
        lines = [
            head,
            *([f"out of reach: {reach}"] if reach else []),
            f"{'rank':>4}  {'name':20s} {self.statistic_label:>11} {'decoys':>11} "
            f"{'exposure':>8} {'p':>10} {'p adj':>10} {self.test + ' p':>12}  decision",
        ]
        for r in self.rows[:top]:
            mark = " (explained)" if r.name in explained else ""
            mark += " (out of reach)" if self.reachable_pvalue(r) >= self.alpha else ""
            p, p_adj = (pvalue_text(v, self.alpha) for v in (r.pvalue, r.pvalue_adjusted))
            used = f"{r.decoys_at_or_above}/{r.n_decoys}"
            lines.append(
                f"{r.rank:4d}  {r.name:20s} {r.m:11.4g} {used:>11} {r.exposure:8.2f} {p:>10} "
                f"{p_adj:>10} {r.test_pvalue:12.3g}  {r.decision}{mark}"
            )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly record (the decoys with their M under ``decoys``)."""
        return {
            "method": "unique-feature memorisation leak scan (Hartley & Tsaftaris 2022, Eq. 1) "
            "calibrated on decoys (exposure, Carlini et al. 2019)",
            "test": self.test,
            "correction": self.correction,
            "alpha": self.alpha,
            "n_probes": self.n_probes,
            "settings": self.settings,
            "provenance": self.provenance,
            "significant": self.significant_names(),
            "attributed": self.attributed_names(),
            "attributions": [asdict(a) for a in self.attributions],
            "decoys_by_kind": self.decoys_by_kind(),
            "out_of_reach": self.out_of_reach(),
            "rows": [
                {**asdict(r), "smallest_reachable_pvalue": self.reachable_pvalue(r)}
                for r in self.rows
            ],
            "decoys": [
                {
                    "template": d.template,
                    "texts": list(d.texts),
                    "m": d.m.tolist(),
                    **({"references": list(d.references)} if d.references else {}),
                }
                for d in self.nulls
            ],
        }
