"""The hidden staging folder of a folder run, and interrupted runs.

A run builds its tree in ``.<output name>.<8 random characters>.partial`` next to the
output folder and holds an exclusive lock (``flock``) on that folder while it lives.
The operating system drops the lock when the process ends, however it ends, so:

- a staging folder whose lock can be taken was left by a run that died (SIGKILL, power
  cut); it holds burned-in patient images, and the next run into the same output
  removes it and says so;
- a staging folder whose lock is held belongs to a run still going; it is left alone
  and reported.

While a run lives, SIGTERM and SIGHUP end it like Ctrl-C does (:func:`exit_on_terminate`),
so its own clean-up removes the staging folder.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

try:
    import fcntl
except ImportError:  # not POSIX: no locks, so stale folders are reported, never removed
    fcntl = None

STAGING_SUFFIX = ".partial"


def _staging_name(dst: Path) -> re.Pattern[str]:
    # tempfile.mkdtemp names: prefix + 8 characters of [a-z0-9_] + suffix
    return re.compile(rf"\.{re.escape(dst.name)}\.[a-z0-9_]{{8}}{re.escape(STAGING_SUFFIX)}")


def _lock(fd: int, wait: bool) -> bool:
    if fcntl is None:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True


@dataclass
class StaleStaging:
    """Staging folders found next to an output folder before a run."""

    stale: list[Path] = field(default_factory=list)  # left by runs that died
    removed: bool = False  # whether ``stale`` were removed (not in a dry run)
    active: list[Path] = field(default_factory=list)  # locked by a live run

    def messages(self) -> list[str]:
        """One line per folder, for the command line and the log."""
        verb = "removed" if self.removed else "would remove"
        lines = [
            f"{verb} {path} (staging folder left by an interrupted run)" for path in self.stale
        ]
        lines += [
            f"left {path} alone: another run is writing there (its lock is held)"
            for path in self.active
        ]
        return lines


def sweep_stale_staging(dst: str | os.PathLike, remove: bool = True) -> StaleStaging:
    """Find this tool's staging folders next to ``dst``; remove those of dead runs."""
    dst = Path(dst)
    found = StaleStaging(removed=remove)
    if not dst.parent.is_dir():
        return found
    pattern = _staging_name(dst)
    for name in sorted(os.listdir(dst.parent)):
        path = dst.parent / name
        if not pattern.fullmatch(name) or path.is_symlink() or not path.is_dir():
            continue
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except FileNotFoundError:  # its run just finished or another sweep took it
            continue
        try:
            if not _lock(fd, wait=False):
                found.active.append(path)
                continue
            found.stale.append(path)
            if remove:
                shutil.rmtree(path, ignore_errors=True)
        finally:
            os.close(fd)
    return found


class StagingFolder:
    """A new, locked staging folder next to ``dst`` (see the module docs)."""

    def __init__(self, dst: Path) -> None:
        for _ in range(5):
            path = Path(
                tempfile.mkdtemp(prefix=f".{dst.name}.", suffix=STAGING_SUFFIX, dir=dst.parent)
            )
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            _lock(fd, wait=True)  # a sweep that took it first is removing it: wait
            with contextlib.suppress(FileNotFoundError):
                if os.stat(path).st_ino == os.fstat(fd).st_ino:
                    break
            os.close(fd)  # swept between creation and lock: make another
        else:
            raise RuntimeError(f"could not create a staging folder in {dst.parent}")
        self.path, self._fd = path, fd
        umask = os.umask(0)
        os.umask(umask)
        path.chmod(0o777 & ~umask)  # mkdtemp makes it private; the output is a normal folder

    def release(self) -> None:
        """Drop the lock (after the folder was published or removed)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def remove(self) -> None:
        """Delete the folder and everything staged in it, then drop the lock."""
        shutil.rmtree(self.path, ignore_errors=True)
        self.release()


_TERMINATING = ("SIGTERM", "SIGHUP")


@contextlib.contextmanager
def exit_on_terminate() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into ``SystemExit(128 + signal)`` inside the block.

    Like Ctrl-C's KeyboardInterrupt, the exception runs every clean-up on its way
    out, and the exit status is the shell's usual one for the signal (143 for
    SIGTERM). Handlers are installed only in the main thread and only where the
    default action (kill) is set; the previous ones are restored on exit.
    """
    installed: dict[int, object] = {}

    def terminate(signum: int, frame: object) -> None:
        for sig in installed:  # a second signal must not cut the clean-up short
            signal.signal(sig, signal.SIG_IGN)
        raise SystemExit(128 + signum)

    if threading.current_thread() is threading.main_thread():
        for name in _TERMINATING:
            sig = getattr(signal, name, None)
            if sig is not None and signal.getsignal(sig) == signal.SIG_DFL:
                installed[sig] = signal.signal(sig, terminate)
    try:
        yield
    finally:
        for sig, previous in installed.items():
            signal.signal(sig, previous)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP until the block ends (e.g. while publishing).

    A signal that arrives meanwhile is raised again when the block ends, so a run is
    not stopped between publishing its output and writing the manifest. (Handlers,
    not a signal mask: Python runs handlers in the main thread whichever thread the
    signal reaches, e.g. a progress bar's monitor thread.)
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    names = ("SIGINT", *_TERMINATING)
    held = [getattr(signal, n) for n in names if hasattr(signal, n)]
    previous = {}
    for sig in held:
        if signal.getsignal(sig) is not None:  # None: set outside Python, cannot restore
            previous[sig] = signal.signal(sig, lambda signum, frame: pending.append(signum))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if pending:
            signal.raise_signal(pending[0])
