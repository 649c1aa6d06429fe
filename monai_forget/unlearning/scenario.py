"""A federated withdrawal scenario on real images: providers, calibration and test sets.

Providers are disjoint, seeded, stratified subsets of one real data set (MNIST test
digits or PneumoniaMNIST). Optionally one provider's scanner leaves a site signature on
every image it acquires: a burned-in border of ``frame_width`` pixels at full
intensity (collimator edges and burned-in frames are common in radiographs). Each
provider gets its own calibration set for the withdrawal auditors, drawn from the same
distribution as its data (the same site signature) and sharing no sample with any
provider.

Why the signature matters: Forsaken's generator (Protocol 1 of Liu et al. 2020) moves
the model's outputs on the elimination set to uniform at the smallest parameter change.
When a provider's images are exchangeable with everyone else's (an i.i.d. split), the
cheapest change lowers confidence on every provider alike; when they carry something of
their own, the change can stay on them. ``docs/unlearning.md`` reports both cases.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from monai_forget.data import LabelledImages

__all__ = ["Federation", "add_site_frame", "build_federation"]


def add_site_frame(data: LabelledImages, width: int = 2, value: float = 1.0) -> LabelledImages:
    """A copy of ``data`` with a burned-in border of ``width`` pixels set to ``value``."""
    h, w = data.image_shape[1:]
    if not 0 < width < min(h, w) // 2:
        raise ValueError(f"frame width must be in [1, {min(h, w) // 2 - 1}], got {width}")
    images = np.array(data.images, copy=True)
    images[..., :width, :] = value
    images[..., -width:, :] = value
    images[..., :, :width] = value
    images[..., :, -width:] = value
    return LabelledImages(images, data.labels, data.ids, data.num_classes)


@dataclass(frozen=True)
class Federation:
    """Providers' data plus what the auditor and the oracle need.

    Attributes:
        clients: Provider name -> training data.
        calibration: Provider name -> an auditor's calibration set for that provider
            (same distribution, disjoint from every provider).
        test: Held-out test data (no site signature).
        shadow: Data for the membership oracle's shadow model, from the signed
            provider's distribution when there is one.
        signed: The provider whose images carry the site signature, or ``None``.
    """

    clients: dict[str, LabelledImages]
    calibration: dict[str, LabelledImages]
    test: LabelledImages
    shadow: LabelledImages
    signed: str | None = None


def build_federation(
    data: LabelledImages,
    *,
    n_clients: int = 3,
    per_client: int = 200,
    calibration_size: int = 200,
    test_size: int = 500,
    shadow_size: int = 400,
    signed: str | None = "site-1",
    frame_width: int = 2,
    seed: int = 0,
) -> Federation:
    """Split ``data`` into providers ``site-1..site-N``, calibration, test and shadow sets.

    Args:
        data: The real data set to split.
        n_clients: Number of providers.
        per_client: Samples per provider.
        calibration_size: Samples in each provider's calibration set.
        test_size: Samples in the test set.
        shadow_size: Samples for the oracle's shadow model.
        signed: Provider whose images get the site frame (``None``: an i.i.d. split).
        frame_width: Border width of the site frame in pixels.
        seed: Seeds the split.
    """
    names = [f"site-{i + 1}" for i in range(n_clients)]
    if signed is not None and signed not in names:
        raise ValueError(f"signed provider {signed!r} is not one of {names}")
    need = n_clients * (per_client + calibration_size) + test_size + shadow_size
    if need > len(data):
        raise ValueError(
            f"the split needs {need} samples but the data set has {len(data)}; lower "
            "per_client, calibration_size, test_size or shadow_size"
        )
    order = np.random.default_rng(seed).permutation(len(data))
    parts: list[LabelledImages] = []
    start = 0
    for size in (
        [per_client] * n_clients + [calibration_size] * n_clients + [test_size, shadow_size]
    ):
        parts.append(data.subset(np.sort(order[start : start + size])))
        start += size
    clients = dict(zip(names, parts[:n_clients], strict=True))
    calibration = dict(zip(names, parts[n_clients : 2 * n_clients], strict=True))
    test, shadow = parts[-2], parts[-1]
    if signed is not None:
        clients[signed] = add_site_frame(clients[signed], frame_width)
        calibration[signed] = add_site_frame(calibration[signed], frame_width)
        shadow = add_site_frame(shadow, frame_width)
    return Federation(clients, calibration, test, shadow, signed)
