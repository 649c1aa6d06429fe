"""What ``monai-forget audit refmodel|ks|ema`` does once parsed
(:mod:`monai_forget.cli.audit` builds the parser): load the model and the sets, build the
auditor, audit, write ``result.json`` and ``report.html``, exit with the decision's code."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from monai_forget.auditor_registry import auditor_kind
from monai_forget.cli.options import load_model_from_args, load_set

#: The exit code of each decision (a usage error is 2).
EXIT_CODES = {"forgotten": 0, "not forgotten": 3, "inconclusive": 4}


def _auditor(args: argparse.Namespace, options: dict):
    from monai_forget.audit import EMAAuditor, KSAuditor, ReferenceModelAuditor

    if args.method == "refmodel":
        return ReferenceModelAuditor(
            **options,
            n_references=args.references,
            alpha=args.alpha,
            margin=args.margin,
            score=args.score,
            setting=args.setting,
            workers=args.workers,
            group_pattern=args.group_pattern,
        )
    if args.method == "ks":
        return KSAuditor(**options)
    if args.reference_code:
        return EMAAuditor.reference_code(**options, alpha=args.alpha)
    return EMAAuditor(
        **options,
        alpha=args.alpha,
        threshold_by=args.threshold_by,
        test=args.test,
        calibration_outputs=args.calibration_outputs,
        metrics=tuple(m.strip() for m in args.metrics.split(",") if m.strip()),
    )


def run(args: argparse.Namespace) -> int:
    from monai_forget.audit import write_report
    from monai_forget.io import check_writable
    from monai_forget.recipe_files import load_recipe

    auditor_kind(args.method)  # a renamed auditor: refused with the name to use
    out = Path(args.out)
    result_path = check_writable(out / "result.json", args.overwrite)
    report_path = check_writable(out / "report.html", args.overwrite)
    target = load_model_from_args(args)
    query = load_set(args.query, args.query_split, "query set D_Q (--query)")
    options = {
        "recipe": load_recipe(args.recipe, allow_code=args.trust_recipe),
        "seed": args.seed,
        "device": args.device,
        "cache_dir": args.cache_dir,
        "batch_size": args.batch_size,
        "progress": not args.json,
    }
    auditor = _auditor(args, options)
    calibration, extra = _calibration(args)
    label = args.label or Path(args.query).name
    result = auditor.audit(target, query, calibration, label=label, **extra)
    result = result.adding(provenance={"audit_trail": _trail(args)})
    result.save(result_path, overwrite=args.overwrite)
    write_report(result, report_path, overwrite=args.overwrite)
    if args.json:
        print(json.dumps(_pipeline_record(result, result_path, report_path)))
    else:
        print(result.summary())
        print(f"result: {result_path}\nreport: {report_path}")
    return EXIT_CODES[result.decision]


def _calibration(args: argparse.Namespace) -> tuple:
    """The auditor's calibration data (D_C, or the known members and non-members) and the
    reference-model audit's optional sets (its reference population, D_Q's site)."""
    if auditor_kind(args.method).calibration == "whole":
        return load_set(
            args.calibration, args.calibration_split, "calibration set D_C (--calibration)"
        ), {}
    known = (
        load_set(args.members, args.members_split, "known members (--members)"),
        load_set(args.nonmembers, args.nonmembers_split, "known non-members (--nonmembers)"),
    )
    optional = {
        "population": (
            args.population,
            args.population_split,
            "reference population (--population)",
        ),
        "site": (args.site_images, args.site_images_split, "images of D_Q's site (--site-images)"),
    }
    extra = {name: load_set(*given) for name, given in optional.items() if given[0]}
    return known, extra


def _trail(args: argparse.Namespace) -> dict:
    """Who audited what: the command line and the model file's SHA-256."""
    from datetime import datetime, timezone

    from monai_forget.fingerprint import file_sha256

    digest = file_sha256(args.model)
    return {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command_line": ["monai-forget", *getattr(args, "argv", sys.argv[1:])],
        "model_file": str(Path(args.model).resolve()),
        "model_sha256": digest,
    }


def _pipeline_record(result, result_path: Path, report_path: Path) -> dict:
    from monai_forget.results import jsonable

    return jsonable(
        {
            "decision": result.decision,
            "exit_code": EXIT_CODES[result.decision],
            "method": result.method,
            "statistic_name": result.statistic_name,
            "statistic": result.statistic,
            "details": result.details,
            "sizes": result.sizes,
            "result": str(result_path),
            "report": str(report_path),
        }
    )
