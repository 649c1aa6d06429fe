"""What ``monai-forget fl simulate|poc`` does once parsed (:mod:`monai_forget.cli.fl`
builds the parser): check the options by the library's rules, build the federation, run
the withdrawal on NVIDIA FLARE, measure it, write the outcome."""

from __future__ import annotations

import argparse
from pathlib import Path


def _check(args: argparse.Namespace) -> None:
    """Refuse bad options before loading data or starting FLARE (the library's rules)."""
    from monai_forget.fl.run import check_withdrawal, default_auditors

    if args.auditors is None:
        args.auditors = list(default_auditors(args.clients))
    sites = [f"site-{i + 1}" for i in range(args.clients)]
    remaining = [args.remaining] if args.remaining else None
    check_withdrawal(sites, args.withdraw, remaining, args.auditors, args.retrained)
    if args.site_signature and args.data.startswith("acdc"):
        raise ValueError(
            "--site-signature is a constructed scenario for pneumoniamnist / mnist; ACDC "
            "providers differ by their patients"
        )


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


def run_simulate(args: argparse.Namespace) -> int:
    import torch

    from monai_forget.cli import UserError

    _check(args)
    try:
        import nvflare  # noqa: F401
    except ImportError as err:  # pragma: no cover - depends on the install
        raise UserError("NVIDIA FLARE is not installed: pip install 'monai-forget[fl]'") from err
    from monai_forget.fl.job import WithdrawalError
    from monai_forget.fl.outcome import check_outputs
    from monai_forget.fl.poc import DeploymentError, check_ports_free
    from monai_forget.fl.run import (
        acdc_feature_federation,
        acdc_federation,
        mlp_config,
        sample_federation,
        simulate_withdrawal,
    )
    from monai_forget.fl.spec import departure
    from monai_forget.unlearning.evaluation import AuditPlan

    out = Path(args.out)
    check_outputs(out, args.overwrite)  # before any data is read or model trained
    if args.backend == "poc":
        try:
            check_ports_free()  # before any data is read or model trained
        except DeploymentError as err:
            raise UserError(str(err)) from err
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
    withdrawal = departure(
        args.withdraw,
        args.method,
        round=args.withdraw_round,
        joined=args.site_joins,
        generator=generator,
    )
    if args.data == "acdc":
        federation = acdc_federation(
            size=args.size,
            n_clients=args.clients,
            patients_per_class=_or(args.patients_per_class, 1),
            centre=not args.no_centre,
            seed=args.seed,
        )
    elif args.data == "acdc-features":
        federation = acdc_feature_federation(
            n_clients=args.clients,
            patients_per_class=_or(args.patients_per_class, 3),
            seed=args.seed,
        )
    else:
        federation = sample_federation(
            args.data,
            n_clients=args.clients,
            per_client=args.per_client,
            signed=args.withdraw if args.site_signature else None,
            seed=args.seed,
        )
    config = mlp_config(
        federation,
        hidden=[int(h) for h in args.hidden.split(",") if h.strip()],
        rounds=args.rounds,
        local_steps=args.local_steps,
        seed=args.seed,
    )
    torch.set_num_threads(1)
    try:
        outcome = simulate_withdrawal(
            federation,
            config,
            withdrawal,
            out / "workspace",
            remaining=[args.remaining] if args.remaining else None,
            plan=AuditPlan(
                args.auditors, seed=args.seed, device=args.device, cache_dir=out / "cache"
            ),
            backend=args.backend,
            retrained=args.retrained,
        )
    except (DeploymentError, WithdrawalError) as err:  # the run's own failure, told plainly
        raise UserError(str(err)) from err
    paths = outcome.write(out, overwrite=args.overwrite, data=args.data, seed=args.seed)
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
