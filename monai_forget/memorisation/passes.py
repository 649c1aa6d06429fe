"""The model's forward passes over probes carrying a feature (Hartley & Tsaftaris 2022, Sec. 2.3).

M compares the outputs on the clean probes D_c with the outputs on the same probes
carrying z_u (D_u) or random features z_r (D_r). No copy of a probe set is stacked:

- :class:`FeatureCarrying` composes the model with the stamping of one feature (or of
  one random feature per probe), so :func:`predict_probs` runs D_u or D_r as one
  batched :func:`monai_forget.inference.predict` pass over the clean probes.
- :func:`text_divergences` scores many texts at once (a roster and its decoys): each
  forward batch holds several texts stamped on the probes, and only the per-probe
  KL(f(x_c) || f(x_text)) is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import torch

from monai_forget.canary import render_text, text_shape
from monai_forget.memorisation.feature import RandomFeature, UniqueFeature
from monai_forget.memorisation.pipeline import PipelineProbes
from monai_forget.memorisation.statistics import Statistic, per_probe
from monai_forget.scores import check_probabilities

__all__ = [
    "FeatureCarrying",
    "pipeline_divergences",
    "predict_probs",
    "probe_set",
    "text_divergences",
]

_GROUP_BYTES = 32 * 2**20


def probe_set(images: np.ndarray):
    """Probe images as a LabelledImages with dummy labels: OOD probes have no classes."""
    from monai_forget.data import LabelledImages

    return LabelledImages(images, np.zeros(len(images), dtype=np.int64), num_classes=1)


class FeatureCarrying(torch.nn.Module):
    """``model`` composed with the stamping of a feature: ``x -> f(x carrying z)``.

    With ``masks=None`` every input carries the unique feature z_u; with ``masks`` of
    shape ``(N, h, w)``, the i-th input seen (in order) carries the random feature
    ``masks[i]`` of ``kind`` (see :meth:`UniqueFeature.apply_random`). Handing this to
    :func:`monai_forget.inference.predict` with the clean probes gives the outputs on D_u
    or D_r in one batched pass, stamping each batch on the fly. The feature and masks are
    buffers, so the prediction cache key (the model fingerprint) covers them. Inputs are
    not modified.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        feature: UniqueFeature,
        masks: np.ndarray | None = None,
        kind: RandomFeature = "patch",
    ) -> None:
        super().__init__()
        self.model = model
        self.feature = feature
        self.kind = kind
        value = np.nan if feature.value == "max" else float(feature.value)
        overwrite = float(kind == "patch" and masks is not None)
        spec = torch.tensor([*feature.position, value, overwrite], dtype=torch.float64)
        self.register_buffer("feature_spec", spec, persistent=False)
        self.register_buffer("feature_mask", torch.from_numpy(feature.mask.copy()), False)
        random = np.zeros((0, *feature.shape), bool) if masks is None else np.asarray(masks)
        self.register_buffer("random_masks", torch.from_numpy(random.astype(bool)), False)
        self._offset = 0
        self.train(model.training)  # predict restores this flag on the wrapped model too

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.random_masks.numel() == 0:
            return self.model(self.feature.apply(x))
        stop = self._offset + len(x)
        if stop > len(self.random_masks):
            raise ValueError(
                f"{stop} inputs seen but only {len(self.random_masks)} random masks given"
            )
        masks = self.random_masks[self._offset : stop].cpu().numpy()
        self._offset = stop
        return self.model(self.feature.apply_random(x, masks, kind=self.kind))


def predict_probs(model, probes, what: str, **kwargs) -> np.ndarray:
    """``predict(model, probes).probs`` with a clear error for probes the model rejects.

    ``probes``: a LabelledImages or an ``(N, C, H, W)`` array; ``what`` names the probe
    set in the error (``"clean"``, ``"unique-feature"``...).
    """
    from monai_forget.inference import predict

    if not hasattr(probes, "labels"):
        probes = probe_set(probes)
    try:
        return predict(model, probes, **kwargs).probs
    except RuntimeError as err:
        raise ValueError(
            f"the model could not process the {what} probes of shape "
            f"{tuple(probes.images.shape[1:])} (C, H, W): {str(err).splitlines()[0]}; pass "
            "probes with the channel count and size the model was trained on"
        ) from None


