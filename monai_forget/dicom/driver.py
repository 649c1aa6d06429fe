"""One file in, one file out: the skeleton every format (DICOM, NIfTI, PNG) goes through.

1. path checks: the input exists, the output is not the input (same path, symbolic
   link or hard link, refused even with ``overwrite``), an existing output needs
   ``overwrite``;
2. plan: the format reads the file and checks text, scale, fit and frames without
   changing anything;
3. render: the format draws and encodes the new file in memory;
4. write: atomically, and without ``overwrite`` never over a file that appeared
   meanwhile (see :func:`monai_forget.io.atomic_write`); skipped by a dry run;
5. record: one :class:`~monai_forget.dicom.record.ManifestRecord`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from monai_forget.dicom.decode import read_dataset
from monai_forget.dicom.errors import InjectionError
from monai_forget.dicom.hashing import TextHasher
from monai_forget.dicom.inject import plan_dataset
from monai_forget.dicom.options import BurnInOptions
from monai_forget.dicom.raster import is_nifti, is_png, plan_nifti, plan_png
from monai_forget.dicom.record import ManifestRecord, Rendered, TextBox
from monai_forget.io import atomic_write, check_writable


class Plan(Protocol):
    """A checked burn-in of one file; nothing is drawn or written until ``render``."""

    def render(self) -> Rendered: ...


Planner = Callable[[Path, Path, BurnInOptions], Plan]


def _plan_dicom(src: Path, dst: Path, options: BurnInOptions) -> Plan:
    return plan_dataset(read_dataset(src, check_pixels=False), options, source=src)


def planner_for(path: str | os.PathLike) -> Planner:
    """The format's planner, chosen by file name (DICOM for anything else)."""
    if is_png(path):
        return plan_png
    if is_nifti(path):
        return plan_nifti
    return _plan_dicom


def check_not_input(src: Path, dst: Path) -> None:
    """Refuse an output that is the input: same path, a symbolic link or a hard link.

    Raises:
        InjectionError: always, whatever ``overwrite`` says.
    """
    try:
        same = src.resolve() == dst.resolve() or os.path.samefile(src, dst)
    except OSError:  # the output does not exist yet
        same = False
    if same:
        raise InjectionError(
            f"output {dst} is the input {src} (the same file, directly or through a "
            "link); the input is never modified, even with `overwrite`"
        )


def _format_name(path: Path) -> str:
    return "a PNG" if is_png(path) else "a NIfTI volume" if is_nifti(path) else "DICOM"


def check_same_format(src: Path, dst: Path) -> None:
    """Refuse an output whose name says another format than the input's: the output
    keeps the input's format, so ``scan.nii.gz -> out.png`` would write NIfTI bytes
    under a PNG name.

    Raises:
        InjectionError: naming both formats and the suffix to use.
    """
    have, named = _format_name(src), _format_name(dst)
    if have != named:
        suffix = {"a PNG": ".png", "a NIfTI volume": ".nii or .nii.gz"}.get(
            have, "a name that does not end in .png, .nii or .nii.gz (e.g. .dcm)"
        )
        raise InjectionError(
            f"output {dst} is named as {named} but the input {src} is {have}; the output "
            f"keeps the input's format: give it {suffix}"
        )


def _named(err: ValueError, src: Path) -> InjectionError:
    """The refusal with the file's name in front (folder runs touch many files)."""
    if isinstance(err, InjectionError) and str(src) in str(err):
        return err
    kind = type(err) if isinstance(err, InjectionError) else InjectionError
    return kind(f"{src}: {err}")


@dataclass(frozen=True)
class Prepared:
    """A rendered output held in memory: its bytes and its manifest record."""

    dst: Path
    payload: bytes
    record: ManifestRecord

    def write(self, overwrite: bool = False, durable: bool = True) -> ManifestRecord:
        """Write the bytes atomically to ``dst`` and return the record."""
        with atomic_write(self.dst, "wb", overwrite=overwrite, durable=durable) as handle:
            handle.write(self.payload)
        return self.record


def prepare(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    options: BurnInOptions | None = None,
    *,
    overwrite: bool = False,
    hasher: TextHasher | None = None,
    planner: Planner | None = None,
) -> Prepared:
    """Check, plan and render one file without writing anything.

    Raises:
        InjectionError, FileNotFoundError, FileExistsError: with the file named.
    """
    src, dst = Path(src), Path(dst)
    if not src.is_file():
        raise FileNotFoundError(f"{src} does not exist or is not a file")
    check_not_input(src, dst)
    check_writable(dst, overwrite)
    if dst.is_dir():
        raise InjectionError(f"output {dst} is a folder; name the output file instead")
    if planner is None:
        check_same_format(src, dst)
    planner = planner or planner_for(src)
    try:
        rendered = planner(src, dst, options or BurnInOptions()).render()
    except (ValueError, OSError) as err:  # Pillow's encoders raise OSError
        raise _named(err, src) from err
    record = ManifestRecord(
        "injected",
        str(src),
        str(dst),
        hashlib.sha256(rendered.payload).hexdigest(),
        box=TextBox.burned(rendered, hasher or TextHasher()),
        recoding=rendered.recoding,
    )
    return Prepared(dst, rendered.payload, record)


def inject_any(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    options: BurnInOptions | None = None,
    *,
    overwrite: bool = False,
    dry_run: bool = False,
    hasher: TextHasher | None = None,
    durable: bool = True,
    planner: Planner | None = None,
) -> ManifestRecord:
    """Burn text into one file (PNG, NIfTI or DICOM by its name) and write it atomically.

    ``src`` is only read. With ``dry_run`` every check, the burn-in and the encoding
    run in memory but nothing is written (``output_sha256`` is then empty).
    ``durable=False`` skips the per-file fsync (for files staged in a private folder
    that is synced once and published by rename).

    Raises:
        InjectionError, FileNotFoundError, FileExistsError: nothing is written.
    """
    prepared = prepare(src, dst, options, overwrite=overwrite, hasher=hasher, planner=planner)
    if dry_run:
        return prepared.record.replace(output_sha256="")
    return prepared.write(overwrite, durable)


def inject_file(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    options: BurnInOptions | None = None,
    **kwargs: Any,
) -> ManifestRecord:
    """:func:`inject_any` for a DICOM file, whatever its name."""
    return inject_any(src, dst, options, planner=_plan_dicom, **kwargs)


def inject_nifti(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    options: BurnInOptions | None = None,
    **kwargs: Any,
) -> ManifestRecord:
    """:func:`inject_any` for a NIfTI volume (same header and affine on output)."""
    return inject_any(src, dst, options, planner=plan_nifti, **kwargs)


def inject_png(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    options: BurnInOptions | None = None,
    **kwargs: Any,
) -> ManifestRecord:
    """:func:`inject_any` for a PNG (full-range white, alpha made opaque)."""
    return inject_any(src, dst, options, planner=plan_png, **kwargs)
