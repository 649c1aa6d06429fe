"""Benchmark: the two MONAI bundles end to end on the real data, with withdrawal audits.

For each bundle (``bundles/cxr_pneumonia_classification`` on PneumoniaMNIST,
``bundles/acdc_pathology_classification`` on ACDC) it runs the commands of the bundle's
``docs/README.md`` through ``monai.bundle.run``, in a work folder laid out like the
bundle folder (``data/``, ``models/``, ``eval/``, ``audit/``, ``cache/``):

1. prepare the datalist (``monai-forget prepare``; seeded random providers);
2. train (a) on every provider and (b) without the withdrawn provider;
3. evaluate (a) and (b) on the held-out test section (accuracy, AUC, per-class recall);
4. audit the provider for (a) and (b) (``audit.json``: the reference-model auditor, the
   bundles' default, and the papers' K-S and EMA on shadow models);
5. evaluate each model over the provider's training data with the audit handlers
   (``train.json`` + ``evaluate.json --audit True``) and with the compliance gate.

Steps whose outputs already exist are skipped, so an interrupted run resumes and a
bundle folder that already holds trained models is reused. It prints (markdown)
accuracy/AUC/recall, training time per epoch, the audit statistics and decisions (the
right ones: (a) "not forgotten", (b) "forgotten"; the reference-model auditor may say
"inconclusive"), the compliance gate's verdict, and the time of every step.

Profiles: ``full`` = the bundles' defaults; ``cpu`` = the defaults, but ACDC at 64x64
crops of slices resized to 128 (a quarter of the pixels; the network is the same four
blocks) to fit 2 CPU cores; ``quick`` = the bounded settings CI uses (few patients,
few steps). Run::

    python benchmarks/bundles.py --bundle cxr --profile full \
        --workdir bundles/cxr_pneumonia_classification
    python benchmarks/bundles.py --bundle acdc --profile cpu --workdir /tmp/acdc_run
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from _markdown import log, say, write  # benchmarks/_markdown.py, next to this script

from monai_forget.audit.result import share_text

REPO = Path(__file__).resolve().parents[1]
BUNDLES = {
    "cxr": REPO / "bundles" / "cxr_pneumonia_classification",
    "acdc": REPO / "bundles" / "acdc_pathology_classification",
}
PROVIDER = {"cxr": "random1", "acdc": "random2"}
PREPARE = {
    "cxr": lambda data, work: [
        "medmnist",
        str(data / "medmnist" / "pneumoniamnist.npz"),
        "--image-dir",
        str(work / "data" / "pneumoniamnist"),
        "-o",
        str(work / "data" / "pneumoniamnist.json"),
        "--random-sites",
        "5",
    ],
    "acdc": lambda data, work: [
        "acdc-h5",
        str(data / "acdc_ssl4mis"),
        "-o",
        str(work / "data" / "acdc.json"),
        "--random-sites",
        "2",
    ],
}
DATALIST = {"cxr": "pneumoniamnist.json", "acdc": "acdc.json"}
ACDC_CPU_SHAPE = {"patch_size": 64, "canvas_size": 72, "resize_longest": 128}

#: Overrides per profile and bundle: ``shape`` goes to every config, ``subset`` to the
#: training selection (train, audit, evaluate), ``design`` to training and, as
#: ``shadow_settings``, to the audit's shadow models; ``audit`` to audit.json only.
PROFILES: dict[str, dict[str, dict]] = {
    "full": {"cxr": {}, "acdc": {}},
    "cpu": {"cxr": {}, "acdc": {"shape": ACDC_CPU_SHAPE}},
    "quick": {
        "cxr": {
            "subset": {"max_per_class": 60},
            "design": {
                "epochs": 16,
                "steps_per_epoch": 8,
                "batch_size": 32,
                "val_max_per_class": 10,
            },
            "audit": {"calibration_max_per_class": 30},
        },
        "acdc": {
            "shape": ACDC_CPU_SHAPE,
            "subset": {"max_per_class": 4},
            "design": {
                "epochs": 16,
                "steps_per_epoch": 8,
                "batch_size": 16,
                "val_max_per_class": 1,
            },
            "audit": {"calibration_max_per_class": 4},
        },
    },
}

TIMES: dict[str, float] = {}


def step(name: str, output: Path, fn: Callable[[], object]) -> None:
    """Run ``fn`` unless ``output`` exists; record its wall time."""
    if output.exists():
        log(f"[skip] {name}: {output} exists")
        return
    log(f"[run] {name}")
    start = time.perf_counter()
    fn()
    TIMES[name] = time.perf_counter() - start


def run_bundle(
    bundle: str, profile: str, data: Path, work: Path, n_references: int | None = None
) -> dict:
    """Run the README's commands for one bundle in ``work``; returns the outputs read back."""
    from monai.bundle import run

    from monai_forget.cli import main as cli

    settings = PROFILES[profile][bundle]
    if n_references is not None:
        audit = {**settings.get("audit", {}), "n_references": n_references}
        settings = {**settings, "audit": audit}
    configs = BUNDLES[bundle] / "configs"
    provider = PROVIDER[bundle]
    datalist = work / "data" / DATALIST[bundle]
    common = {
        "bundle_root": str(BUNDLES[bundle]),  # outputs all go to explicit paths in work
        "data_file": str(datalist),
        **settings.get("shape", {}),
    }
    subset = settings.get("subset", {})
    design = settings.get("design", {})
    models = work / "models"
    ckpt = {"a": models / "model.pt", "b": models / f"model_without_{provider}.pt"}
    audit_dir = {"a": work / "audit" / provider, "b": work / "audit" / f"{provider}_retrained"}
    scenario = {"a": "trained with the provider", "b": "retrained without the provider"}
    retrained = {"a": "", "b": "_retrained"}  # output names as in the bundle's README

    def config(name: str) -> str:
        return str(configs / f"{name}.json")

    evaluate_configs = [config("train"), config("evaluate")]  # an overlay of train.json

    def prepare() -> None:
        if cli(["prepare", *PREPARE[bundle](data, work), "--seed", "0"]) != 0:
            raise RuntimeError(f"monai-forget prepare failed for {bundle}")

    step(f"{bundle}: prepare", datalist, prepare)
    step(
        f"{bundle}: train (a)",
        ckpt["a"],
        lambda: run(
            config_file=config("train"),
            ckpt_file=str(ckpt["a"]),
            log_dir=str(work / "logs" / ckpt["a"].stem),  # not into the repository's bundle
            **common,
            **subset,
            **design,
        ),
    )
    step(
        f"{bundle}: train (b)",
        ckpt["b"],
        lambda: run(
            config_file=config("train"),
            ckpt_file=str(ckpt["b"]),
            log_dir=str(work / "logs" / ckpt["b"].stem),
            exclude_sites=[provider],
            **common,
            **subset,
            **design,
        ),
    )
    shadow = {**design, **settings.get("shape", {})}
    for case in ("a", "b"):
        tag = "" if case == "a" else f"_without_{provider}"
        step(
            f"{bundle}: evaluate ({case}) on test",
            work / "eval" / f"test{tag}" / "metrics.json",
            lambda case=case, tag=tag: run(
                config_file=evaluate_configs,
                ckpt_file=str(ckpt[case]),
                output_dir=str(work / "eval" / f"test{tag}"),
                **common,
            ),
        )
        step(
            f"{bundle}: audit ({case})",
            audit_dir[case] / "reference.json",
            lambda case=case: run(
                config_file=config("audit"),
                target_ckpt=str(ckpt[case]),
                provider=provider,
                scenario=scenario[case],
                output_dir=str(audit_dir[case]),
                cache_dir=str(work / "cache"),
                shadow_settings=shadow,
                **common,
                **subset,
                **settings.get("audit", {}),
            ),
        )
        step(
            f"{bundle}: evaluate ({case}) on D_Q with the audit handlers",
            work / "eval" / f"training_{provider}{retrained[case]}" / "metrics.json",
            lambda case=case: run(
                config_file=evaluate_configs,
                ckpt_file=str(ckpt[case]),
                section="training",
                provider=provider,
                audit=True,
                audit_reference=str(audit_dir[case] / "reference.json"),
                output_dir=str(work / "eval" / f"training_{provider}{retrained[case]}"),
                **common,
                **subset,
            ),
        )

    def read(path: Path) -> dict:
        return json.loads(path.read_text())

    out = {"provider": provider, "settings": settings}
    for case in ("a", "b"):
        tag = "" if case == "a" else f"_without_{provider}"
        out[case] = {
            "train": read(models / f"{ckpt[case].stem}_train.json"),
            "test": read(work / "eval" / f"test{tag}" / "metrics.json"),
            "ks": read(audit_dir[case] / "ks.json"),
            "ema": read(audit_dir[case] / "ema.json"),
            "refmodel": read(audit_dir[case] / "refmodel.json"),
            "eval_dq": read(
                work / "eval" / f"training_{provider}{retrained[case]}" / "metrics.json"
            ),
        }
    return out


