"""The ``monai-forget`` command line: one module per sub-command.

Each sub-command module exposes ``register(subparsers)`` which adds its parser and sets
``func`` (called with the parsed ``argparse.Namespace``, returning an exit code).
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Sequence

from monai_forget import __version__
from monai_forget.cli.options import with_intervals_in_help

# Sub-command modules, imported lazily so `monai-forget --help` stays fast.
SUBCOMMANDS: tuple[str, ...] = (
    "demo",
    "audit",
    "canary",
    "prepare",
    "memorisation",
    "fl",
    "shadow",
)


class UserError(Exception):
    """A problem with the user's input; printed without a traceback."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="monai-forget",
        description="Audit what a trained clinical imaging model remembers.",
    )
    parser.add_argument("--version", action="version", version=f"monai-forget {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in SUBCOMMANDS:
        importlib.import_module(f"monai_forget.cli.{name}").register(subparsers)
    return with_intervals_in_help(parser)


def describe_error(err: BaseException) -> str:
    """One line for the user: the message, and for system errors the file concerned."""
    if isinstance(err, OSError) and err.strerror:
        name = f"{err.filename}: " if err.filename else ""
        return f"{name}{err.strerror}"
    return str(err) or type(err).__name__


#: Library parameters whose flag is not their name with dashes (the one place they map).
PARAMETER_FLAGS = {
    "manifest": "--canary-manifest",
    "allow_code": "--trust-recipe",
    "providers": "--provider",
    "from_source": "--site-from-source",
}


def as_flags(message: str, parser: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """A library message as the command line reads it: each parameter the library names
    in backticks (```patient_column```) becomes the flag of the command that was run
    that sets it (``--patient-column``; :data:`PARAMETER_FLAGS` where the command has that
    flag); a backticked word none of its options sets stays as it is."""
    node, dests, options = parser, {}, set()
    while node is not None:
        step = None
        for action in node._actions:
            if isinstance(action, argparse._SubParsersAction):
                step = action.choices.get(getattr(args, action.dest, None))
            elif action.option_strings:
                dests.setdefault(action.dest, max(action.option_strings, key=len))
                options.update(action.option_strings)
        node = step

    def flag(match: re.Match) -> str:
        name = match.group(1)
        mapped = PARAMETER_FLAGS.get(name)
        return mapped if mapped in options else dests.get(name, match.group(0))

    return re.sub(r"`(\w+)`", flag, message)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``monai-forget``; problems with the user's input or files exit with status 2
    and one line naming the problem, never a traceback (a traceback means a bug)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # for audit trails
    try:
        return int(args.func(args) or 0)
    except (UserError, ValueError, OSError) as err:  # OSError: missing, read-only, full...
        print(
            f"monai-forget: error: {as_flags(describe_error(err), parser, args)}", file=sys.stderr
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())
