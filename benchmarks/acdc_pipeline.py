"""Benchmark: ACDC as cardiologists' pipelines do it, on the 20 held-out test patients.

Runs the documented command lines of ``bundles/acdc_segmentation`` and of the pathology
bundle's diagnosis configs (``python -m monai.bundle run ...`` in subprocesses, as a
user types them) in a work folder, then prints (markdown):

1. segmentation, ``cpu`` profile: training time (wall and CPU), 3D Dice and in-plane
   HD95 per structure and phase on the test volumes; the same for the ``full`` profile
   with ``--full-profile`` (about 2 h of training on 2 cores), else its measured time
   per training step (and per epoch) on this machine;
2. diagnosis (Isensee et al. 2017 features -> logistic regression) on the test
   patients from the predicted masks and from the expert masks, beside the slice
   classifier of Liu & Tsaftaris (the pathology bundle, figures of its docs);
3. the withdrawal scenario on the segmentation bundle, every model of the cpu profile's
   design: (a) the cpu model of step 1, trained with provider ``random2``, (b) retrained
   without it, both audited by ``audit.json``: reference models by patient
   (``--n-references``, the decision; again with the first ``--fewer-references`` of
   them, from the cache; and sub-audits drawn from the per-patient scores, with their
   decision counts), then K-S and EMA on per-image scores;
4. the federated feature task (``monai_forget.fl.run.acdc_feature_federation``): test
   accuracy of FedAvg in one process for seeds 0-2 and of one NVIDIA FLARE run.

Every step whose output exists is skipped, so an interrupted run resumes (training
itself resumes from its last epoch). Run::

    python benchmarks/acdc_pipeline.py --workdir ~/.cache/monai_forget/acdc_pipeline \
        --out benchmarks/results/acdc_pipeline.md
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from _markdown import log, say, write  # benchmarks/_markdown.py, next to this script

from monai_forget.audit.result import share_text

REPO = Path(__file__).resolve().parents[1]
#: the documented datalist: two seeded random providers, seed 0
SEEDED = ["--random-sites", "2", "--seed", "0"]
SEG = REPO / "bundles" / "acdc_segmentation"
PATHOLOGY = REPO / "bundles" / "acdc_pathology_classification"
STRUCTURES = ("RV", "MYO", "LV")
PROVIDER = "random2"
TIMES: dict[str, dict[str, float]] = {}


def bundle(step: str, cwd: Path, *args: str, outputs: Path) -> None:
    """Run ``python -m monai.bundle <args>`` unless ``outputs`` exists; time it."""
    if outputs.exists():
        log(f"skip {step}: {outputs} exists")
        return
    log(f"{step} ...")
    # a training (its output is the weights) interrupted after an epoch continues from it
    if any(outputs.with_name(outputs.stem + "_resume").glob("*.pt")):
        args = (*args, "--resume", "True")
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONWARNINGS="ignore")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    done = subprocess.run(
        [sys.executable, "-m", "monai.bundle", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{step} failed:\n{done.stderr[-5000:]}")
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    TIMES[step] = {"wall_s": time.time() - start, "cpu_s": cpu}


def per_phase(details: Path) -> dict[str, dict[str, float]]:
    """Mean per-volume Dice / HD95 per structure for ED, ES and both."""
    rows = list(csv.DictReader(details.open()))
    out = {}
    for phase in ("ED", "ES", "ED+ES"):
        sel = [r for r in rows if phase == "ED+ES" or r["phase"] == phase]
        out[phase] = {
            f"{m}_{s}": float(np.nanmean([float(r[f"{m}_{s}"]) for r in sel]))
            for m in ("dice", "hd95")
            for s in STRUCTURES
        }
        out[phase]["volumes"] = len(sel)
    return out


#: the bundle's profiles: their config files (before evaluate.json) and Dice targets
PROFILES = {
    "cpu": (["configs/train.json", "configs/cpu.json"], 0.80),
    "full": (["configs/train.json"], 0.88),
}


def configs(*files: str) -> str:
    """A ``--config_file`` list as the bundle's docs write it."""
    return "[" + ",".join(f"'{f}'" for f in files) + "]"


