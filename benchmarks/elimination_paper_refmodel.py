"""Benchmark: the reference-model auditor's decision on the paper's MNIST setting.

Issue 35, item 3: beside Table III's forgetting rate and the equivalence test
(``elimination_paper.py``), the product's own withdrawal decision, the share of D_Q still
remembered with its upper bound (:class:`monai_forget.audit.ReferenceModelAuditor`, its
defaults: RMIA offline, 8 reference models, alpha 0.05, margin 0.5), on the same seeds,
federations and models (read from ``elimination_paper.py``'s ``--work`` cache, or
trained the same way).

Per seed, two audited sets of 200 samples each:

- **withdrawn**: the elimination set D_e (10 users x 20 samples);
- **remaining**: 200 samples drawn from the other training samples, which every model
  audited here trained on.

The auditor knows the rest of the remaining training samples (members of every model
audited) and the 2,000 samples the target never saw (500 held out, 1,500 test); its
reference models train by the target's design (FedAvg of the Fig. 5 network, users of
about 100 samples, 30 rounds, one local epoch) on halves of what it knows, as its
default design does. Both audits of a seed have the same known sets, so the same
reference models.

Audited models: the never-withdrawn model ("before"), Forsaken (the generator's
defaults, E = 10), Forsaken stopped at non-member confidence, and one model retrained
from scratch without D_e. Wrong answers: "forgotten" for a set the model trained on (the
withdrawn set of the never-withdrawn model, the remaining set of every model), "not
forgotten" for the withdrawn set of the retrained model; "inconclusive" is never wrong,
and its reason (with the size that would give the audit power) is printed.

Run (after ``elimination_paper.py`` with the same ``--work``, or alone)::

    python benchmarks/elimination_paper_refmodel.py --seeds 0 1 2 3 4 --work /tmp/paper \
        --out benchmarks/results/elimination_paper_refmodel.md
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch
from _elimination_paper import RECIPE, USER_SIZE, federation, run_all, split
from _markdown import log, say  # benchmarks/_markdown.py, next to this script

from monai_forget.audit import ReferenceModelAuditor
from monai_forget.data import concat
from monai_forget.fl.shadow import FedAvgShadowRecipe
from monai_forget.inference import predict
from monai_forget.unlearning import DummyGradientGenerator
from monai_forget.unlearning.confidence import mean_logit_confidence

AUDITED = 200
SETS = ("withdrawn", "remaining")
MODELS = ("before", "forsaken", "forsaken, stopped", "retraining")
NOT_FORGOTTEN, FORGOTTEN = "not forgotten", "forgotten"


def run_seed(digits, seed: int, args: argparse.Namespace) -> dict:
    log(f"seed {seed}")
    s = split(digits, seed)
    work = Path(args.work) / f"seed{seed}"
    before = federation(s["users"], seed, args.rounds, work / "before.pt")
    retrained = federation(s["remaining_users"], 1000 + 100 * seed, args.rounds, work / "re0.pt")
    e = s["eliminated"]
    forsaken = DummyGradientGenerator(iterations=10, seed=seed).generate(before, e).apply(before)
    target = mean_logit_confidence(before, s["held_out"])
    stopped = DummyGradientGenerator(iterations=30, seed=seed, target_confidence=target)
    models = {
        "before": before,
        "forsaken": forsaken,
        "forsaken, stopped": stopped.generate(before, e).apply(before),
        "retraining": retrained,
    }
    remaining = s["remaining"]
    rng = np.random.default_rng([seed, 35])
    pick = np.zeros(len(remaining), dtype=bool)
    pick[rng.choice(len(remaining), AUDITED, replace=False)] = True
    queries = {"withdrawn": e, "remaining": remaining.subset(np.flatnonzero(pick))}
    known = (remaining.subset(np.flatnonzero(~pick)), concat(s["held_out"], s["test"]))
    # the reference models' users hold about as many samples as the target's
    population = (len(known[0]) + len(known[1])) // 2
    clients = max(2, round(population * 0.5 / USER_SIZE))
    auditor = ReferenceModelAuditor(
        recipe=FedAvgShadowRecipe(RECIPE, clients=clients, rounds=args.rounds),
        seed=seed,
        cache_dir=work / "refmodel",
        workers=args.workers,
    )
    out = {}
    for name, query in queries.items():
        start = time.perf_counter()
        reference = auditor.fit_reference(query, known)
        log(f"  reference models for the {name} set: {time.perf_counter() - start:.0f} s")
        for model_name, model in models.items():
            outputs = reference.outputs(
                {role: predict(model, auditor.roles_[role]) for role in auditor.roles_}
            )
            result = reference.audit(outputs, label=f"{model_name}, {name}")
            out[(model_name, name)] = {
                "decision": result.decision,
                "share": float(result.details["membership_strength"]),
                "upper": float(result.details["membership_strength_upper"]),
                "reason": str(result.details["reason"]),
            }
            log(f"  {model_name:18s} {name:9s} {result.decision:13s} "
                f"share {out[(model_name, name)]['share']:.2f} "
                f"(upper {out[(model_name, name)]['upper']:.2f})")  # fmt: skip
    return {"audits": out, "clients": clients}


def wrong(model: str, audited: str, decision: str) -> bool | None:
    """A decision the data contradicts: a member set called forgotten, or the retrained
    model's withdrawn set called remembered; ``None`` where the truth is not known
    (Forsaken on the withdrawn set: what it achieves is what is measured)."""
    if model.startswith("forsaken") and audited == "withdrawn":
        return None
    if model == "retraining" and audited == "withdrawn":
        return decision == NOT_FORGOTTEN
    return decision == FORGOTTEN


def report(results: dict[int, dict], args: argparse.Namespace) -> None:
    seeds = sorted(results)
    say("# Forsaken on the paper's MNIST setting: the reference-model auditor's decision\n")
    say(
        f"`python benchmarks/elimination_paper_refmodel.py --seeds {' '.join(map(str, seeds))}"
        f" --rounds {args.rounds}` · python {platform.python_version()}, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads\n"
    )
    say(
        "Setting, models and seeds of `elimination_paper.md`. Auditor: "
        "`ReferenceModelAuditor` defaults (RMIA offline, 8 reference models, alpha 0.05, "
        "margin 0.5); its reference models FedAvg the Fig. 5 network over "
        f"{results[seeds[0]]['clients']} users for {args.rounds} rounds on halves of its "
        "known data (the remaining training samples but the audited 200, and the 2,000 "
        "never seen). Each cell: decision, remembered share (its 95 % upper bound).\n"
    )
    say("| seed | model | withdrawn D_e (200) | remaining (200) |")
    say("|---|---|---|---|")
    for seed in seeds:
        audits = results[seed]["audits"]
        for model in MODELS:
            cells = [
                f"{a['decision']} {a['share']:.2f} ({a['upper']:.2f})"
                for a in (audits[(model, name)] for name in SETS)
            ]
            say(f"| {seed} | {model} | {' | '.join(cells)} |")
    say("\n## Counts over seeds\n")
    say("| model | audited set | truth | not forgotten | forgotten | inconclusive | wrong |")
    say("|---|---|---|---|---|---|---|")
    for model in MODELS:
        for name in SETS:
            decisions = [results[seed]["audits"][(model, name)]["decision"] for seed in seeds]
            counts = [sum(d == k for d in decisions) for k in (NOT_FORGOTTEN, FORGOTTEN)]
            inconclusive = len(decisions) - sum(counts)
            marks = [wrong(model, name, d) for d in decisions]
            truth = (
                "measured" if marks[0] is None
                else "not a member" if model == "retraining" and name == "withdrawn"
                else "member"
            )  # fmt: skip
            errors = "-" if marks[0] is None else f"{sum(marks)}/{len(seeds)}"
            say(f"| {model} | {name} | {truth} | {counts[0]} | {counts[1]} | {inconclusive} "
                f"| {errors} |")  # fmt: skip
    say('\n## Why the auditor answered "inconclusive"\n')
    reasons: dict[str, list[str]] = {}
    for seed in seeds:
        for (model, name), a in results[seed]["audits"].items():
            if a["decision"] not in (NOT_FORGOTTEN, FORGOTTEN):
                reasons.setdefault(a["reason"], []).append(f"{model} / {name} (seed {seed})")
    for reason, cases in reasons.items():
        say(f"- {reason}: {', '.join(cases)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--rounds", type=int, default=30, help="FedAvg rounds (the cache's)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--work", required=True, help="model cache (shared with elimination_paper)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    return run_all(args, run_seed, report)


if __name__ == "__main__":
    sys.exit(main())
