"""Leak-scan report: JSON record + HTML page (table, and M of the roster beside the decoys'
null), written atomically. The page says "evidence of memorisation" or "no evidence",
never that a name was memorised, and carries the caution, the false-alarm rate measured
for the scan's configuration and what the scan was measured to find (its detection curve:
a name burned into a series of training images, by series length)."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from monai_forget.defaults import LEAK_SCAN_DECOY_SOURCES
from monai_forget.io import check_output_files
from monai_forget.memorisation.decoys import decoy_template
from monai_forget.memorisation.leak_scan import LeakScanResult
from monai_forget.memorisation.scan_result import EVIDENCE, NO_EVIDENCE, UNDECIDED
from monai_forget.reporting import figure_png, render_html, write_html
from monai_forget.results import to_json, write_json

__all__ = ["MEASURED_DETECTION", "MEASURED_FALSE_ALARMS", "detection_figure",
           "measured_detection", "measured_false_alarms", "render_scan_report",
           "scan_figure", "smallest_found_series", "write_scan_report"]  # fmt: skip

JSON_NAME = "leak_scan.json"
HTML_NAME = "leak_scan.html"

#: False alarms measured on control models (trained without any roster name), one row
#: per scan configuration, kept in ``measured_false_alarms.json`` beside this module (the
#: one home of these figures; a test ties each row to its results table).
MEASURED_FALSE_ALARMS: tuple[dict[str, Any], ...] = tuple(
    json.loads(
        (files("monai_forget.memorisation") / "measured_false_alarms.json").read_text("utf-8")
    )["rows"]
)


#: The scan's detection curve measured by the benchmark: a roster name burned into
#: ``images`` training images of one class (a patient's series), ``detected`` of ``runs``
#: models flagged it and ranked it first; kept in ``measured_detection.json`` (a test
#: ties each row to its results table).
MEASURED_DETECTION: tuple[dict[str, Any], ...] = tuple(
    json.loads((files("monai_forget.memorisation") / "measured_detection.json").read_text("utf-8"))[
        "rows"
    ]
)
#: A series length is "found" when at least this share of the measured runs found it.
FOUND_SHARE = 0.5


def _same_scan(
    row: dict[str, Any],
    correction: str,
    alpha: float,
    references: int,
    decoy_source: str,
    by_patient: bool,
    statistic: str = "m",
    path: str = "model grid",
    input_shape: tuple[int, int] | None = (28, 28),
    names: int = 50,
) -> bool:
    """Whether a measured row is of a scan like this one: correction, alpha, decoy
    source, reference models (none, without the roster, or by patient), the statistic
    the names were ranked by (rows without one were measured with M), the path the
    texts took to the model (stamped on its grid, or through its preprocessing) at this
    model input size, and whether one name was checked alone or a roster's were ranked
    and corrected together (``names``: the scan's count; a row's ``names``, the roster
    it was measured with). A row of another path, size or kind of scan is never quoted."""
    size = row["input_size"]
    return (
        (row["names"] == 1) == (names == 1)
        and row.get("statistic", "m") == statistic
        and row["correction"] == correction
        and row["alpha"] == alpha
        and row["decoy_source"] == decoy_source
        and bool(row.get("references", 0)) == bool(references)
        and bool(row.get("references_by_patient", False)) == bool(by_patient)
        and row["path"] == path
        and input_shape is not None
        and tuple(input_shape) == (size, size)
    )


def _measured(
    table: list[dict[str, Any]],
    correction: str,
    alpha: float,
    references: int = 0,
    decoy_source: str = LEAK_SCAN_DECOY_SOURCES[0],
    by_patient: bool = False,
    statistic: str = "m",
    path: str = "model grid",
    input_shape: tuple[int, int] | None = (28, 28),
    images: int | None = None,
    names: int = 50,
) -> list[dict[str, Any]]:
    """The rows of ``table`` measured on scans like this one (:func:`_same_scan`); with
    ``images`` (a planted series of that many files), detection rows of that length only."""
    like = (correction, alpha, references, decoy_source, by_patient, statistic, path,
            input_shape, names)  # fmt: skip
    rows = [r for r in table if _same_scan(r, *like)]
    return [r for r in rows if images is None or r.get("images", images) == images]


def measured_false_alarms(correction: str, alpha: float, **kind: Any) -> list[dict[str, Any]]:
    """The benchmark's false-alarm measurements for scans like this one (``kind``: the
    optional ``references``, ``decoy_source``, ``by_patient`` and ``statistic`` of
    :func:`_measured`)."""
    return _measured(MEASURED_FALSE_ALARMS, correction, alpha, **kind)


def measured_detection(correction: str, alpha: float, **kind: Any) -> list[dict[str, Any]]:
    """The measured detection curve of scans like this one (rows by data, network and
    series length; ``kind`` as :func:`measured_false_alarms`); empty where it was not
    measured (references without the roster, the class shift)."""
    return _measured(MEASURED_DETECTION, correction, alpha, **kind)


def smallest_found_series(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per measured model (``"<data>, <network>"``): the shortest series found in at
    least :data:`FOUND_SHARE` of its runs (``None`` when no length measured was), and
    the best rate measured, so "no evidence" can say what the scan would have found."""
    out: dict[str, dict[str, Any]] = {}
    for r in sorted(rows, key=lambda r: r["images"]):
        cell = out.setdefault(
            f"{r['data']}, {r['network']}", {"images": None, "best": None, "best_images": None}
        )
        rate = r["detected"] / r["runs"]
        if cell["images"] is None and rate >= FOUND_SHARE:
            cell["images"] = r["images"]
        if cell["best"] is None or rate > cell["best"]:
            cell["best"], cell["best_images"] = rate, r["images"]
    return out


