"""HTML report of withdrawal audits, with PNG figures embedded so one file is the record."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from monai_forget.audit.result import AuditResult
from monai_forget.reporting import figure_png, render_html, write_html
from monai_forget.results import to_json

__all__ = ["ema_figure", "ks_figure", "render_report", "write_report"]


def ks_figure(result: AuditResult):
    """ECDFs of the three confidence distributions on D_Q (Liu & Tsaftaris 2020, Fig. 2)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for key, name in [
        ("query_shadow_confidence", "query shadow (trained on D_Q)"),
        ("target_confidence", "target"),
        ("calibration_shadow_confidence", "calibration shadow (trained on D_C)"),
    ]:
        values = np.sort(np.asarray(result.arrays[key], dtype=float))
        ax.step(values, np.arange(1, len(values) + 1) / len(values), where="post", label=name)
    ax.set_xlabel("confidence for the ground-truth class, t[y]")
    ax.set_ylabel("ECDF over D_Q")
    ax.set_title(f"rho_KS = {result.statistic:.3g}")
    ax.legend(fontsize=8, loc="upper left")
    return fig


def ema_figure(result: AuditResult):
    """Histograms of each membership metric: query (target) vs calibration (reference)."""
    import matplotlib.pyplot as plt

    metrics = result.provenance.get("options", {}).get("metrics") or [
        k.removeprefix("query_") for k in result.arrays if k.startswith("query_")
    ]
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.2 * len(metrics), 3.0), squeeze=False)
    groups = [
        ("query_", "query (target)"),
        ("member_", "calibration members"),
        ("nonmember_", "calibration non-members"),
    ]
    for ax, metric in zip(axes[0], metrics, strict=True):
        present = [(p, name) for p, name in groups if p + metric in result.arrays]
        values = [np.asarray(result.arrays[p + metric], dtype=float) for p, _ in present]
        bins = np.histogram_bin_edges(np.concatenate(values), bins=30)
        for v, (_, name) in zip(values, present, strict=True):
            ax.hist(v, bins=bins, density=True, histtype="step", label=name)
        ax.set_title(metric.replace("_", " "), fontsize=9)
        ax.set_xlabel("score (higher = more member-like)", fontsize=8)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"rho_EMA = {result.statistic:.3g}", fontsize=10)
    return fig


_FIGURES = {"ks": ks_figure, "ema": ema_figure}


def _section(result: AuditResult) -> dict:
    details = {**result.details, **{f"n {k}": v for k, v in result.sizes.items()}}
    return {
        "result": result,
        "png": figure_png(_FIGURES[result.method](result)) if result.arrays else "",
        "details": [(k, to_json(v, indent=None)) for k, v in details.items()],
        "provenance": to_json(result.provenance),
    }


def render_report(results: Sequence[AuditResult], title: str = "Withdrawal audit") -> str:
    """The report as an HTML string: a summary table, then one section per audit."""
    return render_html(
        "audit_report.html",
        title=title,
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
