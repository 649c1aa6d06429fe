"""Ignite handlers that report withdrawal audits at the end of a MONAI evaluation.

Attach them to a ``SupervisedEvaluator`` running over the audited data: each epoch end
stores the auditor's statistic in ``engine.state.metrics`` next to accuracy and logs the
decision in words (:func:`decision_line`) on the evaluator's logger. Reference
outputs (shadow-model confidences, EMA thresholds, reference-model statistics) are
computed beforehand by the auditors, so only the target runs during evaluation. Given
the audited samples' content hashes and the images (``batch_output(image_key=...)``),
the handlers also check that exactly the audited samples were evaluated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from monai.handlers import IgniteMetricHandler
from monai.handlers.utils import from_engine

from monai_forget.audit.ema import EMAReference, EMAThresholds, TestName
from monai_forget.audit.refmodel_reference import RefModelReference
from monai_forget.audit.result import FORGOTTEN, AuditResult, strength_text
from monai_forget.metrics import (
    EMAPValueMetric,
    KSCalibratedRatioMetric,
    ReferenceModelAuditMetric,
    SampleCheck,
)

__all__ = ["EMAPValue", "KSCalibratedRatio", "ReferenceModelAudit", "batch_output"]


def _as_batch(values: Any) -> Any:
    """A decollated list of per-sample tensors (or numbers) as one batch tensor."""
    if isinstance(values, (list, tuple)):
        return torch.stack(
            [v if isinstance(v, torch.Tensor) else torch.as_tensor(v) for v in values]
        )
    return values


def batch_output(
    pred_key: str = "pred", label_key: str = "label", image_key: str | None = None
) -> Callable:
    """An output transform giving ``(pred, label[, image])`` of ``engine.state.output``.

    ``from_engine(...)`` yields per-sample lists once MONAI has decollated the batch, and
    ignite then updates the metric one sample at a time; stacking them gives one update
    per iteration, which keeps the handlers' evaluation overhead small. ``pred_key`` can
    name a copy of the logits kept before the post-processing softmax (with
    ``from_logits=True``), so the softmax is taken in float64 as the auditors take it.
    ``image_key`` adds the evaluated images, which the handlers hash to check (or, for
    the reference-model audit, to identify) the evaluated samples.
    """
    keys = [pred_key, label_key] + ([image_key] if image_key else [])
    select = from_engine(keys)
    last: list[tuple[Any, tuple[Any, ...]] | None] = [None]  # (output, batch), one cell

    def transform(output: Any) -> tuple[Any, ...]:
        # Every handler built with this transform gets the same output per iteration:
        # stack it once (and so hash its images once, see image_ids). The pair is read
        # and replaced whole, so evaluators in other threads never mix two batches.
        entry = last[0]
        if entry is None or entry[0] is not output:
            entry = (output, tuple(_as_batch(v) for v in select(output)))
            last[0] = entry
        return entry[1]

    return transform


#: ``(pred, label, image)``: the images let the handlers check they evaluate D_Q.
_CHECKED_OUTPUT = batch_output(image_key="image")


def decision_line(name: str, result: AuditResult) -> str:
    """What an audit handler logs at evaluation time: the decision, the bound on D_Q's
    membership strength relative to the known members (0-100 %) where the auditor gives
    one, and why."""
    line = f"{name}: {result.decision}"
    upper = result.details.get("membership_strength_upper")
    if upper is not None:
        line += f"; {strength_text(upper, result.details.get('alpha', 0.05))}"
    reason = result.details.get("reason")
    if reason:
        return f"{line}; {reason}"
    return f"{line} ({result.statistic_name} = {result.statistic:.4g}: {result.rule})"


class _AuditHandler(IgniteMetricHandler):
    """An ``IgniteMetricHandler`` whose output may carry the images as a third item, and
    that logs the audit's decision when the evaluation completes."""

    def update(self, output: Sequence[torch.Tensor]) -> None:
        if len(output) == 3:
            y_pred, y, images = output
            self.metric_fn(y_pred, y, images=images)
        else:
            super().update(output)

    def completed(self, engine: Any, name: str) -> None:
        super().completed(engine, name)
        result = self.metric_fn.last_result
        if result is None:
            engine.logger.info(f"{name}: no decision (the evaluated samples are not D_Q)")
        else:
            engine.logger.info(decision_line(name, result))


