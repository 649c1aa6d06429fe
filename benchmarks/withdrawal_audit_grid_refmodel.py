"""The reference-model auditor on every cell of the withdrawal-audit grids.

``withdrawal_audit_grid.py`` runs the papers' auditors (K-S, EMA) over Liu & Tsaftaris'
and Huang et al.'s scenario grids. This script runs the third auditor,
:class:`~monai_forget.audit.ReferenceModelAuditor`, over the same cells: the same data
sets, folds, targets (trained by the same recipes with the same seed), query sets and
degraded calibration data, and judges each three-way decision against the grid's
expected one: right, inconclusive (never wrong) or wrong.

Run (digits, MNIST and PneumoniaMNIST; about 80 models at 4 reference models per setup)::

    python benchmarks/withdrawal_audit_grid_refmodel.py --cache-dir /tmp/grid_ref \\
        --out benchmarks/results/withdrawal_audit_grid_refmodel.md

The auditor needs what the papers' auditors do not: samples it knows the target trained
on (members) and samples it knows the target never saw (non-members), both scored, and
data of its own to train reference models on (the population). Per grid:

- Liu grid (D_Q = fold 1): known non-members fold 2, population folds 3 and 4 (no Liu
  target ever trains on folds 2-6); known members: the target's training set D* without
  D_Q, at most one fold's worth (D_C, or the out-of-domain images). In the cell where
  D* = D_Q alone the target has no known member besides D_Q: the auditor refuses
  (``n/a``), since it cannot measure its power without one.
- EMA grid (target on folds 1-5): the cell's calibration data (k % clean) is split in
  halves: population and known non-members, so a low-quality calibration degrades the
  auditor's own data as it degrades EMA's; known members: fold 5 (fold 4 when D_Q is
  drawn from fold 5).

Reference models depend on the population only, so they are shared by every cell of a
data set's Liu grid and of each k of its EMA grid (and cached in ``--cache-dir``). Rows
are written to ``--out`` after each data set, so a stopped run keeps what it measured.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _audit_grid import (
    DATASETS,
    LOADERS,
    DataSpec,
    Scenario,
    ema_scenarios,
    liu_scenarios,
    sample_of,
    start_run,
)
from _common import without
from _markdown import LINES, log, say, write

from monai_forget.audit import AuditResult, ReferenceModelAuditor
from monai_forget.audit.result import share_text
from monai_forget.data import LabelledImages, concat
from monai_forget.fingerprint import sample_hashes
from monai_forget.shadow import ShadowTrainer

NO_MEMBERS = "n/a"


@dataclass(frozen=True)
class Roles:
    """The auditor's data for one cell: known members, known non-members, population."""

    members: LabelledImages | None
    nonmembers: LabelledImages
    population: LabelledImages


def liu_roles(spec: DataSpec, s: Scenario, seed: int) -> Roles:
    """Known members from D* without D_Q; non-members fold 2; population folds 3-4."""
    members = without(s.target_data, s.query)
    return Roles(
        sample_of(members, len(spec.folds[1]), seed) if len(members) else None,
        spec.folds[1],
        concat(spec.folds[2], spec.folds[3]),
    )


def ema_roles(spec: DataSpec, s: Scenario, seed: int) -> Roles:
    """Halves of the cell's (degraded) calibration data; members from fold 5 (or 4)."""
    population, nonmembers = s.calibration.split(0.5, seed=seed)
    in_fold_5 = np.isin(sample_hashes(s.query), sample_hashes(spec.folds[4])).any()
    return Roles(spec.folds[3] if in_fold_5 else spec.folds[4], nonmembers, population)


@dataclass
class Cell:
    """One grid cell's reference-model audit (``result`` is None when refused)."""

    scenario: Scenario
    result: AuditResult | None

    @property
    def decision(self) -> str:
        return NO_MEMBERS if self.result is None else self.result.decision

    @property
    def verdict(self) -> str:
        if self.result is None:
            return NO_MEMBERS
        if self.decision == "inconclusive":
            return "inconclusive"
        return "right" if self.decision == self.scenario.expected else "WRONG"


def audit_cell(
    spec: DataSpec, s: Scenario, auditor: ReferenceModelAuditor, cache: Path, seeds: tuple
) -> Cell:
    seed, target_seed = seeds
    roles = (liu_roles if s.grid == "Liu" else ema_roles)(spec, s, seed)
    if roles.members is None:
        return Cell(s, None)
    target = ShadowTrainer(s.recipe, cache_dir=cache).train(s.target_data, seed=target_seed)
    result = auditor.audit(
        target, s.query, (roles.members, roles.nonmembers), population=roles.population
    )
    return Cell(s, result)


