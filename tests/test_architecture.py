"""The package's shape, as docs/architecture.md describes it: its layer diagram is the
one checked here, imports only point down the layers, no module imports itself back
through a cycle, the command line's parser imports nothing heavy, and no module grows
past 500 lines (one job per module is the review rule; the count is its alarm)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "monai_forget"

#: docs/architecture.md's layers, bottom (0) to top: a package may import only packages
#: of a lower layer (and its own modules).
LAYERS: dict[str, int] = {
    "stats": 0,
    "defaults": 0,
    "checks": 0,
    "auditor_registry": 0,
    "io": 1,
    "scores": 1,
    "fingerprint": 1,
    "cache": 2,
    "model_files": 1,
    "processes": 1,
    "rates": 1,
    "results": 2,
    "reporting": 2,
    "data": 3,
    "canary": 3,
    "networks": 3,
    "inference": 4,
    "cpu_inference": 4,
    "shadow": 4,
    "acdc": 4,
    "audit": 5,
    "segmentation": 5,
    "recipe_files": 5,
    "dicom": 5,
    "memorisation": 5,
    "unlearning": 6,
    "leak_scan_plan": 6,
    "fl": 7,
    "metrics": 7,
    "handlers": 8,
    "bundles": 9,
    "demo": 9,
    "leak_demo": 9,
    "data_prep": 9,
    "cli": 10,
    "__main__": 11,
}
HEAVY = {"torch", "monai", "pydicom", "h5py", "nibabel", "scipy", "sklearn", "nvflare", "PIL"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules ``path`` imports at run time (``TYPE_CHECKING`` blocks excluded)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("monai_forget"))
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").startswith("monai_forget")
        ):
            for alias in node.names:  # `from pkg import submodule` imports the submodule
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in modules else node.module)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return found


def _layer(module: str) -> tuple[str, int]:
    parts = module.split(".")
    name = parts[1] if len(parts) > 1 else "__init__"
    return name, LAYERS.get(name, -1)


def test_every_package_has_a_layer() -> None:
    names = {_layer(m)[0] for m in _modules()} - {"__init__"}
    assert names <= set(LAYERS), f"add {sorted(names - set(LAYERS))} to LAYERS and the docs"


def test_imports_only_point_down_the_layers() -> None:
    modules = _modules()
    upward = []
    for module, path in modules.items():
        name, rank = _layer(module)
        for target in _imports(path, modules):
            target_name, target_rank = _layer(target)
            if target_name in (name, "__init__"):
                continue
            if target_rank >= rank:
                upward.append(f"{module} -> {target}")
    assert not upward, "imports that do not point down the layers:\n" + "\n".join(upward)


def test_there_is_no_import_cycle() -> None:
    modules = _modules()
    graph = {}
    for module, path in modules.items():
        # A module's own ancestors (packages being initialised) are not cycles.
        graph[module] = {
            t for t in _imports(path, modules) if not module.startswith(t + ".") and t != module
        }
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycle = [*stack[stack.index(nxt) :], nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                walk(nxt)
        stack.pop()
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            walk(module)


def _documented_layers() -> list[tuple[str, int]]:
    """The layer diagram of docs/architecture.md as (package, layer) pairs: each numbered
    line and the lines under it name packages (left column, up to the descriptions)."""
    text = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    diagram = text.split("## Layers", 1)[1].split("```", 2)[1]
    pairs: list[tuple[str, int]] = []
    layer = -1
    for line in diagram.splitlines():
        names = line[:44]
        if names[:2].strip().isdigit():
            layer, names = int(names[:2]), names[2:]
        pairs += [(name.rstrip("/"), layer) for name in names.split()]
    return sorted(pairs)


def test_the_documented_layers_are_the_checked_ones() -> None:
    """Every package once in the diagram, on the layer the import check enforces."""
    assert _documented_layers() == sorted(LAYERS.items())


def test_the_parser_imports_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "from monai_forget.cli import build_parser\n"
        "build_parser().format_help()\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({sorted(HEAVY)!r})))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]", f"building the parser imported {run.stdout.strip()}"


def test_the_architecture_names_every_benchmark_script() -> None:
    """docs/architecture.md lists the benchmark scripts; a new one must join the list."""
    text = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    scripts = sorted((PACKAGE.parent / "benchmarks").glob("[!_]*.py"))
    assert scripts, "no benchmark script found"
    missing = [s.name for s in scripts if f"`{s.name}`" not in text]
    assert not missing, f"docs/architecture.md does not name {missing}"


def test_no_benchmark_script_imports_another() -> None:
    """Issue 52: scripts share code through the ``_``-prefixed helper modules, never by
    importing another script (which ran its module-level set-up and tied their fates)."""
    import ast

    folder = PACKAGE.parent / "benchmarks"
    scripts = {p.stem for p in folder.glob("[!_]*.py")}
    found = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                modules = [node.module]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            found += [f"{path.name} -> {m}" for m in modules if m in scripts]
    assert not found, f"benchmark scripts import other scripts: {found}"


def test_every_benchmark_script_compiles() -> None:
    """The benchmark scripts run outside the test suite (minutes to hours); a syntax error
    in one must still fail here, not in the next person's long run."""
    for script in sorted((PACKAGE.parent / "benchmarks").glob("*.py")):
        compile(script.read_text(), str(script), "exec")  # raises SyntaxError


def test_importing_the_package_never_chooses_a_plotting_backend() -> None:
    """The user's matplotlib backend (here svg) survives importing every module that
    draws: figures are made without switching backends."""
    code = (
        "import matplotlib, monai_forget.memorisation.report, monai_forget.audit.figures, "
        "monai_forget.reporting; print(matplotlib.rcParams['backend'])"
    )
    env = {**os.environ, "MPLBACKEND": "svg"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "svg", out.stderr


def test_no_module_is_over_500_lines() -> None:
    """Issue 67: a module past 500 lines does more than one job; split it."""
    long = {
        str(path.relative_to(PACKAGE)): n
        for path in sorted(PACKAGE.rglob("*.py"))
        if (n := len(path.read_text().splitlines())) > 500
    }
    assert not long, f"modules over 500 lines: {long}"
