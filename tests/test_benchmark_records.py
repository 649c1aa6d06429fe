"""The unique-feature benchmark's committed tables are what its committed records give.

The grid takes CPU-hours over several sittings, so its per-model records are kept in the
repository and the results file is rendered from them. Here the report is rendered again,
as a user would (``--report``, no training, no data), and every table row (detection
tables and the leak scan) and every target line (met / missed) must appear verbatim in the
committed results file: a table edited by hand, or a change to the statistics that changes
a committed figure, fails.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "unique_feature_memorisation.py"
RECORDS = REPO / "benchmarks" / "results" / "unique_feature_memorisation" / "seed0"
RESULTS = REPO / "benchmarks" / "results" / "unique_feature_memorisation.md"


def test_committed_grid_tables_render_from_committed_records(tmp_path):
    models = [p for p in RECORDS.glob("model/*/*/*/*.json") if not p.name.endswith(".train.json")]
    assert len(models) >= 60, f"expected at least one complete grid cell under {RECORDS}"
    command = [sys.executable, str(SCRIPT), "--report", "--only", "grid", "scan"]
    out = subprocess.run(
        [*command, "--cache", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout
    rows = [line for line in out.splitlines() if line.startswith("|")]
    verdicts = [line for line in out.splitlines() if "**met**" in line or "**missed**" in line]
    grid = [r for r in rows if r.startswith(("| mnist", "| pneumonia"))]
    cells = {tuple(r.split(" | ")[:2]) for r in grid}
    assert len(cells) * 5 <= len(grid), "each cell has five test rows and a summary row"
    assert any(r.startswith("| name on a top-influence image") for r in rows), "no leak scan"
    committed = set(RESULTS.read_text().splitlines())
    assert verdicts, "the report marks no target"
    missing = [r for r in rows + verdicts if r not in committed]
    assert not missing, "rows the records give but the results file lacks:\n" + "\n".join(missing)
    # no training happened: nothing was written to the weights cache
    assert not any(tmp_path.rglob("*.pt"))


def test_a_missed_false_alarm_target_carries_its_exact_binomial_test():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        spec = importlib.util.spec_from_file_location("ufm_benchmark", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(SCRIPT.parent))

    # 2 of 40 is exactly 5 %: met, no test. P(X >= 3 | n, 0.05) worked by hand from the
    # binomial terms k = 0, 1, 2: n = 40: 1 - (0.12851 + 0.27055 + 0.27766) = 0.3233;
    # n = 20: 1 - (0.35849 + 0.37735 + 0.18868) = 0.0755.
    def flags(k: int, n: int) -> list[bool]:
        return [True] * k + [False] * (n - k)

    assert module.false_alarm_mark(flags(2, 40)) == "**met**"
    assert module.false_alarm_mark(flags(3, 40)).endswith("p = 0.32)")
    assert module.false_alarm_mark(flags(3, 20)).endswith("p = 0.075)")
    assert module.false_alarm_mark(flags(3, 40)).startswith("**missed**")
    assert module.false_alarm_mark([]) == "-", "no null draws yet is neither met nor missed"


def test_the_packaged_error_rates_are_the_committed_benchmark_tables():
    """Every reference-model cell the reports quote (``measured_error_rates.json``, at
    margin 0.5) has the same "not forgotten", "forgotten" and "inconclusive" rates as the
    row of the committed results file that produced it (offline, online, paired): a hand
    edit of either, or a results file rerun without ``--error-rates`` (or the reverse),
    fails."""
    import json

    from monai_forget.rates import rate_text

    rates = json.loads((REPO / "monai_forget" / "audit" / "measured_error_rates.json").read_text())
    results = REPO / "benchmarks" / "results"
    few = "other site, a few of its images trained on"
    tables = {
        ("population", "offline"): (results / "audit_calibration.md").read_text(),
        ("paired", "offline"): (results / "acdc_audit_calibration.md").read_text(),
        ("population", "online"): (results / "audit_calibration_online_mnist15.md").read_text(),
        # issue 50: the down direction, and audits given D_Q's site's images
        ("population", "offline", few): (results / "audit_site_shift.md").read_text(),
        ("population", "offline", "site"): (results / "audit_site_shift.md").read_text(),
    }
    checked = dict.fromkeys(tables, 0)
    for cell in rates["cells"]:
        if cell["auditor"] != "refmodel" or cell["margin"] != 0.5:
            continue
        table = (cell["design"], cell.get("setting", "offline"))
        lead = [f"{cell['share']:g}", str(cell["size"]), str(cell["draws"])]
        if cell.get("site"):
            table, lead = (*table, "site"), [f"{cell['source']}, both designs", *lead[:2]]
        elif cell.get("source") == few:
            table, lead = (*table, few), [cell["source"], *lead[:2]]
        elif table == ("population", "offline"):
            lead = [cell["source"], *lead]
        elif table == ("population", "online"):
            lead = [*lead, "online"]
        key = f"| {' | '.join(lead)} | "
        rows = [line for line in tables[table].splitlines() if line.startswith(key)]
        if table[0] == "population":  # one table per data set, in the order of the JSON
            shown = (rate_text(cell["not_forgotten"]), rate_text(cell["forgotten"]))
            rows = [r for r in rows if shown[0] in r and shown[1] in r]
        assert rows, f"no row {key!r} in the {table} results for {cell['dataset']}"
        columns = rows[0][len(key) :].split(" | ")[:3]
        for column, decision in zip(
            columns, ("not_forgotten", "forgotten", "inconclusive"), strict=True
        ):
            shown = rate_text(cell[decision])
            assert column.startswith(shown), (key, decision, column, shown)
        checked[table] += 1
    assert checked[("population", "offline")] >= 2 * 35, checked
    assert checked[("paired", "offline")] >= 10 and checked[("population", "online")] >= 20, checked
    assert checked[("population", "offline", few)] >= 17, checked
    assert checked[("population", "offline", "site")] >= 35, checked


def _count_cell(text: str) -> tuple[int, int, tuple[int, int]]:
    """``"3/20 (15%; 3-38%)"``, ``"1/20 (5 %; 0-25 %)"`` or ``"9/20 (45.0 %; 25.8-65.8
    %)"`` -> (3, 20, (3, 38)) (the interval in whole percent)."""
    import re

    number = r"(\d+(?:\.\d+)?)"
    found = re.match(rf"(\d+)/(\d+) \({number} ?%; {number}-{number} ?%\)", text.strip())
    assert found, f"not a count with its interval: {text!r}"
    k, n, _, low, high = found.groups()
    return int(k), int(n), (round(float(low)), round(float(high)))


