"""Benchmark: the quick test tier with every core busy, and `fl poc` stopped by SIGTERM at
load (issue 67, item 5).

A CPU hog per core (``python -c "while True: pass"``, in its own session) runs for the
whole benchmark. Meanwhile the README's quick tier (``python -m pytest``, its default
options) runs ``--runs`` times; each run's exit code, counts, failed tests, seconds and
the 1-minute load average at its start are recorded. Then ``--terms`` times: ``fl poc``
(one deployment: Forsaken in round 1 of 2, 3 sites, no retrained models, the K-S audit)
is started, sent SIGTERM once its services are recorded, and what it leaves is counted:
processes that mention its workspace, and FLARE's POC ports still taken.

The record (numbers, with the command, commit, date and machine) is written beside the
markdown; ``--from-record`` renders the markdown from it.

Usage (about 10 minutes a run of the tier on 2 cores with 2 hogs)::

    python benchmarks/tests_under_load.py --runs 5 --terms 3 --work /tmp/load \\
        --record benchmarks/results/tests_under_load.json \\
        --out benchmarks/results/tests_under_load.md
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from _markdown import add_record_arguments, finish, log, run_recorded, say, say_provenance
from _poc import leftovers

from monai_forget.processes import available_cores, load_per_core

REPO = Path(__file__).resolve().parents[1]
#: One deployment: Forsaken in round 1 of 2, no retrained models, K-S only.
POC = (
    "--method forsaken --clients 3 --rounds 2 --withdraw-round 1 --local-steps 5 "
    "--iterations 2 --retrained 0 --auditors ks"
)


class Hogs:
    """One busy process per core, each in its own session."""

    def __init__(self, count: int) -> None:
        self.processes = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
            for _ in range(count)
        ]

    def stop(self) -> None:
        for process in self.processes:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=60)


def quick_tier(work: Path, index: int) -> dict:
    """One run of the README's quick tier."""
    load = os.getloadavg()[0]
    start = time.perf_counter()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    (work / f"tier{index}.txt").write_text(run.stdout + run.stderr)
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|error)", run.stdout)}
    failed = re.findall(r"^FAILED (\S+)", run.stdout, re.MULTILINE)
    return {"code": run.returncode, "seconds": time.perf_counter() - start, "load": load,
            "counts": counts, "failed": failed}  # fmt: skip


def poc_terminated(out: Path) -> dict:
    """``fl poc`` sent SIGTERM once its services run; what it leaves."""
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-m", "monai_forget", "fl", "poc", "--out", str(out), *POC.split()]
    run = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    record = out / "workspace" / "poc" / "services.json"
    deadline = time.monotonic() + 600 * load_per_core()
    while time.monotonic() < deadline and run.poll() is None:
        if record.is_file() and len(json.loads(record.read_text() or "[]")) >= 2:
            break
        time.sleep(1)
    started = run.poll() is None
    time.sleep(5)
    run.send_signal(signal.SIGTERM)
    code = run.wait(timeout=600 * load_per_core())
    time.sleep(2)
    processes, taken = leftovers(out)
    return {"started": started, "code": code, "processes": processes, "port_taken": taken}


def render(record: dict) -> int:
    s = record["settings"]
    say("# The quick tier with every core busy, and `fl poc` stopped at load (issue 67)")
    say()
    say_provenance(record["provenance"])
    say()
    beside = f" {s['busy_with']} ran beside it." if s.get("busy_with") else ""
    say(
        f"{s['hogs']} CPU hogs ran throughout.{beside} The quick tier is the README's "
        "`python -m pytest` (its default options: 2 workers on this machine); `fl poc` "
        f"ran `{POC}` and was sent SIGTERM once its services were recorded."
    )
    say()
    say("| tier run | load at start | exit code | passed | failed | seconds | failed tests |")
    say("|---|---|---|---|---|---|---|")
    for i, r in enumerate(record["tiers"]):
        c = r["counts"]
        say(f"| {i} | {r['load']:.1f} | {r['code']} | {c.get('passed', 0)} | "
            f"{c.get('failed', 0) + c.get('error', 0)} | {r['seconds']:.0f} | "
            f"{', '.join(r['failed']) or '-'} |")  # fmt: skip
    say()
    say("| SIGTERM | services running when sent | exit code | processes left | POC port taken |")
    say("|---|---|---|---|---|")
    for i, t in enumerate(record["terms"]):
        say(f"| {i} | {t['started']} | {t['code']} | {t['processes']} | {t['port_taken']} |")
    say()
    tiers, terms = record["tiers"], record["terms"]
    passed = sum(r["code"] == 0 for r in tiers)
    clean = sum(t["processes"] == 0 and not t["port_taken"] for t in terms)
    return finish([
        f"- the quick tier passes with every core busy: {passed} of {len(tiers)} runs (target "
        f"5 of 5): {'**met**' if passed == len(tiers) >= 5 else '**missed**'}",
        f"- `fl poc` after SIGTERM at load: nothing left in {clean} of {len(terms)} (target "
        f"all): {'**met**' if terms and clean == len(terms) else '**missed**'}",
    ], None)  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--terms", type=int, default=3)
    parser.add_argument("--hogs", type=int, help="CPU hogs (default: one per core)")
    parser.add_argument("--busy-with", default="", help="what else keeps the cores busy (a "
                        "benchmark run beside it), said in the results")  # fmt: skip
    parser.add_argument("--work", type=Path)
    add_record_arguments(parser)
    args = parser.parse_args()
    if args.work is None and args.from_record is None:
        parser.error("--work is required unless --from-record is given")

    def measure() -> dict:
        args.work.mkdir(parents=True, exist_ok=True)
        hogs = Hogs(available_cores() if args.hogs is None else args.hogs)
        tiers, terms = [], []
        try:
            time.sleep(60)  # the 1-minute load average catches up with the hogs
            for i in range(args.runs):
                tiers.append(quick_tier(args.work, i))
                log(f"tier {i}: {tiers[-1]}")
            for i in range(args.terms):
                terms.append(poc_terminated(args.work / f"poc{i}"))
                log(f"SIGTERM {i}: {terms[-1]}")
        finally:
            hogs.stop()
        settings = {"hogs": len(hogs.processes), "runs": args.runs, "terms": args.terms,
                    "busy_with": args.busy_with}  # fmt: skip
        return {"settings": settings, "tiers": tiers, "terms": terms}

    return run_recorded(args, measure, render)


if __name__ == "__main__":
    sys.exit(main())
