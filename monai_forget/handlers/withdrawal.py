"""Ignite handlers that report withdrawal audits at the end of a MONAI evaluation.

Attach them to a ``SupervisedEvaluator`` running over the withdrawn provider's data
D_Q: each epoch end stores rho in ``engine.state.metrics`` next to accuracy. Reference
outputs (shadow-model confidences, EMA thresholds) are computed beforehand by the
auditors, so only the target runs during evaluation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from monai.handlers import IgniteMetricHandler
from monai.handlers.utils import from_engine

from monai_forget.audit.ema import EMAThresholds, TestName
from monai_forget.metrics import EMAPValueMetric, KSCalibratedRatioMetric


def _as_batch(values: Any) -> Any:
    """A decollated list of per-sample tensors (or numbers) as one batch tensor."""
    if isinstance(values, (list, tuple)):
        return torch.stack(
            [v if isinstance(v, torch.Tensor) else torch.as_tensor(v) for v in values]
        )
    return values


def batch_output(pred_key: str = "pred", label_key: str = "label") -> Callable:
    """An output transform giving ``(pred, label)`` of ``engine.state.output`` as batches.

    ``from_engine([pred_key, label_key])`` yields per-sample lists once MONAI has
    decollated the batch, and ignite then updates the metric one sample at a time;
    stacking them gives one update per iteration, which keeps the handlers' evaluation
    overhead small. ``pred_key`` can name a copy of the logits kept before the
    post-processing softmax (with ``from_logits=True``), so the softmax is taken in
    float64 as the auditors take it.
    """
    select = from_engine([pred_key, label_key])

    def transform(output: Any) -> tuple[Any, Any]:
        pred, label = select(output)
        return _as_batch(pred), _as_batch(label)

    return transform


_DEFAULT_OUTPUT = batch_output()


class KSCalibratedRatio(IgniteMetricHandler):
    """rho_KS (Liu & Tsaftaris 2020, Eq. 4) of the evaluated model on D_Q.

    Args:
        query_confidence: query shadow model's ground-truth confidences on D_Q.
        calibration_confidence: calibration shadow model's ground-truth confidences on D_Q.
        from_logits: the evaluator's ``pred`` holds logits (apply a softmax first).
        output_transform: extracts ``(y_pred, y)`` from ``engine.state.output``.
        save_details: store the per-sample buffers in ``engine.state.metric_details``.
    """

    def __init__(
        self,
        query_confidence: Any,
        calibration_confidence: Any,
        from_logits: bool = False,
        output_transform: Callable = _DEFAULT_OUTPUT,
        save_details: bool = False,
    ) -> None:
        metric = KSCalibratedRatioMetric(query_confidence, calibration_confidence, from_logits)
        super().__init__(
            metric_fn=metric, output_transform=output_transform, save_details=save_details
        )


class EMAPValue(IgniteMetricHandler):
    """rho_EMA (Huang, Li & Li 2021, Alg. 2) of the evaluated model on D_Q.

    Args:
        thresholds: per-class thresholds from :meth:`monai_forget.audit.EMAAuditor.fit_reference`
            (or their ``to_dict()`` form).
        test: ``"welch"`` or ``"student"``.
        from_logits: the evaluator's ``pred`` holds logits (apply a softmax first).
        output_transform: extracts ``(y_pred, y)`` from ``engine.state.output``.
        save_details: store the per-sample buffers in ``engine.state.metric_details``.
    """

    def __init__(
        self,
        thresholds: EMAThresholds | dict[str, Any],
        test: TestName = "welch",
        from_logits: bool = False,
        output_transform: Callable = _DEFAULT_OUTPUT,
        save_details: bool = False,
    ) -> None:
        metric = EMAPValueMetric(thresholds, test, from_logits)
        super().__init__(
            metric_fn=metric, output_transform=output_transform, save_details=save_details
        )
