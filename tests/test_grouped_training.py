"""Reference models trained as a group (issue 51, item 1): each grouped model is the model
one-at-a-time training gives for its own data and seed (to float tolerance), every model
is its own cache entry, and what cannot be grouped is refused or trained one at a time."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from monai_forget.data import LabelledImages, load_digits
from monai_forget.shadow import ShadowTrainer, SupervisedRecipe, reference_jobs
from monai_forget.shadow.grouped import fit_group, group_refusal
from monai_forget.shadow.trainer import group_size

MLP = ("mlp", {"in_shape": (1, 8, 8), "num_classes": 10, "hidden": (32,)})


@pytest.fixture(scope="module")
def digits() -> LabelledImages:
    return load_digits().subset(np.arange(400))


def _weights(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def _outputs(model: torch.nn.Module, data: LabelledImages) -> torch.Tensor:
    with torch.no_grad():
        return model.eval()(torch.from_numpy(data.images))


def _built(recipe: SupervisedRecipe, seed: int) -> torch.nn.Module:
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return recipe.build()


@pytest.mark.parametrize(
    "recipe",
    [
        SupervisedRecipe(*MLP, steps=20, batch_size=16),  # Adam, steps: sets of any size
        SupervisedRecipe(*MLP, epochs=2, batch_size=32, optimizer="sgd", learning_rate=0.05),
        SupervisedRecipe(
            "Classifier",
            {"in_shape": (1, 8, 8), "classes": 10, "channels": (4, 8), "strides": (2, 2)},
            steps=15,
            batch_size=16,
        ),
    ],
    ids=["adam-steps", "sgd-epochs", "monai-classifier"],
)
def test_each_grouped_model_is_its_own_one_at_a_time_model(recipe, digits):
    sizes = (150, 150, 150) if recipe.steps is None else (150, 120, 90)
    sets = [digits.subset(np.arange(k * 50, k * 50 + n)) for k, n in enumerate(sizes)]
    seeds = [11, 12, 13]
    alone = [ShadowTrainer(recipe).train(d, s) for d, s in zip(sets, seeds, strict=True)]
    grouped = [_built(recipe, s) for s in seeds]
    start = [_outputs(m, digits) for m in grouped]
    fit_group(recipe, grouped, sets, seeds)
    # Compared by what the models compute: a parameter whose true gradient is zero (a
    # convolution's bias before an instance norm) moves by Adam's normalised float noise
    # and changes no output.
    for k, model in enumerate(grouped):
        moved = (_outputs(model, digits) - start[k]).abs().max()
        gap = (_outputs(model, digits) - _outputs(alone[k], digits)).abs().max()
        assert moved > 1e-2 and gap < 1e-4 * moved, (k, float(moved), float(gap))
        others = [j for j in range(3) if j != k]  # another seed's or set's model is far away
        assert all((_outputs(model, digits) - _outputs(alone[j], digits)).abs().max() > 100 * gap
                   for j in others)  # fmt: skip


def test_train_many_trains_a_group_into_one_cache_entry_per_model(digits, tmp_path):
    recipe = SupervisedRecipe(*MLP, steps=20, batch_size=16)
    datasets, seeds = reference_jobs(digits, range(4), fraction=0.5, seed=2)
    trainer = ShadowTrainer(recipe, cache_dir=tmp_path, progress=False)
    trainer.train(datasets[1], seeds[1])  # in the cache before the run: only read
    entry = trainer.cache_path(datasets[1], seeds[1])
    before = entry.stat().st_mtime_ns
    models = trainer.train_many(datasets, seeds)
    assert entry.stat().st_mtime_ns == before
    entries = sorted((tmp_path / "shadow").glob("*.pt"))
    assert entries == sorted(trainer.cache_path(d, s) for d, s in zip(datasets, seeds, strict=True))
    alone = [ShadowTrainer(recipe).train(d, s) for d, s in zip(datasets, seeds, strict=True)]
    for model, reference in zip(models, alone, strict=True):
        assert (_weights(model) - _weights(reference)).abs().max() < 1e-5
    assert set(trainer.cache_entries) == {str(p) for p in entries}


def test_what_cannot_be_grouped_is_refused_or_trained_one_at_a_time(digits, monkeypatch):
    bn = SupervisedRecipe("Classifier", {"in_shape": (1, 8, 8), "classes": 10, "channels": (4,),
                          "strides": (2,), "norm": "batch"}, steps=2)  # fmt: skip
    assert "running statistics" in group_refusal(bn, bn.build())
    amp = SupervisedRecipe(*MLP, steps=2, amp=True)
    assert "mixed precision" in group_refusal(amp, amp.build())
    plain = SupervisedRecipe(*MLP, epochs=1)
    assert group_refusal(plain, plain.build()) is None
    with pytest.raises(ValueError, match="cannot be trained as a group: running statistics"):
        fit_group(bn, [bn.build()], [digits], [0])
    with pytest.raises(ValueError, match="training sets of one size"):
        fit_group(
            plain, [plain.build(), plain.build()], [digits, digits.subset(np.arange(9))], [0, 1]
        )
    with pytest.raises(ValueError, match="one set and one seed per model"):
        fit_group(plain, [plain.build()], [digits, digits], [0])
    # train_many with a batch-norm recipe goes to the worker pool, not to a group
    called = []
    monkeypatch.setattr("monai_forget.shadow.trainer.fit_group", lambda *a, **k: called.append(a))
    ShadowTrainer(bn).train_many([digits.subset(np.arange(40))], [0], workers=1)
    assert not called


def test_group_size_follows_the_memory_budget(digits, monkeypatch):
    recipe = SupervisedRecipe(*MLP, steps=2)
    assert group_size(digits, recipe, torch.device("cpu")) == 64  # small sets: the cap
    staged = digits.images.nbytes  # what each model of the group stages, at least
    monkeypatch.setattr("monai_forget.shadow.trainer.GROUP_MEMORY_CPU", 10 * staged)
    size = group_size(digits, recipe, torch.device("cpu"))
    assert 1 <= size < 10 and size * staged <= 10 * staged
    monkeypatch.setattr("monai_forget.shadow.trainer.GROUP_MEMORY_CPU", staged // 2)
    assert group_size(digits, recipe, torch.device("cpu")) == 1  # never fewer than one
