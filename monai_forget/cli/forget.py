"""``monai-forget forget simulate``: a federated withdrawal on the NVIDIA FLARE simulator.

Three (or more) providers train FedAvg on real images; one withdraws at a chosen round
with Forsaken's SecForget (Liu et al. 2020), forcibly or naturally. The command then
measures the forgetting rate, runs the K-S and EMA withdrawal audits on the withdrawn
provider and on a remaining one, and writes ``results.json``, ``summary.md`` and
``report.html`` to ``--out``. FLARE's logs are under ``--out/workspace/flare``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

DATASETS = ("mnist", "pneumoniamnist")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "forget", help="memorisation elimination (Forsaken) on the NVIDIA FLARE simulator"
    )
    actions = parser.add_subparsers(dest="action", required=True)
    sim = actions.add_parser(
        "simulate",
        help="federated training with one provider withdrawing, then audits",
        description="Run FedAvg on the NVIDIA FLARE simulator with N providers on real "
        "data, withdraw one at a chosen round, and audit the result.",
    )
    sim.add_argument(
        "--data", choices=DATASETS, default="mnist", help="real data set from $MONAI_FORGET_DATA"
    )
    sim.add_argument("--clients", type=int, default=3, help="number of providers")
    sim.add_argument("--per-client", type=int, default=200, help="samples per provider")
    sim.add_argument("--rounds", type=int, default=9, help="FedAvg rounds")
    sim.add_argument("--local-steps", type=int, default=50, help="local steps per round")
    sim.add_argument("--hidden", default="128", help="MLP hidden widths, comma-separated")
    sim.add_argument("--withdraw", default="site-1", help="withdrawing provider")
    sim.add_argument("--withdraw-round", type=int, default=7, help="0-based round")
    sim.add_argument("--method", choices=("forsaken", "forcible", "natural"), default="forsaken")
    sim.add_argument("--iterations", type=int, default=20, help="generator iterations E")
    sim.add_argument(
        "--drift-weight",
        type=float,
        default=0.1,
        help="weight of Eq. 4's change-from-original regulariser",
    )
    sim.add_argument(
        "--step-weight", type=float, default=0.0, help="weight of Eq. 4's step-length constraint"
    )
    sim.add_argument(
        "--no-site-signature",
        action="store_true",
        help="i.i.d. providers (no burned-in border on the withdrawing one)",
    )
    sim.add_argument("--out", required=True, help="output folder")
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument("--device", default="cpu")
    sim.add_argument("--overwrite", action="store_true", help="replace existing outputs")
    sim.set_defaults(func=run_simulate)


def _load(name: str):
    from monai_forget.data import load_mnist_test, load_pneumoniamnist

    if name == "mnist":
        return load_mnist_test()
    return load_pneumoniamnist("train")


def run_simulate(args: argparse.Namespace) -> int:
    import torch

    from monai_forget.audit import write_report
    from monai_forget.cli import UserError
    from monai_forget.io import atomic_write, check_writable
    from monai_forget.unlearning.evaluation import evaluate_withdrawal
    from monai_forget.fl.spec import FederatedConfig, Withdrawal
    from monai_forget.unlearning.scenario import build_federation

    try:
        from monai_forget.fl.job import run_federated
    except ImportError as err:  # pragma: no cover - depends on the install
        raise UserError("NVIDIA FLARE is not installed: pip install 'monai-forget[fl]'") from err
    out = Path(args.out)
    paths = {
        name: check_writable(out / name, args.overwrite)
        for name in ("results.json", "summary.md", "report.html")
    }
    data = _load(args.data)
    hidden = [int(h) for h in args.hidden.split(",") if h.strip()]
    config = FederatedConfig(
        network="mlp",
        network_args={
            "in_shape": list(data.image_shape),
            "num_classes": int(data.num_classes),
            "hidden": hidden,
        },
        rounds=args.rounds,
        local_steps=args.local_steps,
        seed=args.seed,
        simulator_threads=min(args.clients, 3),
    )
    generator = (
        {
            "iterations": args.iterations,
            "drift_weight": args.drift_weight,
            "step_weight": args.step_weight,
            "device": args.device,
        }
        if args.method == "forsaken"
        else {}
    )
    withdrawal = Withdrawal(args.withdraw, args.withdraw_round, args.method, generator)
    federation = build_federation(
        data,
        n_clients=args.clients,
        per_client=args.per_client,
        signed=None if args.no_site_signature else args.withdraw,
        seed=args.seed,
    )
    torch.set_num_threads(1)
    run = run_federated(federation.clients, config, out / "workspace", withdrawal=withdrawal)
    before = run.model_before_withdrawal()
    remaining = [c for c in federation.clients if c != args.withdraw][:1]
    evaluation = evaluate_withdrawal(
        args.method,
        before,
        run.global_model,
        federation,
        args.withdraw,
        remaining,
        config.recipe(steps=config.rounds * config.local_steps),
        seed=args.seed,
        device=args.device,
        cache_dir=out / "cache",
    )
    evaluation.seconds.update(
        {"flare_run": run.seconds, "elimination": float(run.record.get("seconds", 0.0))}
    )
    result = {
        **evaluation.to_dict(),
        "withdrawal": run.record,
        "logs": str(run.log_dir),
        "data": args.data,
        "seed": args.seed,
    }
    with atomic_write(paths["results.json"], "w", overwrite=args.overwrite) as handle:
        handle.write(json.dumps(result, indent=2, default=str))
    summary = _summary(evaluation, args.withdraw, remaining[0])
    with atomic_write(paths["summary.md"], "w", overwrite=args.overwrite) as handle:
        handle.write(summary)
    write_report(
        list(evaluation.audits.values()),
        paths["report.html"],
        title=f"Withdrawal of {args.withdraw} ({args.method})",
        overwrite=args.overwrite,
    )
    print(summary)
    print(
        f"results: {paths['results.json']}\nreport: {paths['report.html']}\n"
        f"FLARE logs: {run.log_dir}"
    )
    return 0


def _summary(evaluation, withdrawn: str, remaining: str) -> str:
    r = evaluation.rate
    lines = [
        f"# Withdrawal of {withdrawn}: {evaluation.label}",
        "",
        f"Forgetting rate: {r.summary()}",
        "",
        "| stage | provider | K-S | EMA |",
        "|---|---|---|---|",
    ]
    for stage, site in (("before", withdrawn), ("after", withdrawn), ("after", remaining)):
        cells = []
        for method in ("ks", "ema"):
            a = evaluation.audits.get((stage, site, method))
            cells.append(
                "-" if a is None else f"{a.decision} ({a.statistic_name} = {a.statistic:.3g})"
            )
        lines.append(f"| {stage} | {site} | {cells[0]} | {cells[1]} |")
    lines += ["", "| data | accuracy before | accuracy after |", "|---|---|---|"]
    for name, acc in evaluation.accuracy["before"].items():
        lines.append(f"| {name} | {acc:.3f} | {evaluation.accuracy['after'][name]:.3f} |")
    lines.append("")
    return "\n".join(lines)
