"""RSNA Pneumonia Detection Challenge (DICOM + labels CSV) to datalist samples.

Layout: ``<root>/stage_2_train_images/<patientId>.dcm`` and
``<root>/stage_2_train_labels.csv`` with columns ``patientId,x,y,width,height,Target``:
one row per box for a positive image, one row with empty box fields for a negative one.
The label is ``Target`` (1: lung opacity); boxes are kept as ``[x, y, width, height]``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pydicom
from pydicom.errors import InvalidDicomError

from monai_forget.data_prep.tables import read_csv_rows

LABEL_NAMES = ("no_lung_opacity", "lung_opacity")
IMAGES = "stage_2_train_images"
LABELS = "stage_2_train_labels.csv"
_PIXEL_KEYWORDS = ("PixelData", "FloatPixelData", "DoubleFloatPixelData")


def read_labels(path: Path) -> dict[str, dict[str, Any]]:
    """``{patientId: {"label": Target, "boxes": [...], "line": first line}}``.

    Raises:
        ValueError: a Target other than 0/1, a patient with both targets, or a positive
            row without a numeric box (each names the line).
    """
    labels: dict[str, dict[str, Any]] = {}
    columns = ("patientId", "x", "y", "width", "height", "Target")
    for line, row in read_csv_rows(path, ("patientId", "Target"), what="RSNA labels file"):
        where = f"RSNA labels file {path}, line {line}"
        if row["Target"] not in ("0", "1"):
            raise ValueError(f"{where}: Target is {row['Target']!r}, expected 0 or 1")
        target = int(row["Target"])
        record = labels.setdefault(row["patientId"], {"label": target, "boxes": [], "line": line})
        if record["label"] != target:
            raise ValueError(
                f"{where}: patient {row['patientId']} has Target {target} but line "
                f"{record['line']} gave {record['label']}"
            )
        if target == 1:
            try:
                box = [float(row[key]) for key in columns[1:5]]
            except (KeyError, ValueError):
                raise ValueError(f"{where}: Target 1 needs numeric x, y, width, height") from None
            if not all(math.isfinite(v) for v in box) or box[2] <= 0 or box[3] <= 0:
                raise ValueError(f"{where}: box {box} is not a positive-size box")
            record["boxes"].append(box)
    return labels


def read_header(path: Path) -> pydicom.Dataset:
    """The DICOM header, checked to carry pixel data.

    Large values are deferred (not loaded), so the pixel data's presence is checked
    without reading it; ``stop_before_pixels`` could not tell a file without pixels.

    Raises:
        ValueError: not a DICOM file, or one without pixel data.
    """
    try:
        ds = pydicom.dcmread(path, defer_size="4 KB")
    except (InvalidDicomError, OSError, EOFError) as err:
        raise ValueError(f"{path}: not a readable DICOM file ({err})") from None
    if not any(keyword in ds for keyword in _PIXEL_KEYWORDS):
        raise ValueError(f"{path}: DICOM without pixel data; it is not an image")
    return ds


def collect(root: str | Path) -> list[dict[str, Any]]:
    """One sample per labelled DICOM image.

    Returns:
        Samples with ``image``, ``label``, ``patient`` (RSNA ``patientId``), ``group``,
        ``view`` (ViewPosition, PA/AP) and ``boxes`` (empty for negatives).

    Raises:
        FileNotFoundError: the labels file, image folder, or a labelled image is missing.
        ValueError: a malformed row, a DICOM without pixel data or with another
            PatientID, or DICOM files without a label row.
    """
    root = Path(root)
    images = root / IMAGES
    if not images.is_dir():
        raise FileNotFoundError(f"{images} not found; point to the RSNA challenge folder")
    labels = read_labels(root / LABELS)
    samples = []
    for patient, record in sorted(labels.items()):
        path = images / f"{patient}.dcm"
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found (line {record['line']} of {LABELS})")
        ds = read_header(path)
        if ds.get("PatientID", patient) != patient:
            raise ValueError(
                f"{path}: its PatientID differs from its file name; the file belongs to "
                "another patient"
            )
        samples.append(
            {
                "image": path,
                "label": record["label"],
                "patient": patient,
                "group": LABEL_NAMES[record["label"]],
                "view": str(ds.get("ViewPosition", "")) or None,
                "boxes": record["boxes"],
            }
        )
    unlabelled = sorted(p.stem for p in images.glob("*.dcm") if p.stem not in labels)
    if unlabelled:
        raise ValueError(
            f"{len(unlabelled)} DICOM file(s) in {images} have no row in {LABELS}, e.g. "
            f"{unlabelled[:3]}; remove them or add their labels"
        )
    return samples
