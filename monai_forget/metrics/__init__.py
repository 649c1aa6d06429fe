"""MONAI metrics for the withdrawal auditors, each with a functional twin."""

from monai_forget.metrics.ema import EMAMetric, compute_ema_pvalue
from monai_forget.metrics.ks import KSCalibratedRatioMetric, compute_ks_calibrated_ratio

__all__ = [
    "EMAMetric",
    "KSCalibratedRatioMetric",
    "compute_ema_pvalue",
    "compute_ks_calibrated_ratio",
]
