"""Study: what moves Forsaken's result on a federation that generalises.

The FLARE protocol of ``monai_forget.fl`` replayed in one process (the same seeded
FedAvg: each client's local fit in round r uses seed ``seed * 100003 + r * 1009 +
index``, as :mod:`monai_forget.fl.client` does; equal-weight averages): rounds 0-6 with
every provider, round 7 in which ``site-1`` sends ``W + step / share`` (SecForget,
Liu et al. 2020, Protocol 2; the step from Protocol 1's dummy-gradient generator) or
nothing (natural), round 8 with the others. For each generator setting (iterations E,
drift weight λ_r, step weight λ_s, the stopping rule; not the learning rate η, which
only rescales the reported gradient) and seed it prints the forgetting
rate (the federation's shadow-trained oracle, Section IV-A), the accuracy on test data,
the share of the withdrawn data the final model still classifies right, and the
comparison with ``--k`` models retrained without the provider
(:mod:`monai_forget.unlearning.retrain_reference`). Run::

    python benchmarks/elimination_study.py --seeds 0 1 2 3 4 \
        --out benchmarks/results/elimination_study.md
"""

from __future__ import annotations

import argparse
import copy
import sys

import numpy as np
import torch
from _markdown import log, say, write  # benchmarks/_markdown.py, next to this script

from monai_forget.data import data_root
from monai_forget.defaults import FORSAKEN_GENERATOR
from monai_forget.fl.run import acdc_feature_federation, federated_oracle, mlp_config
from monai_forget.unlearning import (
    DummyGradientGenerator,
    forgetting_rate,
    mean_logit_confidence,
)
from monai_forget.unlearning.baselines import average_states
from monai_forget.unlearning.evaluation import accuracy
from monai_forget.unlearning.retrain_reference import (
    INDISTINGUISHABLE,
    compare_with_retraining,
    retrained_models,
)

WITHDRAWN, ROUND = "site-1", 7
#: Stands for "the model's mean logit confidence on the withdrawn provider's
#: calibration set" (non-members of its distribution) as the generator's stopping target.
NONMEMBERS = "non-members"
#: Generator settings studied: the product's default, then one change at a time.
SETTINGS = {
    "default": dict(FORSAKEN_GENERATOR),
    "E = 1": {**FORSAKEN_GENERATOR, "iterations": 1},
    "E = 5": {**FORSAKEN_GENERATOR, "iterations": 5},
    "E = 50": {**FORSAKEN_GENERATOR, "iterations": 50},
    "λ_r = 0.3": {**FORSAKEN_GENERATOR, "drift_weight": 0.3},
    "λ_r = 1": {**FORSAKEN_GENERATOR, "drift_weight": 1.0},
    "λ_s = 0.1": {**FORSAKEN_GENERATOR, "step_weight": 0.1},
    "stop at non-member φ (E ≤ 20)": {**FORSAKEN_GENERATOR, "target_confidence": NONMEMBERS},
    "stop at non-member φ (E ≤ 50)": {
        **FORSAKEN_GENERATOR,
        "iterations": 50,
        "target_confidence": NONMEMBERS,
    },
    "natural (no step)": None,
}


def local(model, part, recipe, seed: int, round_: int, index: int):
    """One client's local fit of round ``round_`` (the FLARE client's seed)."""
    fitted = copy.deepcopy(model)
    recipe.fit(fitted, part, seed=seed * 100_003 + round_ * 1_009 + index, device="cpu")
    return fitted.state_dict()


def replay(fed, config, generator: dict | None, stopped: list):
    """(model before the withdrawal round, final model); appends the generator's stop."""
    recipe, names = config.recipe(), list(fed.clients)
    torch.manual_seed(config.seed)
    model = recipe.build()
    for r in range(ROUND):
        model.load_state_dict(
            average_states(
                [
                    local(model, fed.clients[n], recipe, config.seed, r, i)
                    for i, n in enumerate(names)
                ]
            )
        )
    before = copy.deepcopy(model).eval()
    states = []
    for i, name in enumerate(names):
        if name != WITHDRAWN:
            states.append(local(model, fed.clients[name], recipe, config.seed, ROUND, i))
        elif generator is not None:
            if generator.get("target_confidence") == NONMEMBERS:
                target = mean_logit_confidence(model, fed.calibration[name])
                generator = {**generator, "target_confidence": target}
            result = DummyGradientGenerator(**generator).generate(model, fed.clients[name])
            stopped.append(result.stopped_at)
            step = result.step
            share = 1.0 / len(names)
            state = model.state_dict()
            states.append({k: state[k] + step[k] / share if k in step else state[k] for k in state})
    model.load_state_dict(average_states(states))
    for r in range(ROUND + 1, config.rounds):
        model.load_state_dict(
            average_states(
                [
                    local(model, fed.clients[n], recipe, config.seed, r, i)
                    for i, n in enumerate(names)
                    if n != WITHDRAWN
                ]
            )
        )
    return before, model.eval()


