"""Rosters of candidate names for a leak scan: reading them and refusing bad entries.

Roster names are personal data. Errors about an entry name its place (the entry number,
and the line of the CSV file it came from) and what is wrong with it (a character the
typeface lacks, a length that does not fit), never the name itself.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from pathlib import Path

from monai_forget.canary import unsupported_characters
from monai_forget.canary.font import TYPEFACE
from monai_forget.canary.lettering import BitmapLettering, Lettering, as_lettering

__all__ = ["Roster", "check_names", "entry_places", "read_roster"]


class Roster(list):
    """Names read from a CSV roster (a ``list[str]``) that remember their lines.

    Attributes:
        lines: the 1-based line of the file each name came from.
        source: the file's name (no folder), for error messages.
        patients: each name's patient ID, when the roster was read with a patient
            column (scans with patient references need it), else ``None``.
    """

    def __init__(
        self,
        names: Sequence[str],
        lines: Sequence[int],
        source: str,
        patients: Sequence[str] | None = None,
    ) -> None:
        super().__init__(names)
        self.lines = list(lines)
        self.source = source
        self.patients = None if patients is None else list(patients)


def _where(names: Sequence[str], i: int) -> str:
    """Where entry ``i`` is: ``entry 7 (line 8 of roster.csv)``; never its content."""
    lines = getattr(names, "lines", None)
    if lines is not None and i < len(lines):
        return f"entry {i + 1} (line {lines[i]} of {names.source})"
    return f"entry {i + 1}"


def entry_places(names: Sequence[str], indices: Sequence[int], limit: int = 3) -> str:
    """Where the entries ``indices`` are (the first ``limit``, then how many more)."""
    shown = ", ".join(_where(names, i) for i in indices[:limit])
    return shown + (f" and {len(indices) - limit} more" if len(indices) > limit else "")


def read_roster(
    path: str | os.PathLike, column: str | None = None, patient_column: str | None = None
) -> Roster:
    """Candidate names from a CSV roster.

    The file has a header row. ``column`` names the column to read (matched
    case-insensitively); by default the ``name`` column, or the only column of a
    one-column file. Blank cells are skipped; surrounding whitespace is removed.
    ``patient_column`` (optional) names the column of each name's patient ID, kept in
    :attr:`Roster.patients`.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: no such column, no names, or a name without a patient ID.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"roster {path} does not exist")
    try:
        return _read_roster(path, column, patient_column)
    except UnicodeDecodeError:
        utf16 = path.read_bytes()[:2] in (b"\xff\xfe", b"\xfe\xff")
        raise ValueError(
            f"roster {path} is not UTF-8 text"
            + (" (it is UTF-16, as some spreadsheets save 'Unicode text')" if utf16 else "")
            + "; save it as CSV UTF-8"
        ) from None


def _read_roster(path: Path, column: str | None, patient_column: str | None) -> Roster:
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        fields = [c for c in (reader.fieldnames or []) if c is not None]
        lookup = {c.strip().lower(): c for c in fields}
        if column is not None:
            key = lookup.get(column.strip().lower())
        elif "name" in lookup:
            key = lookup["name"]
        elif len(fields) == 1:
            key = fields[0]
        else:
            key = None
        if key is None:  # the header is not shown: the file may not be a roster at all
            raise ValueError(
                f"roster {path}, line 1: {len(fields)} column(s) and none is 'name'; pass the "
                "column holding the names (`column`), or add a 'name' header"
            )
        patient_key = None
        if patient_column is not None:
            patient_key = lookup.get(patient_column.strip().lower())
            if patient_key is None:
                raise ValueError(
                    f"roster {path}, line 1: no column {patient_column!r} for the patient IDs; "
                    "pass the column that holds them (`patient_column`)"
                )
        names, lines, patients = [], [], []
        for row in reader:
            name = (row.get(key) or "").strip()
            if name:
                names.append(name)
                lines.append(reader.line_num)
                patients.append((row.get(patient_key) or "").strip() if patient_key else "")
    if not names:
        raise ValueError(f"roster {path} has no names in column {key!r}")
    if patient_key is None:
        return Roster(names, lines, path.name)
    missing = [f"line {line}" for line, p in zip(lines, patients, strict=True) if not p]
    if missing:
        raise ValueError(
            f"roster {path}: {len(missing)} name(s) without a patient ID in column "
            f"{patient_key!r} ({', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}); "
            "fill them in"
        )
    return Roster(names, lines, path.name, patients)


def check_names(
    names: Sequence[str],
    position: Sequence[int],
    scale: int | Lettering,
    image_hw: Sequence[int],
) -> list[str]:
    """The names, stripped, after refusing empty, duplicate, unrenderable or too long ones
    (``scale``: the 5x5 typeface's, or a TrueType lettering).

    Raises:
        ValueError: naming the entries (and roster lines) at fault and the fix; the
            names themselves are not repeated.
    """
    stripped = [str(n).strip() for n in names]
    if not stripped:
        raise ValueError("the roster must hold at least one name")
    empty = [i for i, n in enumerate(stripped) if not n]
    if empty:
        raise ValueError(f"{entry_places(names, empty)} of the roster is empty; remove it")
    first: dict[str, int] = {}
    for i, n in enumerate(stripped):
        if n in first:
            raise ValueError(
                f"{_where(names, i)} repeats {_where(names, first[n])} of the roster; "
                "remove the duplicate"
            )
        first[n] = i
    lettering = as_lettering(scale)
    bitmap = isinstance(lettering, BitmapLettering)
    for i, n in enumerate(stripped):
        missing = unsupported_characters(n) if bitmap else [c for c in n if not c.isprintable()]
        if missing and not bitmap:
            raise ValueError(f"{_where(names, i)} of the roster has an unprintable character")
        if missing:
            raise ValueError(
                f"{_where(names, i)} of the roster has {len(missing)} character(s) outside the "
                f"{TYPEFACE} typeface (A-Z a-z 0-9 space ^ , . - '); transliterate the "
                "name or drop it"
            )
    row, col = (int(p) for p in position)
    rows, cols = (int(s) for s in image_hw)
    too_long = []
    for i, n in enumerate(stripped):
        h, w = lettering.shape(len(n))
        if row < 0 or col < 0 or row + h > rows or col + w > cols:
            too_long.append(i)
    if too_long:
        fit = 0
        while col + lettering.shape(fit + 1)[1] <= cols:
            fit += 1
        how = f"scale {lettering.scale}" if bitmap else lettering.describe()
        raise ValueError(
            f"{len(too_long)} roster name(s) do not fit {rows}x{cols} probes at (row {row}, "
            f"col {col}) with {how} ({entry_places(names, too_long)}); at most {fit} "
            "characters fit: use a smaller scale, another position, or larger probes"
        )
    return stripped
