"""Keep the query set D_Q and the calibration set D_C apart, by image content.

Samples are compared by content hash (:attr:`LabelledImages.sample_hashes
<monai_forget.data.LabelledImages.sample_hashes>`), so copies are found whatever their
ids or order; images differing in a single pixel are different samples.
"""

from __future__ import annotations

import numpy as np

from monai_forget.data.images import LabelledImages

__all__ = ["DataOverlapError", "check_disjoint", "without_overlap"]


class DataOverlapError(ValueError):
    """The query set D_Q and the calibration set D_C share samples."""


def check_disjoint(
    query: LabelledImages,
    calibration: LabelledImages,
    names: tuple[str, str] = ("query set", "calibration set"),
    symbols: tuple[str, str] = ("D_Q", "D_C"),
) -> None:
    """Refuse two sets that share any sample (by default the query set D_Q and the
    calibration set D_C).

    Args:
        query: the first set.
        calibration: the second set, from which the fix removes the shared samples.
        names: what the two sets are, for the message (``"known non-members"``).
        symbols: their short names in the examples (``D_Q[3] = D_C[8]``).

    Raises:
        DataOverlapError: Some samples of the first set also appear in the second.
    """
    q_hash = query.sample_hashes
    c_hash = calibration.sample_hashes
    overlap = np.flatnonzero(np.isin(q_hash, c_hash))
    if overlap.size == 0:
        return
    first_c = {h: i for i, h in reversed(list(enumerate(c_hash)))}
    shown = [
        _describe(query, int(i), symbols[0])
        + " = "
        + _describe(calibration, first_c[q_hash[i]], symbols[1])
        for i in overlap[:5]
    ]
    raise DataOverlapError(
        f"{overlap.size} of {len(query)} samples of the {names[0]} also appear in the "
        f"{names[1]} (e.g. {'; '.join(shown)}); remove these samples from the {names[1]}: "
        f"the {names[0]} and the {names[1]} must share no sample"
    )


def without_overlap(
    data: LabelledImages, reference: LabelledImages, name: str = "calibration set"
) -> LabelledImages:
    """``data`` without the samples whose pixels equal those of a sample of ``reference``.

    Public data sets hold exact duplicates across splits (PneumoniaMNIST has images
    present in both its training and validation splits); a calibration set D_C must
    share no sample with D_Q, so such copies are dropped, by content hash, and counted
    in a printed message.

    Args:
        data: The set to clean (e.g. the calibration set).
        reference: The set whose samples must not appear in ``data`` (the query set).
        name: What ``data`` is, for the messages.

    Raises:
        ValueError: nothing is left.
    """
    keep = ~np.isin(data.sample_hashes, reference.sample_hashes)
    if keep.all():
        return data
    if not keep.any():
        raise ValueError(f"every sample of the {name} also appears in the query set")
    dropped = np.flatnonzero(~keep)
    examples = [data.ids[i] for i in dropped[:3]] if data.ids else dropped[:3].tolist()
    print(
        f"{name}: dropped {len(dropped)} of {len(data)} samples identical to a query sample "
        f"(e.g. {examples})"
    )
    return data.subset(keep)


def _describe(data: LabelledImages, i: int, name: str) -> str:
    return f"{name}[{i}]" + (f" ({data.ids[i]})" if data.ids else "")
