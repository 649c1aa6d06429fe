"""A FLARE POC deployment never outlives its run: SIGTERM and failures shut it down
(FLARE's shutdown, then every process under its workspace), and a port it needs that is
already taken is refused before anything starts, naming the port."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from commands import environment

from monai_forget.cli import main
from monai_forget.fl.poc import DeploymentError, check_ports_free
from monai_forget.processes import processes_mentioning, stop_processes


def _listen() -> socket.socket:
    """A socket listening on a free port the system picks."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("", 0))
    sock.listen()
    return sock


def test_a_taken_port_is_refused_naming_it() -> None:
    sock = _listen()
    port = sock.getsockname()[1]
    with pytest.raises(DeploymentError, match=f"port {port} .* is in use"):
        check_ports_free({port: "test"})
    sock.close()
    check_ports_free({port: "test"})  # free again: no error


def test_fl_poc_refuses_a_taken_port_before_reading_any_data(tmp_path, capsys, monkeypatch):
    """A stand-in for FLARE's fixed ports (a real POC test may be using them meanwhile)."""
    held = _listen()
    port = held.getsockname()[1]
    monkeypatch.setattr("monai_forget.fl.poc.POC_PORTS", {port: "federated learning"})
    try:
        code = main(["fl", "poc", "--out", str(tmp_path / "out")])
    finally:
        held.close()
    err = capsys.readouterr().err
    assert code == 2 and f"port {port}" in err and "nvflare poc stop" in err, err
    assert not (tmp_path / "out").exists()


#: Sleeps after saying it is ready (its handlers set); "stubborn" ignores SIGTERM.
_SLEEPER = (
    "import pathlib, signal, sys, time\n"
    "if sys.argv[1] == 'stubborn': signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "pathlib.Path(sys.argv[2] + '.' + sys.argv[1]).touch()\n"
    "time.sleep(300)"
)


def test_stop_processes_ends_what_mentions_the_workspace(tmp_path) -> None:
    """Processes found by their command line (here a marker path); one ignores SIGTERM
    and gets SIGKILL after the grace period."""
    marker = str(tmp_path / "workspace-marker")
    runs = [subprocess.Popen([sys.executable, "-c", _SLEEPER, kind, marker])
            for kind in ("polite", "stubborn")]  # fmt: skip
    deadline = time.monotonic() + 30
    ready = [Path(f"{marker}.{kind}") for kind in ("polite", "stubborn")]
    while not all(p.exists() for p in ready) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sorted(processes_mentioning(marker)) == sorted(r.pid for r in runs)
    stop_processes(processes_mentioning(marker), grace=2)
    assert [r.wait(timeout=10) for r in runs] == [-signal.SIGTERM, -signal.SIGKILL]
    assert processes_mentioning(marker) == []


def test_sigterm_unwinds_so_the_shutdown_runs(tmp_path) -> None:
    done = tmp_path / "shut-down"
    script = textwrap.dedent(
        f"""
        import os, signal, time
        from monai_forget.fl.poc import _terminations_unwind
        with _terminations_unwind():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(30)
            finally:
                open({str(done)!r}, "w").write("stopped")
        """
    )
    run = subprocess.run([sys.executable, "-c", script], timeout=60, env=environment())
    assert run.returncode == 128 + signal.SIGTERM
    assert done.read_text() == "stopped"
