"""Withdrawal audits: has a trained model forgotten a withdrawn provider's data?"""

from monai_forget.audit.ema import (
    EMAAuditor,
    EMAThresholds,
    ema_membership,
    ema_pvalue,
    fit_ema_thresholds,
)
from monai_forget.audit.ks import KSAuditor, KSRatio, ks_calibrated_ratio
from monai_forget.audit.report import render_report, write_report
from monai_forget.audit.result import FORGOTTEN, NOT_FORGOTTEN, AuditResult

__all__ = [
    "FORGOTTEN",
    "NOT_FORGOTTEN",
    "AuditResult",
    "EMAAuditor",
    "EMAThresholds",
    "KSAuditor",
    "KSRatio",
    "ema_membership",
    "ema_pvalue",
    "fit_ema_thresholds",
    "ks_calibrated_ratio",
    "render_report",
    "write_report",
]
