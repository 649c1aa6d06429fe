"""The FLARE client's logic without FLARE: normal training, SecForget (Protocol 2 of Liu
et al. 2020), the forcible baseline, and the bad-input refusals of a withdrawal."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from monai_forget.data import load_digits
from monai_forget.fl.client import FederatedClient
from monai_forget.fl.spec import (
    FederatedConfig,
    JobSpec,
    Removal,
    Schedule,
    Withdrawal,
    departure,
    load_tensors,
)


def _config(**changes) -> FederatedConfig:
    """A digits MLP of 16, 3 rounds of 4 steps of 8 (``changes`` replace these)."""
    settings = {"rounds": 3, "local_steps": 4, "batch_size": 8, **changes}
    mlp = {"in_shape": [1, 8, 8], "num_classes": 10, "hidden": [16]}
    return FederatedConfig(network="mlp", network_args=mlp, **settings)


def _client(tmp_path, method: str = "forsaken", generator: dict | None = None):
    config = _config()
    gen = {} if method != "forsaken" else (generator or {"iterations": 2})
    spec = JobSpec(config, ("a", "b", "c"), Withdrawal("a", 1, method, gen))
    data = load_digits().subset(np.arange(40))
    return FederatedClient("a", data, spec, tmp_path / "a"), config


def test_client_trains_then_withdraws_with_secforget_then_stays_silent(tmp_path) -> None:
    client, config = _client(tmp_path)
    torch.manual_seed(0)
    state = {k: v.clone() for k, v in config.recipe().build().state_dict().items()}
    first = client.handle({k: v.numpy() for k, v in state.items()}, 0)
    assert first.params is not None and first.meta["NUM_STEPS_CURRENT_ROUND"] == 4
    update = load_tensors(tmp_path / "a" / "update_round_000.pt")
    torch.testing.assert_close(
        update["net.1.weight"], first.params["net.1.weight"] - state["net.1.weight"]
    )

    second = client.handle(first.params, 1)
    record = json.loads((tmp_path / "a" / "withdrawal.json").read_text())
    assert record["method"] == "forsaken" and record["share"] == pytest.approx(1 / 3)
    gradient = load_tensors(tmp_path / "a" / "dummy_gradient.pt")
    lr, n = record["generator"]["lr"], record["samples"]
    # SecForget: W + s / p with s = -(lr / n) G and p = 1/3, so the FedAvg mean moves by s.
    expected = first.params["net.1.weight"] - 3 * (lr / n) * gradient["net.1.weight"]
    torch.testing.assert_close(second.params["net.1.weight"], expected)
    assert record["eq4_after"]["total"] < record["eq4_before"]["total"]

    third = client.handle(second.params, 2)
    assert third.params is None and third.metrics == {"withdrawn": 1.0}


def test_client_refuses_a_model_that_changed_shape(tmp_path) -> None:
    client, _ = _client(tmp_path)
    wrong = {k: np.zeros((3, 3), np.float32) for k in client.shapes}
    with pytest.raises(ValueError, match="changed shape between rounds"):
        client.handle(wrong, 0)


def test_failed_withdrawal_sends_nothing(tmp_path) -> None:
    client, config = _client(tmp_path, method="forcible")
    state = config.recipe().build().state_dict()
    # Forcible withdrawal with no recorded contribution cannot be computed.
    reply = client.handle(state, 1)
    assert reply.params is None and reply.metrics == {"withdrawal_failed": 1.0}
    record = json.loads((tmp_path / "a" / "withdrawal.json").read_text())
    assert "no recorded contribution" in record["error"]


def test_forcible_withdrawal_sends_minus_the_accumulated_updates(tmp_path) -> None:
    client, config = _client(tmp_path, method="forcible")
    state = config.recipe().build().state_dict()
    first = client.handle(state, 0)
    update = load_tensors(tmp_path / "a" / "update_round_000.pt")
    reply = client.handle(first.params, 1)
    expected = first.params["net.3.bias"] - 3 * update["net.3.bias"]
    torch.testing.assert_close(reply.params["net.3.bias"], expected)


def test_withdrawal_settings_are_checked_early() -> None:
    with pytest.raises(ValueError, match="site name"):
        Withdrawal("bad name", 1)
    with pytest.raises(ValueError, match="method"):
        Withdrawal("a", 1, "delete")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Withdrawal("a", 1, "forsaken", {"unknown_option": 1})
    with pytest.raises(ValueError, match="only to method='forsaken'"):
        Withdrawal("a", 1, "natural", {"iterations": 3})


def test_a_late_joiner_sends_nothing_before_its_round_then_trains_with_the_federations_seeds(
    tmp_path,
) -> None:
    """Issue 53: a job that continues a federation from its round 2 (``first_round``),
    with site ``b`` joining in round 3 and seeded by its place (1) in the federation."""
    config = _config(rounds=2, seed=5)
    schedule = Schedule(first_round=2, joined={"b": 3}, positions={"b": 1})
    spec = JobSpec.from_json(JobSpec(config, ("b",), None, schedule).to_json())
    assert spec.schedule == schedule
    data = load_digits().subset(np.arange(40))
    client = FederatedClient("b", data, spec, tmp_path / "b")
    torch.manual_seed(0)
    state = {k: v.numpy() for k, v in config.recipe().build().state_dict().items()}
    idle = client.handle(state, 0)  # the federation's round 2: not joined yet
    assert idle.params is None and idle.metrics == {"not_joined": 1.0}
    trained = client.handle(state, 1)  # round 3
    model = config.recipe().build()
    model.load_state_dict({k: torch.as_tensor(v) for k, v in state.items()})
    config.recipe().fit(model, data, seed=5 * 100_003 + 3 * 1_009 + 1, device="cpu")
    for k, v in model.state_dict().items():
        torch.testing.assert_close(trained.params[k], v)
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["update_round_001.pt"]


def test_departure_builds_the_method_named_and_refuses_a_late_joiner_leaving_in_training() -> None:
    assert departure("site-1", "checkpoint", joined=4) == Removal("site-1", "checkpoint", joined=4)
    # the measured defaults: the checkpoint for a late joiner, else retraining
    assert departure("site-1", joined=4) == Removal("site-1", "checkpoint", joined=4)
    assert departure("site-1") == Removal("site-1", "retrain")
    assert departure("site-1", "natural", round=2) == Withdrawal("site-1", 2, "natural", {})
    with pytest.raises(ValueError, match="joined in round 4 is removed after training"):
        departure("site-1", "forsaken", round=2, joined=4)
    with pytest.raises(ValueError, match="must be an integer >= 0"):
        Removal("site-1", "checkpoint", joined=-1)
    with pytest.raises(ValueError, match="method must be one of"):
        departure("site-1", "erase")


def test_a_join_round_the_federation_never_reaches_is_refused_before_training(tmp_path) -> None:
    from monai_forget.fl.erase import remove_after_training

    config = FederatedConfig(network="mlp", network_args={"in_shape": [1, 8, 8]}, rounds=3)
    with pytest.raises(ValueError, match="joins in round 3 but the federation trains 3 rounds"):
        remove_after_training({}, config, Removal("a", "checkpoint", joined=3), tmp_path)
    assert not any(tmp_path.iterdir())
