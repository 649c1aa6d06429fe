"""Directory mode: a folder tree in, a mirrored tree out, one canary or all files.

Symbolic links are never followed, inside the tree or out of it: each one (and any
entry that is not a regular file or folder, such as a FIFO) is listed as ``skipped``
with the reason, and nothing is written for it.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import os
import shutil
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from monai_forget.dicom.decode import read_dataset
from monai_forget.dicom.driver import inject_any
from monai_forget.dicom.errors import InjectionError, NotAnImageError
from monai_forget.dicom.hashing import TextHasher
from monai_forget.dicom.options import BurnInOptions
from monai_forget.dicom.pool import ordered_map
from monai_forget.dicom.raster import is_nifti, is_png
from monai_forget.dicom.record import ManifestRecord
from monai_forget.dicom.staging import (
    StagingFolder,
    exit_on_terminate,
    signals_deferred,
    sweep_stale_staging,
)
from monai_forget.io import atomic_write, sync_all

Progress = Callable[[Iterable[Path]], Iterable[Path]]
Report = Callable[[str], None]
_log = logging.getLogger(__name__)


def _raise(err: OSError) -> None:
    raise err  # an unreadable sub-folder must stop the run, not vanish from the mirror


def _link_reason(path: Path, root: Path) -> str:
    target = Path(os.path.realpath(path))
    where = "inside" if target == root or root in target.parents else "outside"
    return f"symbolic link to {where} the input tree; links are not followed"


def walk(src: Path) -> list[tuple[Path, str | None]]:
    """Every entry under ``src`` in path order: ``(path, None)`` for a regular file,
    ``(path, reason)`` for one that is skipped (symbolic links, FIFOs, devices)."""
    root = src.resolve()
    entries = []
    for folder, dirnames, filenames in os.walk(src, onerror=_raise):
        for name in dirnames + filenames:
            path = Path(folder) / name
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                entries.append((path, _link_reason(path, root)))
            elif stat.S_ISREG(mode):
                entries.append((path, None))
            elif not stat.S_ISDIR(mode):
                entries.append((path, "not a regular file (device, FIFO or socket)"))
    return sorted(entries)


def _is_image(path: Path) -> bool:
    if is_png(path) or is_nifti(path):
        return True
    try:
        read_dataset(path)
    except NotAnImageError:
        return False
    return True


def _choose_canary(src: Path, entries: list[tuple[Path, str | None]], canary: str | None) -> Path:
    files = [path for path, reason in entries if reason is None]
    if canary is not None:
        chosen = src / canary
        reason = dict(entries).get(chosen)
        if reason is not None:
            raise InjectionError(f"canary {canary} is a {reason.split(';')[0]}; name a file")
        if chosen not in files:
            raise FileNotFoundError(f"canary {canary} is not a file inside {src}")
        return chosen
    for path in files:
        if _is_image(path):
            return path
    raise InjectionError(f"{src} holds no DICOM, NIfTI or PNG image to use as the canary")


def _target(
    src: Path,
    entries: list[tuple[Path, str | None]],
    all_files: bool,
    canary: str | None,
    planted: Mapping[str, str] | None,
) -> Path | dict[Path, str] | None:
    """What to burn into: every image (``None``), the one canary, or the planted files
    (each a path relative to ``src`` with its own text), which must be regular files."""
    if planted is None:
        return None if all_files else _choose_canary(src, entries, canary)
    if all_files or canary is not None:
        raise ValueError("planted canaries exclude all_files and canary")
    files = {path for path, reason in entries if reason is None}
    chosen = {src / rel: text for rel, text in planted.items()}
    missing = sorted(str(p.relative_to(src)) for p in chosen if p not in files)
    if missing:
        raise FileNotFoundError(f"planted files not found as regular files in {src}: {missing[:3]}")
    return chosen


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
        raise FileExistsError(f"{dst} already exists and is not empty; pass `overwrite`")


def _copy(src: Path, dst: Path, final: Path) -> ManifestRecord:
    """Copy ``src`` byte for byte (atomically, hashing on the way) and record it."""
    digest = hashlib.sha256()
    fd = os.open(src, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))  # a link swapped in late
    with open(fd, "rb") as source, atomic_write(dst, "wb", durable=False) as target:
        for chunk in iter(lambda: source.read(1 << 20), b""):
            digest.update(chunk)
            target.write(chunk)
    return ManifestRecord("copied", str(src), str(final), digest.hexdigest())


@dataclass(frozen=True)
class _Entry:
    """One entry of the input tree and what to do with it (sent to a worker as is)."""

    path: Path
    final: Path  # its place in the output folder
    staged: Path | None  # where it is written; None: a dry run writes nothing
    reason: str | None  # why it is skipped (links, special files)
    burn: bool  # burn text into it when it is an image
    required: bool  # the chosen canary: it must be an image
    text: str | None = None  # its own text (a planted random canary), else the options'


def _process(entry: _Entry, options: BurnInOptions, hasher: TextHasher) -> ManifestRecord:
    """Skip, burn into or copy one entry; the record names its final output path."""
    path, staged = entry.path, entry.staged
    if entry.reason is not None:
        return ManifestRecord("skipped", str(path), "", reason=entry.reason)
    record = None
    if entry.text is not None:
        options = dataclasses.replace(options, text=entry.text)
    if entry.burn:
        try:
            record = inject_any(
                path,
                entry.final if staged is None else staged,
                options,
                overwrite=staged is None,
                dry_run=staged is None,
                hasher=hasher,
                durable=False,
            )
        except NotAnImageError:
            if entry.required:
                raise
    if record is None:
        if staged is None:
            record = ManifestRecord("copied", str(path), str(entry.final))
        else:
            record = _copy(path, staged, entry.final)
    return record.replace(output=str(entry.final))


def _mirror(
    src: Path,
    dst: Path,
    stage: Path | None,
    entries: list[tuple[Path, str | None]],
    target: Path | Mapping[Path, str] | None,
    options: BurnInOptions,
    hasher: TextHasher,
    progress: Progress | None,
    workers: int = 1,
) -> list[ManifestRecord]:
    """One record per entry, in path order; files are written under ``stage`` (``None``:
    a dry run), by ``workers`` processes (see :mod:`monai_forget.dicom.pool`). ``target``:
    the one canary file, every image (``None``), or each planted file with its text."""
    texts = target if isinstance(target, Mapping) else {}
    jobs = [
        _Entry(
            path,
            dst / path.relative_to(src),
            None if stage is None else stage / path.relative_to(src),
            reason,
            path in texts if texts else target is None or path == target,
            path == target or path in texts,
            texts.get(path),
        )
        for path, reason in entries
    ]
    paths = [job.path for job in jobs]
    work = functools.partial(_process, options=options, hasher=hasher)
    with ordered_map(work, jobs, workers) as results:
        # The progress callback sees each path before its record is taken, as a loop would.
        return [next(results) for _ in (progress(paths) if progress else paths)]


@dataclass
class StagedTree:
    """A mirrored tree, complete in its staging folder, waiting to be published."""

    records: list[ManifestRecord]
    staging: StagingFolder
    dst: Path
    overwrite: bool
    published: bool = False

    def publish(self) -> None:
        """Move the staged tree to the output folder (signals held until it is done)."""
        with signals_deferred():
            _publish(self.staging.path, self.dst, self.overwrite)
            self.published = True
        self.staging.release()

    def discard(self) -> None:
        """Remove the staging folder unless it was published."""
        if not self.published:
            self.staging.remove()

    def __enter__(self) -> StagedTree:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()


def stage_tree(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    options: BurnInOptions,
    *,
    all_files: bool = False,
    canary: str | None = None,
    planted: Mapping[str, str] | None = None,
    overwrite: bool = False,
    hasher: TextHasher | None = None,
    progress: Progress | None = None,
    report: Report = _log.warning,
    workers: int = 1,
) -> StagedTree:
    """Build the output tree of :func:`inject_tree` in a staging folder next to ``dst``.

    Staging folders left by interrupted runs into ``dst`` are removed first and each
    is passed to ``report`` (see :mod:`monai_forget.dicom.staging`). Use as a context
    manager, or call :meth:`StagedTree.publish` then :meth:`StagedTree.discard`.
    """
    src, dst = Path(src), Path(dst)
    _check_paths(src, dst, overwrite)
    entries = walk(src)
    target = _target(src, entries, all_files, canary, planted)
    dst.parent.mkdir(parents=True, exist_ok=True)
    for line in sweep_stale_staging(dst).messages():
        report(line)
    staging = StagingFolder(dst)
    try:
        with exit_on_terminate():
            hasher = hasher or TextHasher()
            records = _mirror(
                src, dst, staging.path, entries, target, options, hasher, progress, workers
            )
            sync_all()  # one flush for the whole staged tree instead of one fsync per file
    except BaseException:
        staging.remove()
        raise
    return StagedTree(records, staging, dst, overwrite)


def inject_tree(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    options: BurnInOptions,
    *,
    all_files: bool = False,
    canary: str | None = None,
    planted: Mapping[str, str] | None = None,
    overwrite: bool = False,
    dry_run: bool = False,
    hasher: TextHasher | None = None,
    progress: Progress | None = None,
    report: Report = _log.warning,
    workers: int = 1,
) -> list[ManifestRecord]:
    """Mirror the folder ``src`` into ``dst``, burning text into one file or all.

    Canary mode (default) burns into one instance — ``canary`` (a path relative to
    ``src``) or the first image in sorted path order — and copies every other file
    unchanged. With ``all_files`` every image is burned into. With ``planted`` (paths
    relative to ``src``, each with its own text: random canaries,
    :mod:`~monai_forget.dicom.plant`) those files are burned into. Files that are not images
    (not DICOM, or no pixel data) are copied unchanged. Symbolic links and special
    files are skipped. Any other refusal stops the run.

    The tree is built in a hidden staging folder next to ``dst`` and moved into place
    only when every file succeeded, so a failure (or SIGTERM) leaves nothing behind.
    ``dry_run`` does all the work in memory and writes nothing. Staging folders left
    by interrupted runs are removed (a dry run only names them) and passed to ``report``.

    ``workers`` processes share the files (see :mod:`monai_forget.dicom.pool`); the
    output and the records are the same, in the same order, for any number of workers.

    Returns:
        One manifest record per entry (``action`` ``injected``, ``copied`` or ``skipped``).
    """
    if dry_run:
        src, dst = Path(src), Path(dst)
        _check_paths(src, dst, overwrite)
        entries = walk(src)
        target = _target(src, entries, all_files, canary, planted)
        for line in sweep_stale_staging(dst, remove=False).messages():
            report(line)
        hasher = hasher or TextHasher()
        return _mirror(src, dst, None, entries, target, options, hasher, progress, workers)
    with exit_on_terminate():
        staged = stage_tree(
            src,
            dst,
            options,
            all_files=all_files,
            canary=canary,
            planted=planted,
            overwrite=overwrite,
            hasher=hasher,
            progress=progress,
            report=report,
            workers=workers,
        )
        with staged:
            staged.publish()
    return staged.records


def _publish(stage: Path, dst: Path, overwrite: bool) -> None:
    """Move the staged tree to ``dst``: one rename when ``dst`` is new or empty.

    Without ``overwrite`` a ``dst`` that another writer filled meanwhile is never
    touched; with it, files are replaced one by one, never through a link that leads
    out of ``dst``.
    """
    try:
        if dst.is_dir() and not dst.is_symlink():
            dst.rmdir()  # fails when not empty
        os.rename(stage, dst)
        return
    except OSError as err:
        if not overwrite:
            raise FileExistsError(
                f"{dst} is not empty (another run wrote there?); pass `overwrite` to merge"
            ) from err
    root = dst.resolve()
    moves = [(p, dst / p.relative_to(stage)) for p in sorted(stage.rglob("*")) if p.is_file()]
    for _, final in moves:  # check every folder before the first file moves
        parent = final.parent.resolve()
        if parent != root and root not in parent.parents:
            raise InjectionError(f"{final.parent} leads out of {dst} through a link; remove it")
    for staged, final in moves:
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staged, final)
    shutil.rmtree(stage, ignore_errors=True)
