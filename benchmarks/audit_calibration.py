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
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import scipy.stats
import torch
from sklearn.metrics import roc_auc_score, roc_curve

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import MNIST_RECIPE, PNEUMONIA_RECIPE, unique_images
from _markdown import log, say, write

from monai_forget.audit import FORGOTTEN, INCONCLUSIVE, NOT_FORGOTTEN
from monai_forget.audit.refmodel import (
    RMIA_OFFLINE_A,
    MembershipCalibration,
    logit_confidence,
    refmodel_decision,
    rmia_scores,
    set_test,
    true_class_probability,
)
from monai_forget.audit.remembered_share import KnownSets, needed_sizes
from monai_forget.audit.shift_check import SHIFT_LEVEL, ShiftCheck, shift_features, shift_pvalue
from monai_forget.data import concat, data_root, load_mnist_test, load_pneumoniamnist
from monai_forget.inference import predict
from monai_forget.shadow import ShadowTrainer
from monai_forget.shadow.reference_jobs import reference_jobs

DATASETS = {"mnist": "MNIST", "pneumoniamnist": "PneumoniaMNIST"}
SHARES = (0.0, 0.1, 0.25, 0.5, 1.0)
SIZES = (20, 50, 200, 1000)
MARGINS = (0.1, 0.25, 0.5)
ALPHA = 0.05
CUT = {
    "mnist": {"target": 1500, "members": 500, "never": 1000, "nonmembers": 1000, "b_train": 1000},
    "pneumoniamnist": {
        "target": 1500,
        "members": 500,
        "never": 1100,
        "nonmembers": 1000,
        "b_train": 300,
    },
}
DECISIONS = (FORGOTTEN, NOT_FORGOTTEN, INCONCLUSIVE)
#: The (margin, decision) rates of a report row.
COLUMNS = (
    (0.5, NOT_FORGOTTEN),
    (0.5, FORGOTTEN),
    (0.5, INCONCLUSIVE),
    (0.25, FORGOTTEN),
    (0.1, FORGOTTEN),
)
#: RMIA's offline coefficients compared on the development seeds.
RMIA_COEFFICIENTS = (0.0, 0.2, 0.3, 0.5, 0.7, 1.0)


def sources(dataset: str):
    """(recipe, source A, source B), each deduplicated, B without A's images."""
    root = data_root()
    if dataset == "mnist":
        digits = load_mnist_test(root)
        a, b = digits.subset(slice(0, 5000)), digits.subset(slice(5000, 10000))
        recipe = MNIST_RECIPE
    else:
        a = concat(load_pneumoniamnist("train", root=root), load_pneumoniamnist("val", root=root))
        b = load_pneumoniamnist("test", root=root)
        recipe = PNEUMONIA_RECIPE
    a, b = unique_images(a), unique_images(b)
    return recipe, a, b.subset(~np.isin(b.sample_hashes, a.sample_hashes))


