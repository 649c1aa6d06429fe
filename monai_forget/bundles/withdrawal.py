"""The withdrawal audit of one provider as a bundle component, and its evaluation-time
metrics.

:class:`WithdrawalAudit` runs the auditors and writes one JSON per method, the HTML
report and ``reference.json`` (an :class:`~monai_forget.audit.AuditReference`);
:func:`audit_metrics` reads that file back into the evaluation-time handlers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from torch import nn

from monai_forget.audit import (
    AuditReference,
    AuditResult,
    write_report,
)
from monai_forget.auditor_registry import auditor_kind, kind_of
from monai_forget.bundles.datalist import entry_id
from monai_forget.bundles.weights import check_outputs
from monai_forget.data import LabelledImages
from monai_forget.results import write_json

#: The file naming the samples of the audit set, role by role (entry ids).
AUDIT_SET = "audit_set.json"

__all__ = ["AUDIT_SET", "WithdrawalAudit", "audit_entries", "audit_metrics"]


class WithdrawalAudit:
    """Withdrawal audit of one provider, as a bundle component (``audit.json``).

    Runs every auditor (``ReferenceModelAuditor``, ``KSAuditor``, ``EMAAuditor``; each
    trains the models it needs with its recipe) on the target, the provider's data D_Q
    and the calibration data, then writes into ``output_dir``:

    - ``<method>.json`` per auditor (:meth:`AuditResult.save`);
    - ``report.html`` (:func:`monai_forget.audit.write_report`);
    - ``reference.json``: what each auditor learned (:class:`AuditReference`), which
      :func:`audit_metrics` hands to the evaluation-time handlers;
    - ``audit_set.json``: the entry ids of the samples the reference-model audit scored
      (D_Q, known members, known non-members), the set an evaluation-time check of that
      auditor runs over (:func:`monai_forget.bundles.audit_entries`).

    Every output is written atomically; existing ones are refused unless ``overwrite``.

    Args:
        target: the trained model under audit.
        query: D_Q, the withdrawn provider's data (evaluation preprocessing).
        calibration: ``(known members, known non-members)`` of the target, from the same
            domain and sharing no sample with D_Q: the reference-model auditor uses the
            pair; K-S and EMA their union as D_C (EMA splits it at random, as the paper).
        auditors: the auditors to run.
        output_dir: where the results go.
        provider: the provider's name (labels and reference).
        scenario: a free-text name of the audited model (e.g. "trained with provider").
        overwrite: replace existing outputs.
        title: the report title.
        papers_calibration: D_C of K-S and EMA when it is not the union of
            ``calibration``: held-out data of another collection can calibrate the papers'
            auditors as they define it, but cannot stand for non-members of D_Q's
            distribution in the reference-model audit.
    """

    def __init__(
        self,
        target: nn.Module,
        query: LabelledImages,
        calibration: LabelledImages | tuple[LabelledImages, LabelledImages],
        auditors: Sequence[Any],
        output_dir: str | os.PathLike,
        provider: str,
        scenario: str = "",
        overwrite: bool = False,
        title: str = "Withdrawal audit",
        papers_calibration: LabelledImages | None = None,
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
        self.papers_calibration = papers_calibration
        self.results: list[AuditResult] = []
        self.reference: AuditReference | None = None

    def _methods(self) -> list[str]:
        methods = [kind_of(auditor).name for auditor in self.auditors]
        if len(set(methods)) != len(methods):
            raise ValueError(f"one auditor per method, got {methods}")
        return methods

    def outputs(self) -> list[Path]:
        """The files :meth:`run` writes."""
        names = [f"{m}.json" for m in self._methods()] + ["report.html", "reference.json"]
        if "refmodel" in self._methods():
            names.append(AUDIT_SET)
        return [self.output_dir / n for n in names]

    def run(self) -> list[AuditResult]:
        """Run the auditors and write the results; returns them in auditor order."""
        check_outputs(*self.outputs(), overwrite=self.overwrite)
        label = f"provider {self.provider}" + (f", {self.scenario}" if self.scenario else "")
        references: dict[str, Any] = {}
        results: dict[str, AuditResult] = {}
        pair = self.calibration if isinstance(self.calibration, tuple) else None
        whole = pair[0].concat(pair[1]) if pair else self.calibration
        if self.papers_calibration is not None:
            whole = self.papers_calibration
        for method, auditor in zip(self._methods(), self.auditors, strict=True):
            calibration = pair if auditor_kind(method).calibration == "known" else whole
            results[method] = auditor.audit(self.target, self.query, calibration, label=label)
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
            self.provider, self.query, references.get("ks"), references.get("ema"), results,
            references.get("refmodel"),
        )  # fmt: skip
        self.reference.save(self.output_dir / "reference.json", overwrite=self.overwrite)
        if "refmodel" in results:
            auditor = self.auditors[self._methods().index("refmodel")]
            roles = {role: list(data.ids or ()) for role, data in auditor.roles_.items()}
            write_json(self.output_dir / AUDIT_SET, roles, overwrite=self.overwrite)
        print(f"audit of provider {self.provider!r} written to {self.output_dir}")
        return self.results


def audit_entries(
    reference_file: str | os.PathLike,
    data_file: str | os.PathLike,
    entries: Sequence[Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """The datalist entries an evaluation-time audit must evaluate.

    When the audit beside ``reference_file`` ran the reference-model auditor, its
    ``audit_set.json`` names the samples that audit scored (D_Q, the scored known
    members and non-members): those entries of ``data_file`` (any section), role by
    role. Otherwise (K-S and EMA only) ``entries``, the provider's D_Q.

    Raises:
        ValueError: an entry of the audit set is no longer in ``data_file``.
    """
    from monai.data import load_decathlon_datalist

    path = Path(reference_file).with_name(AUDIT_SET)
    if not path.is_file():
        return [dict(e) for e in entries]
    roles = json.loads(path.read_text(encoding="utf-8"))
    sections = json.loads(Path(data_file).read_text(encoding="utf-8"))
    by_id: dict[str, dict[str, Any]] = {}
    for section, value in sections.items():
        if isinstance(value, list) and value and isinstance(value[0], dict) and "image" in value[0]:
            for entry in load_decathlon_datalist(str(data_file), data_list_key=section):
                by_id.setdefault(entry_id(entry), entry)
    wanted = [i for role in ("query", "members", "nonmembers") for i in roles.get(role, [])]
    missing = [i for i in wanted if i not in by_id]
    if missing:
        raise ValueError(
            f"{len(missing)} sample(s) of the audit set {path} are not in {data_file} (e.g. "
            f"{missing[0]}); evaluate with the datalist the audit used, or audit again"
        )
    return [dict(by_id[i]) for i in wanted]


def audit_metrics(
    reference_file: str | os.PathLike,
    provider: str | None = None,
    query_size: int | None = None,
    from_logits: bool = False,
    pred_key: str = "pred",
    image_key: str | None = "image",
    margin: float | None = None,
) -> dict[str, Any]:
    """Evaluation-time audit metrics from the ``reference.json`` of :class:`WithdrawalAudit`.

    Returns ``{"p_member": ReferenceModelAudit, "rho_KS": KSCalibratedRatio, "rho_EMA":
    EMAPValue}`` (those present in the file) for a ``SupervisedEvaluator``'s
    ``additional_metrics``. The reference-model audit needs the whole audit set
    (``audit_set.json``) evaluated; K-S and EMA use the D_Q samples among the evaluated
    ones. With ``image_key``, every handler checks by content that exactly the audited
    samples were evaluated.

    Args:
        reference_file: the file written by ``audit.json``.
        provider: the provider being evaluated; must match the file's.
        query_size: the number of D_Q samples the evaluation covers; must match the file's.
        from_logits: the evaluator's ``pred_key`` item holds logits.
        pred_key: the item of the evaluator's output the metrics read. The bundles keep a
            copy of the logits as ``logits`` and pass ``from_logits=True``: a float32
            softmax rounds confidences near 1 (ties the auditors, which take the softmax
            in float64, do not have), which can move rho_KS by a sample's share.
        image_key: the item holding the evaluated images (``None``: no content check;
            the reference-model audit then cannot run).
        margin: the reference-model audit's margin ("forgotten" needs the remembered
            share's upper bound below it; ``None``: the one the audit was run with).

    Raises:
        FileNotFoundError: no reference file (run ``audit.json`` first).
        ValueError: the file was made for another provider or another D_Q size.
    """
    from monai_forget.handlers import (
        EMAPValue,
        KSCalibratedRatio,
        ReferenceModelAudit,
        batch_output,
    )
    from monai_forget.metrics import SampleCheck

    path = Path(reference_file)
    if not path.is_file():
        raise FileNotFoundError(
            f"audit reference {path} not found; run the bundle's audit.json for this provider "
            "first (it writes reference.json), or evaluate without the audit handlers"
        )
    reference = AuditReference.load(path)
    reference.check(provider, query_size, source=str(path))
    hashes = reference.query_hashes if image_key else None
    transform = batch_output(pred_key, image_key=image_key if hashes else None)
    # Over the audit set, K-S and EMA pick out D_Q; over D_Q alone they check it is whole.
    on_extra = "ignore" if reference.refmodel is not None else "error"
    metrics: dict[str, Any] = {}
    if reference.refmodel is not None and image_key:
        metrics["p_member"] = ReferenceModelAudit(
            reference.refmodel,
            from_logits,
            margin=margin,
            output_transform=batch_output(pred_key, image_key=image_key),
        )
    # Without images (image_key None) there is nothing to check the samples with.
    check = SampleCheck(hashes, on_extra=on_extra, copies=reference.query_copies)
    checked = {
        "output_transform": transform,
        "check": check if hashes else None,
        "from_logits": from_logits,
    }
    if reference.ks is not None:
        metrics["rho_KS"] = KSCalibratedRatio(reference.ks, **checked)
    if reference.ema is not None:
        metrics["rho_EMA"] = EMAPValue(reference.ema, **checked)
    return metrics
