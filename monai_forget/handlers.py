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
from monai_forget.metrics import EMAMetric, KSCalibratedRatioMetric

_PRED_LABEL = from_engine(["pred", "label"])


def _as_batch(values: Any) -> Any:
    """A decollated list of per-sample tensors (or numbers) as one batch tensor."""
    if isinstance(values, (list, tuple)):
        return torch.stack(
            [v if isinstance(v, torch.Tensor) else torch.as_tensor(v) for v in values]
        )
    return values


def _pred_label_batch(output: Any) -> tuple[Any, Any]:
    """``(pred, label)`` of ``engine.state.output`` as batch tensors.

    ``from_engine(["pred", "label"])`` yields per-sample lists once MONAI has decollated
    the batch, and ignite then updates the metric one sample at a time; stacking them
    gives one update per iteration, which keeps the handlers' evaluation overhead small.
    """
    pred, label = _PRED_LABEL(output)
    return _as_batch(pred), _as_batch(label)


_DEFAULT_OUTPUT = _pred_label_batch


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


class EMAAudit(IgniteMetricHandler):
    """rho_EMA (Huang, Li & Li 2021, Alg. 2) of the evaluated model on D_Q.

    Args:
        thresholds: per-class thresholds from :meth:`monai_forget.audit.EMAAuditor.calibrate`
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
        metric = EMAMetric(thresholds, test, from_logits)
        super().__init__(
            metric_fn=metric, output_transform=output_transform, save_details=save_details
        )
