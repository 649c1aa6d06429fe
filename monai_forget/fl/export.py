"""The federation's job as a folder for a production NVIDIA FLARE deployment.

:func:`~monai_forget.fl.job.run_federated` runs the job on this machine and hands every
site a copy of its data. A real federation does neither: each site keeps its data and
says where it is. :func:`export_federated_job` writes the same job (FLARE's
``FedAvgRecipe.export``: the seeded initial weights for the server, the order-free
aggregator that knows the withdrawal, and a one-file client launcher carrying the job
description) for submission with ``nvflare job submit`` to a provisioned deployment
whose server and sites have monai-forget installed (the same version). Each site's
client reads its data from ``--data`` (``data_paths``: the path at that site, in the
job's per-site arguments) or, with no path given here, from the
``MONAI_FORGET_SITE_DATA`` environment variable that site sets; it keeps its records in
``monai_forget_records/<site>`` of its job folder.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch

from monai_forget.fl.client import SITE_DATA_ENV
from monai_forget.fl.job import JOB_NAME, fedavg_recipe
from monai_forget.fl.spec import FederatedConfig, JobSpec, Withdrawal, check_site_name, save_tensors

__all__ = ["LAUNCHER", "export_federated_job"]

#: The client script of an exported job (in each site's ``custom/`` folder).
LAUNCHER = "monai_forget_client.py"


def _launcher(spec: JobSpec) -> str:
    return (
        '"""monai-forget\'s NVIDIA FLARE client for this job (written by\n'
        "monai_forget.fl.export). The site's data: --data, else the "
        f'{SITE_DATA_ENV}\nenvironment variable set at the site."""\n\n'
        "from monai_forget.fl.client import client_main\n\n"
        f"JOB_SPEC = {spec.to_json()!r}\n\n"
        'if __name__ == "__main__":\n'
        "    client_main(spec_text=JOB_SPEC)\n"
    )


def export_federated_job(
    config: FederatedConfig,
    sites: Sequence[str],
    out_dir: str | Path,
    *,
    withdrawal: Withdrawal | None = None,
    data_paths: Mapping[str, str] | None = None,
    overwrite: bool = False,
) -> Path:
    """Write the federation's FLARE job folder for a production deployment.

    Args:
        config: Local training and round settings (the seed fixes the initial weights).
        sites: The deployment's client (site) names, as provisioned.
        out_dir: Folder to write; the job is ``out_dir/<job name>``.
        withdrawal: A site leaving at a chosen round, and how.
        data_paths: site -> the path of its training data *at that site*, written into
            the job's per-site arguments. A site without one (all, with ``None``) sets
            ``MONAI_FORGET_SITE_DATA`` itself, and the job names no path of it.
        overwrite: Replace an existing ``out_dir``.

    Returns:
        The job folder (``out_dir/<job name>``), ready for ``nvflare job submit -j``.

    Raises:
        ValueError: a bad site name, a withdrawal or data path of a site not in
            ``sites``, a path with white space (FLARE splits script arguments on it).
        FileExistsError: ``out_dir`` exists and ``overwrite`` is not set.
    """
    sites = tuple(sites)
    if len(sites) < 2 or len(set(sites)) != len(sites):
        raise ValueError(f"a federation needs two or more distinct sites, got {list(sites)}")
    for site in sites:
        check_site_name(site)
    if withdrawal is not None and withdrawal.client not in sites:
        raise ValueError(f"the withdrawing site {withdrawal.client!r} is not one of {list(sites)}")
    strangers = sorted(set(data_paths or {}) - set(sites))
    if strangers:
        raise ValueError(
            f"data_paths names {strangers}, which are not among the sites {list(sites)}"
        )
    spaced = sorted(
        site for site, path in (data_paths or {}).items() if any(c.isspace() for c in str(path))
    )
    if spaced:
        raise ValueError(
            f"the data paths of {spaced} hold white space, which FLARE's script arguments "
            f"cannot carry (it splits them on spaces): leave those sites' paths to "
            f"{SITE_DATA_ENV} at the site, or use a path without spaces"
        )
    out_dir = Path(out_dir)
    if out_dir.exists() and not overwrite:
        raise FileExistsError(f"{out_dir} exists; pass overwrite=True to replace it")
    spec = JobSpec(config, sites, withdrawal)
    with tempfile.TemporaryDirectory(prefix="monai-forget-export-") as staging:
        staging = Path(staging)
        with torch.random.fork_rng():
            torch.manual_seed(config.seed)
            save_tensors(config.recipe().build().state_dict(), staging / "initial_model.pt")
        (staging / LAUNCHER).write_text(_launcher(spec))
        # every site gets its own app when any has a path; the others read SITE_DATA_ENV
        per_site = (
            {s: f"--data {data_paths[s]}" if s in data_paths else "" for s in sites}
            if data_paths
            else None
        )
        built = staging / "job"
        # relative paths: FLARE bundles the files into the job, not their paths here
        with _working_dir(staging):
            recipe = fedavg_recipe(
                config,
                sites,
                withdrawal,
                initial_ckpt="initial_model.pt",
                train_script=LAUNCHER,
                per_site_args=per_site,
            )
            recipe.export(str(built))
        # FLARE bundles a partial copy of the package with the aggregator's source; on a
        # machine that runs a site beside the server (FLARE's simulator) it shadows the
        # installed package, whose client the launcher imports. The server needs the
        # installed package anyway (it builds the network from its class path).
        for bundled in built.glob(f"{JOB_NAME}/app*/custom/monai_forget"):
            shutil.rmtree(bundled)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(built), str(out_dir))
    return out_dir / JOB_NAME


@contextlib.contextmanager
def _working_dir(path: Path):
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)