def training(dataset: str, seed: int, cache: Path, references: int) -> dict[str, np.ndarray]:
    """One training of the benchmark: every model's softmax on every image of both
    sources, and the cut (cached as ``<cache>/outputs/<dataset>_<seed>.npz``)."""
    out = cache / "outputs" / f"{dataset}_{seed}_{references}.npz"
    if out.is_file():
        with np.load(out) as z:
            return {k: z[k] for k in z.files}
    recipe, a, b = sources(dataset)
    size = CUT[dataset]
    order = np.random.default_rng(seed).permutation(len(a))
    edges = np.cumsum([0, size["target"], size["never"], size["nonmembers"]])
    roles = {
        "target": order[edges[0] : edges[1]],
        "never": order[edges[1] : edges[2]],
        "nonmembers": order[edges[2] : edges[3]],
        "population": order[edges[3] :],
    }
    roles["members"] = roles["target"][: size["members"]]
    roles["member_pool"] = roles["target"][size["members"] :]
    b_train = np.random.default_rng([seed, 7]).permutation(len(b))[: size["b_train"]]
    trainer = ShadowTrainer(recipe, cache_dir=cache)
    log(f"{dataset} seed {seed}: training the targets and {references} reference models")
    target = trainer.train(a.subset(roles["target"]), seed=seed + 1)
    target_b = trainer.train(concat(a.subset(roles["target"]), b.subset(b_train)), seed=seed + 2)
    sets, seeds = reference_jobs(a.subset(roles["population"]), range(references), 0.5, seed + 1000)
    refs = [trainer.train(d, seed=s) for d, s in zip(sets, seeds, strict=True)]
    models = [target, target_b, *refs]
    result = {
        "probs_a": np.stack([predict(m, a).probs for m in models]),
        "probs_b": np.stack([predict(m, b).probs for m in models]),
        "labels_a": a.labels,
        "labels_b": b.labels,
        "b_train": b_train,
        **{f"role_{k}": v for k, v in roles.items()},
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(out, **result)
    return result


@dataclasses.dataclass
class Audit:
    """What every draw of one training and target needs, computed once."""

    calibration: MembershipCalibration
    # pool -> (target score, shift features, labels)
    pools: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]
    nonmember_mu: np.ndarray
    nonmember_labels: np.ndarray
    member_shift_p: float  # the members' shift p-value: one per training

    @classmethod
    def of(
        cls, run: dict[str, np.ndarray], target: int, seed: int, a: float = RMIA_OFFLINE_A
    ) -> Audit:
        """``target`` 0: trained on source A only; 1: also on part of source B; ``a``:
        RMIA's coefficient (1 for reference models of the online setting)."""
        pools = {}
        for source in ("a", "b"):
            p = true_class_probability_all(run[f"probs_{source}"], run[f"labels_{source}"])
            # the product's score and shift check (RefModelReference.scores and .shift)
            pools[source] = (
                rmia_scores(p[target], p[2:].mean(axis=0), a),
                shift_features("rmia", p[2:], run[f"probs_{source}"][2:]),
                run[f"labels_{source}"],
            )
        a_score, a_mu, a_labels = pools["a"]
        m, n = run["role_members"], run["role_nonmembers"]
        # images of source B given to the reference models are never drawn into D_Q
        b_drawn = np.setdiff1d(np.arange(len(run["labels_b"])), run.get("b_reference", []))
        b_others = np.setdiff1d(b_drawn, run["b_train"])
        named = {
            "member_pool": ("a", run["role_member_pool"]),
            "never": ("a", run["role_never"]),
            "other_site": ("b", b_drawn),
            "other_site_trained": ("b", run["b_train"]),
            "other_site_unseen": ("b", b_others),
        }
        return cls(
            MembershipCalibration.fit(a_score[m], a_score[n], seed),
            {k: tuple(v[i] for v in pools[s]) for k, (s, i) in named.items()},
            a_mu[n],
            a_labels[n],
            shift_pvalue(a_mu[m], a_mu[n], (a_labels[m], a_labels[n])),
        )

    def decide(self, index: dict[str, np.ndarray], seed: int) -> dict[str, object]:
        """Decisions at every margin, and the bound, for the D_Q made of ``index``."""
        score = np.concatenate([self.pools[k][0][i] for k, i in index.items()])
        mu = np.concatenate([self.pools[k][1][i] for k, i in index.items()])
        test = set_test(
            score, self.calibration, alpha=ALPHA, margin=MARGINS[-1], n_resamples=999, seed=seed
        )
        labels = np.concatenate([self.pools[k][2][i] for k, i in index.items()])
        # the product's shift_check, the members' half computed once per training
        shift = ShiftCheck(
            shift_pvalue(mu, self.nonmember_mu, (labels, self.nonmember_labels)),
            self.member_shift_p,
            SHIFT_LEVEL,
        )
        decisions = {
            margin: refmodel_decision(dataclasses.replace(test, margin=margin), ALPHA, shift)
            for margin in MARGINS
        }
        return {"decisions": decisions, "upper": test.share_upper}


