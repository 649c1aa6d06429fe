"""The unique-feature benchmark's committed tables are what its committed records give.

The grid takes CPU-hours over several sittings, so its per-model records are kept in the
repository and the results file is rendered from them. Here the report is rendered again,
as a user would (``--report``, no training, no data), and every table row (detection
tables and the leak scan) must appear verbatim in the committed results file: a table
edited by hand, or a change to the statistics that changes a committed figure, fails.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
    grid = [r for r in rows if r.startswith(("| mnist", "| pneumonia"))]
    cells = {tuple(r.split(" | ")[:2]) for r in grid}
    assert len(cells) * 5 <= len(grid), "each cell has five test rows and a summary row"
    assert any(r.startswith("| name on a top-influence image") for r in rows), "no leak scan"
    committed = set(RESULTS.read_text().splitlines())
    missing = [r for r in rows if r not in committed]
    assert not missing, "rows the records give but the results file lacks:\n" + "\n".join(missing)
    # no training happened: nothing was written to the weights cache
    assert not any(tmp_path.rglob("*.pt"))