def format_cell(c: Cell) -> str:
    s = c.scenario
    head = f"| {s.dataset} | {s.name} | {len(s.query)} |"
    if c.result is None:
        return f"{head} - | - | - | {NO_MEMBERS} | {s.expected} | {NO_MEMBERS} |"
    d = c.result.details
    return (
        f"{head} {c.result.statistic:.3g} | {d['member_auc']:.3f} "
        f"| {share_text(d['membership_strength'])} [{share_text(d['membership_strength_upper'])}] "
        f"| {c.decision} | {s.expected} | {c.verdict} |"
    )


def summary(cells: Sequence[Cell]) -> list[str]:
    lines = [
        "| dataset | grid | right | inconclusive | wrong | n/a |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for dataset in dict.fromkeys(c.scenario.dataset for c in cells):
        for grid in ("Liu", "EMA"):
            mine = [c for c in cells if c.scenario.dataset == dataset and c.scenario.grid == grid]
            n = Counter(c.verdict for c in mine)
            lines.append(
                f"| {dataset} | {grid} | {n['right']} | {n['inconclusive']} | {n['WRONG']} "
                f"| {n[NO_MEMBERS]} |"
            )
    return lines


def report(args: argparse.Namespace, cells: Sequence[Cell], started: float) -> None:
    LINES.clear()
    command = " ".join(["python benchmarks/withdrawal_audit_grid_refmodel.py", *sys.argv[1:]])
    say("# The reference-model auditor on the withdrawal-audit grids")
    say()
    say(
        f"`{command}`; seed {args.seed} (targets {args.seed + 1}, as the grid); "
        f"{args.references} reference models per population; alpha 0.05, margin 0.5; "
        f"torch {torch.__version__}, {args.threads} thread(s); "
        f"{time.perf_counter() - started:.0f} s wall."
    )
    say()
    say(
        "Roles (see the script's docstring): Liu grid: known members D* without D_Q (at most "
        "one fold), non-members fold 2, population folds 3-4; EMA grid: the cell's k % clean "
        "calibration data split into population and known non-members, members fold 5 (4). "
        "`n/a`: no known member, the auditor refuses."
    )
    say()
    say(
        "| dataset | scenario | \\|D_Q\\| | p_member | members' AUC "
        "| remembered share [upper bound] | decision | expected | verdict |"
    )
    say("|---|---|---:|---:|---:|---|---|---|---|")
    for c in cells:
        say(format_cell(c))
    say()
    for line in summary(cells):
        say(line)
    say()
    wrong = [c for c in cells if c.verdict == "WRONG"]
    judged = [c for c in cells if c.verdict != NO_MEMBERS]
    verdict = "met" if not wrong else "missed"
    say(
        f"Target (issue 11): never wrong in the grid's cells: **{verdict}** "
        f"({len(wrong)} wrong of {len(judged)} judged cells; "
        f"{sum(c.verdict == 'right' for c in judged)} right)."
    )
    if args.out:
        write(args.out)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--datasets", nargs="+", choices=DATASETS, default=["digits", "mnist", "pneumoniamnist"]
    )
    parser.add_argument("--quick", action="store_true", help="the grid's reduced cells")
    parser.add_argument("--references", type=int, default=4, help="reference models")
    parser.add_argument("--seed", type=int, default=0, help="auditor and split seed, as the grid")
    parser.add_argument("--workers", type=int, default=1, help="reference-model trainings at once")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--cache-dir", type=Path, default=Path("/tmp/monai-forget-grid-refmodel"))
    parser.add_argument("--out", type=Path, help="also write the markdown here")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    root = start_run(args.threads)
    if root is None:
        return 2
    started = time.perf_counter()
    cache = args.cache_dir.resolve()
    cache.mkdir(parents=True, exist_ok=True)
    seeds = (args.seed, args.seed + 1)
    cells: list[Cell] = []
    for name in args.datasets:
        spec = LOADERS[name](root, args.seed)
        auditor = ReferenceModelAuditor(
            recipe=spec.recipe,
            seed=args.seed,
            cache_dir=cache,
            n_references=args.references,
            workers=args.workers,
        )
        scenarios = liu_scenarios(spec, args.seed, args.quick) + ema_scenarios(
            spec, args.seed, args.quick
        )
        for i, s in enumerate(scenarios, 1):
            cells.append(audit_cell(spec, s, auditor, cache, seeds))
            log(f"{spec.name} {i}/{len(scenarios)}: {s.name}, {len(s.query)}: {cells[-1].decision}")
        report(args, cells, started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
