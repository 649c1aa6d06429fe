"""Both papers' withdrawal-audit scenario grids on real data, K-S ratio and EMA side by side.

Prints a markdown report: one table row per scenario (dataset, scenario, |D_Q|, rho_KS,
K-S decision, expected, K-S right?, rho_EMA, EMA decision, EMA right?, seconds), a
summary per grid and factor, whether the issue's targets are met, and two speed ratios.

Run (full grid: about 1,700 CPU-seconds, so roughly 15-20 min on 2 idle cores; the
header reports wall time, CPU time and the host's load)::

    python benchmarks/withdrawal_audit_grid.py > benchmarks/results/withdrawal_audit_grid.md
    python benchmarks/withdrawal_audit_grid.py --quick --datasets digits   # a few minutes

Data (``$MONAI_FORGET_DATA``, default ``../shared/data``; every pool is deduplicated by
content hash, then permuted with the seed; folds are consecutive blocks)
    ===============  ==========================  =================  ==================
    data set         folds (6, query/target)     calibration D_C    out-of-domain
    ===============  ==========================  =================  ==================
    PneumoniaMNIST   6 x 600 of the train split  val + test splits  ACDC cine-MRI slices
                                                 (1,137)            at 28x28, NOR -> 0,
                                                                    other groups -> 1
    MNIST test set   6 x 1,000                   the other 4,000    PneumoniaMNIST (0/1)
    digits           6 x 225                     the other 447      MNIST at 8x8 (area
                                                                    pooling, max -> 1)
    ===============  ==========================  =================  ==================

Grids
    Liu & Tsaftaris 2020: D_Q = fold 1, D_C = the calibration pool; the target is trained
    on D* in {D_Q only; 50% of D_C; 100% of D_C; D_C + 10% / 50% / 100% of D_Q;
    out-of-domain data (|D_C| images)}. Expected "not forgotten" iff D* holds any of D_Q.
    The target may share data with D_C (the paper's design); D_Q and D_C never overlap.

    Huang et al. 2021 (EMA): the target is trained on folds 1-5. Queries: each training
    fold (expected "not forgotten"), the held-out fold 6 and an out-of-domain sample of
    fold size (expected "forgotten"); each at |D_Q| in {20, 50, 200, all} (stratified
    subsets) and calibration quality k in {100, 80, 60, 40}: k% of D_C clean, the rest
    half rotated (uniform angle in [-90, 90] degrees, zero fill) and half with additive
    Gaussian noise (sigma 1.5 in [0, 1] intensity units), the magnitudes of the EMA
    reference code (``RandomRotation(90)``; ``std=3`` after ``Normalize(0.5, 0.5)``).
    Corrupted subsets are nested across k. Both auditors run on every cell.

Recipes (the consortium's design, known to the auditor; chosen once, before any audit)
    Overfitting-prone small models as in both papers (the EMA reference trains an MLP
    on MNIST and a ResNet on X-rays), trained with Adam (lr 1e-3) for a fixed number of
    steps so that every model gets the same optimisation effort whatever its training
    set size. The budget is a round number at which the largest training set of the
    grid is fitted completely (training accuracy ~100%, checked on training accuracy
    alone, never on audit outcomes):

    - PneumoniaMNIST: MONAI ``Classifier`` (channels (8, 16), strides (2, 2), residual
      units, instance norm; 7k parameters), 1,500 steps of batch 64. (An MLP without
      normalisation plateaus near 95% training accuracy on these X-rays.)
    - MNIST: ``mlp`` with hidden layers (256, 256), 2,000 steps of batch 64.
    - digits: the package demo's recipe (``mlp`` (256,), 1,500 steps of batch 32).

    Seeds: the auditor's shadow models and all data splits use ``--seed``; the
    consortium's targets use ``--seed + 1`` (a seed the auditor does not share).

Timing
    Every model (targets and shadows) is trained first, in ``--workers`` processes of
    ``--threads`` torch threads each, into the shared ``--cache-dir``; the audits then
    run in this process with every model served from the cache. ``seconds`` is the
    wall time of the row's two audits plus the training time of each model the row is
    the first to use (models are shared between rows, so later rows are cheaper).

Speed ratios
    (a) ``benchmarks/threshold_search.compare_threshold_search`` at n = 10,000;
    (b) a MONAI ``SupervisedEvaluator`` (batch 64) over the PneumoniaMNIST test split
    with the ``KSCalibratedRatio`` and ``EMAPValue`` handlers attached vs the same
    evaluator without them (median of interleaved repeats after a warm-up run). The
    target is trained on folds 1-5; the handlers' reference outputs are computed
    beforehand with the val split as D_C. Judged on monai_forget's ``small_cnn``
    (``SPEED_RECIPE``, channels (32, 64), a short 300-step budget: only its evaluation
    cost matters); the grid's 7k-parameter PneumoniaMNIST model, whose evaluation is
    about five times cheaper, is reported beside it for comparison. The handlers'
    cost grows with the number of evaluated samples, not with the model.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shlex
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from monai_forget.audit import AuditResult, EMAAuditor, KSAuditor
from monai_forget.data import (
    LabelledImages,
    concat,
)
from monai_forget.inference import predict
from monai_forget.shadow import ShadowTrainer, SupervisedRecipe

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _audit_grid import (
    DATASETS,
    LOADERS,
    N_FOLDS,
    DataSpec,
    EvaluatorSetup,
    Scenario,
    ema_scenarios,
    evaluator_setups,
    handler_overhead,
    liu_scenarios,
    load_pneumonia_spec,
    progress,
    start_run,
)
from _threshold_search import compare_threshold_search


@dataclass
class Row:
    """The outcome of one scenario."""

    scenario: Scenario
    ks: AuditResult | None
    ema: AuditResult
    seconds: float
    ks_error: str = ""

    @property
    def rho_ks(self) -> float:
        return float("nan") if self.ks is None else self.ks.statistic

    @property
    def ks_decision(self) -> str:
        return "undefined" if self.ks is None else self.ks.decision

    @property
    def ks_right(self) -> bool:
        return self.ks_decision == self.scenario.expected

    @property
    def ema_right(self) -> bool:
        return self.ema.decision == self.scenario.expected


@dataclass
class Job:
    """A model to train: (recipe, data, seed); ``path`` is its cache file."""

    recipe: SupervisedRecipe
    data: LabelledImages
    seed: int
    path: Path
    seconds: float = 0.0
    cached: bool = False
    claimed: bool = False


@dataclass
class Plan:
    """Every model the run needs, keyed by cache path, and which ones each row uses."""

    cache_dir: Path
    jobs: dict[Path, Job] = field(default_factory=dict)
    _memo: dict[tuple[int, int, str], Path] = field(default_factory=dict)
    _members: dict[int, LabelledImages] = field(default_factory=dict)

    def add(self, recipe: SupervisedRecipe, data: LabelledImages, seed: int) -> Path:
        key = (id(data), seed, recipe.name)
        if key not in self._memo:
            path = ShadowTrainer(recipe, cache_dir=self.cache_dir).cache_path(data, seed)
            assert path is not None
            self.jobs.setdefault(path, Job(recipe, data, seed, path, cached=path.exists()))
            self._memo[key] = path
        return self._memo[key]

    def members(self, calibration: LabelledImages, seed: int) -> LabelledImages:
        """The calibration members EMAAuditor trains its reference model on."""
        if id(calibration) not in self._members:
            fraction = EMAAuditor().member_fraction
            self._members[id(calibration)] = calibration.split(fraction, seed=seed)[0]
        return self._members[id(calibration)]

    def add_scenario(self, s: Scenario, seed: int, target_seed: int) -> list[Path]:
        return [
            self.add(s.recipe, s.target_data, target_seed),
            self.add(s.recipe, s.query, seed),
            self.add(s.recipe, s.calibration, seed),
            self.add(s.recipe, self.members(s.calibration, seed), seed),
        ]


def _init_worker(threads: int) -> None:
    torch.set_num_threads(threads)
    warnings.filterwarnings("ignore")


def _train_job(recipe: SupervisedRecipe, data: LabelledImages, seed: int, cache: Path) -> float:
    start = time.perf_counter()
    ShadowTrainer(recipe, cache_dir=cache).train(data, seed=seed)
    return time.perf_counter() - start


def train_all(plan: Plan, workers: int, threads: int) -> float:
    """Train every planned model into the cache; returns the wall time."""
    todo = [job for job in plan.jobs.values() if not job.cached]
    start = time.perf_counter()
    progress(f"training {len(todo)} models ({len(plan.jobs) - len(todo)} already cached) ...")
    if workers <= 1:
        for i, job in enumerate(todo, 1):
            job.seconds = _train_job(job.recipe, job.data, job.seed, plan.cache_dir)
            progress(f"  trained {i}/{len(todo)} ({job.seconds:.1f} s)")
    elif todo:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(workers, context, _init_worker, (threads,)) as pool:
            futures = {
                pool.submit(_train_job, j.recipe, j.data, j.seed, plan.cache_dir): j for j in todo
            }
            for i, future in enumerate(as_completed(futures), 1):
                futures[future].seconds = future.result()
                if i % 10 == 0 or i == len(todo):
                    progress(f"  trained {i}/{len(todo)} ({time.perf_counter() - start:.0f} s)")
    return time.perf_counter() - start


def run_scenario(s: Scenario, plan: Plan, paths: list[Path], seed: int, target_seed: int) -> Row:
    """Both audits of one scenario (every model comes from the cache)."""
    start = time.perf_counter()
    target = ShadowTrainer(s.recipe, cache_dir=plan.cache_dir).train(s.target_data, target_seed)
    options = {"recipe": s.recipe, "seed": seed, "cache_dir": plan.cache_dir}
    ks, ks_error = None, ""
    try:
        ks = KSAuditor(**options).audit(target, s.query, s.calibration, label=s.name)
    except ValueError as err:  # KS(query, calibration) = 0: the ratio is undefined
        ks_error = str(err)
    ema = EMAAuditor(**options).audit(target, s.query, s.calibration, label=s.name)
    seconds = time.perf_counter() - start
    for path in paths:  # charge each model's training to the first row that uses it
        job = plan.jobs[path]
        if not job.claimed:
            seconds += job.seconds
            job.claimed = True
    return Row(s, ks, ema, seconds, ks_error)


def _yes(ok: bool) -> str:
    return "yes" if ok else "NO"


def format_rows(rows: Sequence[Row]) -> list[str]:
    lines = [
        "| dataset | scenario | \\|D_Q\\| | rho_KS | K-S decision | expected | K-S right? "
        "| rho_EMA | EMA decision | EMA right? | seconds |",
        "|---|---|---:|---:|---|---|---|---:|---|---|---:|",
    ]
    for r in rows:
        s = r.scenario
        lines.append(
            f"| {s.dataset} | {s.name} | {len(s.query)} | {r.rho_ks:.3f} | {r.ks_decision} "
            f"| {s.expected} | {_yes(r.ks_right)} | {r.ema.statistic:.3g} | {r.ema.decision} "
            f"| {_yes(r.ema_right)} | {r.seconds:.1f} |"
        )
    return lines


def _tally(rows: Sequence[Row]) -> str:
    ks = sum(r.ks_right for r in rows)
    ema = sum(r.ema_right for r in rows)
    return f"{ks}/{len(rows)} | {ema}/{len(rows)}"


def format_summary(rows: Sequence[Row]) -> list[str]:
    """Right decisions per data set and grid, and per factor of the EMA grid."""
    lines = ["| dataset | group | K-S right | EMA right |", "|---|---|---:|---:|"]
    for dataset in dict.fromkeys(r.scenario.dataset for r in rows):
        mine = [r for r in rows if r.scenario.dataset == dataset]
        liu = [r for r in mine if r.scenario.grid == "Liu"]
        ema = [r for r in mine if r.scenario.grid == "EMA"]
        groups: list[tuple[str, list[Row]]] = [
            ("Liu grid, D* holds D_Q", [r for r in liu if r.scenario.contains_query]),
            ("Liu grid, D* without D_Q", [r for r in liu if not r.scenario.contains_query]),
            ("EMA grid, training folds", [r for r in ema if r.scenario.contains_query]),
            ("EMA grid, held-out fold", [r for r in ema if "held-out" in r.scenario.name]),
            ("EMA grid, out-of-domain", [r for r in ema if "out-of-domain" in r.scenario.name]),
        ]
        for k in dict.fromkeys(r.scenario.k for r in ema):
            groups.append((f"EMA grid, k = {k}", [r for r in ema if r.scenario.k == k]))
        for n in sorted({len(r.scenario.query) for r in ema}):
            groups.append(
                (f"EMA grid, \\|D_Q\\| = {n}", [r for r in ema if len(r.scenario.query) == n])
            )
        lines += [f"| {dataset} | {name} | {_tally(g)} |" for name, g in groups if g]
    return lines


def check_targets(rows: Sequence[Row]) -> list[str]:
    """The issue's two accuracy targets, met or missed, with the failing cells."""
    lines = []
    cells = [
        r
        for r in rows
        if r.scenario.dataset == "PneumoniaMNIST"
        and r.scenario.grid == "EMA"
        and (r.scenario.k or 0) >= 60
        and len(r.scenario.query) >= 50
    ]
    if cells:
        wrong = [r for r in cells if not r.ema_right]
        lines.append(
            f"- EMA right in every PneumoniaMNIST cell with k >= 60 and |D_Q| >= 50: "
            f"**{'MET' if not wrong else 'MISSED'}** ({len(cells) - len(wrong)}/{len(cells)} right)"
        )
        lines += [
            f"  - wrong: {r.scenario.name}, |D_Q| = {len(r.scenario.query)}, "
            f"rho_EMA = {r.ema.statistic:.3g} (membership rate "
            f"{r.ema.details['membership_rate']:.3f})"
            for r in wrong
        ]
    else:
        lines.append("- EMA target on PneumoniaMNIST: not evaluated (data set not in this run)")
    cells = [
        r
        for r in rows
        if r.scenario.dataset == "MNIST" and r.scenario.grid == "Liu" and r.scenario.contains_query
    ]
    if cells:
        wrong = [r for r in cells if not r.rho_ks < 1.0]
        lines.append(
            f"- K-S rho < 1 for every MNIST D* that holds any of D_Q: "
            f"**{'MET' if not wrong else 'MISSED'}** ({len(cells) - len(wrong)}/{len(cells)})"
        )
        lines += [f"  - wrong: {r.scenario.name}, rho_KS = {r.rho_ks:.3f}" for r in wrong]
    else:
        lines.append("- K-S target on MNIST: not evaluated (data set not in this run)")
    return lines


