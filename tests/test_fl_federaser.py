"""FedEraser on the NVIDIA FLARE simulator: the server keeps its history while FedAvg
trains, a second job removes a site, and both match the same method run in one process
(monai_forget.unlearning.federaser) to float rounding (FLARE averages in float64).
Bounded: digits, an MLP of 16, 3 sites, 4 rounds of 4 steps (two simulator start-ups)."""

from __future__ import annotations

import pytest
import torch

from monai_forget.data import load_digits
from monai_forget.fl.spec import FederatedConfig

pytest.importorskip(
    "nvflare", reason="NVIDIA FLARE is not installed: pip install 'monai-forget[fl]'"
)

from monai_forget.fl.erase import remove_after_training, run_federaser
from monai_forget.fl.job import run_federated
from monai_forget.fl.spec import Removal
from monai_forget.unlearning.federaser import (
    ServerHistory,
    federaser,
    retrain_from_checkpoint,
    train_with_history,
)

pytestmark = [pytest.mark.fl, pytest.mark.slow]


def _federation():
    digits = load_digits()
    clients = {f"site-{i + 1}": digits.subset(slice(60 * i, 60 * (i + 1))) for i in range(3)}
    config = FederatedConfig(
        network="mlp",
        network_args={"in_shape": [1, 8, 8], "num_classes": 10, "hidden": [16]},
        rounds=4,
        local_steps=4,
        batch_size=16,
        seed=3,
        simulator_threads=3,
    )
    return clients, config


def _same(a: torch.nn.Module, b: torch.nn.Module, atol: float) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return all(torch.allclose(sa[k], sb[k], atol=atol) for k in sa)


def test_federaser_on_flare_is_the_in_process_method(tmp_path) -> None:
    clients, config = _federation()
    trained = run_federated(clients, config, tmp_path / "train", retain_every=2)
    kept = ServerHistory.load(trained.history_path)
    model, history = train_with_history(clients, config.recipe(), 4, seed=3, interval=2)
    assert kept.retained_rounds == history.retained_rounds == [0, 2] and kept.rounds == 4
    for name in clients:  # the FLARE server kept what the in-process server keeps
        for tensor, norm in history.norms[2][name].items():
            assert kept.norms[2][name][tensor] == pytest.approx(norm, rel=1e-3)

    remaining = {n: clients[n] for n in ("site-1", "site-3")}
    run, cost = run_federaser(trained, "site-2", clients, tmp_path / "erase")
    assert run.clients == ("site-1", "site-3") and (cost.rounds, cost.local_steps) == (1, 4)
    expected = federaser(history, remaining, config.recipe(), seed=3).model.state_dict()
    got = run.global_model.state_dict()
    assert all(torch.allclose(got[k], expected[k], atol=1e-4) for k in expected)
    # and it is not the model that kept site-2
    assert not all(torch.allclose(got[k], model.state_dict()[k], atol=1e-2) for k in got)
    with pytest.raises(ValueError, match="not one of the run's sites"):
        run_federaser(trained, "site-9", clients, tmp_path / "other")


def test_checkpoint_retraining_on_flare_is_the_in_process_method(tmp_path) -> None:
    """Issue 53: site-2 joins in round 2 of 4; the FLARE server keeps the global model of
    round 2 and a second job reruns rounds 2-3 without site-2: the in-process
    federation and retraining from its checkpoint, at half retraining's rounds."""
    clients, config = _federation()
    removal = Removal("site-2", "checkpoint", joined=2)
    run, trained, cost = remove_after_training(clients, config, removal, tmp_path)
    local = config.recipe()
    model, history = train_with_history(clients, local, 4, seed=3, joined={"site-2": 2})
    assert _same(trained, model, 1e-4)  # the late joiner trained from round 2 on FLARE too
    kept = ServerHistory.load(tmp_path / "train" / "job" / "server" / "history.pt")
    assert sorted(kept.checkpoints) == [2] and kept.joined["site-2"] == 2
    remaining = {n: clients[n] for n in ("site-1", "site-3")}
    expected = retrain_from_checkpoint(history, remaining, local, seed=3)
    assert run.clients == ("site-1", "site-3") and _same(run.global_model, expected.model, 1e-4)
    assert (
        (cost.rounds, cost.local_steps)
        == (2, 2 * 2 * 4)
        == (
            expected.cost.rounds,
            expected.cost.local_steps,
        )
    )
    assert cost.server_bytes == expected.cost.server_bytes > 0
    assert run.record == {"client": "site-2", "method": "checkpoint", "joined": 2}
    # site-2 is gone: 2 rounds of 4 steps move the weights by ~5e-3, 45x the agreement above
    assert not _same(run.global_model, trained, 1e-3)
