"""Small readers for the text tables the dataset layouts ship (CSV, key: value files).

Every error names the file and the 1-based line number, so a user can fix the input.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator, Sequence
from pathlib import Path

from monai_forget.io import check_readable


def read_csv_rows(
    path: str | Path, required: Sequence[str], what: str = "CSV file"
) -> Iterator[tuple[int, dict[str, str]]]:
    """Yield ``(line_number, row)`` for each data row of a header-led CSV file.

    Args:
        path: the CSV file (read only).
        required: column names that must appear in the header.
        what: a short description used in error messages ("site map", ...).

    Raises:
        IsADirectoryError: ``path`` is a folder.
        FileNotFoundError: ``path`` does not exist.
        ValueError: a required column is missing, or a row has the wrong number of fields
            or an empty required field (the message names the line).
    """
    path = check_readable(path, what)
    # Lines are decoded one by one, so a byte that is not UTF-8 is reported with its line.
    reader = csv.reader(text_lines(path, what))
    header = next(reader, None)
    if header is None:
        raise ValueError(f"{what} {path} is empty; expected a header with {list(required)}")
    header = [name.strip() for name in header]
    missing = [name for name in required if name not in header]
    if missing:  # the line itself is not shown: the file may not be a table at all
        raise ValueError(
            f"{what} {path}, line 1: the header ({len(header)} column(s)) lacks "
            f"column(s) {missing}; the first line must name the columns {list(required)}"
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
    return [text for _, text in read_id_lines(path, what)]


def read_id_lines(path: str | Path, what: str = "patient list") -> list[tuple[int, str]]:
    """``(line_number, identifier)`` for each identifier of a one-per-line list.

    Raises:
        IsADirectoryError: ``path`` is a folder.
        FileNotFoundError: ``path`` does not exist.
        ValueError: the file is not UTF-8 text (the message names the line).
    """
    path = check_readable(path, what)
    ids = []
    for number, raw in enumerate(text_lines(path, what), start=1):
        text = raw.split("#", 1)[0].strip()
        if text:
            ids.append((number, text))
    return ids


def read_text_lines(path: Path, what: str) -> list[str]:
    """The lines of a UTF-8 text file, without line ends."""
    return [line.rstrip("\r\n") for line in text_lines(path, what)]


def text_lines(path: Path, what: str) -> Iterator[str]:
    """The lines of a UTF-8 text file (a leading BOM dropped), each with its line end.

    Raises:
        ValueError: a line is not UTF-8; the message names the file and the line, not
            its content.
    """
    with Path(path).open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                yield raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError:
                raise ValueError(
                    f"{what} {path}, line {number}: not UTF-8 text; save the file as UTF-8"
                ) from None
