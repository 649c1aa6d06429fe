"""Output of the benchmark scripts: markdown results on stdout (kept for an ``--out``
file), progress on stderr."""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from monai_forget.io import atomic_write

LINES: list[str] = []
#: Whether the run's command, commit, date and machine are among the lines already.
_PROVENANCE_SAID = False


def say(text: str = "") -> None:
    """Print a result line and keep it for :func:`write`."""
    print(text, flush=True)
    LINES.append(text)


def say_section(title: str, lines: list[str]) -> None:
    """A ``##`` section of result lines (e.g. the targets, marked)."""
    say(f"## {title}")
    say()
    for line in lines:
        say(line)
    say()


def log(msg: str) -> None:
    """Progress, on stderr so it stays out of the results."""
    print(msg, file=sys.stderr, flush=True)


def write(path: str | Path) -> None:
    """Write every result line said so far to ``path``, atomically; a results file whose
    lines do not say how it was run ends with its command, commit, date and machine
    (issue 67, item 4: every results file a benchmark writes records them)."""
    lines = list(LINES)
    if not _PROVENANCE_SAID:
        made = provenance(sys.argv)
        lines += ["", "---", "", f"Written by `{made['command']}` · commit {made['commit']} · "
                  f"{made['date']} · {made['machine']}"]  # fmt: skip
    with atomic_write(Path(path), "w", overwrite=True) as handle:
        handle.write("\n".join(lines) + "\n")


def finish(targets: list[str], out: str | Path | None) -> int:
    """Say the marked target lines, write every result line to ``out`` if given (atomic);
    the script's exit status."""
    say_section("Targets", targets)
    if out:
        write(out)
    return 0


def provenance(argv: list[str]) -> dict[str, str]:
    """What a results record says of its run: the command, the commit (``+dirty`` when
    the tree had changes), the date and the machine (issue 67, item 4)."""
    root = Path(__file__).resolve().parents[1]

    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", *args], cwd=root, capture_output=True, text=True, check=True
            ).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = "+dirty" if git("status", "--porcelain", "--untracked-files=no") else ""
    return {
        "command": " ".join(["python", _from_root(argv[0], root), *argv[1:]]),
        "commit": commit + dirty,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {platform.system()}, python {platform.python_version()}",
    }


def _from_root(script: str, root: Path) -> str:
    path = Path(script).resolve()
    return str(path.relative_to(root)) if path.is_relative_to(root) else script


def say_provenance(record: dict[str, str], prefix: str = "") -> None:
    """The record's command, commit, date and machine as one results line (after
    ``prefix``: e.g. which seed's record it is, where several records make one file)."""
    global _PROVENANCE_SAID
    _PROVENANCE_SAID = True
    say(
        f"{prefix}`{record['command']}` · commit {record['commit']} · {record['date']} · "
        f"{record['machine']}"
    )


def add_record_arguments(parser: argparse.ArgumentParser) -> None:
    """``--record`` (write the run's record), ``--from-record`` (render one, run nothing)
    and ``--out`` (also write the markdown)."""
    parser.add_argument("--record", type=Path, help="write the record (JSON) here")
    parser.add_argument("--from-record", type=Path, help="render this record; run nothing")
    parser.add_argument("--out", type=Path, help="also write the markdown here")


def run_recorded(
    args: argparse.Namespace, run: Callable[[], dict], render: Callable[[dict], int]
) -> int:
    """A results file made from a record of numbers: with ``--from-record`` that record,
    else ``run()``'s, stamped with the tree as the run started (:func:`provenance`) and
    written to ``--record``; rendered by ``render`` and written to ``--out``."""
    made = provenance(sys.argv)
    if args.from_record:
        record = json.loads(Path(args.from_record).read_text())
    else:
        record = {"provenance": made, **run()}
        if args.record:
            with atomic_write(Path(args.record), "w", overwrite=True) as handle:
                json.dump(record, handle, indent=1)
    code = render(record)
    if args.out:
        write(args.out)
    return code
