"""``monai-forget prepare <layout>``: dataset layouts to MONAI datalist JSON.

One sub-command per layout; all share the output, path, seed, split and provider
options (built here); the handlers are in :mod:`monai_forget.cli.prepare_layouts`, the
datalist they all write in :mod:`monai_forget.cli.prepare_output`. See
``data_prep/README.md`` for examples.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from monai_forget.cli import prepare_layouts as handlers
from monai_forget.defaults import ACDC_LEVELS, ACDC_NIFTI_FRAMES

DEFAULT_FRACTIONS = "0.7,0.1,0.2"


def _common(parser: argparse.ArgumentParser, split_default: str, split_keyword: str | None) -> None:
    out = parser.add_argument_group("output")
    out.add_argument("-o", "--output", required=True, type=Path, help="datalist JSON to write")
    paths = out.add_mutually_exclusive_group()
    paths.add_argument(
        "--base-dir",
        type=Path,
        help="write image paths relative to this folder (default: the output's folder, "
        "which is also load_decathlon_datalist's default base_dir)",
    )
    paths.add_argument("--absolute", action="store_true", help="write absolute image paths")
    out.add_argument("--overwrite", action="store_true", help="replace existing outputs")
    split_help = "TRAIN,VAL,TEST patient fractions for a seeded patient-level split"
    if split_keyword:
        split_help += f", or '{split_keyword}' to keep the dataset's own split"
    out.add_argument("--split", default=split_default, help=f"{split_help} (default %(default)s)")
    out.add_argument(
        "--seed", type=int, default=0, help="seed of random splits (default %(default)s)"
    )

    sites = parser.add_argument_group(
        "providers (default: one provider 'all')",
        "ACDC does not record field strength: a 1.5 T / 3 T split needs --site-map "
        "from the data owner; --provider and --random-sites are labelled as such.",
    )
    sites.add_argument("--site-map", type=Path, help="CSV with columns patient,site")
    sites.add_argument(
        "--provider",
        action="append",
        metavar="NAME=P1,P2,...|NAME=@FILE",
        help="explicit provider (repeatable); FILE lists one patient per line",
    )
    sites.add_argument("--other-site", help="with --provider: provider of every unlisted patient")
    sites.add_argument(
        "--random-sites",
        type=int,
        metavar="N",
        help="N seeded random providers, stratified by class (NOT field strength)",
    )


def _level(parser: argparse.ArgumentParser, text: str) -> None:
    """ACDC's ``--level``: an entry per slice (default) or per volume."""
    parser.add_argument(
        "--level", choices=ACDC_LEVELS, default="slice", help=f"{text} (default %(default)s)"
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``prepare`` and its layout sub-commands."""
    parser = subparsers.add_parser(
        "prepare",
        help="turn a dataset layout into a MONAI datalist JSON",
        description="Turn a dataset layout into a MONAI datalist JSON with per-sample "
        "provenance. Source files are only read.",
    )
    layouts = parser.add_subparsers(dest="layout", required=True)

    p = layouts.add_parser("acdc-nifti", help="ACDC original release (NIfTI + Info.cfg)")
    p.add_argument("root", type=Path, help="ACDC folder (holding training/ or patientNNN/)")
    p.add_argument(
        "--frames",
        choices=ACDC_NIFTI_FRAMES,
        default="ed-es",
        help="ED/ES frames only, or every frame of the 4D file (default %(default)s)",
    )
    _level(p, "an entry per short-axis slice or per volume")
    _common(p, DEFAULT_FRACTIONS, None)
    p.set_defaults(func=handlers.run_acdc_nifti)

    p = layouts.add_parser("acdc-h5", help="ACDC SSL4MIS h5 release")
    p.add_argument("root", type=Path, help="release folder holding data/ and groups.csv")
    p.add_argument("--groups", type=Path, help="groups CSV (default ROOT/groups.csv)")
    _level(p, "an entry per 2D slice or per 3D volume file")
    p.add_argument(
        "--dicom-dir",
        type=Path,
        help="write every slice as a 12-bit DICOM MR file under DIR/<patient>/frameFF/ (a "
        "series per folder, as a hospital's pipeline reads them) and point the datalist at them",
    )
    _common(p, DEFAULT_FRACTIONS, "release")
    p.set_defaults(func=handlers.run_acdc_h5)

    p = layouts.add_parser("medmnist", help="MedMNIST npz (PneumoniaMNIST layout)")
    p.add_argument("npz", type=Path, help="the .npz file")
    p.add_argument("--image-dir", required=True, type=Path, help="folder for the exported PNGs")
    p.add_argument("--label-names", help="class names by index (default normal,pneumonia)")
    p.add_argument(
        "--keep-repeats",
        action="store_true",
        help="keep every copy of an image that repeats another pixel for pixel (default: "
        "one copy, the held-out one)",
    )
    _common(p, "source", "source")
    p.set_defaults(func=handlers.run_medmnist)

    p = layouts.add_parser("kermany", help="Kermany chest_xray/{train,val,test}/{NORMAL,PNEUMONIA}")
    p.add_argument("root", type=Path, help="the chest_xray folder")
    p.add_argument("--patient-regex", help="regex with a (?P<patient>...) group for file stems")
    _common(p, "source", "source")
    p.set_defaults(func=handlers.run_kermany)

    p = layouts.add_parser("covidx", help="COVIDx CXR label files + image folders")
    p.add_argument("root", type=Path, help="folder with {train,val,test}.txt and image folders")
    p.add_argument("--label-names", help="class names by index (default: known COVIDx order)")
    p.add_argument(
        "--site-from-source", action="store_true", help="provider = the label file's source column"
    )
    _common(p, "source", "source")
    p.set_defaults(func=handlers.run_covidx)

    p = layouts.add_parser("rsna", help="RSNA pneumonia DICOM + stage_2_train_labels.csv")
    p.add_argument("root", type=Path, help="folder with stage_2_train_images/ and the labels CSV")
    _common(p, DEFAULT_FRACTIONS, None)
    p.set_defaults(func=handlers.run_rsna)
