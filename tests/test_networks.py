"""Tests of monai_forget.networks: reference networks, registry, safe loading."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest
import torch

from monai_forget.networks import MLP, SmallCNN, UnsafeModelError, get_network, load_model


@pytest.mark.parametrize("size", [8, 28, 64])
def test_small_cnn_shapes(size: int) -> None:
    net = SmallCNN(1, 5)
    assert net(torch.zeros(3, 1, size, size)).shape == (3, 5)


def test_mlp_shapes() -> None:
    net = MLP((1, 8, 8), 10, hidden=(32, 16))
    assert net(torch.zeros(2, 1, 8, 8)).shape == (2, 10)
    assert sum(isinstance(m, torch.nn.Linear) for m in net.modules()) == 3


def test_get_network_ours_and_monai() -> None:
    assert isinstance(get_network("small_cnn", in_channels=1, num_classes=2), SmallCNN)
    assert isinstance(get_network("MLP", in_shape=(1, 4, 4), num_classes=2), MLP)
    net = get_network("DenseNet121", spatial_dims=2, in_channels=1, out_channels=2)
    assert type(net).__name__ == "DenseNet121"
    with pytest.raises(
        ValueError,
        match=r"\['forsaken_mnist_cnn', 'liu_tsaftaris_cnn', 'mlp', 'small_cnn'\]"
        r".*monai.networks.nets",
    ):
        get_network("NoSuchNet")


class _Evil(collections.OrderedDict):
    """A dict subclass: plain pickling would import and build it."""


class _Payload:
    def __init__(self) -> None:
        self.x = 1


def _fixed_net() -> SmallCNN:
    torch.manual_seed(0)
    return SmallCNN(1, 3, channels=(4, 8))


def test_load_state_dict_forms(tmp_path: Path) -> None:
    net = _fixed_net()
    x = torch.rand(2, 1, 8, 8)
    args = {"in_channels": 1, "num_classes": 3, "channels": (4, 8)}
    for i, obj in enumerate(
        [net.state_dict(), {"state_dict": net.state_dict()}, {"model": net.state_dict()}]
    ):
        path = tmp_path / f"w{i}.pt"
        torch.save(obj, path)
        loaded = load_model(path, network="small_cnn", network_args=args)
        assert not loaded.training
        torch.testing.assert_close(loaded(x), net.eval()(x))


def test_state_dict_needs_network(tmp_path: Path) -> None:
    torch.save(_fixed_net().state_dict(), tmp_path / "w.pt")
    with pytest.raises(ValueError, match="`network`"):
        load_model(tmp_path / "w.pt")
    with pytest.raises(ValueError, match="does not fit"):
        load_model(
            tmp_path / "w.pt",
            network="small_cnn",
            network_args={"in_channels": 1, "num_classes": 7},
        )


def test_torchscript_loads(tmp_path: Path) -> None:
    net = _fixed_net().eval()
    torch.jit.save(torch.jit.script(net), tmp_path / "m.ts")
    loaded = load_model(tmp_path / "m.ts")
    assert not loaded.training
    x = torch.rand(2, 1, 28, 28)
    torch.testing.assert_close(loaded(x), net(x))


@pytest.mark.parametrize(
    "make",
    [
        lambda: _Evil(weight=torch.zeros(2)),
        lambda: {"state_dict": {"w": torch.zeros(1)}, "extra": _Payload()},
        lambda: _fixed_net(),  # a whole pickled module
    ],
)
def test_unsafe_pickles_are_refused(tmp_path: Path, make) -> None:
    path = tmp_path / "bad.pt"
    torch.save(make(), path)
    with pytest.raises(UnsafeModelError, match=r"pickled Python objects.*state_dict"):
        load_model(path, network="small_cnn", network_args={"in_channels": 1, "num_classes": 3})


def test_not_a_state_dict(tmp_path: Path) -> None:
    torch.save([torch.zeros(1)], tmp_path / "list.pt")
    with pytest.raises(ValueError, match="not a state dict"):
        load_model(
            tmp_path / "list.pt",
            network="small_cnn",
            network_args={"in_channels": 1, "num_classes": 3},
        )


def test_paper_networks_are_those_of_appendix_a3() -> None:
    """Hartley & Tsaftaris (2022), App. A.3: layer types, widths and parameter counts."""
    x = torch.zeros(2, 1, 28, 28)
    mlp = get_network("mlp-1", in_shape=(1, 28, 28), num_classes=10)
    widths = [m.out_features for m in mlp.modules() if isinstance(m, torch.nn.Linear)]
    assert widths == [512, 256, 128, 10] and mlp(x).shape == (2, 10)
    assert sum(p.numel() for p in mlp.parameters()) == (
        784 * 512 + 512 + 512 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10
    )
    cnn1 = get_network("cnn-1", in_shape=(1, 28, 28), num_classes=10)
    convs = [m.out_channels for m in cnn1.modules() if isinstance(m, torch.nn.Conv2d)]
    dense = [m.out_features for m in cnn1.modules() if isinstance(m, torch.nn.Linear)]
    assert convs == [32, 64] and dense == [128, 128, 10]
    assert cnn1.head[1].in_features == 64 * 12 * 12  # 28 -> 26 -> 24 (unpadded) -> pool 12
    cnn2 = get_network("CNN_2", in_shape=(1, 28, 28), num_classes=2)
    convs = [m.out_channels for m in cnn2.modules() if isinstance(m, torch.nn.Conv2d)]
    dense = [m.out_features for m in cnn2.modules() if isinstance(m, torch.nn.Linear)]
    assert convs == [32, 32, 64, 64] and dense == [1024, 2]
    assert cnn2.head[1].in_features == 64 * 4 * 4  # 28-26-24-12-10-8-4
    assert sum(isinstance(m, torch.nn.MaxPool2d) for m in cnn2.modules()) == 2
    for net in (mlp, cnn1, cnn2):  # the reference setting has neither BN nor dropout
        assert not any(isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d,
                                      torch.nn.Dropout)) for m in net.modules())  # fmt: skip
    assert cnn2(x).shape == (2, 2)


def test_forsaken_mnist_network_is_fig5_at_table_iii_size() -> None:
    """Liu et al. 2020, Fig. 5: Conv, ReLU, MaxPool, Conv, ReLU, Dense, Dense (nothing
    between the two dense layers), and Table III's 0.96M parameters."""
    net = get_network("forsaken_mnist_cnn")
    layers = [type(m).__name__ for m in net.modules() if not list(m.children())]
    assert layers == ["Conv2d", "ReLU", "MaxPool2d", "Conv2d", "ReLU", "Flatten", "Linear",
                      "Linear"]  # fmt: skip
    count = (25 * 32 + 32) + (25 * 32 * 64 + 64) + (64 * 8 * 8 * 220 + 220) + (220 * 10 + 10)
    assert sum(p.numel() for p in net.parameters()) == count == 955_646
    assert round(count / 1e6, 2) == 0.96
    assert net(torch.zeros(3, 1, 28, 28)).shape == (3, 10)


def test_paper_network_regularisation_ablations() -> None:
    """App. A.4: batch norm before every hidden activation (momentum 0.99 in Keras terms,
    epsilon 1e-3); dropout 0.5 after convolutions and 0.2 after dense layers."""
    net = get_network("cnn-2", in_shape=(1, 28, 28), num_classes=10, batch_norm=True,
                      dropout=True)  # fmt: skip
    norms = [m for m in net.modules() if isinstance(m, torch.nn.BatchNorm1d | torch.nn.BatchNorm2d)]
    assert len(norms) == 5 and all(m.momentum == 0.01 and m.eps == 1e-3 for m in norms)
    rates = [m.p for m in net.modules() if isinstance(m, torch.nn.Dropout)]
    assert rates == [0.5, 0.5, 0.5, 0.5, 0.2]
    mlp = get_network("mlp-1", in_shape=(1, 8, 8), num_classes=3, hidden=16, dropout=True)
    assert [m.p for m in mlp.modules() if isinstance(m, torch.nn.Dropout)] == [0.2]
    with pytest.raises(ValueError, match="too small"):
        get_network("cnn-2", in_shape=(1, 8, 8), num_classes=3)
