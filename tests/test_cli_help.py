"""Issue 16 item 15: every option of every ``monai-forget`` sub-command says what it does,
and every option with a default shows it."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from monai_forget.cli import build_parser


def _options(
    parser: argparse.ArgumentParser, command: str = "monai-forget"
) -> Iterator[tuple[str, argparse.ArgumentParser, argparse.Action]]:
    """Every option and positional argument of ``parser`` and its sub-commands, at any depth."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, f"{command} {name}")
        elif not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            yield command, parser, action


def test_every_option_has_help_and_shows_its_default() -> None:
    without_help, default_hidden = [], []
    for command, parser, action in _options(build_parser()):
        parser.format_help()  # every help string must render (a stray '%' would raise)
        name = f"{command} {'/'.join(action.option_strings) or action.dest}"
        if not action.help or action.help == argparse.SUPPRESS:
            without_help.append(name)
            continue
        has_default = action.default is not None and action.default is not False  # 0 has one
        if has_default and "%(default)" not in action.help:
            default_hidden.append(f"{name} (default {action.default!r})")
    assert not without_help, "options without help: " + ", ".join(without_help)
    assert not default_hidden, "defaults not shown with %(default)s: " + ", ".join(default_hidden)


def test_the_walk_reaches_the_nested_sub_commands() -> None:
    commands = {command for command, _, _ in _options(build_parser())}
    assert {"monai-forget fl simulate", "monai-forget prepare acdc-h5"} <= commands
    assert len(commands) >= 15
