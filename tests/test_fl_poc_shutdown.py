"""A FLARE POC deployment never outlives its run: SIGTERM and failures shut it down
(FLARE's shutdown, then every process under its workspace), and a port it needs that is
already taken is refused before anything starts, naming the port."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from commands import environment

from monai_forget.cli import main
from monai_forget.fl.poc import (
    SERVICES_FILE,
    DeploymentError,
    _record_services,
    check_ports_free,
    login_timeout,
    stop_deployment,
)
from monai_forget.processes import (
    load_per_core,
    processes_mentioning,
    start_time,
    stop_processes,
)


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
    deadline = time.monotonic() + 30 * load_per_core()
    ready = [Path(f"{marker}.{kind}") for kind in ("polite", "stubborn")]
    while not all(p.exists() for p in ready) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sorted(processes_mentioning(marker)) == sorted(r.pid for r in runs)
    stop_processes(processes_mentioning(marker), grace=2)
    assert [r.wait(timeout=10 * load_per_core()) for r in runs] == [
        -signal.SIGTERM,
        -signal.SIGKILL,
    ]
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
    run = subprocess.run(
        [sys.executable, "-c", script], timeout=60 * load_per_core(), env=environment()
    )
    assert run.returncode == 128 + signal.SIGTERM
    assert done.read_text() == "stopped"


def _sleepers(marker: str, *kinds: str) -> list[subprocess.Popen]:
    runs = [subprocess.Popen([sys.executable, "-c", _SLEEPER, kind, marker]) for kind in kinds]
    ready = [Path(f"{marker}.{kind}") for kind in kinds]
    deadline = time.monotonic() + 30 * load_per_core()
    while not all(p.exists() for p in ready) and time.monotonic() < deadline:
        time.sleep(0.1)
    return runs


def test_a_killed_runs_services_are_stopped_by_their_recorded_ids(
    tmp_path, capsys, monkeypatch
) -> None:
    """The record names processes by id and start time: a recorded process still running
    is stopped even when its command line does not name the workspace; an id whose start
    time differs (the id was given to a later process) is left alone."""
    poc = tmp_path / "out" / "workspace" / "poc"
    poc.mkdir(parents=True)
    left, later = _sleepers(str(tmp_path / "elsewhere"), "polite", "other")
    rows = [{"pid": left.pid, "start": start_time(left.pid)},
            {"pid": later.pid, "start": start_time(later.pid) - 1}]  # fmt: skip
    (poc / SERVICES_FILE).write_text(json.dumps(rows))
    try:
        assert stop_deployment(poc) == [left.pid]
        assert left.wait(timeout=10 * load_per_core()) == -signal.SIGTERM and later.poll() is None
        (poc / SERVICES_FILE).write_text(json.dumps(rows[:1]))  # ended: nothing to stop
        # FLARE's ports may be a real POC test's meanwhile: none checked here
        monkeypatch.setattr("monai_forget.fl.poc.POC_PORTS", {})
        assert main(["fl", "poc", "--stop", str(tmp_path / "out")]) == 0
        assert "stopped 0 process(es)" in capsys.readouterr().out
    finally:
        stop_processes([later.pid], grace=2)
    assert main(["fl", "poc", "--stop", str(tmp_path / "nowhere")]) == 2
    assert "give --stop the --out folder" in capsys.readouterr().err


def test_a_running_deployment_records_its_services(tmp_path) -> None:
    poc = tmp_path / "poc"
    poc.mkdir()
    done = threading.Event()
    watcher = threading.Thread(target=_record_services, args=(poc, done))
    watcher.start()
    (service,) = _sleepers(str(poc / "server"), "polite")
    try:
        deadline = time.monotonic() + 30 * load_per_core()
        while not (poc / SERVICES_FILE).is_file() and time.monotonic() < deadline:
            time.sleep(0.2)
        rows = json.loads((poc / SERVICES_FILE).read_text())
        assert {"pid": service.pid, "start": start_time(service.pid)} in rows
    finally:
        done.set()
        watcher.join(timeout=10 * load_per_core())
        stop_processes([service.pid], grace=2)


def test_the_admin_login_waits_longer_for_larger_and_busier_deployments() -> None:
    assert login_timeout(3, load=0.5, cores=2) == 36.0  # FLARE's default: 10 s
    assert login_timeout(30, load=0.5, cores=2) == 90.0
    assert login_timeout(3, load=8.0, cores=2) == 4 * 36.0  # 4 runnable tasks per core


def test_timed_waits_scale_with_the_load_per_core() -> None:
    """The tests' deadlines and the POC's login wait read one factor (issue 67, item 5)."""
    assert load_per_core(load=8.0, cores=2) == 4.0
    assert load_per_core(load=1.0, cores=2) == 1.0  # never shorter than on an idle machine
    assert load_per_core(load=3.0, cores=4) == 1.0
    assert load_per_core() >= 1.0
