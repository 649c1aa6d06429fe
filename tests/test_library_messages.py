"""The library names parameters, the command line names flags (issue 67, item 2): no
message of the package outside ``cli/`` names a ``monai-forget`` flag; it names the
parameter in backticks and :func:`monai_forget.cli.as_flags` shows the flag of the
command that was run. A flag may appear where a whole command is quoted for the user to
type, or where the flags are another program's."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import monai_forget

PACKAGE = Path(monai_forget.__file__).parent
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z_-]*")
#: A command quoted whole: its flags are part of what the user types.
COMMAND = re.compile(r"(monai-forget|canary inject|audit refmodel|fl poc)\b[^.;]*--[a-z]")
#: Modules whose flags are another program's, with why.
OTHER_PROGRAMS = {
    "fl/client.py": "the FLARE client process's own command line",
    "fl/job.py": "the arguments written into a FLARE job for that client",
    "fl/export.py": "the arguments written into a FLARE job for that client",
    "bundles/segmentation.py": "MONAI bundle runs' parameters (--resume True)",
    "dicom/decode.py": "GDCM's gdcmconv --raw, a tool to run",
    "io.py": "names both monai-forget's flag and the MONAI bundle's",
}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _strings(tree: ast.AST):
    """Every string the module writes (an f-string's literal parts joined), docstrings
    aside, with its line."""
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            skip.update(id(v) for v in node.values)
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            yield node.lineno, text
        elif (
            isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
        ):
            yield node.lineno, node.value


def flags_named(source: str) -> list[tuple[int, str]]:
    """(line, flag) of each flag a module's strings name outside a quoted command."""
    return [
        (line, flag)
        for line, text in _strings(ast.parse(source))
        if not COMMAND.search(text)
        for flag in FLAG.findall(text)
    ]


def test_no_library_message_names_a_flag() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        if where.startswith("cli/") or where in OTHER_PROGRAMS:
            continue
        found += [f"{where}:{line}: {flag}" for line, flag in flags_named(path.read_text())]
    assert not found, "name the parameter in backticks instead:\n" + "\n".join(found)


def test_the_scan_sees_a_flag_and_passes_a_command() -> None:
    """The scan finds a flag in a message, an f-string and a concatenation; it passes a
    parameter in backticks, a docstring and a quoted command."""
    source = '''
"""Module docstring naming --overwrite."""
def f(x):
    """Docstring: --text."""
    a = "pass --overwrite to replace"
    b = f"{x} is empty; pass the text (" "--text)"
    c = "pass `overwrite` to replace"
    d = f"run `monai-forget fl poc --stop {x}`"
'''
    assert flags_named(source) == [(5, "--overwrite"), (6, "--text")]


def test_every_parameter_a_message_names_is_some_commands_flag() -> None:
    """A backticked name no command sets would reach the command line as it is."""
    import argparse

    from monai_forget.cli import PARAMETER_FLAGS, build_parser

    dests: set[str] = set()

    def walk(parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for child in action.choices.values():
                    walk(child)
            elif action.option_strings:
                dests.add(action.dest)

    walk(build_parser())
    named = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        if where.startswith("cli/"):
            continue
        for line, text in _strings(ast.parse(path.read_text())):
            for name in re.findall(r"`(\w+)`", text):
                named.setdefault(name, f"{where}:{line}")
    assert len(named) > 30
    unknown = {n: w for n, w in named.items() if n not in dests and n not in PARAMETER_FLAGS}
    assert not unknown, unknown


def _options(parser, path=()):
    """(command path, action) of every option of every sub-command."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _options(child, (*path, name))
        elif action.option_strings:
            yield path, action


def test_the_command_lines_ranges_are_the_librarys() -> None:
    """Issue 67, item 2: every --alpha and --margin takes its type from the library's
    declared interval (``checks.PARAMETERS``): it refuses at parsing what the library
    would, in the library's words, and its help states the interval."""
    import argparse

    from monai_forget.checks import PARAMETERS
    from monai_forget.cli import build_parser

    found = {}
    for path, action in _options(build_parser()):
        name = action.dest
        if name in ("alpha", "margin"):
            interval = getattr(action.type, "interval", None)
            assert interval == PARAMETERS[name], (path, name)
            assert action.help.endswith(f"[{interval}]"), (path, action.help)
            refused = f"must be {re.escape(str(interval))}"
            for bad in (0.0, 1.5):
                with pytest.raises(argparse.ArgumentTypeError, match=refused):
                    action.type(str(bad))
            assert action.type("0.05") == 0.05
            found.setdefault(name, []).append(" ".join(path))
    assert len(found["alpha"]) >= 4 and found["margin"], found
