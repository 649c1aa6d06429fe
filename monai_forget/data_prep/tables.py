"""Small readers for the text tables the dataset layouts ship (CSV, key: value files).

Every error names the file and the 1-based line number, so a user can fix the input.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator, Sequence
from pathlib import Path


def read_csv_rows(
    path: str | Path, required: Sequence[str], what: str = "CSV file"
) -> Iterator[tuple[int, dict[str, str]]]:
    """Yield ``(line_number, row)`` for each data row of a header-led CSV file.

    Args:
        path: the CSV file (read only).
        required: column names that must appear in the header.
        what: a short description used in error messages ("site map", ...).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: a required column is missing, or a row has the wrong number of fields
            or an empty required field (the message names the line).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} {path} not found")
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            raise ValueError(f"{what} {path} is empty; expected a header with {list(required)}")
        header = [name.strip() for name in header]
        missing = [name for name in required if name not in header]
        if missing:
            raise ValueError(
                f"{what} {path}: header {header} lacks column(s) {missing}; "
                f"the first line must name the columns {list(required)}"
            )
        for fields in reader:
            line = reader.line_num
            if not any(field.strip() for field in fields):
                continue  # blank lines are harmless
            if len(fields) != len(header):
                raise ValueError(
                    f"{what} {path}, line {line}: {len(fields)} field(s), expected "
                    f"{len(header)} ({', '.join(header)})"
                )
            row = {name: value.strip() for name, value in zip(header, fields, strict=True)}
            empty = [name for name in required if not row[name]]
            if empty:
                raise ValueError(f"{what} {path}, line {line}: empty field(s) {empty}")
            yield line, row


def read_id_list(path: str | Path, what: str = "patient list") -> list[str]:
    """Read one identifier per line (blank lines and ``#`` comments ignored)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} {path} not found")
    ids = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        text = raw.split("#", 1)[0].strip()
        if text:
            ids.append(text)
    return ids
