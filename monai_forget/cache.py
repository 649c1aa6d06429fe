"""Cache entries that are checked before they are trusted.

Every entry (a model's weights, a model's predictions) is written atomically with its
SHA-256 beside it (``<entry>.sha256``) and read only when the file still has that hash:
a truncated, damaged or substituted entry is refused, naming the entry and how to
recompute it, instead of ending in a traceback or deciding an audit. A lock per entry
(``<entry>.lock``, :mod:`filelock`, removed once the entry is written) keeps two
processes that fill one cache from computing the same entry twice: the second waits,
then reads what the first wrote.

The hashes of the entries an audit read or wrote go into its provenance
(:func:`entry_hash`), so a signed record names the exact files that decided it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from filelock import FileLock

from monai_forget.fingerprint import file_sha256
from monai_forget.io import atomic_write

__all__ = [
    "CacheEntryError",
    "entry_hash",
    "entry_lock",
    "record_entry",
    "write_entry",
]


class CacheEntryError(ValueError):
    """A cache entry that cannot be trusted (no recorded hash, or another content)."""


def _record(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


@contextlib.contextmanager
def entry_lock(path: str | os.PathLike) -> Iterator[None]:
    """Hold the entry's lock (``<entry>.lock``; blocks while another process holds it).

    The lock file is removed on release once the entry exists, so a cache holds no lock
    file per entry. It goes only after its entry is written, and every holder of a lock
    reads an entry that exists instead of computing it, so the removal never lets two
    processes compute one entry: one still waiting on the removed file gets its lock and
    reads the entry, one arriving later takes a new file and reads it too.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_name(path.name + ".lock")
    with FileLock(str(lock)):
        yield
    if path.exists():
        lock.unlink(missing_ok=True)


def write_entry(path: str | os.PathLike, write: Callable[[IO[bytes]], None]) -> str:
    """Write an entry atomically with ``write(handle)`` and record its SHA-256 beside it.

    Returns:
        The entry's SHA-256.
    """
    path = Path(path)
    # overwrite=True: a concurrent writer of one key writes the same content
    with atomic_write(path, "wb", overwrite=True) as handle:
        write(handle)
    return record_entry(path)


def record_entry(path: str | os.PathLike) -> str:
    """Record the SHA-256 of an entry another tool wrote (e.g. a MONAI bundle's
    checkpoint), right after it wrote it.

    Returns:
        The entry's SHA-256.
    """
    path = Path(path)
    digest = file_sha256(path)
    with atomic_write(_record(path), "w", overwrite=True) as handle:
        handle.write(digest + "\n")
    return digest


def entry_hash(path: str | os.PathLike) -> str:
    """The SHA-256 of an existing entry, checked against the one recorded at write.

    Raises:
        CacheEntryError: the entry has no recorded hash, or its bytes have another hash
            (truncated, damaged or replaced); the message names the entry and the files
            to delete so it is computed again.
    """
    path = Path(path)
    fix = f"delete {path} and {_record(path).name} to compute it again"
    try:
        recorded = _record(path).read_text().strip()
    except FileNotFoundError:
        raise CacheEntryError(
            f"the cache entry {path} has no recorded SHA-256 (written by hand or by an "
            f"older monai-forget), so it is not trusted; {fix}"
        ) from None
    actual = file_sha256(path)
    if actual != recorded:
        raise CacheEntryError(
            f"the cache entry {path} is not the file that was written (SHA-256 "
            f"{actual[:12]}..., recorded {recorded[:12]}...): truncated, damaged or "
            f"replaced; {fix}"
        )
    return actual
