"""Withdrawal audits of segmentation models: per-image membership scores from per-pixel
outputs, and the adapter that hands them to the auditors.

- :mod:`~monai_forget.segmentation.scores`: :func:`segmentation_scores` (a batch of
  per-pixel outputs and label maps -> per-image scores) and :class:`SegmentationScores`
  (one model's scores on one image set; :meth:`~SegmentationScores.to_predictions` is
  the auditors' input);
- :mod:`~monai_forget.segmentation.predict`: :class:`LabelledSlices` (2D images of any
  size with their label maps) and :func:`score_model` (a model's scores on them,
  cached).
"""

from monai_forget.segmentation.predict import LabelledSlices, score_model
from monai_forget.segmentation.scores import SCORE_NAMES, SegmentationScores, segmentation_scores

__all__ = [
    "SCORE_NAMES",
    "LabelledSlices",
    "SegmentationScores",
    "score_model",
    "segmentation_scores",
]
