"""ACDC in the SSL4MIS h5 release to datalist samples.

Layout (``$MONAI_FORGET_DATA/acdc_ssl4mis``): ``data/patientNNN_frameFF_slice_S.h5``
(one 2D slice, ``S`` 1-based) and ``data/patientNNN_frameFF.h5`` (a volume, slices
first), each holding the datasets ``image`` and ``label`` (the segmentation);
``groups.csv`` (``patient,group``) gives the pathology group; ``train.list``,
``val.list`` and ``test.list`` are the release's split. ``frame01`` is end-diastole and
``frame02`` end-systole in this release.

Entries reference the h5 files: a 2D file is one entry (``slice_axis`` null); a volume
gives one entry per slice, ``image[slice]`` along ``slice_axis`` 0 (or one entry per
volume with ``level="volume"``). ``seg`` is the same file as ``image``: the mask is its
``label`` dataset.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import h5py

from monai_forget.checks import check_choice
from monai_forget.data.acdc import acdc_label
from monai_forget.data_prep.acdc import PATIENT_RE
from monai_forget.data_prep.tables import read_csv_rows, read_id_list
from monai_forget.defaults import ACDC_LEVELS

LEVELS = ACDC_LEVELS
H5_KEYS = {"image": "image", "seg": "label"}
PHASES = {1: "ED", 2: "ES"}  # frame numbering of this release
SLICE_AXIS = 0  # h5 volumes are (slices, H, W)
RELEASE_LISTS = {"training": "train.list", "validation": "val.list", "test": "test.list"}

_NAME_RE = re.compile(r"^(patient\d{3})_frame(\d{2})(?:_slice_(\d+))?\.h5$")


def read_groups(path: str | Path) -> dict[str, str]:
    """``{patient: group}`` from ``groups.csv`` (columns ``patient,group``).

    Raises:
        ValueError: a bad patient id or unknown group, with the line number.
    """
    groups: dict[str, str] = {}
    for line, row in read_csv_rows(path, ("patient", "group"), what="groups file"):
        where = f"groups file {path}, line {line}"
        if not PATIENT_RE.match(row["patient"]):
            raise ValueError(f"{where}: the patient field is not like patient001")
        acdc_label(row["group"], where)
        groups[row["patient"]] = row["group"]
    return groups


def _shapes(path: Path, ndim: int) -> tuple[int, ...]:
    """Shape of the ``image`` dataset, checked against ``label`` and the expected ndim."""
    try:
        with h5py.File(path, "r") as handle:
            missing = [key for key in H5_KEYS.values() if key not in handle]
            if missing:
                raise ValueError(f"{path}: missing dataset(s) {missing}; expected image, label")
            image, seg = handle["image"].shape, handle["label"].shape
    except OSError as err:
        raise ValueError(f"{path}: not a readable h5 file ({err})") from None
    if len(image) != ndim:
        raise ValueError(f"{path}: image must be {ndim}D, got shape {image}")
    if seg != image:
        raise ValueError(f"{path}: label shape {seg} differs from image shape {image}")
    return tuple(int(n) for n in image)


def collect(
    root: str | Path, level: str = "slice", groups_csv: str | Path | None = None
) -> tuple[list[dict[str, Any]], int]:
    """One sample per slice (or volume) of the SSL4MIS ACDC release.

    Args:
        root: the release folder (holding ``data/`` and ``groups.csv``).
        level: ``"slice"`` or ``"volume"`` (volume files only; 2D files are skipped).
        groups_csv: pathology groups; default ``root/groups.csv``.

    Returns:
        ``(samples, skipped)``: samples with ``image``, ``label``, ``seg``, ``patient``,
        ``group``, ``frame``, ``phase``, ``slice``, ``slice_axis``; ``skipped`` counts
        2D files left out at volume level.

    Raises:
        FileNotFoundError: no ``data/`` folder, no groups file, or no h5 file.
        ValueError: a patient missing from the groups file, a malformed h5 file.
    """
    check_choice("level", level, LEVELS)
    root = Path(root)
    data = root / "data"
    if not data.is_dir():
        raise FileNotFoundError(f"{data} not found; point to the SSL4MIS ACDC folder")
    groups_path = Path(groups_csv) if groups_csv is not None else root / "groups.csv"
    groups = read_groups(groups_path)
    samples: list[dict[str, Any]] = []
    skipped = 0
    files = sorted(data.glob("patient*.h5"))
    if not files:
        raise FileNotFoundError(f"no patient*.h5 files in {data}")
    for path in files:
        match = _NAME_RE.match(path.name)
        if match is None:
            raise ValueError(
                f"{path}: unexpected name; expected patientNNN_frameFF.h5 or "
                "patientNNN_frameFF_slice_S.h5"
            )
        patient, frame = match.group(1), int(match.group(2))
        if patient not in groups:
            raise ValueError(f"{path}: patient {patient} has no row in {groups_path}")
        base = {
            "image": path,
            "label": acdc_label(groups[patient], str(groups_path)),
            "seg": path,
            "patient": patient,
            "group": groups[patient],
            "frame": frame,
            "phase": PHASES.get(frame),
        }
        if match.group(3) is not None:  # a 2D slice file
            if level == "volume":
                skipped += 1
                continue
            _shapes(path, 2)
            samples.append(dict(base, slice=int(match.group(3)) - 1, slice_axis=None))
        else:
            depth = _shapes(path, 3)[SLICE_AXIS]
            if level == "volume":
                samples.append(base)
            else:
                samples.extend(dict(base, slice=z, slice_axis=SLICE_AXIS) for z in range(depth))
    return samples, skipped


def release_split(root: str | Path, samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Set each sample's ``split`` from the release's ``train/val/test.list`` files.

    Raises:
        ValueError: a patient in two lists or in none.
    """
    root = Path(root)
    split_of: dict[str, str] = {}
    for split, name in RELEASE_LISTS.items():
        for item in read_id_list(root / name, what="release split list"):
            patient = item.split("_", 1)[0]
            if split_of.get(patient, split) != split:
                raise ValueError(
                    f"{root / name}: {patient} is also in the {split_of[patient]} list"
                )
            split_of[patient] = split
    missing = sorted({s["patient"] for s in samples} - set(split_of))
    if missing:
        raise ValueError(
            f"patients {missing[:5]} are in none of {list(RELEASE_LISTS.values())} in {root}; "
            "use `split` with fractions instead"
        )
    return [dict(s, split=split_of[s["patient"]]) for s in samples]
