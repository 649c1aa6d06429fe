"""The name-decoy leak-scan benchmark's models: the control models and the series a name is
planted in (MLP-1 on MNIST), shared by ``leak_scan_name_decoys.py`` and
``leak_scan_patient_references.py``."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _ufm_engine as ufm

from monai_forget.memorisation import UniqueFeature, inject_feature

#: The data set and network of the control models (and of the series models by default).
DEFAULT_CELL = "mnist:mlp-1"


def control_model(rep: int, cell: str = DEFAULT_CELL):
    """``cell``'s control model ``rep``: its network trained without any name (the first
    cell's are the control models of ``unique_feature_memorisation.py``)."""
    if cell == DEFAULT_CELL:
        return ufm.scan_model("control", rep)[0]
    data, arch = cell.split(":")
    split = ufm.STATE["splits"][data]
    key = f"namedecoys/{data}/{arch}/control/{rep}"
    return ufm.trained(key, arch, split, split.train, ufm.STATE["seed"] + 200 + rep)[0]


def series_data(series: int, rep: int, cell: str = DEFAULT_CELL):
    """``cell``'s training images with a 4-letter roster name burned into ``series`` images
    of one class: ``(training images, name, indices of the named images)``."""
    split = ufm.STATE["splits"][cell.split(":")[0]]
    rng = np.random.default_rng([ufm.STATE["seed"], 600, series, rep])
    name = str(rng.choice([n for n in ufm.ROSTER if len(n) == 4]))
    label = int(rng.integers(split.num_classes))
    images = rng.choice(np.flatnonzero(split.train.labels == label), series, replace=False)
    train, feature = split.train, UniqueFeature.from_text(name, (1, 1), 1, 1.0)
    for index in images:
        train = inject_feature(train, int(index), feature)
    return train, name, images


def series_model(series: int, rep: int, cell: str = DEFAULT_CELL):
    """``cell``'s network (``data:arch``, e.g. ``mnist:mlp-1``) trained with a 4-letter
    roster name on ``series`` images of one class (:func:`series_data`)."""
    seed = ufm.STATE["seed"]
    data, arch = cell.split(":")
    split = ufm.STATE["splits"][data]
    train, name, _ = series_data(series, rep, cell)
    # the first cell keeps the keys its models were cached under
    where = "" if cell == DEFAULT_CELL else f"{data}/{arch}/"
    key = f"namedecoys/{where}series{series}/{rep}"
    model, _ = ufm.trained(key, arch, split, train, seed + 400 + rep)
    return model, name
