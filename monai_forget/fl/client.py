"""The FLARE client: trains normally, and withdraws with SecForget when asked.

NVIDIA FLARE runs this file as each client's training script (Client API:
``flare.init()``, ``flare.receive()``, ``flare.send()``). The logic lives in
:class:`FederatedClient`, which knows nothing of FLARE and is tested directly.

Protocol 2 (SecForget) of Liu et al. 2020, "Learn to Forget: User-Level Memorization
Elimination in Federated Learning": in a training round, a user that chooses
elimination sends its dummy gradient (Protocol 1,
:class:`~monai_forget.unlearning.dummy_gradient.DummyGradientGenerator`) in place of its
normal update, through the same aggregation; nobody else changes anything. FLARE's
FedAvg exchanges full weights and averages them with weights proportional to each
client's ``NUM_STEPS_CURRENT_ROUND``; the withdrawing client reports the same step count
as everyone else and sends ``W + s / p`` where ``s`` is the generator's weight change and
``p`` its share of the weighted mean, so that the aggregated model moves by ``s``.
"""

from __future__ import annotations

import argparse
import os
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from monai_forget.data import LabelledImages, load_images
from monai_forget.fl.spec import ELIMINATED, JobSpec, load_tensors, save_tensors
from monai_forget.results import write_json
from monai_forget.unlearning.dummy_gradient import DummyGradientGenerator
from monai_forget.unlearning.parameters import check_same_shapes

__all__ = ["SITE_DATA_ENV", "FederatedClient", "Reply", "client_main", "site_data_path"]

NUM_STEPS_KEY = "NUM_STEPS_CURRENT_ROUND"  # nvflare.apis.fl_constant.FLMetaKey


@dataclass
class Reply:
    """What a client sends back.

    Attributes:
        params: Full weights, or ``None`` for "no contribution" (FedAvg skips it).
        meta: FLARE meta data (``NUM_STEPS_CURRENT_ROUND`` sets the FedAvg weight).
        metrics: What the client did this round, for FLARE's logs.
    """

    params: dict[str, torch.Tensor] | None
    meta: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)