def gate_passes(bundle: str, work: Path, out: dict, case: str) -> bool:
    """Run the evaluation with the compliance gate; True when the gate lets it pass."""
    from monai.bundle import run

    from monai_forget.handlers import ComplianceError

    provider = out["provider"]
    settings = out["settings"]
    tag = "" if case == "a" else f"_without_{provider}"
    suffix = "" if case == "a" else "_retrained"
    audit = work / "audit" / f"{provider}{suffix}"
    try:
        run(
            config_file=[str(BUNDLES[bundle] / "configs" / f"{name}.json")
                         for name in ("train", "evaluate")],
            ckpt_file=str(work / "models" / f"model{tag}.pt"),
            bundle_root=str(BUNDLES[bundle]), data_file=str(work / "data" / DATALIST[bundle]),
            section="training", provider=provider, audit=True, compliance_gate=True,
            audit_reference=str(audit / "reference.json"), overwrite=True,
            output_dir=str(work / "eval" / f"gate_{provider}{suffix}"),
            **settings.get("shape", {}), **settings.get("subset", {}),
        )  # fmt: skip
    except Exception as err:  # the bundle runner wraps the handler's error
        chain, e = [], err
        while e is not None and e not in chain:
            chain.append(e)
            e = e.__cause__ or e.__context__
        if any(isinstance(e, ComplianceError) for e in chain):
            return False
        raise
    return True


