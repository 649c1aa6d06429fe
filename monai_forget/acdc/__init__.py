"""ACDC as a cardiologist's pipeline sees it: a patient's ED and ES volumes, the
clinical features of their segmentation and the diagnosis from those features.

- :mod:`~monai_forget.acdc.volumes`: slice entries -> (patient, phase) volumes, read with
  the checks a volume pipeline needs (:func:`group_volumes`, :func:`read_volume`);
- :mod:`~monai_forget.acdc.transforms`: :class:`LoadACDCVolumed` for MONAI pipelines;
- :mod:`~monai_forget.acdc.screening`: :class:`VolumeScreen` refuses, by name, scans that
  cannot be segmented (unreadable, truncated, non-finite, constant);
- :mod:`~monai_forget.acdc.features`: spacing-free clinical features (Isensee et al.
  2017) and, with a voxel size, absolute ones;
- :mod:`~monai_forget.acdc.diagnosis`: the five-group classifier over those features.
"""

from monai_forget.acdc.diagnosis import DiagnosisClassifier
from monai_forget.acdc.features import (
    ABSOLUTE_FEATURES,
    FEATURES,
    absolute_features,
    feature_matrix,
    patient_features,
)
from monai_forget.acdc.screening import VolumeScreen, image_problem
from monai_forget.acdc.transforms import LoadACDCVolumed, SaveACDCMaskd, check_new_masks
from monai_forget.acdc.volumes import (
    MASK_LABELS,
    PHASES,
    STRUCTURES,
    Volume,
    check_mask_labels,
    group_volumes,
    patient_pairs,
    read_volume,
)

__all__ = [
    "ABSOLUTE_FEATURES",
    "FEATURES",
    "MASK_LABELS",
    "PHASES",
    "STRUCTURES",
    "DiagnosisClassifier",
    "LoadACDCVolumed",
    "SaveACDCMaskd",
    "Volume",
    "VolumeScreen",
    "absolute_features",
    "check_mask_labels",
    "check_new_masks",
    "feature_matrix",
    "group_volumes",
    "image_problem",
    "patient_features",
    "patient_pairs",
    "read_volume",
]
