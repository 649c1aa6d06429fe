"""A job on a FLARE proof-of-concept deployment, and what to say when it fails.

FLARE's POC mode provisions a project (startup kits and certificates for a server, one
client per provider and an admin), starts each service as its own process on this
machine, and takes the job through the admin API: the shape of a real multi-site
deployment, on one machine.

The deployment is shut down however the run ends: completed, failed, interrupted
(SIGINT) or terminated (SIGTERM, SIGHUP): FLARE's own shutdown first, then any of its
processes still running under the POC workspace are ended. Ports FLARE's POC listens on
that are already taken are refused before anything starts.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from monai_forget.fl.spec import load_tensors
from monai_forget.processes import processes_mentioning, stop_processes

__all__ = [
    "SERVICES_FILE",
    "DeploymentError",
    "check_ports_free",
    "clients_that_left",
    "login_timeout",
    "poc_failure",
    "run_poc",
    "stop_deployment",
]

#: Seconds to wait for a POC job to finish.
POC_TIMEOUT = 3600.0
#: The ports FLARE's POC deployment listens on (``nvflare poc``: fed_learn_port and
#: admin_port of its generated project), fixed by FLARE.
POC_PORTS = {8002: "federated learning", 8003: "admin"}
#: Where a deployment records its services' process ids (in its POC workspace).
SERVICES_FILE = "services.json"
#: Seconds between two looks for the deployment's services while it runs.
_RECORD_EVERY = 1.0


def login_timeout(clients: int, load: float | None = None, cores: int | None = None) -> float:
    """Seconds the admin may take to log in to the server: FLARE's 10 s default failed
    2 of 4 runs on 2 cores with the test suite running beside it (the server was up, but
    slow to answer). 30 s plus 2 s per client, times the load per core when above 1
    (``load``: the 1-minute load average, default this machine's)."""
    from monai_forget.processes import load_per_core

    return (30.0 + 2.0 * clients) * load_per_core(load, cores)


class DeploymentError(RuntimeError):
    """A FLARE deployment ended without completing the job (e.g. a client dropped out).

    FedAvg saves the global model only after a round is aggregated, so the server's model
    is that of the last completed round: nothing of the interrupted round (a partial
    withdrawal included) reached it.
    """


def check_ports_free(ports: dict[int, str] | None = None) -> None:
    """Refuse to start when a port the deployment needs (default :data:`POC_PORTS`) is
    already listened on.

    Raises:
        DeploymentError: naming the port and how to free it.
    """
    ports = POC_PORTS if ports is None else ports
    for port, role in ports.items():
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            # a port that only a closed connection still holds (TIME_WAIT) is free
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("", port))
            except OSError as err:
                if err.errno != errno.EADDRINUSE:
                    raise
                raise DeploymentError(
                    f"port {port} (FLARE's POC {role} port) is in use, so no deployment can "
                    "start: another FLARE deployment is probably running on this machine. "
                    "If a `monai-forget fl poc` run was killed, stop what it left with "
                    "`monai-forget fl poc --stop OUT` (its --out folder); otherwise stop it "
                    "(`nvflare poc stop`, or end the process listening on "
                    f"{port}: `ss -ltnp 'sport = :{port}'`) and run again; FLARE's POC mode "
                    f"always uses ports {', '.join(map(str, ports))}"
                ) from None


class Terminated(SystemExit):
    """SIGTERM or SIGHUP arrived; the code is 128 + the signal, as a shell reports it."""


