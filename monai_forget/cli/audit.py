"""``monai-forget audit refmodel|ks|ema``: withdrawal audit of a model file (the auditors
of :mod:`monai_forget.auditor_registry`, one sub-command each).

Exit codes (for pipelines): 0 forgotten, 3 not forgotten, 4 inconclusive (reference
models only), 2 a usage error.
"""

from __future__ import annotations

import argparse

from monai_forget import defaults
from monai_forget.auditor_registry import AUDITORS, NAMES, RENAMED
from monai_forget.cli.audit_run import EXIT_CODES, run
from monai_forget.cli.options import (
    add_model_arguments,
    add_recipe_arguments,
    add_run_arguments,
    parameter_type,
    positive_int,
)

__all__ = ["EXIT_CODES", "register", "run"]


def _common(parser: argparse.ArgumentParser, calibration: bool) -> None:
    add_model_arguments(parser, "target")
    parser.add_argument("--query", required=True, help="D_Q: image folder, .npz or datalist .json")
    parser.add_argument("--query-split", help="split of a MedMNIST-layout .npz for D_Q")
    if calibration:
        parser.add_argument("--calibration", required=True, help="D_C (shares no sample with D_Q)")
        parser.add_argument("--calibration-split", help="split of a MedMNIST-layout .npz for D_C")
    add_recipe_arguments(parser)
    parser.add_argument(
        "--out", required=True, help="output folder for result.json and report.html"
    )
    parser.add_argument(
        "--label",
        help="name of the audited scenario/provider (default: the --query file's name)",
    )
    add_run_arguments(
        parser, "seed of the reference/shadow models and of any split", batch_size=True
    )
    parser.add_argument("--cache-dir", help="cache for reference/shadow models and predictions")
    parser.add_argument("--overwrite", action="store_true", help="replace existing outputs")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the decision and its statistics as one JSON object (for pipelines)",
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "audit",
        help="has a model forgotten a withdrawn data set?",
        description="Withdrawal audit of a model file. Exit codes: 0 forgotten, 3 not "
        "forgotten, 4 inconclusive, 2 usage error.",
    )
    methods = parser.add_subparsers(
        dest="method", required=True, metavar="{" + ",".join((*NAMES, "verify")) + "}"
    )
    for kind in AUDITORS:
        sub = methods.add_parser(
            kind.name, help=kind.summary, description=DESCRIPTIONS.get(kind.name, kind.summary)
        )
        _common(sub, calibration=kind.calibration == "whole")
        OPTIONS[kind.name](sub)
    for old in RENAMED:  # refused with the name to use (audit_run.run)
        retired = methods.add_parser(old, add_help=False, prefix_chars="\0")
        retired.add_argument("given", nargs="*", help=f"renamed: use {RENAMED[old]}")
    parser.set_defaults(func=run)
    from monai_forget.cli import audit_verify

    audit_verify.register(methods)


#: What ``audit NAME --help`` says beyond the registry's one line.
DESCRIPTIONS = {
    "refmodel": "Score D_Q against reference models trained by the recipe on data that "
    "never includes it (RMIA offline), test it against the target's known non-members, "
    "bound D_Q's membership strength relative to the known members (0 %% like never-seen "
    "data, 100 %% like the members), and decide: not forgotten (evidence of "
    "remembering), forgotten (the bound is below --margin) or inconclusive (with what "
    "is short).",
}


