"""A FedAvg aggregation whose result does not depend on the order clients report in.

FLARE's built-in FedAvg adds each client's weights to a running sum as they arrive;
floating-point addition is not associative, so two runs with the same seeds can differ
in the last bits, and training amplifies the difference round after round (the same
seeded withdrawal gave forgetting rates from 0.52 to 0.96). :class:`OrderedFedAvg`
keeps the round's results and averages them in client-name order, in float64, so a
seeded federated run is reproducible.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from nvflare.app_common.abstract.fl_model import FLModel, ParamsType
from nvflare.app_common.aggregators.model_aggregator import ModelAggregator
from nvflare.app_common.workflows.base_fedavg import _get_client_name, _get_num_steps_weight

__all__ = ["OrderedFedAvg"]


def _as_float64(value: Any) -> tuple[np.ndarray, Any]:
    """(float64 array, a function restoring the value's type and dtype)."""
    if hasattr(value, "detach"):  # a torch tensor
        import torch

        dtype = value.dtype
        return value.detach().cpu().double().numpy(), lambda a: torch.from_numpy(a).to(dtype)
    array = np.asarray(value)
    return array.astype(np.float64), lambda a: a.astype(array.dtype)


class OrderedFedAvg(ModelAggregator):
    """FedAvg's weighted mean (weights: ``NUM_STEPS_CURRENT_ROUND``, as FLARE's FedAvg),
    summed in client-name order so the result is the same whatever the arrival order."""

    def __init__(self) -> None:
        super().__init__()
        self._results: dict[str, FLModel] = {}

    def accept_model(self, model: FLModel) -> None:
        name = _get_client_name(model)
        if name in self._results:
            raise ValueError(f"client {name!r} reported twice in one round")
        self._results[name] = model

    def aggregate_model(self) -> FLModel:
        if not self._results:
            raise ValueError("no client result to aggregate")
        names = sorted(self._results)
        weights = {n: _get_num_steps_weight(self._results[n]) for n in names}
        total = sum(weights[n] for n in names)
        first = self._results[names[0]]
        params = {}
        for key in first.params:
            _, restore = _as_float64(first.params[key])
            mean = sum(weights[n] * _as_float64(self._results[n].params[key])[0] for n in names)
            params[key] = restore(mean / total)
        self.reset_stats()
        return FLModel(params=params, params_type=first.params_type or ParamsType.FULL)

    def reset_stats(self) -> None:
        self._results = {}
