"""Reference networks, a name registry, and safe loading of users' model files.

Shadow models are trained "with the same design" as the target, so a design must be
nameable: :func:`get_network` resolves our small networks and any class of
``monai.networks.nets`` by name. :func:`load_model` never unpickles arbitrary
objects: it reads TorchScript archives or state dicts with ``weights_only=True``.
"""

from __future__ import annotations

import os
import pickle
import warnings
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

__all__ = [
    "CNN1",
    "CNN2",
    "MLP",
    "MLP1",
    "NETWORKS",
    "REFERENCE_NETWORKS",
    "LiuTsaftarisCNN",
    "SmallCNN",
    "UnsafeModelError",
    "get_network",
    "load_model",
]


class UnsafeModelError(ValueError):
    """A model file needs arbitrary unpickling, which is refused."""


class MLP(nn.Module):
    """Flatten, then ``Linear -> ReLU`` per hidden layer, then a linear layer to logits.

    Args:
        in_shape: Shape of one input, e.g. ``(1, 8, 8)``.
        num_classes: Number of output logits.
        hidden: Widths of the hidden layers.
    """

    def __init__(
        self, in_shape: Sequence[int], num_classes: int, hidden: Sequence[int] = (256,)
    ) -> None:
        super().__init__()
        in_features = 1
        for d in in_shape:
            in_features *= int(d)
        layers: list[nn.Module] = [nn.Flatten()]
        for width in hidden:
            layers += [nn.Linear(in_features, int(width)), nn.ReLU()]
            in_features = int(width)
        layers.append(nn.Linear(in_features, int(num_classes)))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class SmallCNN(nn.Module):
    """Two ``conv3x3 -> ReLU -> maxpool2`` blocks, global average pooling, linear head.

    Padding keeps the spatial size through each convolution and pooling uses
    ``ceil_mode``, so inputs as small as 8x8 (digits) work as well as 28x28 and 64x64.

    Args:
        in_channels: Input channels.
        num_classes: Number of output logits.
        channels: Output channels of the two convolution blocks.
    """

    def __init__(
        self, in_channels: int, num_classes: int, channels: Sequence[int] = (32, 64)
    ) -> None:
        super().__init__()
        blocks: list[nn.Module] = []
        prev = int(in_channels)
        for c in channels:
            blocks += [
                nn.Conv2d(prev, int(c), kernel_size=3, padding=1),
                nn.ReLU(),
                nn.MaxPool2d(2, ceil_mode=True),
            ]
            prev = int(c)
        self.features = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(prev, int(num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.pool(self.features(x)), 1))


def _numel(in_shape: Sequence[int]) -> int:
    n = 1
    for d in in_shape:
        n *= int(d)
    return n


class MLP1(nn.Module):
    """MLP-1, the multi-layer perceptron of Hartley & Tsaftaris (2022), Appendix A.

    ``Flatten -> Linear(in, hidden) -> ReLU -> Linear(hidden, num_classes)``: one hidden
    layer, the smallest model whose memorisation of a unique feature the paper measures.
    The width is a parameter; the default is ours (see ``docs/memorisation.md``).

    Args:
        in_shape: Shape ``(C, H, W)`` of one input, e.g. ``(1, 28, 28)``.
        num_classes: Number of output logits.
        hidden: Width of the hidden layer.
    """

    def __init__(self, in_shape: Sequence[int], num_classes: int, hidden: int = 512) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Flatten(),
            nn.Linear(_numel(in_shape), int(hidden)),
            nn.ReLU(),
            nn.Linear(int(hidden), int(num_classes)),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class CNN1(nn.Module):
    """CNN-1, the plain convolutional network of Hartley & Tsaftaris (2022), Appendix A.

    Two ``conv3x3 -> ReLU -> maxpool2`` blocks, then ``Flatten -> Linear -> ReLU ->
    Linear`` to logits. Unlike :class:`SmallCNN` the head sees every spatial position
    (no global pooling), so a feature in one corner of the image can be learnt as such.
    Widths are parameters; the defaults are ours, sized for CPU budgets.

    Args:
        in_shape: Shape ``(C, H, W)`` of one input, e.g. ``(1, 28, 28)``.
        num_classes: Number of output logits.
        channels: Output channels of the two convolution blocks.
        hidden: Width of the fully connected hidden layer.
    """

    batch_norm = False
    dropout = 0.0

    def __init__(
        self,
        in_shape: Sequence[int],
        num_classes: int,
        channels: Sequence[int] = (16, 32),
        hidden: int = 128,
    ) -> None:
        super().__init__()
        c, h, w = (int(d) for d in in_shape)
        blocks: list[nn.Module] = []
        for out in channels:
            blocks.append(nn.Conv2d(c, int(out), kernel_size=3, padding=1))
            if self.batch_norm:
                blocks.append(nn.BatchNorm2d(int(out)))
            blocks += [nn.ReLU(), nn.MaxPool2d(2)]
            c, h, w = int(out), h // 2, w // 2
        if h < 1 or w < 1:
            raise ValueError(
                f"input {tuple(in_shape)} is too small for {len(channels)} pooling steps; "
                "use fewer channels entries or larger images"
            )
        self.features = nn.Sequential(*blocks)
        head: list[nn.Module] = [nn.Flatten()]
        if self.dropout:
            head.append(nn.Dropout(self.dropout))
        head += [nn.Linear(c * h * w, int(hidden)), nn.ReLU()]
        if self.dropout:
            head.append(nn.Dropout(self.dropout))
        head.append(nn.Linear(int(hidden), int(num_classes)))
        self.head = nn.Sequential(*head)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class CNN2(CNN1):
    """CNN-2 of Hartley & Tsaftaris (2022), Appendix A: CNN-1 with overfitting guards.

    Batch normalisation after every convolution and dropout (p = 0.25) in the head: the
    regularised design with which the paper shows that strategies against overfitting do
    not prevent unique-feature memorisation. Same arguments as :class:`CNN1`.
    """

    batch_norm = True
    dropout = 0.25


