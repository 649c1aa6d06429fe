"""Output of the benchmark scripts: markdown results on stdout (kept for an ``--out``
file), progress on stderr."""

from __future__ import annotations

import sys
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
