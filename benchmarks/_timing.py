"""Side-by-side timing on a shared machine: interleaved rounds, medians, the load recorded.

Every compared run takes its turn in each round (the order rotates from round to round),
so a change in the machine's load hits all of them alike; the median over rounds counts,
and the 1-minute load average before each run is kept next to its time.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Timing:
    """Wall times of one run over the rounds, with the load average before each."""

    seconds: list[float] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def load(self) -> str:
        """Median and highest load average before the runs."""
        return f"{statistics.median(self.loads):.1f} (max {max(self.loads):.1f})"


def load_average() -> float:
    return os.getloadavg()[0]


def wait_for_quiet(max_load: float | None, timeout: float) -> None:
    """Wait (at most ``timeout`` s) until the 1-minute load average is below ``max_load``."""
    deadline = time.monotonic() + timeout
    while max_load is not None and load_average() > max_load and time.monotonic() < deadline:
        time.sleep(5)


def interleaved(
    runs: Mapping[str, Callable[[], object]],
    rounds: int,
    *,
    after: Callable[[str], object] | None = None,
    max_load: float | None = None,
    wait: float = 0.0,
    log: Callable[[str], None] | None = None,
) -> dict[str, Timing]:
    """Time every run once per round, in an order that rotates, and return the times.

    ``after(name)`` runs untimed after each run (e.g. to remove its output). With
    ``max_load``, each run first waits up to ``wait`` seconds for the load to drop.
    """
    names = list(runs)
    timings = {name: Timing() for name in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            wait_for_quiet(max_load, wait)
            timings[name].loads.append(load_average())
            start = time.perf_counter()
            runs[name]()
            timings[name].seconds.append(time.perf_counter() - start)
            if after is not None:
                after(name)
            if log is not None:
                log(f"  round {r + 1}/{rounds} {name}: {timings[name].seconds[-1]:.2f} s")
    return timings


def process(argv: Sequence[str], cwd: Path | None = None) -> Callable[[], None]:
    """A run of ``python argv...`` with this repository's package first on the path."""
    env = dict(os.environ, PYTHONPATH=str(REPO))

    def run() -> None:
        subprocess.run(
            [sys.executable, *argv],
            cwd=cwd,
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    return run


def add_arguments(parser: argparse.ArgumentParser, rounds: int) -> None:
    """``--rounds``, ``--max-load``, ``--wait`` and ``--out``, shared by the scripts."""
    parser.add_argument("--rounds", type=int, default=rounds, help="interleaved rounds (median)")
    parser.add_argument("--max-load", type=float, default=None, help="wait for a lower load")
    parser.add_argument("--wait", type=float, default=120.0, help="longest wait per run (s)")
    parser.add_argument("--out", type=Path, help="also write the results to this file")


def wait_options(args: argparse.Namespace) -> dict:
    """The :func:`interleaved` keywords that ``--max-load`` and ``--wait`` set."""
    return {"max_load": args.max_load, "wait": args.wait}


def machine() -> str:
    """Python version, the cores this process may use and the load average now."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (
        f"python {platform.python_version()}, {cores} cores shared with other jobs, "
        f"load average at start {load_average():.1f}"
    )


def verdict(ok: bool) -> str:
    return "**met**" if ok else "**missed**"
