"""Issue 52: every mutant that ``benchmarks/mutation.py`` lists still applies to the code
(its text occurs exactly once in its file) and names test files that exist, so a
refactor cannot quietly turn a mutant into one that is never run."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_every_listed_mutant_applies_once_and_names_existing_tests() -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location(
            "mutation", REPO / "benchmarks" / "mutation.py"
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules["mutation"] = module  # its dataclasses look their module up
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
        sys.modules.pop("mutation", None)
    assert len(module.MUTANTS) >= 100
    stale = [m.name for m in module.MUTANTS if (REPO / m.path).read_text().count(m.old) != 1]
    assert not stale, f"these mutants no longer apply (update them): {stale}"
    missing = [
        (m.name, t) for m in module.MUTANTS for t in m.tests
        if t.startswith("tests/") and not (REPO / t.split("::")[0]).is_file()
    ]  # fmt: skip
    assert not missing, f"these mutants name test files that do not exist: {missing}"
    assert len({m.name for m in module.MUTANTS}) == len(module.MUTANTS), "mutant names repeat"