def _curve_line(table: str, row: dict) -> str:
    """The line of a packaged row's cell in leak_scan_detection_curve.md: the roster scan's
    (sequential decoys), or the one-name scan's for a row measured on one name."""
    arm = " | one name | " if row["names"] == 1 else " | sequential | "
    (line,) = [x for x in table.splitlines() if x.startswith(row["table_row"]) and arm in x]
    return line


def _cell_name(row: dict) -> str:
    """The data set and network as the leak-scan tables name them: ``mnist, mlp-1``."""
    return f"{row['data'].split()[0].lower()}, {row['network'].split()[0].lower()}"


def test_the_packaged_false_alarm_rates_are_the_committed_benchmark_tables():
    """Issue 37, item 2: the leak-scan report quotes measured false alarms from one data
    file; each row must be the control-scan cell of the results table it names (count,
    scans and the 95 % interval as the table rounds it)."""
    import json

    from monai_forget.memorisation.report import MEASURED_FALSE_ALARMS

    packaged = json.loads(
        (REPO / "monai_forget" / "memorisation" / "measured_false_alarms.json").read_text()
    )["rows"]
    assert [dict(r, interval=tuple(r["interval"])) for r in packaged] == [
        dict(r, interval=tuple(r["interval"])) for r in MEASURED_FALSE_ALARMS
    ]
    for row in packaged:
        table = (REPO / row["source"].split(",")[0]).read_text(encoding="utf-8")
        if "table_row" in row:  # leak_scan_detection_curve.md: a cell's sequential-decoy row
            line = _curve_line(table, row)
            cell = line.split(" | ")[11].rstrip(" |")
        elif row.get("references_by_patient"):  # leak_scan_patient_references.md
            line = next(x for x in table.splitlines() if x.startswith("| patient references |"))
            cell = line.split(" | ")[1]
        elif row["references"]:  # leak_scan_references.md: the "with references" arm
            line = next(x for x in table.splitlines() if x.startswith("| with references |"))
            cell = line.split(" | ")[3]
        elif row.get("statistic") == "class-shift":  # the class-shift arm's control column
            line = next(x for x in table.splitlines() if x.startswith("| pipeline, class shift |"))
            cell = line.split(" | ")[6]
        elif "name_decoys" in row["source"]:  # one row per data set, network and decoys
            start = f"| {_cell_name(row)} | {row['decoy_source']} | "
            line = next(x for x in table.splitlines() if x.startswith(start))
            cell = line.split(" | ")[5]
        else:  # the control-models row, the column of the row's correction
            line = next(x for x in table.splitlines() if x.startswith("| control models"))
            cell = line.split(" | ")[3 if row["correction"] == "bh" else 4]
        k, n, (low, high) = _count_cell(cell)
        assert (row["flagged"], row["scans"]) == (k, n), (row["source"], cell)
        assert [round(100 * x) for x in row["interval"]] == [low, high], (row["source"], cell)


