"""Training many models side by side: workers x torch threads that fit the cores.

Workers are forked from a fork server that imported torch and MONAI once, when the first
pool of the process started, and never ran torch (a process forked from one that ran
torch could hang in its thread pool); without fork servers (Windows) they are spawned.
Each worker trains one model at a time into the cache (written atomically) and sends
back nothing but its path. A worker ends when its parent ends, so an interrupted run
leaves no orphan training on.
"""

from __future__ import annotations

import multiprocessing
import pickle
from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING

import torch

from monai_forget.checks import COUNT, check_in
from monai_forget.data import LabelledImages
from monai_forget.processes import available_cores, exit_with_parent

if TYPE_CHECKING:
    from monai_forget.shadow.trainer import ShadowTrainer


def plan_workers(
    n_models: int, workers: int | None, threads: int | None, device: torch.device
) -> tuple[int, int | None]:
    """Workers and torch threads per worker for ``n_models`` models on ``device``.

    Defaults: on a CPU one worker per available core (at most one per model), and in
    worker processes the cores shared out among them as threads (a fresh process
    would otherwise start as many threads as there are cores); on a GPU one worker.
    One worker trains in this process with the caller's thread setting.

    Raises:
        ValueError: ``workers`` or ``threads`` below 1.
    """
    for name, value in (("workers", workers), ("threads", threads)):
        if value is not None:
            check_in(name, value, COUNT)
    cores = available_cores()
    if workers is None:
        workers = 1 if device.type != "cpu" else min(cores, max(n_models, 1))
    if threads is None and workers > 1 and device.type == "cpu":
        threads = max(1, cores // workers)
    return workers, threads


#: Imported once by the fork server, so its workers start with them loaded.
_PRELOAD = ["monai_forget.shadow.parallel", "monai.engines"]


def _context() -> multiprocessing.context.BaseContext:
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)  # used when the server starts
    return context


def _init_worker(threads: int | None) -> None:
    exit_with_parent()
    if threads is not None:
        torch.set_num_threads(threads)


def _train_one(trainer: ShadowTrainer, data: LabelledImages, seed: int) -> str:
    trainer.train(data, seed)
    return str(trainer.cache_path(data, seed))


def _check_sendable(trainer: ShadowTrainer) -> None:
    try:
        pickle.dumps(trainer.recipe)
    except (pickle.PicklingError, AttributeError, TypeError) as err:
        raise ValueError(
            f"the recipe cannot be sent to worker processes ({err}); define its functions "
            "at module level, or train with workers=1"
        ) from err


def train_in_pool(
    trainer: ShadowTrainer,
    jobs: Sequence[tuple[LabelledImages, int]],
    workers: int,
    progress: bool = False,
) -> None:
    """Train every ``(data, seed)`` job into ``trainer``'s cache, ``workers`` at a time.

    One worker trains in this process. The first failure stops the run: jobs not yet
    started are cancelled, and the error is raised once running jobs have ended.
    """
    from tqdm.auto import tqdm

    bar = tqdm(total=len(jobs), desc="shadow models", unit="model", disable=not progress)
    with bar:
        if workers <= 1 or len(jobs) <= 1:
            for data, seed in jobs:
                trainer.train(data, seed)
                bar.update()
            return
        _check_sendable(trainer)
        initargs = (trainer.threads,)
        with ProcessPoolExecutor(workers, _context(), _init_worker, initargs) as pool:
            pending = {pool.submit(_train_one, trainer, data, seed) for data, seed in jobs}
            try:
                while pending:
                    done, pending = wait(pending, return_when=FIRST_EXCEPTION)
                    bar.update(len(done))
                    for future in done:
                        future.result()  # raises the worker's error
            except BrokenProcessPool as err:
                raise RuntimeError(
                    "a worker process training shadow/reference models ended abruptly. From "
                    "a script, run the calls that train them under `if __name__ == "
                    '"__main__":` (each worker imports the main script again and, without '
                    "the guard, runs it); otherwise the worker was killed (out of memory?). "
                    "workers=1 trains in this process"
                ) from err
            finally:
                for future in pending:
                    future.cancel()