class FederatedClient:
    """One client of the federation: local training, contribution records, withdrawal.

    Args:
        site: The client's name.
        data: Its training data.
        spec: The job description.
        out_dir: Where it records its updates and its elimination.
        device: Torch device for training and the generator.
    """

    def __init__(
        self,
        site: str,
        data: LabelledImages,
        spec: JobSpec,
        out_dir: Path,
        device: str | torch.device = "cpu",
    ) -> None:
        self.site = site
        self.data = data
        self.spec = spec
        self.out_dir = Path(out_dir)
        self.device = torch.device(device)
        self.recipe = spec.config.recipe()
        self.model = self.recipe.build()
        self.shapes = {k: tuple(v.shape) for k, v in self.model.state_dict().items()}
        w = spec.withdrawal
        self.withdrawal = w if (w is not None and w.client == site) else None

    # ------------------------------------------------------------------ one round

    def handle(self, params: Mapping[str, Any], current_round: int) -> Reply:
        """Answer the global model of ``current_round`` with this client's update."""
        if not self.spec.schedule.trains(self.site, current_round):
            return Reply(None, {}, {"not_joined": 1.0})  # FedAvg leaves it out
        state = self._as_state(params, current_round)
        w = self.withdrawal
        if w is not None and current_round > w.round:
            return Reply(None, {}, {"withdrawn": 1.0})
        if w is not None and current_round == w.round:
            return self._withdraw(state, current_round)
        return self._train(state, current_round)

    def _as_state(self, params: Mapping[str, Any], current_round: int) -> dict[str, torch.Tensor]:
        state = {
            k: torch.as_tensor(np.asarray(v) if not torch.is_tensor(v) else v)
            for k, v in params.items()
        }
        try:
            check_same_shapes(self.shapes, state, f"the global model of round {current_round}")
        except ValueError as err:
            raise ValueError(
                f"client {self.site}: {err}. The network's parameters changed shape between "
                "rounds; every round must use the architecture in job.json"
            ) from err
        return state

    def _load(self, state: Mapping[str, torch.Tensor]) -> None:
        self.model.load_state_dict(
            {k: v.to(torch.float32) if v.is_floating_point() else v for k, v in state.items()}
        )

    def _train(self, state: dict[str, torch.Tensor], current_round: int) -> Reply:
        self._load(state)
        federation_round = self.spec.schedule.first_round + current_round
        seed = self.spec.config.seed * 100_003 + federation_round * 1_009 + self._index()
        self.recipe.fit(self.model, self.data, seed=seed, device=self.device)
        new = {k: v.detach().cpu() for k, v in self.model.state_dict().items()}
        delta = {k: new[k] - state[k].to(new[k]) for k in new if new[k].is_floating_point()}
        save_tensors(delta, self.out_dir / f"update_round_{current_round:03d}.pt")
        return Reply(new, {NUM_STEPS_KEY: self.spec.config.local_steps}, {"trained": 1.0})

    def _index(self) -> int:
        """Its position in the federation (seeds its batches)."""
        if self.site in self.spec.schedule.positions:
            return self.spec.schedule.positions[self.site]
        return self.spec.clients.index(self.site) if self.site in self.spec.clients else 0

    # ------------------------------------------------------------------ withdrawal

    def _share(self) -> float:
        """This client's weight in the round's FedAvg mean (equal step counts: 1 / N)."""
        return 1.0 / len(self.spec.clients)

    def _withdraw(self, state: dict[str, torch.Tensor], current_round: int) -> Reply:
        w = self.withdrawal
        assert w is not None
        save_tensors(state, self.out_dir / "before_withdrawal.pt")
        record: dict[str, Any] = {
            "client": self.site,
            "round": current_round,
            "method": w.method,
            "samples": len(self.data),
        }
        try:
            if w.method == "natural":
                record["seconds"] = 0.0
                self._write_record(record)
                return Reply(None, {}, {"withdrawn": 1.0})
            start = time.perf_counter()
            if w.method == "forsaken":
                step, details = self._forsaken_step(state)
                record.update(details)
            else:
                step = self._forcible_step(state, current_round)
            record["seconds"] = time.perf_counter() - start
        except Exception as err:  # a failed withdrawal must not touch the global model
            record["error"] = f"{type(err).__name__}: {err}"
            record["traceback"] = traceback.format_exc()
            self._write_record(record)
            return Reply(None, {}, {"withdrawal_failed": 1.0})
        share = self._share()
        sent = dict(state)
        for k, s in step.items():
            sent[k] = state[k] + s.to(state[k]) / share
        record["share"] = share
        self._write_record(record)
        return Reply(sent, {NUM_STEPS_KEY: self.spec.config.local_steps}, {ELIMINATED: 1.0})

    def _forsaken_step(
        self, state: dict[str, torch.Tensor]
    ) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """Protocol 1 on the received global model: the weight change ``-(η/|D_e|) G``."""
        self._load(state)
        generator = DummyGradientGenerator(
            **{"device": self.device, **dict(self.withdrawal.generator)}
        )
        result = generator.generate(self.model, self.data)
        step = result.step
        if not all(torch.isfinite(s).all() for s in step.values()):
            raise ValueError("the dummy gradient has non-finite values; nothing was sent")
        details = {
            "generator": {k: (str(v) if k == "device" else v) for k, v in vars(generator).items()},
            "generator_seconds": result.seconds,
            "eq4_before": vars(result.history[0]),
            "eq4_after": vars(result.history[-1]),
        }
        save_tensors(result.gradient, self.out_dir / "dummy_gradient.pt")
        return step, details

    def _forcible_step(
        self, state: dict[str, torch.Tensor], current_round: int
    ) -> dict[str, torch.Tensor]:
        """Minus the client's accumulated updates (its contributions divided by its share)."""
        from monai_forget.unlearning.baselines import accumulate_updates

        updates = [load_tensors(p) for p in sorted(self.out_dir.glob("update_round_*.pt"))]
        if not updates:
            raise ValueError(
                f"client {self.site} has no recorded contribution before round {current_round}; "
                "forcible withdrawal needs at least one round of training first"
            )
        total = accumulate_updates(state, updates)
        return {k: -v for k, v in total.items()}

    def _write_record(self, record: dict[str, Any]) -> None:
        write_json(self.out_dir / "withdrawal.json", record, overwrite=True)


