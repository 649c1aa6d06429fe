"""Worker processes: how many cores a run may use, and workers that end with their parent.

Imports only the standard library.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
import time
from pathlib import Path


def available_cores() -> int:
    """The CPU cores this process may run on: its affinity mask (a Slurm or container
    allocation), not the machine's count."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def load_per_core(load: float | None = None, cores: int | None = None) -> float:
    """The 1-minute load average per available core, at least 1: how many times longer
    than on an idle machine a timed wait should allow (``load`` and ``cores``: this
    machine's by default)."""
    load = os.getloadavg()[0] if load is None else load
    return max(1.0, load / (cores or available_cores()))


def exit_with_parent() -> None:
    """In a worker process: end it as soon as the process that started it ends.

    A parent killed outright (SIGKILL, out of memory) then leaves no orphan working on
    (or holding locks for) a run that no longer exists, whatever the start method: a
    daemon thread waits on the parent's sentinel (a pipe that only the parent holds
    open) and exits the process when it closes.
    """
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        multiprocessing.connection.wait([parent.sentinel])
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def processes_mentioning(text: str) -> list[int]:
    """Process ids of the running processes whose command line contains ``text`` (this
    process left out; Linux ``/proc``, an empty list elsewhere): the services a
    deployment started under a workspace path, wherever they were started from."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            line = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # ended meanwhile, or not ours to read
            continue
        pid = int(cmdline.parent.name)
        if text in line and pid != os.getpid():
            found.append(pid)
    return found


def stop_processes(pids: list[int], grace: float = 10.0) -> None:
    """SIGTERM each process, then SIGKILL those still alive after ``grace`` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = []
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
                alive.append(pid)
        deadline = time.monotonic() + grace
        while alive and time.monotonic() < deadline:
            alive = [pid for pid in alive if _running(pid)]
            time.sleep(0.2)
        pids = alive
        if not pids:
            return


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][:1]
    except OSError:
        return False
    return state != "Z"  # a zombie has ended; its parent has yet to reap it


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (``/proc/PID/stat`` field 22),
    which tells a process from a later one given the same id; ``None`` if it has ended."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].split()
    except OSError:
        return None
    return int(fields[19])  # field 22 of the line; 3 (state) is the first after ") "


def still_the_same(recorded: dict[str, int]) -> bool:
    """Is ``{"pid", "start"}`` (:func:`start_time`) the same process, still running?"""
    pid = int(recorded["pid"])
    return start_time(pid) == int(recorded["start"]) and _running(pid)
