"""Labelled image sets in memory: the container, its loaders, the real data sets and the
D_Q / D_C overlap check.

Every auditor consumes a :class:`LabelledImages`. One module per job:

- ``images``: the container (:class:`LabelledImages`, :func:`concat`, seeded split,
  ``to_dataset``), which caches its content hashes.
- ``readers``: :func:`load_images` for a folder of class sub-folders, ``.npz`` or a MONAI
  datalist; every image file goes through MONAI's ``LoadImage``.
- ``datasets``: :func:`data_root` and the real data sets (digits, PneumoniaMNIST, MNIST
  test, ACDC slices).
- ``acdc``: :data:`ACDC_GROUPS`, the one ACDC class order of the package.
- ``overlap``: :func:`check_disjoint` and :func:`without_overlap`.

Names are imported on first use (PEP 562), so ``monai_forget.data.acdc`` loads without
torch (``monai-forget prepare`` needs only the ACDC order).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from monai_forget.data.acdc import ACDC_GROUPS, acdc_label
    from monai_forget.data.datasets import (
        data_root,
        load_acdc_slices,
        load_digits,
        load_mnist_test,
        load_pneumoniamnist,
    )
    from monai_forget.data.images import LabelledImages, concat
    from monai_forget.data.overlap import DataOverlapError, check_disjoint, without_overlap
    from monai_forget.data.readers import IMAGE_SUFFIXES, load_images

__all__ = [
    "ACDC_GROUPS",
    "IMAGE_SUFFIXES",
    "DataOverlapError",
    "LabelledImages",
    "acdc_label",
    "check_disjoint",
    "concat",
    "data_root",
    "load_acdc_slices",
    "load_digits",
    "load_images",
    "load_mnist_test",
    "load_pneumoniamnist",
    "without_overlap",
]

_MODULE_OF = {
    "ACDC_GROUPS": "acdc",
    "acdc_label": "acdc",
    "LabelledImages": "images",
    "concat": "images",
    "IMAGE_SUFFIXES": "readers",
    "load_images": "readers",
    "data_root": "datasets",
    "load_acdc_slices": "datasets",
    "load_digits": "datasets",
    "load_mnist_test": "datasets",
    "load_pneumoniamnist": "datasets",
    "DataOverlapError": "overlap",
    "check_disjoint": "overlap",
    "without_overlap": "overlap",
}


def __getattr__(name: str) -> Any:
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_MODULE_OF[name]}"), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
