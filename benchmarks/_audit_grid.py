"""The withdrawal audit grid's data, scenarios and evaluator set-ups, shared by the
benchmarks that run the K-S, EMA and reference-model auditors over it
(``withdrawal_audit_grid.py``, ``withdrawal_audit_grid_refmodel.py``,
``papers_calibration.py``, ``performance.py``); ``withdrawal_audit_grid.py``'s docstring
describes the grid."""

from __future__ import annotations

import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from monai_forget.audit import FORGOTTEN, NOT_FORGOTTEN, EMAAuditor, KSAuditor
from monai_forget.data import (
    ACDC_GROUPS,
    LabelledImages,
    concat,
    data_root,
    load_acdc_slices,
    load_digits,
    load_mnist_test,
    load_pneumoniamnist,
)
from monai_forget.demo import DIGITS_RECIPE
from monai_forget.shadow import ShadowTrainer, SupervisedRecipe

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import MNIST_RECIPE, PNEUMONIA_RECIPE, permuted, unique_images, without

# The evaluator-overhead measurement's "small CNN": monai_forget's reference small_cnn
# (32, 64 channels), with a short budget: only its evaluation cost matters there.
SPEED_RECIPE = SupervisedRecipe(
    network="small_cnn",
    network_args={"in_channels": 1, "num_classes": 2},
    steps=300,
    batch_size=64,
    learning_rate=1e-3,
)


K_LEVELS = (100, 80, 60, 40)


QUERY_SIZES: tuple[int | None, ...] = (20, 50, 200, None)  # None: the whole query set


NOISE_SIGMA = 1.5


MAX_ROTATION_DEGREES = 90.0


N_FOLDS = 6  # five for the target, one held out


DATASETS = ("pneumoniamnist", "mnist", "digits")


@dataclass(frozen=True)
class DataSpec:
    """One data set's pools and the consortium's design for it."""

    name: str
    recipe: SupervisedRecipe
    folds: tuple[LabelledImages, ...]
    calibration: LabelledImages
    ood: LabelledImages
    ood_name: str


def _with_classes(data: LabelledImages, labels: np.ndarray, num_classes: int) -> LabelledImages:
    return LabelledImages(data.images, labels, data.ids, num_classes)


def _folds(pool: LabelledImages, size: int) -> tuple[tuple[LabelledImages, ...], LabelledImages]:
    """``N_FOLDS`` consecutive blocks of ``size`` and the remainder."""
    if len(pool) <= N_FOLDS * size:
        raise ValueError(f"{len(pool)} samples cannot hold {N_FOLDS} folds of {size} and more")
    folds = tuple(pool.subset(slice(i * size, (i + 1) * size)) for i in range(N_FOLDS))
    return folds, pool.subset(slice(N_FOLDS * size, None))


def _unique_pneumonia_train(root: Path) -> LabelledImages:
    return unique_images(load_pneumoniamnist("train", root=root))


def load_pneumonia_spec(root: Path, seed: int) -> DataSpec:
    """Folds from the train split; D_C from val + test; OOD: ACDC slices, normal vs not."""
    train = permuted(_unique_pneumonia_train(root), seed)
    folds, _ = _folds(train, 600)
    held = concat(load_pneumoniamnist("val", root=root), load_pneumoniamnist("test", root=root))
    calibration = without(unique_images(held), train)
    acdc = unique_images(load_acdc_slices(root, size=28))
    abnormal = (acdc.labels != ACDC_GROUPS.index("NOR")).astype(np.int64)
    ood = _with_classes(acdc, abnormal, 2)
    return DataSpec("PneumoniaMNIST", PNEUMONIA_RECIPE, folds, calibration, ood, "ACDC")


def load_mnist_spec(root: Path, seed: int) -> DataSpec:
    """Folds and D_C from the 10k MNIST test digits; OOD: PneumoniaMNIST labelled 0/1."""
    pool = permuted(unique_images(load_mnist_test(root)), seed)
    folds, calibration = _folds(pool, 1000)
    xray = _unique_pneumonia_train(root)
    ood = _with_classes(xray, xray.labels, 10)
    return DataSpec("MNIST", MNIST_RECIPE, folds, calibration, ood, "PneumoniaMNIST")


def _mnist_8x8(root: Path) -> LabelledImages:
    """MNIST digits area-pooled to 8x8 and scaled to a maximum of 1, like digits."""
    mnist = load_mnist_test(root)
    small = torch.nn.functional.adaptive_avg_pool2d(torch.from_numpy(mnist.images.copy()), 8)
    small = small / small.amax(dim=(1, 2, 3), keepdim=True).clamp_min(1e-8)
    ids = tuple(f"{i}@8x8" for i in mnist.ids) if mnist.ids else None
    return unique_images(LabelledImages(small.numpy(), mnist.labels, ids, 10))


