"""Leak-scan report: JSON record + HTML page (table and bar chart of M), written atomically."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # reports are written on headless servers
import matplotlib.pyplot as plt
import numpy as np

from monai_forget.io import check_writable
from monai_forget.memorisation.leak_scan import LeakScanResult
from monai_forget.reporting import figure_png, render_html, write_html
from monai_forget.results import to_json, write_json

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
    sig = result.significant_names()
    verdict = (
        f"{len(sig)} of {len(result.rows)} names are significantly memorised: " + ", ".join(sig)
        if sig
        else f"none of the {len(result.rows)} names is significantly memorised"
    )
    return render_html(
        "leak_scan.html",
        title=title,
        result=result,
        verdict=verdict,
        png=figure_png(scan_figure(result)),
        provenance=to_json(result.provenance),
    )


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
    page = render_scan_report(result, title)
    write_json(json_path, result.to_dict(), overwrite=overwrite)
    write_html(html_path, page, overwrite=overwrite)
    return json_path, html_path
