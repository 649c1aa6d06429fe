"""Directory mode: a folder tree in, a mirrored tree out, one canary or all files."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from monai_forget.dicom.decode import read_dataset
from monai_forget.dicom.errors import InjectionError, NotAnImageError
from monai_forget.dicom.hashing import TextHasher
from monai_forget.dicom.inject import BurnInOptions, inject_file
from monai_forget.dicom.raster import inject_nifti, inject_png, is_nifti, is_png
from monai_forget.io import atomic_write, sync_all

Progress = Callable[[Iterable[Path]], Iterable[Path]]


def inject_any(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    options: BurnInOptions,
    *,
    overwrite: bool = False,
    dry_run: bool = False,
    hasher: TextHasher | None = None,
    durable: bool = True,
) -> dict:
    """Burn text into one file, choosing PNG, NIfTI or DICOM by the file name.

    ``durable=False`` skips the per-file fsync (for files staged in a private folder
    that is synced once and published by rename).
    """
    if is_png(src):
        injector = inject_png
    elif is_nifti(src):
        injector = inject_nifti
    else:
        injector = inject_file
    return injector(
        src, dst, options, overwrite=overwrite, dry_run=dry_run, hasher=hasher, durable=durable
    )


def _is_image(path: Path) -> bool:
    if is_png(path) or is_nifti(path):
        return True
    try:
        read_dataset(path)
    except NotAnImageError:
        return False
    return True


def _copy(src: Path, dst: Path, final: Path) -> dict:
    """Copy ``src`` byte for byte (atomically, hashing on the way) and record it."""
    digest = hashlib.sha256()
    with open(src, "rb") as source, atomic_write(dst, "wb", durable=False) as target:
        for chunk in iter(lambda: source.read(1 << 20), b""):
            digest.update(chunk)
            target.write(chunk)
    return {
        "action": "copied",
        "input": str(src),
        "output": str(final),
        "output_sha256": digest.hexdigest(),
    }


def _check_paths(src: Path, dst: Path, overwrite: bool) -> None:
    if not src.is_dir():
        raise FileNotFoundError(f"{src} is not a folder")
    s, d = src.resolve(), dst.resolve()
    if d == s or s in d.parents or d in s.parents:
        raise InjectionError(
            f"output folder {dst} overlaps input folder {src}; choose a separate folder"
        )
    if dst.exists() and not dst.is_dir():
        raise FileExistsError(f"{dst} is a file; a folder input needs an output folder")
    if dst.exists() and any(dst.iterdir()) and not overwrite:
        raise FileExistsError(
            f"{dst} already exists and is not empty; pass overwrite=True (CLI: --overwrite)"
        )


def _choose_canary(src: Path, files: list[Path], canary: str | None) -> Path:
    if canary is not None:
        chosen = src / canary
        if chosen not in files:
            raise FileNotFoundError(f"canary {canary} is not a file inside {src}")
        return chosen
    for path in files:
        if _is_image(path):
            return path
    raise InjectionError(f"{src} holds no DICOM, NIfTI or PNG image to use as the canary")


def inject_tree(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    options: BurnInOptions,
    *,
    all_files: bool = False,
    canary: str | None = None,
    overwrite: bool = False,
    dry_run: bool = False,
    hasher: TextHasher | None = None,
    progress: Progress | None = None,
) -> list[dict]:
    """Mirror the folder ``src`` into ``dst``, burning text into one file or all.

    Canary mode (default) burns into one instance — ``canary`` (a path relative to
    ``src``) or the first image in sorted path order — and copies every other file
    unchanged. With ``all_files`` every image is burned into; files that are not images
    (not DICOM, or no pixel data) are copied unchanged. Any other refusal stops the run.

    The tree is built in a hidden staging folder next to ``dst`` and moved into place
    only when every file succeeded, so a failure leaves nothing behind. ``dry_run``
    does all the work in memory and writes nothing.

    Returns:
        One manifest record per file (``action`` ``injected`` or ``copied``).
    """
    src, dst = Path(src), Path(dst)
    _check_paths(src, dst, overwrite)
    hasher = hasher or TextHasher()
    files = sorted(p for p in src.rglob("*") if p.is_file())
    target = None if all_files else _choose_canary(src, files, canary)
    todo: Iterable[Path] = progress(files) if progress else files

    if dry_run:
        records = []
        for path in todo:
            final = dst / path.relative_to(src)
            if target is None or path == target:
                try:
                    records.append(
                        inject_any(
                            path, final, options, overwrite=True, dry_run=True, hasher=hasher
                        )
                    )
                    continue
                except NotAnImageError:
                    if path == target:
                        raise
            records.append({"action": "copied", "input": str(path), "output": str(final)})
        return records

    dst.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", suffix=".partial", dir=dst.parent))
    umask = os.umask(0)
    os.umask(umask)
    stage.chmod(0o777 & ~umask)  # mkdtemp makes it private; the output is a normal folder
    try:
        records = []
        for path in todo:
            rel = path.relative_to(src)
            staged, final = stage / rel, dst / rel
            record = None
            if target is None or path == target:
                try:
                    record = inject_any(path, staged, options, hasher=hasher, durable=False)
                except NotAnImageError:
                    if path == target:
                        raise
            if record is None:
                record = _copy(path, staged, final)
            record["output"] = str(final)
            records.append(record)
        sync_all()  # one flush for the whole staged tree instead of one fsync per file
        _publish(stage, dst, overwrite)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return records


def _publish(stage: Path, dst: Path, overwrite: bool) -> None:
    """Move the staged tree to ``dst``: one rename when ``dst`` is new or empty."""
    if dst.is_dir() and not any(dst.iterdir()):
        dst.rmdir()
    if not dst.exists():
        os.rename(stage, dst)
        return
    for staged in sorted(p for p in stage.rglob("*") if p.is_file()):
        final = dst / staged.relative_to(stage)
        if final.exists() and not overwrite:
            raise FileExistsError(f"{final} already exists; pass --overwrite to replace it")
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staged, final)
    with contextlib.suppress(OSError):
        shutil.rmtree(stage)
