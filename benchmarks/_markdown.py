"""Output of the benchmark scripts: markdown results on stdout (kept for an ``--out``
file), progress on stderr."""

from __future__ import annotations

import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from monai_forget.io import atomic_write

LINES: list[str] = []


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
    """Write every result line said so far to ``path``, atomically."""
    with atomic_write(Path(path), "w", overwrite=True) as handle:
        handle.write("\n".join(LINES) + "\n")


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


def say_provenance(record: dict[str, str]) -> None:
    """The record's command, commit, date and machine as one results line."""
    say(
        f"`{record['command']}` · commit {record['commit']} · {record['date']} · "
        f"{record['machine']}"
    )
