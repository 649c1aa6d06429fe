"""``monai-forget demo [withdrawal|leak]``: the product's two jobs on embedded data."""

from __future__ import annotations

import argparse
import time

from monai_forget.cli.options import add_run_arguments

DEFAULT_OUT = {"withdrawal": "monai-forget-demo", "leak": "monai-forget-leak-demo"}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="withdrawal audit or leak check on embedded data (no downloads)",
        description="withdrawal (the default): train a 3-provider consortium model on "
        "scikit-learn's bundled digits, withdraw provider C, and audit it with the "
        "reference-model auditor (a bound on C's membership strength relative to the known "
        "members) and, as their "
        "papers define them, the K-S calibrated ratio and EMA. leak: write the digits as "
        "12-bit DICOM files, burn a patient's name into one series with the canary "
        "injector, train a model through a MONAI bundle's preprocessing, and scan the "
        "hospital's roster through that bundle.",
    )
    parser.add_argument(
        "job", nargs="?", choices=tuple(DEFAULT_OUT), default="withdrawal",
        help="which demo (default %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--out",
        help=f"output folder (default {DEFAULT_OUT['withdrawal']} or {DEFAULT_OUT['leak']})",
    )
    add_run_arguments(parser, "seed of the data split and of every model")
    parser.add_argument("--overwrite", action="store_true", help="replace existing outputs")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    out = args.out or DEFAULT_OUT[args.job]
    start = time.perf_counter()
    code = _leak(args, out) if args.job == "leak" else _withdrawal(args, out)
    # the time it took here: the README's figures are of idle cores, a loaded machine is slower
    print(f"done in {time.perf_counter() - start:.0f} s")
    return code


def _withdrawal(args: argparse.Namespace, out: str) -> int:
    print(
        "monai-forget demo: a consortium model on the bundled digits, provider C withdraws; "
        "training and auditing (about 20 s on 2 idle cores)...",
        flush=True,
    )
    from monai_forget.demo import format_table, run_demo

    rows = run_demo(out, seed=args.seed, device=args.device, overwrite=args.overwrite)
    print(format_table(rows))
    print(f"\nreport: {out}/report.html")
    print(f"inputs of the README's audit commands (cd there to run them): {out}/inputs/")
    return 0


def _leak(args: argparse.Namespace, out: str) -> int:
    print(
        "monai-forget demo leak: a name burned into one patient's DICOM series, a model "
        "trained through a MONAI bundle, a leak scan through the same bundle (about 30 s on 2 "
        "idle cores)...",
        flush=True,
    )
    from monai_forget.leak_demo import run_leak_demo

    demo = run_leak_demo(out, seed=args.seed, device=args.device, overwrite=args.overwrite)
    print(demo.result.summary())
    print(f"\n{demo.finding()}")
    print(f"\nreport: {out}/scan/leak_scan.html")
    print(f"the same scan from the demo's files: {demo.command()}")
    return 0
