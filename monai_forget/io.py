"""Atomic, non-clobbering file output shared by every writer in the package, and the
one rule for CSV cells that a spreadsheet could run as formulas."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

#: How to allow replacing a file, for every caller: Python, the CLI, a MONAI bundle
#: (whose command line needs a value after the flag).
OVERWRITE_HINT = "pass overwrite=True (monai-forget: --overwrite; MONAI bundle: --overwrite True)"

#: What a spreadsheet takes as the start of a formula (OWASP "CSV Injection").
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """A value as a CSV cell a spreadsheet shows and never runs.

    Text beginning with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a
    leading ``'`` (file names are chosen by whoever filled the input folder); numbers
    stay numbers, negative ones included. Lists and mappings go into one cell as JSON so
    the CSV stays flat.
    """
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value)
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def check_readable(path: str | os.PathLike, what: str) -> Path:
    """Return ``path`` as a ``Path`` if it is a file to read; else say what it is.

    Raises:
        IsADirectoryError: ``path`` is a folder (``what`` names the file it should be).
        FileNotFoundError: nothing is at ``path``.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{what} {path} is a folder; give the file itself")
    if not path.is_file():
        raise FileNotFoundError(f"{what} {path} not found")
    return path


def check_writable(path: str | os.PathLike, overwrite: bool) -> Path:
    """Return ``path`` as a ``Path`` or refuse to replace an existing file.

    Raises:
        IsADirectoryError: ``path`` is a folder (a file name is needed, even with
            ``overwrite``).
        FileExistsError: ``path`` exists and ``overwrite`` is false.
        NotADirectoryError: a file stands where a folder of ``path`` should be.
        PermissionError: the nearest existing folder of ``path`` cannot be written.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder; give the name of the file to write")
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} already exists; {OVERWRITE_HINT} to replace it")
    # found now, not after the work: the folder must be one that can be made and written
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise NotADirectoryError(f"{path} cannot be written: {folder} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(f"{path} cannot be written: no permission to write in {folder}")
    return path


def check_output_files(
    out_dir: str | os.PathLike, names: tuple[str, ...], overwrite: bool, what: str
) -> tuple[Path, ...]:
    """The files ``names`` in the folder ``out_dir``, each checked by
    :func:`check_writable` before any is written (so a refusal leaves no partial output).

    Raises:
        ValueError: ``out_dir`` is a file (``what`` names the outputs it should hold).
        (the errors of :func:`check_writable`)
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out} is a file; pass a folder for the {what}")
    return tuple(check_writable(out / name, overwrite) for name in names)


def make_public(path: str | os.PathLike) -> None:
    """Give a private temporary file or folder (``mkstemp``/``mkdtemp`` make them 0600 /
    0700) the mode of a normal new one: ``0o666`` / ``0o777`` less the umask."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(path, (0o777 if os.path.isdir(path) else 0o666) & ~mask)


@contextlib.contextmanager
def atomic_write(
    path: str | os.PathLike, mode: str = "wb", overwrite: bool = False, *, durable: bool = True
) -> Iterator[IO]:
    """Open a temporary file next to ``path`` and move it into place on success.

    Nothing is left behind when the body raises: the temporary file is removed and any
    existing ``path`` is untouched. The file gets the permissions of a normal new file
    (``0o666`` less the umask), not the private mode of a temporary file.

    Without ``overwrite`` the file is published exclusively (see :func:`publish_new`),
    so a file another writer creates at ``path`` meanwhile is never replaced.

    Args:
        path: final location.
        mode: ``open`` mode, ``"wb"`` or ``"w"``.
        overwrite: allow replacing an existing ``path``.
        durable: fsync the data before the rename, so a power cut cannot leave an empty
            file behind. Writers that stage many files in a private folder and publish
            it with one rename pass ``False`` and sync once (see :func:`sync_all`).
    """
    path = check_writable(path, overwrite)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:  # read-only or missing permissions: name the folder, not a temp file
        reason = err.strerror or str(err)
        raise type(err)(f"cannot write {path}: {reason} (folder {path.parent})") from None
    try:
        make_public(tmp)
        with os.fdopen(fd, mode) as handle:
            yield handle
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        if overwrite:
            os.replace(tmp, path)
        else:
            publish_new(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def publish_new(tmp: str | os.PathLike, path: str | os.PathLike) -> None:
    """Move the finished file ``tmp`` to ``path`` only if ``path`` does not exist.

    A hard link fails atomically when the name is taken, which a check followed by a
    rename cannot guarantee. File systems without hard links get an exclusive
    placeholder (``O_EXCL``) that the rename then replaces.

    Raises:
        FileExistsError: ``path`` exists (``tmp`` is left for the caller to remove).
    """
    taken = (
        f"{path} appeared while it was being written (another writer?); "
        f"{OVERWRITE_HINT} to replace it"
    )
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise FileExistsError(taken) from None
    except OSError:  # no hard links here (e.g. FAT, some network shares)
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            raise FileExistsError(taken) from None
        os.replace(tmp, path)
        return
    os.unlink(tmp)


def sync_all() -> None:
    """Flush every written file to disk in one call (for staged trees of many files)."""
    os.sync()


@contextlib.contextmanager
def staged_folder(folder: str | os.PathLike) -> Iterator[Path]:
    """Fill a private folder beside ``folder`` and publish it as ``folder`` at the end.

    The body writes into the yielded folder; on success every file is flushed to disk
    and the folder renamed into place (an empty ``folder`` is replaced), so a reader
    never sees half a tree and an interrupted writer leaves nothing behind.

    Raises:
        OSError: ``folder`` exists and is not empty (the rename refuses it).
    """
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        make_public(staging)  # the published folder follows the umask, like mkdir
        yield staging
        sync_all()
        with contextlib.suppress(FileNotFoundError):
            folder.rmdir()  # an empty folder may be replaced
        os.replace(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
