"""A FedAvg aggregation whose result does not depend on the order clients report in.

FLARE's built-in FedAvg adds each client's weights to a running sum as they arrive;
floating-point addition is not associative, so two runs with the same seeds can differ
in the last bits, and training amplifies the difference round after round (the same
seeded withdrawal gave forgetting rates from 0.52 to 0.96). :class:`OrderedFedAvg`
keeps the round's results and averages them in client-name order, in float64, so a
seeded federated run is reproducible.

It also refuses what must not reach the global model: a client result with non-finite
values (e.g. a poisoned or diverged elimination update) or whose parameters differ in
names or shapes from the other clients' is left out of the round's average, and the
server log names the client and the reason. So is any result from a client after it
withdrew (the job's announced withdrawal, or any client that sent an elimination update):
a withdrawn client that sends a second elimination step, or trains again, does not
reach the global model.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from nvflare.app_common.abstract.fl_model import FLModel, ParamsType
from nvflare.app_common.aggregators.model_aggregator import ModelAggregator
from nvflare.app_common.app_constant import AppConstants
from nvflare.app_common.workflows.base_fedavg import _get_client_name, _get_num_steps_weight

from monai_forget.fl.spec import ELIMINATED

__all__ = ["FedEraserCalibration", "OrderedFedAvg"]


def _as_float64(value: Any) -> tuple[np.ndarray, Any]:
    """(float64 array, a function restoring the value's type and dtype)."""
    if hasattr(value, "detach"):  # a torch tensor
        import torch

        dtype = value.dtype
        return value.detach().cpu().double().numpy(), lambda a: torch.from_numpy(a).to(dtype)
    array = np.asarray(value)
    return array.astype(np.float64), lambda a: a.astype(array.dtype)


def _as_tensors(params: dict) -> dict:
    """name -> float64 torch tensor, for the server's FedEraser arithmetic."""
    import torch

    return {k: torch.as_tensor(_as_float64(v)[0]) for k, v in params.items()}


class OrderedFedAvg(ModelAggregator):
    """FedAvg's weighted mean (weights: ``NUM_STEPS_CURRENT_ROUND``, as FLARE's FedAvg),
    summed in client-name order so the result is the same whatever the arrival order.

    Args:
        withdrawn: The client the job says withdraws (``None``: none announced).
        withdrawal_round: The round it withdraws in; its results in later rounds are
            left out.
        retain_path: Keep FedEraser's server history here
            (:class:`~monai_forget.unlearning.federaser.ServerHistory`, written after
            every retained round and the last); ``None``: keep nothing.
        retain_every: Its retaining interval in rounds.
        initial_ckpt: The job's initial weights (the global model of round 0).
        clients: The federation's client names, in order.
        rounds: The job's rounds (the history is written after the last one too).
        joined: Client -> the round it first trains in (default 0); the history keeps
            the global model of each such round after 0, to retrain from.
    """

    def __init__(
        self,
        withdrawn: str | None = None,
        withdrawal_round: int = 0,
        retain_path: str | None = None,
        retain_every: int = 2,
        initial_ckpt: str | None = None,
        clients: list[str] | None = None,
        rounds: int = 0,
        joined: dict[str, int] | None = None,
    ) -> None:
        super().__init__()
        self.retain_path, self.retain_every = retain_path, retain_every
        self.initial_ckpt, self.clients, self.rounds = initial_ckpt, clients, rounds
        self.joined = dict(joined or {})
        self._history = None
        self._global: dict | None = None  # the global model the round's clients received
        self._results: dict[str, FLModel] = {}
        #: client -> why its result was left out of the current round (and the last one)
        self.rejected: dict[str, str] = {}
        self.last_rejected: dict[str, str] = {}
        # FLARE serialises the job's components from attributes named as the arguments.
        self.withdrawn, self.withdrawal_round = withdrawn, withdrawal_round
        #: client -> the round it withdrew in (announced, or seen in an elimination update)
        self.withdrawals: dict[str, int] = (
            {} if withdrawn is None else {withdrawn: withdrawal_round}
        )
        self._round = 0  # rounds aggregated, when FLARE's context does not say

    def _current_round(self) -> int:
        found = self.fl_ctx.get_prop(AppConstants.CURRENT_ROUND) if self.fl_ctx else None
        return self._round if found is None else int(found)

    def accept_model(self, model: FLModel) -> None:
        name = _get_client_name(model)
        if name in self._results or name in self.rejected:
            raise ValueError(f"client {name!r} reported twice in one round")
        now = self._current_round()
        if name in self.withdrawals and now > self.withdrawals[name]:
            self._reject(
                name,
                f"it withdrew in round {self.withdrawals[name]}; a withdrawn client's later "
                "results (a second withdrawal, renewed training) are left out",
            )
            return
        if not model.params:  # no contribution: not joined yet, or left without a step
            return
        if (model.metrics or {}).get(ELIMINATED):
            self.withdrawals.setdefault(name, now)
        bad = [
            k for k, v in (model.params or {}).items() if not np.isfinite(_as_float64(v)[0]).all()
        ]
        if bad:
            self._reject(name, f"non-finite values in {bad[:3]}")
            return
        self._results[name] = model

    def _reject(self, name: str, reason: str) -> None:
        self.rejected[name] = reason
        message = f"client {name!r} left out of this round's average: {reason}"
        if self.fl_ctx is not None:
            self.error(message)

    def _drop_mismatched(self) -> None:
        """Leave out results whose parameter names/shapes differ from the majority's."""
        shapes = {
            n: tuple(sorted((k, tuple(np.shape(v))) for k, v in m.params.items()))
            for n, m in self._results.items()
        }
        signatures = list(shapes.values())
        common = max(set(signatures), key=signatures.count)
        for name, signature in shapes.items():
            if signature != common:
                differ = sorted(set(signature) ^ set(common))[:3]
                self._reject(name, f"parameters differ from the other clients' ({differ})")
                del self._results[name]

    def aggregate_model(self) -> FLModel:
        if self._results:
            self._drop_mismatched()
        if not self._results:
            raise ValueError(
                f"no valid client result to aggregate (rejected: {self.rejected}); the global "
                "model is left as it was"
            )
        names = sorted(self._results)
        if self.retain_path:
            self._retain(names)
        weights = {n: _get_num_steps_weight(self._results[n]) for n in names}
        total = sum(weights[n] for n in names)
        first = self._results[names[0]]
        params = {}
        for key in first.params:
            _, restore = _as_float64(first.params[key])
            mean = sum(weights[n] * _as_float64(self._results[n].params[key])[0] for n in names)
            params[key] = restore(mean / total)
        self.last_rejected = dict(self.rejected)
        self.reset_stats()
        self._round += 1
        self._global = params
        return FLModel(params=params, params_type=first.params_type or ParamsType.FULL)

    def _start_of_round(self) -> dict:
        """The global model this round's clients started from (round 0: the job's
        initial weights; later: this aggregator's last result)."""
        if self._global is None:
            from monai_forget.fl.spec import load_tensors

            self._global = load_tensors(self.initial_ckpt)
        return self._global

    def _retain(self, names: list[str]) -> None:
        """Record the round in FedEraser's server history and write it."""
        from monai_forget.unlearning.federaser import ServerHistory

        before = _as_tensors(self._start_of_round())
        if self._history is None:
            clients = tuple(self.clients or names)
            joined = {n: self.joined.get(n, 0) for n in clients}
            self._history = ServerHistory(clients, 0, self.retain_every, joined, before)
        now = self._current_round()
        self._history.record(now, before, {n: _as_tensors(self._results[n].params) for n in names})
        # between retained rounds only the round count changes: no rewrite of the
        # (large) first updates every round
        if now % self.retain_every == 0 or now >= self.rounds - 1:
            self._history.save(self.retain_path)

    def reset_stats(self) -> None:
        self._results = {}
        self.rejected = {}


class FedEraserCalibration(OrderedFedAvg):
    """The server of a FedEraser unlearning job: each round's client results are
    calibration-trained weights, and the new global model is
    :func:`~monai_forget.unlearning.federaser.calibrated_model` of them: each client's
    direction at the size of its update retained in the training round this round stands
    in for.

    Args:
        history_path: The training run's server history
            (:class:`~monai_forget.unlearning.federaser.ServerHistory`).
        retained: The training rounds the job's rounds stand in for, in order.
        initial_ckpt: The job's initial weights (``M~`` after the first retained round).
    """

    def __init__(
        self, history_path: str = "", retained: list[int] | None = None, initial_ckpt: str = ""
    ) -> None:
        super().__init__(initial_ckpt=initial_ckpt)
        self.history_path, self.retained = history_path, list(retained or [])
        self._norms: dict | None = None

    def aggregate_model(self) -> FLModel:
        from monai_forget.unlearning.federaser import ServerHistory, calibrated_model

        if self._results:
            self._drop_mismatched()
        if not self._results:
            raise ValueError(f"no valid calibration result (rejected: {self.rejected})")
        if self._norms is None:
            self._norms = ServerHistory.load(self.history_path).norms
        stands_for = self.retained[self._current_round()]
        names = sorted(self._results)
        trained = {n: _as_tensors(self._results[n].params) for n in names}
        current = _as_tensors(self._start_of_round())
        new = calibrated_model(current, trained, self._norms[stands_for])
        first = self._results[names[0]]
        params = {k: _as_float64(first.params[k])[1](new[k].numpy()) for k in first.params}
        self.last_rejected = dict(self.rejected)
        self.reset_stats()
        self._round += 1
        self._global = params
        return FLModel(params=params, params_type=first.params_type or ParamsType.FULL)
