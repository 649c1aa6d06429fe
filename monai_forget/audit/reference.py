"""What a withdrawal audit of one provider learned, kept for evaluation time.

An audit trains its shadow/reference models once; what the evaluation-time metrics
need from them (the K-S shadows' confidences on D_Q, the EMA thresholds) is an
:class:`AuditReference`, written as ``reference.json`` by the bundles and read back to
build the handlers, so each auditor's reference and decision rule exist once (in
:mod:`~monai_forget.audit.ks` and :mod:`~monai_forget.audit.ema`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from monai_forget.audit.duplicates import collapse_duplicates
from monai_forget.audit.ema import EMAReference
from monai_forget.audit.ks import KSReference
from monai_forget.audit.refmodel_reference import RefModelReference
from monai_forget.audit.result import AuditResult
from monai_forget.auditor_registry import NAMES, auditor_kind
from monai_forget.data import LabelledImages
from monai_forget.fingerprint import data_fingerprint
from monai_forget.results import Result, jsonable

__all__ = ["REFERENCE_VERSION", "AuditReference"]

#: Format version of ``reference.json``.
REFERENCE_VERSION = 1
#: The auditors a reference can hold, by name (its fields are named alike).
METHODS = NAMES


@dataclass(frozen=True)
class AuditReference(Result):
    """The references of every auditor run on one provider's data D_Q.

    Attributes:
        provider: the provider whose data D_Q is.
        query_size: the number of samples of D_Q.
        query_fingerprint: content fingerprint of D_Q (``None`` if not recorded).
        num_classes: classes of the task.
        ks: the K-S reference, if that auditor ran.
        ema: the EMA reference, if that auditor ran.
        refmodel: the reference-model auditor's, if it ran.
        audited: the statistic each auditor found when the reference was made.
        query_hashes: content hashes of D_Q, for the handlers' order-free check that the
            evaluated samples are D_Q (``None``: not recorded).
        query_copies: the hashes of D_Q's images every auditor collapsed as copies of
            others (:func:`~monai_forget.audit.duplicates.collapse_duplicates`), which the
            handlers leave out of their statistics as the audit did.
    """

    provider: str
    query_size: int
    query_fingerprint: str | None = None
    num_classes: int | None = None
    ks: KSReference | None = None
    ema: EMAReference | None = None
    audited: Mapping[str, float] = field(default_factory=dict)
    refmodel: RefModelReference | None = None
    query_hashes: tuple[str, ...] | None = None
    query_copies: tuple[str, ...] = ()

    @classmethod
    def from_audit(
        cls,
        provider: str,
        query: LabelledImages,
        ks: KSReference | None = None,
        ema: EMAReference | None = None,
        results: Mapping[str, AuditResult] | None = None,
        refmodel: RefModelReference | None = None,
    ) -> AuditReference:
        """The reference of an audit of ``query`` (``results`` by method, for the record)."""
        if ks is None and ema is None and refmodel is None:
            raise ValueError("an audit reference needs at least one auditor's reference")
        audited = {m: r.statistic for m, r in (results or {}).items()}
        return cls(
            str(provider), len(query), data_fingerprint(query), query.num_classes, ks, ema,
            audited, refmodel, tuple(query.sample_hashes), collapse_duplicates(query).copies,
        )  # fmt: skip

    def check(
        self, provider: str | None = None, query_size: int | None = None, source: str = ""
    ) -> None:
        """Refuse an evaluation over another provider or another D_Q size."""
        where = source or "this audit reference"
        if provider is not None and str(provider) != self.provider:
            raise ValueError(
                f"{where} was computed for provider {self.provider!r}, but this evaluation is "
                f"over provider {provider!r}; run the audit for {provider!r}"
            )
        if query_size is not None and int(query_size) != self.query_size:
            raise ValueError(
                f"{where} was computed on {self.query_size} query samples, but this "
                f"evaluation covers {query_size}; evaluate the same selection of provider "
                f"{self.provider!r} that the audit audited"
            )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": REFERENCE_VERSION,
            "provider": self.provider,
            "query_size": self.query_size,
            "query_fingerprint": self.query_fingerprint,
            "num_classes": self.num_classes,
        }
        if self.query_hashes is not None:
            out["query_hashes"] = list(self.query_hashes)
        if self.query_copies:
            out["query_copies"] = list(self.query_copies)
        for method in METHODS:
            reference = getattr(self, method)
            if reference is not None:
                out[method] = reference.to_dict()
                if method in self.audited:
                    out[method]["audit_rho"] = self.audited[method]
        return jsonable(out)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "") -> AuditReference:
        where = source or "audit reference"
        if data.get("version") != REFERENCE_VERSION:
            raise ValueError(f"{where}: unsupported reference version {data.get('version')!r}")
        if not any(m in data for m in METHODS):
            raise ValueError(f"{where} holds no auditor's reference (K-S, EMA, reference models)")
        audited = {
            m: float(data[m]["audit_rho"]) for m in METHODS if "audit_rho" in data.get(m, {})
        }
        return cls(
            provider=str(data["provider"]),
            query_size=int(data["query_size"]),
            query_fingerprint=data.get("query_fingerprint"),
            num_classes=data.get("num_classes"),
            audited=audited,
            **{m: auditor_kind(m).reference.from_dict(data[m]) for m in METHODS if m in data},
            query_hashes=tuple(data["query_hashes"]) if "query_hashes" in data else None,
            query_copies=tuple(data.get("query_copies", ())),
        )

    @classmethod
    def load(cls, path: str | os.PathLike) -> AuditReference:
        path = Path(path)
        return cls.from_dict(json.loads(path.read_text()), source=str(path))

    def summary(self) -> str:
        methods = [m for m in METHODS if getattr(self, m) is not None]
        return (
            f"audit reference of provider {self.provider!r}: {self.query_size} query samples, "
            f"{' and '.join(methods)}"
        )
