"""Worker processes for folder runs: results in input order, workers that stop with the run.

The run's own process stays in charge of signals and of the staging folder:

- workers ignore SIGINT, SIGTERM and SIGHUP (Ctrl-C and ``kill -TERM -<group>`` reach
  every process of the group), so the parent alone decides to stop; it then cancels
  what has not started, waits for the files in progress (each is written atomically
  into the staging folder) and only then removes the staging folder;
- each worker ends when the parent ends (:func:`monai_forget.processes.exit_with_parent`),
  so a SIGKILLed run leaves no worker writing into, or holding the lock of, its staging
  folder, which the next run then sweeps.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

from monai_forget.dicom.errors import InjectionError
from monai_forget.dicom.staging import signals_deferred
from monai_forget.processes import exit_with_parent

Item = TypeVar("Item")
Result = TypeVar("Result")


def _init_worker() -> None:
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    exit_with_parent()


def _chunk_size(n_items: int, workers: int) -> int:
    # Several chunks per worker balance the load; up to 8 files per chunk amortise the
    # inter-process round trip without making a stop wait long for a chunk to finish.
    return max(1, min(8, n_items // (4 * workers)))


@contextlib.contextmanager
def ordered_map(
    function: Callable[[Item], Result], items: Sequence[Item], workers: int = 1
) -> Iterator[Iterator[Result]]:
    """``map(function, items)``, in input order, over ``workers`` processes.

    With one worker (or one item) the map runs lazily in this process. Otherwise a
    process pool (forked on Linux, so workers start with every module already loaded)
    works ahead of the consumer; leaving the block, however it is left, cancels what
    has not started and waits for the workers, with signals held meanwhile.

    Raises:
        InjectionError: a worker process died (e.g. killed for lack of memory).
    """
    if workers <= 1 or len(items) <= 1:
        yield map(function, items)
        return
    context = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else None)
    workers = min(workers, len(items))
    pool = ProcessPoolExecutor(workers, context, _init_worker)
    try:
        yield pool.map(function, items, chunksize=_chunk_size(len(items), workers))
    except BrokenProcessPool as err:
        raise InjectionError(
            "a worker process died (out of memory?); nothing was published: "
            "run again with fewer workers (`workers`)"
        ) from err
    finally:
        with signals_deferred():
            pool.shutdown(wait=True, cancel_futures=True)
