"""Leak-scan report: JSON record + HTML page (table, and M of the roster beside the decoys'
null), written atomically. The page says "evidence of memorisation" or "no evidence",
never that a name was memorised, and carries the caution and the false-alarm rate
measured for the scan's configuration."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from monai_forget.io import check_writable
from monai_forget.memorisation.decoys import decoy_template
from monai_forget.memorisation.leak_scan import LeakScanResult
from monai_forget.reporting import figure_png, render_html, write_html
from monai_forget.results import to_json, write_json

__all__ = ["MEASURED_FALSE_ALARMS", "measured_false_alarms", "render_scan_report",
           "scan_figure", "write_scan_report"]  # fmt: skip

JSON_NAME = "leak_scan.json"
HTML_NAME = "leak_scan.html"
EVIDENCE, NO_EVIDENCE = "evidence of memorisation", "no evidence"

#: False alarms measured on control models (trained without any roster name), one row
#: per scan configuration, kept in ``measured_false_alarms.json`` beside this module (the
#: one home of these figures; a test ties each row to its results table).
MEASURED_FALSE_ALARMS: tuple[dict[str, Any], ...] = tuple(
    json.loads(
        (files("monai_forget.memorisation") / "measured_false_alarms.json").read_text("utf-8")
    )["rows"]
)


def measured_false_alarms(
    correction: str, alpha: float, references: int = 0
) -> list[dict[str, Any]]:
    """The benchmark's measurements for scans with this correction and alpha, with
    reference models or without (``references``: how many the scan had)."""
    return [
        r
        for r in MEASURED_FALSE_ALARMS
        if r["correction"] == correction
        and r["alpha"] == alpha
        and bool(r["references"]) == bool(references)
    ]


def scan_figure(result: LeakScanResult, top: int = 50) -> Figure:
    """The decoys' M (the null, top panel, one histogram per kind of name) beside the
    roster's M in rank order (dots); behind each name its kind's middle 90 % of decoys
    and a tick at the largest decoy, which a name must pass to reach the smallest p."""
    rows = result.rows[:top]
    nulls = {n.template: n.m for n in result.nulls}
    # a Figure without pyplot: no backend is chosen for the caller (headless or not)
    fig = Figure(figsize=(6.5, 2.6 + 0.24 * len(rows)))
    ax_null, ax = fig.subplots(
        2, 1, sharex=True, gridspec_kw={"height_ratios": [2.0, max(2.0, 0.24 * len(rows))]}
    )
    for template, m in nulls.items():
        ax_null.hist(m, bins=60, histtype="step", label=f"{len(m)} decoys like {template!r}")
    if nulls:
        ax_null.legend(fontsize=7, frameon=False)
    ax_null.set_ylabel("decoys", fontsize=8)
    ax_null.set_title(
        "top: M of decoys the model never saw (random texts of each name's kind)\n"
        f"below: each name's M (dot; * = {result.correction}-adjusted calibrated p < "
        f"{result.alpha}),\nits decoys' middle 90 % (band) and largest M (tick)",
        fontsize=8,
    )
    y = np.arange(len(rows))
    for yi, r in zip(y, rows, strict=True):
        null = nulls.get(decoy_template(r.name))
        if null is not None and null.size:
            lo, hi = np.quantile(null, [0.05, 0.95])
            ax.plot([lo, hi], [yi, yi], color="#c9d6df", linewidth=6, solid_capstyle="butt")
            ax.plot([null.max()] * 2, [yi - 0.4, yi + 0.4], color="#444444", linewidth=1)
    m = np.array([r.m for r in rows])
    ax.scatter(
        m, y, s=22, zorder=3, color=["#b54708" if r.significant else "#1f3b57" for r in rows]
    )
    ax.set_yticks(y, [r.name + (" *" if r.significant else "") for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_xlabel("M = mean d_u - mean d_r (nats)")
    fig.tight_layout()
    return fig


def render_scan_report(result: LeakScanResult, title: str = "Leak scan") -> str:
    """The report as an HTML string."""
    sig = result.significant_names()
    verdict = (
        f"{EVIDENCE} for {len(sig)} of {len(result.rows)} names: " + ", ".join(sig)
        if sig
        else f"{NO_EVIDENCE} of memorisation for any of the {len(result.rows)} names"
    )
    return render_html(
        "leak_scan.html",
        title=title,
        result=result,
        verdict=verdict,
        evidence=EVIDENCE,
        no_evidence=NO_EVIDENCE,
        measured=measured_false_alarms(
            result.correction, result.alpha, result.settings.get("references", 0)
        ),
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
    record = result.to_dict()
    record["measured_false_alarms"] = measured_false_alarms(
        result.correction, result.alpha, result.settings.get("references", 0)
    )
    write_json(json_path, record, overwrite=overwrite)
    write_html(html_path, page, overwrite=overwrite)
    return json_path, html_path