def detection_figure(rows: list[dict[str, Any]]) -> Figure:
    """The measured detection curve: the share of runs that found the name (flagged and
    ranked first) against the number of training images carrying it, with its 95 %
    interval, one line per measured model."""
    fig = Figure(figsize=(5.0, 3.0))
    ax = fig.subplots()
    cells: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        cells.setdefault(f"{r['data']}, {r['network']}", []).append(r)
    for label, cell in cells.items():
        cell = sorted(cell, key=lambda r: r["images"])
        x = np.array([r["images"] for r in cell])
        rate = np.array([r["detected"] / r["runs"] for r in cell])
        low, high = (np.array([r["interval"][i] for r in cell]) for i in (0, 1))
        runs = "/".join(sorted({str(r["runs"]) for r in cell}))
        line = ax.plot(x, rate, marker="o", label=f"{label} ({runs} runs per length)")[0]
        ax.fill_between(x, low, high, color=line.get_color(), alpha=0.15, linewidth=0)
    ax.set_xscale("log")
    ax.set_xticks(
        sorted({r["images"] for r in rows}), [str(i) for i in sorted({r["images"] for r in rows})]
    )
    ax.set_ylim(0.0, 1.0)
    ax.set_xlabel("training images carrying the name (one patient's series)")
    ax.set_ylabel("runs that found it")
    ax.legend(fontsize=7, frameon=False)
    fig.tight_layout()
    return fig


def scan_figure(result: LeakScanResult, top: int = 50) -> Figure:
    """The decoys' statistic (the null, top panel, one histogram per kind of name) beside
    the roster's in rank order (dots); behind each name its kind's middle 90 % of decoys
    and a tick at the largest decoy, which a name must pass to reach the smallest p. The
    statistic is named on the axis and in the title (M or the class shift)."""
    rows = result.rows[:top]
    label = result.statistic_label
    nulls = {(n.template, n.references): n.m for n in result.nulls}
    # a Figure without pyplot: no backend is chosen for the caller (headless or not)
    fig = Figure(figsize=(6.5, 2.6 + 0.24 * len(rows)))
    ax_null, ax = fig.subplots(
        2, 1, sharex=True, gridspec_kw={"height_ratios": [2.0, max(2.0, 0.24 * len(rows))]}
    )
    for (template, subset), m in nulls.items():
        judged = f", against references {'/'.join(map(str, subset))}" if subset else ""
        ax_null.hist(
            m, bins=60, histtype="step", label=f"{len(m)} decoys like {template!r}{judged}"
        )
    if nulls:
        ax_null.legend(fontsize=7, frameon=False)
    ax_null.set_ylabel("decoys", fontsize=8)
    kind = {"names": "real names"}.get(result.settings.get("decoy_source"), "random texts")
    ax_null.set_title(
        f"top: {label} of decoys the model never saw ({kind} of each name's kind)\n"
        f"below: each name's {label} (dot; * = {result.correction}-adjusted calibrated p < "
        f"{result.alpha}),\nits decoys' middle 90 % (band) and largest {label} (tick)",
        fontsize=8,
    )
    y = np.arange(len(rows))
    for yi, r in zip(y, rows, strict=True):
        null = nulls.get((decoy_template(r.name), r.references))
        if null is not None and null.size:
            lo, hi = np.quantile(null, [0.05, 0.95])
            ax.plot([lo, hi], [yi, yi], color="#c9d6df", linewidth=6, solid_capstyle="butt")
            ax.plot([null.max()] * 2, [yi - 0.4, yi + 0.4], color="#444444", linewidth=1)
    m = np.array([r.m for r in rows])
    ax.scatter(
        m, y, s=22, zorder=3, color=["#b54708" if r.significant else "#1f3b57" for r in rows]
    )
    ax.set_yticks(y, [r.name + (" *" if r.significant else "") for r in rows], fontsize=8)
    ax.set_ylabel("roster names, by rank", fontsize=8)
    ax.invert_yaxis()
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_xlabel(result.statistic_axis)
    fig.tight_layout()
    return fig


