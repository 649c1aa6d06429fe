"""HTML report of withdrawal audits, with PNG figures embedded so one file is the record.

It leads with one verdict per audited scenario: when auditors disagree the calibrated
reference-model audit decides and K-S and EMA are shown as the papers' views. Each
section then gives the statistic, warnings (power, query size, reference models), the
error rates measured for that auditor (``benchmarks/audit_calibration.py``), the
figures, a per-class breakdown and the audit trail.
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
from monai_forget.audit.result import AuditResult
from monai_forget.reporting import figure_png, render_html, write_html
from monai_forget.results import to_json

__all__ = ["ema_figure", "ks_figure", "measured_error_rates", "render_report", "write_report"]

#: Which auditor decides a scenario when several ran (the calibrated one first).
PRECEDENCE = ("refmodel", "ema", "ks")
NAMES = {"refmodel": "reference models", "ks": "K-S (Liu & Tsaftaris 2020)",
         "ema": "EMA (Huang et al. 2021)"}  # fmt: skip


def measured_error_rates(
    method: str, query_size: int, design: str = "population"
) -> list[dict[str, Any]]:
    """The benchmark's error rates for ``method`` at the measured |D_Q| nearest
    ``query_size`` (calibration quality 100 %), one row per data set and query kind.

    ``design`` is the reference models' design (``"population"``: the classifier
    auditor's; ``"paired"``: complementary pairs, the segmentation audit's), so a report
    quotes the rates of the design that made its decision; other methods have none."""
    path = resources.files("monai_forget.audit").joinpath("measured_error_rates.json")
    if not path.is_file():
        return []
    rates = json.loads(path.read_text())
    rows = [
        r
        for r in rates.get("cells", [])
        if r["auditor"] == method and r["k"] == 100 and r.get("design", design) == design
    ]
    if not rows:
        return []
    sizes = sorted({r["size"] for r in rows})
    nearest = min(sizes, key=lambda s: abs(np.log(s) - np.log(max(query_size, 1))))
    return [r for r in rows if r["size"] == nearest]


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
    warnings = list(result.details.get("warnings", []))
    if result.method == "refmodel" and result.decision == "inconclusive":
        need = result.details.get("needed_query_size")
        warnings.append(
            f"too little power ({result.details.get('power', float('nan')):.2f}) to call D_Q "
            "forgotten; "
            + (f"about {int(need)} query samples would be needed" if np.isfinite(need or np.inf)
               else "no query size would be enough with these known members and non-members")
        )  # fmt: skip
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
        "details": [(k, to_json(v, indent=None)) for k, v in details.items() if k != "warnings"],
        "warnings": warnings,
        "tpr_at_low_fpr": low,
        "rates": measured_error_rates(
            result.method,
            result.sizes.get("query", 0),
            result.details.get("reference_design", "population"),
        ),
        "breakdown": _breakdown(result),
        "provenance": to_json(result.provenance),
    }


def _verdicts(results: Sequence[AuditResult]) -> list[dict[str, Any]]:
    """One verdict per scenario: the most trusted auditor's; the others' views listed."""
    out = []
    for label in dict.fromkeys(r.label for r in results):
        group = {r.method: r for r in results if r.label == label}
        deciding = next(m for m in (*PRECEDENCE, *group) if m in group)
        views = [f"{NAMES.get(m, m)}: {r.decision}" for m, r in group.items() if m != deciding]
        out.append({"label": label, "decision": group[deciding].decision,
                    "by": NAMES.get(deciding, deciding), "views": views})  # fmt: skip
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
