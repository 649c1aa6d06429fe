"""Benchmark: how often the equivalence test misses exact retraining, against k.

Issue 53. The equivalence test (:func:`monai_forget.unlearning.retrain_reference.
equivalence_to_retraining`, as ``withdrawal_methods.py`` applies it: margin 0.5 x the
retrained models' membership gap, alpha 0.05 each side) asks whether a model's advantage
on the withdrawn site is within the margin of retraining's mean, from k retrained models.
A model retrained from scratch without the site *is* retraining; every "not shown
equivalent" the test says of one is a miss, and its rate is the floor under any
method's equivalence rate: no method is passed more often than exact retraining.

Per seed, on ``withdrawal_methods.py``'s federations (same sites, recipes, rounds), a pool
of ``--pool`` models retrained from scratch without the site (seeds
``1000 + 100 seed + j``, j = 1..pool: ``withdrawal_methods.py``'s references, the same
cache under ``--work``). Each pool model in turn is judged against ``--draws`` random sets
of k of the others, for each k in ``--ks``: its miss rate. Each miss is split by its
reason: the interval reaches past the margin, or (interval inside) the model's confidence
on never-seen data is not retraining's (the test's second condition, a two-sided
predictive t test at alpha). The models that kept the site (trained from round 0, and
joining at ``--site-joins`` of the rounds) are judged against as many random sets of k of
the pool: the test's power, "not shown equivalent" being right there.

An independent check of the margin part: under the test's own normal model (the
advantage of a retrained model ~ N(mu, sigma^2)), the interval ``D +- t(k-1) s / sqrt(k)``
misses the margin ``delta`` with a probability that a Monte Carlo of normal draws gives
from the pool's sigma and delta alone; as k grows it falls to ``P(|Z| > delta / sigma)``,
which no k removes.

With ``--methods`` (``withdrawal_methods.py``'s ``--work``), each method's equivalence
count there is read against exact retraining's: the number of seeds exact retraining
would pass (each seed with its measured pass rate at that k, a Poisson binomial) and the
probability of as few; each seed's rate is taken as known, though it comes from one pool
of 21 retrained models. Run (the same ``--work`` reuses the retrained models)::

    python benchmarks/equivalence_miss_rate.py --federations mnist-30 \\
        --seeds 0 1 2 3 4 5 6 7 8 9 --work /tmp/withdrawal --methods /tmp/withdrawal \\
        --out benchmarks/results/equivalence_miss_rate.md
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
from pathlib import Path

import numpy as np
import scipy.stats
import torch
from _elimination_paper import Profile, judge, margin_of, profile
from _markdown import finish, log, say  # benchmarks/_markdown.py
from _withdrawal_federations import (
    FEDERATIONS,
    NOT_MEASURABLE,
    retrain,
    setting,
    trained_with_history,
)

from monai_forget.data import concat, data_root
from monai_forget.defaults import RETRAINED_ALPHA
from monai_forget.unlearning.retrain_reference import EQUIVALENT

OUTSIDE, ELSEWHERE = "outside the margin", "confidence elsewhere not retraining's"
# the miss rate the bar (a method equivalent in >= 80 % of seeds) can stand on:
# exact retraining then clears 4 of 5 seeds with probability >= 0.97 (binomial)
MISS_BAR = 0.05
EQUIVALENT_SHARE = 0.8  # issue 53: a method equivalent to retraining in >= 4 of 5 seeds


def pool_profiles(name: str, seed: int, args: argparse.Namespace, loaded: dict) -> dict:
    """The pool's and the two site-keeping models' profiles on the seed's federation."""
    s = setting(name, seed, args, loaded)
    work = (args.work / name) / f"seed{seed}"
    recipe, rounds = s["recipe"], s["rounds"]
    site = concat(*(s["clients"][n] for n in s["withdrawn"]))
    remaining = {n: d for n, d in s["clients"].items() if n not in s["withdrawn"]}
    data = (concat(*remaining.values()), site, s["test"])
    refs = s.get("references", {})
    pool = [
        profile(
            retrain(remaining, recipe, rounds, 1000 + 100 * seed + j, work / f"re{j}.pt"),
            *data,
            **refs,
        )
        for j in range(1, args.pool + 1)
    ]
    kept = {}
    late = f"joining at {args.site_joins:g} of the rounds"
    for label, share in (("from round 0", 0.0), (late, args.site_joins)):
        joined = {n: round(share * rounds) for n in s["withdrawn"]}
        path = work / f"kept-joins{share:g}.pt"
        model = trained_with_history(s["clients"], recipe, rounds, seed, path, joined)
        kept[label] = profile(model, *data, **refs)
    return {"pool": pool, "kept": kept}


