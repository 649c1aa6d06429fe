"""One ACDC label order for the whole package: ``monai_forget.data.acdc.ACDC_GROUPS``.

A model trained through one ACDC path (federated runs, ``monai-forget prepare`` + the
MONAI bundle) and audited through another must see the same class indices, so no
second order may appear in the code or in the bundle's configs.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import monai_forget
from monai_forget.data import ACDC_GROUPS, acdc_label

PACKAGE = Path(monai_forget.__file__).parent
BUNDLE_CONFIGS = PACKAGE.parent / "bundles" / "acdc_pathology_classification" / "configs"
NAMES = set(ACDC_GROUPS)


def _group_literals(tree: ast.AST) -> list[ast.AST]:
    """Tuple, list, set and dict literals that hold every ACDC group name."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            items = [*node.keys, *node.values]
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            items = node.elts
        else:
            continue
        strings = {i.value for i in items if isinstance(i, ast.Constant)}
        if strings >= NAMES:
            found.append(node)
    return found


def test_the_order_is_normal_first_and_labels_follow_it() -> None:
    assert ACDC_GROUPS == ("NOR", "MINF", "DCM", "HCM", "RV")
    assert [acdc_label(g, "here") for g in ACDC_GROUPS] == [0, 1, 2, 3, 4]


def test_no_second_acdc_order_in_the_package() -> None:
    places = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        places += [f"{path.relative_to(PACKAGE)}:{n.lineno}" for n in _group_literals(tree)]
    definition = PACKAGE / "data" / "acdc.py"
    assert len(places) == 1 and places[0].startswith("data/acdc.py:"), (
        f"ACDC groups spelled out at {places}; import ACDC_GROUPS from {definition} instead"
    )


def test_the_bundle_configs_use_the_same_order() -> None:
    checked = 0

    def walk(value: object, where: str) -> None:
        nonlocal checked
        if isinstance(value, list):
            if set(map(str, value)) >= NAMES:
                assert value == list(ACDC_GROUPS), where
                checked += 1
            for item in value:
                walk(item, where)
        elif isinstance(value, dict):
            if set(map(str, value.values())) >= NAMES:
                assert {int(k): v for k, v in value.items()} == dict(enumerate(ACDC_GROUPS)), where
                checked += 1
            for key, item in value.items():
                walk(item, f"{where}/{key}")

    for path in sorted(BUNDLE_CONFIGS.glob("*.json")):
        walk(json.loads(path.read_text(encoding="utf-8")), path.name)
    # class_names of train/inference/audit and the metadata's channel_def; evaluate.json
    # overlays train.json (issue 16) and uses its class_names, so it has no list of its own.
    assert "class_names" not in json.loads((BUNDLE_CONFIGS / "evaluate.json").read_text())
    assert checked >= 4


def test_the_order_loads_without_torch() -> None:
    # `monai-forget prepare` needs the order; its argument parsing stays free of torch.
    code = (
        "import sys; import monai_forget.cli.prepare; import monai_forget.data.acdc; "
        "print('torch' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
