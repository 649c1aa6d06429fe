"""FedEraser and retraining from a checkpoint (monai_forget.unlearning.federaser), checked
against FedAvg run independently, hand-worked norms and step counts."""

from __future__ import annotations

import math

import pytest
import torch

from monai_forget.data import load_digits
from monai_forget.shadow import SupervisedRecipe
from monai_forget.unlearning.baselines import fedavg
from monai_forget.unlearning.federaser import (
    calibrate_update,
    federaser,
    retrain_from_checkpoint,
    train_with_history,
)

RECIPE = SupervisedRecipe(
    "mlp", {"in_shape": [1, 8, 8], "num_classes": 10, "hidden": [16]}, steps=4, batch_size=16
)


@pytest.fixture(scope="module")
def clients():
    digits = load_digits()
    return {f"site-{i + 1}": digits.subset(slice(60 * i, 60 * (i + 1))) for i in range(3)}


def _fedavg(parts, rounds, seed, initial, positions=None):
    model = RECIPE.build()
    model.load_state_dict(initial)
    return fedavg(model, parts, RECIPE, rounds, seed=seed, device="cpu", positions=positions)


def _same(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return all(torch.allclose(sa[k], sb[k], atol=1e-6) for k in sa)


def test_the_server_history_does_not_change_training(clients):
    model, history = train_with_history(clients, RECIPE, 3, seed=4)
    plain = _fedavg(list(clients.values()), 3, 4, history.initial)
    assert _same(model, plain)
    assert history.retained_rounds == [0, 2]
    assert set(history.norms[2]) == set(clients)


def test_calibrated_update_takes_the_retained_norm_per_tensor():
    calibration = {
        "w": torch.tensor([3.0, 4.0]),
        "b": torch.tensor([0.0, 2.0]),
        "z": torch.zeros(2),
    }
    out = calibrate_update(calibration, {"w": 10.0, "b": 1.0, "z": 5.0})
    assert torch.allclose(out["w"], torch.tensor([6.0, 8.0]))  # 10 * (3, 4) / 5
    assert torch.allclose(out["b"], torch.tensor([0.0, 1.0]))  # each tensor by its own norm
    assert torch.equal(out["z"], torch.zeros(2))  # no direction, no step


def test_with_only_round_0_retained_federaser_is_one_round_of_fedavg_without_the_site(clients):
    # interval > rounds: only round 0 is retained, and its updates came from the initial
    # model, so the unlearned model is one FedAvg round of the remaining clients
    _, history = train_with_history(clients, RECIPE, 2, seed=1, interval=5)
    remaining = {n: clients[n] for n in ("site-1", "site-2")}
    unlearned = federaser(history, remaining, RECIPE, seed=1)
    one_round = _fedavg(list(remaining.values()), 1, 1, history.initial)
    assert _same(unlearned.model, one_round)
    with_site = _fedavg(list(clients.values()), 1, 1, history.initial)
    assert not _same(unlearned.model, with_site)
    assert unlearned.cost.local_steps == 0 and unlearned.cost.rounds == 0


def test_each_calibrated_step_has_the_retained_updates_size(clients):
    _, history = train_with_history(clients, RECIPE, 2, seed=2, interval=1)
    remaining = {"site-2": clients["site-2"]}
    after_first = federaser(
        train_with_history(clients, RECIPE, 1, seed=2, interval=1)[1], remaining, RECIPE, seed=2
    ).model.state_dict()
    final = federaser(history, remaining, RECIPE, seed=2).model.state_dict()
    for name, norm in history.norms[1]["site-2"].items():
        step = torch.linalg.vector_norm(final[name].double() - after_first[name].double())
        assert float(step) == pytest.approx(norm, rel=1e-4)


def test_federaser_costs_its_share_of_retraining(clients):
    _, history = train_with_history(clients, RECIPE, 8, seed=3, interval=2)
    remaining = {n: clients[n] for n in ("site-1", "site-3")}
    cost = federaser(history, remaining, RECIPE, calibration_ratio=0.5, seed=3).cost
    # retained rounds 0, 2, 4, 6: round 0 as retained, 3 calibrations of ceil(0.5 * 4) = 2
    # steps by 2 clients; retraining runs 8 rounds x 4 steps x 2 clients = 64
    assert (cost.rounds, cost.local_steps) == (3, 3 * 2 * 2)
    assert cost.local_steps / 64 <= 0.25
    # the server keeps 3 first updates and norms, the paper's server 4 x 3 full updates
    model_bytes = sum(p.numel() * 4 for p in RECIPE.build().parameters())
    assert history.full_storage_bytes() == 4 * 3 * model_bytes
    assert 3 * model_bytes < cost.server_bytes < 4 * model_bytes
    with pytest.raises(ValueError, match="calibration_ratio"):
        federaser(history, remaining, RECIPE, calibration_ratio=0.0)


def test_retraining_from_the_checkpoint_before_a_late_site_is_exact(clients):
    # site-3 joins in round 2: the global model of round 2 never saw it, so rerunning
    # rounds 2-3 without it gives the federation that never had it
    late = {"site-3": 2}
    _, history = train_with_history(clients, RECIPE, 4, seed=5, joined=late)
    remaining = {n: clients[n] for n in ("site-1", "site-2")}
    result = retrain_from_checkpoint(history, remaining, RECIPE, seed=5)
    never = _fedavg(list(remaining.values()), 4, 5, history.initial)
    assert _same(result.model, never)
    assert (result.cost.rounds, result.cost.local_steps) == (2, 2 * 2 * RECIPE.steps)
    # a site of round 0: the checkpoint is the initial model (full retraining)
    _, from_start = train_with_history(clients, RECIPE, 4, seed=5)
    middle = {n: clients[n] for n in ("site-1", "site-3")}
    full = retrain_from_checkpoint(from_start, middle, RECIPE, seed=5)
    assert _same(full.model, _fedavg(list(middle.values()), 4, 5, history.initial, [0, 2]))
    assert full.cost.local_steps == 4 * 2 * RECIPE.steps


def test_a_withdrawal_names_who_stays(clients):
    _, history = train_with_history(clients, RECIPE, 2, seed=0)
    with pytest.raises(ValueError, match="leave the withdrawn site out"):
        federaser(history, clients, RECIPE)
    with pytest.raises(ValueError, match="did not train"):
        retrain_from_checkpoint(history, {"site-9": clients["site-1"]}, RECIPE, seed=0)
    assert math.isfinite(history.storage_bytes())


def test_every_second_retained_round_is_the_history_of_interval_2(clients, tmp_path):
    _, every_round = train_with_history(clients, RECIPE, 5, seed=6, interval=1)
    _, every_second = train_with_history(clients, RECIPE, 5, seed=6, interval=2)
    derived = every_round.every(2)
    assert derived.retained_rounds == every_second.retained_rounds == [0, 2, 4]
    remaining = {n: clients[n] for n in ("site-2", "site-3")}
    a = federaser(derived, remaining, RECIPE, seed=6).model
    b = federaser(every_second, remaining, RECIPE, seed=6).model
    assert _same(a, b)
    every_second.save(tmp_path / "history.pt")  # written and read back whole
    loaded = type(every_second).load(tmp_path / "history.pt")
    assert loaded.norms == every_second.norms and loaded.clients == every_second.clients
    assert _same(federaser(loaded, remaining, RECIPE, seed=6).model, b)