def true_class_probability_all(probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """``(models, N)`` true-class probabilities of ``(models, N, C)`` softmax outputs."""
    return np.stack([true_class_probability(p, labels) for p in probs])


def cells(dataset: str) -> list[tuple[str, float, int]]:
    """(source, share, |D_Q|) of every cell."""
    other = 600 if dataset == "pneumoniamnist" else 1000
    out = [("same", share, size) for share in SHARES for size in SIZES]
    out += [("other site", 0.0, size) for size in (20, 50, 200, other)]
    out += [("other site, trained on it", s, n) for s in (0.0, 0.25, 0.5, 1.0) for n in SIZES[:3]]
    return out


def draw(source: str, share: float, size: int, audit: Audit, rng: np.random.Generator) -> dict:
    """Indices into the pools for one D_Q of the cell."""
    remembered = round(share * size)
    member_pool, null_pool = {
        "same": ("member_pool", "never"),
        "other site": (None, "other_site"),
        "other site, trained on it": ("other_site_trained", "other_site_unseen"),
    }[source]
    index = {}
    if remembered:
        index[member_pool] = rng.choice(len(audit.pools[member_pool][0]), remembered, False)
    index[null_pool] = rng.choice(len(audit.pools[null_pool][0]), size - remembered, False)
    return {k: v for k, v in index.items() if len(v)}


def run_training(dataset: str, seed: int, args: argparse.Namespace) -> dict[str, dict]:
    """Every cell's decision counts for one training (cached in ``<cache>/cells``)."""
    store = Path(args.cache_dir) / "cells" / f"{dataset}_{seed}_{args.draws}.json"
    if store.is_file():
        return json.loads(store.read_text())
    run = training(dataset, seed, Path(args.cache_dir), args.references)
    counts = count_cells(run, cells(dataset), seed, args.draws)
    store.parent.mkdir(parents=True, exist_ok=True)
    store.write_text(json.dumps(counts, indent=1))
    log(f"{dataset} seed {seed}: cells done")
    return counts


def count_cells(
    run: dict[str, np.ndarray],
    wanted: list[tuple[str, float, int]],
    seed: int,
    draws: int,
    a: float = RMIA_OFFLINE_A,
) -> dict[str, dict]:
    """Decision counts of the ``wanted`` cells over ``draws`` seeded D_Q draws each (the
    draws depend only on the seed and the cell, so two arms see the same D_Q)."""
    audits = {0: Audit.of(run, 0, seed, a), 1: Audit.of(run, 1, seed, a)}
    counts: dict[str, dict] = {}
    for source, share, size in wanted:
        audit = audits[1 if source.endswith("trained on it") else 0]
        rng = np.random.default_rng([seed, SHARES.index(share) if share in SHARES else 9, size])
        tally = {f"{m}|{d}": 0 for m in MARGINS for d in DECISIONS}
        covered = 0
        for i in range(draws):
            outcome = audit.decide(draw(source, share, size, audit, rng), seed=i)
            for margin, decision in outcome["decisions"].items():
                tally[f"{margin}|{decision}"] += 1
            covered += outcome["upper"] >= share
        counts[f"{source}|{share}|{size}"] = {**tally, "covered": covered, "draws": draws}
    return counts


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


def wilson(count: int, n: int) -> tuple[float, float]:
    """95 % Wilson score interval (scipy.stats.binomtest), draws taken as independent."""
    ci = scipy.stats.binomtest(count, n).proportion_ci(0.95, method="wilson")
    return float(ci.low), float(ci.high)


def cluster_interval(counts: list[int], draws: list[int]) -> tuple[float, float]:
    """95 % interval of the pooled rate resampling whole trainings (percentile cluster
    bootstrap, 2,000 resamples): draws of one training share its models and known sets,
    and at large |D_Q| they share most of their samples, so they are not independent."""
    counts, draws = np.asarray(counts), np.asarray(draws)
    pick = np.random.default_rng(0).integers(0, counts.size, (2000, counts.size))
    rates = counts[pick].sum(axis=1) / draws[pick].sum(axis=1)
    low, high = np.percentile(rates, [2.5, 97.5])
    return float(low), float(high)


def rate(count: int, n: int, per: list[tuple[int, int]] | None = None) -> str:
    """The pooled rate, its Wilson interval and, with the per-training counts, the
    cluster bootstrap's."""
    low, high = wilson(count, n)
    text = f"{count / n:.3f} [{low:.3f}, {high:.3f}]"
    if per is not None:
        low, high = cluster_interval([c for c, _ in per], [d for _, d in per])
        text += f" [{low:.3f}, {high:.3f}]"
    return text


def pooled(results: dict[int, dict], key: str, field: str) -> tuple[int, int, list[tuple]]:
    """(count, draws, per-training (count, draws)) of one cell's field."""
    per = [(r[key][field], r[key]["draws"]) for r in results.values()]
    return sum(c for c, _ in per), sum(n for _, n in per), per


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


def error_rate_rows(
    name: str, results: dict[int, dict], cell: tuple[str, float, int], setting: str = "offline"
) -> list[dict]:
    """The rows ``measured_error_rates.json`` packages for one cell, one per margin: the
    pooled rates with their Wilson intervals, the counts and each training's counts."""
    source, share, size = cell
    key, rows = f"{source}|{share}|{size}", []
    for margin in MARGINS:
        got = {d: pooled(results, key, f"{margin}|{d}") for d in DECISIONS}
        n = got[DECISIONS[0]][1]
        rows.append(
            {
                "dataset": name,
                "auditor": "refmodel",
                "design": "population",
                "setting": setting,
                "source": source,
                "share": share,
                "size": size,
                "margin": margin,
                "trainings": len(results),
                "draws": n,
                **{d.replace(" ", "_"): rate(got[d][0], n) for d in DECISIONS},
                "counts": {d.replace(" ", "_"): got[d][0] for d in DECISIONS},
                "per_training": {d.replace(" ", "_"): [c for c, _ in got[d][2]] for d in DECISIONS},
            }
        )
    return rows


def package_error_rates(path: Path, rows: list[dict], setting: str, source: str) -> None:
    """Replace the population design's rows of ``setting`` in the packaged error rates
    (``monai_forget/audit/measured_error_rates.json``) with ``rows``; the other designs'
    and settings' rows are kept. ``source`` names the run, under ``<setting>_source``."""
    kept = json.loads(path.read_text()) if path.is_file() else {"cells": []}
    kept["cells"] = [
        r
        for r in kept["cells"]
        if not (
            r["auditor"] == "refmodel"
            and r.get("design") == "population"
            and r.get("setting", "offline") == setting
        )
    ] + rows
    kept[f"refmodel_{setting}_source"] = source
    path.write_text(json.dumps(kept, indent=1) + "\n")


def targets(rows: list[dict], signals: dict[str, dict[str, list[float]]]) -> None:
    """Issue 32's targets, marked as measured (rows pooled over the trainings)."""

    def rate_of(row: dict, decision: str) -> float:
        return row["counts"][decision] / row["draws"]

    def bounds(row: dict, decision: str) -> tuple[float, float, float]:
        """Wilson's (low, high) and the cluster bootstrap's high."""
        per = row["per_training"][decision]
        each = [row["draws"] // row["trainings"]] * len(per)
        low, high = wilson(row["counts"][decision], row["draws"])
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


def add_training_options(parser: argparse.ArgumentParser, seeds: int) -> None:
    """The options of the scripts that read this benchmark's trainings (seeds 0 to
    ``seeds`` - 1 by default)."""
    parser.add_argument("--datasets", nargs="+", choices=list(DATASETS), default=list(DATASETS))
    parser.add_argument("--seeds", nargs="+", type=int, default=list(range(seeds)))
    parser.add_argument("--references", type=int, default=8)
    parser.add_argument("--draws", type=int, default=100, help="draws per cell and training")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cache-dir", default="/tmp/monai-forget-audit-calibration")
    parser.add_argument("--out", help="also write the markdown here")


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
