"""Speed of the DICOM canary injector and of the command line's start-up, side by side.

Data: copies of pydicom's bundled real CT_small / MR_small slices with fresh UIDs, in a
temporary folder (nothing is copied into the repository). Baseline: a plain Python loop
that reads each file with pydicom, stamps a 5x5 block at the image maximum and saves it
(``benchmarks/_plain_dicom_loop.py``, importing pydicom only). Measured in one run, the compared
commands taking turns (rounds in rotating order; medians; the 1-minute load average
before each run recorded):

1. whole process, over 300 and over 30 files: the plain loop vs ``python -m monai_forget
   canary inject IN OUT --all --text "JOHN DOE" --workers N`` for N = 1 and 2;
2. per file, in one process (start-up excluded): the plain loop vs ``inject_tree(...,
   all_files=True, workers=N)`` over the 300 files;
3. start-up: a single-file ``canary inject`` and ``monai-forget --help`` (whole process).

Targets (issue 14): folder mode over 300 files <= 1.2x the plain loop (whole process);
single-file inject <= 1.5 s; ``--help`` <= 1 s.

Usage: ``python benchmarks/dicom_injector.py [--rounds 5] [--max-load 2.5] [--out FILE]``
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import pydicom
from pydicom.data import get_testdata_file
from pydicom.uid import generate_uid

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's package
from _markdown import log, say, write
from _plain_dicom_loop import plain_loop
from _timing import Timing, add_arguments, interleaved, machine, process, verdict, wait_options

from monai_forget.dicom import BurnInOptions, TextHasher, inject_tree

TEXT = "JOHN DOE"


def write_copies(n: int, out: Path) -> None:
    """``n`` copies of pydicom's CT_small / MR_small, alternating, with fresh UIDs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sources = [get_testdata_file(name) for name in ("CT_small.dcm", "MR_small.dcm")]
    out.mkdir(parents=True)
    for i in range(n):
        ds = pydicom.dcmread(sources[i % 2])
        ds.SOPInstanceUID = generate_uid()
        ds.file_meta.MediaStorageSOPInstanceUID = ds.SOPInstanceUID
        ds.save_as(out / f"{i:05d}.dcm", enforce_file_format=True)


def inject(src: Path, dst: Path, workers: int) -> None:
    options = BurnInOptions(text=TEXT)
    hasher = TextHasher(plain_text=True)
    inject_tree(src, dst, options, all_files=True, hasher=hasher, workers=workers)


def clean(work: Path) -> None:
    for path in work.glob("out*"):
        shutil.rmtree(path) if path.is_dir() else path.unlink()


def whole_process(src: Path, work: Path, rounds: int, **wait: float) -> dict[str, Timing]:
    command = ["-m", "monai_forget", "canary", "inject", str(src)]
    baseline = str(Path(__file__).resolve().parent / "_plain_dicom_loop.py")
    runs = {"plain": process([baseline, str(src), str(work / "out_plain")])}
    for n in (1, 2):
        out = str(work / f"out_w{n}")
        runs[f"w{n}"] = process([*command, out, "--all", "--text", TEXT, "--workers", str(n)])
    return interleaved(runs, rounds, after=lambda _: clean(work), log=log, **wait)


def per_file(src: Path, work: Path, rounds: int, **wait: float) -> dict[str, Timing]:
    runs = {
        "plain": lambda: plain_loop(src, work / "out_plain"),
        "w1": lambda: inject(src, work / "out_w1", 1),
        "w2": lambda: inject(src, work / "out_w2", 2),
    }
    return interleaved(runs, rounds, after=lambda _: clean(work), log=log, **wait)


def start_up(src: Path, work: Path, rounds: int, **wait: float) -> dict[str, Timing]:
    single = ["canary", "inject", str(next(src.iterdir())), str(work / "out.dcm")]
    runs = {
        "help": process(["-m", "monai_forget", "--help"]),
        "single": process(["-m", "monai_forget", *single, "--text", TEXT]),
    }
    return interleaved(runs, rounds, after=lambda _: clean(work), log=log, **wait)


def ratio_rows(label: str, n: int, t: dict[str, Timing], per: float = 1.0) -> list[str]:
    unit = "ms/file" if per != 1.0 else "s"
    rows = []
    for name in ("w1", "w2"):
        ratio = t[name].median / t["plain"].median
        rows.append(
            f"| {label} | {n} | {t['plain'].median * per:.2f} {unit} | "
            f"{name[1]} | {t[name].median * per:.2f} {unit} | **{ratio:.2f}x** | "
            f"{t['plain'].load} / {t[name].load} |"
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser, rounds=5)
    args = parser.parse_args()
    wait = wait_options(args)

    say("## DICOM injector and command-line start-up (issue 14)\n")
    say(
        f"`python benchmarks/dicom_injector.py --rounds {args.rounds}` · pydicom "
        f"{pydicom.__version__}, {machine()}\n"
    )
    with tempfile.TemporaryDirectory(prefix="injector-bench-") as tmp:
        work = Path(tmp)
        trees = {n: work / f"in{n}" for n in (300, 30)}
        for n, path in trees.items():
            write_copies(n, path)
        plain_loop(trees[300], work / "out_warm")  # warm the page cache
        clean(work)
        log("whole process ...")
        whole = {n: whole_process(trees[n], work, args.rounds, **wait) for n in trees}
        log("per file ...")
        files = per_file(trees[300], work, args.rounds, **wait)
        log("start-up ...")
        start = start_up(trees[30], work, args.rounds, **wait)

    say(
        "Plain loop: pydicom read, 5x5 block, save. Injector: `canary inject --all` "
        "(decode, burn-in at the displayed white, re-encode, derived-image tags, "
        "atomic write into a staging folder published by one rename, sha256, manifest). "
        f"Median of {args.rounds} interleaved rounds; load: 1-minute load average "
        "before the runs (plain / injector), median (max).\n"
    )
    say("| measurement | files | plain loop | workers | injector | ratio | load |")
    say("|---|---|---|---|---|---|---|")
    for n in (300, 30):
        for row in ratio_rows("whole process", n, whole[n]):
            say(row)
    for row in ratio_rows("per file (one process)", 300, files, per=1000 / 300):
        say(row)
    say("")
    help_s, single_s = start["help"].median, start["single"].median
    best = min(whole[300][w].median for w in ("w1", "w2")) / whole[300]["plain"].median
    w2 = whole[300]["w2"].median / whole[300]["plain"].median
    w1 = whole[300]["w1"].median / whole[300]["plain"].median
    say("| target | measured | verdict |")
    say("|---|---|---|")
    say(
        f"| folder mode, 300 files, whole process <= 1.2x the plain loop | "
        f"{w2:.2f}x with 2 workers (the default here), {w1:.2f}x with 1 | "
        f"{verdict(best <= 1.2)} (2 workers: {verdict(w2 <= 1.2)}, "
        f"1 worker: {verdict(w1 <= 1.2)}) |"
    )
    say(
        f"| single-file `canary inject` <= 1.5 s | {single_s:.2f} s "
        f"(load {start['single'].load}) | {verdict(single_s <= 1.5)} |"
    )
    say(
        f"| `monai-forget --help` <= 1 s | {help_s:.2f} s (load {start['help'].load}) | "
        f"{verdict(help_s <= 1.0)} |"
    )
    if args.out:
        write(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
