"""The reference-model auditor's online setting against its offline default, measured on
the trainings of ``benchmarks/audit_calibration.py``.

Per data set and seed, the target, the known sets and every D_Q draw are those of
``audit_calibration.py``'s same-source cells (the draws are seeded by cell, so both arms
audit the same D_Q). Only the reference models differ:

- offline (the product's default, as there): 8 models, each on a seeded half of the
  population P, which holds no sample that is scored;
- online: the product's ``ReferenceModelAuditor(setting="online").reference_sets`` on
  all of source A (P, the known members and non-members, the target's other training
  images and the never-seen pool): 4 pairs on complementary halves, so every sample a
  D_Q draw can hold is in exactly 4 of the 8 models, and RMIA's ``Pr(x)`` is their mean.

The online models see samples of every D_Q, as a user's would; a user pays for them with
every query set (offline models serve any query set), and this script prints what they
cost here.

``--site``: the cells of D_Q from source B (another site; the second target trained on
part of it), with 8 more online models on pairs of halves of sources A *and* B: what a
user gets by giving D_Q's site's images as the reference models' population; and 8 more
offline models whose population also holds half of the site's images the target trained
on (never drawn into D_Q): the same remedy at the offline default's cost (trained once).
``--site-unseen N``: 8 more offline models whose population also holds N of the site's
images that the target never trained on (kept out of every D_Q): does giving the offline
models more of the site close the gap? ``--site-only`` leaves out the same-source online
arm.

Run (5 trainings per data set; the offline arm's models and cells are read from
``audit_calibration.py``'s cache, the online models are cached beside them)::

    python benchmarks/audit_calibration_online.py --site --cache-dir /work/scratch/cache/models \\
        --out benchmarks/results/audit_calibration_online.md

Each training's cells and signal are small JSON files in ``<cache>/cells``: trainings run
in separate processes or on other machines (``--seeds K`` each) are reported together by a
last run over all their seeds with those files in one cache (``--where`` names the
machines in the cost line). The same-source online arm over 15 MNIST trainings::

    python benchmarks/audit_calibration_online.py --datasets mnist --seeds 0 1 2 3 4 5 6 7 \\
        8 9 10 11 12 13 14 --out benchmarks/results/audit_calibration_online_mnist15.md

and the site's unseen images given to the offline models (MNIST, 5 trainings)::

    python benchmarks/audit_calibration_online.py --datasets mnist --site-only \\
        --site-unseen 1500 --out benchmarks/results/audit_calibration_online_site_unseen.md
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from sklearn.metrics import roc_auc_score, roc_curve

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _markdown import log, say, say_section, write
from _refmodel_cells import (
    ALPHA,
    COLUMNS,
    DATASETS,
    MARGINS,
    ONLINE_A,
    SHARES,
    SIZES,
    add_training_options,
    cells,
    cluster_interval,
    count_cells,
    error_rate_rows,
    package_error_rates,
    pooled,
    rate,
    run_training,
    sources,
    training,
    true_class_probability_all,
    wilson,
)

from monai_forget.audit import FORGOTTEN, INCONCLUSIVE, NOT_FORGOTTEN, ReferenceModelAuditor
from monai_forget.audit.refmodel import RMIA_OFFLINE_A, rmia_scores
from monai_forget.data import concat
from monai_forget.inference import predict
from monai_forget.shadow import ShadowTrainer
from monai_forget.shadow.reference_jobs import reference_jobs

SAME = [("same", share, size) for share in SHARES for size in SIZES]


def _with_references(
    run: dict[str, np.ndarray],
    dataset: str,
    sets: list,
    seeds: list,
    out: Path,
    seconds_key: str,
    **changes: np.ndarray,
) -> dict[str, np.ndarray]:
    """``run`` with its reference models' outputs replaced by models trained on ``sets``
    (the targets' rows kept), the training time under ``seconds_key`` and ``changes``
    applied; saved to ``out``."""
    recipe, a, b = sources(dataset)
    trainer = ShadowTrainer(recipe, cache_dir=out.parents[1])
    start = time.perf_counter()
    refs = trainer.train_many(sets, seeds, workers=1)  # as one group (recipe's models)
    result = {**run, **changes, seconds_key: np.array(time.perf_counter() - start)}
    for source, data in (("a", a), ("b", b)):
        result[f"probs_{source}"] = np.concatenate(
            [run[f"probs_{source}"][:2], np.stack([predict(m, data).probs for m in refs])]
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(out, **result)
    return result


def _load(out: Path) -> dict[str, np.ndarray] | None:
    if not out.is_file():
        return None
    with np.load(out) as z:
        return {k: z[k] for k in z.files}


def online_training(
    dataset: str, seed: int, cache: Path, references: int, site: bool = False
) -> dict[str, np.ndarray]:
    """The offline training's outputs with the reference models replaced by online ones
    on pairs of halves of source A (and of source B too with ``site``), cached as
    ``<cache>/outputs/<dataset>_<seed>_<references>_online[_site].npz``."""
    suffix = "_online_site" if site else "_online"
    out = cache / "outputs" / f"{dataset}_{seed}_{references}{suffix}.npz"
    cached = _load(out)
    if cached is not None:
        return cached
    run = training(dataset, seed, cache, references)
    recipe, a, b = sources(dataset)
    auditor = ReferenceModelAuditor(
        recipe=recipe, n_references=references, setting="online", seed=seed + 1000
    )
    sets, seeds = auditor.reference_sets(concat(a, b) if site else a)
    log(f"{dataset} seed {seed}: training {references} online reference models{suffix[7:]}")
    return _with_references(run, dataset, sets, seeds, out, "online_seconds")


def offline_site_training(
    dataset: str, seed: int, cache: Path, references: int, unseen: int = 0
) -> dict[str, np.ndarray]:
    """The offline training's outputs with the reference models replaced by offline ones
    whose population also holds half of the source-B images the second target trained
    on and ``unseen`` source-B images it never trained on (``b_reference``: the site's
    images a user gives; never drawn into D_Q, whose remembered samples come from the
    other half of the trained ones), cached as
    ``<cache>/outputs/<dataset>_<seed>_<references>_offline_site[_<unseen>].npz``."""
    suffix = f"_{unseen}" if unseen else ""
    out = cache / "outputs" / f"{dataset}_{seed}_{references}_offline_site{suffix}.npz"
    cached = _load(out)
    if cached is not None:
        return cached
    run = training(dataset, seed, cache, references)
    _, a, b = sources(dataset)
    order = np.random.default_rng([seed, 11]).permutation(run["b_train"])
    given, drawn = order[: len(order) // 2], order[len(order) // 2 :]
    never_trained = np.setdiff1d(np.arange(len(b)), run["b_train"])
    extra = np.random.default_rng([seed, 12]).choice(never_trained, unseen, replace=False)
    given = np.concatenate([given, extra])
    population = concat(a.subset(run["role_population"]), b.subset(given))
    sets, seeds = reference_jobs(population, range(references), 0.5, seed + 1000)
    log(f"{dataset} seed {seed}: training {references} offline reference models with the site")
    return _with_references(
        run, dataset, sets, seeds, out, "offline_site_seconds", b_train=drawn, b_reference=given
    )


def offline_site_cells(
    dataset: str, seed: int, args: argparse.Namespace, unseen: int = 0
) -> dict[str, dict]:
    """Decision counts with :func:`offline_site_training`'s reference models (cached):
    the same-source cells and the cells of D_Q from the site the target trained on that
    its remaining pools can fill."""
    suffix = f"_{unseen}" if unseen else ""
    name = f"{dataset}_{seed}_{args.draws}_offline_site{suffix}.json"
    store = Path(args.cache_dir) / "cells" / name
    if store.is_file():
        return json.loads(store.read_text())
    run = offline_site_training(dataset, seed, Path(args.cache_dir), args.references, unseen)
    trained, unseen = (
        len(run["b_train"]),
        len(run["labels_b"]) - len(run["b_reference"]) - len(run["b_train"]),
    )
    wanted = SAME + [
        (source, share, size)
        for source, share, size in cells(dataset)
        if source == "other site, trained on it"
        and round(share * size) <= trained
        and size - round(share * size) <= unseen
    ]
    counts = count_cells(run, wanted, seed, args.draws)
    store.parent.mkdir(parents=True, exist_ok=True)
    store.write_text(json.dumps(counts, indent=1))
    log(f"{dataset} seed {seed}: offline cells with the site done")
    return counts


def online_cells(
    dataset: str, seed: int, args: argparse.Namespace, site: bool = False
) -> dict[str, dict]:
    """Decision counts with online reference models (cached): the same-source cells, or
    with ``site`` the cells of D_Q from source B, the models trained on A and B."""
    suffix = "_online_site" if site else "_online"
    store = Path(args.cache_dir) / "cells" / f"{dataset}_{seed}_{args.draws}{suffix}.json"
    if store.is_file():
        return json.loads(store.read_text())
    run = online_training(dataset, seed, Path(args.cache_dir), args.references, site)
    wanted = [c for c in cells(dataset) if c[0] != "same"] if site else SAME
    counts = count_cells(run, wanted, seed, args.draws, ONLINE_A)
    store.parent.mkdir(parents=True, exist_ok=True)
    store.write_text(json.dumps(counts, indent=1))
    log(f"{dataset} seed {seed}: online cells{suffix[7:]} done")
    return counts


def signal(run: dict[str, np.ndarray], a: float) -> tuple[float, float]:
    """AUC and TPR at 1 % FPR of RMIA's score, the known members vs non-members."""
    index = np.concatenate([run["role_members"], run["role_nonmembers"]])
    truth = np.r_[np.ones(len(run["role_members"])), np.zeros(len(run["role_nonmembers"]))]
    p = true_class_probability_all(run["probs_a"][:, index], run["labels_a"][index])
    score = rmia_scores(p[0], p[2:].mean(0), a)
    fpr, tpr, _ = roc_curve(truth, score)
    return float(roc_auc_score(truth, score)), float(np.interp(0.01, fpr, tpr))


def signals(dataset: str, seed: int, args: argparse.Namespace) -> dict[str, object]:
    """One training's per-sample signal in both arms and the online models' training
    time, cached as ``<cache>/cells/<dataset>_<seed>_<references>_signal.json`` (small:
    a report over trainings run on several machines needs only these and the cells)."""
    store = Path(args.cache_dir) / "cells" / f"{dataset}_{seed}_{args.references}_signal.json"
    if store.is_file():
        return json.loads(store.read_text())
    cache = Path(args.cache_dir)
    online = online_training(dataset, seed, cache, args.references)
    record = {
        "offline": signal(training(dataset, seed, cache, args.references), RMIA_OFFLINE_A),
        "online": signal(online, ONLINE_A),
        "online_seconds": float(online["online_seconds"]),
    }
    store.parent.mkdir(parents=True, exist_ok=True)
    store.write_text(json.dumps(record))
    return record


def report(
    dataset: str, offline: dict[int, dict], online: dict[int, dict], args
) -> tuple[list[str], list[dict]]:
    """The data set's tables; returns the target lines and the online arm's rows for
    ``measured_error_rates.json``."""
    name = DATASETS[dataset]
    say(f"## {name}: {len(online)} trainings (seeds {', '.join(map(str, online))})")
    say()
    records = [signals(dataset, s, args) for s in online]
    say("Per-sample signal of RMIA's score, known members vs non-members (mean [min-max]):")
    say()
    say("| reference models | AUC | TPR at 1 % FPR |")
    say("|---|---|---|")
    for label, arm in (("offline (default)", "offline"), ("online", "online")):
        got = np.array([r[arm] for r in records])
        say(
            f"| {label} | {got[:, 0].mean():.3f} [{got[:, 0].min():.3f}-{got[:, 0].max():.3f}] "
            f"| {got[:, 1].mean():.3f} [{got[:, 1].min():.3f}-{got[:, 1].max():.3f}] |"
        )
    seconds = [r["online_seconds"] for r in records]
    say()
    say(
        f"Cost: the {args.references} online reference models took {np.mean(seconds):.0f} s "
        f"per training ({min(seconds):.0f}-{max(seconds):.0f} s, 1 thread, timed when first "
        f"trained; {args.where}), paid again for every query set; the offline ones are "
        "trained once and serve every query set."
    )
    say()
    say(
        "Decision rates at margin 0.5 over the same D_Q draws, pooled over the trainings "
        '(95 % Wilson interval, then the cluster bootstrap over trainings); "forgotten" '
        "at margins 0.25 and 0.1 in the last columns:"
    )
    say()
    say(
        "| share | \\|D_Q\\| | draws | arm | not forgotten | forgotten | inconclusive | "
        "forgotten @0.25 | forgotten @0.1 |"
    )
    say("|---|---|---|---|---|---|---|---|---|")
    lines = []
    for _, share, size in SAME:
        key = f"same|{share}|{size}"
        for label, arm in (("offline", offline), ("online", online)):
            cols = []
            for margin, decision in COLUMNS:
                count, n, per = pooled(arm, key, f"{margin}|{decision}")
                cols.append(rate(count, n, per))
            say(f"| {share:g} | {size} | {n} | {label} | " + " | ".join(cols) + " |")
    say()
    # the targets, for the online arm, marked as audit_calibration.py marks the offline's
    wrong = [(share, size, m) for _, share, size in SAME for m in MARGINS if share >= m]
    got = {c: pooled(online, f"same|{c[0]}|{c[1]}", f"{c[2]}|{FORGOTTEN}") for c in wrong}
    worst = max(wrong, key=lambda c: got[c][0] / got[c][1])
    count, n, _ = got[worst]
    high = max(wilson(*got[c][:2])[1] for c in wrong)
    clustered = max(
        cluster_interval([k for k, _ in got[c][2]], [d for _, d in got[c][2]])[1] for c in wrong
    )
    if count / n <= ALPHA and high <= 0.1:
        verdict = "**met**"
    elif high <= 0.1 and all(wilson(*got[c][:2])[0] <= ALPHA for c in wrong):
        verdict = "**met within sampling error** (no cell significantly above alpha)"
    else:
        verdict = "**missed**"
    lines.append(
        f'- {name}, online: false "forgotten" in every cell with a true share >= the margin: '
        f"worst {count / n:.3f} (share {worst[0]:g}, |D_Q| {worst[1]}, margin {worst[2]:g}), "
        f"worst Wilson upper bound {high:.3f}: {verdict}; the cluster bootstrap over "
        f"trainings is wider where draws share their samples: worst {clustered:.3f}"
    )
    nulls = [(f"same|0.0|{size}", size) for size in SIZES]
    rates = [pooled(online, k, f"0.5|{NOT_FORGOTTEN}")[:2] for k, _ in nulls]
    worst_null = max(range(len(rates)), key=lambda i: rates[i][0] / rates[i][1])
    c, n = rates[worst_null]
    low = wilson(c, n)[0]
    verdict = (
        "**met**"
        if c / n <= ALPHA
        else ("**met within sampling error**" if low <= ALPHA else "**missed**")
    )
    lines.append(
        f'- {name}, online: false "not forgotten" on never-seen sets <= alpha: worst '
        f"{c / n:.3f} (|D_Q| {nulls[worst_null][1]}): {verdict}"
    )
    return lines, [row for cell in SAME for row in error_rate_rows(name, online, cell, "online")]


#: What each arm of :func:`site_report` gives the reference models of D_Q's site.
WITH_SITE = (
    "the product's default offline models, with half of the site's images that the target "
    "trained on added to their population (D_Q's remembered samples are drawn from the other "
    "half; its never-seen ones from the same pool as the other arms, so share-0 draws are the "
    "same D_Q)"
)
WITH_UNSEEN = (
    "the same, and {n} of the site's images that the target never trained on (kept out of "
    "every D_Q: its never-seen draws come from a pool {n} images smaller)"
)
ONLINE_WITH_SITE = "pairs of halves of sources A and B, D_Q among them"


def site_report(dataset: str, arms: list[tuple[str, str, dict[int, dict]]]) -> list[str]:
    """D_Q from source B: offline models that never saw B (the first of ``arms``) against
    the other ``arms`` (label, what they give the reference models, cells), which give the
    reference models images of the site; returns the target lines."""
    name = DATASETS[dataset]
    say(f"### {name}: D_Q from another site, with reference models that trained on that site")
    say()
    given = [f"*{label}*: {description}" for label, description, _ in arms[1:]]
    say(
        "Ways a user gives the reference models D_Q's site (the known non-members are still "
        f"from source A): {'; '.join(given)}. Margin 0.5:"
    )
    say()
    arms = [(label, counts) for label, _, counts in arms]
    say("| D_Q source | share | \\|D_Q\\| | arm | not forgotten | forgotten | inconclusive |")
    say("|---|---|---|---|---|---|---|")
    for source, share, size in (c for c in cells(dataset) if c[0] != "same"):
        key = f"{source}|{share}|{size}"
        for label, arm in arms:
            if key not in next(iter(arm.values())):
                continue  # the offline arm with the site keeps too few of B's images
            cols = [
                rate(*pooled(arm, key, f"0.5|{d}"))
                for d in (NOT_FORGOTTEN, FORGOTTEN, INCONCLUSIVE)
            ]
            say(f"| {source} | {share:g} | {size} | {label} | " + " | ".join(cols) + " |")
    say()
    lines = []
    for source in ("other site", "other site, trained on it"):
        for label, arm in arms:
            keys = [f"{src}|{share}|{size}" for src, share, size in cells(dataset)
                    if src == source and share == 0]  # fmt: skip
            keys = [k for k in keys if k in next(iter(arm.values()))]
            if not keys:
                continue
            got = [pooled(arm, k, f"0.5|{NOT_FORGOTTEN}")[:2] for k in keys]
            c, n = max(got, key=lambda x: x[0] / x[1])
            low, high = wilson(c, n)
            lines.append(
                f'- {name}, {source}, {label}: false "not forgotten" on never-seen D_Q, worst '
                f"{c / n:.3f} [{low:.3f}, {high:.3f}]: "
                + (
                    "**met**"
                    if c / n <= ALPHA
                    else "**missed**"
                    if low > ALPHA
                    else "**met within sampling error**"
                )
            )
    # what the site's images cost the same-source audit
    same_wrong = [(f"same|{share}|{size}", m) for _, share, size in SAME for m in MARGINS
                  if share >= m]  # fmt: skip
    for label, arm in (a for a in arms if a[0].startswith("offline")):
        got = [(pooled(arm, k, f"{m}|{FORGOTTEN}")[:2], k) for k, m in same_wrong]
        (c, n), key = max(got, key=lambda x: x[0][0] / x[0][1])
        nulls = [pooled(arm, f"same|0.0|{size}", f"0.5|{NOT_FORGOTTEN}")[:2] for size in SIZES]
        c0, n0 = max(nulls, key=lambda x: x[0] / x[1])
        lines.append(
            f'- {name}, same source, {label}: worst false "forgotten" {c / n:.3f} '
            f'[{wilson(c, n)[0]:.3f}, {wilson(c, n)[1]:.3f}] ({key}); worst false "not '
            f'forgotten" on never-seen D_Q {c0 / n0:.3f} [{wilson(c0, n0)[0]:.3f}, '
            f"{wilson(c0, n0)[1]:.3f}]"
        )
    for label, arm in arms:
        wrong = [(f"{src}|{share}|{size}", m) for src, share, size in cells(dataset)
                 if src == "other site, trained on it" for m in MARGINS if share >= m]  # fmt: skip
        wrong = [(k, m) for k, m in wrong if k in next(iter(arm.values()))]
        got = [(pooled(arm, k, f"{m}|{FORGOTTEN}")[:2], k, m) for k, m in wrong]
        (c, n), key, margin = max(got, key=lambda x: x[0][0] / x[0][1])
        lines.append(
            f'- {name}, other site trained on, {label}: false "forgotten" (true share >= '
            f"margin), worst {c / n:.3f} [{wilson(c, n)[0]:.3f}, {wilson(c, n)[1]:.3f}] "
            f"(share {key.split('|', 1)[1].replace('|', ', |D_Q| ')}, margin {margin:g})"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_training_options(parser, seeds=5)
    parser.add_argument(
        "--site",
        action="store_true",
        help="also D_Q from another site, with online models trained on that site too",
    )
    parser.add_argument(
        "--site-unseen",
        type=int,
        default=0,
        metavar="N",
        help="also offline models given, besides half the site's images the target trained "
        "on, N of the site's images it never trained on",
    )
    parser.add_argument(
        "--site-only",
        action="store_true",
        help="only the cells of D_Q from another site (no same-source online arm)",
    )
    parser.add_argument(
        "--error-rates",
        help="write the online arm's same-source rows into this JSON (measured_error_rates)",
    )
    parser.add_argument(
        "--skip-offline-site",
        action="store_true",
        help="with --site: leave out the arm of offline models given half the site's images",
    )
    parser.add_argument(
        "--where",
        default="beside other work on the 2 cores",
        help="the machine the trainings ran on, for the report's cost line",
    )
    args = parser.parse_args(argv)
    if args.error_rates and args.site_only:
        parser.error("--error-rates packages the same-source online rows: drop --site-only")
    torch.set_num_threads(args.threads)
    say("# The reference-model auditor online and offline, over the same trainings")
    say()
    command = " ".join(sys.argv[1:] if argv is None else argv)
    say(
        f"`python benchmarks/audit_calibration_online.py {command}`; {args.references} "
        f"reference models, alpha {ALPHA}, RMIA's score, {args.draws} draws per cell and "
        "training, permutation tests of 999 relabellings."
    )
    say()
    lines, rows, seeds = [], [], args.seeds
    for dataset in args.datasets:
        offline = {seed: run_training(dataset, seed, args) for seed in seeds}
        if not args.site_only:
            online = {seed: online_cells(dataset, seed, args) for seed in seeds}
            found, packaged = report(dataset, offline, online, args)
            lines, rows = lines + found, rows + packaged
        if args.site or args.site_unseen:
            n = args.site_unseen
            arms = [("offline", "", offline)]
            if not args.skip_offline_site:
                with_site = {s: offline_site_cells(dataset, s, args) for s in seeds}
                arms.append(("offline, with the site", WITH_SITE, with_site))
            if n:
                arms.append((
                    f"offline, with the site and {n} of its unseen images",
                    WITH_UNSEEN.format(n=n),
                    {s: offline_site_cells(dataset, s, args, n) for s in seeds},
                ))  # fmt: skip
            if args.site:
                arm = {s: online_cells(dataset, s, args, site=True) for s in seeds}
                arms.append(("online, with the site", ONLINE_WITH_SITE, arm))
            lines += site_report(dataset, arms)
    say_section("Targets of issue 32", lines)
    if args.out:
        write(args.out)
    if args.error_rates:
        source = (
            f"benchmarks/audit_calibration_online.py: {len(seeds)} trainings of "
            f"{', '.join(DATASETS[d] for d in args.datasets)}, {args.references} reference models"
        )
        package_error_rates(Path(args.error_rates), rows, "online", source)
    return 0


if __name__ == "__main__":
    sys.exit(main())
