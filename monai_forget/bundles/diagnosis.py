"""Patient-level ACDC diagnosis as bundle components (the pathology bundle's
``diagnosis_train.json`` and ``diagnosis.json``).

A patient's ED and ES masks -> clinical features (:mod:`monai_forget.acdc.features`)
-> the five-group classifier (:class:`~monai_forget.acdc.DiagnosisClassifier`). The
masks are the expert ones of the datalist, or those the segmentation bundle's
``inference.json`` wrote (``<mask_dir>/<patient>_<phase>_seg.nii.gz``). Absolute
volumes (ml) are added when the source images carry a voxel size (the NIfTI release);
the classifier uses the spacing-free features either way.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from monai_forget.acdc import (
    FEATURES,
    DiagnosisClassifier,
    absolute_features,
    check_mask_labels,
    patient_features,
    patient_pairs,
    read_volume,
)
from monai_forget.bundles.weights import check_outputs
from monai_forget.io import atomic_write
from monai_forget.results import write_json

__all__ = ["DiagnosisTraining", "PatientDiagnosis", "patient_feature_rows"]


def _predicted_mask(
    mask_dir: Path, volume: Mapping[str, Any], shape: tuple[int, ...]
) -> np.ndarray:
    import nibabel as nib

    path = mask_dir / f"{volume['patient']}_{volume['phase']}_seg.nii.gz"
    where = f"{volume['patient']} {volume['phase']}, {path}"
    if not path.is_file():
        raise FileNotFoundError(
            f"{where}: predicted mask not found; run the segmentation bundle's inference.json "
            "for this patient (it writes <patient>_<phase>_seg.nii.gz)"
        )
    mask = np.asarray(nib.load(path).dataobj)
    if mask.shape != shape:
        raise ValueError(f"{where}: mask shape {mask.shape} differs from the image's {shape}")
    check_mask_labels(mask, where)
    return mask.astype(np.uint8)


def patient_feature_rows(
    volumes: Sequence[Mapping[str, Any]], mask_dir: str | os.PathLike | None = None
) -> list[dict[str, Any]]:
    """One row per patient: ``patient``, ``label`` (if known), the spacing-free features
    and, with a voxel size, the absolute ones.

    Args:
        volumes: volume entries (:func:`monai_forget.acdc.group_volumes`, ED and ES).
        mask_dir: the segmentation bundle's inference output; ``None``: expert masks.

    Raises:
        FileNotFoundError: a missing image or predicted mask (named with the patient).
        ValueError: see :func:`~monai_forget.acdc.read_volume` and
            :func:`~monai_forget.acdc.patient_features`.
    """
    rows = []
    for ed_entry, es_entry in patient_pairs(volumes):
        masks, spacing = [], None
        for entry in (ed_entry, es_entry):
            volume = read_volume(entry, with_mask=mask_dir is None)
            spacing = volume.spacing
            if mask_dir is None:
                masks.append(volume.mask)
            else:
                masks.append(_predicted_mask(Path(mask_dir), entry, volume.image.shape))
        patient = str(ed_entry["patient"])
        row: dict[str, Any] = {"patient": patient}
        if "label" in ed_entry:
            row["label"] = int(ed_entry["label"])
        row.update(patient_features(masks[0], masks[1], patient))
        if spacing is not None:
            row.update(absolute_features(masks[0], masks[1], spacing, patient))
        rows.append(row)
    return rows


def _csv(rows: Sequence[Mapping[str, Any]]) -> str:
    columns = list(dict.fromkeys(k for row in rows for k in row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns)
    writer.writeheader()
    for row in rows:
        writer.writerow({k: f"{v:.6g}" if isinstance(v, float) else v for k, v in row.items()})
    return buffer.getvalue()


class DiagnosisTraining:
    """Fit the diagnosis classifier on the expert-mask features of some patients.

    Writes the classifier (JSON) and ``<classifier>_features.csv``; prints and records
    the repeated 5-fold cross-validated accuracy on the same patients.

    Args:
        volumes: the training patients' ED and ES volume entries.
        classifier_file: where the classifier goes.
        c: inverse regularisation strength.
        seed: seed of the cross-validation folds.
        overwrite: replace existing outputs.
    """

    def __init__(
        self,
        volumes: Sequence[Mapping[str, Any]],
        classifier_file: str | os.PathLike,
        c: float = 1.0,
        seed: int = 0,
        overwrite: bool = False,
    ) -> None:
        self.volumes, self.path = list(volumes), Path(classifier_file)
        self.c, self.seed, self.overwrite = float(c), int(seed), bool(overwrite)

    def run(self) -> DiagnosisClassifier:
        from sklearn.model_selection import RepeatedStratifiedKFold

        table = self.path.with_name(self.path.stem + "_features.csv")
        check_outputs(self.path, table, overwrite=self.overwrite)
        rows = patient_feature_rows(self.volumes)
        labels = np.array([r["label"] for r in rows])
        folds = RepeatedStratifiedKFold(n_splits=5, n_repeats=10, random_state=self.seed)
        hits = []
        for train, test in folds.split(np.zeros(len(labels)), labels):
            fold = DiagnosisClassifier(c=self.c).fit([rows[i] for i in train], labels[train])
            hits.append(np.mean(fold.predict([rows[i] for i in test]) == labels[test]))
        classifier = DiagnosisClassifier(c=self.c).fit(rows, labels)
        record = classifier.to_dict()
        record["training"] = {
            "patients": len(rows),
            "mask_source": "expert",
            "cv_accuracy_mean": float(np.mean(hits)),
            "cv_accuracy_std": float(np.std(hits)),
            "cv": f"repeated stratified 5-fold x 10, seed {self.seed}",
        }
        write_json(self.path, record, overwrite=self.overwrite)
        with atomic_write(table, "w", overwrite=self.overwrite) as handle:
            handle.write(_csv(rows))
        print(
            f"diagnosis classifier on {len(rows)} patients: cross-validated accuracy "
            f"{np.mean(hits):.3f} +- {np.std(hits):.3f}; written to {self.path}"
        )
        return classifier


class PatientDiagnosis:
    """Diagnose every patient of a section; write ``diagnosis.csv`` and ``metrics.json``.

    ``diagnosis.csv``: patient, true group (when known), predicted group, the group
    probabilities and the features. ``metrics.json``: patient-level accuracy, the
    confusion matrix (rows true, columns predicted, in the classifier's group order) and
    the mask source.

    Args:
        volumes: the patients' ED and ES volume entries.
        classifier_file: the classifier written by :class:`DiagnosisTraining`.
        output_dir: where the outputs go.
        mask_dir: predicted masks (segmentation bundle's inference); ``None``: expert.
        overwrite: replace existing outputs.
    """

    def __init__(
        self,
        volumes: Sequence[Mapping[str, Any]],
        classifier_file: str | os.PathLike,
        output_dir: str | os.PathLike,
        mask_dir: str | os.PathLike | None = None,
        overwrite: bool = False,
    ) -> None:
        self.volumes, self.classifier_file = list(volumes), Path(classifier_file)
        self.output_dir, self.mask_dir = Path(output_dir), mask_dir
        self.overwrite = bool(overwrite)

    def run(self) -> dict[str, Any]:
        outputs = (self.output_dir / "diagnosis.csv", self.output_dir / "metrics.json")
        check_outputs(*outputs, overwrite=self.overwrite)
        classifier = DiagnosisClassifier.load(self.classifier_file)
        rows = patient_feature_rows(self.volumes, self.mask_dir)
        probs = classifier.predict_proba(rows)
        names = classifier.class_names
        table = []
        for row, p in zip(rows, probs, strict=True):
            out = {"patient": row["patient"]}
            if "label" in row:
                out["group"] = names[row["label"]]
            out["predicted"] = names[int(p.argmax())]
            out.update({f"p_{n}": float(v) for n, v in zip(names, p, strict=True)})
            out.update(
                {k: row[k] for k in row if k in FEATURES or k.endswith(("_ml", "_g", "_mm"))}
            )
            table.append(out)
        record: dict[str, Any] = {
            "patients": len(rows),
            "mask_source": "expert" if self.mask_dir is None else str(self.mask_dir),
            "classifier": str(self.classifier_file),
        }
        if all("label" in r for r in rows):
            truth = np.array([r["label"] for r in rows])
            predicted = probs.argmax(axis=1)
            matrix = np.zeros((len(names), len(names)), dtype=int)
            np.add.at(matrix, (truth, predicted), 1)
            record.update(
                {
                    "accuracy": float(np.mean(predicted == truth)),
                    "correct": int(np.sum(predicted == truth)),
                    "confusion_matrix": matrix.tolist(),
                    "class_names": list(names),
                }
            )
        with atomic_write(outputs[0], "w", overwrite=self.overwrite) as handle:
            handle.write(_csv(table))
        write_json(outputs[1], record, overwrite=self.overwrite)
        if "accuracy" in record:
            print(
                f"patient-level accuracy {record['accuracy']:.3f} "
                f"({record['correct']}/{len(rows)}), masks: {record['mask_source']}"
            )
        return record