def load_digits_spec(root: Path, seed: int) -> DataSpec:
    """Folds and D_C from scikit-learn's digits; OOD: MNIST at 8x8 (same labels)."""
    pool = permuted(load_digits(), seed)
    folds, calibration = _folds(pool, 225)
    return DataSpec("digits", DIGITS_RECIPE, folds, calibration, _mnist_8x8(root), "MNIST 8x8")


LOADERS: dict[str, Callable[[Path, int], DataSpec]] = {
    "pneumoniamnist": load_pneumonia_spec,
    "mnist": load_mnist_spec,
    "digits": load_digits_spec,
}


def degrade(data: LabelledImages, k: int, seed: int) -> LabelledImages:
    """EMA's calibration-quality factor: k% of ``data`` clean, the rest corrupted.

    Of the (100 - k)% corrupted samples, half are rotated by a uniform angle in
    [-90, 90] degrees (bilinear, zero fill) and half get additive Gaussian noise of
    standard deviation ``NOISE_SIGMA``. The random draws depend on ``seed`` only, and
    rotated (noised) samples are taken from the front (back) of one permutation, so a
    lower k corrupts a superset of the samples a higher k corrupts.
    """
    from scipy.ndimage import rotate

    if k == 100:
        return data
    rng = np.random.default_rng(seed)
    n = len(data)
    order = rng.permutation(n)
    angles = rng.uniform(-MAX_ROTATION_DEGREES, MAX_ROTATION_DEGREES, n)
    noise = rng.normal(0.0, NOISE_SIGMA, data.images.shape).astype(np.float32)
    n_bad = round((100 - k) / 100 * n)
    rotated, noised = order[: n_bad // 2], order[n - (n_bad - n_bad // 2) :]
    images = data.images.copy()
    for i in rotated:
        for ch in range(images.shape[1]):
            images[i, ch] = rotate(images[i, ch], angles[i], reshape=False, order=1, cval=0.0)
    images[noised] += noise[noised]
    ids = list(data.ids) if data.ids else [str(i) for i in range(n)]
    for i in rotated:
        ids[i] += "+rotated"
    for i in noised:
        ids[i] += "+noise"
    return LabelledImages(images, data.labels, tuple(ids), data.num_classes)


@dataclass
class Scenario:
    """One audited cell: the target's training set, D_Q, D_C and the right answer."""

    dataset: str
    grid: str  # "Liu" or "EMA"
    name: str
    recipe: SupervisedRecipe
    target_data: LabelledImages
    query: LabelledImages
    calibration: LabelledImages
    expected: str
    k: int | None = None
    contains_query: bool = False


def _fraction(data: LabelledImages, fraction: float, seed: int) -> LabelledImages:
    return data.split(fraction, seed=seed)[0]


def sample_of(data: LabelledImages, n: int, seed: int) -> LabelledImages:
    return data if n >= len(data) else _fraction(data, n / len(data), seed)


def liu_scenarios(spec: DataSpec, seed: int, quick: bool) -> list[Scenario]:
    """Liu & Tsaftaris 2020's D* grid with D_Q = fold 1 and D_C = the calibration pool."""
    d_q, d_c = spec.folds[0], spec.calibration
    ood = sample_of(spec.ood, len(d_c), seed)
    options = [
        ("D_Q only", d_q, True),
        ("50% of D_C", _fraction(d_c, 0.5, seed + 1), False),
        ("100% of D_C", d_c, False),
        ("D_C + 10% of D_Q", concat(d_c, _fraction(d_q, 0.1, seed + 1)), True),
        ("D_C + 50% of D_Q", concat(d_c, _fraction(d_q, 0.5, seed + 1)), True),
        ("D_C + 100% of D_Q", concat(d_c, d_q), True),
        (f"out-of-domain ({spec.ood_name}, {len(ood)})", ood, False),
    ]
    if quick:
        options = [options[i] for i in (0, 2, 5, 6)]
    return [
        Scenario(
            spec.name,
            "Liu",
            f"Liu: D* = {name}",
            spec.recipe,
            target_data,
            d_q,
            d_c,
            NOT_FORGOTTEN if member else FORGOTTEN,
            contains_query=member,
        )
        for name, target_data, member in options
    ]


def ema_scenarios(spec: DataSpec, seed: int, quick: bool) -> list[Scenario]:
    """Huang et al. 2021's grid: query kind x calibration quality k x query size."""
    fold_size = len(spec.folds[0])
    target_data = concat(*spec.folds[:5])
    queries = [(f"training fold {i + 1}", spec.folds[i], True) for i in range(5)]
    queries += [
        ("held-out fold", spec.folds[5], False),
        (f"out-of-domain ({spec.ood_name})", sample_of(spec.ood, fold_size, seed + 2), False),
    ]
    k_levels, sizes = K_LEVELS, QUERY_SIZES
    if quick:
        queries = [queries[0], queries[5], queries[6]]
        k_levels, sizes = (100, 40), (50, None)
    calibrations = {k: degrade(spec.calibration, k, seed) for k in k_levels}
    scenarios = []
    for name, full_query, member in queries:
        subsets = [
            full_query if n is None else sample_of(full_query, n, seed)
            for n in sizes
            if n is None or n < len(full_query)
        ]
        for k in k_levels:
            for query in subsets:
                scenarios.append(
                    Scenario(
                        spec.name,
                        "EMA",
                        f"EMA: {name}, k={k}",
                        spec.recipe,
                        target_data,
                        query,
                        calibrations[k],
                        NOT_FORGOTTEN if member else FORGOTTEN,
                        k=k,
                        contains_query=member,
                    )
                )
    return scenarios


@dataclass(frozen=True)
class EvaluatorSetup:
    """The PneumoniaMNIST model and sets used for the evaluator-overhead measurement."""

    recipe: SupervisedRecipe
    target_data: LabelledImages
    query: LabelledImages
    calibration: LabelledImages


def evaluator_setups(root: Path, spec: DataSpec) -> list[EvaluatorSetup]:
    """A target trained on PneumoniaMNIST folds 1-5; D_Q: the test split; D_C: the val
    split (both without duplicates). Two designs: ``SPEED_RECIPE`` and the grid's."""
    train = _unique_pneumonia_train(root)
    val = without(unique_images(load_pneumoniamnist("val", root=root)), train)
    test = without(unique_images(load_pneumoniamnist("test", root=root)), train, val)
    target_data = concat(*spec.folds[:5])
    return [EvaluatorSetup(r, target_data, test, val) for r in (SPEED_RECIPE, spec.recipe)]


def handler_overhead(
    setup: EvaluatorSetup, cache: Path, seed: int, target_seed: int, repeats: int
) -> dict[str, float]:
    """Median wall time of a SupervisedEvaluator run with vs without the audit handlers."""
    from monai.engines import SupervisedEvaluator

    from monai_forget.handlers import EMAPValue, KSCalibratedRatio

    options = {"recipe": setup.recipe, "seed": seed, "cache_dir": cache}
    model = ShadowTrainer(setup.recipe, cache_dir=cache).train(setup.target_data, target_seed)
    ks_reference = KSAuditor(**options).fit_reference(setup.query, setup.calibration)
    ema_reference = EMAAuditor(**options).fit_reference(setup.query, setup.calibration)
    loader = torch.utils.data.DataLoader(setup.query.to_dataset(), batch_size=64)

    def evaluator(with_handlers: bool) -> SupervisedEvaluator:
        # As a user builds them: from the references, the content check on (the default).
        ks = KSCalibratedRatio(ks_reference, from_logits=True)
        ema = EMAPValue(ema_reference, from_logits=True)
        return SupervisedEvaluator(
            device=torch.device("cpu"),
            val_data_loader=loader,
            network=model,
            key_val_metric={"rho_KS": ks} if with_handlers else None,
            additional_metrics={"rho_EMA": ema} if with_handlers else None,
        )

    engines = {False: evaluator(False), True: evaluator(True)}
    times: dict[bool, list[float]] = {False: [], True: []}
    for engine in engines.values():  # warm-up
        engine.run()
    for r in range(repeats):
        for flag in (False, True) if r % 2 == 0 else (True, False):
            start = time.perf_counter()
            engines[flag].run()
            times[flag].append(time.perf_counter() - start)
    plain, audited = statistics.median(times[False]), statistics.median(times[True])
    return {
        "n": len(setup.query),
        "plain": plain,
        "audited": audited,
        "overhead": audited / plain - 1.0,
        "best_overhead": min(times[True]) / min(times[False]) - 1.0,
        "rho_KS": float(engines[True].state.metrics["rho_KS"]),
        "rho_EMA": float(engines[True].state.metrics["rho_EMA"]),
    }


def progress(message: str) -> None:
    """A progress line on stderr (out of the results)."""
    print(message, file=sys.stderr, flush=True)


def start_run(threads: int) -> Path | None:
    """Quiet warnings and set torch's threads; the real data's folder, or None (said on
    stderr) when it is absent."""
    warnings.filterwarnings("ignore")
    torch.set_num_threads(threads)
    root = data_root()
    if not root.is_dir():
        progress(f"real data not found at {root}; set MONAI_FORGET_DATA to the shared data folder")
        return None
    return root