def path_text(result: LeakScanResult, planted: int | None = None) -> str:
    """The scan's path in words: how texts reached the model, its input size, the
    statistic, and the planted series' length when known (what a measurement must match)."""
    settings = result.settings
    how = (
        "burned on the acquisition grid and passed through the model's preprocessing"
        if settings.get("path") == "pipeline"
        else "stamped on the model's input grid"
    )
    shape = settings.get("input_shape")
    size = f"{shape[0]}x{shape[1]}" if shape else "unknown"
    series = f", a series of {planted} file(s)" if planted else ""
    return f"texts {how}, a {size} model input, ranked by the {result.statistic_label}{series}"


def render_scan_report(
    result: LeakScanResult, title: str = "Leak scan", canary: dict[str, Any] | None = None
) -> str:
    """The report as an HTML string; ``canary``: the placement a ``--canary-manifest``
    recorded (:func:`~monai_forget.dicom.manifest.manifest_placement`: its ``files`` pick
    the detection cell of that series length, its ``legible`` is quoted)."""
    explained = result.explained_names()
    verdict = result.verdict()
    if explained:
        verdict += (
            f"; of these, {', '.join(explained)} "
            + ("shows" if len(explained) == 1 else "show")
            + " no evidence beyond its likeness to "
            + "; ".join(f"{' or '.join(by)} ({name})" for name, by in explained.items())
        )
    planted = (canary or {}).get("files")
    like = _scan_kind(result, planted)
    detection = measured_detection(**like)
    return render_html(
        "leak_scan.html",
        title=title,
        result=result,
        verdict=verdict,
        evidence=EVIDENCE,
        no_evidence=NO_EVIDENCE,
        undecided=UNDECIDED,
        path=path_text(result, planted),
        canary=canary,
        measured=measured_false_alarms(**{**like, "images": None}),
        detection=detection,
        found=smallest_found_series(detection),
        found_share=FOUND_SHARE,
        detection_png=figure_png(detection_figure(detection)) if detection else None,
        png=figure_png(scan_figure(result)),
        provenance=to_json(result.provenance),
    )


def _scan_kind(result: LeakScanResult, planted: int | None = None) -> dict[str, Any]:
    """What the measurements of the scan's error rates are keyed by, as the keyword
    arguments of :func:`_measured` (``planted``: the files a manifest says carry the
    name, when the scan was given one)."""
    settings = result.settings
    return {
        "correction": result.correction,
        "alpha": result.alpha,
        "references": settings.get("references", 0),
        "decoy_source": settings.get("decoy_source", "letters"),
        "by_patient": settings.get("references_by_patient", False),
        "statistic": settings.get("statistic", "m"),
        "path": settings.get("path", "model grid"),
        "input_shape": settings.get("input_shape"),
        "images": planted,
        "names": len(result.rows),
    }


def write_scan_report(
    result: LeakScanResult,
    out_dir: str | Path,
    *,
    overwrite: bool = False,
    title: str = "Leak scan",
    canary: dict[str, Any] | None = None,
) -> tuple[Path, Path]:
    """Write ``leak_scan.json`` and ``leak_scan.html`` into ``out_dir``, atomically.

    Both paths are checked before anything is written, so a refused overwrite leaves
    no partial output.

    Args:
        result: the scan.
        out_dir: the output folder.
        overwrite: replace existing outputs.
        title: the page's title.
        canary: the placement of the planted canary the scan looked for, as
            :func:`~monai_forget.dicom.manifest.manifest_placement` reads it.

    Returns:
        ``(json_path, html_path)``.

    Raises:
        FileExistsError: an output exists and ``overwrite`` is false.
    """
    json_path, html_path = check_output_files(
        out_dir, (JSON_NAME, HTML_NAME), overwrite, "scan outputs"
    )
    page = render_scan_report(result, title, canary)
    record = result.to_dict()
    like = _scan_kind(result, (canary or {}).get("files"))
    record["path"] = path_text(result, like["images"])
    record["measured_false_alarms"] = measured_false_alarms(**{**like, "images": None})
    record["measured_detection"] = measured_detection(**like)
    if canary is not None:
        record["canary"] = {k: v for k, v in canary.items() if k != "position"} | {
            "position": list(canary["position"])
        }
    write_json(json_path, record, overwrite=overwrite)
    write_html(html_path, page, overwrite=overwrite)
    return json_path, html_path