class LiuTsaftarisCNN(nn.Module):
    """The 4-block CNN of Liu & Tsaftaris 2020, Sec. 4.2 (ACDC pathology classification).

    Four convolution blocks: 32 channels with a 7x7 kernel, stride 1, padding 3; then
    64, 128 and 128 channels with 4x4 kernels, stride 2, padding 1 (each halves the
    size); then a linear layer from the flattened features to the class logits. The
    paper trains it on random 128x128 crops with Adam (beta1 = 0.5, beta2 = 0.999).

    The paper's text as summarised for this project gives the convolutions only; each
    block here is ``conv -> batch norm -> ReLU`` (``norm=False`` drops the batch norm).
    Because the output layer is linear over the flattened map, the input size is fixed:
    ``spatial_size`` must be divisible by 8 and every input must have that size.

    Args:
        in_channels: Input channels (1 for cine MRI).
        num_classes: Number of output logits (5 ACDC pathology groups).
        spatial_size: Input height and width, e.g. ``(128, 128)``.
        channels: Output channels of the four blocks.
        norm: Batch normalisation after each convolution.
    """

    def __init__(
        self,
        in_channels: int = 1,
        num_classes: int = 5,
        spatial_size: Sequence[int] | int = (128, 128),
        channels: Sequence[int] = (32, 64, 128, 128),
        norm: bool = True,
    ) -> None:
        super().__init__()
        size = (int(spatial_size),) * 2 if isinstance(spatial_size, int) else tuple(spatial_size)
        if len(size) != 2 or any(s < 8 or s % 8 for s in size):
            raise ValueError(
                f"spatial_size must be two sizes divisible by 8 (three stride-2 blocks), "
                f"got {spatial_size}"
            )
        if len(channels) != 4:
            raise ValueError(f"channels must give the 4 blocks' widths, got {channels}")
        self.spatial_size = (int(size[0]), int(size[1]))
        specs = [(7, 1, 3)] + [(4, 2, 1)] * 3
        blocks: list[nn.Module] = []
        prev = int(in_channels)
        for width, (kernel, stride, padding) in zip(channels, specs, strict=True):
            blocks.append(nn.Conv2d(prev, int(width), kernel, stride, padding, bias=not norm))
            if norm:
                blocks.append(nn.BatchNorm2d(int(width)))
            blocks.append(nn.ReLU(inplace=True))
            prev = int(width)
        self.features = nn.Sequential(*blocks)
        self.head = nn.Linear(prev * (size[0] // 8) * (size[1] // 8), int(num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        height, width = x.shape[-2], x.shape[-1]  # TorchScript: no tuple() of a shape
        if height != self.spatial_size[0] or width != self.spatial_size[1]:
            raise ValueError(
                f"LiuTsaftarisCNN was built for {self.spatial_size[0]}x{self.spatial_size[1]} "
                f"inputs, got ({height}, {width}); crop or resize the images (e.g. "
                "monai.transforms.CenterSpatialCrop) or build it with that spatial_size"
            )
        return self.head(torch.flatten(self.features(x), 1))


#: Our networks by registry name.
NETWORKS: dict[str, Callable[..., nn.Module]] = {
    "mlp": MLP,
    "small_cnn": SmallCNN,
    "liu_tsaftaris_cnn": LiuTsaftarisCNN,
}

#: The reference architectures of Hartley & Tsaftaris (2022), Appendix A, by name.
REFERENCE_NETWORKS: dict[str, Callable[..., nn.Module]] = {
    "mlp-1": MLP1,
    "cnn-1": CNN1,
    "cnn-2": CNN2,
}


def get_network(name: str, **kwargs: Any) -> nn.Module:
    """Build a network by name.

    Our names (``"mlp"``, ``"small_cnn"``) come first, then the paper reference networks
    ``"mlp-1"``, ``"cnn-1"``, ``"cnn-2"`` (``_`` or ``-``, any case); any other name is
    looked up in ``monai.networks.nets``, e.g. ``get_network("DenseNet121",
    spatial_dims=2, in_channels=1, out_channels=2)``.

    Raises:
        ValueError: The name is neither ours nor a ``monai.networks.nets`` class.
    """
    key = name.strip()
    if key.lower() in NETWORKS:
        return NETWORKS[key.lower()](**kwargs)
    reference = key.lower().replace("_", "-")
    if reference in REFERENCE_NETWORKS:
        return REFERENCE_NETWORKS[reference](**kwargs)
    from monai.networks import nets

    cls = getattr(nets, key, None)
    if isinstance(cls, type) and issubclass(cls, nn.Module):
        return cls(**kwargs)
    raise ValueError(
        f"unknown network {name!r}; use one of ours {sorted(NETWORKS)}, a class name "
        "from monai.networks.nets (e.g. 'DenseNet121', 'ResNet', 'EfficientNetBN') or a "
        f"reference network of Hartley & Tsaftaris 2022 {sorted(REFERENCE_NETWORKS)}"
    )


def load_model(
    path: str | os.PathLike,
    *,
    network: str | None = None,
    network_args: Mapping[str, Any] | None = None,
    map_location: str | torch.device = "cpu",
) -> nn.Module:
    """Load a model file safely, in eval mode.

    A TorchScript archive is loaded with ``torch.jit.load``. Anything else must be a
    state dict (raw, or under a ``"state_dict"``/``"model"`` key) readable by
    ``torch.load(weights_only=True)``; it is loaded into
    ``get_network(network, **network_args)``.

    Args:
        path: The model file.
        network: Registry name of the architecture (needed for state dicts).
        network_args: Keyword arguments of the architecture.
        map_location: Device the tensors are loaded onto.

    Raises:
        UnsafeModelError: The file holds pickled Python objects (refused for safety).
        ValueError: A state dict was given without ``network``, or does not fit it.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"model file {path} does not exist")
    if _is_torchscript(path):
        with warnings.catch_warnings():
            # Recent torch marks TorchScript deprecated; it is still the safe archive format.
            warnings.simplefilter("ignore", DeprecationWarning)
            model = torch.jit.load(str(path), map_location=map_location)
        return model.eval()
    state = _load_state_dict(path, map_location)
    if network is None:
        raise ValueError(
            f"{path} is a state dict, which needs its architecture: pass network= "
            "(CLI: --network, e.g. small_cnn or DenseNet121) and network_args= "
            "(CLI: --network-args), or save the model as TorchScript"
        )
    model = get_network(network, **dict(network_args or {}))
    try:
        model.load_state_dict(state)
    except RuntimeError as err:
        raise ValueError(
            f"{path} does not fit network {network!r} with args {dict(network_args or {})}: {err}"
        ) from err
    return model.to(map_location).eval()


def _is_torchscript(path: Path) -> bool:
    """A TorchScript archive is a zip holding ``<name>/constants.pkl`` or ``code/``."""
    if not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
    return any(n.endswith("/constants.pkl") or "/code/" in n for n in names)


def _load_state_dict(path: Path, map_location: str | torch.device) -> Mapping[str, torch.Tensor]:
    try:
        obj = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        raise UnsafeModelError(
            f"{path} contains pickled Python objects, which are refused for safety "
            "(loading them could run arbitrary code). Save the weights with "
            "torch.save(model.state_dict(), path) or a TorchScript archive with "
            f"torch.jit.save(torch.jit.script(model), path). Details: {err}"
        ) from err
    if isinstance(obj, Mapping):
        for key in ("state_dict", "model"):
            if isinstance(obj.get(key), Mapping):
                obj = obj[key]
                break
    if not isinstance(obj, Mapping) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items()
    ):
        raise ValueError(
            f"{path} is not a state dict (name -> tensor), nor a dict holding one under "
            "'state_dict' or 'model'; save model.state_dict() or a TorchScript archive"
        )
    return obj
