"""``monai-forget canary inject``: burn canary text into DICOM, NIfTI or PNG files.

Parsing imports nothing but argparse; the injector (pydicom, and nibabel or Pillow on
demand) and the progress bar are imported when the command runs.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from monai_forget.cli.options import positive_int

if TYPE_CHECKING:
    from monai_forget.dicom import ManifestRecord, TextHasher

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
    inject.add_argument(
        "--workers",
        type=positive_int,
        metavar="N",
        help="folder input: processes sharing the files (default: the CPU cores this "
        "process may use); the output is the same for any N",
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
    """Handle ``canary inject``; returns the exit code.

    Nothing is written before every check has passed, including that the manifest
    can be written; the output and its manifest are then written together (signals
    are held until both are done). SIGTERM and SIGHUP stop the run like Ctrl-C,
    removing anything staged (exit code 128 + the signal number).
    """
    from monai_forget.dicom import InjectionError
    from monai_forget.dicom.staging import exit_on_terminate

    if args.canary is not None and args.all_files:
        raise ValueError("--canary and --all are mutually exclusive")
    if not args.input.is_dir() and (args.canary is not None or args.all_files):
        raise ValueError("--canary and --all apply to folder inputs only")
    try:
        with exit_on_terminate():
            records, manifest = _inject(args)
    except (FileExistsError, FileNotFoundError):
        raise
    except OSError as err:  # e.g. a read-only output folder: one line, not a traceback
        where = f" ({err.filename})" if err.filename else ""
        raise InjectionError(f"{err.strerror or err}{where}; nothing was published") from err
    injected = [r for r in records if r.action == "injected"]
    skipped = [r for r in records if r.action == "skipped"]
    verb = "would write" if args.dry_run else "wrote"
    print(f"{verb} {len(records) - len(skipped)} file(s), {len(injected)} with burned-in text")
    for record in injected:
        box = record.box
        print(
            f"  {record.output}: box rows {box.row}+{box.height} "
            f"cols {box.col}+{box.width}, scale {box.scale}"
        )
    if skipped:
        print(f"skipped {len(skipped)} entr{'y' if len(skipped) == 1 else 'ies'} (not written):")
        for record in skipped:
            print(f"  {record.input}: {record.reason}")
    if manifest is not None:
        print("manifest: {} and {}".format(*manifest))
    return 0


def _inject(args: argparse.Namespace) -> tuple[list[ManifestRecord], tuple[Path, Path] | None]:
    """Check, stage and publish; returns the records and the manifest paths (if written)."""
    from monai_forget.dicom import (
        TextHasher,
        as_options,
        check_manifest_target,
        inject_tree,
        manifest_paths,
        stage_tree,
    )
    from monai_forget.dicom.driver import check_not_input, prepare
    from monai_forget.dicom.manifest import probe_folder
    from monai_forget.processes import available_cores

    options = as_options(args.text, args.position, args.scale, args.height_fraction, args.frames)
    hasher = TextHasher(args.salt or os.environ.get(SALT_ENV), plain_text=args.plain_text)
    prefix = args.manifest or args.output
    if args.input.is_dir():
        if args.input.resolve() in Path(prefix).resolve().parents:
            raise ValueError("the manifest would be written inside the input folder")
        output = args.output
    else:
        output = args.output / args.input.name if args.output.is_dir() else args.output
        for path in manifest_paths(prefix):
            check_not_input(args.input, path)
    if not args.dry_run:
        check_manifest_target(prefix, args.overwrite)
        probe_folder(output, "output")

    if args.input.is_dir():
        tree = {
            "all_files": args.all_files,
            "canary": args.canary,
            "hasher": hasher,
            "workers": args.workers or available_cores(),
        }
        with _progress_bar() as bar:
            if args.dry_run:
                return inject_tree(args.input, output, options, dry_run=True, **tree, **bar), None
            staged = stage_tree(
                args.input, output, options, overwrite=args.overwrite, **tree, **bar
            )
        with staged:
            return staged.records, _publish(staged.publish, staged.records, prefix, args, hasher)
    prepared = prepare(args.input, output, options, overwrite=args.overwrite, hasher=hasher)
    if args.dry_run:
        return [prepared.record.replace(output_sha256="")], None
    write = functools.partial(prepared.write, args.overwrite)
    return [prepared.record], _publish(write, [prepared.record], prefix, args, hasher)


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


def _publish(
    write: Callable[[], object],
    records: list[ManifestRecord],
    prefix: Path,
    args: argparse.Namespace,
    hasher: TextHasher,
) -> tuple[Path, Path]:
    """Write the output and its manifest with signals held until both are done."""
    from monai_forget.dicom import write_manifest
    from monai_forget.dicom.staging import signals_deferred

    with signals_deferred():
        write()
        return write_manifest(records, prefix, hasher, overwrite=args.overwrite)