def _accuracy(model: torch.nn.Module, data: LabelledImages, cache: Path) -> float:
    p = predict(model, data, cache_dir=cache)
    return float(np.mean(p.probs.argmax(axis=1) == p.labels))


def describe_spec(spec: DataSpec, cache: Path, target_seed: int) -> str:
    """Sizes of the pools and how well the EMA grid's target fits / generalises."""
    target = ShadowTrainer(spec.recipe, cache_dir=cache).train(
        concat(*spec.folds[:5]), seed=target_seed
    )
    train_acc = _accuracy(target, concat(*spec.folds[:5]), cache)
    held_acc = _accuracy(target, spec.folds[5], cache)
    cal_acc = _accuracy(target, spec.calibration, cache)
    r = spec.recipe
    return (
        f"- **{spec.name}**: {N_FOLDS} folds of {len(spec.folds[0])}, D_C {len(spec.calibration)}, "
        f"OOD pool {spec.ood_name} {len(spec.ood)}; recipe `{r.network}` {dict(r.network_args)}, "
        f"{r.steps} steps x batch {r.batch_size}, Adam lr {r.learning_rate:g}. EMA-grid target "
        f"accuracy: training folds {train_acc:.3f}, held-out fold {held_acc:.3f}, "
        f"D_C {cal_acc:.3f}"
    )


