"""The ``monai-forget`` command line: one module per sub-command.

Each sub-command module exposes ``register(subparsers)`` which adds its parser and sets
``func`` (called with the parsed ``argparse.Namespace``, returning an exit code).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from monai_forget import __version__

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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (UserError, ValueError, FileNotFoundError, FileExistsError) as err:
        print(f"monai-forget: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
