"""What ``monai-forget fl simulate|poc`` does once parsed (:mod:`monai_forget.cli.fl`
builds the parser): check the options by the library's rules, build the federation, run
the withdrawal on NVIDIA FLARE, measure it, write the outcome."""

from __future__ import annotations

import argparse
from pathlib import Path

from monai_forget.defaults import FORSAKEN_GENERATOR


def setup_from(args: argparse.Namespace):
    """The :class:`~monai_forget.fl.withdrawal_setup.FederatedWithdrawal` the options
    describe (checked when built: before any data is read or FLARE starts)."""
    from monai_forget.fl.withdrawal_setup import FederatedWithdrawal

    return FederatedWithdrawal(
        data=args.data,
        clients=args.clients,
        patients_per_class=args.patients_per_class,
        size=args.size,
        centre=not args.no_centre,
        per_client=args.per_client,
        site_signature=args.site_signature,
        rounds=args.rounds,
        local_steps=args.local_steps,
        hidden=[int(h) for h in args.hidden.split(",") if h.strip()],
        withdraw=args.withdraw,
        method=args.method,
        withdraw_round=args.withdraw_round,
        site_joins=args.site_joins,
        generator={n: getattr(args, n) for n in FORSAKEN_GENERATOR},
        remaining=args.remaining,
        auditors=args.auditors,
        retrained=args.retrained,
        seed=args.seed,
        device=args.device,
        backend=args.backend,
    )


def run_simulate(args: argparse.Namespace) -> int:
    import torch

    from monai_forget.cli import UserError

    setup = setup_from(args)
    try:
        import nvflare  # noqa: F401
    except ImportError as err:  # pragma: no cover - depends on the install
        raise UserError("NVIDIA FLARE is not installed: pip install 'monai-forget[fl]'") from err
    from monai_forget.fl.job import WithdrawalError
    from monai_forget.fl.poc import DeploymentError

    torch.set_num_threads(1)  # FLARE's clients share this process's cores
    try:
        outcome, paths = setup.run(args.out, overwrite=args.overwrite)
    except (DeploymentError, WithdrawalError) as err:  # the run's own failure, told plainly
        raise UserError(str(err)) from err
    run = outcome.run
    print(outcome.summary())
    print(
        f"results: {paths['results.json']}\nreport: {paths['report.html']}\n"
        f"FLARE console output: {run.workspace / 'simulator.log'}\nFLARE logs: {run.log_dir}"
    )
    return 0


def run_poc(args: argparse.Namespace) -> int:
    """``fl poc``: a withdrawal on a POC deployment, or, with ``--stop DIR``, stop what a
    killed run under ``DIR`` left running."""
    from monai_forget.cli import UserError

    if args.stop is None:
        if args.out is None:
            raise UserError("give --out (the output folder), or --stop DIR to clear a killed run")
        return run_simulate(args)
    from monai_forget.fl.poc import DeploymentError, check_ports_free, stop_deployment

    work = Path(args.stop) / "workspace"
    # a run's deployments: workspace/poc, or workspace/<job>/poc when a site is removed
    # after training (train/, then federaser/ or retrain/)
    pocs = [p for p in (work / "poc", *sorted(work.glob("*/poc"))) if p.is_dir()]
    if not pocs:
        raise UserError(f"no POC deployment under {work}: give --stop the --out folder of the "
                        "`fl poc` run")  # fmt: skip
    for poc in pocs:
        stopped = stop_deployment(poc)
        print(f"stopped {len(stopped)} process(es) of the deployment under {poc}: {stopped}")
    try:
        check_ports_free()
    except DeploymentError as err:
        raise UserError(f"the deployments under {work} are stopped, but {err}") from err
    print("FLARE's POC ports are free")
    return 0
