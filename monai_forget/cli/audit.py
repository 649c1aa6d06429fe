"""``monai-forget audit ks|ema``: withdrawal audit of a model file."""

from __future__ import annotations

import argparse
from pathlib import Path

from monai_forget import defaults
from monai_forget.cli.options import (
    add_model_arguments,
    add_run_arguments,
    check_labels_fit,
    load_model_from_args,
    load_set,
)


def _common(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser, "target")
    parser.add_argument("--query", required=True, help="D_Q: image folder, .npz or datalist .json")
    parser.add_argument("--query-split", help="split of a MedMNIST-layout .npz for D_Q")
    parser.add_argument("--calibration", required=True, help="D_C (shares no sample with D_Q)")
    parser.add_argument("--calibration-split", help="split of a MedMNIST-layout .npz for D_C")
    parser.add_argument(
        "--recipe",
        required=True,
        help="how the target was trained: a data-only recipe .json of SupervisedRecipe "
        'fields, e.g. {"network": "mlp", "network_args": {"in_shape": [1, 8, 8], '
        '"num_classes": 10}, "steps": 1500, "batch_size": 32} (network, network_args, '
        "epochs, steps, batch_size, learning_rate, optimizer adam|sgd, betas, momentum, "
        "weight_decay); with --trust-recipe also a MONAI bundle train config or "
        "package.module:attribute",
    )
    parser.add_argument(
        "--trust-recipe",
        action="store_true",
        help="allow a recipe that runs code (a bundle config evaluates its '$' expressions; "
        "module:attribute imports Python): trust it as you would a script",
    )
    parser.add_argument(
        "--out", required=True, help="output folder for result.json and report.html"
    )
    parser.add_argument("--label", default="", help="name of the audited scenario/provider")
    add_run_arguments(
        parser, "seed of shadow-model training and of the calibration split", batch_size=True
    )
    parser.add_argument("--cache-dir", help="cache for shadow models and predictions")
    parser.add_argument("--overwrite", action="store_true", help="replace existing outputs")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("audit", help="has a model forgotten a withdrawn data set?")
    methods = parser.add_subparsers(dest="method", required=True)
    ks = methods.add_parser("ks", help="K-S calibrated ratio (Liu & Tsaftaris 2020)")
    _common(ks)
    ema = methods.add_parser("ema", help="Ensembled Membership Auditing (Huang et al. 2021)")
    _common(ema)
    ema.add_argument(
        "--alpha",
        type=float,
        default=defaults.EMA_ALPHA,
        help="significance level: rho_EMA <= alpha means forgotten (default %(default)s)",
    )
    ema.add_argument(
        "--threshold-by",
        choices=("label", "prediction"),
        default=defaults.EMA_THRESHOLD_BY,
        help="class whose threshold applies to a sample: its true label (the paper's) or "
        "the predicted class (default %(default)s)",
    )
    ema.add_argument(
        "--test",
        choices=("welch", "student"),
        default=defaults.EMA_TEST,
        help="two-sample test of the membership vector against all-ones (default %(default)s)",
    )
    ema.add_argument(
        "--calibration-outputs",
        choices=("shadow", "target"),
        default=defaults.EMA_CALIBRATION_OUTPUTS,
        help="thresholds from a reference model trained on half of D_C (the paper's) or "
        "from the target itself (default %(default)s)",
    )
    ema.add_argument(
        "--metrics",
        default=",".join(defaults.EMA_METRICS),
        help="comma-separated membership metrics (default %(default)s)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from monai_forget.audit import EMAAuditor, KSAuditor, write_report
    from monai_forget.io import check_writable
    from monai_forget.recipes import load_recipe

    out = Path(args.out)
    result_path = check_writable(out / "result.json", args.overwrite)
    report_path = check_writable(out / "report.html", args.overwrite)
    target = load_model_from_args(args)
    query = load_set(args.query, args.query_split, "query set D_Q (--query)")
    calibration = load_set(
        args.calibration, args.calibration_split, "calibration set D_C (--calibration)"
    )
    check_labels_fit(target, {"query set D_Q": query, "calibration set D_C": calibration})
    options = {
        "recipe": load_recipe(args.recipe, allow_code=args.trust_recipe),
        "seed": args.seed,
        "device": args.device,
        "cache_dir": args.cache_dir,
        "batch_size": args.batch_size,
        "progress": True,
    }
    if args.method == "ks":
        auditor = KSAuditor(**options)
    else:
        auditor = EMAAuditor(
            **options,
            alpha=args.alpha,
            threshold_by=args.threshold_by,
            test=args.test,
            calibration_outputs=args.calibration_outputs,
            metrics=tuple(m.strip() for m in args.metrics.split(",") if m.strip()),
        )
    result = auditor.audit(target, query, calibration, label=args.label or Path(args.query).name)
    result.save(result_path, overwrite=args.overwrite)
    write_report(result, report_path, overwrite=args.overwrite)
    print(result.summary())
    print(f"result: {result_path}\nreport: {report_path}")
    return 0
