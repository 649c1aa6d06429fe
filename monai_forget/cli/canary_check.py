"""``monai-forget canary check``: would a burned-in name be legible where the model sees
it? Nothing is planted: each name is burned in memory as ``canary inject`` would burn it,
read by the bundle's loader and measured at the model input
(:mod:`monai_forget.dicom.legible`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from monai_forget.cli.options import add_bundle_set_argument, positive_int


def register(actions: argparse._SubParsersAction) -> None:
    """Add ``canary check``."""
    check = actions.add_parser(
        "check",
        help="would a name burned into these files be legible at the model input?",
        description=(
            "Burn each name (default: each file's PatientName) into each file in memory, "
            "exactly as 'canary inject' would, read it with the bundle's loader and measure "
            "it at the model input: a capital's height in model pixels, the shape's "
            "correlation with the text drawn at that size, and its contrast. Nothing is "
            "written. Exit code 0 when every name is legible on every file, 1 otherwise."
        ),
    )
    check.add_argument("files", nargs="+", type=Path, metavar="FILE", help="image files")
    check.add_argument("--bundle", required=True, help="the model's MONAI bundle folder")
    add_bundle_set_argument(check)
    names = check.add_mutually_exclusive_group()
    names.add_argument("--text", help="one text to check (default: each file's PatientName)")
    names.add_argument("--roster", type=Path, help="a CSV roster: check every name in it")
    check.add_argument("--column", help="the roster's name column (default: name)")
    check.add_argument("--position", nargs=2, type=int, default=(1, 1), metavar=("ROW", "COL"),
                       help="top-left pixel of the text (default %(default)s)")  # fmt: skip
    check.add_argument("--scale", type=positive_int, default=1,
                       help="glyph scale of the 5x5 typeface (default %(default)s)")  # fmt: skip
    check.add_argument("--font", help="a TrueType font instead of the 5x5 typeface")
    check.add_argument("--font-size", type=positive_int, metavar="PX",
                       help="with --font: pixels per em (default 12)")  # fmt: skip
    check.set_defaults(func=run_check)


def run_check(args: argparse.Namespace) -> int:
    """Print each file's verdict (by roster entry, never the name); 1 if any is illegible."""
    from monai_forget.dicom import as_options
    from monai_forget.dicom.legible import check_texts
    from monai_forget.memorisation.pipeline import Preprocessing
    from monai_forget.memorisation.roster import read_roster

    texts: list[str | None] = [args.text] if args.text else [None]
    if args.roster is not None:
        texts = list(read_roster(args.roster, args.column))
    options = as_options(None, args.position, args.scale, None, None, args.font, args.font_size)
    pre = Preprocessing.from_bundle(args.bundle, overrides=dict(args.bundle_set or ()))
    rows = check_texts(args.files, texts, options, pre)
    print(f"legibility at the model input, through {pre.description}:")
    illegible = 0
    for file in args.files:
        mine = [r for r in rows if r.file == file]
        bad = [r for r in mine if not r.legible]
        illegible += len(bad)
        what = "the PatientName" if mine[0].entry is None else f"{len(mine)} name(s)"
        if not bad:
            print(f"  {file}: {what} legible; e.g. {mine[0].legibility.describe()}")
            continue
        entries = ", ".join(str(r.entry + 1) for r in bad) if args.roster else ""
        first = bad[0]
        why = (
            f"{first.refused}" if first.legibility is None
            else f"{first.legibility.describe()}; smallest that could be legible: {first.hint}"
        )  # fmt: skip
        print(
            f"  {file}: {len(bad)} of {len(mine)} NOT legible"
            + (f" (roster entries {entries})" if entries else "")
            + f"; first: {why}"
        )
    print(f"{len(rows) - illegible} of {len(rows)} legible")
    return 1 if illegible else 0
