"""ACDC slices as DICOM files: the real acquisition grid as a hospital's pipeline reads it.

The SSL4MIS h5 release stores each slice as float32 scaled to [0, 1] on its acquisition
grid (154 to 512 pixels a side). :func:`export_dicom` writes every slice the samples of
:func:`~monai_forget.data_prep.acdc_h5.collect` reference as a 12-bit MONOCHROME2 DICOM
(stored value ``round(4095 x)``, window 0..4095, ``Modality`` MR, a secondary capture
since the h5 files keep no acquisition tags) at ``<dicom_dir>/<patient>/frameFF/
slice_SS.dcm``: one folder per series (a patient's end-diastole or end-systole stack),
the unit ``canary inject`` burns a patient's name into. :func:`dicom_samples` points the
samples at those files, so the datalist describes what the pipeline reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from monai_forget.io import staged_folder

#: Stored bits of the exported files (values 0..4095).
BITS_STORED = 12


def dicom_path(dicom_dir: str | Path, sample: dict[str, Any]) -> Path:
    """Where ``sample``'s slice is written: ``<dicom_dir>/<patient>/frameFF/slice_SS.dcm``
    (``SS`` 1-based, as the release numbers its slice files)."""
    frame, index = int(sample["frame"]), int(sample["slice"]) + 1
    return Path(dicom_dir) / sample["patient"] / f"frame{frame:02d}" / f"slice_{index:02d}.dcm"


def dicom_samples(samples: Sequence[dict[str, Any]], dicom_dir: str | Path) -> list[dict[str, Any]]:
    """The samples with ``image`` the exported DICOM file and ``source_file`` the name of
    the h5 file it came from (``seg`` and ``slice_axis`` dropped: the image is a single
    slice now).

    Raises:
        ValueError: a volume entry (prepared at volume level): the export writes one file
            per slice.
    """
    out = []
    for sample in samples:
        if "slice" not in sample:
            raise ValueError(
                f"{sample['patient']} frame {sample['frame']} is a volume entry: the DICOM "
                "export writes one file per slice; prepare at slice level (`level` slice)"
            )
        entry = {k: v for k, v in sample.items() if k not in ("seg", "slice_axis")}
        entry.update(image=dicom_path(dicom_dir, sample), source_file=Path(sample["image"]).name)
        out.append(entry)
    return out


def check_dicom_dir(dicom_dir: str | Path) -> None:
    """Refuse a ``dicom_dir`` that exists (the export never writes over files).

    Raises:
        FileExistsError: it exists and is not an empty folder.
    """
    folder = Path(dicom_dir)
    if folder.exists() and not (folder.is_dir() and not any(folder.iterdir())):
        raise FileExistsError(
            f"{folder} already exists and is not an empty folder; the DICOM export writes a "
            "new folder: choose another `dicom_dir` or remove it"
        )


def export_dicom(
    samples: Sequence[dict[str, Any]], dicom_dir: str | Path, *, progress: bool = True
) -> int:
    """Write every sample's slice as a DICOM file under ``dicom_dir``; return the count.

    The files are written into a private folder beside ``dicom_dir`` and renamed into
    place at the end, so an interrupted export leaves nothing behind.

    Args:
        samples: slice-level samples of :func:`~monai_forget.data_prep.acdc_h5.collect`.
        dicom_dir: a new (or empty) folder.
        progress: show a progress bar.

    Raises:
        FileExistsError: ``dicom_dir`` exists and holds files.
        ValueError: a volume-level sample (export slices), or a slice outside [0, 1].
    """
    from pydicom.uid import generate_uid
    from tqdm.auto import tqdm

    from monai_forget.data_prep.reading import read_array
    from monai_forget.dicom.secondary_capture import write_grey_dicom

    folder = Path(dicom_dir)
    check_dicom_dir(folder)
    if any(s.get("slice") is None for s in samples):
        raise ValueError("volume-level samples cannot be exported as slices; use `level` slice")
    series: dict[tuple[str, int], str] = {}
    top = 2**BITS_STORED - 1
    with staged_folder(folder) as staging:
        for sample in tqdm(samples, desc="DICOM export", unit="slice", disable=not progress):
            image = np.asarray(read_array(sample), dtype=np.float64)
            if image.size and (image.min() < 0 or image.max() > 1):
                raise ValueError(
                    f"{sample['image']} slice {sample['slice']}: values {image.min():g}.."
                    f"{image.max():g} outside [0, 1], the release's scaling; export needs it"
                )
            key = (sample["patient"], int(sample["frame"]))
            write_grey_dicom(
                dicom_path(staging, sample),
                np.rint(image * top),
                patient=sample["patient"],
                instance=int(sample["slice"]) + 1,
                bits_stored=BITS_STORED,
                modality="MR",
                series_uid=series.setdefault(key, generate_uid()),
                window=((top + 1) / 2, top + 1),
                durable=False,
            )
    return len(samples)
