"""A leak scan's passes over its models: the texts of each kind of name (the names and
their decoys, a stream per kind), the random controls, and every text on every model on
the same probes, chunk by chunk (sequential decoys stop a kind's stream once its names
are settled). :func:`~monai_forget.memorisation.leak_scan.leak_scan` ranks what they give."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from monai_forget.cpu_inference import laid_out_for
from monai_forget.defaults import PIPELINE_STATISTIC
from monai_forget.memorisation.decoys import decoy_template, draw_decoys
from monai_forget.memorisation.feature import UniqueFeature
from monai_forget.memorisation.passes import (
    FeatureCarrying,
    pipeline_divergences,
    pipeline_random_divergences,
    predict_probs,
    text_divergences,
)
from monai_forget.memorisation.pipeline import PipelineProbes
from monai_forget.memorisation.scan_config import LeakScanConfig, drawn_with, truetype
from monai_forget.memorisation.scan_passes import ScanCheckpoint, ScanPasses, run_passes, scan_key
from monai_forget.memorisation.statistics import STATISTICS, per_probe

__all__ = ["ScanModels", "eq1_m", "texts_by_kind"]


def _rng(seed: int, template: str) -> np.random.Generator:
    """A stream per (seed, kind of name): one kind's draws do not depend on the others."""
    return np.random.default_rng([int(seed), zlib.crc32(template.encode("utf-8"))])


def _random_divergences(model, images, clean, feature, kind, seed, kwargs, pipeline, statistic):
    masks = feature.random_masks(len(images), _rng(seed, decoy_template(feature.text)), kind)
    if pipeline is not None:
        where = dict(position=feature.position, value=feature.value, patch=kind == "patch")
        return pipeline_random_divergences(
            model, pipeline, clean, masks, **where, **kwargs, statistic=statistic
        )
    carrying = FeatureCarrying(model, feature, masks, kind)
    probs = predict_probs(carrying, images, "random-feature", **kwargs)
    return per_probe(statistic, clean, probs[None])[0]


def _controls(model, images, features, random_feature, seed, kwargs, pipeline, statistic):
    """``model``'s outputs on the clean probes and each kind's random-control divergences
    (the controls burned through ``pipeline`` when the probes are acquisition images)."""
    clean = predict_probs(model, images, "clean", **kwargs)
    d_random = {
        template: _random_divergences(
            model, images, clean, feature, random_feature, seed, kwargs, pipeline, statistic
        )
        for template, feature in features.items()
    }
    return clean, d_random


def _text_divergences(model, images, clean, texts, pipeline, stamp, kwargs) -> np.ndarray:
    """Per-probe divergences of ``texts``: stamped on the model's input grid, or burned on
    the acquisition grid and preprocessed when ``pipeline`` is given."""
    if pipeline is not None:
        return pipeline_divergences(model, pipeline, clean, texts, **stamp, **kwargs)
    return text_divergences(model, images, clean, texts, **stamp, **kwargs)


def eq1_m(mean_d: np.ndarray, d_random: dict[str, np.ndarray], texts: Sequence[str]) -> np.ndarray:
    """Eq. 1 for every text: its mean divergence minus its kind's random control's."""
    return mean_d - np.array([d_random[decoy_template(t)].mean() for t in texts])


def texts_by_kind(
    names: Sequence[str], config: LeakScanConfig, decoy_seed: int, n_references: int
) -> tuple[dict[str, UniqueFeature], dict[str, list[str]]]:
    """Per kind of name (:func:`decoy_template`): the feature whose box and ink count the
    random controls take, and the decoys drawn for it (none a roster name); sequential
    decoys in a random order (a source that holds fewer than the cap lists them all)."""
    lettering, n_decoys = config.lettering, config.decoys_for(len(names), n_references)
    sequential = config.sequential(n_references)
    features, decoy_texts = {}, {}
    for name in names:
        template = decoy_template(name)
        if template in features:
            continue
        features[template] = (
            UniqueFeature(lettering.render(name) >= 0.5, config.position, config.value, name)
            if truetype(config)  # the controls' box and ink count (patch and ink controls)
            else UniqueFeature.from_text(name, config.position, config.scale, config.value)
        )
        rng = _rng(decoy_seed, template)
        drawn = draw_decoys(template, n_decoys, rng, exclude=names, source=config.decoy_source)
        if sequential:  # a stream followed in order: a random order
            drawn = [drawn[i] for i in rng.permutation(len(drawn))]
        decoy_texts[template] = drawn
    return features, decoy_texts


