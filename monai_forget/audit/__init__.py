"""Withdrawal audits: has a trained model forgotten a withdrawn provider's data?"""

from monai_forget.audit.auditors import (
    Calibration,
    EMAAuditor,
    KSAuditor,
    Reference,
    ShadowAuditor,
    WithdrawalAuditor,
)
from monai_forget.audit.ema import (
    EMAReference,
    EMAThresholds,
    ema_decision,
    ema_membership,
    ema_pvalue,
    fit_ema_thresholds,
)
from monai_forget.audit.ks import KSRatio, KSReference, ks_calibrated_ratio, ks_decision
from monai_forget.audit.reference import REFERENCE_VERSION, AuditReference
from monai_forget.audit.refmodel import refmodel_decision
from monai_forget.audit.refmodel_auditor import ReferenceModelAuditor
from monai_forget.audit.refmodel_reference import RefModelReference, RoleOutputs
from monai_forget.audit.report import render_report, write_report
from monai_forget.audit.result import FORGOTTEN, INCONCLUSIVE, NOT_FORGOTTEN, AuditResult

__all__ = [
    "FORGOTTEN",
    "INCONCLUSIVE",
    "NOT_FORGOTTEN",
    "REFERENCE_VERSION",
    "AuditReference",
    "AuditResult",
    "Calibration",
    "EMAAuditor",
    "EMAReference",
    "EMAThresholds",
    "KSAuditor",
    "KSRatio",
    "KSReference",
    "RefModelReference",
    "Reference",
    "ReferenceModelAuditor",
    "RoleOutputs",
    "ShadowAuditor",
    "WithdrawalAuditor",
    "ema_decision",
    "ema_membership",
    "ema_pvalue",
    "fit_ema_thresholds",
    "ks_calibrated_ratio",
    "ks_decision",
    "refmodel_decision",
    "render_report",
    "write_report",
]
