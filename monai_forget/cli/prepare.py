"""``monai-forget prepare <layout>``: dataset layouts to MONAI datalist JSON.

One sub-command per layout; all share the output, path, seed, split and provider
options. See ``data_prep/README.md`` for examples.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monai_forget.data.acdc import ACDC_GROUPS
from monai_forget.defaults import ACDC_LEVELS, ACDC_NIFTI_FRAMES
from monai_forget.io import check_writable

if TYPE_CHECKING:  # the data_prep modules import numpy, nibabel, h5py...: only when run
    from monai_forget.data_prep.sites import SiteSpec

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


def _check_output(args: argparse.Namespace) -> None:
    """Refuse an output that would replace a file or land inside the input release:
    ``prepare`` only reads its sources."""
    check_writable(args.output, args.overwrite)
    output = args.output.resolve()
    written = [output, *([args.image_dir.resolve()] if getattr(args, "image_dir", None) else [])]
    source = getattr(args, "root", None)
    if source is not None and any(source.resolve() in w.parents for w in written):
        raise ValueError(
            f"the output would be written inside the input release {source}; prepare only "
            "reads its sources: write the datalist (and any exported images) elsewhere"
        )
    npz = getattr(args, "npz", None)
    if npz is not None and npz.resolve() in written:
        raise ValueError(f"the output {args.output} is the input {npz}; write it elsewhere")


def _site_spec(args: argparse.Namespace) -> SiteSpec:
    from monai_forget.data_prep.sites import SiteSpec, parse_provider

    return SiteSpec(
        site_map=args.site_map,
        providers=tuple(parse_provider(text) for text in args.provider or ()),
        other_site=args.other_site,
        random_sites=args.random_sites,
        from_source=getattr(args, "site_from_source", False),
    )


def _fractions(args: argparse.Namespace, keyword: str | None) -> tuple[float, float, float] | None:
    """``None`` for the layout's own split keyword, else the parsed fractions."""
    from monai_forget.data_prep.splits import parse_fractions

    if keyword is not None and args.split == keyword:
        return None
    return parse_fractions(args.split)


