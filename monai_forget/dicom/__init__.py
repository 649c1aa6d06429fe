"""DICOM burn-in canary injector (pydicom 3), with NIfTI and PNG through the same renderer.

Start with :func:`inject_file` (one file), :func:`inject_tree` (a folder) or
:func:`burn_in` (a dataset in memory); :func:`write_manifest` records what was written.
"""

from monai_forget.dicom.decode import EXTRA_HINT, SUPPORTED_PHOTOMETRIC, read_dataset
from monai_forget.dicom.display import colour_white, monochrome_white, stored_range
from monai_forget.dicom.errors import InjectionError, NotAnImageError
from monai_forget.dicom.folder import inject_any, inject_tree
from monai_forget.dicom.hashing import TextHasher
from monai_forget.dicom.inject import (
    BurnInOptions,
    BurnInResult,
    as_options,
    burn_in,
    encode,
    inject_file,
)
from monai_forget.dicom.manifest import manifest_paths, write_manifest
from monai_forget.dicom.names import display_name
from monai_forget.dicom.raster import inject_nifti, inject_png

__all__ = [
    "EXTRA_HINT",
    "SUPPORTED_PHOTOMETRIC",
    "BurnInOptions",
    "BurnInResult",
    "InjectionError",
    "NotAnImageError",
    "TextHasher",
    "as_options",
    "burn_in",
    "colour_white",
    "display_name",
    "encode",
    "inject_any",
    "inject_file",
    "inject_nifti",
    "inject_png",
    "inject_tree",
    "manifest_paths",
    "monochrome_white",
    "read_dataset",
    "stored_range",
    "write_manifest",
]
