"""Many shadow/reference models at once: worker processes give the sequential weights, bit
for bit, each model is its own cache entry, and job ``i`` is the same everywhere."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from monai_forget.cli import main
from monai_forget.data import LabelledImages, load_digits
from monai_forget.shadow import (
    CallableRecipe,
    ShadowTrainer,
    SupervisedRecipe,
    reference_jobs,
    reference_subset,
)

RECIPE = SupervisedRecipe(
    "mlp", {"in_shape": (1, 8, 8), "num_classes": 10, "hidden": (32,)}, steps=30, batch_size=16
)


@pytest.fixture(scope="module")
def digits() -> LabelledImages:
    return load_digits().subset(np.arange(300))


def _state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu() for k, v in model.state_dict().items()}


def _same(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = _state(a), _state(b)
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def _close(a: torch.nn.Module, b: torch.nn.Module, data: LabelledImages) -> bool:
    """The same model to float tolerance (grouped training: tests/test_grouped_training.py)."""
    x = torch.from_numpy(data.images)
    with torch.no_grad():
        return bool((a.eval()(x) - b.eval()(x)).abs().max() < 1e-4)


def test_reference_subset_is_a_seeded_stratified_fraction(digits):
    subset, seed = reference_subset(digits, 3, fraction=0.25, seed=10)
    assert seed == 13
    assert len(subset) == round(0.25 * len(digits))
    expected = digits.split(0.25, seed=13)[0]
    assert np.array_equal(subset.images, expected.images)
    assert np.array_equal(subset.labels, expected.labels)
    # stratified: every class keeps its share, to within one sample
    whole, part = np.bincount(digits.labels), np.bincount(subset.labels, minlength=10)
    assert np.all(np.abs(part - 0.25 * whole) <= 1)
    again, _ = reference_subset(digits, 3, fraction=0.25, seed=10)
    assert subset.fingerprint == again.fingerprint
    other, _ = reference_subset(digits, 4, fraction=0.25, seed=10)
    assert other.fingerprint != subset.fingerprint
    with pytest.raises(ValueError, match="index"):
        reference_subset(digits, -1)
    with pytest.raises(ValueError, match="fraction"):
        reference_subset(digits, 0, fraction=1.0)


def test_two_workers_give_the_sequential_weights_bit_for_bit(digits, tmp_path):
    datasets, seeds = reference_jobs(digits, range(3), fraction=0.5, seed=5)
    sequential = [
        ShadowTrainer(RECIPE, threads=1).train(d, s) for d, s in zip(datasets, seeds, strict=True)
    ]
    pool = {"threads": 1, "grouped": False}  # worker processes, one model at a time
    one = ShadowTrainer(RECIPE, **pool).train_many(datasets, seeds, workers=1)
    cached = ShadowTrainer(RECIPE, cache_dir=tmp_path, **pool)
    first = cached.cache_path(datasets[0], seeds[0])
    cached.train(datasets[0], seeds[0])  # one model is in the cache before the run
    before = first.stat()
    two = cached.train_many(datasets, seeds, workers=2)
    for models in (one, two):
        assert len(models) == 3
        assert all(_same(a, b) for a, b in zip(sequential, models, strict=True))
    assert not _same(sequential[0], sequential[1])
    # one cache entry per model, keyed as train() keys it; the cached one was only read
    entries = sorted((tmp_path / "shadow").glob("*.pt"))
    assert entries == sorted(cached.cache_path(d, s) for d, s in zip(datasets, seeds, strict=True))
    assert (first.stat().st_ino, first.stat().st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert not list((tmp_path / "shadow").glob(".*"))  # no temporary files left


def test_a_recipe_that_cannot_reach_a_worker_is_refused(digits):
    recipe = CallableRecipe(lambda: RECIPE.build(), RECIPE.fit, name="local")
    datasets, seeds = reference_jobs(digits, range(2))
    with pytest.raises(ValueError, match="cannot be sent to worker processes"):
        ShadowTrainer(recipe).train_many(datasets, seeds, workers=2)  # not a group: a pool
    with pytest.raises(ValueError, match="one seed per set"):
        ShadowTrainer(RECIPE).train_many(datasets, seeds[:1])
    with pytest.raises(ValueError, match="workers"):
        ShadowTrainer(RECIPE).train_many(datasets, seeds, workers=0)


def test_cli_trains_jobs_by_index_into_the_cache_the_audit_reads(digits, tmp_path, capsys):
    data = tmp_path / "data.npz"
    np.savez(data, images=digits.images, labels=digits.labels)
    recipe = tmp_path / "recipe.json"
    recipe.write_text(
        '{"network": "mlp", "network_args": {"in_shape": [1, 8, 8], "num_classes": 10, '
        '"hidden": [32]}, "steps": 30, "batch_size": 16}'
    )
    cache = tmp_path / "cache"
    command = ["shadow", "train", "--recipe", str(recipe), "--data", str(data)]
    command += ["--fraction", "0.5", "--seed", "7", "--cache-dir", str(cache), "--threads", "1"]
    assert main([*command, "--index", "2", "--count", "2", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    reader = ShadowTrainer(RECIPE, cache_dir=cache)
    for i in (2, 3):
        subset, seed = reference_subset(digits, i, 0.5, 7)
        path = reader.cache_path(subset, seed)
        assert f"job {i}: trained ({len(subset)} samples, seed {seed}) -> {path}" in out
        expected = ShadowTrainer(RECIPE, threads=1).train(subset, seed)
        assert _close(reader.train(subset, seed), expected, digits)  # trained as a group
    assert len(list((cache / "shadow").glob("*.pt"))) == 2
    assert main([*command, "--index", "3"]) == 0  # a re-run job finds its model
    assert "job 3: cached" in capsys.readouterr().out
    assert len(list((cache / "shadow").glob("*.pt"))) == 2
    # a damaged entry (truncated by a full disk, say) ends in one line naming it
    damaged = reader.cache_path(*reference_subset(digits, 3, 0.5, 7))
    damaged.write_bytes(damaged.read_bytes()[:50])
    assert main([*command, "--index", "3"]) == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]  # after the (empty) progress bar
    assert last.startswith("monai-forget: error: the cache entry") and f"delete {damaged}" in last
    assert "Traceback" not in err


SCRIPT = """
from monai_forget.audit import ReferenceModelAuditor
from monai_forget.data import load_digits
from monai_forget.shadow import SupervisedRecipe

