"""``monai-forget audit verify``: re-check a saved audit result against its files."""

from __future__ import annotations

import argparse

#: Exit code when a recorded file changed or is missing.
MISMATCH = 1


def register(methods: argparse._SubParsersAction) -> None:
    """Add ``audit verify``."""
    verify = methods.add_parser(
        "verify",
        help="re-check a result.json against the files that decided it (SHA-256)",
        description="Hash again the audited model file and every cache entry (reference "
        "models, predictions) a result.json records. Exit codes: 0 every file matches, "
        f"{MISMATCH} a file changed or is missing, 2 usage error.",
    )
    verify.add_argument("result", help="the result.json of an audit")
    verify.add_argument(
        "--model", help="where the audited model file is now (default: the recorded path)"
    )
    verify.set_defaults(func=run_verify)


def run_verify(args: argparse.Namespace) -> int:
    from monai_forget.audit.verify import verify_result

    found = verify_result(args.result, args.model)
    print(found.summary())
    return 0 if found.ok else MISMATCH
