"""Unique-feature memorisation (Hartley & Tsaftaris, "Unintended memorisation of unique
features in neural networks", 2022).

- :func:`memorisation_score` / :func:`compute_m_score`: the black-box score M (Sec. 2.3,
  Eq. 1) with one-tailed tests (:data:`TESTS`; the paper's is :data:`PAPER_TEST`).
- :func:`white_box_score`: M_w (Sec. 2.2) for auditors with data and the label.
- :class:`FeatureProbe`: the model on clean, z_u- and z_r-carrying probes in one pass,
  for MONAI evaluators (the metric and handlers are
  :class:`monai_forget.metrics.UniqueFeatureMemorisationMetric`,
  :class:`monai_forget.handlers.UniqueFeatureMemorisation` and
  :class:`monai_forget.handlers.MemorisationTracker`, M at each epoch, Fig. 3c).
- :func:`self_influence`: TracInCP self-influence (App. A.5), from the checkpoints
  :class:`monai_forget.handlers.CheckpointRecorder` keeps.
- :func:`decoy_test`, :func:`draw_decoys`: the calibrated test of M, the feature ranked
  among decoys of its kind (exposure, Carlini et al. 2019).
- :func:`reference_test`: M of the audited model against M of reference models trained
  without the feature (``memorisation_score(..., references=...)``).
- :func:`leak_scan`, :func:`read_roster`, :func:`write_scan_report`: is there evidence
  that a model memorised any name of a roster (calibrated on decoys)?
- :func:`split_patients`, :func:`read_patient_ids`: reference models a hospital can
  build for a scan, on halves of its patients (``leak_scan(..., reference_patients=...)``).
- :class:`EarlyStoppingTraining`: the paper's training with early stopping (App. A.2).
"""

from monai_forget.memorisation.decoys import (
    DecoyTest,
    decoy_template,
    decoy_test,
    draw_decoys,
)
from monai_forget.memorisation.exposure import CanaryExposure, ExposureAudit, canary_exposure
from monai_forget.memorisation.exposure_report import write_exposure_report
from monai_forget.memorisation.feature import (
    RandomFeature,
    UniqueFeature,
    inject_feature,
    stamp_each,
    warn_if_in_distribution,
)
from monai_forget.memorisation.leak_scan import (
    CORRECTIONS,
    DecoyNull,
    LeakScanConfig,
    LeakScanResult,
    NameResult,
    default_decoys,
    leak_scan,
)
from monai_forget.memorisation.patient_references import read_patient_ids, split_patients
from monai_forget.memorisation.probe import FeatureProbe
from monai_forget.memorisation.reference_test import ReferenceTest, reference_test
from monai_forget.memorisation.report import write_scan_report
from monai_forget.memorisation.roster import Roster, read_roster
from monai_forget.memorisation.score import (
    MemorisationScore,
    compute_m_score,
    m_score_from_divergences,
    memorisation_score,
    probe_outputs,
)
from monai_forget.memorisation.settings import ProbeSettings
from monai_forget.memorisation.significance import (
    PAPER_TEST,
    TESTS,
    OneTailedResult,
    one_tailed_test,
    paired_ttest,
)
from monai_forget.memorisation.tracin import (
    Checkpoint,
    select_checkpoints,
    self_influence,
)
from monai_forget.memorisation.training import EarlyStoppingTraining, TrainingLog
from monai_forget.memorisation.white_box import (
    WhiteBoxScore,
    compute_white_box_score,
    white_box_score,
)

__all__ = [
    "CORRECTIONS",
    "PAPER_TEST",
    "TESTS",
    "CanaryExposure",
    "Checkpoint",
    "DecoyNull",
    "DecoyTest",
    "EarlyStoppingTraining",
    "ExposureAudit",
    "FeatureProbe",
    "LeakScanConfig",
    "LeakScanResult",
    "MemorisationScore",
    "NameResult",
    "OneTailedResult",
    "ProbeSettings",
    "RandomFeature",
    "ReferenceTest",
    "Roster",
    "TrainingLog",
    "UniqueFeature",
    "WhiteBoxScore",
    "canary_exposure",
    "compute_m_score",
    "compute_white_box_score",
    "decoy_template",
    "decoy_test",
    "default_decoys",
    "draw_decoys",
    "inject_feature",
    "leak_scan",
    "m_score_from_divergences",
    "memorisation_score",
    "one_tailed_test",
    "paired_ttest",
    "probe_outputs",
    "read_patient_ids",
    "read_roster",
    "reference_test",
    "select_checkpoints",
    "self_influence",
    "split_patients",
    "stamp_each",
    "warn_if_in_distribution",
    "white_box_score",
    "write_exposure_report",
    "write_scan_report",
]