def test_the_default_decoys_are_those_whose_measured_false_alarms_meet_the_target():
    """Issue 36, items 1 and 3: the scan's default decoys are the source whose control
    scans (decoys only, BH at 0.05) flagged a name in at most 5 % of scans with a Wilson
    upper bound <= 0.1 in every measured cell (data set, network); random letters did not
    (MNIST MLP-1: 18 of 100), so they are an option, not the default."""
    from monai_forget.memorisation import LeakScanConfig
    from monai_forget.memorisation.report import MEASURED_FALSE_ALARMS

    plain = [r for r in MEASURED_FALSE_ALARMS if r["correction"] == "bh" and not r["references"]]

    def meets_target(source: str) -> bool:
        cells = [r for r in plain if r["decoy_source"] == source and r["scans"] >= 80]
        networks = {r["network"].split()[0] for r in cells}
        fine = all(r["flagged"] <= 0.05 * r["scans"] and r["interval"][1] <= 0.1 for r in cells)
        return fine and networks == {"MLP-1", "CNN-1"}

    assert meets_target(LeakScanConfig().decoy_source)
    assert not meets_target("letters")


def test_the_packaged_detection_curve_is_the_committed_benchmark_table():
    """Issue 36, item 6: the leak-scan report shows the detection curve from one data
    file; each row must be the "detected" cell of the power-curve table it names, and
    every (data, network, decoys) measured there must be packaged at every length."""
    import json

    from monai_forget.memorisation.report import MEASURED_DETECTION

    packaged = json.loads(
        (REPO / "monai_forget" / "memorisation" / "measured_detection.json").read_text()
    )["rows"]
    assert [dict(r, interval=tuple(r["interval"])) for r in packaged] == [
        dict(r, interval=tuple(r["interval"])) for r in MEASURED_DETECTION
    ]
    decoys_only = [
        r for r in packaged if not r.get("references_by_patient") and "statistic" not in r
    ]

    def curve(source: str) -> list[str]:
        table = (REPO / source.split(",")[0]).read_text(encoding="utf-8").splitlines()
        return [x for x in table if len(x.split(" | ")) > 3 and x.split(" | ")[1].isdigit()]

    # every (data, network, length, decoys) of the power-curve tables named is packaged
    # once, from the table that measured it over the most models (the 100-model runs
    # replace the first 20)
    measured: dict[str, list[tuple[int, int, tuple[int, int]]]] = {}
    for source in {r["source"] for r in decoys_only}:
        for line in curve(source):
            measured.setdefault(" | ".join(line.split(" | ")[:3]), []).append(
                _count_cell(line.split(" | ")[3])
            )
    packaged_cells = [
        f"| {_cell_name(r)} | {r['images']} | {r['decoy_source']}" for r in decoys_only
    ]
    assert sorted(packaged_cells) == sorted(measured) and decoys_only
    for row, cell in zip(decoys_only, packaged_cells, strict=True):
        k, n, (low, high) = max(measured[cell], key=lambda count: count[1])
        assert (row["detected"], row["runs"]) == (k, n), cell
        assert [round(100 * x) for x in row["interval"]] == [low, high], cell
    # Rows of one arm of a pipeline benchmark (keyed by their statistic): that arm's
    # "detected" column.
    for row in (r for r in packaged if "table_row" in r):  # leak_scan_detection_curve.md
        table = (REPO / row["source"].split(",")[0]).read_text(encoding="utf-8")
        # found: flagged and ranked first on a roster; flagged, for one name checked alone
        column = 8 if row["names"] == 1 else 6
        k, n, (low, high) = _count_cell(_curve_line(table, row).split(" | ")[column])
        assert (row["detected"], row["runs"]) == (k, n), row["table_row"]
        assert [round(100 * x) for x in row["interval"]] == [low, high], row["table_row"]
        assert f"| {row['input_size']} |" in row["table_row"]
        assert row["table_row"].split(" | ")[3].rstrip(" |") == str(row["images"])
    for row in (r for r in packaged if "statistic" in r and "table_row" not in r):
        table = (REPO / row["source"].split(",")[0]).read_text(encoding="utf-8").splitlines()
        arm = (
            "| pipeline, class shift |" if row["statistic"] == "class-shift" else "| pipeline, M |"
        )
        if not any(x.startswith(arm) for x in table):
            arm = "| pipeline |"  # leak_scan_pipeline_series.md names M's arm so
        (line,) = [x for x in table if x.startswith(arm)]
        k, n, (low, high) = _count_cell(line.split(" | ")[2])
        assert (row["detected"], row["runs"], row["images"]) == (k, n, 10), line
        assert [round(100 * x) for x in row["interval"]] == [low, high], line
    # Scans with references by patient: the "found" column of that arm, every length.
    by_patient = [r for r in packaged if r.get("references_by_patient")]
    assert by_patient
    for source in {r["source"] for r in by_patient}:  # one table per data set
        table = (REPO / source.split(",")[0]).read_text(encoding="utf-8").splitlines()
        arm = [line for line in table if " | patient references | " in line]
        assert len(arm) == sum(r["source"] == source for r in by_patient), source
    for row in by_patient:
        table = (REPO / row["source"].split(",")[0]).read_text(encoding="utf-8").splitlines()
        arm = [line for line in table if " | patient references | " in line]
        (line,) = [x for x in arm if x.startswith(f"| {row['images']} | ")]
        k, n, (low, high) = _count_cell(line.split(" | ")[4])
        assert (row["detected"], row["runs"]) == (k, n), line
        assert [round(100 * x) for x in row["interval"]] == [low, high], line


