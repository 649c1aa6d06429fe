"""How a memorisation measurement runs the model and draws its random controls: one
frozen settings object, taken by :func:`~monai_forget.memorisation.memorisation_score`
and extended by the leak scan's :class:`~monai_forget.memorisation.LeakScanConfig`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np
import torch

from monai_forget.checks import check_choice
from monai_forget.memorisation.feature import RandomFeature
from monai_forget.memorisation.significance import PAPER_TEST, TESTS

__all__ = ["OUTPUTS", "ProbeSettings"]

#: What a model returns: logits (a softmax is applied) or probabilities.
OUTPUTS = ("logits", "probs")


@dataclass(frozen=True)
class ProbeSettings:
    """The test, the random controls and how the model runs over the probes.

    Args:
        test: the one-tailed test of mean(d_u) > mean(d_r) (default Student's t, the
            paper's; :mod:`~monai_forget.memorisation.significance`).
        random_feature: the random controls z_r: ``"patch"`` (the paper's block
            overwrite), ``"ink"`` (random masks with the text's ink count) or ``"text"``
            (random letters).
        seed: seed of the random controls (the same controls on every model scored with
            these settings, reference models included).
        batch_size: images per forward pass (default: 32 for a convolutional model on a
            CPU, where small batches keep its activations in cache, else 1,024;
            :mod:`monai_forget.cpu_inference`).
        device: torch device the model runs on.
        outputs: what the model returns, ``"logits"`` (a softmax is applied) or
            ``"probs"``.

    Raises:
        ValueError: an unknown test, random feature or kind of output.
    """

    test: str = PAPER_TEST
    random_feature: RandomFeature = "patch"
    seed: int = 0
    batch_size: int | None = None
    device: str | torch.device = "cpu"
    outputs: Literal["logits", "probs"] = "logits"

    def __post_init__(self) -> None:
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)):
            raise ValueError(
                f"seed must be an integer, got {type(self.seed).__name__}: an integer seed "
                "gives the same random controls on every model scored (reference models too)"
            )
        check_choice("test", self.test, TESTS)
        check_choice("random_feature", self.random_feature, get_args(RandomFeature))
        check_choice("outputs", self.outputs, OUTPUTS)

    def inference_for(self, model: torch.nn.Module) -> dict[str, Any]:
        """The keyword arguments of :func:`monai_forget.inference.predict` they set for
        ``model`` (the batch resolved by :func:`~monai_forget.cpu_inference.batch_size_for`)."""
        from monai_forget.cpu_inference import batch_size_for

        batch = batch_size_for(model, self.device) if self.batch_size is None else self.batch_size
        return {"batch_size": batch, "device": self.device, "outputs": self.outputs}
