"""The command lines the documentation shows, and running one as a user types it.

The docs' fenced ``bash`` blocks are read; every ``monai-forget ...``,
``python -m monai.bundle ...`` and ``torchrun ... -m monai.bundle ...`` command in them
(continuation lines joined, comments dropped, ``&&`` chains split) must be run by some
test through :func:`run_line`: a real shell running the installed console script or
``python -m``, with this checkout first on ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: Every documentation file whose commands must run.
DOC_FILES = (
    "README.md",
    *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md")),
    "bundles/README.md",
    *sorted(str(p.relative_to(REPO)) for p in (REPO / "bundles").glob("*/docs/README.md")),
    "data_prep/README.md",
)

_COMMAND = re.compile(
    r"^(monai-forget\b|python -m monai\.bundle\b|torchrun\b.* -m monai\.bundle\b)"
)


#: MONAI's bundle metadata schema, beside the checkout (``../shared/schemas``); only the
#: documented ``verify_metadata`` command needs it.
SCHEMA = REPO.parent / "shared" / "schemas" / "meta_schema_20240725.json"
SCHEMA_PLACEHOLDER = "/tmp/meta_schema_20240725.json"


def needs_absent_schema(command: str) -> bool:
    """A documented command that reads the metadata schema, on a machine without it: the
    runs leave out that command alone (everything else still runs and is checked)."""
    return SCHEMA_PLACEHOLDER in command and not SCHEMA.is_file()


def _strip_comment(line: str) -> str:
    """The line without a trailing ``# comment`` (a ``#`` outside quotes, after a space)."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def normalise(command: str) -> str:
    """One spelling per command: single spaces, no trailing space."""
    return re.sub(r"\s+", " ", command).strip()


def commands_in(text: str) -> list[str]:
    """The commands of the ``bash`` blocks of one markdown text, in order."""
    found = []
    for language, body in re.findall(r"```(\w*)\n(.*?)```", text, re.S):
        if language not in ("bash", "sh", "shell", "console"):
            continue
        for line in body.replace("\\\n", " ").splitlines():
            for part in re.split(r"&&|;", _strip_comment(line)):
                part = normalise(part)
                if _COMMAND.match(part):
                    found.append(part)
    return found


def documented_commands() -> dict[str, list[str]]:
    """``{command: [doc files showing it]}`` over :data:`DOC_FILES`."""
    out: dict[str, list[str]] = {}
    for name in DOC_FILES:
        path = REPO / name
        if path.is_file():
            for command in commands_in(path.read_text(encoding="utf-8")):
                out.setdefault(command, []).append(name)
    return out


def environment(data_root: Path | None = None, **extra: str) -> dict[str, str]:
    """The user's environment plus this checkout on ``PYTHONPATH`` (and ``$DATA``)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["MPLBACKEND"] = "Agg"
    env.setdefault("OMP_NUM_THREADS", str(max(1, min(2, os.cpu_count() or 1))))
    if data_root is not None:
        env["MONAI_FORGET_DATA"] = env["DATA"] = str(data_root)
    env.update(extra)
    return env


def run_line(
    command: str,
    cwd: Path,
    *,
    extra: str = "",
    replace: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 3600,
) -> subprocess.CompletedProcess:
    """Run one documented command in ``bash`` from ``cwd``, as a user would type it.

    Args:
        command: the command as documented (must be one of :func:`documented_commands`).
        cwd: the folder it runs in.
        extra: options appended to bound the run (fewer epochs, smaller subsets).
        replace: placeholders of the docs (``/data/xr``) and the real paths standing
            for them.
        env: the environment (default :func:`environment`).
    """
    assert command in documented_commands(), f"not a documented command: {command}"
    line = command
    for placeholder, real in (replace or {}).items():
        line = line.replace(placeholder, real)
    return subprocess.run(
        ["bash", "-c", f"{line} {extra}".strip()],
        cwd=cwd,
        env=env or environment(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def check(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    """Fail with the command's own output when it did not succeed."""
    assert result.returncode == 0, (
        f"{result.args[-1]}\nexit {result.returncode}\n{result.stdout[-3000:]}\n"
        f"{result.stderr[-6000:]}"
    )
    return result


def assert_decides_as_the_library(results: dict, outcome: object) -> None:
    """A federated command's ``results.json`` against ``simulate_withdrawal``'s outcome on
    the same inputs: every audit's decision and statistic (the reference-model auditor's
    among them), the forgetting rate, the accuracies and the comparison with retraining."""
    import json

    from monai_forget.results import jsonable

    api = json.loads(json.dumps(jsonable(outcome.to_dict())))
    decided = {k: (a["decision"], a["statistic"]) for k, a in api["audits"].items()}
    assert {k: (a["decision"], a["statistic"]) for k, a in results["audits"].items()} == decided
    assert any(k.endswith("/refmodel") for k in decided)
    for key in ("rate", "accuracy", "retraining_forgetting_rate", "versus_retraining"):
        assert results[key] == api[key], key
    assert results["withdrawal"] == api["withdrawal"]
