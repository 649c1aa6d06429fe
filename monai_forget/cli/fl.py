"""``monai-forget fl simulate`` / ``fl poc``: a federated withdrawal on NVIDIA FLARE (the
simulator, or a POC deployment whose server and clients are separate processes).

N providers train FedAvg on real images (default: ACDC cine-MRI slices, providers made
of disjoint patient groups); one withdraws at a chosen round with Forsaken's SecForget
(Liu et al. 2020, "Learn to Forget: User-Level Memorization Elimination in Federated
Learning", Protocol 2), forcibly or naturally. The command then measures the forgetting
rate (Section IV-A), runs the K-S and EMA withdrawal audits on the withdrawn provider and
on a remaining one, and writes ``results.json``, ``summary.md`` and ``report.html`` to
``--out``. FLARE's logs go to ``--out/workspace`` (see ``docs/unlearning.md``).
"""

from __future__ import annotations

import argparse

from monai_forget import defaults
from monai_forget.auditor_registry import AUDITORS, NAMES
from monai_forget.cli.fl_run import run_poc, run_simulate
from monai_forget.cli.options import add_run_arguments, auditor_name
from monai_forget.defaults import FORSAKEN_GENERATOR, RETRAINED_MODELS


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "fl", help="federated memorisation elimination (Forsaken) on NVIDIA FLARE"
    )
    actions = parser.add_subparsers(dest="action", required=True)
    sim = actions.add_parser(
        "simulate",
        help="FedAvg with one provider withdrawing, then forgetting rate and audits",
        description="Run FedAvg on the NVIDIA FLARE simulator with N providers on real "
        "data, withdraw one at a chosen round, and measure the result. Start-up takes "
        "about 30 s; logs go to OUT/workspace/simulator.log and OUT/workspace/flare/.",
    )
    _add_options(sim)
    sim.set_defaults(func=run_simulate, backend="simulator")
    poc = actions.add_parser(
        "poc",
        help="the same withdrawal on a FLARE POC deployment (separate server and client processes)",
        description="Provision a FLARE proof-of-concept deployment on this machine (a "
        "server, one client per provider and an admin, each with its startup kit and "
        "certificates), start every service as its own process, submit the job through "
        "the admin API, wait for it, stop every service, and measure the result as `fl "
        "simulate` does. Start-up takes about a minute; the deployment and every "
        "service's logs stay in OUT/workspace/poc/.",
    )
    _add_options(poc, out_required=False)
    poc.add_argument(
        "--stop",
        metavar="DIR",
        help="stop what a killed `fl poc` run left running (its services, by the process "
        "ids recorded in DIR/workspace/poc, and any process under that workspace); DIR is "
        "that run's --out. Nothing else is done",
    )
    poc.set_defaults(func=run_poc, backend="poc")


