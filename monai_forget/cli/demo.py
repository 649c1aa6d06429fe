"""``monai-forget demo``: the withdrawal audit on the embedded digits data."""

from __future__ import annotations

import argparse

from monai_forget.cli.options import add_run_arguments


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="withdrawal audit on scikit-learn's bundled digits (no downloads)",
        description="Train a 3-provider consortium model on the bundled digits, withdraw "
        "provider C, and audit it with the reference-model auditor (the default: a bound "
        "on the share of C still remembered) and, as their papers define them, the K-S "
        "calibrated ratio and EMA.",
    )
    parser.add_argument(
        "--out", default="monai-forget-demo", help="output folder (default %(default)s)"
    )
    add_run_arguments(parser, "seed of the provider split and of every model")
    parser.add_argument("--overwrite", action="store_true", help="replace existing outputs")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print(
        "monai-forget demo: a consortium model on the bundled digits, provider C withdraws; "
        "training and auditing (about 2 minutes on 2 cores)...",
        flush=True,
    )
    from monai_forget.demo import format_table, run_demo

    rows = run_demo(args.out, seed=args.seed, device=args.device, overwrite=args.overwrite)
    print(format_table(rows))
    print(f"\nreport: {args.out}/report.html")
    print(f"inputs of the README's audit commands (cd there to run them): {args.out}/inputs/")
    return 0
