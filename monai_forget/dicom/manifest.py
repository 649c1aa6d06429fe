"""The manifest of every file the injector wrote: JSON and CSV twins.

The JSON holds every value as it is. In the CSV, a text cell that a spreadsheet would
run as a formula is neutralised (:func:`monai_forget.io.csv_cell`).
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path

from monai_forget import __version__
from monai_forget.canary import TYPEFACE
from monai_forget.dicom.errors import InjectionError
from monai_forget.dicom.hashing import TextHasher
from monai_forget.dicom.record import ManifestRecord
from monai_forget.io import atomic_write, check_writable, csv_cell


def manifest_paths(prefix: str | os.PathLike) -> tuple[Path, Path]:
    """The JSON and CSV paths for a manifest prefix (``out`` -> ``out.manifest.json``)."""
    prefix = Path(prefix)
    return (
        prefix.with_name(prefix.name + ".manifest.json"),
        prefix.with_name(prefix.name + ".manifest.csv"),
    )


def probe_folder(path: str | os.PathLike, what: str) -> None:
    """Refuse when no file can be created in the folder that would hold ``path``.

    The nearest existing folder is tried by creating and removing a temporary file
    (permission bits alone miss read-only mounts and ACLs). Missing folders below it
    are not created.

    Raises:
        InjectionError: naming the folder and the reason.
    """
    folder = Path(path).absolute().parent
    while not folder.exists():
        folder = folder.parent
    try:
        if not folder.is_dir():
            raise NotADirectoryError(f"{folder} is not a folder")
        with tempfile.TemporaryFile(dir=folder, prefix=".monai-forget-probe."):
            pass
    except OSError as err:
        raise InjectionError(
            f"cannot write the {what} {path} ({err.strerror or err}); "
            "nothing was written: choose a writable location"
        ) from err


def check_manifest_target(prefix: str | os.PathLike, overwrite: bool = False) -> tuple[Path, Path]:
    """Refuse a manifest that could not be written, before any output is written.

    Raises:
        FileExistsError: a manifest file exists and ``overwrite`` is false.
        InjectionError: its folder is not writable.
    """
    paths = manifest_paths(prefix)
    probe_folder(paths[0], "manifest")  # first: its message names the manifest
    for path in paths:
        check_writable(path, overwrite)
    return paths


def write_manifest(
    records: Iterable[ManifestRecord | Mapping],
    prefix: str | os.PathLike,
    hasher: TextHasher,
    overwrite: bool = False,
) -> tuple[Path, Path]:
    """Write ``records`` to ``<prefix>.manifest.json`` and ``<prefix>.manifest.csv``.

    The JSON holds a header (tool version, time, typeface, how the text is recorded)
    and the records; the CSV holds one row per record. Both are checked (existence and
    a writable folder) before either is written, and both are written atomically.

    Returns:
        The JSON and CSV paths.
    """
    rows = [r.to_dict() if isinstance(r, ManifestRecord) else dict(r) for r in records]
    json_path, csv_path = check_manifest_target(prefix, overwrite)
    document = {
        "tool": "monai-forget canary inject",
        "version": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "typeface": TYPEFACE,
        "text_field": hasher.field,
        "text_recording": "plain text"
        if hasher.plain_text
        else (f"HMAC-SHA256 with a salt that is {hasher.salt_source}"),
        "records": rows,
    }
    columns: list[str] = []
    for row in rows:
        columns.extend(k for k in row if k not in columns)
    table = io.StringIO()
    writer = csv.DictWriter(table, fieldnames=columns, lineterminator="\n")
    # Python 3.11's csv leaves a lone carriage return unquoted when lines end in "\n",
    # which a spreadsheet reads as a new row: quote every cell of such a row.
    quoting = csv.DictWriter(table, columns, lineterminator="\n", quoting=csv.QUOTE_ALL)
    writer.writeheader()
    for row in rows:
        cells = {k: csv_cell(v) for k, v in row.items()}
        has_cr = any(isinstance(v, str) and "\r" in v for v in cells.values())
        (quoting if has_cr else writer).writerow(cells)
    with atomic_write(json_path, "w", overwrite=overwrite) as handle:
        json.dump(document, handle, indent=2)
        handle.write("\n")
    with atomic_write(csv_path, "w", overwrite=overwrite) as handle:
        handle.write(table.getvalue())
    return json_path, csv_path


def manifest_placement(
    path: str | os.PathLike, font: str | None = None, font_size: int | None = None
) -> dict:
    """Where and how the injector burned its text, from a ``.manifest.json``: the text
    box's ``position`` (row, col), glyph ``scale``, and for TrueType text its ``font``
    and ``font_size`` (else ``None``), the same for every injected file (what a leak scan
    of those canaries must burn on its probes); ``files``, how many files carry it; and
    ``legible``: whether every canary was measured legible at the model input (``None``
    when the injector did not measure it: no ``--bundle``), and ``input_shape``: the
    model input it was measured at (``None`` when not measured).

    Args:
        path: the manifest.
        font, font_size: a font the caller was also given; refused when the manifest's
            differs (a scan in another font than the canary's looks for another feature).

    Raises:
        FileNotFoundError: no such manifest.
        ValueError: not an injector manifest, no injected file, files burned at
            different places or scales (scan each placement on its own), or a ``font`` /
            ``font_size`` that is not the manifest's.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; pass the .manifest.json of canary inject")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        records = document["records"]
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path} is not a canary inject manifest (JSON with 'records')") from err
    injected = [r for r in records if r.get("action") == "injected"]
    if not injected:
        raise ValueError(f"{path} records no injected file; nothing was burned in")
    placements = {
        (r["bbox_row"], r["bbox_col"], r["scale"], r.get("font"), r.get("font_size"))
        for r in injected
    }
    if len(placements) > 1:
        raise ValueError(
            f"{path}: the files were burned at {len(placements)} places, scales or fonts; "
            "scan each placement with `position` and `scale` (or `font` and `font_size`)"
        )
    ((row, col, scale, burned_font, burned_size),) = placements
    if (font is not None and font != burned_font) or (
        font_size is not None and font_size != burned_size
    ):
        raise ValueError(
            f"the font given ({font or 'the 5x5 typeface'}"
            + (f", {font_size} px" if font_size else "")
            + f") is not the one {path} records ({burned_font or 'the 5x5 typeface'}"
            + (f", {burned_size} px" if burned_size else "")
            + "); drop the font options to scan in the manifest's, or drop the manifest"
        )
    measured = [r["legible"] for r in injected if "legible" in r]
    shapes = {tuple(r["legibility_input_shape"]) for r in injected if "legibility_input_shape" in r}
    return {
        "position": (int(row), int(col)),
        "scale": int(scale),
        "typeface": injected[0].get("typeface", document.get("typeface")),
        "font": burned_font,
        "font_size": None if burned_size is None else int(burned_size),
        "files": len(injected),
        "legible": all(measured) if len(measured) == len(injected) else None,
        "input_shape": shapes.pop() if len(shapes) == 1 else None,
    }


