"""Worker processes: how many cores a run may use, and workers that end with their parent.

Imports only the standard library.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import threading


def available_cores() -> int:
    """The CPU cores this process may run on: its affinity mask (a Slurm or container
    allocation), not the machine's count."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


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
