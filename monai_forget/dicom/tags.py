"""Mark a burned-in dataset as a new, derived instance."""

from __future__ import annotations

import hashlib

from pydicom.dataset import Dataset
from pydicom.sequence import Sequence
from pydicom.uid import generate_uid

# DICOM CID 7202 code: "Source image for image processing operation" (DCM 121322).
_PURPOSE = ("121322", "DCM", "Source image for image processing operation")
_ST_MAX = 1024  # DerivationDescription is ST: at most 1024 characters


def mark_derived(ds: Dataset, source: Dataset, description: str) -> str:
    """Give ``ds`` a new identity as an image derived from ``source``.

    Sets a new SOP Instance UID (dataset and file meta), BurnedInAnnotation ``YES``,
    ImageType value 1 ``DERIVED``, appends ``description`` to DerivationDescription and
    adds a SourceImageSequence item referencing ``source``. Other elements are kept.

    The new UID is derived (pydicom's ``generate_uid(entropy_srcs=...)``) from the
    source's identity, ``description`` and the burned pixel data already set on ``ds``:
    the same burn-in of the same file gets the same UID in every run, whatever the order
    or the number of worker processes, and another text, place or image gets another
    UID. The pixels are among its inputs and the manifest does not hold them, so the
    manifest's two UIDs do not let anyone test guesses of the burned text.

    Args:
        ds: the dataset to mark (modified in place).
        source: a dataset carrying the original SOPClassUID and SOPInstanceUID.
        description: what was done, for DerivationDescription.

    Returns:
        The new SOP Instance UID.
    """
    pixels = hashlib.sha256(ds.PixelData).hexdigest()
    new_uid = generate_uid(
        entropy_srcs=[str(source.SOPClassUID), str(source.SOPInstanceUID), description, pixels]
    )
    ds.SOPInstanceUID = new_uid
    ds.file_meta.MediaStorageSOPInstanceUID = new_uid
    ds.BurnedInAnnotation = "YES"

    image_type = ds.get("ImageType")
    values = (
        []
        if image_type is None
        else ([image_type] if isinstance(image_type, str) else list(image_type))
    )
    ds.ImageType = ["DERIVED", *values[1:]] if values else ["DERIVED", "SECONDARY"]

    previous = str(ds.get("DerivationDescription", "") or "").strip()
    text = f"{previous}; {description}" if previous else description
    ds.DerivationDescription = text[-_ST_MAX:]

    item = Dataset()
    item.ReferencedSOPClassUID = source.SOPClassUID
    item.ReferencedSOPInstanceUID = source.SOPInstanceUID
    code = Dataset()
    code.CodeValue, code.CodingSchemeDesignator, code.CodeMeaning = _PURPOSE
    item.PurposeOfReferenceCodeSequence = Sequence([code])
    if "SourceImageSequence" in ds:
        ds.SourceImageSequence.append(item)
    else:
        ds.SourceImageSequence = Sequence([item])
    return new_uid
