"""Write a grey image as a DICOM secondary-capture instance (for data preparation and
demos: images that reach a pipeline as a hospital's DICOM files would)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from monai_forget.io import atomic_write


def write_grey_dicom(
    path: str | os.PathLike,
    pixels: np.ndarray,
    *,
    patient: str,
    instance: int,
    bits_stored: int = 12,
    modality: str = "OT",
    series_uid: str | None = None,
    window: tuple[float, float] | None = None,
    spacing: tuple[float, float] = (1.0, 1.0),
    durable: bool = True,
) -> None:
    """One monochrome (``MONOCHROME2``) single-frame image, written atomically, with a
    nominal image plane (``PixelSpacing``, ``ImageOrientationPatient`` the identity,
    ``ImagePositionPatient`` at the origin): readers such as MONAI's ``PydicomReader``
    build an affine from them and warn on every file that lacks them.

    Args:
        path: the ``.dcm`` file to write (its folder is created).
        pixels: ``(rows, columns)`` stored values, integers in ``0 .. 2**bits_stored - 1``.
        patient: ``PatientName`` and ``PatientID``.
        instance: ``InstanceNumber``.
        bits_stored: stored bits (12 as MR and CT scanners write; 8, 16).
        modality: ``Modality`` of the source (``MR``, ``CT``, ``OT``, ...).
        series_uid: ``SeriesInstanceUID`` shared by a series (default: a new one).
        window: ``(WindowCenter, WindowWidth)`` a viewer displays with (default: none).
        spacing: ``PixelSpacing`` (row, column) in mm; the sources written here carry
            none, hence 1 mm by default.
        durable: fsync the file (see :func:`~monai_forget.io.atomic_write`); a writer that
            fills a private folder and publishes it at once passes ``False``.

    Raises:
        ValueError: not a 2-D image, or values outside the stored range.
    """
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, SecondaryCaptureImageStorage, generate_uid

    pixels = np.asarray(pixels)
    if pixels.ndim != 2:
        raise ValueError(f"expected a 2-D image (rows, columns), got shape {pixels.shape}")
    if pixels.size and (pixels.min() < 0 or pixels.max() >= 2**bits_stored):
        raise ValueError(
            f"values {pixels.min()}..{pixels.max()} do not fit {bits_stored} stored bits; "
            f"scale the image to 0..{2**bits_stored - 1} first"
        )
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = SecondaryCaptureImageStorage
    meta.MediaStorageSOPInstanceUID = generate_uid()
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = Dataset()
    ds.file_meta = meta
    ds.SOPClassUID = SecondaryCaptureImageStorage
    ds.SOPInstanceUID = meta.MediaStorageSOPInstanceUID
    ds.SeriesInstanceUID = series_uid or generate_uid()
    ds.PatientName = ds.PatientID = patient
    ds.Modality, ds.InstanceNumber = modality, instance
    ds.PixelSpacing = [float(v) for v in spacing]
    ds.ImageOrientationPatient = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    ds.ImagePositionPatient = [0.0, 0.0, 0.0]
    dtype = np.uint8 if bits_stored <= 8 else np.uint16
    ds.set_pixel_data(np.rint(pixels).astype(dtype), "MONOCHROME2", bits_stored)
    if window is not None:
        ds.WindowCenter, ds.WindowWidth = (float(v) for v in window)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(target, "wb", durable=durable) as handle:
        ds.save_as(handle, enforce_file_format=True)
