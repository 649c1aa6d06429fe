"""A job on a FLARE proof-of-concept deployment, and what to say when it fails.

FLARE's POC mode provisions a project (startup kits and certificates for a server, one
client per provider and an admin), starts each service as its own process on this
machine, and takes the job through the admin API: the shape of a real multi-site
deployment, on one machine.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import torch

from monai_forget.fl.spec import load_tensors

__all__ = ["DeploymentError", "clients_that_left", "poc_failure", "run_poc"]

#: Seconds to wait for a POC job to finish.
POC_TIMEOUT = 3600.0


class DeploymentError(RuntimeError):
    """A FLARE deployment ended without completing the job (e.g. a client dropped out).

    FedAvg saves the global model only after a round is aggregated, so the server's model
    is that of the last completed round: nothing of the interrupted round (a partial
    withdrawal included) reached it.
    """


def run_poc(recipe: Any, names: tuple[str, ...], workspace: Path) -> dict[str, torch.Tensor]:
    """The job on a FLARE POC deployment: provisioned, started (server and one process
    per client), submitted and awaited through the admin API, then stopped; the POC
    workspace (startup kits, every service's log) stays in ``workspace/poc``."""
    from nvflare.recipe import PocEnv

    poc = workspace / "poc"
    saved = os.environ.get("NVFLARE_POC_WORKSPACE")
    os.environ["NVFLARE_POC_WORKSPACE"] = str(poc)  # read by FLARE's POC tools
    env = PocEnv(num_clients=len(names), clients=list(names))
    try:
        run = recipe.execute(env)
        result = run.get_result(timeout=POC_TIMEOUT, clean_up=False)
        status = run.get_status()
        ended = str(getattr(status, "value", status))
        if "COMPLETED" not in ended:
            raise DeploymentError(poc_failure(str(run.get_job_id()), ended, poc))
        if not result:
            raise RuntimeError(
                f"the POC job {run.get_job_id()} gave no result (status {status}); see the "
                f"server and client logs under {poc}"
            )
        found = sorted(Path(result).glob("**/FL_global_model.pt"))
        if not found:
            raise RuntimeError(f"the POC job saved no global model under {result} ({status})")
        return load_tensors(found[0])
    finally:
        env.stop(clean_up=False)  # idempotent: every service is down when this returns
        if saved is None:
            os.environ.pop("NVFLARE_POC_WORKSPACE", None)
        else:
            os.environ["NVFLARE_POC_WORKSPACE"] = saved


def clients_that_left(server_log: str) -> list[str]:
    """Clients the FLARE server log reports dead during a job (``reason='client dead'``).

    Orderly departures ("Client Name:X left") are not counted: every client leaves that way
    when the deployment shuts down.
    """
    return sorted(set(re.findall(r"client_name='([^']+)'; reason='client dead'", server_log)))


def poc_failure(job_id: str, status: str, poc: Path) -> str:
    """What to tell the user when a POC job did not complete, naming dropped-out clients."""
    logs = sorted(poc.glob("**/server/log.txt"))
    left = clients_that_left(logs[0].read_text(errors="replace")) if logs else []
    lost = (
        f"client(s) {', '.join(left)} dropped out (the server lost contact) and the job was "
        "aborted; "
        if left
        else ""
    )
    return (
        f"the POC job {job_id} ended {status}: {lost}the global model was saved only for "
        "completed rounds, so nothing of the interrupted round (a withdrawal included) "
        f"reached it. Restart the client(s) and run again; every service's log is under {poc}"
    )
