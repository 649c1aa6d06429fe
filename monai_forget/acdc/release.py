"""Every patient of the SSL4MIS h5 release, as volumes and as expert-mask features.

For uses that need all 100 patients without a prepared datalist (the federated feature
task, benchmarks): ``<root>/data/patientNNN_frameFF[_slice_S].h5`` and
``<root>/groups.csv``, ``frame01`` = ED and ``frame02`` = ES (the release's numbering).
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from monai_forget.acdc.features import FEATURES, feature_matrix, patient_features
from monai_forget.acdc.volumes import group_volumes, patient_pairs, read_volume
from monai_forget.data import ACDC_GROUPS, LabelledImages, acdc_label

__all__ = ["expert_feature_rows", "feature_images", "release_volumes"]

_FILE = re.compile(r"^(patient\d{3})_frame(\d{2})(?:_slice_(\d+))?\.h5$")
_PHASE = {1: "ED", 2: "ES"}


def release_volumes(root: str | os.PathLike) -> list[dict[str, Any]]:
    """ED and ES volume entries of every patient (:func:`group_volumes` checks).

    Args:
        root: the release folder (holding ``data/`` and ``groups.csv``), or the
            real-data folder holding ``acdc_ssl4mis/``.

    Raises:
        FileNotFoundError: no ``data/`` folder or ``groups.csv``.
        ValueError: unexpected file names, unknown groups, incomplete volumes.
    """
    root = Path(root)
    if (root / "acdc_ssl4mis").is_dir():
        root = root / "acdc_ssl4mis"
    groups_file = root / "groups.csv"
    if not (root / "data").is_dir() or not groups_file.is_file():
        raise FileNotFoundError(f"{root} must hold data/ and groups.csv (the SSL4MIS release)")
    with groups_file.open(newline="") as handle:
        groups = {r["patient"]: r["group"] for r in csv.DictReader(handle)}
    entries = []
    for path in sorted((root / "data").glob("patient*.h5")):
        match = _FILE.match(path.name)
        if match is None:
            raise ValueError(f"{path}: expected patientNNN_frameFF[_slice_S].h5")
        patient, frame, index = match.group(1), int(match.group(2)), match.group(3)
        if patient not in groups:
            raise ValueError(f"{path}: {patient} has no row in {groups_file}")
        entry = {
            "image": str(path),
            "seg": str(path),
            "patient": patient,
            "phase": _PHASE.get(frame, f"frame{frame:02d}"),
            "label": acdc_label(groups[patient], str(groups_file)),
            "slice": None if index is None else int(index) - 1,
            "slice_axis": 0 if index is None else None,
        }
        entries.append(entry)
    return group_volumes(entries, name=str(root))


def expert_feature_rows(root: str | os.PathLike) -> list[dict[str, Any]]:
    """``{"patient", "label", <FEATURES>}`` of every patient's expert ED and ES masks."""
    rows = []
    for ed, es in patient_pairs(release_volumes(root)):
        features = patient_features(
            read_volume(ed).mask, read_volume(es).mask, patient=str(ed["patient"])
        )
        rows.append({"patient": ed["patient"], "label": ed["label"], **features})
    return rows


def feature_images(
    rows: Sequence[Mapping[str, Any]], names: Sequence[str] = FEATURES
) -> LabelledImages:
    """Feature rows as a :class:`~monai_forget.data.LabelledImages` of ``(N, 1, 1, F)``
    "images" with the patient as id, the shape the package's MLPs, auditors and
    federations take."""
    matrix = feature_matrix(rows, names).astype(np.float32)
    labels = np.array([int(r["label"]) for r in rows])
    ids = tuple(str(r["patient"]) for r in rows)
    return LabelledImages(matrix[:, None, None, :], labels, ids, len(ACDC_GROUPS))