def decide(model: Profile, references: list[Profile]) -> str | None:
    """The reason the test misses ``model`` (None: equivalent; "" without a margin)."""
    margin, eq = judge(model, references)
    if eq is None:
        return ""
    if eq.decision == EQUIVALENT:
        return None
    low, high = eq.interval
    return ELSEWHERE if -margin < low and high < margin else OUTSIDE


def rates(profiles: dict, k: int, draws: int, seed: int) -> dict:
    """Miss rates of the pool (by reason) and "not equivalent" rates of the kept models."""
    pool = profiles["pool"]
    rng = np.random.default_rng([seed, k, 53])
    misses = []
    for i, model in enumerate(pool):
        others = [p for j, p in enumerate(pool) if j != i]
        for _ in range(draws):
            chosen = rng.choice(len(others), k, replace=False)
            misses.append(decide(model, [others[c] for c in chosen]))
    # rates among the draws whose references declare a margin (NaN: none did)
    measured = len(misses) - misses.count("")
    out = {
        "unmeasurable": misses.count("") / len(misses),
        OUTSIDE: misses.count(OUTSIDE) / measured if measured else np.nan,
        ELSEWHERE: misses.count(ELSEWHERE) / measured if measured else np.nan,
    }
    out["miss"] = out[OUTSIDE] + out[ELSEWHERE]
    for label, model in profiles["kept"].items():
        found = [
            decide(model, [pool[c] for c in rng.choice(len(pool), k, replace=False)])
            for _ in range(len(pool) * draws)
        ]
        measured = len(found) - found.count("")
        out[label] = sum(f not in (None, "") for f in found) / measured if measured else np.nan
    return out


def normal_miss(sigma: float, delta: float, k: int, draws: int, seed: int) -> float:
    """The margin part of the miss rate under the test's normal model (module docstring),
    by Monte Carlo: ``draws`` normal draws of one model and k references with spread
    ``sigma``."""
    if delta <= 0:
        return np.nan
    rng = np.random.default_rng([seed, k])
    model = rng.normal(0, sigma, draws)
    references = rng.normal(0, sigma, (draws, k))
    quantile = scipy.stats.t.ppf(1 - RETRAINED_ALPHA, k - 1)
    half = quantile * references.std(axis=1, ddof=1) / np.sqrt(k)
    gap = np.abs(model - references.mean(axis=1))
    return float(np.mean(gap + half >= delta))


def percent(x: float) -> str:
    return "-" if not np.isfinite(x) else f"{100 * x:.1f} %"


def advantages(pool: list[Profile]) -> np.ndarray:
    return np.array([p.withdrawn.mean() - p.withdrawn_reference.mean() for p in pool])


def spread(pool: list[Profile]) -> tuple[np.ndarray, float, float]:
    """The pool's advantages, their spread (sigma) and the margin its gap declares (delta)."""
    values = advantages(pool)
    return values, float(np.std(values, ddof=1)), margin_of(pool)


