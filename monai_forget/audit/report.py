"""HTML report of withdrawal audits, with PNG figures embedded so one file is the record.

It leads with one verdict per audited scenario: when auditors disagree the calibrated
reference-model audit decides and K-S and EMA are shown as the papers' views. For the
reference-model audit the lead gives the bound on D_Q's membership strength relative to
the known members, the margin, why it decided (for "inconclusive": what is short) and
the error rate measured in the benchmark cell that matches the setting
(``benchmarks/audit_calibration.py``), or says that none does. Each section then gives
the statistic, warnings, the measured rates, the figures, a per-class breakdown and the
audit trail.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from monai_forget.audit.figures import FIGURES, ema_figure, ks_figure, tpr_at_fpr
from monai_forget.audit.result import (
    FORGOTTEN,
    NOT_FORGOTTEN,
    AuditResult,
    bound_share,
    share_text,
)
from monai_forget.auditor_registry import AUDITORS
from monai_forget.auditor_registry import NAMES as REGISTERED_NAMES
from monai_forget.defaults import REFMODEL_ALPHA
from monai_forget.rates import rate_percent_text, rate_text
from monai_forget.reporting import figure_png, render_html, write_html
from monai_forget.results import to_json

__all__ = [
    "ema_figure",
    "ks_figure",
    "matching_error_rates",
    "measured_error_rates",
    "paper_rate_sentences",
    "render_report",
    "write_report",
]

#: The benchmark's D_Q sources, for a reader.
SOURCES = {
    "same": "D_Q from the non-members' source",
    "other site": "D_Q from another site",
    "other site, trained on it": "D_Q from another site the target trained on other images of",
    "other site, a few of its images trained on": (
        "D_Q from another site the target trained on only a few images of"
    ),
}
#: Which auditor decides a scenario when several ran (the calibrated one first).
PRECEDENCE = REGISTERED_NAMES
NAMES = {kind.name: kind.title for kind in AUDITORS}


#: The benchmark that measures each (design, setting) of the reference models.
BENCHMARKS = {
    ("population", "offline"): "benchmarks/audit_calibration.py",
    ("population", "online"): "benchmarks/audit_calibration_online.py",
    ("paired", "offline"): "benchmarks/acdc_audit_calibration.py",
}


def _cells() -> list[dict[str, Any]]:
    path = resources.files("monai_forget.audit").joinpath("measured_error_rates.json")
    return json.loads(path.read_text()).get("cells", []) if path.is_file() else []


def _nearest(sizes: set[int], query_size: int) -> int:
    return min(sizes, key=lambda s: abs(np.log(s) - np.log(max(query_size, 1))))


def measured_error_rates(method: str, query_size: int) -> list[dict[str, Any]]:
    """The papers' auditors' (``"ks"``, ``"ema"``) benchmark rates at the measured |D_Q|
    nearest ``query_size`` (calibration quality 100 %), one row per data set and query
    kind (``benchmarks/papers_calibration.py``)."""
    rows = [r for r in _cells() if r["auditor"] == method and r.get("k") == 100]
    if not rows:
        return []
    nearest = _nearest({r["size"] for r in rows}, query_size)
    return [r for r in rows if r["size"] == nearest]


def matching_error_rates(result: AuditResult) -> dict[str, Any]:
    """The reference-model audit's measured error rates in the cells that match its
    setting (design, offline or online reference models, margin, nearest |D_Q|): false
    "forgotten" where the true share is at or above the margin, false "not forgotten" on
    never-seen sets of the same and of another site. ``{"rows": [...], "sentences":
    [str], "statement": str}``: one sentence per figure with its conditions (issue 66,
    item 4), the statement joins them; it says so when no cell matches (another design,
    setting or margin, or a |D_Q| far from any measured)."""
    details = result.details
    design = details.get("reference_design", "population")
    setting = details.get("reference_setting", "offline")
    margin = float(details.get("margin", float("nan")))
    alpha = float(details.get("alpha", REFMODEL_ALPHA))
    size = int(details.get("units", result.sizes).get("query", 0))
    site = int(details.get("site_images") or 0) > 0  # reference models that knew D_Q's site
    rows = [
        r
        for r in _cells()
        if r["auditor"] == "refmodel"
        and r.get("design") == design
        and r.get("setting", "offline") == setting
        and bool(r.get("site")) == site
        and "share" in r
    ]
    at_margin = [r for r in rows if abs(r["margin"] - margin) < 1e-9]
    if not at_margin:
        measured = sorted({r["margin"] for r in rows})
        sentence = (
            f"No measured cell matches this setting: the {design} design with {setting} "
            + ("reference models, given D_Q's site's images, " if site else "reference models ")
            + "was measured "
            + (f"at margins {', '.join(f'{m:g}' for m in measured)}" if measured else "nowhere")
            + f", not at {margin:g} ({BENCHMARKS.get((design, setting), 'benchmarks/')})."
        )
        return {"rows": [], "sentences": [sentence], "statement": sentence}
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in at_margin:
        groups.setdefault((r["dataset"], r["source"]), []).append(r)
    wrong, sentences = [], []
    for (dataset, source), cells in groups.items():
        nearest = _nearest({r["size"] for r in cells}, size)
        here = [r for r in cells if r["size"] == nearest]
        for kind in _error_kinds(result.decision):
            mine = [r for r in here if (r["share"] >= margin if kind == "forgotten"
                                        else r["share"] == 0)]  # fmt: skip
            if not mine:
                continue
            worst = max(mine, key=lambda r, k=kind: r[k]["rate"])
            conditions = "; ".join(
                [dataset, SOURCES.get(source, source), f"|D_Q| {nearest}",
                 f"{worst['trainings']} trainings"]
                + ([f"{setting} reference models"] if setting != "offline" else [])
                + (["both designs, the answer where they agree"] if site else [])
            )  # fmt: skip
            when = (
                f"Where {share_text(margin)} or more of D_Q was trained on"
                if kind == "forgotten"
                else "Where the model never saw D_Q"
            )
            above = (
                f", more than its alpha of {alpha:g}: this error is not shown to be controlled "
                "there"
                if worst[kind]["rate"] > alpha
                else ""
            )
            sentences.append(
                f'{when} ({conditions}), the audit wrongly said "{kind.replace("_", " ")}" in '
                f"{rate_percent_text(worst[kind])}{above}."
            )
            wrong += mine
    measured = sorted({r["size"] for r in at_margin})
    if not measured[0] / 2 <= size <= measured[-1] * 2:
        sentences.append(
            f"Your |D_Q| of {size} is far from every measured size "
            f"({', '.join(map(str, measured))}): these figures are indicative only."
        )
    return {"rows": wrong, "sentences": sentences, "statement": " ".join(sentences)}


def _error_kinds(decision: str) -> tuple[str, ...]:
    """The errors a decision can be: a "forgotten" can be false where D_Q was remembered,
    a "not forgotten" where it was never seen; an "inconclusive" stands for either."""
    return {FORGOTTEN: ("forgotten",), NOT_FORGOTTEN: ("not_forgotten",)}.get(
        decision, ("forgotten", "not_forgotten")
    )


#: The papers' benchmark query sets for each error a decision can be.
_PAPER_KINDS = {"forgotten": "members", "not_forgotten": "non-members"}


def paper_rate_sentences(result: AuditResult) -> list[str]:
    """The K-S or EMA audit's measured error rates beside its verdict (issue 66, item 4):
    for each data set at the measured |D_Q| nearest its own, how often the auditor gave
    this decision wrongly, on sets the model trained on (a false "forgotten") or never
    saw (a false "not forgotten"), one sentence each with its conditions."""
    rows = measured_error_rates(result.method, result.sizes.get("query", 0))
    name = NAMES.get(result.method, result.method)
    sentences = []
    for kind in _error_kinds(result.decision):
        for r in (r for r in rows if r.get("kind") == _PAPER_KINDS[kind]):
            seen = "the model trained on" if kind == "forgotten" else "the model never saw"
            sentences.append(
                f"For {r['size']} {r['dataset']} images {seen} (one training, the paper's "
                f'calibration), {name} wrongly said "{kind.replace("_", " ")}" in '
                f"{rate_percent_text(r[kind])}."
            )
    return sentences


def _breakdown(result: AuditResult) -> list[tuple[int, int, str]]:
    """Per class (reference models): query samples, and how often a query sample of the
    class scores above a known non-member of the same class (0.5: like non-members)."""
    if result.method == "refmodel":
        labels = np.asarray(result.arrays.get("query_label", []), int)
        q = np.asarray(result.arrays.get("query_score", []), float)
        n_lab = np.asarray(result.arrays.get("nonmembers_label", []), int)
        n = np.asarray(result.arrays.get("nonmembers_score", []), float)
        out = []
        for c in np.unique(labels):
            base = n[n_lab == c]
            frac = np.mean(q[labels == c][:, None] > base[None, :]) if base.size else float("nan")
            out.append((int(c), int(np.sum(labels == c)), f"{frac:.3f} (0.5 = like non-members)"))
        return out
    return []


def _section(result: AuditResult) -> dict[str, Any]:
    details = {**result.details, **{f"n {k}": v for k, v in result.sizes.items()}}
    for key in ("membership_strength", "membership_strength_upper"):
        if key in details:
            details[key] = share_text(details[key])
    warnings = list(result.details.get("warnings", []))
    if result.method in ("ks", "ema") and result.sizes.get("query", 0) < 50:
        warnings.append(
            f"|D_Q| = {result.sizes.get('query')}: the papers' auditors have little power on "
            "small query sets (see the measured error rates)"
        )
    low = {}
    if result.method == "refmodel":
        low = tpr_at_fpr(result.arrays["members_score"], result.arrays["nonmembers_score"])
    return {
        "result": result,
        "name": NAMES.get(result.method, result.method),
        "png": figure_png(FIGURES[result.method](result)) if result.arrays else "",
        "details": [
            (k, to_json(_readable(v), indent=None))
            for k, v in details.items()
            if k not in ("warnings", "reason")
        ],
        "warnings": warnings,
        "tpr_at_low_fpr": low,
        "rates": [
            _displayed(row)
            for row in (
                matching_error_rates(result)["rows"]
                if result.method == "refmodel"
                else measured_error_rates(result.method, result.sizes.get("query", 0))
            )
        ],
        "breakdown": _breakdown(result),
        "provenance": to_json(result.provenance),
    }


def _displayed(row: dict[str, Any]) -> dict[str, Any]:
    """A measured cell with its rates as the report prints them."""
    return {**row, **{k: rate_text(row[k]) for k in ("forgotten", "not_forgotten", "inconclusive")}}


def _readable(value: Any) -> Any:
    """``value`` with every float at 4 significant digits (no 16-digit floats in a report)."""
    if isinstance(value, dict):
        return {k: _readable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_readable(v) for v in value]
    if isinstance(value, (float, np.floating)) and np.isfinite(value):
        return float(f"{float(value):.4g}")
    return value


def _bound_text(details: dict[str, Any]) -> str:
    """The bound for the verdict table: never "at most 100%" (issue 66)."""
    upper = bound_share(details["membership_strength_upper"])
    if upper is None:
        return "no bound: the audit cannot exclude full membership"
    return (
        f"at most {upper} of the known members' ({1 - details['alpha']:.0%} upper bound; "
        f"estimate {share_text(details['membership_strength'])})"
    )


def plain_verdict(result: AuditResult) -> str:
    """The reference-model audit's answer in one sentence a data-protection officer
    reads: what was audited, the decision, the bound in words (issue 66, item 4)."""
    d = result.details
    n = result.sizes.get("query")
    what = f"the {n} images of {result.label or 'D_Q'}" if n else (result.label or "D_Q")
    if result.decision == FORGOTTEN:
        return (
            f"The audit found no evidence that the model remembers {what}, and their membership "
            f"strength is at most {share_text(d['membership_strength_upper'])} of the "
            f"known members' ({1 - d['alpha']:.0%} confidence), below the margin of "
            f"{share_text(d['margin'])}: forgotten.{result.hidden_shift_sentence()}"
        )
    if result.decision == NOT_FORGOTTEN:
        return (
            f"The audit found evidence that the model still remembers {what}: their outputs "
            "are more member-like than "
            f"those of images it never saw (p-value {result.statistic:.2g}, at most "
            f"{d['alpha']:g}): not forgotten."
        )
    return (
        f"The audit cannot tell whether the model remembers {what}: neither evidence of "
        f"remembering nor a bound below the margin of {share_text(d['margin'])}: "
        "inconclusive."
    )


def _verdicts(results: Sequence[AuditResult]) -> list[dict[str, Any]]:
    """One verdict per scenario: the most trusted auditor's; the others' views listed,
    each with its measured error rates. The reference-model audit's carries its bound,
    margin, reason and measured rates; a paper auditor's that decides carries its own."""
    out = []
    for label in dict.fromkeys(r.label for r in results):
        group = {r.method: r for r in results if r.label == label}
        deciding = next(m for m in (*PRECEDENCE, *group) if m in group)
        decided = group[deciding]
        views = [f"{NAMES.get(m, m)}: {r.decision}" for m, r in group.items() if m != deciding]
        view_rates = [
            {"view": f"{NAMES.get(m, m)}: {r.decision}", "sentences": paper_rate_sentences(r)}
            for m, r in group.items()
            if m != deciding
        ]
        verdict = {"label": label, "decision": decided.decision,
                   "by": NAMES.get(deciding, deciding), "views": views,
                   "view_rates": view_rates}  # fmt: skip
        if deciding == "refmodel":
            d = decided.details
            verdict.update(
                bound=_bound_text(d),
                margin=f"{d['margin']:g}",
                reason=d.get("reason", ""),
                rates=matching_error_rates(decided)["sentences"],
                sentence=plain_verdict(decided),
            )
        else:
            verdict["rates"] = paper_rate_sentences(decided)
        out.append(verdict)
    return out


def render_report(results: Sequence[AuditResult], title: str = "Withdrawal audit") -> str:
    """The report as an HTML string: verdicts, a summary table, one section per audit."""
    return render_html(
        "audit_report.html",
        title=title,
        verdicts=_verdicts(results),
        results=list(results),
        sections=[_section(r) for r in results],
    )


def write_report(
    results: AuditResult | Sequence[AuditResult],
    path: str | os.PathLike,
    *,
    title: str = "Withdrawal audit",
    overwrite: bool = False,
) -> Path:
    """Write the HTML report atomically; refuses to replace an existing file unless asked."""
    if isinstance(results, AuditResult):
        results = [results]
    if not results:
        raise ValueError("no audit results to report")
    return write_html(path, render_report(list(results), title), overwrite=overwrite)