class KSCalibratedRatio(_AuditHandler):
    """rho_KS (Liu & Tsaftaris 2020, Eq. 4) of the evaluated model on D_Q.

    By default the handler checks by content that the evaluation covered exactly D_Q
    (the images come from the evaluator's output, ``image`` key), so a statistic over
    the wrong samples is refused rather than reported.

    Args:
        reference, calibration_confidence: as
            :class:`~monai_forget.metrics.KSCalibratedRatioMetric`'s (what
            :meth:`monai_forget.audit.KSAuditor.fit_reference` returned, or both shadow
            models' ground-truth confidences on D_Q).
        from_logits: the evaluator's ``pred`` holds logits (apply a softmax first).
        output_transform: extracts ``(y_pred, y, images)`` from ``engine.state.output``.
        save_details: store the per-sample buffers in ``engine.state.metric_details``.
        check: how the evaluated samples are checked to be D_Q (:class:`SampleCheck`;
            ``None``: no check, for data that cannot be hashed).
    """

    def __init__(
        self,
        reference: Any,
        calibration_confidence: Any = None,
        from_logits: bool = False,
        output_transform: Callable = _CHECKED_OUTPUT,
        save_details: bool = False,
        check: SampleCheck | None = SampleCheck(),
    ) -> None:
        metric = KSCalibratedRatioMetric(reference, calibration_confidence, from_logits, check)
        super().__init__(
            metric_fn=metric, output_transform=output_transform, save_details=save_details
        )


class EMAPValue(_AuditHandler):
    """rho_EMA (Huang, Li & Li 2021, Alg. 2) of the evaluated model on D_Q.

    By default the handler checks by content that the evaluation covered exactly D_Q, as
    :class:`KSCalibratedRatio` does.

    Args:
        reference: what :meth:`monai_forget.audit.EMAAuditor.fit_reference` returned
            (fitted with D_Q, it carries D_Q's content hashes), or the per-class
            thresholds alone (:class:`EMAThresholds` or their ``to_dict()`` form).
        test: ``"welch"`` or ``"student"`` (default: the reference's, else Welch).
        from_logits: the evaluator's ``pred`` holds logits (apply a softmax first).
        output_transform: extracts ``(y_pred, y, images)`` from ``engine.state.output``.
        save_details: store the per-sample buffers in ``engine.state.metric_details``.
        check: as :class:`KSCalibratedRatio`'s.
    """

    def __init__(
        self,
        reference: EMAReference | EMAThresholds | dict[str, Any],
        test: TestName | None = None,
        from_logits: bool = False,
        output_transform: Callable = _CHECKED_OUTPUT,
        save_details: bool = False,
        check: SampleCheck | None = SampleCheck(),
    ) -> None:
        metric = EMAPValueMetric(reference, test, from_logits, check)
        super().__init__(
            metric_fn=metric, output_transform=output_transform, save_details=save_details
        )


class ReferenceModelAudit(_AuditHandler):
    """The reference-model audit (three-way) of the evaluated model on the audit set.

    The evaluator must run over D_Q, the known members and the known non-members (the
    audit set) and hand the images to the handler (the default output transform does);
    each sample is matched to its role by content. ``engine.state.metrics`` gets
    ``<name>`` (p_member), ``<name>_upper`` (the upper confidence bound of D_Q's
    membership strength relative to the known members, clipped to [0, 1]) and
    ``<name>_forgotten`` (1.0 when the audit's whole decision, its data checks included,
    is "forgotten", else 0.0);
    ``handler.metric_fn.last_result``
    holds the whole result (decision, membership strength, warnings).

    Args:
        reference: from :meth:`monai_forget.audit.ReferenceModelAuditor.fit_reference`
            (or its ``to_dict()`` form).
        from_logits: the evaluator's ``pred`` holds logits (apply a softmax first).
        margin: "forgotten" needs the upper bound of the membership strength below it (``None``:
            the reference's margin).
        output_transform: extracts ``(y_pred, y, images)`` from ``engine.state.output``.
    """

    def __init__(
        self,
        reference: RefModelReference | dict[str, Any],
        from_logits: bool = False,
        margin: float | None = None,
        output_transform: Callable = _CHECKED_OUTPUT,
    ) -> None:
        super().__init__(
            metric_fn=ReferenceModelAuditMetric(reference, from_logits, margin),
            output_transform=output_transform,
        )

    def completed(self, engine: Any, name: str) -> None:
        super().completed(engine, name)
        result = self.metric_fn.last_result
        # a share: the estimate's bound past 100 % is sampling noise at the end
        upper = min(max(float(result.details["membership_strength_upper"]), 0.0), 1.0)
        engine.state.metrics[f"{name}_upper"] = upper
        engine.state.metrics[f"{name}_forgotten"] = float(result.decision == FORGOTTEN)
