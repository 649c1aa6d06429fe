"""Options several sub-commands share: the model file, seed, device and overwrite.

Nothing heavy is imported here: the parser must build without torch or MONAI.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from monai_forget.checks import COUNT, INDEX, PARAMETERS, Interval
from monai_forget.defaults import BATCH_SIZE, DEVICE, SEED

if TYPE_CHECKING:  # torch is imported only when a command runs
    from torch import nn

    from monai_forget.data import LabelledImages


def interval_type(interval: Interval) -> Callable[[str], int | float]:
    """An ``argparse`` type of the numbers in ``interval`` (the library's declared range:
    the command line refuses what the library would, with the same words)."""

    def parse(text: str) -> int | float:
        value = int(text) if interval.integer else float(text)
        if value not in interval:
            raise argparse.ArgumentTypeError(f"must be {interval}, got {value}")
        return value

    parse.__name__ = "integer" if interval.integer else "number"  # argparse's "invalid ..."
    parse.interval = interval  # type: ignore[attr-defined]  # read by with_intervals_in_help
    return parse


def parameter_type(name: str) -> Callable[[str], int | float]:
    """The ``argparse`` type of the library parameter ``name`` (its interval in
    :data:`~monai_forget.checks.PARAMETERS`)."""
    return interval_type(PARAMETERS[name])


def with_intervals_in_help(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Every option whose type is an interval's says the interval in its help, as the
    library declares it (nothing written twice)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                with_intervals_in_help(child)
        interval = getattr(action.type, "interval", None)
        if interval is not None and action.help and str(interval) not in action.help:
            action.help = f"{action.help} [{interval}]"
    return parser


#: An ``argparse`` type: an integer of at least 1.
positive_int = interval_type(COUNT)
#: An ``argparse`` type: an integer of at least 0.
index_int = interval_type(INDEX)


def auditor_name(text: str) -> str:
    """An ``argparse`` type: a withdrawal auditor's name (a renamed one is refused with
    the name to use)."""
    from monai_forget.auditor_registry import auditor_kind

    try:
        return auditor_kind(text).name
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def text_value(text: str) -> float | str:
    """An ``argparse`` type: the pixel value of burned text, a number or ``max``."""
    if text == "max":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"value must be a number or 'max', got {text!r}") from None


def available_device(text: str) -> str:
    """An ``argparse`` type: a torch device this machine has (``cpu`` needs no check)."""
    if text == "cpu":
        return text
    import torch

    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a torch device; e.g. cpu, cuda or cuda:0"
        ) from None
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise argparse.ArgumentTypeError(
                f"{text}: no CUDA GPU is available here (this torch build has no CUDA, or "
                "no GPU is visible); use --device cpu"
            )
        if device.index is not None and device.index >= count:
            raise argparse.ArgumentTypeError(
                f"{text}: this machine has {count} CUDA GPU(s), cuda:0 to cuda:{count - 1}"
            )
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise argparse.ArgumentTypeError(f"{text}: Apple's MPS is not available here; use cpu")
    return text


def add_model_arguments(parser: argparse.ArgumentParser, role: str) -> None:
    """Add the options naming a model file and, for state dicts, its architecture."""
    parser.add_argument("--model", required=True, help=f"{role} model: TorchScript or state dict")
    parser.add_argument("--network", help="registry name of the architecture (state dicts)")
    parser.add_argument(
        "--network-args",
        default="{}",
        help="JSON keyword arguments of --network (default %(default)s)",
    )


def bundle_parameter(text: str) -> tuple[str, object]:
    """An ``argparse`` type: ``KEY=VALUE``, the value read as JSON where it is JSON
    (``image_size=128`` is the number 128), else as the string."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE (e.g. image_size=128), got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def add_bundle_set_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--bundle-set KEY=VALUE`` (repeatable): a bundle parameter set as ``python -m
    monai.bundle run --KEY VALUE`` sets it, e.g. the model input of a bundle trained at
    another size."""
    parser.add_argument(
        "--bundle-set",
        type=bundle_parameter,
        action="append",
        metavar="KEY=VALUE",
        help="with --bundle: set one of its parameters as the model was trained with it, "
        "as 'python -m monai.bundle run --KEY VALUE' does (e.g. image_size=128); repeatable "
        "(default: the bundle's own parameters)",
    )


def add_recipe_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--recipe`` and ``--trust-recipe`` (a recipe that runs code needs the latter)."""
    parser.add_argument(
        "--recipe",
        required=True,
        help="how the target was trained: a data-only recipe .json of SupervisedRecipe "
        'fields, e.g. {"network": "mlp", "network_args": {"in_shape": [1, 8, 8], '
        '"num_classes": 10}, "steps": 1500, "batch_size": 32} (network, network_args, '
        "epochs, steps, batch_size, learning_rate, optimizer adam|sgd, betas, momentum, "
        "weight_decay); with --trust-recipe also a MONAI bundle train config or "
        "package.module:attribute",
    )
    parser.add_argument(
        "--trust-recipe",
        action="store_true",
        help="allow a recipe that runs code (a bundle config evaluates its '$' expressions; "
        "module:attribute imports Python): trust it as you would a script",
    )


def add_run_arguments(
    parser: argparse.ArgumentParser,
    seed_help: str,
    *,
    batch_size: bool = False,
    batch_by_device: bool = False,
) -> None:
    """Add ``--seed``, ``--device`` (and ``--batch-size``) with their help and defaults;
    ``batch_by_device``: the batch defaults to the model's and device's
    (:mod:`~monai_forget.cpu_inference`)."""
    parser.add_argument("--seed", type=int, default=SEED, help=f"{seed_help} (default %(default)s)")
    parser.add_argument(
        "--device",
        type=available_device,
        default=DEVICE,
        help="torch device for training and inference, e.g. cpu or cuda:0 (default %(default)s)",
    )
    if batch_size:
        parser.add_argument(
            "--batch-size",
            type=interval_type(PARAMETERS["batch_size"]),
            default=None if batch_by_device else BATCH_SIZE,
            help="samples per forward pass (default "
            + (
                "32 for a convolutional model on a CPU, else 1024)"
                if batch_by_device
                else "%(default)s)"
            ),
        )


def load_model_from_args(args: argparse.Namespace, path: str | None = None) -> nn.Module:
    """Load the model the options name (safely: TorchScript or ``weights_only``); ``path``
    loads another file of the same architecture (e.g. a reference model)."""
    from monai_forget.networks import load_model

    try:
        network_args = json.loads(args.network_args)
    except json.JSONDecodeError as err:
        raise ValueError(
            f"--network-args is not valid JSON ({err}); e.g. '{{\"num_classes\": 2}}'"
        ) from None
    return load_model(path or args.model, network=args.network, network_args=network_args)


def load_set(path: str, split: str | None, role: str) -> LabelledImages:
    """Load one data set the options name; an error says which set (``role``) it is."""
    from monai_forget.data import load_images

    try:
        return load_images(path, split=split)
    except ValueError as err:
        raise ValueError(f"{role}: {err}") from None
