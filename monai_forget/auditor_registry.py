"""The withdrawal auditors by name: the one table that ``monai-forget audit``,
``fl simulate --auditors``, the federated run, the bundles' withdrawal audit and the
reports read (issue 67).

Each auditor has one name, spelled the same on the command line, in Python, in a result's
``method`` and in a saved ``reference.json``: ``refmodel``, ``ks``, ``ema``. The name
``reference`` (the audit command's name before this table) is refused with the name to
use for one release, then removed.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["AUDITORS", "NAMES", "RENAMED", "AuditorKind", "auditor_kind", "kind_of"]


@dataclass(frozen=True)
class AuditorKind:
    """One withdrawal auditor.

    Attributes:
        name: its one spelling (command, ``--auditors``, ``AuditResult.method``, the
            key of its reference in ``reference.json``).
        title: how reports and tables name it.
        auditor_path: ``module:Class`` of the auditor (imported when asked for: the table
            is read by ``--help``, which must stay fast).
        reference_path: ``module:Class`` of what the auditor learns.
        calibration: what it is calibrated on: ``"known"`` members and non-members of the
            target (a ``(members, non-members)`` pair) or a ``"whole"`` set D_C that it
            splits itself.
        summary: one line for ``--help``.
    """

    name: str
    title: str
    auditor_path: str
    reference_path: str
    calibration: Literal["known", "whole"]
    summary: str

    @property
    def auditor(self) -> type:
        """The auditor class."""
        return _imported(self.auditor_path)

    @property
    def reference(self) -> type:
        """The class of what it learns (its part of ``reference.json``)."""
        return _imported(self.reference_path)


def _imported(path: str) -> type:
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


#: Every auditor, the one that decides first when several ran first (the calibrated one).
AUDITORS: tuple[AuditorKind, ...] = (
    AuditorKind(
        "refmodel",
        "reference models",
        "monai_forget.audit.refmodel_auditor:ReferenceModelAuditor",
        "monai_forget.audit.refmodel_reference:RefModelReference",
        "known",
        "reference models: a bound on D_Q's membership strength relative to the known "
        "members and a three-way decision (the recommended audit)",
    ),
    AuditorKind(
        "ema",
        "EMA (Huang et al. 2021)",
        "monai_forget.audit.auditors:EMAAuditor",
        "monai_forget.audit.ema:EMAReference",
        "whole",
        "Ensembled Membership Auditing (Huang et al. 2021)",
    ),
    AuditorKind(
        "ks",
        "K-S (Liu & Tsaftaris 2020)",
        "monai_forget.audit.auditors:KSAuditor",
        "monai_forget.audit.ks:KSReference",
        "whole",
        "K-S calibrated ratio (Liu & Tsaftaris 2020)",
    ),
)
NAMES: tuple[str, ...] = tuple(kind.name for kind in AUDITORS)
#: Names no longer accepted, and the one to use instead.
RENAMED: dict[str, str] = {"reference": "refmodel"}


def auditor_kind(name: str) -> AuditorKind:
    """The auditor called ``name``.

    Raises:
        ValueError: a renamed auditor (naming the name to use) or an unknown one.
    """
    for kind in AUDITORS:
        if kind.name == name:
            return kind
    if name in RENAMED:
        raise ValueError(
            f"the auditor {name!r} is now called {RENAMED[name]!r} (one name in every "
            f"command, in Python and in results): use {RENAMED[name]!r}"
        )
    raise ValueError(f"unknown auditor {name!r}: choose from {', '.join(NAMES)}")


def kind_of(auditor: Any) -> AuditorKind:
    """The registry entry of an auditor object.

    Raises:
        TypeError: an object that is none of the registered auditors.
    """
    for kind in AUDITORS:
        if isinstance(auditor, kind.auditor):
            return kind
    raise TypeError(
        f"{type(auditor).__name__} is not a withdrawal auditor: use one of "
        + ", ".join(kind.auditor.__name__ for kind in AUDITORS)
    )
