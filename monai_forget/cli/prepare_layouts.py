"""The ``monai-forget prepare <layout>`` handlers: each collects its layout's samples
(``monai_forget.data_prep``) and hands them to :func:`~monai_forget.cli.prepare_output.finish`."""

from __future__ import annotations

import argparse
from pathlib import Path

from monai_forget.cli.prepare_output import check_output, finish, label_names
from monai_forget.data.acdc import ACDC_GROUPS


def run_acdc_nifti(args: argparse.Namespace) -> int:
    from monai_forget.data_prep import acdc_nifti

    check_output(args)
    samples = acdc_nifti.collect(args.root, frames=args.frames, level=args.level)
    return finish(
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


def run_acdc_h5(args: argparse.Namespace) -> int:
    from monai_forget.data_prep import acdc_h5

    check_output(args)
    samples, skipped = acdc_h5.collect(args.root, level=args.level, groups_csv=args.groups)
    if args.split == "release":
        samples = acdc_h5.release_split(args.root, samples)
    if skipped:
        print(f"volume level: skipped {skipped} 2D slice files (patients without a volume)")
    export = None
    if args.dicom_dir is not None:
        from monai_forget.data_prep import acdc_dicom

        acdc_dicom.check_dicom_dir(args.dicom_dir)
        sources, samples = samples, acdc_dicom.dicom_samples(samples, args.dicom_dir)

        def export() -> None:
            count = acdc_dicom.export_dicom(sources, args.dicom_dir)
            print(f"exported {count} slices as 12-bit DICOM MR files to {args.dicom_dir}")

    return finish(
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
            **({"dicom_dir": str(args.dicom_dir.resolve())} if args.dicom_dir else {}),
        },
        before_write=export,
    )


def run_medmnist(args: argparse.Namespace) -> int:
    from monai_forget.data_prep import medmnist

    check_output(args)
    medmnist.check_image_dir(args.image_dir, args.overwrite)
    names = label_names(args.label_names) or medmnist.PNEUMONIA_LABELS
    samples = medmnist.collect(args.npz, args.image_dir, names, args.keep_repeats)
    repeats = {} if args.keep_repeats else medmnist.repeated_images(args.npz)
    if repeats:
        print(
            f"left out {len(repeats)} images that repeat another image pixel for pixel "
            "(kept the held-out copy; --keep-repeats keeps them)"
        )
    return finish(
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


def run_kermany(args: argparse.Namespace) -> int:
    from monai_forget.data_prep import kermany

    check_output(args)
    samples = kermany.collect(args.root, patient_regex=args.patient_regex)
    return finish(
        args,
        samples,
        keyword="source",
        labels=kermany.LABEL_NAMES,
        description="Kermany pediatric chest X-ray (normal vs pneumonia)",
        provenance={"source": str(Path(args.root).resolve()), "patients": "from file names"},
    )


def run_covidx(args: argparse.Namespace) -> int:
    from monai_forget.data_prep import covidx

    check_output(args)
    samples, names = covidx.collect(args.root, label_names=label_names(args.label_names))
    return finish(
        args,
        samples,
        keyword="source",
        labels=names,
        description="COVIDx chest X-ray",
        provenance={"source": str(Path(args.root).resolve())},
        sources=covidx.patient_sources(samples),
    )


def run_rsna(args: argparse.Namespace) -> int:
    from monai_forget.data_prep import rsna

    check_output(args)
    samples = rsna.collect(args.root)
    return finish(
        args,
        samples,
        keyword=None,
        labels=rsna.LABEL_NAMES,
        description="RSNA Pneumonia Detection Challenge (stage 2 train): lung opacity",
        provenance={"source": str(Path(args.root).resolve())},
    )
