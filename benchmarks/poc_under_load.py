"""Benchmark: `fl poc` deployments under load, and after a hard kill (issue 53, item 4).

Runs ``monai-forget fl poc`` ``--runs`` times (3 sites, 2 rounds of 5 local steps,
Forsaken in round 1: one deployment per run, ``--retrained 0``, the K-S audit only) while
the quick test suite runs beside it (``python -m pytest -q``, started again whenever it
ends), and counts per run: a failed admin login (FLARE's "cannot connect to server" in
the run's output or logs), any other failure, and afterwards the processes still running
under its workspace and the POC ports still taken. Then ``--kills`` times: starts the
same run, sends SIGKILL once its services are recorded, counts what is left, runs
``monai-forget fl poc --stop OUT`` and counts again.

Run (about 2 minutes a run on 2 cores with the suite beside it)::

    python benchmarks/poc_under_load.py --runs 10 --kills 3 --work /tmp/poc-load \
        --out benchmarks/results/poc_under_load.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from _markdown import log, say, say_section, write  # benchmarks/_markdown.py
from _poc import leftovers

REPO = Path(__file__).resolve().parents[1]
#: One deployment per run: Forsaken in round 1 of 2, no retrained models, K-S only.
BOUNDS = (
    "--method forsaken --clients 3 --rounds 2 --withdraw-round 1 --local-steps 5 "
    "--iterations 2 --retrained 0 --auditors ks"
)
LOGIN_FAILURE = "cannot connect to server"


def command(out: Path) -> list[str]:
    return [sys.executable, "-m", "monai_forget", "fl", "poc", "--out", str(out), *BOUNDS.split()]


def login_failed(out: Path, output: str) -> bool:
    logs = [p.read_text(errors="replace") for p in out.glob("workspace/**/*.log")]
    logs += [p.read_text(errors="replace") for p in out.glob("workspace/**/log.txt")]
    return any(LOGIN_FAILURE in text for text in [output, *logs])


class Load:
    """The quick test suite, run again whenever it ends, as the load beside the runs."""

    def __init__(self) -> None:
        self.process: subprocess.Popen | None = None

    def keep_running(self) -> None:
        if self.process is None or self.process.poll() is not None:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=60)


def one_run(out: Path, load: Load) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    console = out.parent / f"{out.name}.console.txt"
    start = time.perf_counter()
    with console.open("w") as handle:
        run = subprocess.Popen(command(out), stdout=handle, stderr=subprocess.STDOUT)
        while run.poll() is None:
            load.keep_running()
            time.sleep(2)
    output = console.read_text(errors="replace")
    processes, port = leftovers(out)
    return {
        "code": run.returncode, "seconds": time.perf_counter() - start,
        "login_failed": login_failed(out, output), "processes": processes, "port_taken": port,
        "tail": output.strip().splitlines()[-1:] if run.returncode else [],
    }  # fmt: skip


def one_kill(out: Path, load: Load) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    run = subprocess.Popen(command(out), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    record = out / "workspace" / "poc" / "services.json"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and run.poll() is None:
        load.keep_running()
        if record.is_file() and len(json.loads(record.read_text())) >= 2:
            break
        time.sleep(1)
    time.sleep(5)
    run.kill()
    run.wait(timeout=60)
    before = leftovers(out)
    stop = subprocess.run(
        [sys.executable, "-m", "monai_forget", "fl", "poc", "--stop", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    after = leftovers(out)
    return {"left": before, "stop_code": stop.returncode, "after": after}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--work", required=True)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    work = Path(args.work)
    load = Load()
    runs, kills = [], []
    try:
        for i in range(args.runs):
            runs.append(one_run(work / f"run{i}", load))
            log(f"run {i}: {runs[-1]}")
        for i in range(args.kills):
            kills.append(one_kill(work / f"kill{i}", load))
            log(f"kill {i}: {kills[-1]}")
    finally:
        load.stop()
    say("# `fl poc` under load, and after a hard kill (issue 53)\n")
    say(
        f"`python benchmarks/poc_under_load.py --runs {args.runs} --kills {args.kills}` · "
        f"python {platform.python_version()}, {os.cpu_count()} CPUs; each run: `monai-forget "
        f"fl poc {BOUNDS}`, the quick test suite running beside it\n"
    )
    say("| run | exit code | seconds | failed admin login | processes left | POC port taken |")
    say("|---|---|---|---|---|---|")
    for i, r in enumerate(runs):
        say(f"| {i} | {r['code']} | {r['seconds']:.0f} | {r['login_failed']} | {r['processes']} "
            f"| {r['port_taken']} |")  # fmt: skip
    say()
    say("| kill | processes left after SIGKILL | port taken | `fl poc --stop` exit | "
        "processes left after it | port taken |")  # fmt: skip
    say("|---|---|---|---|---|---|")
    for i, k in enumerate(kills):
        say(f"| {i} | {k['left'][0]} | {k['left'][1]} | {k['stop_code']} | {k['after'][0]} | "
            f"{k['after'][1]} |")  # fmt: skip
    say()
    failed = sum(r["login_failed"] for r in runs)
    other = sum(r["code"] != 0 and not r["login_failed"] for r in runs)
    left = sum(r["processes"] > 0 or r["port_taken"] for r in runs)
    cleared = sum(k["after"] == (0, False) and k["stop_code"] == 0 for k in kills)
    say_section("Targets", [
        f"- failed admin logins: {failed} of {len(runs)} runs (target 0 in >= 10): "
        f"{'**met**' if failed == 0 and len(runs) >= 10 else '**missed**'}; other failures: "
        f"{other}; runs that left a process or a port: {left}",
        f"- after SIGKILL and `fl poc --stop`: nothing left in {cleared} of {len(kills)} "
        f"(target all): {'**met**' if cleared == len(kills) else '**missed**'}",
    ])  # fmt: skip
    if args.out:
        write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