def check_model_input(placement: dict, input_shape: Sequence[int], manifest: str) -> None:
    """Refuse a scan whose model input is not the one the injector measured the canary at
    (a bundle read without the parameters the model was trained with, e.g. its
    ``image_size``): its legibility would be quoted for another pipeline.

    Raises:
        ValueError: both shapes named, and the fix.
    """
    measured = placement.get("input_shape")
    if measured is None or tuple(measured[-2:]) == tuple(input_shape[-2:]):
        return
    raise ValueError(
        f"{manifest} measured its canary at a {measured[-2]}x{measured[-1]} model input, but "
        f"this scan's bundle delivers {input_shape[-2]}x{input_shape[-1]}; pass the bundle "
        "parameters the model was trained with (`bundle_set`, e.g. image_size=128), as "
        "canary inject was given them"
    )


def manifest_canaries(path: str | os.PathLike) -> dict[str, int]:
    """The canary texts a manifest records in plain text, each with the number of files
    it was burned into (``canary inject --random-canaries`` records them so).

    Raises:
        FileNotFoundError, ValueError: as :func:`manifest_placement`; also a manifest
            whose texts are hashed (the audit must know the planted texts).
    """
    manifest_placement(path)  # the checks: a manifest, something injected, one placement
    records = json.loads(Path(path).read_text(encoding="utf-8"))["records"]
    injected = [r for r in records if r.get("action") == "injected"]
    if any("text" not in r for r in injected):
        raise ValueError(
            f"{path} records hashed texts, not the canaries themselves; plant random "
            "canaries with canary inject --random-canaries (it records them in plain text)"
        )
    copies: dict[str, int] = {}
    for record in injected:
        copies[record["text"]] = copies.get(record["text"], 0) + 1
    return copies
