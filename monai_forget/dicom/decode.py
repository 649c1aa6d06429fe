"""Read a DICOM file and decode its pixel data without changing the dataset.

Every refusal the injector makes about the *input* lives here, so it happens before
anything is written.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pydicom
from pydicom.dataset import Dataset
from pydicom.errors import InvalidDicomError
from pydicom.pixels import get_decoder
from pydicom.uid import UID

from monai_forget.dicom.errors import InjectionError, NotAnImageError

EXTRA_HINT = (
    "pip install 'monai-forget[jpeg]' (pylibjpeg with its libjpeg, openjpeg and rle plug-ins)"
)

# Photometric interpretations the injector can write back losslessly; the value is
# what the decoded (as_rgb=False) pixels are, and so what is written.
SUPPORTED_PHOTOMETRIC = {
    "MONOCHROME1": "MONOCHROME1",
    "MONOCHROME2": "MONOCHROME2",
    "RGB": "RGB",
    "YBR_FULL": "YBR_FULL",
    # Uncompressed 4:2:2 is expanded to full resolution by pydicom; writing it back
    # as YBR_FULL keeps every sample (re-subsampling would smear the text's chroma
    # onto its neighbours).
    "YBR_FULL_422": "YBR_FULL",
    # JPEG 2000 colour transforms are undone by the decoder.
    "YBR_RCT": "RGB",
    "YBR_ICT": "RGB",
}


def read_dataset(path: str | os.PathLike, *, check_pixels: bool = True) -> Dataset:
    """Read ``path`` as DICOM, refusing non-DICOM files and (``check_pixels``) pixel data
    the injector cannot edit (:func:`check_pixel_data`; off for a caller that plans the
    burn-in next, which checks it once).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        InjectionError: not a DICOM Part 10 file, or no integer pixel data.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist or is not a file")
    try:
        ds = pydicom.dcmread(path)
    except (InvalidDicomError, EOFError, OSError, ValueError) as err:
        raise NotAnImageError(
            f"{path} is not a readable DICOM file ({err.__class__.__name__}); "
            "the injector needs a DICOM Part 10 file with a 'DICM' preamble"
        ) from err
    if check_pixels:
        check_pixel_data(ds, path)
    return ds


def check_pixel_data(ds: Dataset, path: str | os.PathLike = "<dataset>") -> None:
    """Refuse datasets whose pixel data the injector cannot edit faithfully.

    Raises:
        InjectionError: with the reason and what to do instead.
    """
    for keyword in ("FloatPixelData", "DoubleFloatPixelData"):
        if keyword in ds:
            raise InjectionError(
                f"{path} has {keyword} (floating-point pixels, e.g. parametric maps); "
                "burn-in canaries are only defined for integer Pixel Data"
            )
    if "PixelData" not in ds:
        raise NotAnImageError(f"{path} has no Pixel Data, so there is nothing to burn into")
    photometric = str(ds.get("PhotometricInterpretation", "")).strip()
    if photometric == "PALETTE COLOR":
        raise InjectionError(
            f"{path} uses PALETTE COLOR: a colour lookup table decides what each stored "
            "value looks like, so no stored value is guaranteed to display as white; "
            "convert it to RGB first"
        )
    if photometric not in SUPPORTED_PHOTOMETRIC:
        raise InjectionError(
            f"{path} has PhotometricInterpretation {photometric or '(missing)'}; supported: "
            f"{', '.join(SUPPORTED_PHOTOMETRIC)}"
        )
    absent = [k for k in ("Rows", "Columns", "BitsStored") if not ds.get(k)]
    if absent:
        raise InjectionError(
            f"{path} has no {', '.join(absent)}, so its pixel data cannot be read; "
            "fix the Image Pixel module first"
        )
    bits = ds.get("BitsAllocated")
    if bits not in (8, 16):
        raise InjectionError(
            f"{path} has BitsAllocated {bits}; pydicom's set_pixel_data writes 8- and "
            "16-bit pixel data only, so this file cannot be rewritten faithfully"
        )
    tsyntax = transfer_syntax(ds)
    if not tsyntax.is_little_endian:
        raise InjectionError(
            f"{path} uses {tsyntax.name} (retired big-endian encoding), which pydicom "
            "cannot convert safely; convert it to little endian first, e.g. with "
            "DCMTK 'dcmconv +te' or 'gdcmconv --raw'"
        )
    if tsyntax.is_compressed:
        _check_decoder(tsyntax, path)


def transfer_syntax(ds: Dataset) -> UID:
    """The dataset's transfer syntax (Implicit VR Little Endian when unstated)."""
    meta = getattr(ds, "file_meta", None)
    return UID(meta.get("TransferSyntaxUID", "1.2.840.10008.1.2") if meta else "1.2.840.10008.1.2")


def _check_decoder(tsyntax: UID, path: str | os.PathLike) -> None:
    try:
        decoder = get_decoder(tsyntax)
    except NotImplementedError as err:
        raise InjectionError(
            f"{path} uses {tsyntax.name} ({tsyntax}), which pydicom cannot decode; "
            "no canary can be burned into it"
        ) from err
    if not decoder.is_available:
        missing = "; ".join(decoder.missing_dependencies) or "no plug-in available"
        raise InjectionError(
            f"{path} uses {tsyntax.name} and no decoder plug-in is installed "
            f"({missing}); install one with: {EXTRA_HINT}"
        )


def decoded_pixels(ds: Dataset) -> tuple[np.ndarray, str]:
    """Decode the pixels of ``ds`` without changing it; return them and the photometric.

    The pixels are a writable array shaped ``(frames, rows, columns, samples)``, in
    the stored colour space (no YBR to RGB conversion), with signed values
    sign-extended. The photometric interpretation returned is the one to write back
    (e.g. JPEG 2000 YBR_RCT decodes to RGB, 4:2:2 chroma is expanded to YBR_FULL).

    Raises:
        InjectionError: the pixel data could not be decoded.
    """
    tsyntax = transfer_syntax(ds)
    try:
        arr, meta = get_decoder(tsyntax).as_array(ds, as_rgb=False)
    except (RuntimeError, ValueError, NotImplementedError) as err:
        raise InjectionError(
            f"the {tsyntax.name} pixel data could not be decoded ({' '.join(str(err).split())}); "
            "the file may be "
            f"corrupt, or another decoder plug-in may help: {EXTRA_HINT}"
        ) from err
    decoded = str(meta.get("photometric_interpretation", ds.PhotometricInterpretation)).strip()
    photometric = SUPPORTED_PHOTOMETRIC.get(decoded, decoded)
    if photometric not in SUPPORTED_PHOTOMETRIC.values():
        raise InjectionError(f"the pixel data decoded as {decoded}, which cannot be written back")
    if not arr.flags.writeable:
        arr = np.array(arr, copy=True)
    samples = int(ds.get("SamplesPerPixel", 1))
    frames = int(ds.get("NumberOfFrames", 1) or 1)
    return arr.reshape(frames, int(ds.Rows), int(ds.Columns), samples), photometric
