"""``monai-forget canary inject``: burn canary text into DICOM, NIfTI or PNG files."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from tqdm import tqdm

from monai_forget.dicom import (
    TextHasher,
    as_options,
    inject_any,
    inject_tree,
    manifest_paths,
    write_manifest,
)

SALT_ENV = "MONAI_FORGET_CANARY_SALT"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``canary`` sub-command and its ``inject`` action."""
    canary = subparsers.add_parser(
        "canary", help="burn-in canaries: known text in a known typeface and place"
    )
    actions = canary.add_subparsers(dest="canary_command", required=True)
    inject = actions.add_parser(
        "inject",
        help="burn text (default: the PatientName) into a file or a folder tree",
        description=(
            "Burn text into the pixel data of DICOM (or NIfTI/PNG) files, at the "
            "displayed white, and write new derived instances plus a manifest "
            "(OUTPUT.manifest.json/.csv). The input is never modified."
        ),
    )
    inject.add_argument("input", type=Path, help="a file or a folder tree")
    inject.add_argument("output", type=Path, help="output file, or folder for a folder input")
    inject.add_argument(
        "--text", help="text to burn in (default: PatientName as a viewer shows it)"
    )
    inject.add_argument(
        "--position",
        nargs=2,
        type=int,
        default=(1, 1),
        metavar=("ROW", "COL"),
        help="top-left pixel of the text (default: 1 1)",
    )
    size = inject.add_mutually_exclusive_group()
    size.add_argument("--scale", type=int, default=1, help="glyph magnification (5*N rows)")
    size.add_argument(
        "--height-fraction",
        type=float,
        metavar="F",
        help="text height as a fraction of the image rows (largest integer scale that fits)",
    )
    inject.add_argument(
        "--frames",
        nargs="+",
        type=int,
        metavar="I",
        help="0-based frames to burn into (default: all)",
    )
    inject.add_argument(
        "--all",
        action="store_true",
        dest="all_files",
        help="folder input: burn into every image, not just one canary",
    )
    inject.add_argument(
        "--canary",
        metavar="REL_PATH",
        help="folder input: the file (relative to INPUT) to carry the canary "
        "(default: the first image in sorted order)",
    )
    inject.add_argument("--overwrite", action="store_true", help="replace existing outputs")
    inject.add_argument("--dry-run", action="store_true", help="check and report; write nothing")
    inject.add_argument(
        "--manifest",
        type=Path,
        metavar="PREFIX",
        help="manifest prefix (default: OUTPUT, giving OUTPUT.manifest.json and .csv)",
    )
    inject.add_argument(
        "--plain-text",
        action="store_true",
        help="record the text itself in the manifest (default: a salted HMAC-SHA256)",
    )
    inject.add_argument(
        "--salt",
        help=f"secret salt for the text hash (default: ${SALT_ENV}, else random per run)",
    )
    inject.set_defaults(func=run_inject)


def run_inject(args: argparse.Namespace) -> int:
    """Handle ``canary inject``; returns the exit code."""
    if args.canary is not None and args.all_files:
        raise ValueError("--canary and --all are mutually exclusive")
    options = as_options(args.text, args.position, args.scale, args.height_fraction, args.frames)
    hasher = TextHasher(args.salt or os.environ.get(SALT_ENV), plain_text=args.plain_text)
    prefix = args.manifest or args.output
    if not args.dry_run and not args.overwrite:
        for path in manifest_paths(prefix):
            if path.exists():
                raise FileExistsError(f"{path} already exists; pass --overwrite to replace it")

    if args.input.is_dir():
        if args.input.resolve() in Path(prefix).resolve().parents:
            raise ValueError("the manifest would be written inside the input folder")
        with tqdm(unit="file", desc="canary inject", disable=None) as bar:

            def progress(files):
                bar.total = len(files)
                for path in files:
                    yield path
                    bar.update()

            records = inject_tree(
                args.input,
                args.output,
                options,
                all_files=args.all_files,
                canary=args.canary,
                overwrite=args.overwrite,
                dry_run=args.dry_run,
                hasher=hasher,
                progress=progress,
            )
    else:
        if args.canary is not None or args.all_files:
            raise ValueError("--canary and --all apply to folder inputs only")
        output = args.output / args.input.name if args.output.is_dir() else args.output
        records = [
            inject_any(
                args.input,
                output,
                options,
                overwrite=args.overwrite,
                dry_run=args.dry_run,
                hasher=hasher,
            )
        ]

    injected = [r for r in records if r["action"] == "injected"]
    verb = "would write" if args.dry_run else "wrote"
    print(f"{verb} {len(records)} file(s), {len(injected)} with burned-in text")
    for record in injected:
        print(
            f"  {record['output']}: box rows {record['bbox_row']}+{record['bbox_height']} "
            f"cols {record['bbox_col']}+{record['bbox_width']}, scale {record['scale']}"
        )
    if not args.dry_run:
        json_path, csv_path = write_manifest(records, prefix, hasher, overwrite=args.overwrite)
        print(f"manifest: {json_path} and {csv_path}")
    return 0
