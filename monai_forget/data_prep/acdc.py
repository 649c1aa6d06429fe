"""What both ACDC layouts share: the patient-id pattern and the ``Info.cfg`` parser.

The pathology class order is :data:`monai_forget.data.acdc.ACDC_GROUPS`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from monai_forget.checks import Interval, check_in
from monai_forget.data.acdc import acdc_label
from monai_forget.data_prep.tables import read_text_lines

#: ``patientNNN`` as used by every ACDC release
PATIENT_RE = re.compile(r"^patient\d{3}$")

_INFO_FIELDS = ("ED", "ES", "Group", "Height", "NbFrame", "Weight")


@dataclass(frozen=True)
class Info:
    """The fields of an ACDC ``Info.cfg``: frames are 1-based, as in the file names."""

    ed: int
    es: int
    group: str
    height: float
    nb_frame: int
    weight: float


def read_info(path: str | Path) -> Info:
    """Parse an ACDC ``Info.cfg`` (``Key: value`` lines).

    Raises:
        IsADirectoryError: a folder stands where the file should be.
        FileNotFoundError: the file is missing.
        ValueError: a malformed line (with its number), a missing or non-numeric field,
            an unknown group, or ED/ES outside ``1..NbFrame``.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder; Info.cfg must be a file")
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found; every ACDC patient folder needs an Info.cfg with "
            f"{', '.join(_INFO_FIELDS)}"
        )
    values: dict[str, str] = {}
    for number, raw in enumerate(read_text_lines(path, "ACDC"), start=1):
        if not raw.strip():
            continue
        key, sep, value = raw.partition(":")
        if not sep or not key.strip():
            raise ValueError(f"{path}, line {number}: expected 'Key: value'")
        values[key.strip()] = value.strip()
    missing = [key for key in _INFO_FIELDS if not values.get(key)]
    if missing:
        raise ValueError(f"{path}: missing field(s) {missing}; expected {list(_INFO_FIELDS)}")

    def number(key: str) -> float:
        try:
            value = float(values[key])
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise ValueError(f"{path}: field {key} is not a number")
        return value

    def integer(key: str) -> int:
        value = number(key)
        if not value.is_integer():
            raise ValueError(f"{path}: field {key} is not a whole number")
        return int(value)

    info = Info(
        ed=integer("ED"),
        es=integer("ES"),
        group=values["Group"],
        height=number("Height"),
        nb_frame=integer("NbFrame"),
        weight=number("Weight"),
    )
    acdc_label(info.group, str(path))
    for key, frame in (("ED", info.ed), ("ES", info.es)):
        check_in(f"{path}: {key}", frame, Interval(1, info.nb_frame, "both", integer=True),
                 "a frame of NbFrame")  # fmt: skip
    return info
