"""Ignite handlers: every auditor at evaluation time, the compliance gate, and the
writers of an evaluation's outputs (MONAI's naming: the ``X`` handler over the
``XMetric`` of :mod:`monai_forget.metrics`)."""

from monai_forget.handlers.compliance import ComplianceError, ComplianceGate
from monai_forget.handlers.evaluation_audits import (
    EMAPValue,
    KSCalibratedRatio,
    ReferenceModelAudit,
    batch_output,
)
from monai_forget.handlers.memorisation import (
    CheckpointRecorder,
    EpochScore,
    MemorisationTracker,
    UniqueFeatureMemorisation,
)
from monai_forget.handlers.writers import MetricsWriter, PredictionWriter

__all__ = [
    "CheckpointRecorder",
    "ComplianceError",
    "ComplianceGate",
    "EMAPValue",
    "EpochScore",
    "KSCalibratedRatio",
    "MemorisationTracker",
    "MetricsWriter",
    "PredictionWriter",
    "ReferenceModelAudit",
    "UniqueFeatureMemorisation",
    "batch_output",
]
