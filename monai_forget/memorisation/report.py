"""Leak-scan report: JSON record + HTML page (table and bar chart of M), written atomically."""

from __future__ import annotations

import html
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # reports are written on headless servers
import matplotlib.pyplot as plt
import numpy as np

from monai_forget.audit.report import _STYLE, _png
from monai_forget.io import atomic_write, check_writable
from monai_forget.memorisation.leak_scan import LeakScanResult

__all__ = ["render_scan_report", "scan_figure", "write_scan_report"]

JSON_NAME = "leak_scan.json"
HTML_NAME = "leak_scan.html"


def scan_figure(result: LeakScanResult, top: int = 50) -> plt.Figure:
    """Horizontal bars of M per name in rank order; ``*`` marks adjusted p < alpha."""
    rows = result.rows[:top]
    fig, ax = plt.subplots(figsize=(6.5, 0.9 + 0.24 * len(rows)))
    y = np.arange(len(rows))
    m = np.array([r.m for r in rows])
    colours = ["#b42318" if r.significant else "#8a8a8a" for r in rows]
    ax.barh(y, m, color=colours)
    ax.set_yticks(y, [r.name for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.axvline(0.0, color="black", linewidth=0.8)
    span = float(np.max(np.abs(m))) if len(m) else 1.0
    for yi, r in zip(y, rows, strict=True):
        if r.significant:
            ax.text(r.m + 0.02 * span * np.sign(r.m or 1.0), yi, "*", va="center",
                    ha="left" if r.m >= 0 else "right", fontsize=11, color="#b42318")  # fmt: skip
    ax.set_xlabel("M = mean d_u - mean d_r (nats)")
    ax.set_title(
        f"* = {result.correction}-adjusted p < {result.alpha} ({result.test} test, "
        f"{result.n_probes} probes)",
        fontsize=9,
    )
    return fig


def render_scan_report(result: LeakScanResult, title: str = "Leak scan") -> str:
    """The report as an HTML string."""
    rows = "".join(
        f"<tr><td>{r.rank}</td><td>{html.escape(r.name)}</td><td>{r.m:.4g}</td>"
        f"<td>{r.statistic:.4g}</td><td>{r.pvalue:.3g}</td><td>{r.pvalue_adjusted:.3g}</td>"
        + (
            '<td class="not-forgotten">memorised</td>'
            if r.significant
            else '<td class="forgotten">no evidence</td>'
        )
        + "</tr>"
        for r in result.rows
    )
    sig = result.significant_names()
    verdict = (
        f"{len(sig)} of {len(result.rows)} names are significantly memorised: "
        + ", ".join(html.escape(s) for s in sig)
        if sig
        else f"none of the {len(result.rows)} names is significantly memorised"
    )
    settings = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td><code>{html.escape(str(v))}</code></td></tr>"
        for k, v in result.settings.items()
    )
    provenance = html.escape(json.dumps(result.provenance, indent=1))
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>"
        f"<p>{verdict} ({result.test} one-tailed test of mean d_u &gt; mean d_r, "
        f"{result.correction} correction over {len(result.rows)} names, alpha "
        f"{result.alpha}; Hartley &amp; Tsaftaris 2022, Eq. 1).</p>"
        f'<img alt="M per name" src="data:image/png;base64,{_png(scan_figure(result))}">'
        "<table><tr><th>rank</th><th>name</th><th>M (nats)</th><th>statistic</th>"
        f"<th>p</th><th>adjusted p</th><th>verdict</th></tr>{rows}</table>"
        f"<h2>Settings</h2><table>{settings}<tr><th>probes</th><td>{result.n_probes}</td></tr>"
        "</table><p>M &gt; 0 with a small adjusted p: the model reacts to the name more than "
        "to random patterns of the same size on images it never saw, the signature of a "
        "name memorised from a training image. Assumes out-of-distribution probes and the "
        "right typeface and position.</p>"
        f"<details><summary>provenance</summary><pre>{provenance}</pre></details>"
        "</body></html>"
    )


def _json_default(value: object) -> object:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot serialise {type(value).__name__}")


def write_scan_report(
    result: LeakScanResult,
    out_dir: str | Path,
    *,
    overwrite: bool = False,
    title: str = "Leak scan",
) -> tuple[Path, Path]:
    """Write ``leak_scan.json`` and ``leak_scan.html`` into ``out_dir``, atomically.

    Both paths are checked before anything is written, so a refused overwrite leaves
    no partial output.

    Returns:
        ``(json_path, html_path)``.

    Raises:
        FileExistsError: an output exists and ``overwrite`` is false.
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out} is a file; pass a folder for the scan outputs")
    json_path = check_writable(out / JSON_NAME, overwrite)
    html_path = check_writable(out / HTML_NAME, overwrite)
    text = json.dumps(result.to_dict(), indent=2, default=_json_default)
    page = render_scan_report(result, title)
    with atomic_write(json_path, "w", overwrite=overwrite) as handle:
        handle.write(text)
    with atomic_write(html_path, "w", overwrite=overwrite) as handle:
        handle.write(page)
    return json_path, html_path