def interval(values: list[float]) -> str:
    """Mean over the seeds that measured it and its 95 % t interval (seeds are
    independent federations)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if len(v) == 0:
        return "-"
    seeds = "" if len(v) == len(values) else f" ({len(v)} seeds)"
    if len(v) < 2 or v.std() == 0:
        return f"{100 * v.mean():.1f} %{seeds}"
    low, high = scipy.stats.t.interval(0.95, len(v) - 1, v.mean(), scipy.stats.sem(v))
    return f"{100 * v.mean():.1f} % [{100 * max(low, 0):.1f}, {100 * min(high, 1):.1f}]{seeds}"


def report(name: str, per_seed: dict[int, dict], args: argparse.Namespace) -> list[str]:
    """The federation's tables; returns its target lines."""
    seeds = sorted(per_seed)
    kept = list(per_seed[seeds[0]]["kept"])
    say(f"## {name}, {len(seeds)} seeds, pool of {args.pool} retrained models\n")
    say(
        "| k | exact retraining missed (mean over seeds [95 % CI]) | of which outside the "
        "margin | of which confidence elsewhere | normal model: outside the margin | "
        + " | ".join(f"kept the site ({label}): not equivalent" for label in kept)
        + " | draws without a margin |"
    )
    say("|---|---|---|---|---|" + "---|" * len(kept) + "---|")
    lines, by_k = [], {}
    for k in args.ks:
        found = {s: rates(per_seed[s], k, args.draws, s) for s in seeds}
        normal = [normal_miss(*spread(per_seed[s]["pool"])[1:], k, 20_000, s) for s in seeds]
        by_k[k] = found

        def column(key: str, found: dict = found) -> str:
            return interval([found[s][key] for s in seeds])

        say(
            f"| {k} | {column('miss')} | {column(OUTSIDE)} | {column(ELSEWHERE)} | "
            f"{interval(normal)} | "
            + " | ".join(column(label) for label in kept)
            + f" | {column('unmeasurable')} |"
        )
    say()
    say(
        "Per seed: the pool's spread of the advantage (sigma), the margin (delta = 0.5 x the "
        "pool's mean membership gap), and the miss rate at each k. As k grows the margin "
        "part falls toward P(|Z| > delta / sigma), the rate at which a retrained model's own "
        "advantage lies farther than the margin from retraining's mean.\n"
    )
    say(
        "The site's trace in the models that kept it: (its advantage - the pool's mean) / "
        "sigma, the number of retraining's own spreads it lies away. A single model is told "
        "from retraining only where this is large beside both delta / sigma and the "
        "interval's half-width.\n"
    )
    say("| seed | sigma | delta | delta / sigma | P(abs(Z) > delta / sigma) | farthest "
        "retrained model from the pool's median (logit units) | "
        + " | ".join(f"missed, k = {k}" for k in args.ks) + " | "
        + " | ".join(f"trace / sigma, kept ({label})" for label in kept) + " |")  # fmt: skip
    say("|---|---|---|---|---|---|" + "---|" * (len(args.ks) + len(kept)))
    for s in seeds:
        values, sigma, delta = spread(per_seed[s]["pool"])
        floor = 2 * scipy.stats.norm.sf(delta / sigma) if delta > 0 else float("nan")
        farthest = float(np.max(np.abs(values - np.median(values))))
        traces = [
            (advantages([per_seed[s]["kept"][label]])[0] - values.mean()) / sigma for label in kept
        ]
        say(
            f"| {s} | {sigma:.3f} | {delta:+.3f} | {delta / sigma:+.2f} | {percent(floor)} | "
            f"{farthest:.2f} | "
            + " | ".join(percent(by_k[k][s]["miss"]) for k in args.ks)
            + " | "
            + " | ".join(f"{t:+.1f}" for t in traces)
            + " |"
        )
    say()
    for k in args.ks:
        passes = pass_rates(by_k[k], seeds)
        miss = 1 - float(np.mean(list(passes.values())))
        bar = math.ceil(EQUIVALENT_SHARE * len(passes))
        clears = scipy.stats.poisson_binom(list(passes.values())).sf(bar - 1)
        lines.append(
            f"- {name}, k = {k}: exact retraining missed in {100 * miss:.1f} % of its "
            f"judgements (bar <= {100 * MISS_BAR:.0f} %: "
            f"{'**met**' if miss <= MISS_BAR else '**missed**'}); exact retraining would be "
            f"equivalent in >= {bar} of these {len(passes)} seeds with probability {clears:.2f}"
        )
    if args.methods:
        lines += against_retraining(name, by_k, seeds, args)
    return lines