@pytest.mark.parametrize(
    "name", ["hidden_shift", "hidden_shift_real", "method_equivalence", "tests_under_load"]
)
def test_a_results_file_renders_from_its_record(tmp_path, name):
    """Issue 67, item 4: these results are stored as numbers with their command, commit,
    date and machine; rendered again from the record (nothing run), the markdown is the
    committed file, line for line."""
    import json

    record_path = REPO / "benchmarks" / "results" / f"{name}.json"
    record = json.loads(record_path.read_text())
    assert set(record["provenance"]) == {"command", "commit", "date", "machine"}
    assert record["provenance"]["command"].startswith(f"python benchmarks/{name}.py")
    assert record["provenance"]["commit"] not in ("", "unknown")
    out = tmp_path / "again.md"
    subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / f"{name}.py"), "--from-record",
         str(record_path), "--out", str(out)],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    )  # fmt: skip
    committed = (REPO / "benchmarks" / "results" / f"{name}.md").read_text()
    assert out.read_text() == committed


def test_the_method_runs_render_from_their_seed_records(tmp_path):
    """Issue 66, item 3: the withdrawal methods' runs are kept as one record per seed (each
    with its command, commit, date and machine: seeds run in different sessions); rendered
    again from them (nothing run), the markdown is the committed file, line for line."""
    import json

    records = REPO / "benchmarks" / "results" / "method_runs"
    seeds = [json.loads(p.read_text()) for p in sorted(records.glob("mnist-30_seed*.json"))]
    assert seeds, "no seed record committed"
    for record in seeds:
        assert set(record["provenance"]) == {"command", "commit", "date", "machine"}
        assert record["provenance"]["commit"] not in ("", "unknown")
        assert len(record["retrained"]) >= 2 and all(len(t) >= 2 for t in record["runs"].values())
        assert set(record["runs_elsewhere"]) == set(record["runs"])  # the check elsewhere reads it
    out = tmp_path / "again.md"
    subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "method_runs.py"), "--render-only",
         "--records", str(records), "--out", str(out)],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    )  # fmt: skip
    committed = (REPO / "benchmarks" / "results" / "method_runs.md").read_text()
    assert out.read_text() == committed


