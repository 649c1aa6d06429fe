"""``monai-forget canary inject --random-canaries`` and ``canary exposure``: a pipeline's
exposure audit (Carlini et al.'s Secret Sharer, in images).

Plant random canaries into the training images with the injector, train the pipeline,
then rank each planted canary among never-planted canaries of its space, burned into the
probes where the manifest says and passed through the bundle's preprocessing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from monai_forget.cli.options import (
    add_bundle_set_argument,
    add_model_arguments,
    add_run_arguments,
    parameter_type,
    positive_int,
    text_value,
)
from monai_forget.defaults import (
    EXPOSURE_STATISTIC,
    LEAK_SCAN_ALPHA,
    LEAK_SCAN_CORRECTIONS,
    LEAK_SCAN_STATISTICS,
)


def add_plant_arguments(inject: argparse.ArgumentParser) -> None:
    """Add ``canary inject``'s options that plant random canaries."""
    plant = inject.add_argument_group(
        "random canaries (for canary exposure)",
        "plant K random texts per --copies count, each into that many images of one folder; "
        "the manifest records them in plain text",
    )
    plant.add_argument(
        "--random-canaries",
        type=positive_int,
        metavar="K",
        help="folder input: canaries per --copies count (instead of --text)",
    )
    plant.add_argument(
        "--copies",
        type=positive_int,
        nargs="+",
        default=[10],
        metavar="N",
        help="images carrying each canary; several counts plant K canaries at each "
        "(default %(default)s)",
    )
    plant.add_argument(
        "--canary-space",
        default="AAAAA",
        metavar="TEMPLATE",
        help="the randomness space: A a capital letter, a a small one, 0 a digit; at least "
        "10^6 texts (default %(default)s: 26^5)",
    )
    plant.add_argument(
        "--copies-from",
        choices=("folder", "tree"),
        default="folder",
        help="a canary's copies all in one folder (a series) or anywhere (default %(default)s)",
    )
    plant.add_argument(
        "--seed",
        type=int,
        default=0,
        help="draws the canaries and their files (default %(default)s)",
    )


def planted_from_args(args: argparse.Namespace) -> dict[str, str] | None:
    """Each planted file with its canary, or ``None`` without ``--random-canaries``."""
    if not args.random_canaries:
        return None
    if args.canary or args.all_files or args.text:
        raise ValueError("--random-canaries draws the texts and files: drop --text/--canary/--all")
    from monai_forget.dicom.plant import plan_canaries

    plan = plan_canaries(
        args.input,
        args.random_canaries,
        args.copies,
        space=args.canary_space,
        seed=args.seed,
        copies_from=args.copies_from,
    )
    listed = ", ".join(f"{text} x{n}" for text, n in plan.copies().items())
    print(f"planting {len(plan.files)} canaries from the space {plan.space}: {listed}")
    return plan.planted()


def register(actions: argparse._SubParsersAction) -> None:
    """Add ``canary exposure``."""
    parser = actions.add_parser(
        "exposure",
        help="rank planted random canaries among never-planted ones, through the bundle",
        description=(
            "Each canary that canary inject --random-canaries planted is burned into the "
            "probes where the manifest says, passed through the bundle's preprocessing and "
            "ranked among never-planted canaries of its space: its exposure in bits "
            "(Carlini et al. 2019), a decision per canary and one for the pipeline. Writes "
            "exposure.json and exposure.png."
        ),
    )
    add_model_arguments(parser, "trained")
    parser.add_argument("--bundle", required=True, help="the model's MONAI bundle")
    add_bundle_set_argument(parser)
    parser.add_argument(
        "--probes", required=True, help="folder of out-of-distribution images the bundle reads"
    )
    parser.add_argument(
        "--canary-manifest", required=True, help="the .manifest.json of the planting run"
    )
    parser.add_argument(
        "--datalist",
        help="the MONAI datalist (JSON) the model was trained on: the planted files must be "
        "in it for the audit to say 'no evidence' (without it, or when files are missing, it "
        "says it cannot tell)",
    )
    parser.add_argument(
        "--datalist-key",
        default="training",
        help="the datalist's list the model trained on (default %(default)s)",
    )
    parser.add_argument(
        "--value",
        type=text_value,
        default="max",
        help="pixel value of the canaries on the probes, as the injector burned them: max "
        "(each image's white, the injector's rule for DICOM without a window) or a number "
        "(255 for 8-bit PNG) (default %(default)s)",
    )
    parser.add_argument(
        "--statistic",
        choices=LEAK_SCAN_STATISTICS,
        default=EXPOSURE_STATISTIC,
        help="what canaries are ranked by (default %(default)s, the one that found planted "
        "canaries more often: docs/memorisation.md)",
    )
    parser.add_argument(
        "--never-planted",
        type=positive_int,
        help="never-planted canaries to rank among (default: at least 999)",
    )
    parser.add_argument("--decoy-seed", type=int, help="seed of the never-planted canaries")
    parser.add_argument(
        "--correction",
        choices=LEAK_SCAN_CORRECTIONS,
        default=LEAK_SCAN_CORRECTIONS[0],
        help="over the planted canaries (default %(default)s)",
    )
    parser.add_argument(
        "--alpha",
        type=parameter_type("alpha"),
        default=LEAK_SCAN_ALPHA,
        help="level (default %(default)s)",
    )
    add_run_arguments(parser, "seed of the random controls", batch_size=True, batch_by_device=True)
    parser.add_argument("--out", required=True, help="folder for exposure.json and exposure.png")
    parser.add_argument("--overwrite", action="store_true", help="replace existing outputs")
    parser.set_defaults(func=run_exposure)


def run_exposure(args: argparse.Namespace) -> int:
    """Handle ``canary exposure``; returns the exit code."""
    from monai_forget.cli.options import load_model_from_args
    from monai_forget.dicom.manifest import manifest_canaries, manifest_placement
    from monai_forget.io import check_writable
    from monai_forget.memorisation import LeakScanConfig
    from monai_forget.memorisation.exposure import canary_exposure, planted_in_training
    from monai_forget.memorisation.exposure_report import (
        JSON_NAME,
        PNG_NAME,
        write_exposure_report,
    )
    from monai_forget.memorisation.pipeline import PipelineProbes

    out = Path(args.out)
    for name in (JSON_NAME, PNG_NAME):
        check_writable(out / name, args.overwrite)
    canaries = manifest_canaries(args.canary_manifest)
    placement = manifest_placement(args.canary_manifest)
    training = None
    if args.datalist:
        training = planted_in_training(args.canary_manifest, args.datalist, args.datalist_key)
    model = load_model_from_args(args)
    probes = PipelineProbes.from_bundle(args.bundle, args.probes, dict(args.bundle_set or ()))
    config = LeakScanConfig(
        position=placement["position"],
        scale=placement["scale"],
        font=placement["font"],
        font_size=placement["font_size"],
        value=args.value,
        decoys=args.never_planted,
        decoy_seed=args.decoy_seed,
        correction=args.correction,
        alpha=args.alpha,
        statistic=args.statistic,
        seed=args.seed,
        batch_size=args.batch_size,
        device=args.device,
    )
    audit = canary_exposure(model, probes, canaries, config, training=training, progress=True)
    json_path, png_path = write_exposure_report(audit, out, overwrite=args.overwrite)
    print(audit.summary())
    print(f"result: {json_path}\nfigure: {png_path}")
    return 0
