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


class ComplianceError(RuntimeError):
    """An evaluated model still remembers a provider it was required to forget."""


class ComplianceGate:
    """Fail an evaluation when the audit metrics say a withdrawn provider is remembered.

    Attach it to a ``SupervisedEvaluator`` that runs over the withdrawn provider's data
    D_Q with :class:`KSCalibratedRatio` and/or :class:`EMAAudit` among its metrics. At
    each epoch completion (after the metrics are computed) it reads them from
    ``engine.state.metrics`` and raises :class:`ComplianceError` when any says "not
    forgotten":

    - rho_KS < 1 (Liu & Tsaftaris 2020, Sec. 3: rho_KS >= 1 means forgotten);
    - rho_EMA > alpha (Huang, Li & Li 2021: rho_EMA <= alpha means not memorised).

    Args:
        provider: name of the provider that must be forgotten (used in the message).
        ks_metric: name of the rho_KS metric, or ``None`` to ignore K-S.
        ema_metric: name of the rho_EMA metric, or ``None`` to ignore EMA.
        alpha: EMA significance level (the paper's 0.1 by default).

    Raises:
        ValueError: both metric names are ``None`` or ``alpha`` is outside (0, 1).
    """

    def __init__(
        self,
        provider: str,
        ks_metric: str | None = "rho_KS",
        ema_metric: str | None = "rho_EMA",
        alpha: float = 0.1,
    ) -> None:
        if ks_metric is None and ema_metric is None:
            raise ValueError("ComplianceGate needs ks_metric, ema_metric or both")
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {alpha}")
        self.provider = str(provider)
        self.ks_metric = ks_metric
        self.ema_metric = ema_metric
        self.alpha = float(alpha)
        #: the outcome of the last check: metric name -> (value, forgotten?)
        self.last_check: dict[str, tuple[float, bool]] = {}

    def attach(self, engine: Any) -> None:
        """Check at every epoch completion of ``engine`` (registered after its metrics)."""
        from ignite.engine import Events

        engine.add_event_handler(Events.EPOCH_COMPLETED, self)

    def check(self, metrics: dict[str, Any]) -> dict[str, tuple[float, bool]]:
        """Decide from a metrics mapping; raise :class:`ComplianceError` if not forgotten."""
        outcome: dict[str, tuple[float, bool]] = {}
        failures: list[str] = []
        for name, rule in ((self.ks_metric, "ks"), (self.ema_metric, "ema")):
            if name is None:
                continue
            if name not in metrics:
                raise KeyError(
                    f"ComplianceGate needs metric {name!r} in engine.state.metrics (found "
                    f"{sorted(metrics)}); attach the auditor handler under that name, e.g. "
                    f"additional_metrics={{{name!r}: ...}}"
                )
            value = float(metrics[name])
            if rule == "ks":
                forgotten = value >= 1.0
                reason = f"{name} = {value:.4g} < 1 (rho_KS >= 1 means forgotten)"
            else:
                forgotten = value <= self.alpha
                reason = (
                    f"{name} = {value:.4g} > alpha = {self.alpha:g} "
                    f"(rho_EMA <= alpha means forgotten)"
                )
            outcome[name] = (value, forgotten)
            if not forgotten:
                failures.append(reason)
        self.last_check = outcome
        if failures:
            raise ComplianceError(
                f"provider {self.provider!r} must be forgotten, but the evaluated model still "
                f"remembers its data: {'; '.join(failures)}. Retrain without the provider "
                "(or unlearn it) and audit again."
            )
        return outcome

    def __call__(self, engine: Any) -> None:
        self.check(engine.state.metrics)
