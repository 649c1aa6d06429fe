"""Folder runs under hostile conditions: symbolic links, signals, dead runs, races.

The signal tests run the real command in a subprocess on a tree of a few hundred
copies of pydicom's CT_small.dcm and stop it once its staging folder holds files.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydicom_files import real_file

from monai_forget.cli import main
from monai_forget.dicom import BurnInOptions, InjectionError, inject_tree
from monai_forget.processes import load_per_core

REPO = Path(__file__).resolve().parents[1]


def leftovers(folder: Path) -> list[str]:
    """Staging folders and temporary files anywhere under ``folder``."""
    return sorted(
        str(p.relative_to(folder))
        for p in folder.rglob(".*")
        if p.name.endswith((".partial", ".tmp"))
    )


# --- B2: symbolic links never lead out of the input tree -----------------------------


@pytest.fixture
def linked_tree(tmp_path) -> Path:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP SECRET, not part of the input")
    shutil.copyfile(real_file("MR_small.dcm"), outside / "patient.dcm")
    series = tmp_path / "tree" / "series1"
    series.mkdir(parents=True)
    shutil.copyfile(real_file("CT_small.dcm"), series / "ct.dcm")
    (series / "link.txt").symlink_to(outside / "secret.txt")
    (series / "linkdir").symlink_to(outside)
    (series / "alias.dcm").symlink_to(series / "ct.dcm")
    os.mkfifo(series / "pipe")
    return tmp_path / "tree"


def test_links_and_special_files_are_skipped_and_reported(linked_tree, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["canary", "inject", str(linked_tree), str(out), "--all", "--text", "AB"]) == 0
    stdout = capsys.readouterr().out
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    assert written == ["series1", "series1/ct.dcm"]
    assert not any(b"TOP SECRET" in p.read_bytes() for p in out.rglob("*") if p.is_file())
    records = json.loads((tmp_path / "out.manifest.json").read_text())["records"]
    skipped = {Path(r["input"]).name: r for r in records if r["action"] == "skipped"}
    assert set(skipped) == {"link.txt", "linkdir", "alias.dcm", "pipe"}
    assert "outside the input tree" in skipped["link.txt"]["reason"]
    assert "outside the input tree" in skipped["linkdir"]["reason"]
    assert "inside the input tree" in skipped["alias.dcm"]["reason"]
    assert "not a regular file" in skipped["pipe"]["reason"]
    assert all(r["output"] == "" for r in skipped.values())
    assert "wrote 1 file(s), 1 with burned-in text" in stdout
    assert "skipped 4 entries (not written):" in stdout
    assert f"{linked_tree / 'series1' / 'link.txt'}: symbolic link to outside" in stdout


def test_dry_run_reports_skipped_links_too(linked_tree, tmp_path):
    records = inject_tree(linked_tree, tmp_path / "out", BurnInOptions(text="AB"), dry_run=True)
    actions = {Path(r.input).name: r.action for r in records}
    assert actions == {
        "alias.dcm": "skipped",
        "ct.dcm": "injected",
        "link.txt": "skipped",
        "linkdir": "skipped",
        "pipe": "skipped",
    }


def test_link_as_canary_is_refused(linked_tree, tmp_path):
    with pytest.raises(InjectionError, match=r"canary series1/alias\.dcm is a symbolic link"):
        inject_tree(
            linked_tree, tmp_path / "o", BurnInOptions(text="A"), canary="series1/alias.dcm"
        )
    assert not (tmp_path / "o").exists()


def test_merge_never_writes_through_a_link_out_of_the_output(tmp_path):
    src = tmp_path / "in"
    (src / "s").mkdir(parents=True)
    shutil.copyfile(real_file("CT_small.dcm"), src / "s" / "ct.dcm")
    victim = tmp_path / "victim"
    victim.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "s").symlink_to(victim)  # an output sub-folder that leads elsewhere
    with pytest.raises(InjectionError, match="leads out of"):
        inject_tree(src, out, BurnInOptions(text="A"), overwrite=True)
    assert list(victim.iterdir()) == []
    assert leftovers(tmp_path) == []


# --- B4: signals and the staging folders of dead runs --------------------------------


@pytest.fixture
def big_tree(tmp_path) -> Path:
    src = tmp_path / "in"
    ct = real_file("CT_small.dcm")
    for i in range(300):
        folder = src / f"series{i // 50}"
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ct, folder / f"im{i:03d}.dcm")
    return src


def start_and_stop(
    tmp_path: Path, src: Path, sig: int, workers: int = 1
) -> subprocess.CompletedProcess:
    """Run the command, send ``sig`` to it (not to its workers) once its staging folder
    holds files, and wait."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    command = [sys.executable, "-m", "monai_forget", "canary", "inject", str(src)]
    proc = subprocess.Popen(
        [*command, str(tmp_path / "out"), "--all", "--text", "AB", "--workers", str(workers)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 300 * load_per_core()  # a loaded machine is slower
    while proc.poll() is None and time.monotonic() < deadline:
        staging = list(tmp_path.glob(".out.*.partial"))
        if staging and any(staging[0].rglob("*.dcm")):
            proc.send_signal(sig)
            break
        time.sleep(0.02)
    else:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the run ended before its staging folder filled: {proc.returncode} {err}")
    out, err = proc.communicate(timeout=120 * load_per_core())
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_removes_the_staging_folder(tmp_path, big_tree, workers):
    result = start_and_stop(tmp_path, big_tree, signal.SIGTERM, workers)
    assert result.returncode == 128 + signal.SIGTERM, result.stderr
    assert "Traceback" not in result.stderr
    assert leftovers(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]


@pytest.mark.parametrize("workers", [1, 2])
def test_next_run_removes_what_a_killed_run_left(tmp_path, big_tree, capsys, workers):
    result = start_and_stop(tmp_path, big_tree, signal.SIGKILL, workers)
    assert result.returncode == -signal.SIGKILL
    (stale,) = tmp_path.glob(".out.*.partial")  # SIGKILL cannot be caught
    assert any(stale.rglob("*.dcm"))
    # Its workers died with it: none still holds the staging folder's lock or writes.
    time.sleep(0.5)
    count = len(list(stale.rglob("*")))
    time.sleep(0.5)
    assert len(list(stale.rglob("*"))) == count
    assert main(["canary", "inject", str(big_tree), str(tmp_path / "out"), "--text", "AB"]) == 0
    assert f"removed {stale} (staging folder left by an interrupted run)" in capsys.readouterr().out
    assert leftovers(tmp_path) == []
    assert len(list((tmp_path / "out").rglob("*.dcm"))) == 300


def test_staging_folder_of_a_live_run_is_left_alone(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    shutil.copyfile(real_file("CT_small.dcm"), src / "ct.dcm")
    live = tmp_path / ".out.abcd1234.partial"  # as another run's, locked as it would be
    live.mkdir()
    (live / "half.dcm").write_bytes(b"x")
    stale = tmp_path / ".out.dead_run.partial"
    stale.mkdir()
    unrelated = tmp_path / ".out.not-ours.partial"  # not this tool's name pattern
    unrelated.mkdir()
    fd = os.open(live, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    reports: list[str] = []
    try:
        inject_tree(src, tmp_path / "out", BurnInOptions(text="A"), report=reports.append)
    finally:
        os.close(fd)
    assert reports == [
        f"removed {stale} (staging folder left by an interrupted run)",
        f"left {live} alone: another run is writing there (its lock is held)",
    ]
    assert (live / "half.dcm").exists() and unrelated.exists() and not stale.exists()


def test_signal_handlers_are_restored(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    shutil.copyfile(real_file("CT_small.dcm"), src / "ct.dcm")
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    inject_tree(src, tmp_path / "a", BurnInOptions(text="A"))
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL

    def mine(signum, frame):
        pass

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        inject_tree(src, tmp_path / "b", BurnInOptions(text="A"))
        assert signal.getsignal(signal.SIGTERM) is mine  # never replaced, never lost
    finally:
        signal.signal(signal.SIGTERM, previous)


# --- B5: a writer that appears during the run is never replaced ----------------------


def test_output_folder_filled_during_the_run_is_not_replaced(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    for name in ("a.dcm", "b.dcm"):
        shutil.copyfile(real_file("CT_small.dcm"), src / name)
    out = tmp_path / "out"

    def rival_writes_meanwhile(files):
        for i, path in enumerate(files):
            if i == 1:  # after every check passed and the first file was staged
                out.mkdir()
                (out / "a.dcm").write_bytes(b"the other run's file")
            yield path

    with pytest.raises(FileExistsError, match="not empty"):
        inject_tree(src, out, BurnInOptions(text="A"), progress=rival_writes_meanwhile)
    assert [p.name for p in out.iterdir()] == ["a.dcm"]
    assert (out / "a.dcm").read_bytes() == b"the other run's file"
    assert leftovers(tmp_path) == []