def pass_rates(found: dict[int, dict], seeds: list[int]) -> dict[int, float]:
    """Seed -> the share of exact retraining's judgements that passed it (seeds whose
    references declared a margin)."""
    return {s: 1 - found[s]["miss"] for s in seeds if np.isfinite(found[s]["miss"])}


def against_retraining(
    name: str, by_k: dict[int, dict], seeds: list[int], args: argparse.Namespace
) -> list[str]:
    """Each method of ``withdrawal_methods.py``'s cache (its ``--work``) read against what
    exact retraining scores on the same test: the number of seeds it was equivalent in,
    beside the number exact retraining would be (each seed passing with its measured pass
    rate at that k: a Poisson binomial), and the probability of as few. Each seed's rate
    is taken as known, though it is measured on one pool of retrained models."""
    lines = []
    for folder in (name, f"{name}-joins{args.site_joins:g}"):
        for k in args.ks:
            files = {s: args.methods / folder / f"seed{s}-k{k}.json" for s in seeds}
            if not all(f.is_file() for f in files.values()):
                continue
            runs = {s: json.loads(f.read_text())["methods"] for s, f in files.items()}
            # seeds where both the run's references and the pool's declare a margin
            passes = {
                s: rate
                for s, rate in pass_rates(by_k[k], seeds).items()
                if runs[s]["retraining"]["equivalence"] != NOT_MEASURABLE
            }
            exact = scipy.stats.poisson_binom(list(passes.values()))
            for method in runs[seeds[0]]:
                count = sum(runs[s][method]["equivalence"] == EQUIVALENT for s in passes)
                p = float(exact.cdf(count))
                verdict = (
                    "no evidence of less often than exact retraining"
                    if p >= 0.05
                    else f"evidence of less often than exact retraining (p = {p:.3f})"
                )
                lines.append(
                    f"- {folder}, k = {k}, {method}: equivalent in {count}/{len(passes)} "
                    f"seeds; exact retraining would be in {exact.mean():.1f} (P(<= {count}) = "
                    f"{p:.2f}): {verdict}"
                )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--federations", nargs="+", choices=FEDERATIONS, default=FEDERATIONS)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--pool", type=int, default=21, help="retrained models per seed")
    parser.add_argument("--ks", type=int, nargs="+", default=[6, 12, 20])
    parser.add_argument("--draws", type=int, default=40, help="reference sets per judged model")
    parser.add_argument("--rounds", type=int, default=25, help="mnist-30's FedAvg rounds")
    parser.add_argument("--site-joins", type=float, default=0.75)
    parser.add_argument("--work", type=Path, required=True, help="model cache (resumable)")
    parser.add_argument(
        "--methods",
        type=Path,
        default=None,
        help="withdrawal_methods.py's --work: read its methods' verdicts against these rates",
    )
    parser.add_argument("--out", default=None, help="also write the markdown here (atomic)")
    args = parser.parse_args()
    if max(args.ks) >= args.pool:
        parser.error(f"k up to {max(args.ks)} needs a pool of more than {max(args.ks)} models")
    if not (data_root() / "mnist").is_dir():
        print(f"MNIST not found under {data_root()}; set MONAI_FORGET_DATA", file=sys.stderr)
        return 1
    loaded: dict = {}
    results = {}
    for name in args.federations:
        results[name] = {}
        for seed in args.seeds:
            log(f"{name}, seed {seed}")
            results[name][seed] = pool_profiles(name, seed, args, loaded)
    say("# The equivalence test on exact retraining: its miss rate against k (issue 53)\n")
    say(
        f"`python benchmarks/equivalence_miss_rate.py --federations {' '.join(args.federations)} "
        f"--seeds {' '.join(map(str, args.seeds))} --pool {args.pool} --ks "
        f"{' '.join(map(str, args.ks))} --draws {args.draws} --rounds {args.rounds} "
        f"--site-joins {args.site_joins:g}"
        f"{' --methods WITHDRAWAL_METHODS_WORK' * bool(args.methods)}` · "
        f"python {platform.python_version()}, torch {torch.__version__}, CPU\n"
    )
    return finish(
        [line for name in results for line in report(name, results[name], args)], args.out
    )


if __name__ == "__main__":
    sys.exit(main())
