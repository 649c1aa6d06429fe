"""Reports true in every case they can print (issue 65, items 2 and 4): a scan report
quotes only measurements of its own path (how texts reached the model, its input size,
its statistic, the planted series' length), says plainly when none matches, names its
statistic on the figure, in the formula and in the table, and each verdict sentence is
rendered in its case and its contrary."""

from __future__ import annotations

import json

import numpy as np
import pytest
from markupsafe import escape

from monai_forget.memorisation.report import (
    MEASURED_DETECTION,
    MEASURED_FALSE_ALARMS,
    render_scan_report,
    scan_figure,
)
from monai_forget.memorisation.scan_result import (
    EVIDENCE,
    NO_EVIDENCE,
    UNDECIDED,
    DecoyNull,
    LeakScanResult,
    NameResult,
)

ALPHA = 0.05


def _result(
    path: str,
    size: int,
    statistic: str,
    decisions: tuple[str, ...] = (NO_EVIDENCE,) * 3,
    names: tuple[str, ...] = ("ANNA", "LUCY", "MARY"),
) -> LeakScanResult:
    """A BH scan of 4-letter names (a roster of three, or one checked alone) with the
    given decisions, on ``path``."""
    rows = []
    for rank, (name, decision) in enumerate(zip(names, decisions, strict=True), start=1):
        flagged = decision == EVIDENCE
        p = 0.001 if flagged else 0.004 if decision == UNDECIDED else 0.3
        rows.append(
            NameResult(
                rank,
                name,
                1.0 - rank / 10,
                p,
                min(1.0, 3 * p),
                flagged,
                1.0,
                0,
                1998,
                0.0,
                0.5,
                0.0,
                0.0,
                decision=decision,
                max_decoys=1998,
                decoys_needed=3000 if decision == UNDECIDED else 0,
            )
        )
    nulls = (DecoyNull("AAAA", tuple(f"D{i:03d}" for i in range(200)), np.linspace(0, 1, 200)),)
    settings = {"decoys_per_kind": 1998, "decoy_source": "names", "decoy_seed": 1,
                "references": 0, "references_by_patient": False, "statistic": statistic,
                "path": path, "input_shape": [size, size], "sequential_decoys": True,
                "exceedances": 10, "grid": path}  # fmt: skip
    return LeakScanResult(tuple(rows), "student", "bh", ALPHA, 100, nulls, settings)


def _sources(rows) -> set[str]:
    return {(r["network"], r["data"], r["source"]) for r in rows}


@pytest.mark.parametrize(
    ("path", "size", "statistic", "names"),
    [
        ("model grid", 28, "m", 3),
        ("model grid", 28, "class-shift", 3),
        ("pipeline", 28, "class-shift", 3),
        ("pipeline", 28, "m", 3),
        ("pipeline", 64, "class-shift", 3),
        ("pipeline", 64, "class-shift", 1),
        ("pipeline", 128, "class-shift", 3),
        ("model grid", 128, "m", 3),
    ],
)
def test_a_report_quotes_only_the_cells_of_its_own_path(path, size, statistic, names, tmp_path):
    """Every packaged false-alarm and detection row is on the page (its count and source)
    exactly when it was measured on this scan's path, input size and statistic, and with
    one name checked alone when this scan checks one (a roster's rows otherwise)."""
    from monai_forget.memorisation import write_scan_report

    result = _result(
        path, size, statistic, (NO_EVIDENCE,) * names, ("ANNA", "LUCY", "MARY")[:names]
    )
    json_path, html_path = write_scan_report(result, tmp_path)
    record = json.loads(json_path.read_text())

    def same(row) -> bool:
        return (
            row["path"] == path
            and row["input_size"] == size
            and row.get("statistic", "m") == statistic
            and row["decoy_source"] == "names"
            and not row.get("references")
            and row["correction"] == "bh"
            and (row["names"] == 1) == (names == 1)
        )

    alarms = [r for r in MEASURED_FALSE_ALARMS if same(r)]
    detection = [r for r in MEASURED_DETECTION if same(r)]
    assert record["measured_false_alarms"] == alarms
    assert record["measured_detection"] == detection
    page = html_path.read_text()

    def alarm_line(r) -> str:
        note = escape(r.get("note", ""))
        return (f"{r['network']} on {escape(r['data'])}, {r['names']} names, {r['decoys']} decoys: "
                f"{r['flagged']} of {r['scans']} control scans (95 % interval "
                f"{r['interval'][0]:.2f}&ndash;{r['interval'][1]:.2f}); {note} "
                f"({r['source']})")  # fmt: skip

    def detection_line(r) -> str:
        return (f"<tr><td>{escape(r['data'])}</td><td>{r['network']}</td><td>{r['images']}</td>"
                f"<td>{r['detected']} of {r['runs']}</td>")  # fmt: skip

    # every row of this path on the page; no other row (unless it reads the same)
    for table, mine, line in ((MEASURED_FALSE_ALARMS, alarms, alarm_line),
                              (MEASURED_DETECTION, detection, detection_line)):  # fmt: skip
        ours = {line(r) for r in mine}
        for r in table:
            assert (line(r) in page) == (line(r) in ours), r["source"]
    assert ("not measured on this path" in page) is not alarms
    assert ("No detection rate was measured on this path" in page) is not detection
    assert (f"a {size}x{size} model input" in page) and record["path"].startswith("texts ")
    # the measurements are described as the kind of scan they are (one name, or a roster)
    assert ("checked alone" in page) == (names == 1)