def train_and_evaluate(work: Path, data: list[str], profile: str) -> dict:
    """Train one profile by the documented command (resuming), evaluate it on the test
    patients; its training summary, metrics and per-phase figures."""
    model = work / "models" / profile / "model.pt"
    files = PROFILES[profile][0]
    bundle(
        f"train {profile} profile",
        SEG,
        "run",
        "--config_file",
        configs(*files),
        *data,
        "--ckpt_file",
        str(model),
        outputs=model,
    )
    evaluation = work / "eval" / f"test_{profile}"
    bundle(
        f"evaluate {profile} profile",
        SEG,
        "run",
        "--config_file",
        configs(*files, "configs/evaluate.json"),
        *data,
        "--ckpt_file",
        str(model),
        "--output_dir",
        str(evaluation),
        outputs=evaluation / "metrics.json",
    )
    return {
        "train": json.loads(model.with_name("model_train.json").read_text()),
        "metrics": json.loads((evaluation / "metrics.json").read_text()),
        "phases": per_phase(evaluation / "per_volume.csv"),
        "model": model,
    }


def segmentation(work: Path, data: list[str], full: bool) -> dict:
    seg = {"cpu": train_and_evaluate(work, data, "cpu")}
    masks = work / "inference" / "test_cpu"
    bundle(
        "segment the test patients (NIfTI)",
        SEG,
        "run",
        "--config_file",
        configs("configs/inference.json", "configs/cpu.json"),
        *data,
        "--ckpt_file",
        str(seg["cpu"]["model"]),
        "--output_dir",
        str(masks),
        outputs=masks,
    )
    timing = work / "models" / "full_timing.pt"
    bundle(
        "full profile: 1 epoch of 10 steps",
        SEG,
        "run",
        "--config_file",
        "configs/train.json",
        *data,
        "--ckpt_file",
        str(timing),
        "--epochs",
        "1",
        "--steps_per_epoch",
        "10",
        "--val_interval",
        "100",
        outputs=timing,
    )
    if full:
        seg["full"] = train_and_evaluate(work, data, "full")
    seg["timing"] = json.loads(timing.with_name("full_timing_train.json").read_text())
    seg["masks"] = masks
    return seg


def diagnosis(work: Path, data: list[str], masks: Path) -> dict:
    classifier = work / "models" / "diagnosis.json"
    common = [*data, "--classifier_file", str(classifier)]
    bundle(
        "fit the diagnosis classifier (expert masks, 80 patients)",
        PATHOLOGY,
        "run",
        "--config_file",
        "configs/diagnosis_train.json",
        *common,
        outputs=classifier,
    )
    out = {}
    for source, extra in (("expert", []), ("predicted", ["--mask_dir", str(masks)])):
        folder = work / "eval" / f"diagnosis_test_{source}"
        bundle(
            f"diagnose the test patients ({source} masks)",
            PATHOLOGY,
            "run",
            "--config_file",
            "configs/diagnosis.json",
            *common,
            *extra,
            "--output_dir",
            str(folder),
            outputs=folder / "metrics.json",
        )
        out[source] = json.loads((folder / "metrics.json").read_text())
    out["training"] = json.loads(classifier.read_text())["training"]
    return out


