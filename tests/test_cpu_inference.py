"""The scan's CPU path (issue 65: CNN scans fast enough for the detection curve): a
channels-last copy of a convolutional model in batches of 32, computing what the model
as given computes, and the caller's model left as it was."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
import torch

from monai_forget.cli import main
from monai_forget.cpu_inference import batch_size_for, laid_out_for
from monai_forget.memorisation import LeakScanConfig, ProbeSettings, leak_scan
from monai_forget.networks import CNN1, MLP1

ROSTER = ["ANNA", "BOB", "EVE", "JOHN", "MARY", "LUCY", "TOM", "SAM"]


def small_cnn() -> CNN1:
    torch.manual_seed(0)
    return CNN1((1, 28, 28), 3, channels=(4, 8), hidden=16, padding=1, pool_every=1)


def test_a_cnn_on_a_cpu_runs_as_a_channels_last_copy_with_the_same_outputs():
    model = small_cnn().train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    copy = laid_out_for(model, "cpu")
    assert copy is not model
    assert copy.features[3].weight.is_contiguous(memory_format=torch.channels_last)
    assert not model.features[3].weight.is_contiguous(memory_format=torch.channels_last)
    assert model.training, "the caller's training flag is left alone"
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key])
    x = torch.rand(40, 1, 28, 28, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        np.testing.assert_allclose(copy.eval()(x), model.eval()(x), rtol=1e-5, atol=1e-6)


def test_mlps_scripted_models_and_accelerators_run_the_model_as_given():
    mlp = MLP1((1, 28, 28), 3)
    cnn = small_cnn()
    scripted = torch.jit.script(cnn)
    assert laid_out_for(mlp, "cpu") is mlp
    assert laid_out_for(scripted, "cpu") is scripted
    assert laid_out_for(cnn, torch.device("cuda", 0)) is cnn  # no GPU needed to ask
    assert (batch_size_for(cnn, "cpu"), batch_size_for(mlp, "cpu")) == (32, 1024)
    assert batch_size_for(cnn, "cuda:0") == 1024
    assert ProbeSettings().inference_for(cnn)["batch_size"] == 32
    assert ProbeSettings(batch_size=7).inference_for(cnn)["batch_size"] == 7


def test_a_cnn_scan_on_the_cpu_path_is_the_scan_of_the_model_as_given():
    """The same names' M (to float32 rounding), ranks and decisions as a scan that runs the
    model as given in batches of 1,024 (the previous path); the caller's model untouched."""
    model = small_cnn().train()
    probes = np.random.default_rng(0).random((60, 1, 28, 28)).astype(np.float32) * 0.3
    config = dict(seed=0, decoys=60, decoy_seed=3)
    with pytest.warns(UserWarning, match="no name can reach"):
        fast = leak_scan(model, probes, ROSTER, LeakScanConfig(**config))
    assert model.training
    assert not model.features[3].weight.is_contiguous(memory_format=torch.channels_last)
    with (
        mock.patch("monai_forget.memorisation.scan_models.laid_out_for", lambda m, d: m),
        pytest.warns(UserWarning, match="no name can reach"),
    ):
        plain = leak_scan(model, probes, ROSTER, LeakScanConfig(**config, batch_size=1024))
    assert [r.name for r in fast.rows] == [r.name for r in plain.rows]
    m_fast, m_plain = (np.array([r.m for r in res.rows]) for res in (fast, plain))
    np.testing.assert_allclose(m_fast, m_plain, rtol=1e-4, atol=1e-6 * np.abs(m_plain).max())
    assert [r.decision for r in fast.rows] == [r.decision for r in plain.rows]
    assert np.abs(m_plain).max() > 0, "a scan that computed nothing would compare equal"


def test_the_scan_commands_default_the_batch_to_the_model_and_device(capsys):
    with pytest.raises(SystemExit):
        main(["memorisation", "scan", "--help"])
    assert "32 for a convolutional model on a CPU, else 1024" in " ".join(
        capsys.readouterr().out.split()
    )