#: Set at a site of a production deployment: the path of that site's training data.
SITE_DATA_ENV = "MONAI_FORGET_SITE_DATA"


def site_data_path(
    site: str, given: str | None, job_dir: Path | None, environ: Mapping[str, str]
) -> Path:
    """Where ``site`` reads its training data: the path given to the script (``--data``),
    else the local job's copy ``<job_dir>/data/<site>.npz`` (the simulator and POC, which
    run every site here: a variable set in this one environment must not send them all to
    one file), else the site's ``MONAI_FORGET_SITE_DATA`` (an exported job).

    Raises:
        ValueError: none of the three, naming the variable to set.
    """
    if given:
        return Path(given)
    if job_dir is not None:
        return job_dir / "data" / f"{site}.npz"
    if environ.get(SITE_DATA_ENV):
        return Path(environ[SITE_DATA_ENV])
    raise ValueError(
        f"site {site} has no training data: set {SITE_DATA_ENV} at this site to the path "
        "of its data, or give --data in the job's per-site arguments"
    )


def client_main(argv: Sequence[str] | None = None, spec_text: str | None = None) -> None:
    """The FLARE client loop (Client API): receive, handle, send until the job ends.

    Where things are (each site decides its own):

    - the job description: ``<job-dir>/job.json``, or ``spec_text`` (a job exported by
      :func:`~monai_forget.fl.export.export_federated_job` carries it in its launcher);
    - the site's data: ``--data``, else ``<job-dir>/data/<site>.npz`` (the simulator
      and POC, where :func:`~monai_forget.fl.job.run_federated` writes each site's copy),
      else the ``MONAI_FORGET_SITE_DATA`` environment variable of the site;
    - the records (updates, withdrawal): ``--records``, else ``<job-dir>/clients/<site>``,
      else ``monai_forget_records/<site>`` in the working folder FLARE gives the site.
    """
    import nvflare.client as flare
    from nvflare.app_common.abstract.fl_model import FLModel

    parser = argparse.ArgumentParser(description="monai-forget FLARE client")
    parser.add_argument("--job-dir", help="folder with job.json (and data/<site>.npz)")
    parser.add_argument("--data", help="this site's training data (a file load_images reads)")
    parser.add_argument("--records", help="folder for this site's updates and records")
    args = parser.parse_args(argv)
    job_dir = Path(args.job_dir) if args.job_dir else None
    if job_dir is not None:
        spec = JobSpec.load(job_dir / "job.json")
    elif spec_text is not None:
        spec = JobSpec.from_json(spec_text)
    else:
        raise SystemExit("monai-forget FLARE client: give --job-dir (the folder with job.json)")
    torch.set_num_threads(spec.config.threads_per_client)
    flare.init()
    site = flare.get_site_name()
    try:
        data = load_images(site_data_path(site, args.data, job_dir, os.environ))
    except ValueError as err:
        raise SystemExit(f"monai-forget FLARE client: {err}") from None
    if args.records:
        records = Path(args.records)
    else:
        records = (job_dir / "clients" if job_dir else Path("monai_forget_records")) / site
    client = FederatedClient(site, data, spec, records)
    while flare.is_running():
        received = flare.receive()
        if received is None:
            break
        reply = client.handle(received.params, int(received.current_round or 0))
        flare.send(FLModel(params=reply.params, meta=reply.meta, metrics=reply.metrics))


if __name__ == "__main__":
    client_main()
