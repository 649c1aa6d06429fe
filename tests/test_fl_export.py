"""Issue 34, item 1: the federation's job exported for a production FLARE deployment,
each site reading its own data from a path set at that site, run by FLARE's own
``nvflare simulator`` from the exported folder alone."""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("nvflare", reason="NVIDIA FLARE is not installed (pip install '.[fl]')")

from commands import environment

import monai_forget
from monai_forget.data import load_digits
from monai_forget.fl.client import SITE_DATA_ENV, site_data_path
from monai_forget.fl.export import LAUNCHER, export_federated_job
from monai_forget.fl.job import run_federated
from monai_forget.fl.spec import FederatedConfig, JobSpec, Withdrawal, load_tensors

pytestmark = [pytest.mark.fl, pytest.mark.slow]

CONFIG = FederatedConfig(
    network="mlp",
    network_args={"in_shape": [1, 8, 8], "num_classes": 10, "hidden": [32]},
    rounds=3,
    local_steps=20,
)
SITES = ("site-1", "site-2", "site-3")


def test_the_export_refuses_what_a_deployment_could_not_run(tmp_path) -> None:
    paths = {s: f"/data/{s}.npz" for s in SITES}
    with pytest.raises(ValueError, match=r"\['site-9'\], which are not among the sites"):
        export_federated_job(CONFIG, SITES, tmp_path / "a", data_paths={"site-9": "/d.npz"})
    with pytest.raises(ValueError, match=r"\['site-2'\] hold white space"):
        export_federated_job(
            CONFIG, SITES, tmp_path / "a", data_paths={**paths, "site-2": "/my data/s2.npz"}
        )
    with pytest.raises(ValueError, match="withdrawing site 'site-9'"):
        export_federated_job(CONFIG, SITES, tmp_path / "a", withdrawal=Withdrawal("site-9", 1))
    with pytest.raises(ValueError, match="two or more distinct sites"):
        export_federated_job(CONFIG, ("site-1", "site-1"), tmp_path / "a")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="overwrite"):
        export_federated_job(CONFIG, SITES, tmp_path / "taken")
    assert (tmp_path / "taken" / "keep.txt").read_text() == "mine"


def test_a_site_reads_its_data_where_it_says(tmp_path) -> None:
    """--data first, then the local job's copy (every site of a local run shares one
    environment), then the site's MONAI_FORGET_SITE_DATA; with none of them the refusal
    names the variable to set."""
    env = {SITE_DATA_ENV: "/env/s.npz"}
    assert site_data_path("site-1", "/arg/s.npz", tmp_path, env) == Path("/arg/s.npz")
    assert site_data_path("site-1", None, tmp_path, env) == tmp_path / "data" / "site-1.npz"
    assert site_data_path("site-1", None, None, env) == Path("/env/s.npz")
    with pytest.raises(ValueError, match=f"site-1 has no training data: set {SITE_DATA_ENV}"):
        site_data_path("site-1", None, None, {SITE_DATA_ENV: ""})


def test_the_exported_job_names_no_path_of_this_machine(tmp_path) -> None:
    """Every site gets the launcher (carrying the job description) and its own data path;
    the server gets the seeded initial weights; nothing points into this machine."""
    paths = {s: f"/hospital/{s}/images.npz" for s in ("site-1", "site-3")}
    job = export_federated_job(
        CONFIG, SITES, tmp_path / "out", data_paths=paths, withdrawal=Withdrawal("site-2", 1)
    )
    for site in SITES:
        client = (job / f"app_{site}" / "config" / "config_fed_client.json").read_text()
        assert ("--data" in client) == (site in paths)
        assert site not in paths or f'"task_script_args": "--data {paths[site]}"' in client
        assert '"task_script_path": "monai_forget_client.py"' in client
        launcher = runpy.run_path(str(job / f"app_{site}" / "custom" / LAUNCHER))
        spec = JobSpec.from_json(launcher["JOB_SPEC"])
        assert spec == JobSpec(CONFIG, SITES, Withdrawal("site-2", 1))
    text = "".join(p.read_text() for p in job.rglob("*.json"))
    repository = str(Path(monai_forget.__file__).resolve().parents[1])
    assert str(tmp_path) not in text and repository not in text
    assert (job / "app_server" / "custom" / "initial_model.pt").is_file()
    assert not list(job.rglob("custom/monai_forget"))


@pytest.mark.slow
def test_the_exported_job_runs_from_its_folder_as_the_local_run_does(tmp_path) -> None:
    """FLARE's simulator runs the exported folder; site-1 and site-2 read their data from
    the paths in the job, site-3 from MONAI_FORGET_SITE_DATA (the simulator's sites share
    one environment, where the job's paths override it); site-3 withdraws in round 1. The
    global model equals run_federated's on the same data, and each site kept its records
    in its own job folder."""
    digits = load_digits()
    data = {s: digits.subset(slice(200 * i, 200 * (i + 1))) for i, s in enumerate(SITES)}
    for site, images in data.items():
        np.savez(tmp_path / f"{site}.npz", images=images.images, labels=images.labels)
    withdrawal = Withdrawal("site-3", 1, "natural")
    job = export_federated_job(
        CONFIG,
        SITES,
        tmp_path / "export",
        withdrawal=withdrawal,
        data_paths={s: str(tmp_path / f"{s}.npz") for s in ("site-1", "site-2")},
    )
    workspace = tmp_path / "ws"
    command = [sys.executable, "-m", "nvflare.cli", "simulator", str(job), "-w", str(workspace)]
    command += ["-n", "3", "-t", "3", "-c", ",".join(SITES)]
    env = environment(**{SITE_DATA_ENV: str(tmp_path / "site-3.npz")})
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    exported = load_tensors(next(workspace.rglob("FL_global_model.pt")))
    local = run_federated(data, CONFIG, tmp_path / "local", withdrawal=withdrawal)
    for key, value in local.global_model.state_dict().items():
        torch.testing.assert_close(exported[key].to(value), value, rtol=0, atol=1e-5)
    for site, rounds in (("site-1", 3), ("site-2", 3), ("site-3", 1)):
        records = workspace / site / "monai_forget_records" / site
        assert len(list(records.glob("update_round_*.pt"))) == rounds, site
    assert (workspace / "site-3" / "monai_forget_records" / "site-3" / "withdrawal.json").is_file()