def _names(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise ValueError(f"--label-names {text!r}: expected NAME0,NAME1,...")
    return names


def _finish(
    args: argparse.Namespace,
    samples: list[dict[str, Any]],
    *,
    keyword: str | None,
    labels: Sequence[str],
    description: str,
    provenance: dict[str, Any],
    sources: dict[str, str] | None = None,
    before_write: Callable[[], None] | None = None,
) -> int:
    """Build, check and write the datalist; print a one-line summary per split."""
    from monai_forget.data_prep.datalist import PathStyle, build_datalist, write_datalist
    from monai_forget.data_prep.splits import SPLITS

    datalist = build_datalist(
        samples,
        sites=_site_spec(args),
        fractions=_fractions(args, keyword),
        seed=args.seed,
        labels=labels,
        paths=PathStyle.for_output(args.output, args.base_dir, args.absolute),
        description=description,
        provenance={"layout": args.layout, **provenance},
        sources=sources,
    )
    if before_write is not None:
        before_write()
    write_datalist(datalist, args.output, overwrite=args.overwrite)
    counts = datalist["provenance"]["counts"]
    print(f"wrote {args.output} (providers: {datalist['provenance']['site_assignment']})")
    for name in SPLITS:
        c = counts[name]
        print(f"  {name}: {c['entries']} entries, {c['patients']} patients, sites {c['sites']}")
    overlap = datalist["provenance"]["patients_in_several_splits"]
    if overlap:
        print(
            f"  warning: {len(overlap)} patient(s) appear in several source splits; "
            "pass --split TRAIN,VAL,TEST for a patient-level split"
        )
    return 0


def _acdc_nifti(args: argparse.Namespace) -> int:
    from monai_forget.data_prep import acdc_nifti

    _check_output(args)
    samples = acdc_nifti.collect(args.root, frames=args.frames, level=args.level)
    return _finish(
        args,
        samples,
        keyword=None,
        labels=ACDC_GROUPS,
        description="ACDC cine MRI (original NIfTI release): pathology group per "
        f"{args.level}, frames {args.frames}",
        provenance={
            "source": str(Path(args.root).resolve()),
            "frames": args.frames,
            "level": args.level,
            "array_order": "nibabel (X, Y, Z[, T]); slice along slice_axis, frame_index on T",
        },
    )


def _acdc_h5(args: argparse.Namespace) -> int:
    from monai_forget.data_prep import acdc_h5

    _check_output(args)
    samples, skipped = acdc_h5.collect(args.root, level=args.level, groups_csv=args.groups)
    if args.split == "release":
        samples = acdc_h5.release_split(args.root, samples)
    if skipped:
        print(f"volume level: skipped {skipped} 2D slice files (patients without a volume)")
    return _finish(
        args,
        samples,
        keyword="release",
        labels=ACDC_GROUPS,
        description=f"ACDC cine MRI (SSL4MIS h5 release): pathology group per {args.level}",
        provenance={
            "source": str(Path(args.root).resolve()),
            "level": args.level,
            "h5_keys": acdc_h5.H5_KEYS,
            "phases": "frame01 = ED, frame02 = ES",
            "skipped_2d_files": skipped,
        },
    )


def _medmnist(args: argparse.Namespace) -> int:
    from monai_forget.data_prep import medmnist

    _check_output(args)
    medmnist.check_image_dir(args.image_dir, args.overwrite)
    names = _names(args.label_names) or medmnist.PNEUMONIA_LABELS
    samples = medmnist.collect(args.npz, args.image_dir, names, args.keep_repeats)
    repeats = {} if args.keep_repeats else medmnist.repeated_images(args.npz)
    if repeats:
        print(
            f"left out {len(repeats)} images that repeat another image pixel for pixel "
            "(kept the held-out copy; --keep-repeats keeps them)"
        )
    return _finish(
        args,
        samples,
        keyword="source",
        labels=names,
        description=f"MedMNIST {Path(args.npz).stem} exported to PNG",
        provenance={
            "source": str(Path(args.npz).resolve()),
            "image_dir": str(Path(args.image_dir).resolve()),
            "patients": "none recorded by MedMNIST: one patient per image",
            "repeats_left_out": repeats,
        },
        before_write=lambda: print(
            f"exported {medmnist.export_pngs(args.npz, args.image_dir, args.overwrite)} "
            f"PNGs to {args.image_dir}"
        ),
    )


def _kermany(args: argparse.Namespace) -> int:
    from monai_forget.data_prep import kermany

    _check_output(args)
    samples = kermany.collect(args.root, patient_regex=args.patient_regex)
    return _finish(
        args,
        samples,
        keyword="source",
        labels=kermany.LABEL_NAMES,
        description="Kermany pediatric chest X-ray (normal vs pneumonia)",
        provenance={"source": str(Path(args.root).resolve()), "patients": "from file names"},
    )


def _covidx(args: argparse.Namespace) -> int:
    from monai_forget.data_prep import covidx

    _check_output(args)
    samples, names = covidx.collect(args.root, label_names=_names(args.label_names))
    return _finish(
        args,
        samples,
        keyword="source",
        labels=names,
        description="COVIDx chest X-ray",
        provenance={"source": str(Path(args.root).resolve())},
        sources=covidx.patient_sources(samples),
    )


def _rsna(args: argparse.Namespace) -> int:
    from monai_forget.data_prep import rsna

    _check_output(args)
    samples = rsna.collect(args.root)
    return _finish(
        args,
        samples,
        keyword=None,
        labels=rsna.LABEL_NAMES,
        description="RSNA Pneumonia Detection Challenge (stage 2 train): lung opacity",
        provenance={"source": str(Path(args.root).resolve())},
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
    p.add_argument(
        "--level",
        choices=ACDC_LEVELS,
        default="slice",
        help="an entry per short-axis slice or per volume (default %(default)s)",
    )
    _common(p, DEFAULT_FRACTIONS, None)
    p.set_defaults(func=_acdc_nifti)

    p = layouts.add_parser("acdc-h5", help="ACDC SSL4MIS h5 release")
    p.add_argument("root", type=Path, help="release folder holding data/ and groups.csv")
    p.add_argument("--groups", type=Path, help="groups CSV (default ROOT/groups.csv)")
    p.add_argument(
        "--level",
        choices=ACDC_LEVELS,
        default="slice",
        help="an entry per 2D slice or per 3D volume file (default %(default)s)",
    )
    _common(p, DEFAULT_FRACTIONS, "release")
    p.set_defaults(func=_acdc_h5)

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
    p.set_defaults(func=_medmnist)

    p = layouts.add_parser("kermany", help="Kermany chest_xray/{train,val,test}/{NORMAL,PNEUMONIA}")
    p.add_argument("root", type=Path, help="the chest_xray folder")
    p.add_argument("--patient-regex", help="regex with a (?P<patient>...) group for file stems")
    _common(p, "source", "source")
    p.set_defaults(func=_kermany)

    p = layouts.add_parser("covidx", help="COVIDx CXR label files + image folders")
    p.add_argument("root", type=Path, help="folder with {train,val,test}.txt and image folders")
    p.add_argument("--label-names", help="class names by index (default: known COVIDx order)")
    p.add_argument(
        "--site-from-source", action="store_true", help="provider = the label file's source column"
    )
    _common(p, "source", "source")
    p.set_defaults(func=_covidx)

    p = layouts.add_parser("rsna", help="RSNA pneumonia DICOM + stage_2_train_labels.csv")
    p.add_argument("root", type=Path, help="folder with stage_2_train_images/ and the labels CSV")
    _common(p, DEFAULT_FRACTIONS, None)
    p.set_defaults(func=_rsna)
