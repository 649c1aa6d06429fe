"""A FLARE POC deployment never outlives its run: SIGTERM and failures shut it down
(FLARE's shutdown, then every process under its workspace), and a port it needs that is
already taken is refused before anything starts, naming the port."""

from __future__ import annotations

import errno
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
from monai_forget.fl.poc import POC_PORTS, DeploymentError, check_ports_free
from monai_forget.processes import processes_mentioning, stop_processes


def _listen(port: int) -> socket.socket | None:
    """A socket listening on ``port``, or None when something else already does."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("", port))
    except OSError as err:
        sock.close()
        if err.errno != errno.EADDRINUSE:
            raise
        return None
    sock.listen()
    return sock


def test_a_taken_port_is_refused_naming_it() -> None:
    sock = _listen(0)
    port = sock.getsockname()[1]
    with pytest.raises(DeploymentError, match=f"port {port} .* is in use"):
        check_ports_free({port: "test"})
    sock.close()
    check_ports_free({port: "test"})  # free again: no error


def test_fl_poc_refuses_a_taken_port_before_reading_any_data(tmp_path, capsys) -> None:
    port = min(POC_PORTS)
    held = _listen(port)  # None: something else holds it, which is as good
    try:
        code = main(["fl", "poc", "--out", str(tmp_path / "out")])
    finally:
        if held is not None:
            held.close()
    err = capsys.readouterr().err
    assert code == 2 and f"port {port}" in err and "nvflare poc stop" in err, err
    assert not (tmp_path / "out").exists()


_SLEEPER = "import signal, sys, time\nif sys.argv[1] == 'stubborn': signal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(300)"  # noqa: E501


def test_stop_processes_ends_what_mentions_the_workspace(tmp_path) -> None:
    """Processes found by their command line (here a marker path); one ignores SIGTERM
    and gets SIGKILL after the grace period."""
    marker = str(tmp_path / "workspace-marker")
    runs = [subprocess.Popen([sys.executable, "-c", _SLEEPER, kind, marker])
            for kind in ("polite", "stubborn")]  # fmt: skip
    deadline = time.monotonic() + 30
    while len(processes_mentioning(marker)) < 2 and time.monotonic() < deadline:
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


@pytest.mark.fl
@pytest.mark.slow
def test_a_terminated_poc_leaves_no_service_or_port(shared_data: Path, tmp_path: Path) -> None:
    """``fl poc`` killed with SIGTERM once its services run: it exits 143 and no FLARE
    process or listening POC port remains."""
    pytest.importorskip("nvflare", reason="NVIDIA FLARE is not installed")
    out = tmp_path / "fl-poc"
    command = [sys.executable, "-m", "monai_forget", "fl", "poc", "--out", str(out),
               "--clients", "3", "--rounds", "2", "--withdraw-round", "1", "--local-steps",
               "5", "--iterations", "2"]  # fmt: skip
    run = subprocess.Popen(command, env=environment(shared_data), stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)  # fmt: skip
    poc = out / "workspace" / "poc"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and run.poll() is None:
        if len(processes_mentioning(str(poc.resolve()))) >= 2:  # the server and a client
            break
        time.sleep(1)
    assert run.poll() is None, f"the POC ended before its services ran: {run.stderr.read()}"
    time.sleep(5)
    run.send_signal(signal.SIGTERM)
    assert run.wait(timeout=180) == 128 + signal.SIGTERM
    assert processes_mentioning(str(poc.resolve())) == []
    check_ports_free()  # raises if a POC port is still listened on
    assert not (out / "results.json").exists()  # nothing half-written
