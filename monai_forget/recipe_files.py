"""Recipes named on the command line: a data-only JSON file, or (trusted) code.

A data-only recipe is a JSON object of :class:`~monai_forget.shadow.SupervisedRecipe`
fields; nothing in it is evaluated. A MONAI bundle config or a ``module:attribute``
name runs code when loaded, so it is accepted only when the caller says it trusts it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from monai_forget.shadow import BundleRecipe, Recipe, SupervisedRecipe

__all__ = ["CODE_WARNING", "load_recipe"]


#: Why a bundle config or a ``module:attribute`` recipe needs the caller's trust.
CODE_WARNING = (
    "runs Python code (a bundle config evaluates its '$' expressions, module:attribute "
    "imports Python): trust it as you would a script"
)


def load_recipe(spec: str | Path, *, allow_code: bool = False) -> Recipe:
    """A recipe from the command line: a data-only JSON file, or (trusted) code.

    - A ``.json`` file holding one object whose keys are :class:`SupervisedRecipe`
      fields (``"network"`` required) gives a :class:`SupervisedRecipe`. It is data only:
      nothing in it is evaluated, the network is looked up by name in the registry.
    - With ``allow_code``: any other ``.json``/``.yaml`` file is taken as a MONAI bundle
      training config (:class:`BundleRecipe` with its default keys), and
      ``module:attribute`` names a Recipe object, or a callable returning one. Both run
      code (:data:`CODE_WARNING`), so they are refused without ``allow_code``.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: not a data-only recipe and ``allow_code`` is false, unknown keys, or
            not a recipe.
    """
    text = str(spec)
    path = Path(text)
    refuse = (
        f"recipe {text} {CODE_WARNING}; if you do, pass `allow_code`, "
        'or give a data-only recipe .json, e.g. {"network": "mlp", "network_args": {...}}'
    )
    if path.suffix.lower() in (".json", ".yaml", ".yml"):
        if not path.is_file():
            raise FileNotFoundError(f"recipe file {path} does not exist")
        if path.suffix.lower() == ".json":
            try:
                content = json.loads(path.read_text(encoding="utf-8"))
            except ValueError as err:  # JSON or UTF-8: name the file, not its content
                raise ValueError(
                    f"recipe {path} is not UTF-8 JSON ({type(err).__name__})"
                ) from None
            if isinstance(content, dict) and "network" in content and "train" not in content:
                return _data_only(content, path)
        if not allow_code:
            raise ValueError(refuse)
        return BundleRecipe(str(path))
    if ":" in text:
        if not allow_code:
            raise ValueError(refuse)
        import importlib

        module_name, _, attribute = text.partition(":")
        obj = getattr(importlib.import_module(module_name), attribute)
        recipe = obj() if callable(obj) and not isinstance(obj, Recipe) else obj
        if isinstance(recipe, Recipe):
            return recipe
        raise ValueError(f"{text} is not a Recipe (needs name, build() and fit())")
    raise ValueError(
        f"cannot read recipe {text!r}: give a recipe .json, a bundle train config, "
        "or package.module:attribute"
    )


def _code_in(value: Any, where: str) -> str | None:
    """Where in ``value`` a MONAI config expression sits (``"$..."``, ``_target_``)."""
    if isinstance(value, str) and value.startswith(("$", "@", "%")):
        return f"{where} = {value!r}"
    if isinstance(value, dict):
        if "_target_" in value:
            return f"{where}._target_"
        return next((f for k, v in value.items() if (f := _code_in(v, f"{where}.{k}"))), None)
    if isinstance(value, list):
        return next((f for i, v in enumerate(value) if (f := _code_in(v, f"{where}[{i}]"))), None)
    return None


def _data_only(content: dict, path: Path) -> SupervisedRecipe:
    """A data-only recipe from its JSON object, refused with the file and field named when
    it holds config code or arguments its network does not take."""
    found = _code_in(content, "recipe")
    if found:
        raise ValueError(
            f"recipe {path}: {found} is MONAI config code, which a data-only recipe does not "
            "evaluate; give plain values (numbers, strings, lists), or a bundle training "
            "config with `allow_code`"
        )
    try:
        recipe = SupervisedRecipe.from_dict(content)
        recipe.build()  # the network's own check of its arguments, before any data is read
    except (TypeError, ValueError) as err:
        raise ValueError(f"recipe {path}: {err}") from None
    return recipe
