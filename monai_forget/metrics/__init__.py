"""MONAI metrics for every auditor, each with a functional twin (MONAI's naming: the
``XMetric`` class, the ``compute_x`` function, the ``X`` handler in
:mod:`monai_forget.handlers`)."""

from monai_forget.metrics.ema import EMAPValueMetric, compute_ema_pvalue
from monai_forget.metrics.ks import KSCalibratedRatioMetric, compute_ks_calibrated_ratio
from monai_forget.metrics.memorisation import (
    UniqueFeatureMemorisationMetric,
    compute_unique_feature_memorisation,
)
from monai_forget.metrics.query_check import SampleCheck
from monai_forget.metrics.refmodel import (
    ReferenceModelAuditMetric,
    compute_reference_model_audit,
)

__all__ = [
    "EMAPValueMetric",
    "KSCalibratedRatioMetric",
    "ReferenceModelAuditMetric",
    "SampleCheck",
    "UniqueFeatureMemorisationMetric",
    "compute_ema_pvalue",
    "compute_ks_calibrated_ratio",
    "compute_reference_model_audit",
    "compute_unique_feature_memorisation",
]
