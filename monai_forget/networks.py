"""Reference networks, a name registry, and safe loading of users' model files.

Shadow models are trained "with the same design" as the target, so a design must be
nameable: :func:`get_network` resolves our small networks and any class of
``monai.networks.nets`` by name. :func:`load_model` never unpickles arbitrary
objects: it reads TorchScript archives or state dicts with ``weights_only=True``.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from monai_forget.model_files import (
    UnsafeModelError,
    check_model_file,
    damaged,
    is_torchscript,
    load_state_dict,
)

__all__ = [
    "CNN1",
    "CNN2",
    "MLP",
    "MLP1",
    "NETWORKS",
    "REFERENCE_NETWORKS",
    "ForsakenMNISTCNN",
    "LiuTsaftarisCNN",
    "PaperNetwork",
    "SmallCNN",
    "UnsafeModelError",
    "get_network",
    "load_model",
]


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


# Hartley & Tsaftaris (2022), App. A.4 ablations: dropout 0.2 after dense and 0.5 after
# convolutional layers; batch norm with Keras momentum 0.99 (torch 0.01), epsilon 1e-3.
_DROPOUT = {"dense": 0.2, "conv": 0.5}
_BN = {"eps": 1e-3, "momentum": 0.01}


def _activation(kind: str, width: int, batch_norm: bool, dropout: bool) -> list[nn.Module]:
    """``[BN] -> ReLU -> [Dropout]`` after a dense or convolutional layer (App. A.4)."""
    norm = nn.BatchNorm1d if kind == "dense" else nn.BatchNorm2d
    return [
        *([norm(width, **_BN)] if batch_norm else []),
        nn.ReLU(),
        *([nn.Dropout(_DROPOUT[kind])] if dropout else []),
    ]


class PaperNetwork(nn.Module):
    """The reference networks of Hartley & Tsaftaris (2022), Appendix A.3.

    ``Conv2D(c, 3x3) -> ReLU`` per entry of ``channels`` (none for MLP-1) with a
    ``MaxPool2d(2)`` after every ``pool_every`` of them, then ``Flatten``, ``Dense(w) ->
    ReLU`` per hidden width and a ``Dense`` to logits (the softmax is left to the loss
    and to ``predict``). Convolutions are unpadded (Keras' ``"valid"``, the default of
    the paper's framework). :class:`MLP1`, :class:`CNN1`, :class:`CNN2` set the widths.

    Args:
        in_shape: Shape ``(C, H, W)`` of one input, e.g. ``(1, 28, 28)``.
        num_classes: Number of output logits.
        channels: Output channels of the convolutions (default: the class's).
        hidden: Widths of the dense hidden layers (an int is one layer).
        pool_every: Convolutions per max-pooling step.
        padding: Convolution padding (0 is the paper's; 1 keeps the size).
        batch_norm, dropout: the App. A.4 / Table 3 ablations, off in the reference
            setting: batch norm before every activation; dropout 0.5 after convolutions
            and 0.2 after dense layers.
    """

    default_channels: tuple[int, ...] = (32, 64)
    default_hidden: tuple[int, ...] = (128, 128)

    def __init__(
        self,
        in_shape: Sequence[int],
        num_classes: int,
        channels: Sequence[int] | None = None,
        hidden: int | Sequence[int] | None = None,
        pool_every: int = 2,
        padding: int = 0,
        batch_norm: bool = False,
        dropout: bool = False,
    ) -> None:
        super().__init__()
        c, h, w = (int(d) for d in in_shape)
        blocks: list[nn.Module] = []
        widths = self.default_channels if channels is None else channels
        for i, out in enumerate(int(o) for o in widths):
            blocks += [nn.Conv2d(c, out, 3, padding=int(padding)),
                       *_activation("conv", out, batch_norm, dropout)]  # fmt: skip
            c, h, w = out, h + 2 * int(padding) - 2, w + 2 * int(padding) - 2
            if (i + 1) % int(pool_every) == 0:
                blocks.append(nn.MaxPool2d(2))
                h, w = h // 2, w // 2
            if h < 1 or w < 1:
                raise ValueError(
                    f"input {tuple(in_shape)} is too small for these convolutions and "
                    "poolings; use larger images, fewer channels entries or padding=1"
                )
        self.features = nn.Sequential(*blocks)
        hidden = self.default_hidden if hidden is None else hidden
        head: list[nn.Module] = [nn.Flatten()]
        n = c * h * w
        for width in (int(hidden),) if isinstance(hidden, int) else map(int, hidden):
            head += [nn.Linear(n, width), *_activation("dense", width, batch_norm, dropout)]
            n = width
        self.head = nn.Sequential(*head, nn.Linear(n, int(num_classes)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class MLP1(PaperNetwork):
    """MLP-1 (App. A.3): ``Flatten -> Dense(512) -> ReLU -> Dense(256) -> ReLU ->
    Dense(128) -> ReLU -> Dense(num_classes)``. Arguments as :class:`PaperNetwork`."""

    default_channels = ()
    default_hidden = (512, 256, 128)


class CNN1(PaperNetwork):
    """CNN-1 (App. A.3): ``Conv2D(32, 3x3) -> ReLU -> Conv2D(64, 3x3) -> MaxPool2d(2) ->
    ReLU -> Dense(128) -> ReLU -> Dense(128) -> ReLU -> Dense(num_classes)`` (ReLU and
    max pooling commute). Arguments as :class:`PaperNetwork`."""


class CNN2(PaperNetwork):
    """CNN-2 (App. A.3), small VGG style: ``[Conv2D(32, 3x3) -> ReLU] x 2 -> MaxPool2d(2)
    -> [Conv2D(64, 3x3) -> ReLU] x 2 -> MaxPool2d(2) -> Dense(1024) -> ReLU ->
    Dense(num_classes)``. Arguments as :class:`PaperNetwork`."""

    default_channels = (32, 32, 64, 64)
    default_hidden = (1024,)


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


class ForsakenMNISTCNN(nn.Module):
    """The MNIST network of Liu et al. 2020 ("Learn to Forget"), Fig. 5.

    Fig. 5 lists ``Conv -> ReLU -> MaxPool -> Conv -> ReLU -> Dense -> Dense`` for 28x28
    inputs and Table III gives its size, 0.96M parameters. The copy of the paper's
    text this project holds lost the kernel sizes and widths; ours (a reading, not the
    paper's numbers): 5x5 convolutions of 32 and 64 channels (unpadded), a 2x2 max
    pooling, a dense layer of 220 units and the output layer: 955,646 parameters with
    10 classes. As listed, no activation sits between the two dense layers.

    Args:
        in_channels: Input channels (1 for MNIST).
        num_classes: Number of output logits.
        hidden: Width of the first dense layer.
        image_size: Input height and width (28 for MNIST).
    """

    def __init__(
        self, in_channels: int = 1, num_classes: int = 10, hidden: int = 220, image_size: int = 28
    ) -> None:
        super().__init__()
        side = (int(image_size) - 4) // 2 - 4
        if side < 1:
            raise ValueError(f"image_size {image_size} is too small for two 5x5 convolutions")
        self.features = nn.Sequential(
            nn.Conv2d(int(in_channels), 32, 5), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 5), nn.ReLU(), nn.Flatten(),
        )  # fmt: skip
        self.head = nn.Sequential(
            nn.Linear(64 * side * side, int(hidden)), nn.Linear(int(hidden), int(num_classes))
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


#: Our networks by registry name.
NETWORKS: dict[str, Callable[..., nn.Module]] = {
    "mlp": MLP,
    "small_cnn": SmallCNN,
    "liu_tsaftaris_cnn": LiuTsaftarisCNN,
    "forsaken_mnist_cnn": ForsakenMNISTCNN,
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
        ValueError: The name is neither ours nor a ``monai.networks.nets`` class, or the
            class refuses ``kwargs``.
    """
    key = name.strip()
    cls = NETWORKS.get(key.lower()) or REFERENCE_NETWORKS.get(key.lower().replace("_", "-"))
    if cls is None:
        from monai.networks import nets

        found = getattr(nets, key, None)
        cls = found if isinstance(found, type) and issubclass(found, nn.Module) else None
    if cls is not None:
        try:
            return cls(**kwargs)
        except (TypeError, ValueError) as err:  # the arguments, not the code: say which
            raise ValueError(
                f"network {name!r} cannot be built from network_args {sorted(kwargs)} "
                f"({str(err).splitlines()[0]}); check their names and values against "
                f"{cls.__name__}'s arguments"
            ) from None
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
        FileNotFoundError, IsADirectoryError: no such file, or a folder.
        UnsafeModelError: The file holds pickled Python objects (refused for safety).
        ValueError: An empty, truncated or corrupt file; a state dict given without
            ``network``, or one that does not fit it.
    """
    path = check_model_file(path)
    if is_torchscript(path):
        with warnings.catch_warnings():
            # Recent torch marks TorchScript deprecated; it is still the safe archive format.
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                model = torch.jit.load(str(path), map_location=map_location)
            except RuntimeError:
                raise damaged(path) from None
        return model.eval()
    state = load_state_dict(path, map_location)
    if network is None:
        raise ValueError(
            f"{path} is a state dict, which needs its architecture: pass `network` "
            "(e.g. small_cnn or DenseNet121) and `network_args`, or save the model as TorchScript"
        )
    model = get_network(network, **dict(network_args or {}))
    try:
        model.load_state_dict(state)
    except RuntimeError as err:
        raise ValueError(
            f"{path} does not fit network {network!r} with args {dict(network_args or {})}: {err}"
        ) from err
    return model.to(map_location).eval()
