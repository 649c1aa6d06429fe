"""Options several sub-commands share: the model file, seed, device and overwrite.

Nothing heavy is imported here: the parser must build without torch or MONAI.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from monai_forget.defaults import BATCH_SIZE, DEVICE, SEED

if TYPE_CHECKING:  # torch is imported only when a command runs
    from torch import nn


def positive_int(text: str) -> int:
    """An ``argparse`` type: an integer of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def add_model_arguments(parser: argparse.ArgumentParser, role: str) -> None:
    """Add the options naming a model file and, for state dicts, its architecture."""
    parser.add_argument("--model", required=True, help=f"{role} model: TorchScript or state dict")
    parser.add_argument("--network", help="registry name of the architecture (state dicts)")
    parser.add_argument("--network-args", default="{}", help="JSON keyword arguments of --network")


def add_run_arguments(
    parser: argparse.ArgumentParser, seed_help: str, *, batch_size: bool = False
) -> None:
    """Add ``--seed``, ``--device`` (and ``--batch-size``) with their help and defaults."""
    parser.add_argument("--seed", type=int, default=SEED, help=f"{seed_help} (default %(default)s)")
    parser.add_argument(
        "--device",
        default=DEVICE,
        help="torch device for training and inference, e.g. cpu or cuda:0 (default %(default)s)",
    )
    if batch_size:
        parser.add_argument(
            "--batch-size",
            type=int,
            default=BATCH_SIZE,
            help="samples per forward pass (default %(default)s)",
        )


def load_model_from_args(args: argparse.Namespace) -> nn.Module:
    """Load the model the options name (safely: TorchScript or ``weights_only``)."""
    from monai_forget.networks import load_model

    try:
        network_args = json.loads(args.network_args)
    except json.JSONDecodeError as err:
        raise ValueError(
            f"--network-args is not valid JSON ({err}); e.g. '{{\"num_classes\": 2}}'"
        ) from None
    return load_model(args.model, network=args.network, network_args=network_args)
