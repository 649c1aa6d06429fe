"""Shadow and reference models "with the same design" as the target, from a recipe.

- ``recipes``: what "the same design" is (:class:`SupervisedRecipe`,
  :class:`BundleRecipe`, :class:`CallableRecipe`);
  :func:`monai_forget.recipe_files.load_recipe` reads one from the command line.
- ``trainer``: :class:`ShadowTrainer`, seeded and cached training of one model
  (``train``) or of many over worker processes (``train_many``).
- ``parallel``: the worker pool behind ``train_many``.
- ``reference_jobs``: reference model ``i`` of an audit that needs many
  (:func:`reference_subset`), for training on a cluster into a shared cache.
"""

from monai_forget.shadow.recipes import (
    BundleRecipe,
    CallableRecipe,
    Recipe,
    SupervisedRecipe,
)
from monai_forget.shadow.reference_jobs import reference_jobs, reference_subset
from monai_forget.shadow.trainer import ShadowTrainer

__all__ = [
    "BundleRecipe",
    "CallableRecipe",
    "Recipe",
    "ShadowTrainer",
    "SupervisedRecipe",
    "reference_jobs",
    "reference_subset",
]