def test_every_results_file_ends_with_how_it_was_run(tmp_path, monkeypatch):
    """Issue 67, item 4: a results file whose lines do not already say how it was run
    (a record's header) ends with its command, commit, date and machine; one that does is
    written as rendered."""
    import importlib

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    markdown = importlib.reload(importlib.import_module("_markdown"))
    monkeypatch.setattr(sys, "argv", [str(REPO / "benchmarks" / "x.py"), "--out", "o.md"])
    markdown.say("| a | b |")
    markdown.write(tmp_path / "plain.md")
    lines = (tmp_path / "plain.md").read_text().splitlines()
    assert lines[0] == "| a | b |"
    assert lines[-1].startswith("Written by `python benchmarks/x.py --out o.md` · commit ")
    commit = lines[-1].split(" · ")[1].removeprefix("commit ").removesuffix("+dirty")
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    assert commit == head
    markdown = importlib.reload(markdown)
    markdown.say_provenance({"command": "c", "commit": "x", "date": "d", "machine": "m"})
    markdown.write(tmp_path / "recorded.md")
    assert (tmp_path / "recorded.md").read_text() == "`c` · commit x · d · m\n"


#: The detection-curve tables whose per-model records are committed beside them, and the
#: cells they were rendered with (the command each results file names).
CURVE_TABLES = {
    "leak_scan_detection_curve_128": ["128:mlp-1:1", "128:mlp-1:10", "128:mlp-1:100"],
    "leak_scan_detection_curve_64_mlp": ["64:mlp-1:10"],
    "leak_scan_detection_curve_cnn": ["28:cnn:10", "28:cnn:100", "64:cnn:10", "64:cnn:100"],
}


@pytest.mark.parametrize("name", sorted(CURVE_TABLES))
def test_the_detection_curve_tables_render_from_their_committed_records(tmp_path, name):
    """Issue 65, item 2: a curve computed over several sittings is kept as one record per
    model; rendered again from them (no data, nothing trained), every line of the results
    file but the one saying when it was rendered comes back."""
    results = REPO / "benchmarks" / "results"
    committed = (results / f"{name}.md").read_text().splitlines()
    command = committed[2].split("`")[1].split()  # python benchmarks/...py --cells ...
    assert command[:2] == ["python", "benchmarks/leak_scan_detection_curve.py"]
    assert command[command.index("--cells") + 1 :][: len(CURVE_TABLES[name])] == CURVE_TABLES[name]
    at = command.index("--out")
    args = command[2:at] + command[at + 2 :]  # rendered to stdout, the results file kept
    out = subprocess.run([sys.executable, command[1], *args], capture_output=True, text=True,
                         check=True, cwd=REPO).stdout  # fmt: skip
    if "---" in committed:  # the trailer the results file was written with
        committed = committed[: committed.index("---")]
    kept = ("Computed on", "`python")  # when it was rendered; the command, checked above
    again = [x for x in out.splitlines() if not x.startswith(kept)]
    assert (
        "\n".join(again).strip()
        == "\n".join(x for x in committed if not x.startswith(kept)).strip()
    )
    assert any(x.startswith("| acdc |") for x in again), "no cell rendered"


def test_the_recomputed_mlp_cell_gives_the_committed_roster_line():
    """The 64-px MLP-1 cell with a 10-slice series, whose records were lost, was trained and
    scanned again from its seeds in a later session (records beside
    leak_scan_detection_curve_64_mlp.md); its roster scan's line is the one the main table
    published, so the two tables describe the same models."""
    results = REPO / "benchmarks" / "results"
    again = (results / "leak_scan_detection_curve_64_mlp.md").read_text().splitlines()
    roster = [
        x for x in again if x.startswith("| acdc | 64 | mlp-1 | 10 |") and " | sequential | " in x
    ]
    assert len(roster) == 1
    assert roster[0] in (results / "leak_scan_detection_curve.md").read_text().splitlines()