def text_divergences(
    model: torch.nn.Module,
    images: np.ndarray,
    clean_probs: np.ndarray,
    texts: Sequence[str],
    *,
    position: Sequence[int],
    scale: int = 1,
    value: float | str = 1.0,
    batch_size: int = 1024,
    device: str | torch.device = "cpu",
    outputs: Literal["logits", "probs"] = "logits",
    progress: bool = False,
    statistic: Statistic = "m",
) -> np.ndarray:
    """Per-probe d^i = KL(f(x_c^i) || f(x_c^i carrying text)) for many texts (Eq. 1's d_u),
    or another per-probe ``statistic`` (:mod:`~monai_forget.memorisation.statistics`).

    The texts are stamped on the probes in groups of several texts over all N probes
    (about 32 MB of images, reusing one buffer) and the model runs over each group in
    batches of ``batch_size``, so a scan of thousands of names costs one pass per text
    with no copy of the probe set kept per text.

    Args:
        model: the audited classifier.
        images: the clean probes ``(N, C, H, W)`` float32.
        clean_probs: ``(N, K)`` outputs on the clean probes (from :func:`predict_probs`).
        texts: the texts (any lengths; each must fit the probes at ``position``).
        position, scale, value: where and how the text is written (see
            :class:`UniqueFeature`).
        batch_size: images per forward pass.
        device, outputs: as :func:`monai_forget.inference.predict`.
        progress: show a progress bar over the texts.

    Returns:
        float64 ``(len(texts), N)``.
    """
    from tqdm.auto import tqdm

    n = len(images)
    row, col = (int(p) for p in position)
    x = torch.tensor(np.asarray(images, dtype=np.float32), device=device)  # a copy
    fill: float | torch.Tensor = float("nan") if value == "max" else float(value)
    if value == "max":
        fill = x.reshape(n, -1).amax(dim=1).reshape(1, n, 1, 1, 1)
    # Texts stamped per group: whole groups of images cut the per-operation overhead; the
    # model still sees at most batch_size images at a time.
    group_images = _GROUP_BYTES // (4 * int(np.prod(x.shape[1:])))
    per_batch = max(1, max(int(batch_size), group_images) // n)
    # One buffer reused for every group: fresh large allocations cost page faults.
    buffer = torch.empty((per_batch, *x.shape), dtype=x.dtype, device=device)
    by_length: dict[int, list[int]] = {}  # texts of one length share a mask shape
    for i, text in enumerate(texts):
        by_length.setdefault(len(text), []).append(i)
    for length in by_length:  # the texts are not named: they may be patients' names
        h, w = text_shape(length, scale)
        if row < 0 or col < 0 or row + h > x.shape[-2] or col + w > x.shape[-1]:
            raise ValueError(
                f"a text of {length} characters ({h}x{w} pixels at scale {scale}) does not fit "
                f"{tuple(x.shape[-2:])} probes at (row {row}, col {col}); use shorter texts, "
                "a smaller scale, another position or larger probes"
            )
    out = np.empty((len(texts), n), dtype=np.float64)
    was_training = model.training
    model.to(device).eval()
    bar = tqdm(total=len(texts), desc="texts", unit="text", disable=not progress)
    try:
        with torch.inference_mode():
            for indices in by_length.values():
                for start in range(0, len(indices), per_batch):
                    group = indices[start : start + per_batch]
                    masks = np.stack([render_text(texts[i], scale) for i in group])
                    h, w = masks.shape[1:]
                    stamped = buffer[: len(group)]
                    stamped.copy_(x.expand_as(stamped))
                    region = stamped[..., row : row + h, col : col + w]
                    sel = torch.as_tensor(masks, device=device)[:, None, None]
                    if isinstance(fill, torch.Tensor):
                        region.copy_(torch.where(sel, fill, region))
                    else:
                        region.masked_fill_(sel, fill)
                    stamped = stamped.reshape(len(group) * n, *x.shape[1:])
                    logits = torch.cat(
                        [model(stamped[i : i + batch_size])
                         for i in range(0, len(stamped), batch_size)]
                    )  # fmt: skip
                    probs, _ = check_probabilities(
                        logits.to("cpu", torch.float64).numpy(), from_logits=outputs == "logits"
                    )
                    out[group] = per_probe(statistic, clean_probs, probs.reshape(len(group), n, -1))
                    bar.update(len(group))
    finally:
        bar.close()
        model.train(was_training)
    return out


def _pipeline_kl(
    model: torch.nn.Module,
    inputs: np.ndarray,
    clean_probs: np.ndarray,
    batch_size: int,
    device: str | torch.device,
    outputs: str,
    statistic: Statistic = "m",
) -> np.ndarray:
    """Per-probe KL(f(x_c) || f(x)) (or another ``statistic``) for each ``(N, C, h, w)`` set
    of model ``inputs`` ``(G, N, C, h, w)``: ``(G, N)``, the sets run as one stack in
    batches of ``batch_size``."""
    n = len(clean_probs)
    stacked = torch.from_numpy(inputs.reshape(-1, *inputs.shape[2:])).to(device)
    was_training = model.training
    model.to(device).eval()
    try:
        with torch.inference_mode():
            logits = torch.cat(
                [model(stacked[i : i + batch_size]) for i in range(0, len(stacked), batch_size)]
            )
    except RuntimeError as err:
        raise ValueError(
            f"the model could not process the preprocessed probes of shape "
            f"{tuple(stacked.shape[1:])} (C, H, W): {str(err).splitlines()[0]}; check that the "
            "preprocessing is the one the model was trained with"
        ) from None
    finally:
        model.train(was_training)
    probs, _ = check_probabilities(
        logits.to("cpu", torch.float64).numpy(), from_logits=outputs == "logits"
    )
    return per_probe(statistic, clean_probs, probs.reshape(len(inputs), n, -1))


def pipeline_divergences(
    model: torch.nn.Module,
    probes: PipelineProbes,
    clean_probs: np.ndarray,
    texts: Sequence[str],
    *,
    position: Sequence[int],
    scale: int = 1,
    value: float | str = "max",
    batch_size: int = 1024,
    device: str | torch.device = "cpu",
    outputs: Literal["logits", "probs"] = "logits",
    progress: bool = False,
    statistic: Statistic = "m",
) -> np.ndarray:
    """:func:`text_divergences` through the model's preprocessing: each text is burned into
    the acquisition-grid probes by the injector's renderer, preprocessed, then scored.

    Args:
        probes: the acquisition-grid probes and preprocessing.
        position, scale, value: on the acquisition grid (see :class:`PipelineProbes`).
        (the rest as :func:`text_divergences`)

    Returns:
        float64 ``(len(texts), N)``.
    """
    from tqdm.auto import tqdm

    n = len(probes)
    size = int(np.prod(probes.clean().shape[1:]))
    per_group = max(1, max(int(batch_size), _GROUP_BYTES // (4 * size)) // n)
    by_length: dict[int, list[int]] = {}  # texts of one length share a box
    for i, text in enumerate(texts):
        by_length.setdefault(len(text), []).append(i)
    out = np.empty((len(texts), n), dtype=np.float64)
    with tqdm(total=len(texts), desc="texts", unit="text", disable=not progress) as bar:
        for indices in by_length.values():
            for start in range(0, len(indices), per_group):
                group = indices[start : start + per_group]
                chosen = [texts[i] for i in group]
                inputs = probes.carrying_texts(chosen, position, scale, value, reuse=True)
                out[group] = _pipeline_kl(
                    model, inputs, clean_probs, batch_size, device, outputs, statistic
                )
                bar.update(len(group))
    return out


def pipeline_random_divergences(
    model: torch.nn.Module,
    probes: PipelineProbes,
    clean_probs: np.ndarray,
    masks: np.ndarray,
    *,
    position: Sequence[int],
    value: float | str = "max",
    patch: bool = True,
    batch_size: int = 1024,
    device: str | torch.device = "cpu",
    outputs: Literal["logits", "probs"] = "logits",
    statistic: Statistic = "m",
) -> np.ndarray:
    """Eq. 1's d_r through the preprocessing: probe ``i`` carries the random feature
    ``masks[i]`` burned on the acquisition grid (``patch``: the whole box overwritten,
    the paper's control; else the mask's pixels painted like a text)."""
    inputs = probes.carrying(masks, position, value, background=0.0 if patch else None)
    return _pipeline_kl(model, inputs[None], clean_probs, batch_size, device, outputs, statistic)[0]
