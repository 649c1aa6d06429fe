"""The unique-feature memorisation benchmark's engine (Hartley & Tsaftaris 2022 on MNIST,
PneumoniaMNIST and ACDC): its state, cached trainings and scans, shared by
``unique_feature_memorisation.py`` and the leak-scan benchmarks built on its models
(``unique_feature_memorisation.py``'s docstring describes the design)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.stats
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROSTER

from monai_forget.data import LabelledImages, data_root, load_mnist_test, load_pneumoniamnist
from monai_forget.handlers import CheckpointRecorder
from monai_forget.io import atomic_write
from monai_forget.memorisation import (
    EarlyStoppingTraining,
    UniqueFeature,
    inject_feature,
    select_checkpoints,
    self_influence,
)


@dataclass(frozen=True)
class Config:
    n_train: int = 1000
    n_val: int = 500
    n_probes: int = 500
    top_k: int = 10  # canaries: top-k and bottom-k TracIn images
    n_controls: int = 40
    scan_reps: int = 10
    scan_controls: int = 20
    max_epochs: int = 500
    patience: int = 10
    alpha: float = 0.05
    letter: str = "A"
    speed_probes: int = 2000
    scale_names: int = 10_000
    scale_decoys: int = 1000


FULL = Config()


class Store:
    """JSON records under one folder and model weights under another, written atomically.

    The records are small and kept in the repository (``--records``), so a grid that takes
    more CPU-hours than one sitting resumes on any machine; the weights (megabytes per
    model) stay in a local cache and are retrained when absent."""

    def __init__(self, records: Path, weights: Path) -> None:
        self.records, self.weights_root = records, weights

    def get(self, key: str) -> dict | None:
        path = self.records / f"{key}.json"
        return json.loads(path.read_text()) if path.is_file() else None

    def put(self, key: str, record: dict) -> None:
        path = self.records / f"{key}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(path, "w", overwrite=True) as handle:
            json.dump(record, handle, indent=0, sort_keys=True)
            handle.write("\n")

    def weights(self, key: str) -> Path:
        path = self.weights_root / f"{key}.pt"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path


@dataclass
class Split:
    train: LabelledImages
    val: LabelledImages
    probes: np.ndarray  # out-of-distribution probes for models of this data set
    num_classes: int


def load_splits(cfg: Config, seed: int) -> dict[str, Split]:
    root = data_root()
    mnist = load_mnist_test(root)
    order = np.random.default_rng(seed).permutation(len(mnist))
    m_train = mnist.subset(order[: cfg.n_train])
    m_val = mnist.subset(order[cfg.n_train : cfg.n_train + cfg.n_val])
    m_rest = mnist.subset(order[cfg.n_train + cfg.n_val :])
    p_train_all = load_pneumoniamnist("train", root)
    p_val_all = load_pneumoniamnist("val", root)
    p_test = load_pneumoniamnist("test", root)
    rng = np.random.default_rng(seed + 1)
    p_train = p_train_all.subset(rng.permutation(len(p_train_all))[: cfg.n_train])
    p_val = p_val_all.subset(rng.permutation(len(p_val_all))[: min(cfg.n_val, len(p_val_all))])
    return {
        "mnist": Split(m_train, m_val, np.array(p_test.images[: cfg.n_probes]), 10),
        "pneumoniamnist": Split(p_train, p_val, np.array(m_rest.images[: cfg.n_probes]), 2),
    }


STATE: dict = {}


def add_scan_options(parser: argparse.ArgumentParser) -> None:
    """The options the scripts built on this one share: seed, model cache, report file."""
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--cache", default=os.path.expanduser("~/.cache/monai_forget/unique_feature_memorisation")
    )
    parser.add_argument("--out", help="also write the report to this file")


def init_cached(args: argparse.Namespace) -> None:
    """:func:`init_worker` on the full configuration, records and weights under
    ``--cache``/full/seed<seed>; one torch thread."""
    cache = Path(args.cache) / "full" / f"seed{args.seed}"
    init_worker(FULL, args.seed, Store(cache / "records", cache / "weights"))


def init_worker(cfg: Config, seed: int, store: Store) -> None:
    torch.set_num_threads(1)
    STATE.update(cfg=cfg, seed=seed, store=store, splits=load_splits(cfg, seed))


def training(arch: str, num_classes: int) -> EarlyStoppingTraining:
    cfg = STATE["cfg"]
    args = {"in_shape": (1, 28, 28), "num_classes": num_classes}
    return EarlyStoppingTraining.paper(arch, args, max_epochs=cfg.max_epochs, patience=cfg.patience)


def trained(key: str, arch: str, split: Split, data: LabelledImages, seed: int, handlers=()):
    """Train (or load from the weights cache) one model; returns (model, training record)."""
    store, recipe = STATE["store"], training(arch, split.num_classes)
    path, record = store.weights(key), store.get(key + ".train")
    if record is not None and path.is_file() and not handlers:
        model = recipe.build()
        model.load_state_dict(torch.load(path, weights_only=True))
        return model.eval(), record
    start, cpu = time.perf_counter(), time.process_time()
    device = STATE.get("device", "cpu")
    model, tlog = recipe.train(data, split.val, seed=seed, device=device, handlers=handlers)
    model.cpu()  # weights saved and loaded on the CPU; the scans move them where they run
    record = {
        "epochs": tlog.epochs_run,
        "best_epoch": tlog.best_epoch,
        "train_wall_s": time.perf_counter() - start,
        "train_cpu_s": time.process_time() - cpu,
        "device": str(device),
    }
    torch.save(model.state_dict(), path)
    store.put(key + ".train", record)
    return model, record


def job_reference(data: str, arch: str) -> str:
    """A clean model with per-epoch checkpoints -> TracInCP -> the canary images."""
    store, cfg, seed = STATE["store"], STATE["cfg"], STATE["seed"]
    key = f"ref/{data}/{arch}"
    if store.get(key) is not None:
        return key
    split = STATE["splits"][data]
    recorder = CheckpointRecorder()
    start, cpu = time.perf_counter(), time.process_time()
    model, rec = trained(key, arch, split, split.train, seed + 1000, handlers=[recorder])
    chosen = select_checkpoints(recorder.checkpoints, n=10, reduction=0.95)
    influence = self_influence(model, chosen, split.train, batch_size=50)
    order = np.argsort(influence)
    picks = [("high", int(i)) for i in order[::-1][: cfg.top_k]]
    picks += [("low", int(i)) for i in order[: cfg.top_k]]
    store.put(
        key,
        {
            **rec,
            "picks": picks,
            "checkpoint_epochs": [c.epoch for c in chosen],
            "influence_top": float(influence[order[-1]]),
            "influence_bottom": float(influence[order[0]]),
            "ref_wall_s": time.perf_counter() - start,
            "ref_cpu_s": time.process_time() - cpu,
        },
    )
    return key


def scan_model(placement: str, rep: int):
    """The leak scan's model: MLP-1 on MNIST with one roster name on one image ("top":
    a top-influence image, "random") or none ("control"). Returns (model, training
    record, name, image index)."""
    store, seed, cfg = STATE["store"], STATE["seed"], STATE["cfg"]
    split = STATE["splits"]["mnist"]
    rng = np.random.default_rng([seed, 500, rep])
    name = str(rng.choice(ROSTER))
    random_index = int(rng.integers(len(split.train)))
    name, index = (None, None) if placement == "control" else (name, random_index)
    if placement == "top":
        index = store.get("ref/mnist/mlp-1")["picks"][rep % cfg.top_k][1]
    train = split.train
    if name is not None:
        train = inject_feature(train, index, UniqueFeature.from_text(name, (1, 1), 1, 1.0))
    model, rec = trained(f"scan/{placement}/{rep}", "mlp-1", split, train, seed + 200 + rep)
    return model, rec, name, index


def interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson interval of a binomial proportion k / n."""
    a = (1 - level) / 2
    lo = scipy.stats.beta.ppf(a, k, n - k + 1) if k > 0 else 0.0
    hi = scipy.stats.beta.ppf(1 - a, k + 1, n - k) if k < n else 1.0
    return float(lo), float(hi)
