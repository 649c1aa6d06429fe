"""What a leak scan measures per probe for a text: Eq. 1's divergence, or a class shift.

``"m"`` (the paper's): ``d = KL(f(x_c) || f(x_c carrying the text))`` (Hartley &
Tsaftaris 2022, Eq. 1's d_u), every change in the model's output.

``"class-shift"`` (this project's; a departure from the paper, measured in
``benchmarks/results/leak_scan_pipeline_series.md``): the rise in the log-probability of
the one class the text raises most on average over the probes,

    k*(t) = argmax_k mean_i [log f_k(x_i carrying t) - log f_k(x_i)],
    d_i   = log f_{k*}(x_i carrying t) - log f_{k*}(x_i).

Why: a model that learned a burned-in name from a patient's series learned it as a cue
for that patient's label, so the name moves probes toward one class. Any text of the same
kind moves the output too, by its ink alone, in no consistent direction; Eq. 1's KL adds
both, and the name's cue is lost among its decoys (measured on one training, the leak
demo's model: a name burned into 100 of
1,797 training images moved the probes' mean probability of its class from 0.002 to 0.16,
twice what the next roster name did, yet ranked 13th of 20 by M). Decoys calibrate
either statistic: each is compared only with texts of its kind under the same rule, so
its calibrated p stays exact under the null whatever the rule.

Probabilities are floored at the smallest positive float64 before the log (a float64
softmax reaches 0 only for logit gaps above ~745).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from monai_forget.defaults import LEAK_SCAN_STATISTICS
from monai_forget.stats import kl_divergence

__all__ = ["STATISTICS", "Statistic", "class_shift", "per_probe"]

Statistic = Literal["m", "class-shift"]
#: The per-probe statistics a leak scan can rank texts by (the first is the default).
STATISTICS = LEAK_SCAN_STATISTICS

_TINY = np.finfo(np.float64).tiny


def class_shift(clean: np.ndarray, carrying: np.ndarray) -> np.ndarray:
    """Per probe, the rise in log-probability of the class each text raises most on
    average (module docstring).

    Args:
        clean: ``(N, K)`` outputs on the clean probes.
        carrying: ``(G, N, K)`` outputs on the probes carrying each of ``G`` texts.

    Returns:
        ``(G, N)`` float64.
    """
    clean = np.asarray(clean, dtype=np.float64)
    carrying = np.asarray(carrying, dtype=np.float64)
    delta = np.log(np.maximum(carrying, _TINY)) - np.log(np.maximum(clean, _TINY))[None]
    raised = delta.mean(axis=1).argmax(axis=1)  # (G,): each text's class k*
    return np.take_along_axis(delta, raised[:, None, None], axis=2)[..., 0]


def per_probe(statistic: str, clean: np.ndarray, carrying: np.ndarray) -> np.ndarray:
    """``(G, N)`` per-probe values of ``statistic`` for ``G`` texts on ``N`` probes.

    Raises:
        ValueError: an unknown statistic.
    """
    if statistic == "m":
        return kl_divergence(np.asarray(clean)[None], carrying)
    if statistic == "class-shift":
        return class_shift(clean, carrying)
    raise ValueError(f"statistic must be one of {STATISTICS}, got {statistic!r}")