def format_overheads(
    setups: Sequence[EvaluatorSetup], overheads: Sequence[dict[str, float]], repeats: int
) -> list[str]:
    """One line per evaluated design; the < 10% target is judged on the first
    (``SPEED_RECIPE``, the small CNN), the grid's tiny model is shown for comparison."""
    lines = []
    for i, (setup, o) in enumerate(zip(setups, overheads, strict=True)):
        r = setup.recipe
        verdict = f"target < 10%: {'MET' if o['overhead'] < 0.10 else 'MISSED'}"
        if i > 0:
            verdict = "for comparison, not judged"
        lines.append(
            f"- SupervisedEvaluator over PneumoniaMNIST test ({o['n']} images, batch 64) with "
            f"`{r.network}` {dict(r.network_args)}, median of {repeats} interleaved runs: "
            f"{o['plain'] * 1e3:.1f} ms without handlers, {o['audited'] * 1e3:.1f} ms with "
            f"KSCalibratedRatio + EMAPValue: **{o['overhead'] * 100:+.1f}%** overhead "
            f"(best-of: {o['best_overhead'] * 100:+.1f}%; {verdict}); handler values "
            f"rho_KS = {o['rho_KS']:.3f}, rho_EMA = {o['rho_EMA']:.3g}"
        )
    return lines