def _stops(rows: list[dict]) -> str:
    """The iterations at which a target-stopped generator stopped ("-": ran all E)."""
    if all(x["stopped"] is None for x in rows):
        return ""
    return ", ".join("-" if x["stopped"] is None else str(x["stopped"]) for x in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument(
        "--settings", nargs="+", choices=list(SETTINGS), default=list(SETTINGS), metavar="NAME"
    )
    parser.add_argument("--out")
    args = parser.parse_args()
    settings = {name: SETTINGS[name] for name in args.settings}
    from monai_forget.acdc.release import expert_feature_rows, feature_images

    torch.set_num_threads(1)
    images = feature_images(expert_feature_rows(data_root()))
    rows: dict[str, list[dict]] = {name: [] for name in settings}
    for seed in args.seeds:
        fed = acdc_feature_federation(data=images, seed=seed)
        config = mlp_config(fed, seed=seed)
        log(f"[seed {seed}] oracle, {args.k} retrained references")
        oracle = federated_oracle(fed, config, seed=seed)
        references = retrained_models(
            fed.clients, WITHDRAWN, config, args.k, seed=1000 + 100 * seed
        )
        query = fed.clients[WITHDRAWN]
        for name, generator in settings.items():
            stopped: list = []
            before, after = replay(fed, config, generator, stopped)
            rate = forgetting_rate(oracle.is_member(before, query), oracle.is_member(after, query))
            versus = compare_with_retraining(after, references, query)
            rows[name].append(
                {
                    "fr": rate.fr,
                    "test_loss": accuracy(before, fed.test) - accuracy(after, fed.test),
                    "withdrawn_acc": accuracy(after, query),
                    "same": versus.decision == INDISTINGUISHABLE,
                    "t": versus.t,
                    "stopped": stopped[0] if stopped else None,
                }
            )
            log(f"  {name}: FR {rate.fr:.3f}, stopped at {stopped}, {versus.summary()}")
    say("# What moves Forsaken's result: ACDC feature federation, in-process replay\n")
    say(
        f"Seeds {args.seeds}; FedAvg 9 rounds x 50 local Adam steps, MLP 128 hidden; "
        f"{WITHDRAWN} withdraws in round {ROUND}; k = {args.k} retrained references. "
        f"Default generator: {dict(FORSAKEN_GENERATOR)}.\n"
    )
    say(
        "| setting | FR mean | FR min | test accuracy loss (mean, worst) | withdrawn data "
        "still right | t vs retraining (mean) | indistinguishable from retraining | "
        "generator stopped at (per seed) |"
    )
    say("|---|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        fr = np.array([x["fr"] for x in r])
        loss = np.array([x["test_loss"] for x in r])
        say(
            f"| {name} | {100 * fr.mean():.1f} % | {100 * fr.min():.1f} % | "
            f"{100 * loss.mean():+.1f} / {100 * loss.max():+.1f} pt | "
            f"{100 * np.mean([x['withdrawn_acc'] for x in r]):.0f} % | "
            f"{np.mean([x['t'] for x in r]):+.1f} | {sum(x['same'] for x in r)}/{len(r)} | "
            f"{_stops(r)} |"
        )
    say(
        "\nt < 0: less confident on the withdrawn data than retraining (over-forgetting); "
        't > 0: more (remembering). "Stop at non-member φ": the generator stops once the '
        "mean logit confidence on the withdrawn data falls to the model's own on the "
        "withdrawn provider's calibration set (non-members of its distribution), its last "
        'step scaled back to land on it; "-": the target was not reached within E, '
        "0: already below it (no step)."
    )
    if args.out:
        write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
