"""HTML report of withdrawal audits, with PNG figures embedded so one file is the record."""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # reports are written on headless servers
import matplotlib.pyplot as plt
import numpy as np

from monai_forget.audit.result import AuditResult
from monai_forget.io import atomic_write

_STYLE = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:4px 8px}
th{background:#eee}.forgotten{color:#1a7f37;font-weight:bold}
.not-forgotten{color:#b42318;font-weight:bold}code{font-size:90%}
"""


def _png(fig: plt.Figure) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def ks_figure(result: AuditResult) -> plt.Figure:
    """ECDFs of the three confidence distributions on D_Q (Liu & Tsaftaris 2020, Fig. 2)."""
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


def ema_figure(result: AuditResult) -> plt.Figure:
    """Histograms of each membership metric: query (target) vs calibration (reference)."""
    metrics = result.provenance.get("options", {}).get("metrics") or [
        k.removeprefix("query_") for k in result.arrays if k.startswith("query_")
    ]
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.2 * len(metrics), 3.0), squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=True):
        groups = [
            ("query_", "query (target)"),
            ("member_", "calibration members"),
            ("nonmember_", "calibration non-members"),
        ]
        values = [np.asarray(result.arrays[p + metric], dtype=float) for p, _ in groups]
        bins = np.histogram_bin_edges(np.concatenate(values), bins=30)
        for v, (_, name) in zip(values, groups, strict=True):
            ax.hist(v, bins=bins, density=True, histtype="step", label=name)
        ax.set_title(metric.replace("_", " "), fontsize=9)
        ax.set_xlabel("score (higher = more member-like)", fontsize=8)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"rho_EMA = {result.statistic:.3g}", fontsize=10)
    return fig


_FIGURES = {"ks": ks_figure, "ema": ema_figure}


def _decision_cell(result: AuditResult) -> str:
    css = "forgotten" if result.forgotten else "not-forgotten"
    return f'<span class="{css}">{html.escape(result.decision)}</span>'


def render_report(results: Sequence[AuditResult], title: str = "Withdrawal audit") -> str:
    """The report as an HTML string: a summary table, then one section per audit."""
    rows = "".join(
        f"<tr><td>{html.escape(r.label)}</td><td>{r.method.upper()}</td>"
        f"<td>{r.statistic_name} = {r.statistic:.4g}</td><td>{html.escape(r.rule)}</td>"
        f"<td>{_decision_cell(r)}</td><td>{r.sizes.get('query', '')}</td></tr>"
        for r in results
    )
    sections = []
    for i, r in enumerate(results, 1):
        figure = _FIGURES[r.method](r) if r.arrays else None
        details = "".join(
            f"<tr><th>{html.escape(k)}</th><td><code>{html.escape(str(v))[:400]}</code></td></tr>"
            for k, v in {**r.details, **{f"n {k}": v for k, v in r.sizes.items()}}.items()
        )
        provenance = html.escape(str(r.provenance))
        image = (
            f'<img alt="{r.method} figure" src="data:image/png;base64,{_png(figure)}">'
            if figure
            else ""
        )
        sections.append(
            f"<h2>{i}. {html.escape(r.label or r.method.upper())}</h2>"
            f"<p>{html.escape(r.summary())}</p>{image}<table>{details}</table>"
            f"<details><summary>provenance</summary><code>{provenance}</code></details>"
        )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>"
        "<table><tr><th>scenario</th><th>method</th><th>statistic</th><th>rule</th>"
        f"<th>decision</th><th>|D_Q|</th></tr>{rows}</table>{''.join(sections)}</body></html>"
    )


def write_report(
    results: AuditResult | Sequence[AuditResult],
    path: str | Path,
    *,
    title: str = "Withdrawal audit",
    overwrite: bool = False,
) -> Path:
    """Write the HTML report atomically; refuses to replace an existing file unless asked."""
    if isinstance(results, AuditResult):
        results = [results]
    if not results:
        raise ValueError("no audit results to report")
    text = render_report(list(results), title)
    with atomic_write(path, "w", overwrite=overwrite) as handle:
        handle.write(text)
    return Path(path)
