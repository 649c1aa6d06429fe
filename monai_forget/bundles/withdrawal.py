"""The withdrawal audit of one provider as a bundle component, and its evaluation-time
metrics.

:class:`WithdrawalAudit` runs the auditors and writes one JSON per method, the HTML
report and ``reference.json`` (an :class:`~monai_forget.audit.AuditReference`);
:func:`audit_metrics` reads that file back into the evaluation-time handlers.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from torch import nn

from monai_forget.audit import AuditReference, AuditResult, EMAAuditor, KSAuditor, write_report
from monai_forget.bundles.weights import check_outputs
from monai_forget.data import LabelledImages

__all__ = ["WithdrawalAudit", "audit_metrics"]


class WithdrawalAudit:
    """Withdrawal audit of one provider, as a bundle component (``audit.json``).

    Runs every auditor (``KSAuditor``, ``EMAAuditor``; each trains the shadow models it
    needs with its recipe) on the target, the provider's data D_Q and the calibration
    set D_C, then writes into ``output_dir``:

    - ``<method>.json`` per auditor (:meth:`AuditResult.save`);
    - ``report.html`` (:func:`monai_forget.audit.write_report`);
    - ``reference.json``: the shadow models' confidences on D_Q and the EMA thresholds,
      which :func:`audit_metrics` hands to the evaluation-time handlers.

    Every output is written atomically; existing ones are refused unless ``overwrite``.

    Args:
        target: the trained model under audit.
        query: D_Q, the withdrawn provider's data (evaluation preprocessing).
        calibration: D_C, data from the same domain sharing no sample with D_Q.
        auditors: the auditors to run.
        output_dir: where the results go.
        provider: the provider's name (labels and reference).
        scenario: a free-text name of the audited model (e.g. "trained with provider").
        overwrite: replace existing outputs.
        title: the report title.
    """

    def __init__(
        self,
        target: nn.Module,
        query: LabelledImages,
        calibration: LabelledImages,
        auditors: Sequence[Any],
        output_dir: str | os.PathLike,
        provider: str,
        scenario: str = "",
        overwrite: bool = False,
        title: str = "Withdrawal audit",
    ) -> None:
        if not auditors:
            raise ValueError("WithdrawalAudit needs at least one auditor")
        self.target = target
        self.query = query
        self.calibration = calibration
        self.auditors = list(auditors)
        self.output_dir = Path(output_dir)
        self.provider = str(provider)
        self.scenario = scenario
        self.overwrite = bool(overwrite)
        self.title = title
        self.results: list[AuditResult] = []
        self.reference: AuditReference | None = None

    def _methods(self) -> list[str]:
        methods = []
        for auditor in self.auditors:
            if isinstance(auditor, KSAuditor):
                methods.append("ks")
            elif isinstance(auditor, EMAAuditor):
                methods.append("ema")
            else:
                raise TypeError(f"unsupported auditor {type(auditor).__name__}")
        if len(set(methods)) != len(methods):
            raise ValueError(f"one auditor per method, got {methods}")
        return methods

    def outputs(self) -> list[Path]:
        """The files :meth:`run` writes."""
        names = [f"{m}.json" for m in self._methods()] + ["report.html", "reference.json"]
        return [self.output_dir / n for n in names]

    def run(self) -> list[AuditResult]:
        """Run the auditors and write the results; returns them in auditor order."""
        check_outputs(*self.outputs(), overwrite=self.overwrite)
        label = f"provider {self.provider}" + (f", {self.scenario}" if self.scenario else "")
        references: dict[str, Any] = {}
        results: dict[str, AuditResult] = {}
        for method, auditor in zip(self._methods(), self.auditors, strict=True):
            results[method] = auditor.audit(self.target, self.query, self.calibration, label=label)
            references[method] = auditor.reference_
        self.results = list(results.values())
        for method, result in results.items():
            result.save(self.output_dir / f"{method}.json", overwrite=self.overwrite)
            print(result.summary())
        write_report(
            self.results,
            self.output_dir / "report.html",
            title=f"{self.title}: provider {self.provider}",
            overwrite=self.overwrite,
        )
        self.reference = AuditReference.from_audit(
            self.provider, self.query, references.get("ks"), references.get("ema"), results
        )
        self.reference.save(self.output_dir / "reference.json", overwrite=self.overwrite)
        print(f"audit of provider {self.provider!r} written to {self.output_dir}")
        return self.results


def audit_metrics(
    reference_file: str | os.PathLike,
    provider: str | None = None,
    query_size: int | None = None,
    from_logits: bool = False,
    pred_key: str = "pred",
) -> dict[str, Any]:
    """Evaluation-time audit metrics from the ``reference.json`` of :class:`WithdrawalAudit`.

    Returns ``{"rho_KS": KSCalibratedRatio, "rho_EMA": EMAPValue}`` (those present in the
    file) for a ``SupervisedEvaluator``'s ``additional_metrics``; the evaluation must run
    over the same D_Q the reference was computed on.

    Args:
        reference_file: the file written by ``audit.json``.
        provider: the provider being evaluated; must match the file's.
        query_size: the number of samples the evaluation covers; must match the file's.
        from_logits: the evaluator's ``pred_key`` item holds logits.
        pred_key: the item of the evaluator's output the metrics read. The bundles keep a
            copy of the logits as ``logits`` and pass ``from_logits=True``: a float32
            softmax rounds confidences near 1 (ties the auditors, which take the softmax
            in float64, do not have), which can move rho_KS by a sample's share.

    Raises:
        FileNotFoundError: no reference file (run ``audit.json`` first).
        ValueError: the file was made for another provider or another D_Q size.
    """
    from monai_forget.handlers import EMAPValue, KSCalibratedRatio, batch_output

    path = Path(reference_file)
    if not path.is_file():
        raise FileNotFoundError(
            f"audit reference {path} not found; run the bundle's audit.json for this provider "
            "first (it writes reference.json), or evaluate without the audit handlers"
        )
    reference = AuditReference.load(path)
    reference.check(provider, query_size, source=str(path))
    metrics: dict[str, Any] = {}
    if reference.ks is not None:
        metrics["rho_KS"] = KSCalibratedRatio(
            reference.ks.query_confidence,
            reference.ks.calibration_confidence,
            from_logits=from_logits,
            output_transform=batch_output(pred_key),
        )
    if reference.ema is not None:
        metrics["rho_EMA"] = EMAPValue(
            reference.ema.thresholds,
            test=reference.ema.test,
            from_logits=from_logits,
            output_transform=batch_output(pred_key),
        )
    return metrics
