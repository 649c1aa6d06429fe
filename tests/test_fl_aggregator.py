"""FedAvg aggregation that does not depend on the order clients report in, and the
reproducibility it buys: the same seeded federated run twice gives the same model."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

pytest.importorskip("nvflare", reason="NVIDIA FLARE is not installed (pip install '.[fl]')")

from nvflare.apis.fl_constant import FLMetaKey
from nvflare.app_common.abstract.fl_model import FLModel, ParamsType

from monai_forget.data import load_digits
from monai_forget.fl.aggregator import OrderedFedAvg
from monai_forget.fl.job import check_contributions, run_federated
from monai_forget.fl.spec import FederatedConfig, Schedule, Withdrawal
from monai_forget.unlearning.baselines import fedavg

pytestmark = [pytest.mark.fl, pytest.mark.slow]  # pytest -m 'not fl' runs without NVIDIA FLARE


def _result(name: str, value: np.ndarray, steps: float, metrics: dict | None = None) -> FLModel:
    return FLModel(
        params={"w": torch.from_numpy(value.astype(np.float32))},
        params_type=ParamsType.FULL,
        meta={"client_name": name, FLMetaKey.NUM_STEPS_CURRENT_ROUND: steps},
        metrics=metrics,
    )


def test_ordered_fedavg_is_the_weighted_mean_whatever_the_arrival_order() -> None:
    rng = np.random.default_rng(0)
    # Values of very different magnitude: float32 running sums depend on the order.
    values = {n: rng.normal(0, 10.0**k, 1000) for n, k in zip("abc", (-3, 0, 4), strict=True)}
    steps = {"a": 50.0, "b": 30.0, "c": 20.0}
    expected = sum(steps[n] * values[n].astype(np.float32).astype(np.float64) for n in "abc")
    expected = (expected / 100.0).astype(np.float32)
    outputs = []
    for order in itertools.permutations("abc"):
        aggregator = OrderedFedAvg()
        for name in order:
            aggregator.accept_model(_result(name, values[name], steps[name]))
        out = aggregator.aggregate_model()
        assert out.params["w"].dtype == torch.float32
        outputs.append(out.params["w"].numpy())
    for out in outputs:
        np.testing.assert_array_equal(out, outputs[0])  # bit for bit
    np.testing.assert_array_equal(outputs[0], expected)
    # The state is reset after each round; a client cannot report twice in one.
    aggregator = OrderedFedAvg()
    aggregator.accept_model(_result("a", values["a"], 1))
    with pytest.raises(ValueError, match="reported twice"):
        aggregator.accept_model(_result("a", values["a"], 1))


def test_non_finite_or_misshapen_results_are_left_out_and_named() -> None:
    """A NaN update (e.g. a poisoned elimination) or one of another shape never reaches
    the average: the round is the mean of the valid clients, and the client is named."""
    good = {"a": np.ones(4), "b": np.full(4, 3.0)}
    aggregator = OrderedFedAvg()
    for name, value in good.items():
        aggregator.accept_model(_result(name, value, 1))
    aggregator.accept_model(_result("nan", np.array([1.0, np.nan, 0.0, 0.0]), 1))
    aggregator.accept_model(_result("shape", np.ones(5), 1))
    assert "non-finite" in aggregator.rejected["nan"]
    with pytest.raises(ValueError, match="reported twice"):
        aggregator.accept_model(_result("nan", np.ones(4), 1))
    out = aggregator.aggregate_model()
    np.testing.assert_array_equal(out.params["w"].numpy(), np.full(4, 2.0, dtype=np.float32))
    assert set(aggregator.last_rejected) == {"nan", "shape"}
    assert "differ" in aggregator.last_rejected["shape"]
    assert aggregator.rejected == {}  # reset for the next round
    only_bad = OrderedFedAvg()
    only_bad.accept_model(_result("nan", np.full(4, np.inf), 1))
    with pytest.raises(ValueError, match=r"no valid client result.*'nan'"):
        only_bad.aggregate_model()


def test_a_withdrawn_client_never_reaches_the_global_model_again() -> None:
    """The job's withdrawing client (announced) and any client that sent an elimination
    update (unannounced) are left out of every later round, named with the round they
    withdrew in: a second withdrawal or renewed training changes nothing."""
    ones, threes, nines = np.ones(2), np.full(2, 3.0), np.full(2, 9.0)
    aggregator = OrderedFedAvg(withdrawn="a", withdrawal_round=1)
    rounds = [  # (client, value, metrics) per round
        [("a", nines, None), ("b", ones, None), ("c", threes, None)],
        [("a", nines, {"eliminated": 1.0}), ("b", ones, None), ("c", threes, {"eliminated": 1.0})],
        [("a", nines, {"eliminated": 1.0}), ("b", ones, None), ("c", nines, None)],
    ]
    means = []
    for results in rounds:
        for name, value, metrics in results:
            aggregator.accept_model(_result(name, value, 1, metrics))
        means.append(aggregator.aggregate_model().params["w"].numpy())
    # Rounds 0 and 1 average every client (the withdrawal round carries the elimination
    # updates); round 2 is client b alone.
    np.testing.assert_array_equal(means[0], np.full(2, 13 / 3, dtype=np.float32))
    np.testing.assert_array_equal(means[1], np.full(2, 13 / 3, dtype=np.float32))
    np.testing.assert_array_equal(means[2], ones.astype(np.float32))
    assert set(aggregator.last_rejected) == {"a", "c"}
    assert "withdrew in round 1" in aggregator.last_rejected["a"]
    assert "withdrew in round 1" in aggregator.last_rejected["c"]
    # Before its announced round the withdrawing client is a client like any other.
    early = OrderedFedAvg(withdrawn="a", withdrawal_round=5)
    early.accept_model(_result("a", nines, 1))
    np.testing.assert_array_equal(early.aggregate_model().params["w"].numpy(), nines)


@pytest.mark.slow
def test_a_seeded_federated_run_is_reproducible(tmp_path) -> None:
    digits = load_digits()
    config = FederatedConfig(
        network="mlp",
        network_args={"in_shape": [1, 8, 8], "num_classes": 10, "hidden": [32]},
        rounds=3,
        local_steps=20,
        simulator_threads=3,
    )
    clients = {f"site-{i + 1}": digits.subset(slice(200 * i, 200 * (i + 1))) for i in range(3)}
    runs = [run_federated(clients, config, tmp_path / f"run{k}") for k in range(2)]
    first, second = (r.global_model.state_dict() for r in runs)
    for key in first:
        assert torch.equal(first[key], second[key]), key
    # Issue 35, item 4: it is the in-process FedAvg (the same initial model and client
    # seeds); FLARE's aggregator averages in float64, ours in float32: equal to rounding.
    with torch.random.fork_rng():
        torch.manual_seed(config.seed)
        model = config.recipe().build()
    parts = list(clients.values())
    fedavg(
        model, parts, config.recipe(), config.rounds, seed=config.seed, device=torch.device("cpu")
    )
    in_process = model.state_dict()
    assert in_process.keys() == first.keys()
    for key in first:
        torch.testing.assert_close(first[key], in_process[key], rtol=0, atol=1e-5)
    # and not equal to a run with other client seeds: the comparison can fail
    with torch.random.fork_rng():
        torch.manual_seed(config.seed)
        other = config.recipe().build()
    fedavg(other, parts, config.recipe(), config.rounds, seed=config.seed + 1, device="cpu")
    assert not torch.allclose(other.state_dict()["net.1.weight"], first["net.1.weight"], atol=1e-3)


def test_a_client_whose_rounds_another_process_answered_is_refused(tmp_path) -> None:
    """The mix-up seen once on a loaded machine: site-3 recorded no round (its tasks were
    answered by site-1's process). The run is refused, naming the client and its rounds;
    the withdrawing client owes updates only before its round."""
    for name, rounds in (("site-1", 3), ("site-2", 3), ("site-3", 1)):
        (tmp_path / name).mkdir()
        for r in range(rounds):
            (tmp_path / name / f"update_round_{r:03d}.pt").write_bytes(b"")
    names = ("site-1", "site-2", "site-3")
    with pytest.raises(RuntimeError, match=r"site-3: rounds 1, 2 \(client records") as info:
        check_contributions(tmp_path, names, 3, None)
    assert "site-1" not in str(info.value).split("(")[0]
    check_contributions(tmp_path, names, 3, Withdrawal("site-3", 1))
    with pytest.raises(RuntimeError, match="site-3: rounds 1 "):
        check_contributions(tmp_path, names, 3, Withdrawal("site-3", 2))
    (tmp_path / "site-2" / "update_round_000.pt").unlink()
    with pytest.raises(RuntimeError, match="site-2: rounds 0"):
        check_contributions(tmp_path, names, 3, Withdrawal("site-3", 1))

    # a site that joined in round 2 owes only rounds 2 on
    (tmp_path / "site-2" / "update_round_000.pt").write_bytes(b"")
    with pytest.raises(RuntimeError, match="site-3: rounds 2 "):
        check_contributions(tmp_path, names, 3, None, Schedule(joined={"site-3": 2}))
    (tmp_path / "site-3" / "update_round_002.pt").write_bytes(b"")
    check_contributions(tmp_path, names, 3, None, Schedule(joined={"site-3": 2}))
    with pytest.raises(RuntimeError, match="site-3: rounds 1 "):
        check_contributions(tmp_path, names, 3, None, Schedule(joined={"site-3": 1}))


def test_a_result_without_weights_is_no_contribution() -> None:
    """A site that has not joined yet (or left without a step) sends no weights: the
    round's mean is the others', and nothing is logged as refused."""
    aggregator = OrderedFedAvg()
    aggregator.accept_model(_result("a", np.full(4, 2.0), 10))
    aggregator.accept_model(
        FLModel(params=None, meta={"client_name": "b"}, metrics={"not_joined": 1.0})
    )
    aggregator.accept_model(_result("c", np.full(4, 4.0), 10))
    assert aggregator.rejected == {}
    np.testing.assert_allclose(aggregator.aggregate_model().params["w"].numpy(), 3.0)