def _refmodel_options(ref: argparse.ArgumentParser) -> None:
    ref.add_argument(
        "--members", required=True, help="samples the target is known to have trained on"
    )
    ref.add_argument("--members-split", help="split of a MedMNIST-layout .npz")
    ref.add_argument(
        "--nonmembers", required=True, help="samples the target is known never to have seen"
    )
    ref.add_argument("--nonmembers-split", help="split of a MedMNIST-layout .npz")
    ref.add_argument(
        "--population",
        help="data for training the reference models (default: half of --members and of "
        "--nonmembers; the other halves are scored)",
    )
    ref.add_argument("--population-split", help="split of a MedMNIST-layout .npz")
    ref.add_argument(
        "--site-images",
        help="other images of D_Q's site (not D_Q; e.g. the site's retained data): the audit "
        "also runs online reference models that train on them and answers where both "
        "designs agree, so a site the target knows is not read as remembering "
        "(docs/reference_auditor.md)",
    )
    ref.add_argument("--site-images-split", help="split of a MedMNIST-layout .npz")
    ref.add_argument(
        "--group-pattern",
        metavar="REGEX",
        help="halve --members and --nonmembers by group, the first match of REGEX in each "
        "sample's id (e.g. 'patient\\d+' for slices of one patient), so no patient is both "
        "trained on by the reference models and scored (default: halved by sample)",
    )
    ref.add_argument(
        "--references",
        type=int,
        default=defaults.REFMODEL_REFERENCES,
        help="reference models to train (more give more power; default %(default)s)",
    )
    ref.add_argument(
        "--workers",
        type=positive_int,
        help="processes training reference models side by side (default: one per core)",
    )
    ref.add_argument(
        "--alpha",
        type=parameter_type("alpha"),
        default=defaults.REFMODEL_ALPHA,
        help="level of the test (p <= alpha means not forgotten) and error level of the "
        "membership strength's upper bound (default %(default)s)",
    )
    ref.add_argument(
        "--margin",
        type=parameter_type("margin"),
        default=defaults.REFMODEL_MARGIN,
        help="forgotten means D_Q's membership strength is at most this fraction of the known "
        "members': its (1 - alpha) upper bound is below it (default %(default)s)",
    )
    ref.add_argument(
        "--score",
        choices=("rmia", "lira"),
        default="rmia",
        help="per-sample score: RMIA (Zarifzadeh et al. 2024) or LiRA offline "
        "with a fixed variance (Carlini et al. 2022) (default %(default)s)",
    )
    ref.add_argument(
        "--setting",
        choices=("offline", "online"),
        default="offline",
        help="offline: no reference model trains on a scored sample, and they serve any "
        "query set; online: pairs of reference models on complementary halves that "
        "include D_Q and the scored known sets (RMIA online: more power, new models for "
        "every query set; docs/reference_auditor.md) (default %(default)s)",
    )


def _ema_options(ema: argparse.ArgumentParser) -> None:
    ema.add_argument(
        "--alpha",
        type=parameter_type("alpha"),
        default=defaults.EMA_ALPHA,
        help="significance level: rho_EMA <= alpha means forgotten (default %(default)s)",
    )
    choices = (
        ("--threshold-by", ("label", "prediction"), defaults.EMA_THRESHOLD_BY,
         "class whose threshold applies to a sample: its true label (the paper's) or the "
         "predicted class"),
        ("--test", ("welch", "student"), defaults.EMA_TEST,
         "two-sample test of the membership vector against all-ones"),
        ("--calibration-outputs", ("shadow", "target"), defaults.EMA_CALIBRATION_OUTPUTS,
         "thresholds from a reference model trained on half of D_C (the paper's) or from "
         "the target itself"),
    )  # fmt: skip
    for flag, options, default, text in choices:
        ema.add_argument(
            flag, choices=options, default=default, help=f"{text} (default %(default)s)"
        )
    ema.add_argument(
        "--metrics",
        default=",".join(defaults.EMA_METRICS),
        help="comma-separated membership metrics (default %(default)s)",
    )
    ema.add_argument(
        "--reference-code",
        action="store_true",
        help="the authors' public code exactly: thresholds fitted by label on the target's "
        "own outputs and applied by predicted class, Student's test (overrides --test, "
        "--threshold-by, --calibration-outputs and --metrics)",
    )


#: Each auditor's own options (beyond the shared ones), by registry name.
OPTIONS = {"refmodel": _refmodel_options, "ks": lambda parser: None, "ema": _ema_options}
