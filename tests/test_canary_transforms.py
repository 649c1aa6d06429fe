"""BurnInText / BurnInTextd MONAI transforms."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from monai.data import MetaTensor
from monai.transforms import Compose

from monai_forget.canary import (
    BurnInText,
    BurnInTextD,
    BurnInTextd,
    BurnInTextDict,
    render_text,
)


def _region(shape, text, position, scale=1):
    mask = render_text(text, scale)
    region = np.zeros(shape, bool)
    r, c = position
    region[r : r + mask.shape[0], c : c + mask.shape[1]] = mask
    return region


def test_array_transform_defaults_to_papers_feature():
    img = torch.rand(1, 16, 16) * 0.5
    out = BurnInText()(img)
    region = _region((16, 16), "A", (1, 1))
    assert torch.all(out[0][torch.as_tensor(region)] == img.max())
    assert torch.equal(out[0][torch.as_tensor(~region)], img[0][torch.as_tensor(~region)])


def test_array_transform_numpy_3d_all_channels_and_slices():
    img = np.zeros((2, 20, 30, 4), np.float32)
    out = BurnInText("AB", position=(3, 2), scale=2, value=9.0)(img)
    region = _region((20, 30), "AB", (3, 2), 2)
    assert isinstance(out, np.ndarray)
    assert (out[:, region, :] == 9.0).all() and not out[:, ~region, :].any()
    assert not img.any()


def test_dictionary_transform_keeps_metatensor_and_other_keys():
    data = {"image": MetaTensor(torch.zeros(1, 10, 12)), "label": torch.ones(1, 10, 12)}
    out = Compose([BurnInTextd(keys="image", text="J", value=2.0)])(data)
    assert isinstance(out["image"], MetaTensor)
    assert out["image"].sum().item() == 2.0 * render_text("J").sum()
    assert torch.equal(out["label"], data["label"])
    assert data["image"].sum().item() == 0


def test_aliases_and_missing_keys():
    assert BurnInTextD is BurnInTextd and BurnInTextDict is BurnInTextd
    with pytest.raises(KeyError):
        BurnInTextd(keys="image")({"other": torch.zeros(1, 8, 8)})
    out = BurnInTextd(keys="image", allow_missing_keys=True)({"other": torch.zeros(1, 8, 8)})
    assert set(out) == {"other"}


def test_transform_refusals():
    with pytest.raises(ValueError, match="channel-first"):
        BurnInText()(torch.zeros(8, 8))
    with pytest.raises(ValueError, match="'max'"):
        BurnInText(value="min")
    with pytest.raises(ValueError, match="image is 4x4"):
        BurnInText()(torch.zeros(1, 4, 4))
