"""Train models from a recipe, seeded and cached; many at once over worker processes.

:class:`ShadowTrainer` trains a recipe on a :class:`~monai_forget.data.LabelledImages`
with a seed and caches the weights by (recipe identity, data fingerprint, seed) under
``cache_dir/shadow/<key>.pt``, so an audit never trains the same model twice, and
models trained elsewhere into a shared cache (see :mod:`monai_forget.shadow.reference_jobs`)
are only read. Each entry is read only if it still has the SHA-256 recorded when it was
written, and trained under a lock, so two processes filling one cache never train the
same model twice (:mod:`monai_forget.cache`).
"""

from __future__ import annotations

import contextlib
import hashlib
import pickle
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from monai_forget.cache import CacheEntryError, entry_hash, entry_lock, write_entry
from monai_forget.checks import COUNT, check_in
from monai_forget.data import LabelledImages
from monai_forget.fingerprint import data_fingerprint
from monai_forget.processes import available_cores
from monai_forget.shadow.grouped import fit_group, group_refusal
from monai_forget.shadow.parallel import plan_workers, train_in_pool
from monai_forget.shadow.recipes import _PROGRESS, Recipe


def _cache_key(recipe: Recipe, data: LabelledImages, seed: int) -> str:
    spec = f"{recipe.name}\n{data_fingerprint(data)}\n{seed}"
    return hashlib.sha256(spec.encode()).hexdigest()


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``threads`` torch CPU threads (``None``: leave the setting)."""
    if threads is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


class ShadowTrainer:
    """Trains (and caches) models from a recipe, reproducibly.

    The network is initialised and trained inside a forked torch RNG seeded with
    ``seed``, so results do not depend on, nor disturb, the caller's global RNG state.
    On a CPU the weights also depend, in their last bits, on torch's thread count (it
    changes the order of floating-point sums): fix ``threads`` for weights that are
    the same bit for bit whichever way the models are trained.

    Args:
        recipe: the training design.
        device: where to train (``"cpu"``, ``"cuda:1"``, a ``torch.device``); the
            recipe trains on this device.
        cache_dir: when given, weights are stored under ``cache_dir/shadow/<key>.pt`` and
            reloaded (``weights_only=True``) instead of retraining.
        threads: torch CPU threads while training (``None``: torch's current setting).
        progress: report each training on stderr (size, time) and show the iterations of
            MONAI-based recipes as a progress bar.
        grouped: let :meth:`train_many` train the models as groups, one batched
            computation per group (:mod:`monai_forget.shadow.grouped`), where the recipe
            allows it; ``False``: one model at a time over worker processes.

    Attributes:
        cache_entries: file -> SHA-256 of every cache entry this trainer read or wrote
            (for an audit's provenance).
    """

    def __init__(
        self,
        recipe: Recipe,
        *,
        device: str | torch.device = "cpu",
        cache_dir: str | Path | None = None,
        threads: int | None = None,
        progress: bool = False,
        grouped: bool = True,
    ) -> None:
        if not isinstance(recipe, Recipe):
            raise TypeError(
                "recipe must provide name, build() and fit(); use SupervisedRecipe, "
                "BundleRecipe or CallableRecipe"
            )
        if threads is not None:
            check_in("threads", threads, COUNT)
        self.recipe = recipe
        self.device = torch.device(device)
        check_device = getattr(recipe, "check_device", None)
        if check_device is not None:  # refused now, not after the first model's data
            check_device(self.device)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.threads = threads
        self.progress = progress
        self.grouped = grouped
        self.cache_entries: dict[str, str] = {}

    def cache_path(self, data: LabelledImages, seed: int) -> Path | None:
        """Where the weights for (``data``, ``seed``) are cached, or ``None`` without a cache."""
        if self.cache_dir is None:
            return None
        return self.cache_dir / "shadow" / f"{_cache_key(self.recipe, data, seed)}.pt"

    def is_cached(self, data: LabelledImages, seed: int) -> bool:
        """Whether the model for (``data``, ``seed``) is in the cache already."""
        path = self.cache_path(data, seed)
        return path is not None and path.exists()

    def train(self, data: LabelledImages, seed: int = 0) -> nn.Module:
        """Return a model of the recipe trained on ``data`` with ``seed`` (in eval mode).

        Raises:
            CacheEntryError: the cached entry is damaged, replaced, or holds no weights
                of this recipe's network.
        """
        if len(data) == 0:
            raise ValueError("cannot train a shadow model on an empty data set")
        path = self.cache_path(data, seed)
        devices = [self.device] if self.device.type == "cuda" else []
        with (
            entry_lock(path) if path is not None else contextlib.nullcontext(),
            torch.random.fork_rng(devices=devices),
            torch_threads(self.threads),
        ):
            torch.manual_seed(seed)
            model = self.recipe.build()
            if path is not None and path.exists():
                self._load(model, path)
                return model.to(self.device).eval()
            report = print if self.progress else lambda *a, **k: None
            report(f"shadow model: training on {len(data)} samples ...", file=sys.stderr)
            start, token = time.perf_counter(), _PROGRESS.set(self.progress)
            try:
                self.recipe.fit(model, data, seed=seed, device=self.device)
            finally:
                _PROGRESS.reset(token)
            report(f"shadow model: trained in {time.perf_counter() - start:.0f} s", file=sys.stderr)
            if path is not None:
                state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
                digest = write_entry(path, lambda handle: torch.save(state, handle))
                self.cache_entries[str(path)] = digest
        return model.to(self.device).eval()

    def _load(self, model: nn.Module, path: Path) -> None:
        digest = entry_hash(path)  # refuses a damaged or replaced entry
        try:
            model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
        except (pickle.UnpicklingError, RuntimeError, EOFError, KeyError, ValueError) as err:
            raise CacheEntryError(
                f"the cache entry {path} holds no weights of the recipe {self.recipe.name!r} "
                f"({type(err).__name__}); delete it and its .sha256 to train it again"
            ) from None
        self.cache_entries[str(path)] = digest

    def train_many(
        self,
        datasets: Sequence[LabelledImages],
        seeds: Sequence[int],
        workers: int | None = None,
        *,
        progress: bool = False,
    ) -> list[nn.Module]:
        """``[train(d, s) for d, s in zip(datasets, seeds)]``, over worker processes.

        Each model is an independent cache entry: those already cached are only read,
        and an interrupted run keeps every model it finished. Without ``cache_dir`` a
        temporary cache carries the weights back from the workers.

        Where the recipe allows it (a :class:`SupervisedRecipe` without running
        statistics or mixed precision) and ``grouped`` is set, the models to train are
        trained in this process as groups, one batched computation per group
        (:func:`~monai_forget.shadow.grouped.fit_group`: the recipe's models, to float
        tolerance); ``workers`` then does not apply.

        Args:
            datasets: the training sets.
            seeds: one seed per training set.
            workers: processes training side by side (default: one per available core
                on a CPU, capped by the models to train; 1 on a GPU). Each uses
                ``threads`` torch threads, by default the cores shared out among the
                workers (one worker trains in this process, with the caller's setting).
                With ``threads`` fixed the weights are the same bit for bit for any
                number of workers.
            progress: show a progress bar over the models.

        Raises:
            ValueError: different numbers of datasets and seeds, an empty set, or a
                recipe that cannot be sent to a worker process.
        """
        if len(datasets) != len(seeds):
            raise ValueError(
                f"got {len(datasets)} datasets and {len(seeds)} seeds; pass one seed per set"
            )
        if workers is not None:
            check_in("workers", workers, COUNT)
        jobs = list(zip(datasets, (int(s) for s in seeds), strict=True))
        if any(len(d) == 0 for d in datasets):
            raise ValueError("cannot train a shadow model on an empty data set")
        with contextlib.ExitStack() as stack:
            cache_dir = self.cache_dir or stack.enter_context(tempfile.TemporaryDirectory())
            trainer = ShadowTrainer(
                self.recipe,
                device=self.device,
                cache_dir=cache_dir,
                threads=self.threads,
                progress=self.progress,
            )
            todo: dict[Path, tuple[LabelledImages, int]] = {}
            for data, seed in jobs:
                path = trainer.cache_path(data, seed)
                if not path.exists():
                    todo.setdefault(path, (data, seed))
            if self.grouped and group_refusal(self.recipe, self.recipe.build()) is None:
                trainer._train_groups(list(todo.values()), progress)
            else:
                workers, trainer.threads = plan_workers(
                    len(todo), workers, self.threads, self.device
                )
                train_in_pool(trainer, list(todo.values()), workers, progress)
            models = [trainer.train(data, seed) for data, seed in jobs]
            if self.cache_dir is not None:  # a temporary cache's entries are gone after
                self.cache_entries.update(trainer.cache_entries)
            return models

    def _train_groups(self, jobs: list[tuple[LabelledImages, int]], progress: bool) -> None:
        """Train ``jobs`` (uncached ``(data, seed)``) as groups into the cache: sets of one
        size together when the recipe counts epochs, at most :func:`group_size` a group."""
        by_size: dict[int | None, list[tuple[LabelledImages, int]]] = {}
        for data, seed in jobs:
            by_size.setdefault(None if self.recipe.steps else len(data), []).append((data, seed))
        groups = []
        for same in by_size.values():
            size = group_size(same[0][0], self.recipe, self.device)
            groups += [same[i : i + size] for i in range(0, len(same), size)]
        bar = tqdm(total=len(jobs), desc="reference models", unit="model", disable=not progress)
        with torch_threads(self.threads or available_cores()):
            for group in groups:
                self._train_group(group)
                bar.update(len(group))
        bar.close()

    def _train_group(self, group: list[tuple[LabelledImages, int]]) -> None:
        with contextlib.ExitStack() as locks:
            # in one order everywhere: two processes locking overlapping groups never
            # wait on each other in a circle
            for path in sorted({self.cache_path(d, s) for d, s in group}):
                locks.enter_context(entry_lock(path))
            group = [(d, s) for d, s in group if not self.is_cached(d, s)]  # trained meanwhile
            if not group:
                return
            models = []
            for _, seed in group:
                with torch.random.fork_rng():
                    torch.manual_seed(seed)
                    models.append(self.recipe.build())  # initialised as train() does
            report = print if self.progress else lambda *a, **k: None
            sizes = sorted({len(d) for d, _ in group})
            span = str(sizes[0]) if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}"
            report(f"shadow models: training {len(group)} as one group on {span} samples each ...",
                   file=sys.stderr)  # fmt: skip
            start = time.perf_counter()
            with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
                torch.manual_seed(group[0][1])  # the group's dropout draws, reproducibly
                fit_group(self.recipe, models, *zip(*group, strict=True), device=self.device)
            report(f"shadow models: {len(group)} trained in {time.perf_counter() - start:.0f} s",
                   file=sys.stderr)  # fmt: skip
            for (data, seed), model in zip(group, models, strict=True):
                path = self.cache_path(data, seed)
                state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
                self.cache_entries[str(path)] = write_entry(
                    path, lambda handle, state=state: torch.save(state, handle)
                )


#: Bytes a group of models may stage and train with: on a GPU this share of its free
#: memory, on a CPU this many bytes.
GROUP_MEMORY_SHARE, GROUP_MEMORY_CPU = 0.5, 2 * 1024**3
#: The most models in one group (beyond it, a step's launch costs little next to its work).
MAX_GROUP = 64


def group_size(data: LabelledImages, recipe: Recipe, device: torch.device) -> int:
    """Models per group: as many as fit :data:`GROUP_MEMORY_SHARE` of a GPU's free memory
    (:data:`GROUP_MEMORY_CPU` on a CPU), at most :data:`MAX_GROUP`. Each model needs its
    staged training set, four copies of its parameters (weights, gradients, two Adam
    moments) and a batch's activations (taken as 32 floats per input value, a generous
    bound for the small networks grouped here)."""
    if device.type == "cuda":
        budget = torch.cuda.mem_get_info(device)[0] * GROUP_MEMORY_SHARE
    else:
        budget = GROUP_MEMORY_CPU
    sample = int(np.prod(data.images.shape[1:])) * 4
    params = sum(p.numel() for p in recipe.build().parameters()) * 4
    per_model = len(data) * sample + 4 * params + 32 * getattr(recipe, "batch_size", 64) * sample
    return int(max(1, min(MAX_GROUP, budget // per_model)))
