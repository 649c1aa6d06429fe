"""The paper's MNIST federation on the NVIDIA FLARE simulator, beside the in-process run.

Issue 35, item 4: one seed of ``elimination_paper.py`` (Liu et al. 2020, Sec. VI: 30 users
of 100 MNIST digits, the network of Fig. 5, FedAvg per Protocol 2) trained as a FLARE job
(:func:`monai_forget.fl.run_federated`: ``FedAvgRecipe`` in ``SimEnv``, one client per
user, the same initial model and client seeds), then judged exactly as the in-process
model is: Forsaken's elimination of the 10 users' 200 samples from the final global model
(the generator runs where the model is, as in ``elimination_paper.py``), the XGBoost and
gradient-boosting oracles, the forgetting rate, the accuracies and the equivalence test
against retraining. The shadow federation and the retrained models are the in-process
ones (copied from ``--work``): they are the same for both arms, so every difference in a
row is the trained model's.

The simulator runs one process per client (``simulator_threads`` = 30): with fewer, it
starts a process for every task a client is swapped in for, measured at about 8 s a task
(about 2 hours for 30 rounds of 30 users on 2 cores).

Run::

    python benchmarks/elimination_paper_flare.py --seed 0 --rounds 30 --k 6 \\
        --work /tmp/paper --out benchmarks/results/elimination_paper_flare.md
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

import _elimination_paper as paper
import torch
from _markdown import log, say, write  # benchmarks/_markdown.py, next to this script

from monai_forget.data import data_root, load_mnist_test
from monai_forget.fl import FederatedConfig, run_federated
from monai_forget.unlearning.baselines import fedavg


def flare_config(seed: int, rounds: int) -> FederatedConfig:
    """``elimination_paper.RECIPE`` as a FLARE federation of ``paper.USERS`` clients."""
    recipe = paper.RECIPE
    config = FederatedConfig(
        network=recipe.network,
        network_args=dict(recipe.network_args),
        rounds=rounds,
        local_steps=recipe.steps,
        batch_size=recipe.batch_size,
        learning_rate=recipe.learning_rate,
        optimizer=recipe.optimizer,
        seed=seed,
        simulator_threads=paper.USERS,
    )
    if config.recipe() != recipe:
        raise RuntimeError(f"the FLARE clients' recipe {config.recipe()} is not {recipe}")
    return config


def in_process(users: list, seed: int, rounds: int) -> tuple[torch.nn.Module, float]:
    """``elimination_paper.federation``'s FedAvg, timed (never read from a cache)."""
    torch.manual_seed(seed)
    model = paper.RECIPE.build()
    start = time.perf_counter()
    fedavg(model, users, paper.RECIPE, rounds, seed=seed, device=torch.device("cpu"))
    return model.eval(), time.perf_counter() - start


def max_difference(a: torch.nn.Module, b: torch.nn.Module) -> float:
    sa, sb = a.state_dict(), b.state_dict()
    return max(float((sa[k].double() - sb[k].double()).abs().max()) for k in sa)


def judged(args: argparse.Namespace, digits, model: torch.nn.Module, arm: str) -> dict:
    """``paper.run_seed`` on a model folder whose target federation is ``model`` and
    whose shadow and retrained federations are the in-process ones of ``--work``."""
    source = Path(args.work) / f"seed{args.seed}"
    folder = Path(args.work) / "flare" / arm / f"seed{args.seed}"
    folder.mkdir(parents=True, exist_ok=True)
    for name in ["shadow.pt", *(f"re{j}.pt" for j in range(args.k + 1))]:
        shutil.copyfile(source / name, folder / name)
    torch.save(model.state_dict(), folder / "before.pt")
    return paper.run_seed(
        digits, args.seed, argparse.Namespace(**{**vars(args), "work": folder.parent})
    )


