"""DICOM burn-in canary injector (pydicom 3), with NIfTI and PNG through the same renderer.

Start with :func:`inject_and_publish` (a file or a folder, written with its manifest, as
``monai-forget canary inject`` does), :func:`inject_file` (one file), :func:`inject_tree`
(a folder) or :func:`burn_in` (a dataset in memory); :func:`write_manifest` records
what was written.
Every format goes through one skeleton (:mod:`monai_forget.dicom.driver`): plan (read
and check, change nothing), render, write atomically, record. Importing this package
loads neither torch nor MONAI (nor nibabel or Pillow until a NIfTI or PNG is planned).
"""

from monai_forget.dicom.decode import EXTRA_HINT, SUPPORTED_PHOTOMETRIC, read_dataset
from monai_forget.dicom.display import colour_white, monochrome_white, stored_range
from monai_forget.dicom.driver import inject_any, inject_file, inject_nifti, inject_png
from monai_forget.dicom.errors import InjectionError, NotAnImageError
from monai_forget.dicom.folder import inject_tree, stage_tree
from monai_forget.dicom.hashing import TextHasher
from monai_forget.dicom.inject import BurnInResult, burn_in, encode, plan_dataset
from monai_forget.dicom.manifest import check_manifest_target, manifest_paths, write_manifest
from monai_forget.dicom.names import display_name
from monai_forget.dicom.options import BurnInOptions, as_options
from monai_forget.dicom.publish import Published, inject_and_publish
from monai_forget.dicom.record import ManifestRecord
from monai_forget.dicom.staging import sweep_stale_staging

__all__ = [
    "EXTRA_HINT",
    "SUPPORTED_PHOTOMETRIC",
    "BurnInOptions",
    "BurnInResult",
    "InjectionError",
    "ManifestRecord",
    "NotAnImageError",
    "Published",
    "TextHasher",
    "as_options",
    "burn_in",
    "check_manifest_target",
    "colour_white",
    "display_name",
    "encode",
    "inject_and_publish",
    "inject_any",
    "inject_file",
    "inject_nifti",
    "inject_png",
    "inject_tree",
    "manifest_paths",
    "monochrome_white",
    "plan_dataset",
    "read_dataset",
    "stage_tree",
    "stored_range",
    "sweep_stale_staging",
    "write_manifest",
]