def run():
    digits = load_digits()
    # batch norm's running statistics: not grouped, so the models train in worker processes
    recipe = SupervisedRecipe("Classifier", {"in_shape": [1, 8, 8], "classes": 10,
                                             "channels": [4], "strides": [2], "norm": "batch"},
                              steps=5)
    auditor = ReferenceModelAuditor(recipe=recipe, n_references=2, workers=2)
    known = (digits.subset(slice(60, 200)), digits.subset(slice(200, 340)))
    auditor.fit_reference(digits.subset(slice(0, 60)), known)
    print("trained")
"""


@pytest.mark.parametrize("guarded", [False, True])
@pytest.mark.slow
def test_a_script_without_the_main_guard_is_told_how_to_fix_it(tmp_path, guarded):
    """A user's script that trains reference models in worker processes without
    ``if __name__ == "__main__":`` broke the pool with multiprocessing's bootstrapping
    traceback; it now gets one error naming the guard (and workers=1); with it, it runs."""
    import subprocess
    import sys

    from commands import environment

    call = 'if __name__ == "__main__":\n    run()\n' if guarded else "run()\n"
    (tmp_path / "script.py").write_text(SCRIPT + call)
    result = subprocess.run(
        [sys.executable, "script.py"], cwd=tmp_path, env=environment(OMP_NUM_THREADS="1"),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if guarded:
        assert result.returncode == 0 and result.stdout.strip() == "trained", result.stderr
    else:
        assert result.returncode != 0
        # multiprocessing's resource tracker may warn about the broken pool's semaphores
        # at shutdown, after the error; those lines are not the error's
        lines = [
            line for line in result.stderr.strip().splitlines() if "resource_tracker" not in line
        ]
        last = lines[-1]
        assert last.startswith("RuntimeError: a worker process") and "__main__" in last, last
        assert "workers=1" in last