def row(label: str, result: dict, seconds: float) -> str:
    b, f = result["rows"]["before"], result["rows"]["forsaken"]
    rate = {name: f["fr"][name][0] for name in paper.ORACLES}
    return (
        f"| {label} | {seconds:.0f} | {b['acc_test']:.4f} | {paper.pct(rate['xgboost'].brr)} | "
        f"{paper.pct(rate['xgboost'].arr)} | {paper.pct(rate['xgboost'].fr)} | "
        f"{paper.pct(rate['gradient_boosting'].fr)} | {f['acc_remaining']:.4f} | "
        f"{f['acc_test']:.4f} | {f['equivalence'].decision} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=30, help="FedAvg rounds")
    parser.add_argument("--k", type=int, default=6, help="retrained models of the reference")
    parser.add_argument("--work", required=True, help="elimination_paper.py's model cache")
    parser.add_argument("--out", default=None, help="also write the markdown here (atomic)")
    args = parser.parse_args()
    if not (data_root() / "mnist").is_dir():
        print(f"MNIST not found under {data_root()}; set MONAI_FORGET_DATA", file=sys.stderr)
        return 1
    torch.set_num_threads(1)
    digits = load_mnist_test()
    users = paper.split(digits, args.seed)["users"]
    log(f"seed {args.seed}: in-process FedAvg, {args.rounds} rounds of {len(users)} users")
    local, local_seconds = in_process(users, args.seed, args.rounds)
    log("FLARE simulator, the same federation")
    run = run_federated(
        {f"site-{i + 1}": u for i, u in enumerate(users)},
        flare_config(args.seed, args.rounds),
        Path(args.work) / "flare" / "workspace",
    )
    log("judging both models as elimination_paper.py judges its own")
    ours = judged(args, digits, local, "in_process")
    flare = judged(args, digits, run.global_model, "simulator")
    cached = paper.federation(
        users, args.seed, args.rounds, Path(args.work) / f"seed{args.seed}" / "before.pt"
    )

    say("# The paper's MNIST federation on NVIDIA FLARE (issue 35, item 4)")
    say()
    say(
        f"- command: `python benchmarks/elimination_paper_flare.py --seed {args.seed} --rounds "
        f"{args.rounds} --k {args.k} --work W`; torch {torch.__version__}, 1 thread in this "
        f"process and in each of the {paper.USERS} FLARE client processes; 2 CPU cores"
    )
    say(
        f"- the setting of `elimination_paper.md` (seed {args.seed}): {paper.USERS} users of "
        f"{paper.USER_SIZE} digits, Fig. 5's network, FedAvg {args.rounds} rounds of 5 Adam "
        "steps of 20; Forsaken (E = 10) on the final model; shadow and retrained "
        "federations those of `elimination_paper.py` (cached in `--work`), shared by both rows"
    )
    say(
        "- largest difference of any weight, FLARE's final model vs the in-process FedAvg: "
        f"{max_difference(run.global_model, local):.2e} (FLARE's aggregator averages in "
        f"float64, ours in float32; 30 rounds of Adam grow the rounding), and the same "
        "FedAvg run again in process vs the model of `elimination_paper.md` (cached in "
        f"`--work`, trained with 2 torch threads, so other float sums): "
        f"{max_difference(local, cached):.2e}"
    )
    say()
    say(
        "| federation | FedAvg (s) | acc. test | B.R.R | A.R.R | FR (XGBoost) | "
        "FR (gradient boosting) | acc. remaining after | acc. test after | "
        "equivalence to retraining |"
    )
    say("|---|---|---|---|---|---|---|---|---|---|")
    say(row("in process, 1 thread", ours, local_seconds))
    say(row("NVIDIA FLARE simulator", flare, run.seconds))
    say()
    say(
        f"FLARE's run took {run.seconds / local_seconds:.1f}x the in-process FedAvg "
        "(30 client processes started, and the simulator's task exchange every round)."
    )
    if args.out:
        write(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
