"""What a fresh install gets (issue 16, items 11 and 16): the bundles' command-line
dependencies are declared, the FLARE tests can be left out without nvflare, and the
README says how to get the CPU build of PyTorch."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from commands import REPO, environment

tomllib = pytest.importorskip("tomllib", reason="tomllib needs Python 3.11")


def _declared() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return {re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0].lower() for d in project["dependencies"]}


def test_bundle_commands_dependencies_are_declared() -> None:
    """`python -m monai.bundle` needs fire; verify_metadata needs jsonschema; the
    training configs' TensorBoardStatsHandler needs tensorboard. A fresh
    `pip install -e .` must bring them, not only the test extra."""
    import importlib

    needed = {"fire": "fire", "jsonschema": "jsonschema", "tensorboard": "tensorboard"}
    assert set(needed.values()) <= _declared()
    for module in needed:
        importlib.import_module(module)  # and they are installed here
    # The classifiers log to TensorBoard (the segmentation bundle does not yet: bundles/README).
    trains = (REPO / "bundles").glob("*_classification/configs/train.json")
    configs = [p.read_text() for p in trains]
    assert len(configs) == 2 and all("TensorBoardStatsHandler" in c for c in configs)


@pytest.mark.slow
def test_pytest_without_nvflare_leaves_out_the_fl_tests(tmp_path: Path) -> None:
    blocked = tmp_path / "nvflare"
    blocked.mkdir()
    # What a machine without nvflare raises (pytest's importorskip skips on exactly this).
    (blocked / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'nvflare'\", name='nvflare')\n"
    )
    env = environment(PYTHONPATH=f"{tmp_path}:{REPO}")
    modules = sorted(
        str(p.relative_to(REPO))
        for p in (REPO / "tests").glob("test_*.py")
        if "fl" in p.name or "unlearning" in p.name or "documented" in p.name
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "0", "-m", "not fl", "--collect-only", "-q",
         *modules],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "error" not in result.stdout.splitlines()[-1].lower()
    assert "test_federated_commands" not in result.stdout  # marked fl: deselected
    assert "test_documented_commands.py::test_every_documented_command_is_run" in result.stdout
    marked = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "0", "-m", "fl", "--collect-only", "-q",
         "tests/test_documented_commands.py"],
        cwd=REPO, env=environment(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert "test_federated_commands" in marked.stdout


def test_readme_says_how_to_get_the_cpu_build() -> None:
    readme = (REPO / "README.md").read_text()
    if "CPU build" in readme:
        assert "--index-url https://download.pytorch.org/whl/cpu" in readme
        assert "pip install torch==2.13.0 --index-url" in readme
