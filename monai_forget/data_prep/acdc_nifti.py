"""ACDC original release (NIfTI) to datalist samples.

Layout: ``<root>/patientNNN/Info.cfg``, ``patientNNN_frameFF.nii.gz`` (3D),
``patientNNN_frameFF_gt.nii.gz`` (segmentation of the ED and ES frames) and
``patientNNN_4d.nii.gz`` (all frames). ``root`` is the folder holding the patient
folders, or the release folder holding ``training/`` (and ``testing/``).

Entries reference the source volumes, nothing is copied: with ``level="slice"`` an
entry is one short-axis slice, ``image[..., slice]`` along ``slice_axis`` 2 of the
nibabel array ``(X, Y, Z[, T])``; with ``frames="all"`` the image is the 4D file and
``frame_index`` (0-based) selects the time point.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nibabel as nib

from monai_forget.checks import check_choice
from monai_forget.data.acdc import acdc_label
from monai_forget.data_prep.acdc import PATIENT_RE, Info, read_info
from monai_forget.defaults import ACDC_LEVELS, ACDC_NIFTI_FRAMES

FRAMES = ACDC_NIFTI_FRAMES
LEVELS = ACDC_LEVELS
SLICE_AXIS = 2  # nibabel arrays are (X, Y, Z[, T]); Z runs along the short axis


def patient_dirs(root: str | Path) -> list[Path]:
    """Patient folders under ``root`` or under ``root/training`` and ``root/testing``.

    Raises:
        FileNotFoundError: no ``patientNNN`` folder found.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"ACDC folder {root} not found")
    found = _patients_in(root) or _patients_in(root / "training") + _patients_in(root / "testing")
    if not found:
        raise FileNotFoundError(
            f"no patientNNN folders in {root} or {root / 'training'}; point to the ACDC "
            "release folder or its training/ folder"
        )
    return found


def _patients_in(base: Path) -> list[Path]:
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if p.is_dir() and PATIENT_RE.match(p.name))


def _shape(path: Path, ndim: int, what: str) -> tuple[int, ...]:
    """Header-only shape of a NIfTI file, checked for dimensionality."""
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found ({what})")
    try:
        shape = tuple(int(n) for n in nib.load(path).shape)
    except Exception as err:  # nibabel raises several types for a corrupt header
        raise ValueError(f"{path}: not a readable NIfTI file ({err})") from None
    if len(shape) != ndim:
        raise ValueError(
            f"{path}: {what} must be a {ndim}D volume, got shape {shape} ({len(shape)}D)"
        )
    return shape


def collect(root: str | Path, frames: str = "ed-es", level: str = "slice") -> list[dict[str, Any]]:
    """One sample per (patient, frame[, slice]) of the ACDC NIfTI release.

    Args:
        root: see the module docstring.
        frames: ``"ed-es"`` (the two annotated frames, from ``patientNNN_frameFF.nii.gz``)
            or ``"all"`` (every frame of ``patientNNN_4d.nii.gz``).
        level: ``"slice"`` (an entry per short-axis slice) or ``"volume"``.

    Returns:
        Samples with ``image``, ``label`` (pathology index), ``seg`` (ground truth of the
        frame, ED/ES only), ``patient``, ``group``, ``frame`` (1-based), ``phase``
        ("ED", "ES" or None), ``frame_index`` (4D only), ``slice`` and ``slice_axis``.

    Raises:
        FileNotFoundError: a missing Info.cfg or image.
        ValueError: a malformed Info.cfg or a volume of the wrong dimensionality or shape.
    """
    check_choice("frames", frames, FRAMES)
    check_choice("level", level, LEVELS)
    samples: list[dict[str, Any]] = []
    for folder in patient_dirs(root):
        info = read_info(folder / "Info.cfg")
        label = acdc_label(info.group, str(folder / "Info.cfg"))
        phase_of = {info.ed: "ED", info.es: "ES"}
        for volume, shape in _volumes(folder, info, frames):
            base = {
                "image": volume.pop("image"),
                "label": label,
                "seg": volume.pop("seg"),
                "patient": folder.name,
                "group": info.group,
                "frame": volume["frame"],
                "phase": phase_of.get(volume["frame"]),
                **volume,
            }
            if level == "volume":
                samples.append(base)
            else:
                samples.extend(
                    dict(base, slice=z, slice_axis=SLICE_AXIS) for z in range(shape[SLICE_AXIS])
                )
    return samples


def _gt(folder: Path, frame: int, shape: tuple[int, ...]) -> Path:
    """The ground-truth file of a frame, checked to match the image's spatial shape."""
    gt = folder / f"{folder.name}_frame{frame:02d}_gt.nii.gz"
    if _shape(gt, 3, "ground-truth segmentation") != shape:
        raise ValueError(f"{gt}: shape differs from its image's {shape}")
    return gt


def _volumes(folder: Path, info: Info, frames: str) -> list[tuple[dict[str, Any], tuple[int, ...]]]:
    """``(fields, spatial shape)`` of every selected frame of one patient."""
    patient = folder.name
    annotated = (info.ed, info.es)
    if frames == "ed-es":
        volumes = []
        for frame in sorted(set(annotated)):
            image = folder / f"{patient}_frame{frame:02d}.nii.gz"
            shape = _shape(image, 3, f"frame {frame} of {patient}")
            volumes.append(
                ({"image": image, "seg": _gt(folder, frame, shape), "frame": frame}, shape)
            )
        return volumes
    image = folder / f"{patient}_4d.nii.gz"
    shape4 = _shape(image, 4, f"cine series of {patient}")
    if shape4[3] != info.nb_frame:
        raise ValueError(
            f"{image}: {shape4[3]} frames but {folder / 'Info.cfg'} says NbFrame = {info.nb_frame}"
        )
    shape = shape4[:3]
    return [
        (
            {
                "image": image,
                "seg": _gt(folder, frame, shape) if frame in annotated else None,
                "frame": frame,
                "frame_index": frame - 1,
            },
            shape,
        )
        for frame in range(1, info.nb_frame + 1)
    ]