def fmt_recall(metrics: dict) -> str:
    return ", ".join(f"{k} {v:.3f}" for k, v in metrics["recall_by_class"].items())


def report(bundle: str, profile: str, out: dict, gates: dict[str, bool]) -> None:
    provider = out["provider"]
    say(f"\n## {BUNDLES[bundle].name} (profile `{profile}`), withdrawn provider `{provider}`\n")
    if out["settings"]:
        say(f"Overrides: `{json.dumps(out['settings'])}`\n")
    say("| model | training entries | epochs x steps | s/epoch | test accuracy | test AUC |"
          " per-class recall (test) |")  # fmt: skip
    say("|---|---|---|---|---|---|---|")
    for case, name in (("a", "(a) with the provider"), ("b", f"(b) without {provider}")):
        train, test = out[case]["train"], out[case]["test"]["metrics"]
        say(
            f"| {name} | {train['training_data']['entries']} | {train['epochs']} x "
            f"{train['iterations_per_epoch']} | {train['seconds_per_epoch']:.1f} | "
            f"{test['accuracy']:.3f} | {test['auc']:.3f} | {fmt_recall(test)} |"
        )
    expected = {"a": "not forgotten", "b": "forgotten"}

    def right(decision: str, case: str) -> str:
        if decision == "inconclusive":
            return "inconclusive (not wrong)"
        return "yes" if decision == expected[case] else "NO"

    say("\nReference-model audit (the bundles' default decision and compliance gate):\n")
    say("| model | p_member | members' AUC | remembered share [upper bound] | "
          "decision | right? | compliance gate |")  # fmt: skip
    say("|---|---|---|---|---|---|---|")
    for case in ("a", "b"):
        ref = out[case]["refmodel"]
        d = ref["details"]
        gate = "passes" if gates[case] else "fails the run"
        say(
            f"| ({case}) | {ref['statistic']:.3g} | {d['member_auc']:.3f} | "
            f"{share_text(d['membership_strength'])} "
            f"[{share_text(d['membership_strength_upper'])}] | "
            f"{ref['decision']} | {right(ref['decision'], case)} | {gate} |"
        )
    n_refs = out["a"]["refmodel"]["details"]["n_references"]
    say(f"\n{n_refs} reference models; the right answers: (a) not forgotten, (b) forgotten.\n")
    say("K-S and EMA as the papers define them:\n")
    say("| model | rho_KS | K-S decision | rho_EMA | EMA decision | |D_Q| | |D_C| | "
          "evaluation-time rho_KS / rho_EMA | right? (K-S / EMA) |")  # fmt: skip
    say("|---|---|---|---|---|---|---|---|---|")
    for case in ("a", "b"):
        ks, ema, dq = out[case]["ks"], out[case]["ema"], out[case]["eval_dq"]["metrics"]
        say(
            f"| ({case}) | {ks['statistic']:.3f} | {ks['decision']} | {ema['statistic']:.3g} | "
            f"{ema['decision']} | {ks['sizes']['query']} | {ks['sizes']['calibration']} | "
            f"{dq['rho_KS']:.3f} / {dq['rho_EMA']:.3g} | "
            f"{right(ks['decision'], case)} / {right(ema['decision'], case)} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", choices=(*BUNDLES, "all"), default="all")
    parser.add_argument("--profile", choices=tuple(PROFILES), default="cpu")
    parser.add_argument("--workdir", type=Path, help="default: a folder per bundle in .")
    parser.add_argument("--out", type=Path, help="also write the markdown here (atomic)")
    parser.add_argument(
        "--n-references",
        type=int,
        help="reference models of the reference-model audit (default: the bundle's, 8)",
    )
    args = parser.parse_args()

    from monai_forget.data import data_root

    data = data_root()
    if not (data / "acdc_ssl4mis").is_dir():
        sys.exit(f"real data not found in {data}; set MONAI_FORGET_DATA")
    say("# Bundles end to end on the real data\n")
    say(
        f"- command: `python benchmarks/bundles.py {' '.join(sys.argv[1:])}`; data: `{data}`\n"
        f"- torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"python {platform.python_version()}, {os.cpu_count()} CPUs, seed 0 everywhere"
    )
    bundles = tuple(BUNDLES) if args.bundle == "all" else (args.bundle,)
    for bundle in bundles:
        work = args.workdir or Path(f"bundle_run_{bundle}_{args.profile}")
        if len(bundles) > 1 and args.workdir:
            work = args.workdir / bundle
        work.mkdir(parents=True, exist_ok=True)
        out = run_bundle(bundle, args.profile, data, work, args.n_references)
        gates = {case: gate_passes(bundle, work, out, case) for case in ("a", "b")}
        report(bundle, args.profile, out, gates)
    say("\n### Wall time of the steps run now (skipped steps are not listed)\n")
    for name, seconds in TIMES.items():
        say(f"- {name}: {seconds / 60:.1f} min")
    if args.out:
        write(args.out)


if __name__ == "__main__":
    main()