@contextlib.contextmanager
def _terminations_unwind() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise :class:`Terminated`, so every
    ``finally`` runs, as SIGINT's KeyboardInterrupt does."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def unwind(signum: int, _frame: object) -> None:
        raise Terminated(128 + signum)

    wanted = [signal.SIGTERM] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
    previous = {sig: signal.signal(sig, unwind) for sig in wanted}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _shut_down(env: Any, poc: Path) -> None:
    """FLARE's shutdown, then whatever of the deployment still runs; not interruptible."""
    ignored = {}
    if threading.current_thread() is threading.main_thread():  # handlers live there only
        ignored = {
            sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGTERM, signal.SIGINT)
        }
    try:
        with contextlib.suppress(Exception):  # a half-started deployment may not stop
            env.stop(clean_up=False)
        stop_processes(processes_mentioning(str(poc.resolve())))
    finally:
        for sig, handler in ignored.items():
            signal.signal(sig, handler)


def _record_services(poc: Path, done: threading.Event) -> None:
    """Until ``done``, keep ``poc/services.json`` listing every process that runs under
    the POC workspace (id and start time), so a run killed outright (SIGKILL, out of
    memory) leaves what :func:`stop_deployment` needs."""
    from monai_forget.io import atomic_write
    from monai_forget.processes import processes_mentioning, start_time

    seen: dict[int, int] = {}
    while not done.wait(_RECORD_EVERY):
        found = {pid: start_time(pid) for pid in processes_mentioning(str(poc.resolve()))}
        fresh = {pid: t for pid, t in found.items() if t is not None and seen.get(pid) != t}
        if fresh:
            seen.update(fresh)
            rows = [{"pid": pid, "start": t} for pid, t in sorted(seen.items())]
            with atomic_write(poc / SERVICES_FILE, "w", overwrite=True) as handle:
                json.dump(rows, handle)


def stop_deployment(poc: Path) -> list[int]:
    """Stop what a deployment under ``poc`` left running: the processes its services
    record names that are still the same processes (same id and start time), and any
    process whose command line names the workspace; return their ids."""
    from monai_forget.processes import processes_mentioning, still_the_same

    record = poc / SERVICES_FILE
    rows = json.loads(record.read_text()) if record.is_file() else []
    pids = {int(r["pid"]) for r in rows if still_the_same(r)}
    pids |= set(processes_mentioning(str(poc.resolve())))  # even with the folder gone
    stop_processes(sorted(pids))
    return sorted(pids)


def run_poc(recipe: Any, names: tuple[str, ...], workspace: Path) -> dict[str, torch.Tensor]:
    """The job on a FLARE POC deployment: provisioned, started (server and one process
    per client), submitted and awaited through the admin API, then stopped however the
    run ends (:func:`_shut_down`); the POC workspace (startup kits, every service's log,
    the services' process ids) stays in ``workspace/poc``. What a previous run in the
    same workspace left running (killed outright) is stopped first; the admin logs in
    with :func:`login_timeout`.

    Raises:
        DeploymentError: a port the deployment needs is taken, or the job did not
            complete.
    """
    from nvflare.recipe import PocEnv

    poc = workspace / "poc"
    stop_deployment(poc)
    check_ports_free()
    saved = os.environ.get("NVFLARE_POC_WORKSPACE")
    os.environ["NVFLARE_POC_WORKSPACE"] = str(poc)  # read by FLARE's POC tools
    try:
        with _terminations_unwind():
            env = PocEnv(
                num_clients=len(names),
                clients=list(names),
                extra={"login_timeout": login_timeout(len(names))},
            )
            done = threading.Event()
            poc.mkdir(parents=True, exist_ok=True)
            threading.Thread(target=_record_services, args=(poc, done), daemon=True).start()
            try:
                return _run_job(recipe, env, poc)
            finally:
                _shut_down(env, poc)
                done.set()
    except Terminated as stop:
        # The deployment is down. The process must end now: FLARE's admin connection
        # leaves non-daemon threads that would keep it alive at exit (measured: forever).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(stop.code))
    finally:
        if saved is None:
            os.environ.pop("NVFLARE_POC_WORKSPACE", None)
        else:
            os.environ["NVFLARE_POC_WORKSPACE"] = saved


def _run_job(recipe: Any, env: Any, poc: Path) -> dict[str, torch.Tensor]:
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