def withdrawal(
    work: Path, data: list[str], n_references: int, refmodel_only: bool, fewer: list[int]
) -> dict:
    # One design for every model of the scenario (targets, reference models, shadows):
    # the cpu profile's. A shorter budget (20 x 42 steps at patch 64) memorised too
    # little for any audit to decide (members' AUC 0.64 and 0.54 over 15 + 15 patients).
    cpu = "['configs/train.json','configs/cpu.json']"
    models = {
        "a": work / "models" / "cpu" / "model.pt",
        "b": work / "models" / "audit" / "without.pt",
    }
    bundle(
        "withdrawal (b): retrain without the provider",
        SEG,
        "run",
        "--config_file",
        cpu,
        *data,
        "--ckpt_file",
        str(models["b"]),
        "--exclude_sites",
        f"['{PROVIDER}']",
        outputs=models["b"],
    )
    audit = ["--config_file", "['configs/train.json','configs/cpu.json','configs/audit.json']"]
    scenarios = {"a": "trained with the provider", "b": "retrained without it"}

    def folder(case: str, k: int) -> Path:
        return work / "audit" / f"{PROVIDER}_{case}_{k}refs"

    # The decision (reference models) for both models first, then the papers' auditors:
    # separate runs with separate outputs, so each resumes on its own. Reference model k
    # is the same whatever the number asked for (seed + k), so the audits with fewer of
    # them take theirs from the cache: what more reference models buy, nearly for free.
    steps = [("refmodel", n_references, "$@refmodel.run()", "refmodel.json")]
    steps += [("refmodel", k, "$@refmodel.run()", "refmodel.json") for k in fewer]
    if not refmodel_only:
        steps.append(("K-S and EMA", n_references, "$@audit.run()", "scores.json"))
    for method, k, run, output in steps:
        for case, scenario in scenarios.items():
            bundle(
                f"withdrawal ({case}): {method} audit, {k} reference models",
                SEG,
                "run",
                *audit,
                *data,
                "--cache_dir",
                str(work / "cache"),
                "--n_references",
                str(k),
                "--target_ckpt",
                str(models[case]),
                "--scenario",
                scenario,
                "--output_dir",
                str(folder(case, k)),
                "--run",
                f"['{run}']",
                outputs=folder(case, k) / output,
            )
    out = {}
    for case in models:
        out[f"{case}_fewer"] = {
            k: json.loads((folder(case, k) / "refmodel.json").read_text()) for k in fewer
        }
        folder_n = folder(case, n_references)
        methods = ("refmodel",) if refmodel_only else ("refmodel", "ks", "ema")
        out[case] = {m: json.loads((folder_n / f"{m}.json").read_text()) for m in methods}
        if not refmodel_only:
            out[case]["by_score"] = json.loads((folder_n / "scores.json").read_text())["by_score"]
        out[case]["train"] = json.loads(
            models[case].with_name(models[case].stem + "_train.json").read_text()
        )
    return out


RESAMPLE_DRAWS = 200


def resampled_decisions(result: dict, draws: int = RESAMPLE_DRAWS) -> dict[str, dict]:
    """The audit's decisions on sub-audits drawn from one audit's per-patient scores.

    Two kinds of draw, each re-fitting the cross-fitted map and re-running the test (not
    the shift check, which reads the reference models' logits of the whole sets):
    ``D_Q subset`` audits 10 or 20 of D_Q's patients against every known patient;
    ``held-out as D_Q`` audits 10 of the known non-members as if they were D_Q, against
    the known members and the other non-members (a null for any model: none of them
    was trained on). The draws share one target and one set of reference models, so
    they measure the spread over the patients audited, not over training runs.
    """
    from scipy.stats import binomtest

    from monai_forget.audit.refmodel import MembershipCalibration, refmodel_decision, set_test
    from monai_forget.defaults import REFMODEL_MARGIN

    arrays, details = result["arrays"], result["details"]
    query, members = np.asarray(arrays["query_score"]), np.asarray(arrays["members_score"])
    nonmembers = np.asarray(arrays["nonmembers_score"])
    rng = np.random.default_rng(0)
    # kind -> (pool drawn from, draw size, whether the draw leaves the compared non-members)
    kinds = {
        "D_Q subset, 10": (query, 10, False),
        "D_Q subset, 20": (query, 20, False),
        "held-out as D_Q, 10": (nonmembers, 10, True),
    }
    out = {}
    for kind, (pool, size, held_out) in kinds.items():
        counts = dict.fromkeys(("not forgotten", "forgotten", "inconclusive"), 0)
        for draw in range(draws):
            chosen = np.zeros(pool.size, dtype=bool)
            chosen[rng.choice(pool.size, size, replace=False)] = True
            compared = nonmembers[~chosen] if held_out else nonmembers
            calibration = MembershipCalibration.fit(members, compared, seed=draw)
            test = set_test(
                pool[chosen],
                calibration,
                alpha=details["alpha"],
                margin=details.get("margin", REFMODEL_MARGIN),
                seed=draw,
            )
            decision = refmodel_decision(test, details["alpha"])
            counts[decision] += 1
        out[kind] = {
            decision: (n, *binomtest(n, draws).proportion_ci(method="wilson"))
            for decision, n in counts.items()
        }
    return out


