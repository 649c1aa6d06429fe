"""What the MONAI bundles in ``bundles/`` call from their JSON configs.

A bundle config can only name importable callables, so the pieces a withdrawal audit
needs beyond MONAI live here, one module per job:

- :mod:`~monai_forget.bundles.datalist`: :func:`select` (providers, seeded subsets,
  missing-file check) and :func:`labelled_images` (entries through the bundle's
  deterministic preprocessing, as auditor input);
- :mod:`~monai_forget.bundles.weights`: :func:`load_weights` / :func:`save_weights`,
  safe (``weights_only``) and atomic, non-clobbering model files, and
  :func:`check_outputs`;
- :mod:`~monai_forget.bundles.withdrawal`: :class:`WithdrawalAudit` (one provider's
  audit: results, report, ``reference.json``, ``audit_set.json``), :func:`audit_entries`
  (the entries an evaluation-time audit evaluates) and :func:`audit_metrics` (the
  evaluation-time handlers from that file);
- :mod:`~monai_forget.bundles.summary`: :func:`save_training_summary`;
- :mod:`~monai_forget.bundles.xray`: :class:`DisplayDicomReader` (DICOM radiographs as
  displayed, 0..255) and :class:`CheckIntensityRanged` (refuses out-of-range images).

The evaluation writers (:class:`MetricsWriter`, :class:`PredictionWriter`) live with the
other ignite handlers in :mod:`monai_forget.handlers`; :func:`without_overlap` with the
other overlap checks in :mod:`monai_forget.data`. Both are re-exported here for the
configs.
"""

from monai_forget.audit.reference import REFERENCE_VERSION
from monai_forget.bundles.datalist import labelled_images, select
from monai_forget.bundles.summary import save_training_summary
from monai_forget.bundles.weights import check_outputs, load_weights, save_weights
from monai_forget.bundles.withdrawal import WithdrawalAudit, audit_entries, audit_metrics
from monai_forget.bundles.xray import CheckIntensityRanged, DisplayDicomReader
from monai_forget.data import without_overlap
from monai_forget.handlers.writers import MetricsWriter, PredictionWriter

__all__ = [
    "REFERENCE_VERSION",
    "CheckIntensityRanged",
    "DisplayDicomReader",
    "MetricsWriter",
    "PredictionWriter",
    "WithdrawalAudit",
    "audit_entries",
    "audit_metrics",
    "check_outputs",
    "labelled_images",
    "load_weights",
    "save_training_summary",
    "save_weights",
    "select",
    "without_overlap",
]
