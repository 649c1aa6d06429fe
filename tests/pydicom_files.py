"""pydicom's bundled real DICOM files and a small written one, shared by the tests."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from pydicom.data import get_testdata_file
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.uid import ExplicitVRLittleEndian, SecondaryCaptureImageStorage, generate_uid


def real_file(name: str) -> Path:
    """The path of pydicom test file ``name``; skips the test when it is not installed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = get_testdata_file(name)
    if path is None:
        pytest.skip(f"pydicom test file {name} is not available")
    return Path(path)


def write_dicom(
    path: Path, patient: str, pixels: bool | np.ndarray = True, name: str = "DOE^JANE"
) -> None:
    """A secondary-capture chest X-ray (``CR``, view PA) of PatientID ``patient``: a
    64 x 64 uniform image, the given monochrome ``pixels``, or none (``False``)."""
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = SecondaryCaptureImageStorage
    meta.MediaStorageSOPInstanceUID = generate_uid()
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = Dataset()
    ds.file_meta = meta
    ds.SOPClassUID = meta.MediaStorageSOPClassUID
    ds.SOPInstanceUID = meta.MediaStorageSOPInstanceUID
    ds.PatientID, ds.PatientName = patient, name
    ds.ViewPosition = "PA"
    ds.Modality = "CR"
    if pixels is True:
        pixels = np.full((64, 64), 7, np.uint8)
    if pixels is not False:
        ds.set_pixel_data(pixels, "MONOCHROME2", 8 * pixels.dtype.itemsize)
    path.parent.mkdir(parents=True, exist_ok=True)
    ds.save_as(path, enforce_file_format=True)