def fedavg(clients, config, seed: int):
    """FedAvg in one process over the federation's own providers (the clients' local
    recipe, equal weights), seeded."""
    import copy

    import torch

    recipe = config.recipe()
    torch.manual_seed(seed)
    model = recipe.build()
    for r in range(config.rounds):
        states = []
        for i, part in enumerate(clients):
            local = copy.deepcopy(model)
            recipe.fit(local, part, seed=seed * 100_003 + r * 1_009 + i, device=torch.device("cpu"))
            states.append(local.state_dict())
        model.load_state_dict({k: sum(s[k] for s in states) / len(states) for k in states[0]})
    return model


def federation(root: Path, work: Path) -> dict:
    import torch

    from monai_forget.acdc.release import expert_feature_rows, feature_images
    from monai_forget.fl.job import run_federated
    from monai_forget.fl.run import acdc_feature_federation, mlp_config
    from monai_forget.inference import predict

    def accuracy(model: torch.nn.Module, data) -> float:
        return float(np.mean(predict(model, data).probs.argmax(1) == data.labels))

    log("federated feature task ...")
    images = feature_images(expert_feature_rows(root))
    out: dict = {"in_process": {}}
    for seed in (0, 1, 2):
        fed = acdc_feature_federation(data=images, seed=seed)
        config = mlp_config(fed, seed=seed)
        model = fedavg(fed.clients.values(), config, seed)
        out["in_process"][seed] = {"test": accuracy(model, fed.test), "test_size": len(fed.test)}
        if seed == 0:
            out["description"] = fed.description
            start = time.time()
            run = run_federated(fed.clients, config, work / "flare_features")
            out["flare"] = {
                "test": accuracy(run.global_model, fed.test),
                "seconds": time.time() - start,
            }
    return out


def report_profile(profile: str, seg: dict) -> None:
    """Training time, Dice and HD95 per structure and phase of one profile."""
    say(f"## Segmentation (`bundles/acdc_segmentation`), {profile} profile, seed 0")
    say()
    t = seg["train"]
    cpu = TIMES.get(f"train {profile} profile")  # measured only when this run trained it
    say(
        f"Training: {t['epochs']} epochs x {t['iterations_per_epoch']} steps, "
        f"{t['training_data']['entries']} slices of {t['training_data']['patients']} patients; "
        f"{t['seconds_total'] / 60:.1f} min wall ({t['seconds_per_epoch']:.0f} s/epoch)"
        + (f"; CPU {cpu['cpu_s'] / 60:.1f} min." if cpu else ".")
    )
    say()
    say(
        "| phase | volumes | Dice RV | Dice MYO | Dice LV | mean Dice "
        "| HD95 RV | HD95 MYO | HD95 LV |"
    )
    say("|---|---|---|---|---|---|---|---|---|")
    for phase, m in seg["phases"].items():
        dice = [m[f"dice_{s}"] for s in STRUCTURES]
        say(
            f"| {phase} | {m['volumes']} | "
            + " | ".join(f"{d:.3f}" for d in dice)
            + f" | {np.mean(dice):.3f} | "
            + " | ".join(f"{m[f'hd95_{s}']:.2f}" for s in STRUCTURES)
            + " |"
        )
    mean, target = seg["metrics"]["metrics"]["mean_dice"], PROFILES[profile][1]
    say()
    say(
        f"Mean Dice over LV, RV, MYO (ED and ES volumes): **{mean:.3f}**; target >= {target:.2f} "
        f"({profile} profile): **{'met' if mean >= target else 'missed'}**. HD95 in pixels."
    )
    say()