@dataclass(frozen=True)
class ScanModels:
    """Every text (names, then each kind's decoys) on every model (the audited one, then
    the references), on the same probes and random controls."""

    models: list[torch.nn.Module]
    images: np.ndarray
    pipeline: PipelineProbes | None
    texts: list[str]
    statistic: str
    stamp: dict[str, Any]
    inference: dict[str, Any]
    controls: list[tuple[np.ndarray, dict[str, np.ndarray]]]
    passes: ScanPasses
    fingerprints: list[str]
    probes_fingerprint: str
    kinds: dict[str, tuple[int, list[str]]]  # per kind: first index in texts, its decoys

    @classmethod
    def run(
        cls,
        models: list[torch.nn.Module],
        images: np.ndarray,
        pipeline: PipelineProbes | None,
        names: Sequence[str],
        features: dict[str, UniqueFeature],
        decoy_texts: dict[str, list[str]],
        config: LeakScanConfig,
        decoy_seed: int,
        saved: ScanCheckpoint | None,
        progress: bool,
    ) -> ScanModels:
        from monai_forget.fingerprint import data_fingerprint, model_fingerprint
        from monai_forget.memorisation.passes import probe_set

        texts = list(names) + [t for v in decoy_texts.values() for t in v]
        statistic = config.statistic or (PIPELINE_STATISTIC if pipeline else STATISTICS[0])
        stamp = dict(position=config.position, scale=drawn_with(config), value=config.value,
                     statistic=statistic)  # fmt: skip
        fingerprints = [model_fingerprint(m) for m in models]
        probes_fingerprint = (
            data_fingerprint(probe_set(images)) if pipeline is None else pipeline.fingerprint()
        )
        key = scan_key(
            {"models": fingerprints, "probes": probes_fingerprint, **stamp,
             "outputs": config.outputs, "random_feature": config.random_feature,
             "seed": int(config.seed)},
            texts,
        )  # fmt: skip
        inference = config.inference_for(models[0])  # references share its design
        # Each model as its device runs it fastest (a channels-last copy on a CPU); the
        # fingerprints above are the given models'.
        models = [laid_out_for(m, config.device) for m in models]
        # The same texts, controls and probes on every model.
        controls = [
            _controls(m, images, features, config.random_feature, config.seed, inference,
                      pipeline, statistic)
            for m in models
        ]  # fmt: skip
        kinds, offset = {}, len(names)
        for template, dt in decoy_texts.items():
            kinds[template] = (offset, dt)
            offset += len(dt)
        partial = cls(models, images, pipeline, texts, statistic, stamp, inference, controls,
                      None, fingerprints, probes_fingerprint, kinds)  # fmt: skip
        order = None
        if config.sequential(len(models) - 1):
            segments = [(0, len(names))] + [(o, o + len(dt)) for o, dt in kinds.values()]
            order = dict(segments=segments, settled=partial.settled_by(names, config.exceedances))
        passes = run_passes(
            models, texts, len(names), len(images), partial.divergences, decoy_seed, key,
            saved, progress, **(order or {}),
        )  # fmt: skip
        return replace(partial, passes=passes)

    def settled_by(self, names: Sequence[str], h: int):
        """The sequential decoys' stopping rule for :func:`run_passes`: a kind's stream
        stops once every name of that kind has ``h`` decoys at or above it (the random
        control's mean is one constant per kind, so the mean divergences order the texts
        as the statistic does)."""
        members = {t: [i for i, n in enumerate(names) if decoy_template(n) == t]
                   for t in self.kinds}  # fmt: skip
        templates = list(self.kinds)

        def settled(passes: ScanPasses, segment: int, stop: int) -> bool:
            if segment == 0:
                return False
            template = templates[segment - 1]
            decoys = passes.means[0, self.kinds[template][0] : stop]
            return all(
                np.count_nonzero(decoys >= passes.means[0, i]) >= h for i in members[template]
            )

        return settled

    def decoy_slice(self, template: str) -> slice:
        """The decoys of one kind that were scored (sequential: the stream as far as it
        was followed), as a slice of the texts."""
        start, drawn = self.kinds[template]
        scored = ~np.isnan(self.passes.means[0, start : start + len(drawn)])
        return slice(start, start + int(np.argmin(scored) if not scored.all() else scored.size))

    @property
    def available(self) -> dict[str, int]:
        """Per kind of name, the decoys it could draw (the fixed number or the cap, fewer
        where the source holds fewer)."""
        return {template: len(dt) for template, (_, dt) in self.kinds.items()}

    def divergences(self, index: int, chunk: Sequence[str]) -> np.ndarray:
        """Per-probe divergences of ``chunk`` on model ``index``."""
        clean = self.controls[index][0]
        return _text_divergences(
            self.models[index], self.images, clean, chunk, self.pipeline, self.stamp,
            self.inference,
        )  # fmt: skip

    def m(self, index: int) -> np.ndarray:
        """Eq. 1 for every text on model ``index``."""
        return eq1_m(self.passes.means[index], self.controls[index][1], self.texts)

    def reference_m(self) -> list[np.ndarray]:
        return [self.m(k) for k in range(1, len(self.models))]

    def m_of(self, chunk: Sequence[str]) -> np.ndarray:
        """Eq. 1 of texts not in the scan on the audited model (for attribution)."""
        return eq1_m(self.divergences(0, chunk).mean(axis=1), self.controls[0][1], chunk)
