"""Library defaults the command line shows, defined once.

Only plain Python values live here, and this module imports nothing heavy, so
``monai-forget --help`` can show the defaults without importing torch, MONAI or pydicom;
the library modules import their defaults from here too, so the two never drift.
"""

from __future__ import annotations

from types import MappingProxyType

#: Shadow/reference-model training and inference shared by the auditors.
SEED = 0
DEVICE = "cpu"
BATCH_SIZE = 256

#: EMA (Huang, Li & Li 2021): the paper's three membership metrics OR-ed in Step 1 and
#: its options.
EMA_METRICS: tuple[str, ...] = ("correctness", "confidence", "entropy")
EMA_ALPHA = 0.1
EMA_THRESHOLD_BY = "label"
EMA_TEST = "welch"
EMA_CALIBRATION_OUTPUTS = "shadow"

#: Unique-feature memorisation (Hartley & Tsaftaris 2022): one-tailed tests of M.
MEMORISATION_TESTS: tuple[str, ...] = ("student", "welch", "paired", "wilcoxon")
MEMORISATION_PAPER_TEST = "student"
LEAK_SCAN_CORRECTIONS: tuple[str, ...] = ("bh", "bonferroni", "none")
LEAK_SCAN_ALPHA = 0.05
#: Where a leak scan's decoys come from: random letters of the name's kind, or real names
#: (Faker's per-locale lists) of the same lengths and case.
LEAK_SCAN_DECOY_SOURCES: tuple[str, ...] = ("names", "letters")
#: What a leak scan ranks each text by among its decoys, the default first: Eq. 1's M
#: (the paper's) or the class shift (:mod:`monai_forget.memorisation.statistics`).
LEAK_SCAN_STATISTICS: tuple[str, ...] = ("m", "class-shift")
#: What a leak scan through the model's preprocessing ranks names by unless told: the class
#: shift, whose control scans through the pipeline flagged a name in 2/100 (Wilson upper
#: 7 %) where M's did in 4/48 (upper 20 %), and which flagged the leaked name 4/100 to M's
#: 1/48 (benchmarks/results/leak_scan_pipeline_class_shift.md). Scans on the model grid
#: keep M, measured on more data sets and networks.
PIPELINE_STATISTIC = "class-shift"
#: What a canary exposure audit ranks canaries by: the class shift, which flagged a canary
#: planted in 100 images in 16/20 trainings where M flagged 4/20, with never-planted
#: controls flagged 2/60 and 1/60 (benchmarks/results/canary_exposure_alone.md).
EXPOSURE_STATISTIC = "class-shift"
#: Level of the one-tailed test of one feature's memorisation (Hartley & Tsaftaris 2022).
MEMORISATION_ALPHA = 0.05
#: Random controls z_r: the paper's block-overwrite patch, equal-ink masks, random letters.
MEMORISATION_RANDOM_FEATURES: tuple[str, ...] = ("patch", "ink", "text")
#: Decoys of the calibrated test of one feature (smallest p 1/200); a scan draws enough
#: for its roster (``memorisation.leak_scan.default_decoys``).
MEMORISATION_SCORE_DECOYS = 199

#: Forsaken's dummy-gradient generator (Liu et al. 2020, Eq. 4): iterations E, the
#: weight of the change-from-original regulariser λ_r and of the step-length term λ_s.
FORSAKEN_GENERATOR = MappingProxyType({"iterations": 20, "drift_weight": 0.03, "step_weight": 0.0})
#: Models retrained without a withdrawn provider that a federated withdrawal's final
#: model is compared with (``monai_forget.unlearning.retrain_reference``).
RETRAINED_MODELS = 5
#: Level of the comparison of a withdrawn model with the retrained ones (and of each
#: one-sided test of the equivalence test against them).
RETRAINED_ALPHA = 0.05

#: Level of the method-level equivalence test's check on never-seen data: with 10 runs
#: against 20 retrainings, exact retraining's "not equivalent" from the interval is at
#: most 3.5 % in every MNIST-30 seed, so the check may add 1 % and keep it within 5 %.
ELSEWHERE_ALPHA = 0.01

#: ACDC datalists (``monai-forget prepare acdc-nifti|acdc-h5``): an entry per short-axis
#: slice or per volume, and the NIfTI release's frames (ED and ES, or all of the 4D file).
ACDC_LEVELS: tuple[str, ...] = ("slice", "volume")
ACDC_NIFTI_FRAMES: tuple[str, ...] = ("ed-es", "all")

#: The reference-model auditor: reference models, the level of its set-level test (and the
#: error level of the upper bound on D_Q's membership strength relative to the known
#: members), and the margin: "forgotten" means that bound is below it. 0.5 is the
#: smallest of 0.1 / 0.25 / 0.5 at which a forgotten D_Q of 200 was certified in most
#: audits on the development seeds of benchmarks/audit_calibration.py (MNIST and
#: PneumoniaMNIST); every report prints the bound itself, so a stricter policy can be
#: read off it or set with --margin.
REFMODEL_REFERENCES = 8
REFMODEL_ALPHA = 0.05
REFMODEL_MARGIN = 0.5

#: A federated withdrawal as ``fl simulate`` and ``fl.FederatedWithdrawal`` run it: the
#: providers' data sets, and the defaults of the federation, its training and the withdrawal.
FL_DATASETS: tuple[str, ...] = ("acdc", "acdc-features", "pneumoniamnist", "mnist")
FL_DATA = "acdc"
FL_CLIENTS = 3
#: Patients of each class per provider (ACDC slices; ACDC clinical features).
FL_PATIENTS_PER_CLASS = MappingProxyType({"acdc": 1, "acdc-features": 3})
FL_SLICE_SIZE = 32
FL_PER_CLIENT = 200
FL_ROUNDS = 9
FL_LOCAL_STEPS = 50
FL_HIDDEN: tuple[int, ...] = (128,)
FL_WITHDRAWING = "site-1"
FL_WITHDRAW_ROUND = 7
