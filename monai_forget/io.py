"""Atomic, non-clobbering file output shared by every writer in the package."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO


def check_writable(path: str | os.PathLike, overwrite: bool) -> Path:
    """Return ``path`` as a ``Path`` or refuse to replace an existing file.

    Raises:
        FileExistsError: ``path`` exists and ``overwrite`` is false.
    """
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(
            f"{path} already exists; pass overwrite=True (CLI: --overwrite) to replace it"
        )
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_write(
    path: str | os.PathLike, mode: str = "wb", overwrite: bool = False, *, durable: bool = True
) -> Iterator[IO]:
    """Open a temporary file next to ``path`` and move it into place on success.

    Nothing is left behind when the body raises: the temporary file is removed and any
    existing ``path`` is untouched. The file gets the permissions of a normal new file
    (``0o666`` less the umask), not the private mode of a temporary file.

    Args:
        path: final location.
        mode: ``open`` mode, ``"wb"`` or ``"w"``.
        overwrite: allow replacing an existing ``path``.
        durable: fsync the data before the rename, so a power cut cannot leave an empty
            file behind. Writers that stage many files in a private folder and publish
            it with one rename pass ``False`` and sync once (see :func:`sync_all`).
    """
    path = check_writable(path, overwrite)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, mode) as handle:
            yield handle
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def sync_all() -> None:
    """Flush every written file to disk in one call (for staged trees of many files)."""
    os.sync()
