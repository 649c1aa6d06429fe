"""What ``monai-forget memorisation score|scan|split-patients`` do once parsed
(:mod:`monai_forget.cli.memorisation` builds the parser): load the model and probes,
call the library (``memorisation_score``, ``leak_scan``, ``split_patients``), print and
write the result."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from monai_forget.cli.options import load_model_from_args


def _inputs(args: argparse.Namespace):
    from monai_forget.data import load_images

    model = load_model_from_args(args)
    if getattr(args, "bundle", None):
        from monai_forget.memorisation.pipeline import PipelineProbes

        overrides = dict(getattr(args, "bundle_set", None) or ())
        probes = PipelineProbes.from_bundle(args.bundle, args.probes, overrides)
    else:
        probes = load_images(args.probes, split=args.probes_split)
    training = None
    if args.training_data:
        training = load_images(args.training_data, split=args.training_split)
    return model, probes, training


def _references(args: argparse.Namespace) -> list:
    return [load_model_from_args(args, path) for path in args.reference_model or ()]


def _reference_patients(args: argparse.Namespace) -> list[list[str]] | None:
    """The patients of each reference model, or ``None`` (references without the roster);
    ``leak_scan`` checks them against the references and the roster's patients."""
    from monai_forget.memorisation.patient_references import read_patient_ids

    if not args.reference_patients:
        if args.patient_column:  # a flag that would change nothing
            raise ValueError(
                "--patient-column is used only with --reference-patients; pass one patient "
                "list per --reference-model, or drop --patient-column"
            )
        return None
    return [read_patient_ids(path) for path in args.reference_patients]


def _split_patients(args: argparse.Namespace) -> int:
    from monai_forget.memorisation.patient_references import (
        read_patient_ids,
        split_patients,
        write_patient_ids,
    )

    splits = split_patients(read_patient_ids(args.patients), args.pairs, args.seed)
    paths = write_patient_ids(splits, args.out, overwrite=args.overwrite)
    print(
        f"{len(paths)} reference models in {args.pairs} pairs, each on half of the "
        f"{len(splits[0] | splits[1])} patients: train reference k of the audited model's "
        f"recipe on the images of the patients in {Path(args.out) / 'reference_<k>_patients.txt'}"
        ", then scan with --reference-model and --reference-patients in the same order"
    )
    for path in paths:
        print(path)
    return 0


def _settings(args: argparse.Namespace) -> dict:
    """The :class:`~monai_forget.memorisation.ProbeSettings` ``memorisation_score`` and
    ``leak_scan`` share."""
    return {
        "test": args.test,
        "random_feature": args.random_feature,
        "seed": args.seed,
        "batch_size": args.batch_size,
        "device": args.device,
        "outputs": args.outputs,
    }


#: The file in ``--out`` where a leak scan keeps its passes until its result is written.
PARTIAL_SCAN = "leak_scan.partial.npz"


def run(args: argparse.Namespace) -> int:
    """The action ``args`` names."""
    if args.action == "split-patients":
        return _split_patients(args)
    return _score(args) if args.action == "score" else _scan(args)


def _score(args: argparse.Namespace) -> int:
    from monai_forget.checks import check_fraction
    from monai_forget.io import atomic_write, check_writable
    from monai_forget.memorisation import ProbeSettings, UniqueFeature, memorisation_score

    check_fraction("alpha", args.alpha)  # the verdict's rule, checked before any pass
    out = check_writable(args.out, args.overwrite) if args.out else None
    value = 1.0 if args.value is None else args.value
    feature = UniqueFeature.from_text(args.text, tuple(args.position), args.scale, value)
    model, probes, training = _inputs(args)
    references = _references(args)
    score = memorisation_score(
        model,
        probes,
        feature,
        ProbeSettings(**_settings(args)),
        decoys=args.decoys,
        decoy_seed=args.decoy_seed,
        references=references,
        training_data=training,
        progress=True,
    )
    found = score.significant(args.alpha)
    verdict = "evidence of memorisation" if found else "no evidence of memorisation"
    print(f"feature {feature.describe()}: {verdict} ({score.evidence()}, alpha {args.alpha})")
    print(score.summary())
    if out is not None:
        record = {
            "feature": feature.to_dict(),
            "alpha": args.alpha,
            "seed": args.seed,
            "random_feature": args.random_feature,
            **score.to_dict(per_probe=True),
        }
        with atomic_write(out, "w", overwrite=args.overwrite) as handle:
            json.dump(record, handle, indent=2)
        print(f"result: {out}")
    return 0


def _scan(args: argparse.Namespace) -> int:
    from monai_forget.io import check_writable
    from monai_forget.leak_scan_plan import LeakScanPlan
    from monai_forget.memorisation import leak_scan, write_scan_report

    out_dir = Path(args.out)
    for name in ("leak_scan.json", "leak_scan.html"):
        check_writable(out_dir / name, args.overwrite)
    plan = LeakScanPlan.build(
        name=args.name,
        roster=args.roster,
        column=args.column,
        patient_column=args.patient_column,
        manifest=args.canary_manifest,
        position=tuple(args.position),
        scale=args.scale,
        font=args.font,
        font_size=args.font_size,
        value=args.value,
        through_bundle=bool(args.bundle),
        correction=args.correction,
        alpha=args.alpha,
        decoy_source=args.decoys_from,
        statistic=args.statistic,
        attribution=not args.no_attribution,
        decoys=args.decoys,
        max_decoys=args.max_decoys,
        decoy_seed=args.decoy_seed,
        **_settings(args),
    )
    reference_patients = _reference_patients(args)
    model, probes, training = _inputs(args)
    plan.check_probes(probes)
    # Saved as the scan goes: a killed scan, run again with the same command, resumes.
    partial = out_dir / PARTIAL_SCAN
    if partial.is_file():
        print(f"resuming the interrupted scan saved in {partial}", file=sys.stderr)
    result = leak_scan(
        model,
        probes,
        plan.names,
        plan.config,
        training_data=training,
        references=_references(args),
        reference_patients=reference_patients,
        progress=True,
        checkpoint=partial,
    )
    json_path, html_path = write_scan_report(
        result, out_dir, overwrite=args.overwrite, canary=plan.placement
    )
    partial.unlink()
    print(result.summary())
    print(f"result: {json_path}\nreport: {html_path}")
    sys.stdout.flush()
    return 0
