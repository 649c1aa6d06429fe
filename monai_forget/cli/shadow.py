"""``monai-forget shadow train``: train reference models by index into a shared cache.

One call trains jobs ``I .. I+K-1`` of an audit that needs many reference models (job
``i``: :func:`monai_forget.shadow.reference_subset`), so a Slurm job array or a
Kubernetes indexed job can spread them over machines; the audit then only reads the
cache. See docs/reference_models.md.
"""

from __future__ import annotations

import argparse

from monai_forget.cli.options import (
    add_recipe_arguments,
    add_run_arguments,
    index_int,
    positive_int,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``shadow`` sub-command and its ``train`` action."""
    shadow = subparsers.add_parser("shadow", help="train reference/shadow models into a cache")
    actions = shadow.add_subparsers(dest="shadow_command", required=True)
    train = actions.add_parser(
        "train",
        help="train reference models INDEX .. INDEX+COUNT-1 into the cache",
        description=(
            "Train reference model(s) by index into CACHE_DIR/shadow/<key>.pt. Model i "
            "trains on a seeded, label-stratified random FRACTION of the data (seed "
            "SEED + i) with seed SEED + i. Models already in the cache are skipped, so "
            "a job can be re-run; the audit reads the same entries."
        ),
    )
    add_recipe_arguments(train)
    train.add_argument("--data", required=True, help="image folder, .npz or datalist .json")
    train.add_argument("--data-split", help="split of a MedMNIST-layout .npz")
    train.add_argument(
        "--index", type=index_int, required=True, help="first job (e.g. $SLURM_ARRAY_TASK_ID)"
    )
    train.add_argument(
        "--count",
        type=positive_int,
        default=1,
        help="jobs to train from --index (default %(default)s)",
    )
    train.add_argument(
        "--fraction",
        type=float,
        default=0.5,
        help="share of the data each model trains on (default %(default)s)",
    )
    train.add_argument("--cache-dir", required=True, help="shared cache folder")
    add_run_arguments(train, "base seed: job i uses seed + i for its subset and training")
    train.add_argument(
        "--workers",
        type=positive_int,
        help="models trained side by side (default: the CPU cores this process may use, "
        "at most --count; 1 on a GPU)",
    )
    train.add_argument(
        "--threads",
        type=positive_int,
        help="torch threads per model (default: the cores shared out among the workers, "
        "torch's default for one); fix it for weights that are the same bit for bit "
        "whatever --workers is",
    )
    train.set_defaults(func=run_train)


def run_train(args: argparse.Namespace) -> int:
    """Handle ``shadow train``: print one line per job, trained or found in the cache."""
    from monai_forget.data import load_images
    from monai_forget.recipe_files import load_recipe
    from monai_forget.shadow import ShadowTrainer, reference_jobs

    trainer = ShadowTrainer(
        load_recipe(args.recipe, allow_code=args.trust_recipe),
        device=args.device,
        cache_dir=args.cache_dir,
        threads=args.threads,
    )
    data = load_images(args.data, split=args.data_split)
    indices = range(args.index, args.index + args.count)
    datasets, seeds = reference_jobs(data, indices, args.fraction, args.seed)
    cached = [trainer.is_cached(d, s) for d, s in zip(datasets, seeds, strict=True)]
    trainer.train_many(datasets, seeds, args.workers, progress=True)
    for i, subset, seed, was_cached in zip(indices, datasets, seeds, cached, strict=True):
        state = "cached" if was_cached else "trained"
        path = trainer.cache_path(subset, seed)
        print(f"job {i}: {state} ({len(subset)} samples, seed {seed}) -> {path}")
    return 0
