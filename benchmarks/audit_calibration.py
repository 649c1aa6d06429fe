"""Error rates of the reference-model auditor over many trainings: every model redrawn.

For each data set and seed, the data are cut afresh and a target, a second target and 8
reference models are trained; query sets D_Q are then drawn many times and audited with
the product's decision (:mod:`monai_forget.audit.refmodel`). Rates are pooled over the
seeds' trainings (so they include the training-to-training spread) and given with 95 %
Wilson intervals and the range of the per-training rates.

Data (``$MONAI_FORGET_DATA``; deduplicated by content, source A permuted per seed)
    ===============  =================================  ==================================
    data set         source A (the consortium's)        source B (another site)
    ===============  =================================  ==================================
    MNIST test set   the first 5,000 (NIST SD-3:        the last 5,000 (NIST SD-1: high
                     Census Bureau employees)           school students; LeCun's notes)
    PneumoniaMNIST   train + val splits (5,232)         test split (624, collected apart)
    ===============  =================================  ==================================

    Source A, per seed: the target's training set (1,500: 500 known members, 1,000 for
    member queries), never-seen queries (1,000 MNIST, 1,100 PneumoniaMNIST), 1,000 known
    non-members, and the population P (the rest) on which reference model k trains on a
    seeded half (``monai_forget.shadow.reference_jobs``). The auditor never has data of
    source B besides D_Q.

Cells (the remembered share of D_Q x |D_Q|)
    - ``same``: D_Q from source A, a share in {0, 0.1, 0.25, 0.5, 1} of it from the
      target's training set, |D_Q| in {20, 50, 200, 1000}.
    - ``other site``: D_Q from source B, which the target never saw (a provider whose
      site no known non-member comes from), |D_Q| in {20, 50, 200, 600 or 1000}.
    - ``other site, trained on it``: a second target trained on the same set plus part of
      source B (1,000 MNIST, 300 PneumoniaMNIST images); D_Q from source B, a share in
      {0, 0.25, 0.5, 1} of it from those images, |D_Q| in {20, 50, 200}.

    Decisions at margins 0.1, 0.25 and 0.5 (alpha 0.05). An error is "forgotten" when the
    true share is at or above the margin, and "not forgotten" on a never-seen D_Q.

Development seeds (``--dev-seeds``, 100 and 101) chose the per-sample score and its
coefficient, the upper bound's variance and the default margin; the rates are measured on
``--seeds`` (0-14), which chose nothing. The per-sample signal table compares the scores
on the known members and non-members of every training.

Run (15 trainings per data set: about 90 minutes on 2 cores, a data set per process;
models, outputs and each training's cells are cached in ``--cache-dir``, so a stopped run
resumes)::

    python benchmarks/audit_calibration.py --out benchmarks/results/audit_calibration.md \\
        --error-rates monai_forget/audit/measured_error_rates.json
    python benchmarks/audit_calibration.py --quick   # one seed, few draws: a smoke test
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from sklearn.metrics import roc_auc_score, roc_curve

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _markdown import say, write
from _refmodel_cells import (
    ALPHA,
    COLUMNS,
    DATASETS,
    MARGINS,
    Audit,
    add_training_options,
    cells,
    cluster_interval,
    error_rate_rows,
    package_error_rates,
    pooled,
    rate,
    run_training,
    training,
    true_class_probability_all,
)

from monai_forget.audit.refmodel import logit_confidence, rmia_scores
from monai_forget.audit.remembered_share import KnownSets, needed_sizes

#: RMIA's offline coefficients compared on the development seeds.
RMIA_COEFFICIENTS = (0.0, 0.2, 0.3, 0.5, 0.7, 1.0)


def signal(run: dict[str, np.ndarray]) -> dict[str, list[float]]:
    """AUC and TPR at 1 % FPR of each per-sample score, known members vs non-members."""
    index = np.concatenate([run["role_members"], run["role_nonmembers"]])
    truth = np.r_[np.ones(len(run["role_members"])), np.zeros(len(run["role_nonmembers"]))]
    probs, labels = run["probs_a"][:, index], run["labels_a"][index]
    p = true_class_probability_all(probs, labels)
    phi = np.stack([logit_confidence(m, labels) for m in probs])
    target, refs, phi_refs = p[0], p[2:], phi[2:]
    ratio = rmia_scores(target, refs.mean(0))
    # RMIA as ML Privacy Meter scores it: the share of population samples z (here the
    # never-seen pool) whose ratio this sample's beats (gamma 1)
    z = run["role_never"]
    z_p = true_class_probability_all(run["probs_a"][:, z], run["labels_a"][z])
    z_ratio = np.sort(rmia_scores(z_p[0], z_p[2:].mean(0)))
    scores = {
        "RMIA offline (default)": ratio,
        "RMIA offline, pairwise with population z (ML Privacy Meter)": (
            np.searchsorted(z_ratio, ratio, side="left") / z_ratio.size
        ),
        "LiRA offline, fixed variance (before)": phi[0] - phi_refs.mean(0),
        "LiRA offline, per-example variance": (phi[0] - phi_refs.mean(0))
        / np.maximum(phi_refs.std(0, ddof=1), 1e-3),
        "loss (no reference models)": np.log(np.maximum(target, 1e-300)),
    }
    out = {}
    for name, score in scores.items():
        fpr, tpr, _ = roc_curve(truth, score)
        out[name] = [float(roc_auc_score(truth, score)), float(np.interp(0.01, fpr, tpr))]
    return out


def reach(dataset: str, seed: int, args: argparse.Namespace) -> list[float]:
    """The |D_Q| needed at each margin for 80 % power to certify a forgotten D_Q
    (``needed_sizes`` on the training's known sets)."""
    run = training(dataset, seed, Path(args.cache_dir), args.references)
    calibration = Audit.of(run, 0, seed).calibration
    known = KnownSets.of(calibration.members, calibration.nonmembers)
    return [needed_sizes(known, 20, margin, ALPHA, 0.8)["query"] for margin in MARGINS]


def _size(value: float) -> str:
    return "none" if not np.isfinite(value) else f"{value:.0f}"


def rmia_coefficient_scan(run: dict[str, np.ndarray]) -> dict[float, list[float]]:
    """AUC and TPR at 1 % FPR of RMIA's offline score at each coefficient ``a`` (how the
    default ``RMIA_OFFLINE_A`` was chosen, on the development seeds only)."""
    index = np.concatenate([run["role_members"], run["role_nonmembers"]])
    truth = np.r_[np.ones(len(run["role_members"])), np.zeros(len(run["role_nonmembers"]))]
    p = true_class_probability_all(run["probs_a"][:, index], run["labels_a"][index])
    out = {}
    for a in RMIA_COEFFICIENTS:
        score = rmia_scores(p[0], p[2:].mean(0), a)
        fpr, tpr, _ = roc_curve(truth, score)
        out[a] = [float(roc_auc_score(truth, score)), float(np.interp(0.01, fpr, tpr))]
    return out


def report(dataset: str, results: dict[int, dict], args: argparse.Namespace) -> list[dict]:
    """The data set's tables; returns the rows of the report's JSON."""
    name, rows = DATASETS[dataset], []
    say(f"## {name}: {len(results)} trainings (seeds {', '.join(map(str, results))})")
    say()
    say(
        "Per-sample signal of each score on the known members vs non-members (mean over "
        "trainings, min-max in brackets):"
    )
    say()
    say("| score | AUC | TPR at 1 % FPR |")
    say("|---|---|---|")
    signals = {seed: signal(training(dataset, seed, Path(args.cache_dir), args.references))
               for seed in results}  # fmt: skip
    for score in next(iter(signals.values())):
        auc_, tpr = (np.array([s[score][i] for s in signals.values()]) for i in (0, 1))
        say(
            f"| {score} | {auc_.mean():.3f} [{auc_.min():.3f}-{auc_.max():.3f}] | "
            f"{tpr.mean():.3f} [{tpr.min():.3f}-{tpr.max():.3f}] |"
        )
    say()
    say(
        'Where "forgotten" is within reach: the |D_Q| at which a wholly forgotten D_Q '
        "would be certified in 80 % of audits (the power formula on each training's known "
        "sets: 500 members, 1,000 non-members; median over trainings, min-max in brackets):"
    )
    say()
    say("| margin | \\|D_Q\\| needed |")
    say("|---|---|")
    needed = np.array([reach(dataset, seed, args) for seed in results])
    for j, margin in enumerate(MARGINS):
        column = needed[:, j]
        say(
            f"| {margin:g} | {_size(np.median(column))} [{_size(column.min())}-"
            f"{_size(column.max())}] |"
        )
    say()
    say(
        "Decision rates at margin 0.5, pooled over the trainings, with two 95 % intervals: "
        "Wilson's (the draws as independent) and a cluster bootstrap over the trainings "
        "(draws of one training share its models and known sets, and at |D_Q| 1000 most of "
        "their samples); in brackets the lowest and highest per-training rate. 'Bound "
        "covers' is the share of audits whose upper bound is at or above the true share; "
        'the last columns give "forgotten" at margins 0.25 and 0.1.'
    )
    say()
    say(
        "| D_Q source | share | \\|D_Q\\| | draws | not forgotten | forgotten | inconclusive | "
        "bound covers | forgotten @0.25 | forgotten @0.1 |"
    )
    say("|---|---|---|---|---|---|---|---|---|---|")
    for source, share, size in cells(dataset):
        key = f"{source}|{share}|{size}"
        cols = []
        for margin, decision in COLUMNS:
            count, n, per = pooled(results, key, f"{margin}|{decision}")
            each = [c / d for c, d in per]
            cols.append(f"{rate(count, n, per)} ({min(each):.2f}-{max(each):.2f})")
        covered, n, _ = pooled(results, key, "covered")
        say(
            f"| {source} | {share:g} | {size} | {n} | {cols[0]} | {cols[1]} | {cols[2]} | "
            f"{covered / n:.3f} | {cols[3]} | {cols[4]} |"
        )
        rows += error_rate_rows(name, results, (source, share, size))
    say()
    return rows


def targets(rows: list[dict], signals: dict[str, dict[str, list[float]]]) -> None:
    """Issue 32's targets, marked as measured (rows pooled over the trainings)."""

    def rate_of(row: dict, decision: str) -> float:
        return row[decision]["rate"]

    def bounds(row: dict, decision: str) -> tuple[float, float, float]:
        """Wilson's (low, high) and the cluster bootstrap's high."""
        per = row["per_training"][decision]
        each = [row["draws"] // row["trainings"]] * len(per)
        low, high = row[decision]["low"], row[decision]["high"]  # Wilson's
        return low, high, cluster_interval(per, each)[1]

    def where(row: dict) -> str:
        return (f"{row['dataset']}, {row['source']}, share {row['share']:g}, "
                f"|D_Q| {row['size']}, margin {row['margin']:g}")  # fmt: skip

    say("## Targets")
    say()
    wrong = [r for r in rows if r["share"] >= r["margin"] and r["source"] == "same"]
    worst = max(wrong, key=lambda r: rate_of(r, "forgotten"))
    widest = max(wrong, key=lambda r: bounds(r, "forgotten")[1])
    clustered = max(wrong, key=lambda r: bounds(r, "forgotten")[2])
    if rate_of(worst, "forgotten") <= ALPHA and bounds(widest, "forgotten")[1] <= 0.1:
        verdict = "**met**"
    elif all(bounds(r, "forgotten")[0] <= ALPHA for r in wrong) and (
        bounds(widest, "forgotten")[1] <= 0.1
    ):
        verdict = "**met within sampling error** (no cell significantly above alpha)"
    else:
        verdict = "**missed**"
    say(f'- false "forgotten" <= 0.05 in every cell with a true share >= the margin, Wilson '
        f"upper bound <= 0.1: worst rate {rate_of(worst, 'forgotten'):.3f} ({where(worst)}); "
        f"worst Wilson upper bound {bounds(widest, 'forgotten')[1]:.3f} ({where(widest)}): "
        f"{verdict}. The cluster bootstrap over trainings is wider "
        f"where draws share their samples: worst {bounds(clustered, 'forgotten')[2]:.3f} "
        f"({where(clustered)})")  # fmt: skip
    nulls = [r for r in rows if r["share"] == 0 and r["margin"] == 0.5]
    for source in ("same", "other site", "other site, trained on it"):
        mine = [r for r in nulls if r["source"] == source]
        worst = max(mine, key=lambda r: rate_of(r, "not_forgotten"))
        low, high, _ = bounds(worst, "not_forgotten")
        if all(rate_of(r, "not_forgotten") <= ALPHA for r in mine):
            verdict = "**met**"
        elif all(bounds(r, "not_forgotten")[0] <= ALPHA for r in mine):
            verdict = "**met within sampling error** (no cell significantly above alpha)"
        else:
            verdict = "**missed**"
        say(f'- false "not forgotten" on never-seen sets <= alpha ({source}): worst '
            f"{rate_of(worst, 'not_forgotten'):.3f} [{low:.3f}, {high:.3f}] ({where(worst)}): "
            f"{verdict}")  # fmt: skip
    checks = [
        (1.0, 50, "not_forgotten", 0.70),
        (1.0, 200, "not_forgotten", 0.95),
        (0.0, 200, "forgotten", 0.50),
        (0.0, 1000, "forgotten", 0.90),
    ]
    for share, size, decision, goal in checks:
        key = ("PneumoniaMNIST", "same", share, size, 0.5)
        row = next((r for r in rows if (r["dataset"], r["source"], r["share"], r["size"],
                                        r["margin"]) == key), None)  # fmt: skip
        if row is None:
            say(f"- PneumoniaMNIST share {share:g}, |D_Q| {size}: not measured: **missed**")
            continue
        got = rate_of(row, decision)
        say(f'- PneumoniaMNIST sets with share {share:g} called "{decision.replace("_", " ")}" '
            f"(margin 0.5) at |D_Q| {size}: {got:.3f} (goal >= {goal:g}): "
            f"{'**met**' if got >= goal else '**missed**'}")  # fmt: skip
    for name, signal in signals.items():
        default = signal["RMIA offline (default)"]
        rmia = signal["RMIA offline, pairwise with population z (ML Privacy Meter)"]
        say(f"- {name}: per-sample AUC of the default score {default[0]:.3f} >= RMIA offline's "
            f"as ML Privacy Meter scores it, {rmia[0]:.3f}: "
            f"{'**met**' if default[0] >= rmia[0] else '**missed**'}; TPR at 1 % FPR "
            f"{default[1]:.3f}"
            + (f" (goal >= 0.03): {'**met**' if default[1] >= 0.03 else '**missed**'}"
               if name == "PneumoniaMNIST" else ""))  # fmt: skip
    say()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_training_options(parser, seeds=15)
    parser.add_argument("--dev-seeds", nargs="*", type=int, default=[100, 101])
    parser.add_argument("--error-rates", help="write the report's rows into this JSON")
    parser.add_argument("--quick", action="store_true", help="one seed, 10 draws")
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.dev_seeds, args.draws = args.seeds[:1], [], 10
    torch.set_num_threads(args.threads)
    say("# The reference-model auditor's error rates over many trainings")
    say()
    command = " ".join(sys.argv[1:] if argv is None else argv)
    say(
        f"`python benchmarks/audit_calibration.py {command}`"
        f"; {args.references} reference models, alpha {ALPHA}, RMIA offline score, "
        f"{args.draws} draws per cell and training, permutation tests of 999 relabellings."
    )
    say()
    rows, signals = [], {}
    for dataset in args.datasets:
        results = {seed: run_training(dataset, seed, args) for seed in args.seeds}
        per = [signal(training(dataset, s, Path(args.cache_dir), args.references)) for s in results]
        signals[DATASETS[dataset]] = {
            score: list(np.mean([x[score] for x in per], axis=0)) for score in per[0]
        }
        rows += report(dataset, results, args)
        if args.dev_seeds:
            dev = {seed: run_training(dataset, seed, args) for seed in args.dev_seeds}
            say(f"### {DATASETS[dataset]}: development seeds (chose the design; not counted)")
            say()
            scans = [rmia_coefficient_scan(training(dataset, seed, Path(args.cache_dir),
                                                   args.references)) for seed in dev]  # fmt: skip
            say("RMIA's offline coefficient a (mean AUC / TPR at 1 % FPR over these seeds):")
            say()
            say("| a | AUC | TPR at 1 % FPR |")
            say("|---|---|---|")
            for a in RMIA_COEFFICIENTS:
                auc_, tpr = np.mean([scan[a] for scan in scans], axis=0)
                say(f"| {a:g} | {auc_:.3f} | {tpr:.3f} |")
            say()
            report(dataset, dev, args)
    targets(rows, signals)
    if args.out:
        write(args.out)
    if args.error_rates:
        source = (
            f"benchmarks/audit_calibration.py: {len(args.seeds)} trainings per data set, "
            f"{args.references} reference models"
        )
        package_error_rates(Path(args.error_rates), rows, "offline", source)
    return 0


if __name__ == "__main__":
    sys.exit(main())
