"""Mark a burned-in dataset as a new, derived instance."""

from __future__ import annotations

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

    Args:
        ds: the dataset to mark (modified in place).
        source: a dataset carrying the original SOPClassUID and SOPInstanceUID.
        description: what was done, for DerivationDescription.

    Returns:
        The new SOP Instance UID.
    """
    new_uid = generate_uid()
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