def _add_options(sim: argparse.ArgumentParser, out_required: bool = True) -> None:
    data = sim.add_argument_group("data (from $MONAI_FORGET_DATA, default ../shared/data)")
    data.add_argument(
        "--data",
        choices=defaults.FL_DATASETS,
        default=defaults.FL_DATA,
        help="acdc: providers are disjoint patient groups (pathology, 5 classes, 32x32 "
        "slices); acdc-features: the same groups, one sample per patient (clinical "
        "features of its ED/ES masks, all 100 patients); pneumoniamnist / mnist: random "
        "sample partitions (default %(default)s)",
    )
    data.add_argument(
        "--clients",
        type=int,
        default=defaults.FL_CLIENTS,
        help="number of providers, at least 2 (default %(default)s)",
    )
    data.add_argument(
        "--patients-per-class",
        type=int,
        default=None,
        help="acdc / acdc-features: patients of each class per provider (default "
        + " / ".join(str(n) for n in defaults.FL_PATIENTS_PER_CLASS.values())
        + ")",
    )
    data.add_argument(
        "--size",
        type=int,
        default=defaults.FL_SLICE_SIZE,
        help="acdc: slice height and width (default %(default)s)",
    )
    data.add_argument(
        "--no-centre",
        action="store_true",
        help="acdc: raw [0, 1] intensities (default: subtract the calibration mean image)",
    )
    data.add_argument(
        "--per-client",
        type=int,
        default=defaults.FL_PER_CLIENT,
        help="pneumoniamnist / mnist: samples per provider (default %(default)s)",
    )
    data.add_argument(
        "--site-signature",
        action="store_true",
        help="pneumoniamnist / mnist: CONSTRUCTED scenario, burn a synthetic 2-pixel border "
        "into the withdrawing provider's images",
    )
    train = sim.add_argument_group("federated training")
    train.add_argument(
        "--rounds", type=int, default=defaults.FL_ROUNDS, help="FedAvg rounds (default %(default)s)"
    )
    train.add_argument(
        "--local-steps",
        type=int,
        default=defaults.FL_LOCAL_STEPS,
        help="local steps per round (default %(default)s)",
    )
    train.add_argument(
        "--hidden",
        default=",".join(map(str, defaults.FL_HIDDEN)),
        help="MLP hidden widths, comma-separated (default %(default)s)",
    )
    leave = sim.add_argument_group("withdrawal")
    leave.add_argument(
        "--withdraw",
        default=defaults.FL_WITHDRAWING,
        help="withdrawing provider (default %(default)s)",
    )
    leave.add_argument(
        "--withdraw-round",
        type=int,
        default=defaults.FL_WITHDRAW_ROUND,
        help="0-based round of the withdrawal (default %(default)s)",
    )
    leave.add_argument(
        "--method",
        choices=("retrain", "federaser", "checkpoint", "forsaken", "forcible", "natural"),
        default=None,
        help="how the provider leaves. After training, from what the server kept "
        "(--withdraw-round unused): retrain trains again without the provider, federaser "
        "calibrates the stored updates of the providers that stay (Liu et al. 2021, "
        "FedEraser), checkpoint retrains from the global model of the round the provider "
        "joined in (--site-joins; exact, the rounds from there only). During training, in "
        "--withdraw-round (Liu et al. 2020): forsaken sends "
        "the dummy-gradient elimination update, forcible subtracts its accumulated "
        "contributions, natural sends nothing. The default is the measured one "
        "(benchmarks/results/withdrawal_methods.md): checkpoint with --site-joins, else "
        "retrain (no cheaper method was equivalent to retraining for a provider that "
        "trained from round 0)",
    )
    generator = {
        "iterations": (int, "generator iterations E"),
        "drift_weight": (float, "λ_r, weight of Eq. 4's change-from-original regulariser"),
        "step_weight": (float, "λ_s, weight of Eq. 4's step-length term"),
    }
    for name, (kind, text) in generator.items():
        leave.add_argument(
            "--" + name.replace("_", "-"),
            type=kind,
            default=FORSAKEN_GENERATOR[name],
            help=f"{text} (default %(default)s)",
        )
    leave.add_argument(
        "--site-joins",
        type=int,
        default=0,
        metavar="ROUND",
        help="0-based round the withdrawing provider first trains in (a provider that "
        "joined late; removal after training only) (default %(default)s)",
    )
    leave.add_argument(
        "--remaining", default=None, help="remaining provider to audit (default: the first)"
    )
    leave.add_argument(
        "--auditors",
        nargs="+",
        type=auditor_name,
        metavar="{" + ",".join(NAMES) + "}",
        default=None,
        help="withdrawal auditors run on the withdrawn and the remaining provider: "
        + "; ".join(f"{k.name}: {k.summary}" for k in AUDITORS)
        + " (the reference models' known members are the providers that stayed other than "
        "the one audited, so they need 3 or more providers) (default: all; ks and ema with "
        "2 providers)",
    )
    leave.add_argument(
        "--retrained",
        type=int,
        default=RETRAINED_MODELS,
        help="models retrained from scratch without the provider (FedAvg in one process) "
        "that the final model is compared with on the withdrawn data; 0 skips it, else at "
        "least 3 (default %(default)s)",
    )
    sim.add_argument("--out", required=out_required, help="output folder")
    add_run_arguments(sim, "seed of the federation, training, withdrawal and audits")
    sim.add_argument("--overwrite", action="store_true", help="replace existing outputs")
