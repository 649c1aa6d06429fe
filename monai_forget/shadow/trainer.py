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

import torch
from torch import nn

from monai_forget.cache import CacheEntryError, entry_hash, entry_lock, write_entry
from monai_forget.data import LabelledImages
from monai_forget.fingerprint import data_fingerprint
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
    ) -> None:
        if not isinstance(recipe, Recipe):
            raise TypeError(
                "recipe must provide name, build() and fit(); use SupervisedRecipe, "
                "BundleRecipe or CallableRecipe"
            )
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be a positive integer or None, got {threads}")
        self.recipe = recipe
        self.device = torch.device(device)
        check_device = getattr(recipe, "check_device", None)
        if check_device is not None:  # refused now, not after the first model's data
            check_device(self.device)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.threads = threads
        self.progress = progress
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
            workers, trainer.threads = plan_workers(len(todo), workers, self.threads, self.device)
            train_in_pool(trainer, list(todo.values()), workers, progress)
            models = [trainer.train(data, seed) for data, seed in jobs]
            if self.cache_dir is not None:  # a temporary cache's entries are gone after
                self.cache_entries.update(trainer.cache_entries)
            return models