def test_a_planted_series_picks_the_cell_of_its_length():
    """With the manifest's series of 10 files, a pipeline class-shift scan at 28 px quotes
    the 10-image cells only; a series of 3 has no measured cell on that path."""
    result = _result("pipeline", 28, "class-shift")
    ten = render_scan_report(result, canary={"files": 10, "legible": True})
    # the cells of a roster's scan (one-name cells are another rule's: not quoted here)
    cells = [r for r in MEASURED_DETECTION if r["path"] == "pipeline" and r["input_size"] == 28
             and r.get("statistic") == "class-shift" and r["names"] == 50]  # fmt: skip
    assert {r["images"] for r in cells} == {1, 10, 100}

    def quoted(r) -> bool:
        return f"<td>{r['images']}</td><td>{r['detected']} of {r['runs']}</td>" in ten

    assert all(quoted(r) == (r["images"] == 10) for r in cells)
    assert "a series of 10 file(s)" in ten
    three = render_scan_report(result, canary={"files": 3, "legible": True})
    assert "No detection rate was measured on this path" in three
    assert all(f"<td>{r['detected']} of {r['runs']}</td>" not in three for r in cells)


@pytest.mark.parametrize(
    ("legible", "said", "not_said"),
    [
        (True, "legible at the model input, as the injector measured it", "not legible"),
        (False, "not legible at the model input", "as the injector measured it"),
        (None, "its legibility at the model input was not measured", "as the injector measured"),
    ],
)
def test_the_planted_canary_sentence_in_each_case(legible, said, not_said):
    page = render_scan_report(
        _result("pipeline", 64, "class-shift"), canary={"files": 10, "legible": legible}
    )
    assert said in page and not_said not in page
    assert "The planted canary" not in render_scan_report(_result("pipeline", 64, "class-shift"))


@pytest.mark.parametrize(("statistic", "name", "axis"), [
    ("class-shift", "class shift", "class shift = rise in log-probability"),
    ("m", "M", "M = mean d_u - mean d_r (nats, Eq. 1)"),
])  # fmt: skip
def test_the_statistic_is_named_on_the_axis_in_the_formula_and_the_table(statistic, name, axis):
    result = _result("pipeline", 28, statistic)
    figure = scan_figure(result)
    assert any(axis in ax.get_xlabel() for ax in figure.axes)
    assert all(ax.get_ylabel() for ax in figure.axes), "every panel names its axis"
    other = "M" if statistic == "class-shift" else "class shift"
    assert f"{name} of decoys the model never saw" in figure.axes[0].get_title()
    assert f"{other} of decoys" not in figure.axes[0].get_title()
    page = render_scan_report(result)
    assert f"reach its {name}" in page and f"<th>{name}" in page
    assert f"<th>{other}" not in page and f"reach its {other}" not in page


@pytest.mark.parametrize(
    ("decisions", "said", "not_said"),
    [
        ((EVIDENCE, NO_EVIDENCE, NO_EVIDENCE), "evidence of memorisation for 1 of 3 names: ANNA",
         "no evidence of memorisation"),
        ((NO_EVIDENCE,) * 3, "no evidence of memorisation for any of the 3 names", UNDECIDED),
        ((UNDECIDED, NO_EVIDENCE, NO_EVIDENCE),
         "no evidence of memorisation for 2 of 3 names; undecided for 1 (ANNA): the decoys "
         "drawn cannot tell; scanning with at least 3000 decoys per kind could",
         "for any of the 3 names"),
    ],
)  # fmt: skip
def test_the_verdict_in_each_case_and_its_contrary(decisions, said, not_said):
    result = _result("model grid", 28, "m", decisions)
    page = render_scan_report(result)
    assert said in result.verdict() and said in page and said in result.summary()
    assert not_said not in result.verdict()
    undecided = "<strong>undecided</strong>: at least 3000 decoys could tell" in page
    assert undecided is (UNDECIDED in decisions)


def test_a_manifest_font_and_another_font_are_refused_with_both_named(tmp_path):
    """The scan's --font and the manifest's must agree (issue 65, item 4)."""
    from monai_forget.dicom.manifest import manifest_placement

    row = {"action": "injected", "bbox_row": 4, "bbox_col": 4, "scale": 1, "font": "DejaVuSans",
           "font_size": 14, "typeface": "DejaVuSans", "output_sha256": "ab"}  # fmt: skip
    manifest = tmp_path / "c.manifest.json"
    manifest.write_text(json.dumps({"records": [row]}))
    assert manifest_placement(manifest)["font"] == "DejaVuSans"
    assert manifest_placement(manifest, "DejaVuSans", 14)["font_size"] == 14
    for font, size in (("DejaVuSerif", None), ("DejaVuSans", 12), (None, 12)):
        with pytest.raises(ValueError, match="is not the one") as err:
            manifest_placement(manifest, font, size)
        assert "DejaVuSans, 14 px" in str(err.value)
    bitmap = dict(row, font=None, font_size=None, typeface="monai-forget-5x5")
    manifest.write_text(json.dumps({"records": [bitmap]}))
    with pytest.raises(ValueError, match="the 5x5 typeface"):
        manifest_placement(manifest, "DejaVuSans")
