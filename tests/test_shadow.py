"""Shadow training: seeded, cached, fixed step budget, bundle configs."""

import json

import numpy as np
import pytest
import torch

from monai_forget.data import LabelledImages, load_digits
from monai_forget.recipe_files import load_recipe
from monai_forget.shadow import (
    BundleRecipe,
    CallableRecipe,
    ShadowTrainer,
    SupervisedRecipe,
)

RECIPE = SupervisedRecipe(
    "mlp", {"in_shape": (1, 8, 8), "num_classes": 10, "hidden": (32,)}, steps=30, batch_size=16
)


@pytest.fixture(scope="module")
def digits() -> LabelledImages:
    return load_digits().subset(np.arange(200))


def _weights(model):
    return torch.cat([p.detach().flatten() for p in model.state_dict().values()])


def test_same_seed_same_model_different_seed_different_model(digits):
    trainer = ShadowTrainer(RECIPE)
    a, b, c = trainer.train(digits, seed=1), trainer.train(digits, seed=1), trainer.train(digits, 2)
    assert torch.equal(_weights(a), _weights(b))
    assert not torch.equal(_weights(a), _weights(c))


def test_training_does_not_touch_global_rng(digits):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    ShadowTrainer(RECIPE).train(digits, seed=0)
    assert torch.equal(torch.rand(3), expected)


def test_cache_hit_skips_training_and_returns_same_weights(digits, tmp_path):
    calls = []
    base = SupervisedRecipe("mlp", {"in_shape": (1, 8, 8), "num_classes": 10}, steps=5)

    def fit(model, data, seed, device):
        calls.append(seed)
        base.fit(model, data, seed=seed, device=device)

    recipe = CallableRecipe(base.build, fit, name="counting")
    trainer = ShadowTrainer(recipe, cache_dir=tmp_path)
    first = trainer.train(digits, seed=0)
    second = trainer.train(digits, seed=0)
    assert calls == [0]
    assert torch.equal(_weights(first), _weights(second))
    assert trainer.cache_path(digits, 0).exists()
    trainer.train(digits.subset(np.arange(100)), seed=0)  # other data: new key
    assert calls == [0, 0]


def test_steps_budget_counts_updates(digits):
    model = RECIPE.build()
    batches = []
    model.register_forward_pre_hook(lambda m, args: batches.append(args[0].shape[0]))
    RECIPE.fit(model, digits, seed=0, device=torch.device("cpu"))
    assert len(batches) == RECIPE.steps
    assert set(batches) == {RECIPE.batch_size}


def test_bundle_recipe_trains_the_given_network(digits, tmp_path):
    config = {
        "device": "$torch.device('cpu')",
        "network_def": {
            "_target_": "monai_forget.networks.MLP",
            "in_shape": [1, 8, 8],
            "num_classes": 10,
        },
        "network": "$@network_def.to(@device)",
        "train": {
            "dataset": None,
            "dataloader": {
                "_target_": "torch.utils.data.DataLoader",
                "dataset": "@train#dataset",
                "batch_size": 32,
                "shuffle": True,
            },
            "trainer": {
                "_target_": "monai.engines.SupervisedTrainer",
                "device": "@device",
                "max_epochs": 2,
                "train_data_loader": "@train#dataloader",
                "network": "@network",
                "optimizer": {
                    "_target_": "torch.optim.Adam",
                    "params": "$@network.parameters()",
                    "lr": 0.01,
                },
                "loss_function": "$torch.nn.CrossEntropyLoss()",
            },
        },
    }
    path = tmp_path / "train.json"
    path.write_text(json.dumps(config))
    recipe = load_recipe(path, allow_code=True)
    assert isinstance(recipe, BundleRecipe)
    untrained = recipe.build()
    trainer = ShadowTrainer(recipe)
    model = trainer.train(digits, seed=0)
    assert not torch.equal(_weights(model), _weights(untrained))
    with torch.no_grad():
        accuracy = (model(torch.tensor(digits.images)).argmax(1).numpy() == digits.labels).mean()
    assert accuracy > 0.5  # two epochs on 200 digits learn something


def test_load_recipe_from_json_and_module(tmp_path):
    path = tmp_path / "recipe.json"
    path.write_text(
        json.dumps(
            {
                "network": "mlp",
                "network_args": {"in_shape": [1, 8, 8], "num_classes": 10},
                "steps": 5,
            }
        )
    )
    recipe = load_recipe(path)
    assert isinstance(recipe, SupervisedRecipe) and recipe.steps == 5
    assert load_recipe("monai_forget.demo:DIGITS_RECIPE", allow_code=True).network == "mlp"
    path.write_text(json.dumps({"network": "mlp", "epochz": 3}))
    with pytest.raises(ValueError, match="epochz"):
        load_recipe(path)
    with pytest.raises(ValueError, match="module:attribute"):
        load_recipe("no-such-recipe")
    with pytest.raises(FileNotFoundError):
        load_recipe(tmp_path / "missing.json")


def test_bad_recipe_arguments(digits):
    with pytest.raises(ValueError, match="optimizer"):
        SupervisedRecipe("mlp", optimizer="rmsprop")
    with pytest.raises(ValueError, match="must be an integer >= 1"):
        SupervisedRecipe("mlp", steps=0)
    with pytest.raises(TypeError, match="recipe"):
        ShadowTrainer(object())
    with pytest.raises(ValueError, match="empty"):
        ShadowTrainer(RECIPE).train(digits.subset(np.arange(0)))


def test_mixed_precision_is_another_design_and_needs_cuda(digits, tmp_path):
    """Issue 34, item 11: ``amp`` trains with MONAI's mixed precision on a GPU. A recipe
    without it keeps the name (and so the cache entries) it had before the option; one
    with it is cached apart; on a CPU it is refused before anything trains."""
    plain = json.loads(RECIPE.name.split(":", 1)[1])
    assert "amp" not in plain and plain["network"] == RECIPE.network
    mixed = SupervisedRecipe.from_dict({**plain, "amp": True})
    assert mixed.amp and mixed.name != RECIPE.name
    assert SupervisedRecipe.from_dict(plain).name == RECIPE.name
    with pytest.raises(ValueError, match="needs a CUDA device"):
        ShadowTrainer(mixed, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="needs a CUDA device"):
        mixed.fit(mixed.build(), digits.subset(np.arange(40)), seed=0, device="cpu")
    assert not any(tmp_path.iterdir())  # nothing cached
