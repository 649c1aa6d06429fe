"""The leak check on embedded data (issue 54, item 6): the README's command plants a name
with the injector, trains through a MONAI bundle, scans through it, and the scan command
it prints repeats that scan from the files as typed."""

from __future__ import annotations

import json
import re
import shlex
import subprocess

import pytest
from commands import check, environment, run_line

from monai_forget.leak_demo import POSITION, ROSTER, SCALE, SERIES

pytestmark = pytest.mark.slow  # end-to-end: writes 2,000 DICOM files, trains, scans

#: The README's command, run as a user types it.
LEAK_DEMO_COMMAND = "monai-forget demo leak"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("leak-demo")
    result = check(run_line(LEAK_DEMO_COMMAND, cwd))
    (cwd / "stderr.txt").write_text(result.stderr)
    return cwd, result.stdout


def _scan(folder):
    return json.loads((folder / "leak_scan.json").read_text(encoding="utf-8"))


def test_the_demo_plants_with_the_injector_and_scans_where_it_burned(demo):
    cwd, stdout = demo
    out = cwd / "monai-forget-leak-demo"
    manifest = json.loads((out / "canary.manifest.json").read_text(encoding="utf-8"))
    injected = [r for r in manifest["records"] if r["action"] == "injected"]
    # per frame for DICOM: each of these single-frame files changed pixels
    assert len(injected) == SERIES and all(min(r["pixels_changed"]) > 0 for r in injected)
    record = _scan(out / "scan")
    assert record["settings"]["position"] == list(POSITION)
    assert record["settings"]["scale"] == SCALE and record["settings"]["value"] == "max"
    assert "of bundle digits_bundle: ScaleIntensityRanged, Resized" in record["settings"]["grid"]
    assert sorted(r["name"] for r in record["rows"]) == sorted(ROSTER)
    assert (out / "scan" / "leak_scan.html").is_file()
    # the sentence about the planted name says what the scan's record says
    planted = next(r for r in record["rows"] if r["name"] == ROSTER[0])
    verdict = "evidence of" if planted["significant"] else "no evidence of"
    finding = re.search(
        rf"planted: {ROSTER[0]} in {SERIES} images\. The scan ranks it (\d+) of {len(ROSTER)} "
        rf"names .*: ({verdict} memorisation) at alpha",
        stdout,
    )
    assert finding, stdout[-2000:]
    assert int(finding.group(1)) == planted["rank"]
    # the demo's point: the name planted with the injector is found through the bundle
    assert planted["rank"] == 1 and record["significant"] == [ROSTER[0]]
    assert record["settings"]["statistic"] == "class-shift"


def test_the_command_finds_what_run_leak_demo_finds(demo, tmp_path):
    """Issue 52: ``monai-forget demo leak`` and ``run_leak_demo`` with its defaults plant
    the same name and reach the same scan: rows, p-values and verdicts."""
    from monai_forget.leak_demo import run_leak_demo

    cwd, stdout = demo
    api = run_leak_demo(tmp_path / "api", progress=False)
    cli = _scan(cwd / "monai-forget-leak-demo" / "scan")
    assert api.finding() in stdout
    record = _scan(tmp_path / "api" / "scan")
    assert record["rows"] == cli["rows"] and record["significant"] == cli["significant"]
    assert len(cli["rows"]) == len(ROSTER)


def test_the_printed_scan_command_repeats_the_demo_scan(demo):
    """The CLI and the Python API give the same ranks, p-values and verdicts."""
    cwd, stdout = demo
    line = stdout.split("the same scan from the demo's files: ", 1)[1].splitlines()[0]
    assert shlex.split(line)[:3] == ["monai-forget", "memorisation", "scan"]
    done = subprocess.run(
        ["bash", "-c", line],
        cwd=cwd,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=900,
    )  # fmt: skip  (printed, so typed as printed)
    assert done.returncode == 0, done.stderr[-3000:]
    out = cwd / "monai-forget-leak-demo"
    first, again = _scan(out / "scan"), _scan(out / "scan-again")
    keys = ("name", "rank", "pvalue", "pvalue_adjusted", "significant")
    assert [{k: r[k] for k in keys} for r in again["rows"]] == [
        {k: r[k] for k in keys} for r in first["rows"]
    ]


def test_the_demo_refuses_to_replace_its_outputs(demo):
    cwd, _ = demo
    model = cwd / "monai-forget-leak-demo" / "model.pt"
    before = model.read_bytes()
    again = run_line(LEAK_DEMO_COMMAND, cwd)
    assert again.returncode != 0
    assert "--overwrite" in again.stderr and "model.pt" in again.stderr
    assert model.read_bytes() == before


def test_the_papers_m_does_not_flag_the_name_on_the_demo_model(demo):
    """What the README says of the demo's model: M (Eq. 1) does not flag the planted name
    that the class shift flags (one model: an illustration of the benchmark's rows)."""
    from monai_forget.memorisation import LeakScanConfig, leak_scan
    from monai_forget.memorisation.pipeline import PipelineProbes
    from monai_forget.networks import load_model

    out = demo[0] / "monai-forget-leak-demo"
    model = load_model(out / "model.pt")
    probes = PipelineProbes.from_bundle(out / "digits_bundle", out / "probes")
    config = LeakScanConfig(
        position=POSITION, scale=SCALE, value="max", decoy_seed=0, statistic="m"
    )
    result = leak_scan(model, probes, list(ROSTER), config)
    assert result.settings["statistic"] == "m"
    assert ROSTER[0] not in result.significant_names() and result.rank_of(ROSTER[0]) > 1


def test_the_demo_prints_no_warning(demo):
    """Issue 67, item 6: the leak demo's DICOMs carry an image plane (no reader warning per
    file), and no optional-decoder or read-only-array notice reaches the newcomer."""
    cwd, stdout = demo
    stderr = (cwd / "stderr.txt").read_text()
    assert "Warning" not in stderr and "nvImageCodec" not in stderr, stderr[-2000:]
    assert re.search(r"^done in \d+ s$", stdout, re.M)
