"""A patient's end-diastole and end-systole volumes from ACDC datalist entries.

The datalists ``monai-forget prepare acdc-h5`` / ``acdc-nifti`` writes hold one entry per
2D slice; a cardiologist's pipeline works on a patient's ED and ES *volumes*.
:func:`group_volumes` turns slice entries back into volume entries, refusing what a
volume-level pipeline cannot use (a patient without ED or ES, a volume with missing
slices), and :func:`read_volume` reads one, refusing masks with labels outside
:data:`MASK_LABELS`. Every error names the patient and the file.

A volume array is ``(H, W, D)``: the in-plane axes first and the short axis last, the
order MONAI's ``SliceInferer(spatial_dim=2)`` and NIfTI use. The SSL4MIS h5 release
stores ``(slices, H, W)`` and no geometry (spacing ``None``); the NIfTI release gives
the voxel size from its header.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "MASK_LABELS",
    "PHASES",
    "STRUCTURES",
    "Volume",
    "check_mask_labels",
    "group_volumes",
    "patient_pairs",
    "read_volume",
    "where",
]

#: ACDC segmentation labels (both releases).
MASK_LABELS: Mapping[int, str] = {0: "background", 1: "RV", 2: "MYO", 3: "LV"}
#: The foreground structures by label (1, 2, 3).
STRUCTURES: tuple[str, ...] = ("RV", "MYO", "LV")
#: The two annotated phases, in the order a patient's pair is returned.
PHASES: tuple[str, ...] = ("ED", "ES")


def check_mask_labels(mask: np.ndarray, where: str) -> None:
    """Refuse a segmentation with values outside :data:`MASK_LABELS`.

    Raises:
        ValueError: names ``where`` (patient and file), the unknown values and the labels.
    """
    values = np.unique(np.asarray(mask))
    unknown = [v for v in values.tolist() if v not in MASK_LABELS]
    if unknown:
        raise ValueError(
            f"{where}: mask has unknown label(s) {unknown[:5]}; ACDC masks hold "
            f"{dict(MASK_LABELS)}; relabel the mask or check that 'seg' names the right file"
        )


@dataclass(frozen=True)
class Volume:
    """One phase of one patient.

    Attributes:
        patient: ``patientNNN``.
        phase: ``"ED"`` or ``"ES"``.
        image: ``(H, W, D)`` float32.
        mask: ``(H, W, D)`` uint8 with labels in :data:`MASK_LABELS`, or ``None``.
        spacing: voxel size ``(x, y, z)`` in mm from a NIfTI header, or ``None``.
        affine: the 4x4 affine of the source (identity for h5).
        source: the first file the volume was read from (for messages and outputs).
    """

    patient: str
    phase: str
    image: np.ndarray
    mask: np.ndarray | None
    spacing: tuple[float, float, float] | None
    affine: np.ndarray
    source: str


def where(entry: Mapping[str, Any], path: Any = None) -> str:
    """How messages name a volume entry: ``"<patient> <phase>, <file>"``."""
    phase = entry.get("phase") or f"frame {entry.get('frame')}"
    return f"{entry.get('patient', '?')} {phase}, {path if path is not None else entry['image']}"


def group_volumes(
    entries: Iterable[Mapping[str, Any]],
    phases: Sequence[str] | None = PHASES,
    name: str = "datalist section",
) -> list[dict[str, Any]]:
    """Slice entries grouped into one entry per (patient, phase) volume.

    Args:
        entries: datalist entries with ``image`` (a path), ``patient``, ``phase`` (or
            ``frame``) and ``slice`` (0-based; ``None`` for a whole-volume entry); ``seg``,
            ``slice_axis`` and the other fields are kept.
        phases: the phases every patient must have (default ED and ES, with the same
            number of slices); ``None`` accepts any.
        name: how errors refer to the entries.

    Returns:
        Volume entries sorted by patient then phase: the first slice entry's fields,
        ``slice`` removed, plus ``sources`` (the slice entries in slice order).

    Raises:
        ValueError: a patient without one of ``phases`` or with ED and ES of different
            depths, or a volume with missing or repeated slices; each names the patient
            and the file.
    """
    volumes: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for entry in entries:
        phase = entry.get("phase") or f"frame{int(entry['frame']):02d}"
        volumes[(str(entry["patient"]), str(phase))].append(dict(entry))
    out = []
    for (_, phase), slices in sorted(volumes.items()):
        slices.sort(key=lambda e: -1 if e.get("slice") is None else int(e["slice"]))
        indices = [e.get("slice") for e in slices]
        if indices != [None] and indices != list(range(len(slices))):
            have = sorted(int(i) for i in indices if i is not None)
            missing = sorted(set(range(max(have, default=-1) + 1)) - set(have))
            repeated = sorted({i for i in have if have.count(i) > 1})
            raise ValueError(
                f"{name}: {where(slices[0])}: the volume has "
                + (f"missing slice(s) {missing} " if missing else "")
                + (f"repeated slice(s) {repeated} " if repeated else "")
                + f"(slices present: {have}); a volume needs every short-axis slice: "
                "restore the files or re-run `monai-forget prepare`"
            )
        volume = {k: v for k, v in slices[0].items() if k != "slice"}
        out.append(dict(volume, phase=phase, sources=slices))
    if phases is not None:
        _check_phases(out, tuple(phases), name)
    return out


def _check_phases(volumes: list[dict[str, Any]], phases: tuple[str, ...], name: str) -> None:
    by_patient: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for volume in volumes:
        by_patient[volume["patient"]][volume["phase"]] = volume
    for patient, present in by_patient.items():
        missing = [p for p in phases if p not in present]
        if missing:
            files = sorted({str(s["image"]) for v in present.values() for s in v["sources"]})
            raise ValueError(
                f"{name}: {patient} has no {'/'.join(missing)} volume (found "
                f"{sorted(present)} in {files[0]}{' ...' if len(files) > 1 else ''}); the "
                f"pipeline needs the {' and '.join(phases)} volumes of every patient"
            )
        depths = {p: len(present[p]["sources"]) for p in phases}
        if len(set(depths.values())) > 1 and all(
            present[p]["sources"][0].get("slice") is not None for p in phases
        ):
            raise ValueError(
                f"{name}: {patient} has {depths} slices; the ED and ES volumes of a patient "
                f"cover the same slices (first file {present[phases[0]]['image']})"
            )


def patient_pairs(volumes: Sequence[Mapping[str, Any]]) -> list[tuple[Any, Any]]:
    """``[(ED, ES), ...]`` per patient (in patient order) from :func:`group_volumes` output
    or from a list of :class:`Volume`."""

    def field(v: Any, key: str) -> Any:
        return v[key] if isinstance(v, Mapping) else getattr(v, key)

    by_patient: dict[str, dict[str, Any]] = defaultdict(dict)
    for volume in volumes:
        by_patient[field(volume, "patient")][field(volume, "phase")] = volume
    pairs = []
    for patient, present in sorted(by_patient.items()):
        if any(p not in present for p in PHASES):
            raise ValueError(f"{patient} has phases {sorted(present)}; ED and ES are needed")
        pairs.append((present["ED"], present["ES"]))
    return pairs


def _read_h5(path: Path, key: str, index: int | None) -> np.ndarray:
    import h5py

    dataset = {"image": "image", "seg": "label"}[key]
    try:
        with h5py.File(path, "r") as handle:
            array = handle[dataset][()] if index is None else handle[dataset][index]
    except (OSError, KeyError) as err:
        raise ValueError(f"{path}: cannot read dataset {dataset!r} ({err})") from None
    return np.asarray(array)


def _read_nifti(path: Path) -> tuple[np.ndarray, np.ndarray, tuple[float, float, float]]:
    import nibabel as nib

    image = nib.load(path)
    zooms = tuple(float(z) for z in image.header.get_zooms()[:3])
    return np.asarray(image.dataobj), np.asarray(image.affine, dtype=np.float64), zooms


def _read_stack(sources: Sequence[Mapping[str, Any]], key: str) -> tuple[np.ndarray, ...]:
    """``(array (H, W, D), affine, spacing)`` of one key of a volume's sources."""
    first = sources[0]
    path = Path(first[key])
    if not path.is_file():
        raise FileNotFoundError(f"{where(first, path)}: file not found (field {key!r})")
    whole = len({str(s[key]) for s in sources}) == 1 and first.get("slice_axis") is not None
    if path.name.endswith((".nii", ".nii.gz")):
        if not whole:
            raise ValueError(f"{where(first, path)}: NIfTI slices must come from one volume")
        array, affine, spacing = _read_nifti(path)
        if array.ndim != 3:
            raise ValueError(f"{where(first, path)}: expected a 3D volume, got {array.shape}")
        array = np.moveaxis(array, int(first["slice_axis"]), -1)
        return array, affine, spacing
    if path.suffix != ".h5":
        raise ValueError(f"{where(first, path)}: not an h5 or NIfTI file")
    if whole:
        array = _read_h5(path, key, None)
        listed = len(sources) if first.get("slice") is not None else array.shape[0]
        if array.ndim != 3 or array.shape[0] != listed:
            raise ValueError(
                f"{where(first, path)}: the file holds shape {array.shape} but the datalist "
                f"lists {len(sources)} slices; a volume needs every short-axis slice"
            )
        array = np.moveaxis(array, int(first["slice_axis"]), -1)
    else:
        planes = []
        for s in sources:
            index = s.get("slice") if s.get("slice_axis") is not None else None
            plane = _read_h5(Path(s[key]), key, index)
            if planes and plane.shape != planes[0].shape:
                raise ValueError(
                    f"{where(s, s[key])}: slice shape {plane.shape} differs from "
                    f"{planes[0].shape} of {sources[0][key]}"
                )
            planes.append(plane)
        array = np.stack(planes, axis=-1)
    return array, np.eye(4), None


def read_volume(entry: Mapping[str, Any], with_mask: bool = True) -> Volume:
    """Read one volume entry of :func:`group_volumes` (paths absolute or relative to the
    working directory).

    Raises:
        FileNotFoundError: a missing file (named, with the patient).
        ValueError: unreadable files, slices of different shapes, a mask whose shape
            differs from the image's or with unknown labels.
    """
    sources = entry.get("sources") or [entry]
    image, affine, spacing = _read_stack(sources, "image")
    mask = None
    if with_mask:
        if "seg" not in sources[0]:
            raise ValueError(f"{where(entry)}: the entry has no 'seg' (the expert mask)")
        mask, _, _ = _read_stack(sources, "seg")
        if mask.shape != image.shape:
            raise ValueError(
                f"{where(entry, sources[0]['seg'])}: mask shape {mask.shape} differs from "
                f"image shape {image.shape}"
            )
        check_mask_labels(mask, where(entry, sources[0]["seg"]))
        mask = mask.astype(np.uint8)
    return Volume(
        patient=str(entry["patient"]),
        phase=str(entry["phase"]),
        image=np.asarray(image, dtype=np.float32),
        mask=mask,
        spacing=spacing,
        affine=affine,
        source=os.fspath(sources[0]["image"]),
    )
