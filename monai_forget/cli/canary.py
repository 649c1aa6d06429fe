"""``monai-forget canary inject``: burn canary text into DICOM, NIfTI or PNG files.

Parsing imports nothing but argparse; the injector (pydicom, and nibabel or Pillow on
demand) and the progress bar are imported when the command runs.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from monai_forget.cli.options import add_bundle_set_argument, positive_int

if TYPE_CHECKING:
    from monai_forget.dicom.publish import Published

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
        help="top-left pixel of the text (default %(default)s)",
    )
    size = inject.add_mutually_exclusive_group()
    size.add_argument(
        "--scale",
        type=int,
        default=1,
        help="glyph magnification: N gives 5*N-pixel rows (default %(default)s)",
    )
    size.add_argument(
        "--height-fraction",
        type=float,
        metavar="F",
        help="text height as a fraction of the image rows (largest integer scale that fits)",
    )
    inject.add_argument(
        "--font",
        help="a TrueType font instead of the 5x5 typeface, anti-aliased as viewers draw it: "
        "a .ttf/.otf file or a font matplotlib bundles (DejaVuSans, DejaVuSansMono, ...)",
    )
    inject.add_argument(
        "--font-size",
        type=positive_int,
        metavar="PX",
        help="with --font: pixels per em (default 12)",
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
    inject.add_argument(
        "--workers",
        type=positive_int,
        metavar="N",
        help="folder input: processes sharing the files (default: the CPU cores this "
        "process may use); the output is the same for any N",
    )
    from monai_forget.cli import canary_exposure

    canary_exposure.add_plant_arguments(inject)
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
    inject.add_argument(
        "--bundle",
        help="the MONAI bundle of the model the canaries are for: before anything is "
        "written, measure each canary where the model sees it (its inference "
        "preprocessing) and refuse one that is not legible there, naming the smallest "
        "scale and position that could be",
    )
    add_bundle_set_argument(inject)
    inject.add_argument(
        "--allow-illegible",
        action="store_true",
        help="with --bundle: plant a canary that is not legible at the model input anyway "
        "(the manifest records legible: false)",
    )
    inject.set_defaults(func=run_inject)
    canary_exposure.register(actions)
    from monai_forget.cli import canary_check

    canary_check.register(actions)


def run_inject(args: argparse.Namespace) -> int:
    """Handle ``canary inject``; returns the exit code.

    Nothing is written before every check has passed, including that the manifest
    can be written; the output and its manifest are then written together (signals
    are held until both are done). SIGTERM and SIGHUP stop the run like Ctrl-C,
    removing anything staged (exit code 128 + the signal number).
    """
    from monai_forget.dicom import InjectionError
    from monai_forget.dicom.staging import exit_on_terminate

    try:
        with exit_on_terminate():
            published = _inject(args)
    except (FileExistsError, FileNotFoundError):
        raise
    except OSError as err:  # e.g. a read-only output folder: one line, not a traceback
        where = f" ({err.filename})" if err.filename else ""
        raise InjectionError(f"{err.strerror or err}{where}; nothing was published") from err
    records, manifest = published.records, published.manifest
    injected = [r for r in records if r.action == "injected"]
    skipped = [r for r in records if r.action == "skipped"]
    verb = "would write" if args.dry_run else "wrote"
    print(f"{verb} {len(records) - len(skipped)} file(s), {len(injected)} with burned-in text")
    for record in injected:
        box = record.box
        font = box.font
        how = f"{font['typeface']} {font['font_size']} px" if font else f"scale {box.scale}"
        where = f"box rows {box.row}+{box.height} cols {box.col}+{box.width}"
        print(f"  {record.output}: {where}, {how}")
    if skipped:
        print(f"skipped {len(skipped)} entr{'y' if len(skipped) == 1 else 'ies'} (not written):")
        for record in skipped:
            print(f"  {record.input}: {record.reason}")
    if manifest is not None:
        print("manifest: {} and {}".format(*manifest))
    if args.bundle and injected:
        _print_legibility(injected)
    return 0


#: Canaries whose legibility a run prints (every one is measured and recorded).
LEGIBILITY_LINES = 20


def _print_legibility(injected: list) -> None:
    """Each canary's legibility at the model input, as measured before publishing."""
    import sys

    measured = [r for r in injected if r.legibility is not None]
    if not measured:
        print("legibility at the model input: not measured on a dry run of a folder "
              "(nothing is rendered)")  # fmt: skip
        return
    shown = measured[:LEGIBILITY_LINES]
    print(f"legibility at the model input ({len(shown)} of {len(measured)} canaries):")
    for record in shown:
        row = record.legibility
        verdict = "legible" if row["legible"] else "NOT legible (planted: --allow-illegible)"
        print(
            f"  {record.output}: capital {row['legibility_cap_height']:.1f} px high, shape r "
            f"{row['legibility_correlation']:.2f}, contrast {row['legibility_contrast']:.3f}: "
            f"{verdict}"
        )
    if any(not r.legibility["legible"] for r in measured):
        print("warning: illegible canaries were planted (--allow-illegible); a scan that "
              "finds nothing for them says nothing", file=sys.stderr)  # fmt: skip


def _inject(args: argparse.Namespace) -> Published:
    """The library's inject-and-publish with the command line's options and progress bar."""
    from monai_forget.dicom import TextHasher, as_options, inject_and_publish

    options = as_options(args.text, args.position, args.scale, args.height_fraction, args.frames,
                         args.font, args.font_size)  # fmt: skip
    from monai_forget.cli.canary_exposure import planted_from_args

    planted = planted_from_args(args)
    plain = args.plain_text or planted is not None
    legibility = None
    if args.bundle:
        from monai_forget.dicom.legible import LegibilityCheck
        from monai_forget.memorisation.pipeline import Preprocessing

        pre = Preprocessing.from_bundle(args.bundle, overrides=dict(args.bundle_set or ()))
        legibility = LegibilityCheck(pre, args.allow_illegible)
    hasher = TextHasher(args.salt or os.environ.get(SALT_ENV), plain_text=plain)
    run = functools.partial(
        inject_and_publish, args.input, args.output, options, hasher=hasher,
        manifest=args.manifest, overwrite=args.overwrite, dry_run=args.dry_run,
        all_files=args.all_files, canary=args.canary, planted=planted, workers=args.workers,
        legibility=legibility,
    )  # fmt: skip
    if not args.input.is_dir():
        return run()
    with _progress_bar() as bar:
        return run(**bar)


@contextlib.contextmanager
def _progress_bar() -> Iterator[dict]:
    """A progress bar for folder runs, as ``progress`` and ``report`` arguments."""
    from tqdm import tqdm

    tqdm.monitor_interval = 0  # no monitor thread: worker processes are forked from here
    with tqdm(unit="file", desc="canary inject", disable=None) as bar:

        def progress(files: list[Path]) -> Iterator[Path]:
            bar.total = len(files)
            for path in files:
                yield path
                bar.update()

        # stale staging folders are reported above the bar
        yield {"progress": progress, "report": bar.write}
