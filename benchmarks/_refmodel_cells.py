"""The reference-model auditor's calibration trainings and their cells, shared by the
benchmarks that measure its error rates (``audit_calibration.py``,
``audit_calibration_online.py``, ``audit_site_shift.py``, ``acdc_audit_calibration.py``,
``hidden_shift_real.py``):
the data sets and their cut, one training's models and outputs (cached), the seeded D_Q
draws of every cell, the product's decision on each, and the pooled rates with their
intervals. ``audit_calibration.py``'s docstring describes the design."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np
import scipy.stats
from _common import MNIST_RECIPE, PNEUMONIA_RECIPE, unique_images
from _markdown import log

from monai_forget.audit import FORGOTTEN, INCONCLUSIVE, NOT_FORGOTTEN
from monai_forget.audit.refmodel import (
    RMIA_OFFLINE_A,
    MembershipCalibration,
    both_designs,
    refmodel_decision,
    rmia_scores,
    set_test,
    true_class_probability,
)
from monai_forget.audit.shift_check import SHIFT_LEVEL, ShiftCheck, shift_features, shift_pvalue
from monai_forget.data import concat, data_root, load_mnist_test, load_pneumoniamnist
from monai_forget.inference import predict
from monai_forget.rates import measured_rate
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
#: RMIA's coefficient when half the reference models trained on each sample (online).
ONLINE_A = 1.0
#: D_Q from another site of which the target trained on a few images (D_Q's remembered
#: ones among them): its never-seen images score below the known non-members.
FEW_TRAINED = "other site, a few of its images trained on"


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
    refs = trainer.train_many(sets, seeds, workers=1)  # as one group (recipe's models)
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

    def decide(
        self, index: dict[str, np.ndarray], seed: int, tolerance: bool = False
    ) -> dict[str, object]:
        """Decisions at every margin, and the bound, for the D_Q made of ``index``;
        ``tolerance``: also the hidden-shift tolerance at the largest margin, and whether
        the shift check fired."""
        score = np.concatenate([self.pools[k][0][i] for k, i in index.items()])
        mu = np.concatenate([self.pools[k][1][i] for k, i in index.items()])
        test = set_test(
            score, self.calibration, alpha=ALPHA, margin=MARGINS[-1], n_resamples=999, seed=seed,
            with_tolerance=tolerance,
        )  # fmt: skip
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
        out = {"decisions": decisions, "upper": test.share_upper}
        if tolerance:
            out.update(tolerance=test.shift_tolerance, shifted=shift.shifted)
        return out


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
        # benchmarks/audit_site_shift.py: the second target trained on a few of B's images
        FEW_TRAINED: ("other_site_trained", "other_site_unseen"),
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
    joint: tuple[dict[str, np.ndarray], float] | None = None,
) -> dict[str, dict]:
    """Decision counts of the ``wanted`` cells over ``draws`` seeded D_Q draws each (the
    draws depend only on the seed and the cell, so two arms see the same D_Q). ``joint``:
    (another run of the same targets and pools, its RMIA coefficient): each D_Q is
    audited by both, and the answer is theirs where they agree
    (:func:`~monai_forget.audit.refmodel.both_designs`); the bound is the larger."""
    audits = {0: Audit.of(run, 0, seed, a), 1: Audit.of(run, 1, seed, a)}
    partners = None if joint is None else {t: Audit.of(joint[0], t, seed, joint[1]) for t in (0, 1)}
    counts: dict[str, dict] = {}
    for source, share, size in wanted:
        target = 0 if source in ("same", "other site") else 1
        audit = audits[target]
        rng = np.random.default_rng([seed, SHARES.index(share) if share in SHARES else 9, size])
        tally = {f"{m}|{d}": 0 for m in MARGINS for d in DECISIONS}
        covered = 0
        for i in range(draws):
            index = draw(source, share, size, audit, rng)
            outcome = audit.decide(index, seed=i)
            if partners is not None:
                other = partners[target].decide(index, seed=i)
                outcome = {
                    "decisions": {m: both_designs(d, other["decisions"][m])
                                  for m, d in outcome["decisions"].items()},
                    "upper": max(outcome["upper"], other["upper"]),
                }  # fmt: skip
            for margin, decision in outcome["decisions"].items():
                tally[f"{margin}|{decision}"] += 1
            covered += outcome["upper"] >= share
        counts[f"{source}|{share}|{size}"] = {**tally, "covered": covered, "draws": draws}
    return counts


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


def error_rate_rows(
    name: str, results: dict[int, dict], cell: tuple[str, float, int], setting: str = "offline"
) -> list[dict]:
    """The rows ``measured_error_rates.json`` packages for one cell, one per margin: each
    decision's pooled count and rate with its Wilson interval, as numbers
    (:func:`~monai_forget.rates.measured_rate`), and each training's counts."""
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
                **{d.replace(" ", "_"): measured_rate(got[d][0], n) for d in DECISIONS},
                "per_training": {d.replace(" ", "_"): [c for c, _ in got[d][2]] for d in DECISIONS},
            }
        )
    return rows


def package_error_rates(
    path: Path, rows: list[dict], setting: str, source: str, key: str | None = None
) -> None:
    """Replace the population design's rows of ``setting`` in the packaged error rates
    (``monai_forget/audit/measured_error_rates.json``) with ``rows``; the other designs'
    and settings' rows are kept, and with ``key`` so are the rows of (D_Q source, site
    given) pairs that ``rows`` lacks (another benchmark's). ``source`` names the run,
    under ``refmodel_<key or setting>_source``."""
    kept = json.loads(path.read_text()) if path.is_file() else {"cells": []}
    replaced = {(r["source"], bool(r.get("site"))) for r in rows} if key else None
    kept["cells"] = [
        r
        for r in kept["cells"]
        if not (
            r["auditor"] == "refmodel"
            and r.get("design") == "population"
            and r.get("setting", "offline") == setting
            and (replaced is None or (r["source"], bool(r.get("site"))) in replaced)
        )
    ] + rows
    kept[f"refmodel_{key or setting}_source"] = source
    path.write_text(json.dumps(kept, indent=1) + "\n")


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


#: Images of source B the third target trains on.
FEW = 100
SHIFT_SHARES = (0.0, 0.5, 1.0)


def few_training(dataset: str, seed: int, cache: Path, references: int) -> dict[str, np.ndarray]:
    """The training's outputs with the second target replaced by one trained on the same
    source-A set and :data:`FEW` of B's images (``b_train``), cached as
    ``<cache>/outputs/<dataset>_<seed>_<references>_few.npz``."""
    out = cache / "outputs" / f"{dataset}_{seed}_{references}_few.npz"
    if out.is_file():
        with np.load(out) as z:
            return {k: z[k] for k in z.files}
    run = training(dataset, seed, cache, references)
    recipe, a, b = sources(dataset)
    few = run["b_train"][:FEW]  # a seeded random draw of B (audit_calibration.training)
    log(f"{dataset} seed {seed}: training the target on {FEW} of the other site's images")
    target = ShadowTrainer(recipe, cache_dir=cache).train(
        concat(a.subset(run["role_target"]), b.subset(few)), seed=seed + 3
    )
    result = {**run, "b_train": few}
    for source, data in (("a", a), ("b", b)):
        probs = run[f"probs_{source}"].copy()
        probs[1] = predict(target, data).probs
        result[f"probs_{source}"] = probs
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(out, **result)
    return result