def _cpu_seconds() -> float:
    """User + system CPU time of this process and its finished workers."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="a reduced grid (every factor)")
    parser.add_argument(
        "--datasets", nargs="+", choices=DATASETS, default=list(DATASETS), help="data sets to run"
    )
    parser.add_argument("--cache-dir", type=Path, default=None, help="default: a temp dir")
    parser.add_argument("--seed", type=int, default=0, help="auditor and split seed")
    parser.add_argument("--workers", type=int, default=2, help="training processes")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per process")
    parser.add_argument("--repeats", type=int, default=None, help="evaluator timing repeats")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    root = start_run(args.threads)
    if root is None:
        return 2
    start = time.perf_counter()
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="withdrawal-grid-") as tmp:
        cache = (args.cache_dir or Path(tmp)).resolve()
        cache.mkdir(parents=True, exist_ok=True)
        seed, target_seed = args.seed, args.seed + 1

        progress("loading data ...")
        specs = {name: LOADERS[name](root, seed) for name in args.datasets}
        pneumonia = specs.get("pneumoniamnist") or load_pneumonia_spec(root, seed)
        scenarios = []
        for spec in specs.values():
            scenarios += liu_scenarios(spec, seed, args.quick)
            scenarios += ema_scenarios(spec, seed, args.quick)
        plan = Plan(cache)
        paths = [plan.add_scenario(s, seed, target_seed) for s in scenarios]
        speed_setups = evaluator_setups(root, pneumonia)
        for setup in speed_setups:
            plan.add(setup.recipe, setup.target_data, target_seed)
            plan.add(setup.recipe, setup.query, seed)
            plan.add(setup.recipe, setup.calibration, seed)
            plan.add(setup.recipe, plan.members(setup.calibration, seed), seed)
        train_seconds = train_all(plan, args.workers, args.threads)

        progress(f"auditing {len(scenarios)} scenarios ...")
        rows = []
        for i, (s, p) in enumerate(zip(scenarios, paths, strict=True), 1):
            rows.append(run_scenario(s, plan, p, seed, target_seed))
            if i % 25 == 0 or i == len(scenarios):
                progress(f"  audited {i}/{len(scenarios)}")

        progress("speed ratios ...")
        search = compare_threshold_search(n=10_000, seed=seed)
        repeats = args.repeats or (5 if args.quick else 15)
        overheads = [
            handler_overhead(setup, cache, seed, target_seed, repeats) for setup in speed_setups
        ]
        descriptions = [describe_spec(spec, cache, target_seed) for spec in specs.values()]
        total = time.perf_counter() - start
    cpu = _cpu_seconds()
    load_end = os.getloadavg()[0]

    trained = [j for j in plan.jobs.values() if not j.cached]
    given = list(argv) if argv is not None else sys.argv[1:]
    command = " ".join(["python benchmarks/withdrawal_audit_grid.py", *map(shlex.quote, given)])
    out = [
        "# Withdrawal-audit scenario grids on real data",
        "",
        f"Command: `{command}` · data: `{root}` · grid: {'quick' if args.quick else 'full'}",
        f"Seeds: auditor/splits {seed}, targets {target_seed}. Workers {args.workers} x "
        f"{args.threads} torch thread(s), {os.cpu_count()} CPUs visible; "
        f"torch {torch.__version__}.",
        f"Models: {len(trained)} trained in {train_seconds:.0f} s wall "
        f"({sum(j.seconds for j in trained):.0f} s summed over workers), "
        f"{len(plan.jobs) - len(trained)} from an existing cache. Total run {total:.0f} s wall, "
        f"{cpu:.0f} s CPU (this process and its workers); host load average "
        f"{load_start:.1f} at start, {load_end:.1f} at end (other jobs share the host).",
        "",
        "## Data and recipes",
        "",
        *descriptions,
        "",
        'Expected decisions: Liu grid, "not forgotten" iff D* holds any of D_Q; EMA grid, '
        '"not forgotten" for training folds, "forgotten" for the held-out fold and '
        "out-of-domain data. k = % clean calibration images. rho_KS >= 1 means forgotten; "
        "rho_EMA <= 0.1 means forgotten. `seconds`: the row's two audits plus the training "
        "of each model it is the first row to use.",
        "",
        "## Scenarios",
        "",
        *format_rows(rows),
        "",
        "## Right decisions by group",
        "",
        *format_summary(rows),
        "",
        "## Targets",
        "",
        *check_targets(rows),
        "",
        "## Speed",
        "",
        f"- threshold search at n = {search['n']:,}: sorted {search['fast_seconds'] * 1e3:.2f} ms, "
        f"brute force over every candidate {search['exhaustive_seconds']:.2f} s: "
        f"**{search['speedup']:.0f}x** faster (target >= 50x: "
        f"{'MET' if search['speedup'] >= 50 else 'MISSED'}), identical thresholds: "
        f"{search['identical']}",
        *format_overheads(speed_setups, overheads, repeats),
    ]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