def report(seg: dict, diag: dict, audit: dict | None, fed: dict | None) -> None:
    for profile in ("cpu", "full"):
        if profile in seg:
            report_profile(profile, seg[profile])
    if "full" not in seg:
        f = seg["timing"]
        step = f["seconds_total"] / f["iterations"]
        say(
            f"Full profile (`train.json` alone): measured {step:.2f} s per step on this "
            f"machine -> {step * 84 / 60:.1f} min per epoch of 84 steps, "
            f"{step * 84 * 150 / 3600:.1f} h for its 150 epochs: not trained in this run "
            "(`--full-profile` trains it)."
        )
        say()
    say("## Diagnosis (five ACDC groups) on the 20 test patients")
    say()
    say("| pipeline | input | accuracy | correct |")
    say("|---|---|---|---|")
    for source in ("predicted", "expert"):
        m = diag[source]
        say(
            f"| features -> logistic regression | {source} masks | {m['accuracy']:.2f} | "
            f"{m['correct']}/{m['patients']} |"
        )
    say(
        "| Liu & Tsaftaris slice CNN (pathology bundle, its docs) | single 2D slices "
        "| 0.212 (128x128) / 0.345 (cpu) | per slice |"
    )
    tr = diag["training"]
    say()
    say(
        f"Classifier: {tr['patients']} training+validation patients (expert masks), "
        f"cross-validated accuracy {tr['cv_accuracy_mean']:.3f} +- {tr['cv_accuracy_std']:.3f} "
        f"({tr['cv']}). Target >= 0.85 from predicted masks: "
        f"**{'met' if diag['predicted']['accuracy'] >= 0.85 else 'missed'}**."
    )
    if audit is not None:
        say()
        say(f"## Withdrawal of provider `{PROVIDER}` (segmentation), cpu-profile design")
        say()
        say("Reference models (the decision; unit: patient):")
        say()
        say(
            "| model | reference models | D_Q patients | known members + non-members "
            "| p_member | members' AUC "
            "| members' effect (low) | remembered share [upper bound] | decision |"
        )
        say("|---|---|---|---|---|---|---|---|---|")
        rows = [(case, audit[case]["refmodel"]) for case in ("a", "b")]
        rows += [(case, r) for case in ("a", "b") for r in audit[f"{case}_fewer"].values()]
        for case, r in rows:
            d = r["details"]
            say(
                f"| ({case}) | {d['n_references']} | {r['sizes']['query']} "
                f"| {r['sizes']['members']} + {r['sizes']['nonmembers']} | {r['statistic']:.3g} "
                f"| {d['member_auc']:.2f} | {d['member_effect_low']:.3f} "
                f"| {share_text(d['membership_strength'])} "
                f"[{share_text(d['membership_strength_upper'])}]"
                f" | {r['decision']} |"
            )
        say()
        say(
            "Right answers: (a) not forgotten, (b) forgotten; inconclusive is never wrong. "
            "Audits with fewer reference models use the first of the same models."
        )
        say()
        say(
            f"Sub-audits drawn from the {audit['a']['refmodel']['details']['n_references']}-"
            f"model audits' per-patient scores ({RESAMPLE_DRAWS} draws each; the map and the "
            "test re-run per draw; one target and one set of reference models, so the spread "
            "is over the patients audited, not over training runs; Wilson 95 % intervals):"
        )
        say()
        say("| model | draw | not forgotten | forgotten | inconclusive |")
        say("|---|---|---|---|---|")
        for case in ("a", "b"):
            for kind, counts in resampled_decisions(audit[case]["refmodel"]).items():
                cells = [f"{n} ({lo:.3f}-{hi:.3f})" for n, lo, hi in counts.values()]
                say(f"| ({case}) | {kind} | " + " | ".join(cells) + " |")
        say()
        say(
            "Right answers: a D_Q subset of (a) is not forgotten, of (b) forgotten; held-out "
            'patients are forgotten for both models (never trained on), so a "not '
            'forgotten" there is a false alarm.'
        )
    if audit is not None and "by_score" in audit["a"]:
        say()
        say("K-S and EMA as the papers define them, per score:")
        say()
        say("| model | score | rho_KS | K-S | rho_EMA | EMA |")
        say("|---|---|---|---|---|---|")
        for case in ("a", "b"):
            for score, r in audit[case]["by_score"].items():
                say(
                    f"| ({case}) | {score} | {r['rho_KS']:.3f} | {r['ks']} "
                    f"| {r['rho_EMA']:.3g} | {r['ema']} |"
                )
    if fed is not None:
        say()
        say("## Federated feature task (`acdc_feature_federation`)")
        say()
        say(fed["description"])
        say()
        accs = {s: v["test"] for s, v in fed["in_process"].items()}
        say(
            "FedAvg in one process, test accuracy: "
            + ", ".join(f"seed {s}: {a:.2f}" for s, a in accs.items())
        )
        say(
            f"NVIDIA FLARE simulator (seed 0): test accuracy {fed['flare']['test']:.2f} "
            f"({fed['flare']['seconds']:.0f} s)."
        )
    say()
    say("### Wall and CPU time of the steps run now")
    say()
    for step, t in TIMES.items():
        say(f"- {step}: {t['wall_s'] / 60:.1f} min wall, {t['cpu_s'] / 60:.1f} min CPU")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument(
        "--data",
        type=Path,
        default=Path(os.environ.get("MONAI_FORGET_DATA", REPO.parent / "shared" / "data")),
    )
    parser.add_argument("--skip-audit", action="store_true")
    parser.add_argument(
        "--full-profile",
        action="store_true",
        help="also train (about 2 h on 2 cores) and evaluate the full profile",
    )
    parser.add_argument(
        "--n-references", type=int, default=8, help="reference models of the withdrawal audit"
    )
    parser.add_argument(
        "--fewer-references",
        type=int,
        nargs="*",
        default=[4],
        help="also audit with the first k of the reference models (cached: scoring only)",
    )
    parser.add_argument(
        "--refmodel-only",
        action="store_true",
        help="the withdrawal audit runs the reference-model audit only (no K-S/EMA shadows)",
    )
    parser.add_argument("--skip-federation", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    work = args.workdir.resolve()
    datalist = work / "data" / "acdc.json"
    if not datalist.is_file():
        from monai_forget.cli import main as cli

        cli(["prepare", "acdc-h5", str(args.data / "acdc_ssl4mis"), "-o", str(datalist), *SEEDED])
    data = ["--data_file", str(datalist)]
    say("# ACDC pipeline: segmentation, diagnosis, withdrawal, federation")
    say()
    say(
        f"- command: `python benchmarks/acdc_pipeline.py --workdir {args.workdir}`; data: "
        f"`{args.data}`; python {platform.python_version()}, {os.cpu_count()} CPUs (wall "
        "times grow with whatever else runs; CPU times are the process's own)"
    )
    say()
    seg = segmentation(work, data, args.full_profile)
    diag = diagnosis(work, data, seg["masks"])
    audit = (
        None
        if args.skip_audit
        else withdrawal(work, data, args.n_references, args.refmodel_only, args.fewer_references)
    )
    fed = None if args.skip_federation else federation(args.data, work)
    report(seg, diag, audit, fed)
    if args.out:
        write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
