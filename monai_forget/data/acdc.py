"""The ACDC pathology classes: one label order for every ACDC path in the package.

The federated ACDC runs (:func:`monai_forget.data.load_acdc_slices`), the datalists
``monai-forget prepare`` writes for the MONAI bundle and the bundle's metadata all
number the groups this way, so a model trained through one path and audited through
another sees the same labels. This module imports nothing heavy, so data preparation
can use it without loading torch.
"""

from __future__ import annotations

__all__ = ["ACDC_GROUPS", "acdc_label"]

#: ACDC pathology groups in class-index order, normal first (as the bundle's metadata).
ACDC_GROUPS = ("NOR", "MINF", "DCM", "HCM", "RV")


def acdc_label(group: str, where: str) -> int:
    """Class index of an ACDC pathology group in :data:`ACDC_GROUPS`.

    Args:
        group: Group name as written by ACDC (``"NOR"``, ``"MINF"``, ...).
        where: The file (and line) the group was read from, for the error message.

    Raises:
        ValueError: an unknown group.
    """
    if group not in ACDC_GROUPS:
        raise ValueError(
            f"{where}: unknown pathology group {group!r}; expected one of {ACDC_GROUPS}"
        )
    return ACDC_GROUPS.index(group)
