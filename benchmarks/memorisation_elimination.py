"""Benchmark: Forsaken (SecForget on NVIDIA FLARE) against natural, forcible, retraining.

Liu, Ma, Liu & Ma, "Learn to Forget: User-Level Memorization Elimination in Federated
Learning" (2020). On real data, through the NVIDIA FLARE simulator, it prints (markdown):

- for every method (Forsaken = SecForget, Protocol 2, with the dummy gradient of
  Protocol 1; natural; forcible; retraining from scratch, Section IV-B): the forgetting
  rate FR = B.R.R x A.R.R (Section IV-A; also the direct rate and FR from a
  class-agnostic oracle), the K-S and EMA withdrawal audits on the withdrawn provider
  and a remaining one, and accuracy before -> after on the remaining providers'
  training data and on test data;
- the Forsaken row on two more seeds and on variations (raw intensities, larger
  providers, λ_r = 0.1, PneumoniaMNIST partitions, and the constructed MNIST
  site-signature scenario, labelled as such);
- elimination time for 10/20/30 generator iterations, its ratio to retraining from
  scratch, and a ~1M-parameter model in 10 iterations against the paper's 3.88 s
  (Table IV);
- the paper's targets (FR >= 85%, < 5% accuracy loss on remaining data, 1M parameters
  in 10 iterations under 3.88 s), met or missed, row by row.

Main federation: ACDC cine-MRI slices (32x32, centred), pathology (5 classes), 3
providers of 5 patients each (one per class), FedAvg 9 rounds x 50 local Adam steps,
MLP 1024-128-5, site-1 withdraws in round 7. Bounded for 2 CPU cores (about 30-40
minutes on a busy shared machine; 14 FLARE runs). Run::

    python benchmarks/memorisation_elimination.py \
        --out benchmarks/results/memorisation_elimination.md
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from _markdown import log, say, write  # benchmarks/_markdown.py, next to this script

from monai_forget.data import data_root
from monai_forget.fl.job import run_federated
from monai_forget.fl.run import (
    DEFAULT_GENERATOR,
    acdc_federation,
    audit_recipe,
    federated_oracle,
    mlp_config,
    sample_federation,
    simulate_withdrawal,
)
from monai_forget.fl.shadow import FedAvgShadowRecipe
from monai_forget.fl.spec import FederatedConfig, Withdrawal
from monai_forget.networks import MLP
from monai_forget.unlearning import DummyGradientGenerator, MembershipOracle, forgetting_rate
from monai_forget.unlearning.evaluation import AuditPlan, WithdrawalEvaluation, evaluate_withdrawal
from monai_forget.unlearning.scenario import Federation

WITHDRAWN, REMAINING = "site-1", ("site-2", "site-3")
ROUND = 7  # elimination round (0-based); round 8 is trained by the remaining providers
FR_TARGET, ACC_TARGET, PAPER_SECONDS = 0.85, 0.05, 3.88


@dataclass
class Row:
    """One evaluated withdrawal and its second (class-agnostic) forgetting rate."""

    name: str
    evaluation: WithdrawalEvaluation
    fr_agnostic: float
    before: torch.nn.Module | None = None


@dataclass
class Scenario:
    """A federation, its training design and its two oracles."""

    title: str
    federation: Federation
    config: FederatedConfig
    oracle: MembershipOracle
    agnostic: MembershipOracle


def make_scenario(title: str, federation: Federation, cache: Path, seed: int) -> Scenario:
    config = mlp_config(federation, seed=seed)
    log(f"[{title}] oracles")
    oracle = federated_oracle(federation, config, seed=seed, cache_dir=cache)
    agnostic = federated_oracle(
        federation, config, label_confidence=False, seed=seed, cache_dir=cache
    )
    return Scenario(title, federation, config, oracle, agnostic)


def agnostic_fr(s: Scenario, before: torch.nn.Module, after: torch.nn.Module) -> float:
    query = s.federation.clients[WITHDRAWN]
    return forgetting_rate(
        s.agnostic.is_member(before, query), s.agnostic.is_member(after, query)
    ).fr


def withdraw(
    s: Scenario, name: str, withdrawal: Withdrawal, work: Path, cache: Path, audit_before: bool
) -> Row:
    log(f"[{s.title}] FLARE run: {name}")
    outcome = simulate_withdrawal(
        s.federation,
        s.config,
        withdrawal,
        work,
        remaining=[REMAINING[0]],
        oracle=s.oracle,
        plan=AuditPlan(audit_before=audit_before, seed=s.config.seed, cache_dir=cache),
    )
    outcome.evaluation.label = name
    before = outcome.run.model_before_withdrawal()
    fr2 = agnostic_fr(s, before, outcome.run.global_model)
    return Row(name, outcome.evaluation, fr2, before)


def retrain(s: Scenario, before: torch.nn.Module, work: Path, cache: Path) -> tuple[Row, float]:
    name = f"retraining from scratch ({len(s.federation.clients) - 1} providers, FLARE)"
    log(f"[{s.title}] FLARE run: {name}")
    remaining = {k: v for k, v in s.federation.clients.items() if k != WITHDRAWN}
    run = run_federated(remaining, s.config, work)
    e = evaluate_withdrawal(
        name,
        before,
        run.global_model,
        s.federation,
        WITHDRAWN,
        [REMAINING[0]],
        audit_recipe(s.config),
        oracle=s.oracle,
        plan=AuditPlan(audit_before=False, seed=s.config.seed, cache_dir=cache),
    )
    e.seconds.update({"flare_run": run.seconds, "elimination": run.seconds})
    return Row(name, e, agnostic_fr(s, before, run.global_model)), run.seconds


# ----------------------------------------------------------------------------- tables


def _audit(e: WithdrawalEvaluation, method: str) -> str:
    w = e.audits[("after", WITHDRAWN, method)]
    k = e.audits[("after", REMAINING[0], method)]
    return f"{w.decision} ({w.statistic:.3g}) / {k.decision} ({k.statistic:.3g})"


def _remaining(acc: dict[str, float]) -> float:
    return float(np.mean([acc[s] for s in REMAINING if s in acc]))


def table(rows: list[Row], scenario_of: Callable[[Row], str] | None = None) -> None:
    first = "| scenario " if scenario_of else ""
    say(
        f"{first}| method | B.R.R | A.R.R | FR | direct | FR (class-agnostic oracle) | "
        "K-S withdrawn / remaining | EMA withdrawn / remaining | acc. withdrawn | "
        "acc. remaining (train) | Δ remaining | acc. test | Δ test | FLARE run (s) | "
        "elimination (s) |"
    )
    say(("|---" * (15 + (1 if scenario_of else 0))) + "|")
    for row in rows:
        e, r = row.evaluation, row.evaluation.rate
        b, a = e.accuracy["before"], e.accuracy["after"]
        rb, ra = _remaining(b), _remaining(a)
        cell = f"| {scenario_of(row)} " if scenario_of else ""
        say(
            f"{cell}| {row.name} | {100 * r.brr:.1f}% | {100 * r.arr:.1f}% | "
            f"{100 * r.fr:.1f}% | {100 * r.direct:.1f}% | {100 * row.fr_agnostic:.1f}% | "
            f"{_audit(e, 'ks')} | {_audit(e, 'ema')} | "
            f"{b[WITHDRAWN]:.3f} → {a[WITHDRAWN]:.3f} | {rb:.3f} → {ra:.3f} | "
            f"{100 * (ra - rb):+.1f} pt | {b['test']:.3f} → {a['test']:.3f} | "
            f"{100 * (a['test'] - b['test']):+.1f} pt | {e.seconds['flare_run']:.0f} | "
            f"{e.seconds['elimination']:.2f} |"
        )


def before_audits(rows: list[Row]) -> None:
    e = rows[0].evaluation
    ks, ema = e.audits[("before", WITHDRAWN, "ks")], e.audits[("before", WITHDRAWN, "ema")]
    say(
        f"\nBefore the withdrawal (global model of round {ROUND}), provider {WITHDRAWN}: K-S "
        f"{ks.decision} (ρ_KS {ks.statistic:.3g}), EMA {ema.decision} (ρ_EMA "
        f"{ema.statistic:.3g})."
    )


def targets(rows: list[tuple[str, Row]]) -> None:
    say("\n## Targets (Liu et al. 2020), row by row\n")
    say("| scenario | method | FR >= 85% | accuracy loss on remaining training data < 5 pt |")
    say("|---|---|---|---|")
    for scenario, row in rows:
        e = row.evaluation
        loss = _remaining(e.accuracy["before"]) - _remaining(e.accuracy["after"])
        fr = e.rate.fr
        say(
            f"| {scenario} | {row.name} | {'met' if fr >= FR_TARGET else 'missed'} "
            f"({100 * fr:.1f}%) | {'met' if loss < ACC_TARGET else 'missed'} "
            f"({100 * loss:+.1f} pt) |"
        )


# ----------------------------------------------------------------------------- timing


def timing(s: Scenario, before: torch.nn.Module, retrain_flare: float) -> None:
    say("\n## Elimination time (Protocol 1 alone, outside FLARE, 1 thread)\n")
    remaining = s.federation.clients[REMAINING[0]].concat(
        *[s.federation.clients[k] for k in REMAINING[1:]]
    )
    recipe = FedAvgShadowRecipe(
        s.config.recipe(),
        clients=len(REMAINING),
        rounds=s.config.rounds,
        group_of=s.federation.group_of,
    )
    start, cpu = time.perf_counter(), time.process_time()
    torch.manual_seed(s.config.seed)
    model = recipe.build()
    recipe.fit(model, remaining, seed=s.config.seed, device=torch.device("cpu"))
    retrain_local, retrain_cpu = time.perf_counter() - start, time.process_time() - cpu
    say(
        f"Retraining from scratch without {WITHDRAWN}: {retrain_flare:.1f} s as a FLARE run "
        f"(simulator start-up included); {retrain_local:.1f} s wall / {retrain_cpu:.1f} s CPU "
        "as the same FedAvg in one process.\n"
    )
    say(
        "| model | parameters | elimination set | iterations | wall (s) | CPU (s) | "
        "wall / FLARE retraining | wall / in-process retraining |"
    )
    say("|---|---|---|---|---|---|---|---|")
    data = s.federation.clients[WITHDRAWN]
    n_params = sum(p.numel() for p in before.parameters())
    hidden = s.config.network_args["hidden"]
    shape = "x".join(str(d) for d in s.config.network_args["in_shape"][1:])
    k = s.config.network_args["num_classes"]
    label = f"MLP {shape}-{'-'.join(map(str, hidden))}-{k} (federated, round {ROUND})"
    for iterations in (10, 20, 30):
        row = _time(before, data, iterations)
        say(
            f"| {label} | {n_params:,} | {len(data)} | {iterations} | {row[0]:.2f} | "
            f"{row[1]:.2f} | {row[0] / retrain_flare:.3f} | {row[0] / retrain_local:.3f} |"
        )
    in_shape = tuple(s.config.network_args["in_shape"])
    big_recipe = s.config.recipe(steps=100)
    torch.manual_seed(0)
    big = MLP(in_shape, k, hidden=(1024,))
    big_recipe.fit(big, remaining.concat(data), seed=0, device=torch.device("cpu"))
    big.eval()
    n_big = sum(p.numel() for p in big.parameters())
    wall, cpu_s = _time(big, data, 10)
    say(
        f"| MLP {shape}-1024-{k} (trained centrally, 100 steps) | {n_big:,} | {len(data)} | 10 "
        f"| {wall:.2f} | {cpu_s:.2f} | {wall / retrain_flare:.3f} | "
        f"{wall / retrain_local:.3f} |"
    )
    verdict = "met" if wall < PAPER_SECONDS else "missed"
    say(
        f"\n~1M parameters in 10 iterations: {wall:.2f} s wall, {cpu_s:.2f} s CPU on one "
        f"thread of a shared 2-core machine, against the paper's {PAPER_SECONDS} s on a "
        f"laptop CPU (Table IV): {verdict}."
    )


def _time(model: torch.nn.Module, data, iterations: int) -> tuple[float, float]:
    gen = DummyGradientGenerator(**{**DEFAULT_GENERATOR, "iterations": iterations})
    start, cpu = time.perf_counter(), time.process_time()
    gen.generate(model, data)
    return time.perf_counter() - start, time.process_time() - cpu


# ----------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="also write the markdown here (atomic)")
    parser.add_argument("--work", default=None, help="workspace (default: a temporary folder)")
    parser.add_argument(
        "--skip-variations", action="store_true", help="main federation and timing only"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    if not (data_root() / "acdc_ssl4mis" / "groups.csv").is_file():
        print(f"ACDC not found under {data_root()}; set MONAI_FORGET_DATA", file=sys.stderr)
        return 1
    import nvflare

    start = time.perf_counter()
    gen = DEFAULT_GENERATOR
    say("# Memorisation elimination: Forsaken vs natural, forcible, retraining (NVIDIA FLARE)\n")
    say(
        f"NVIDIA FLARE {nvflare.__version__} simulator (SimEnv, FedAvgRecipe, Client API), "
        f"torch {torch.__version__}, Python {platform.python_version()}, 1 torch thread per "
        f"process, {os.cpu_count()} CPU cores shared with other jobs (load average at start "
        f"{os.getloadavg()[0]:.1f}): wall-clock times are inflated accordingly."
    )
    say(
        f"Generator (Protocol 1): {gen['iterations']} iterations of L-BFGS (5 steps each), "
        f"λ_r (drift weight) {gen['drift_weight']}, λ_s (step weight) {gen['step_weight']}. "
        "FedAvg: 9 rounds x 50 local Adam steps (lr 1e-3, batch 32), one MLP hidden layer of "
        f"128. Withdrawal of {WITHDRAWN} in round {ROUND} (then one round by the remaining "
        "providers) unless the row says otherwise. Oracle: gradient-boosted trees on the "
        "sorted confidence vector plus the true-class confidence, shadow trained like the "
        "target (FedAvg in one process, same rounds and local recipe); the class-agnostic "
        "column uses the sorted vector only. Audits: K-S calibrated ratio (ρ_KS >= 1: "
        "forgotten) and EMA (ρ_EMA <= 0.1: forgotten), shadows trained 450 steps. "
        "Accuracy: before → after; 'remaining' is the mean over site-2 and site-3's "
        "training data."
    )
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work) if args.work else Path(tmp)
        cache = work / "cache"
        from monai_forget.data import load_acdc_slices

        slices = load_acdc_slices(size=32)

        def acdc(**kwargs) -> Federation:
            return acdc_federation(data=slices, **kwargs)

        main_s = make_scenario("ACDC", acdc(seed=0), cache, 0)
        say(f"\n## ACDC patient providers (real data), seed 0\n\n{main_s.federation.description}.")
        rows = [
            withdraw(
                main_s,
                "Forsaken (SecForget, round 7 + 1 round)",
                Withdrawal(WITHDRAWN, ROUND, "forsaken", gen),
                work / "forsaken",
                cache,
                True,
            )
        ]
        rows.append(
            withdraw(
                main_s,
                "Forsaken (SecForget, final round 8)",
                Withdrawal(WITHDRAWN, 8, "forsaken", gen),
                work / "final",
                cache,
                False,
            )
        )
        rows.append(
            withdraw(
                main_s,
                "natural (leaves at round 7)",
                Withdrawal(WITHDRAWN, ROUND, "natural"),
                work / "natural",
                cache,
                False,
            )
        )
        rows.append(
            withdraw(
                main_s,
                "forcible (subtracts its contributions, round 7)",
                Withdrawal(WITHDRAWN, ROUND, "forcible"),
                work / "forcible",
                cache,
                False,
            )
        )
        retrain_row, retrain_seconds = retrain(main_s, rows[0].before, work / "retrain", cache)
        rows.append(retrain_row)
        before_audits(rows)
        say()
        table(rows)
        target_rows = [("ACDC seed 0", r) for r in rows]
        timing(main_s, rows[0].before, retrain_seconds)

        if not args.skip_variations:
            extra: list[tuple[str, Row]] = []
            plans: list[tuple[str, Callable[[], Federation], dict]] = [
                ("ACDC seed 1", lambda: acdc(seed=1), gen),
                ("ACDC seed 2", lambda: acdc(seed=2), gen),
                ("ACDC raw intensities (not centred)", lambda: acdc(centre=False), gen),
                (
                    "ACDC 2 patients per class per provider",
                    lambda: acdc(patients_per_class=2),
                    gen,
                ),
                ("ACDC, λ_r = 0.1", lambda: acdc(seed=0), {**gen, "drift_weight": 0.1}),
                (
                    "PneumoniaMNIST random partitions (3 x 200, i.i.d.)",
                    lambda: sample_federation("pneumoniamnist"),
                    gen,
                ),
                (
                    "CONSTRUCTED: MNIST test digits, synthetic 2-pixel border on site-1",
                    lambda: sample_federation("mnist", signed=WITHDRAWN),
                    gen,
                ),
            ]
            for i, (title, build, settings) in enumerate(plans):
                seed = 1 if "seed 1" in title else 2 if "seed 2" in title else 0
                s = (
                    main_s
                    if title.startswith("ACDC, λ_r")
                    else make_scenario(title, build(), cache, seed)
                )
                row = withdraw(
                    s,
                    "Forsaken (SecForget, round 7 + 1 round)",
                    Withdrawal(WITHDRAWN, ROUND, "forsaken", settings),
                    work / f"var{i}",
                    cache,
                    True,
                )
                extra.append((title, row))
            say("\n## Forsaken on other seeds, variations and other data\n")
            say(
                "Same settings as above unless the scenario says otherwise. The last row is "
                "a constructed scenario, not real data: a synthetic border burned into the "
                "withdrawing provider's images.\n"
            )
            for _title, row in extra:
                before = row.evaluation.audits[("before", WITHDRAWN, "ks")]
                ema_b = row.evaluation.audits[("before", WITHDRAWN, "ema")]
                row.name = f"{row.name}; before: K-S {before.decision}, EMA {ema_b.decision}"
            lookup = {id(row): title for title, row in extra}
            table([row for _, row in extra], scenario_of=lambda r: lookup[id(r)])
            target_rows += extra
        targets(target_rows)
    say(f"\nTotal benchmark time: {time.perf_counter() - start:.0f} s.")
    if args.out:
        write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
