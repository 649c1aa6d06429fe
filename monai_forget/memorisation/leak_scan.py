"""Leak scan: is there evidence that a model memorised any name of a roster?

A de-identification audit knows where burned-in text would sit on the images (position),
how it would look (the typeface and scale of the scanner's annotation) and whose names
could have leaked (a CSV roster), but not whether any did. For every candidate name the
scan computes the black-box score M (Hartley & Tsaftaris 2022, Eq. 1) on the same
out-of-distribution probes and ranks it among **decoys**: texts of the same kind
(length, letter case, typeface, scale, place) drawn fresh for the scan, which the model
never saw: real names by default (the source whose measured false alarms stayed within
5 %), or random letters (:mod:`~monai_forget.memorisation.name_decoys`,
:mod:`~monai_forget.memorisation.decoys`; the exposure of Carlini et al. 2019). The
calibrated p-values are corrected over the roster (Benjamini-Hochberg by default,
Bonferroni as an option) and the names ranked. The paper's t-test is reported
beside them, uncalibrated. With reference models (``references``: the recipe trained
without the roster), every text's M is taken relative to theirs first, so a name that
moves any model of the design more than its decoys do is not mistaken for a leak.

Cost: one pass on the clean probes, one random-control pass per kind of name (names of
one length and case share their random controls and decoys), and one pass per name and
per decoy, several texts per forward batch (:func:`~.passes.text_divergences`); the
same again on each reference model.
"""

from __future__ import annotations

import math
import os
import warnings
import zlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import torch

from monai_forget.canary.font import TYPEFACE
from monai_forget.canary.lettering import Lettering, TrueTypeLettering, as_lettering
from monai_forget.checks import check_choice, check_fraction
from monai_forget.defaults import (
    LEAK_SCAN_ALPHA,
    LEAK_SCAN_CORRECTIONS,
    LEAK_SCAN_DECOY_SOURCES,
    PIPELINE_STATISTIC,
)
from monai_forget.memorisation.attribution import attribute_flags
from monai_forget.memorisation.decoys import decoy_template, decoy_test, draw_decoys, fresh_seed
from monai_forget.memorisation.feature import (
    UniqueFeature,
    as_probe_images,
    warn_if_in_distribution,
)
from monai_forget.memorisation.name_decoys import faker_version
from monai_forget.memorisation.passes import (
    FeatureCarrying,
    pipeline_divergences,
    pipeline_random_divergences,
    predict_probs,
    text_divergences,
)
from monai_forget.memorisation.patient_references import unseen_references
from monai_forget.memorisation.pipeline import PipelineProbes
from monai_forget.memorisation.reference_scan import check_reference_count, relative_to_each_set
from monai_forget.memorisation.roster import Roster, check_names, read_roster
from monai_forget.memorisation.scan_passes import (
    ScanCheckpoint,
    ScanPasses,
    run_passes,
    scan_key,
)
from monai_forget.memorisation.scan_result import DecoyNull, LeakScanResult, NameResult
from monai_forget.memorisation.settings import ProbeSettings
from monai_forget.memorisation.significance import one_tailed_test
from monai_forget.memorisation.statistics import STATISTICS, Statistic, per_probe
from monai_forget.results import package_versions
from monai_forget.stats import benjamini_hochberg, bonferroni

__all__ = [
    "CORRECTIONS",
    "DecoyNull",
    "LeakScanConfig",
    "LeakScanResult",
    "NameResult",
    "Roster",
    "default_decoys",
    "leak_scan",
    "read_roster",
]

#: Multiple-testing corrections: Benjamini-Hochberg (false discovery rate, default),
#: Bonferroni (family-wise error), or none.
CORRECTIONS = LEAK_SCAN_CORRECTIONS
Correction = Literal["bh", "bonferroni", "none"]
DecoySource = Literal["letters", "names"]


def default_decoys(n_names: int, alpha: float, correction: str) -> int:
    """Decoys per kind of name so that one leaked name can be flagged: at least 999.

    The smallest calibrated p is 1 / (n + 1); after BH or Bonferroni over m names a
    single leaked name is flagged only if m / (n + 1) < alpha, so n >= m / alpha.
    """
    tests = n_names if correction in ("bh", "bonferroni") else 1
    return max(999, math.floor(tests / alpha))


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


def _unseen(names, references, reference_patients, name_patients) -> list[tuple[int, ...]]:
    """Per name, the references it is judged against: those that never saw its patient
    (references by patient), every one, or none."""
    if reference_patients is None and name_patients is None:
        return [tuple(range(len(references)))] * len(names)
    if reference_patients is None or name_patients is None:
        raise ValueError(
            "references by patient need both each reference's training patients and each "
            "roster name's patient (CLI: --reference-patients and --patient-column)"
        )
    if len(reference_patients) != len(references):
        raise ValueError(
            f"{len(reference_patients)} patient lists for {len(references)} reference models: "
            "give one list per reference model, in the same order"
        )
    return unseen_references(names, name_patients, reference_patients)


def _m(mean_d: np.ndarray, d_random: dict[str, np.ndarray], texts: Sequence[str]) -> np.ndarray:
    """Eq. 1 for every text: its mean divergence minus its kind's random control's."""
    return mean_d - np.array([d_random[decoy_template(t)].mean() for t in texts])


@dataclass(frozen=True)
class LeakScanConfig(ProbeSettings):
    """How a leak scan renders the names, draws the decoys, tests and runs the model: the
    :class:`~monai_forget.memorisation.ProbeSettings` a memorisation score takes (test,
    random controls, seed, how the model runs), and what a scan adds.

    Args:
        position: ``(row, col)`` where burned-in text would start.
        scale: glyph scale of the text (the 5x5 typeface).
        font, font_size: a TrueType font and its size in pixels instead of the 5x5
            typeface, anti-aliased as the injector burns it
            (:mod:`~monai_forget.canary.lettering`); scanned through a pipeline only
            (``probes`` as :class:`~.pipeline.PipelineProbes`), with ``"patch"`` or
            ``"ink"`` random controls, without attribution.
        value: pixel value of the text, or ``"max"`` (each probe's white).
        decoys: decoys per kind of name (length and letter case); default
            :func:`default_decoys` (at least 999, enough for one name to reach alpha).
        decoy_seed: seed of the decoys; default a fresh one, recorded in the result.
        decoy_source: ``"names"`` (default: real given and family names of the same
            lengths and case, :mod:`~monai_forget.memorisation.name_decoys`) or
            ``"letters"`` (random letters of the name's kind). Names are the default
            because they kept the measured false alarms within 5 % where random letters
            did not (18 of 100 MNIST MLP-1 control scans flagged a name; docs/memorisation.md).
        correction: ``"bh"`` (Benjamini-Hochberg, default), ``"bonferroni"`` or ``"none"``.
        alpha: level for the adjusted calibrated p-values.
        statistic: what each text is ranked by among its decoys: ``"m"`` (Eq. 1's M, the
            paper's) or ``"class-shift"`` (the rise in log-probability of the class the
            text raises most, less its random control's; a departure, see
            :mod:`~monai_forget.memorisation.statistics`). Default (``None``): the class
            shift through a pipeline (:data:`~monai_forget.defaults.PIPELINE_STATISTIC`,
            whose control scans met the false-alarm target where M's did not), M on the
            model grid (measured on more data sets and networks).
        attribution: when several names are flagged, test each against its likeness to
            every other (:mod:`~monai_forget.memorisation.attribution`), so
            names flagged only for looking like a leaked name are told apart (not run on
            scans with reference models).
        test, random_feature, seed, device, outputs: as :class:`ProbeSettings`'s (the
            test is the uncalibrated one reported beside; the names of one kind and their
            decoys share their random controls).
        batch_size: images per forward pass (default 1024: several texts per batch).

    Raises:
        ValueError: an unknown test, random feature, kind of output or correction, alpha
            outside (0, 1), or fewer than one decoy.
    """

    position: tuple[int, int] = (1, 1)
    scale: int = 1
    font: str | None = None
    font_size: int | None = None
    value: float | str = 1.0
    decoys: int | None = None
    decoy_seed: int | None = None
    decoy_source: DecoySource = LEAK_SCAN_DECOY_SOURCES[0]
    correction: Correction = "bh"
    alpha: float = LEAK_SCAN_ALPHA
    statistic: Statistic | None = None
    attribution: bool = True
    batch_size: int = 1024  # several texts per forward batch (ProbeSettings: 256 probes)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("correction", self.correction, CORRECTIONS)
        check_fraction("alpha", self.alpha)
        check_choice("decoy_source", self.decoy_source, LEAK_SCAN_DECOY_SOURCES)
        if self.decoys is not None and int(self.decoys) < 1:
            raise ValueError(f"decoys must be at least 1, got {self.decoys}")
        if self.statistic is not None:
            check_choice("statistic", self.statistic, STATISTICS)
        object.__setattr__(self, "position", tuple(int(p) for p in self.position))
        if self.font is not None and self.random_feature == "text":
            raise ValueError(
                "random-text controls are drawn in the 5x5 typeface; with a font use the "
                "patch or ink controls"
            )
        self.lettering  # noqa: B018  (an unknown font or a bad size is refused here)

    @property
    def lettering(self) -> Lettering:
        """How texts are drawn: the 5x5 typeface at ``scale`` or the TrueType font."""
        return as_lettering(self.scale, self.font, self.font_size)

    def decoys_for(self, n_names: int) -> int:
        """Decoys per kind of name for a roster of ``n_names``."""
        if self.decoys is None:
            return default_decoys(n_names, self.alpha, self.correction)
        return int(self.decoys)


def leak_scan(
    model: torch.nn.Module,
    probes: object,
    names: Sequence[str],
    config: LeakScanConfig | None = None,
    *,
    training_data: object | None = None,
    references: Sequence[torch.nn.Module] = (),
    reference_patients: Sequence[Collection[str]] | None = None,
    name_patients: Sequence[str] | None = None,
    progress: bool = False,
    checkpoint: str | os.PathLike | None = None,
) -> LeakScanResult:
    """Score every candidate name against decoys, correct for multiple testing and rank.

    Args:
        model: the audited classifier (black box: only outputs are used).
        probes: out-of-distribution probe set D_c ``(N, C, H, W)`` on the model's input
            grid, or :class:`~.pipeline.PipelineProbes`: probes at acquisition resolution
            and the model's preprocessing. Then every text is burned on the acquisition
            grid (``config.position``, ``scale`` and ``value`` are acquisition pixels and
            stored values; ``value="max"`` is the injector's rule) and reaches the model
            through its preprocessing, as a leaked name would.
        names: candidate names (e.g. from :func:`read_roster`).
        config: how names are rendered, decoys drawn and the model run (default
            :class:`LeakScanConfig`'s defaults).
        training_data: in-distribution samples; warns about probes identical to them.
        references: at least 2 models trained by the audited model's recipe without any
            roster name: each text's M is taken relative to theirs, which removes what a
            name does to any model of the design (random decoys are not exchangeable
            with every real name; :mod:`~.reference_scan`). One scan per reference.
        reference_patients: for each reference, the patient IDs of its training images,
            when the references were trained on halves of the audited data's patients
            (:func:`~.patient_references.split_patients`) rather than without the roster.
            Each name, and its decoys, is then judged against the references that never
            saw its patient (:mod:`~.patient_references`). Needs ``name_patients``.
        name_patients: each roster name's patient ID, in roster order (default: the
            roster's own, when read with a patient column).
        progress: show a progress bar over the names and decoys.
        checkpoint: a file where the scan saves its passes as it goes, and from which an
            interrupted scan of the same model, probes, roster and settings resumes (with
            its decoy seed unless ``config.decoy_seed`` is given); delete it once the
            result is kept (:mod:`~.scan_passes`).

    Raises:
        ValueError: bad names (empty, duplicates, characters outside the typeface, too
            long for the probes; named by their entry, not their content), bad probes,
            a checkpoint of another scan, patient lists that do not match the references
            or the roster, or a name with fewer than 2 references that never saw its
            patient.
    """
    config = LeakScanConfig() if config is None else config
    pipeline = probes if isinstance(probes, PipelineProbes) else None
    if _truetype(config) and pipeline is None:
        raise ValueError(
            "TrueType text is scanned where it is burned: pass the probes at acquisition "
            "resolution with the model's preprocessing (PipelineProbes; CLI: --bundle)"
        )
    images = as_probe_images(probes if pipeline is None else pipeline.clean())
    grid = images.shape[-2:] if pipeline is None else pipeline.grid
    if name_patients is None:
        name_patients = getattr(names, "patients", None) if reference_patients else None
    unseen = _unseen(names, references, reference_patients, name_patients)
    names = check_names(names, config.position, _drawn_with(config), grid)
    check_reference_count(len(references))
    saved = ScanCheckpoint(checkpoint) if checkpoint is not None else None
    decoy_seed = config.decoy_seed
    if decoy_seed is None:  # an interrupted scan resumes with its own decoys
        decoy_seed = saved.decoy_seed() if saved is not None else None
    decoy_seed = fresh_seed() if decoy_seed is None else int(decoy_seed)
    if training_data is not None:
        warn_if_in_distribution(images, training_data)
    by_patient = bool(reference_patients)
    # 1. texts: the names, and decoys of each kind of name; 2. every text on every model
    features, decoy_texts = _texts_by_kind(names, config, decoy_seed)
    scan = _Scan.run(
        [model, *references], images, pipeline, names, features, decoy_texts, config,
        decoy_seed, saved, progress,
    )  # fmt: skip
    # 3. per set of references a name is judged against (one set, or none, unless the
    # references are by patient): every text's statistic and the references' mean
    judged = relative_to_each_set(scan.m(0), scan.reference_m(), scan.texts, len(names), unseen)
    nulls = _decoy_nulls(names, unseen, judged, decoy_texts, by_patient)
    # 4. each name ranked among its decoys, corrected over the roster
    rows = _ranked(names, unseen, judged, nulls, scan, config, by_patient)
    attribute = config.attribution and not references and not _truetype(config)
    flagged = [r.name for r in rows if r.significant]
    attributions = ()
    if attribute and len(flagged) > 1:
        attributions = attribute_flags(
            flagged, scan.m_of, roster=names, alpha=config.alpha,
            correction=config.correction, seed=decoy_seed, scale=_drawn_with(config),
        )  # fmt: skip
    best = _warn_short_decoys(names, list(nulls.values()), config)
    # 5. what the result records
    settings, provenance = _records(
        config, scan, decoy_seed, len(names), len(references), by_patient, attribute, best
    )
    return LeakScanResult(
        rows, config.test, config.correction, float(config.alpha), len(images),
        tuple(nulls.values()), settings, provenance, attributions,
    )  # fmt: skip


def _records(
    config: LeakScanConfig,
    scan: _Scan,
    decoy_seed: int,
    n_names: int,
    n_references: int,
    by_patient: bool,
    attribute: bool,
    best: float,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The result's settings (placement, controls, decoys, what the scan could reach) and
    provenance (fingerprints, seeds, versions)."""
    settings = {
        "position": [int(p) for p in config.position],
        "scale": None if _truetype(config) else int(config.scale),
        "value": config.value,
        **({"typeface": TYPEFACE} if not _truetype(config) else config.lettering.record()),
        "statistic": scan.statistic,
        "grid": "model input" if scan.pipeline is None else scan.pipeline.describe(),
        "random_feature": config.random_feature,
        "decoys_per_kind": config.decoys_for(n_names),
        "decoy_source": config.decoy_source,
        "decoy_seed": decoy_seed,
        "smallest_adjusted_pvalue": best,
        "references": n_references,
        "references_by_patient": by_patient,
        "attribution": bool(attribute),
    }
    provenance = {
        "model_fingerprint": scan.fingerprints[0],
        "reference_fingerprints": scan.fingerprints[1:],
        "probes_fingerprint": scan.probes_fingerprint,
        "seed": int(config.seed),
        "decoy_seed": decoy_seed,
        "versions": {
            **package_versions(),
            **({"faker": faker_version()} if config.decoy_source == "names" else {}),
        },
    }
    return settings, provenance


def _truetype(config: LeakScanConfig) -> bool:
    return isinstance(config.lettering, TrueTypeLettering)


def _drawn_with(config: LeakScanConfig) -> int | Lettering:
    """What the passes draw texts with: the TrueType lettering, or the 5x5 scale."""
    return config.lettering if _truetype(config) else config.scale


def _texts_by_kind(
    names: Sequence[str], config: LeakScanConfig, decoy_seed: int
) -> tuple[dict[str, UniqueFeature], dict[str, list[str]]]:
    """Per kind of name (:func:`decoy_template`): the feature whose box and ink count the
    random controls take, and the decoys drawn for it (none a roster name)."""
    lettering, n_decoys = config.lettering, config.decoys_for(len(names))
    features, decoy_texts = {}, {}
    for name in names:
        template = decoy_template(name)
        if template in features:
            continue
        features[template] = (
            UniqueFeature(lettering.render(name) >= 0.5, config.position, config.value, name)
            if _truetype(config)  # the controls' box and ink count (patch and ink controls)
            else UniqueFeature.from_text(name, config.position, config.scale, config.value)
        )
        decoy_texts[template] = draw_decoys(
            template, n_decoys, _rng(decoy_seed, template), exclude=names,
            source=config.decoy_source,
        )  # fmt: skip
    return features, decoy_texts


@dataclass(frozen=True)
class _Scan:
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
    ) -> _Scan:
        from monai_forget.fingerprint import data_fingerprint, model_fingerprint
        from monai_forget.memorisation.passes import probe_set

        texts = list(names) + [t for v in decoy_texts.values() for t in v]
        statistic = config.statistic or (PIPELINE_STATISTIC if pipeline else STATISTICS[0])
        stamp = dict(position=config.position, scale=_drawn_with(config), value=config.value,
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
        inference = config.inference
        # The same texts, controls and probes on every model.
        controls = [
            _controls(m, images, features, config.random_feature, config.seed, inference,
                      pipeline, statistic)
            for m in models
        ]  # fmt: skip
        partial = cls(models, images, pipeline, texts, statistic, stamp, inference, controls,
                      None, fingerprints, probes_fingerprint)  # fmt: skip
        passes = run_passes(
            models, texts, len(names), len(images), partial.divergences, decoy_seed, key,
            saved, progress,
        )  # fmt: skip
        return replace(partial, passes=passes)

    def divergences(self, index: int, chunk: Sequence[str]) -> np.ndarray:
        """Per-probe divergences of ``chunk`` on model ``index``."""
        clean = self.controls[index][0]
        return _text_divergences(
            self.models[index], self.images, clean, chunk, self.pipeline, self.stamp,
            self.inference,
        )  # fmt: skip

    def m(self, index: int) -> np.ndarray:
        """Eq. 1 for every text on model ``index``."""
        return _m(self.passes.means[index], self.controls[index][1], self.texts)

    def reference_m(self) -> list[np.ndarray]:
        return [self.m(k) for k in range(1, len(self.models))]

    def m_of(self, chunk: Sequence[str]) -> np.ndarray:
        """Eq. 1 of texts not in the scan on the audited model (for attribution)."""
        return _m(self.divergences(0, chunk).mean(axis=1), self.controls[0][1], chunk)


Judged = dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]]


def _decoy_nulls(
    names: Sequence[str],
    unseen: Sequence[tuple[int, ...]],
    judged: Judged,
    decoy_texts: dict[str, list[str]],
    by_patient: bool,
) -> dict[tuple[str, tuple[int, ...]], DecoyNull]:
    """Per (kind of name, set of references): the decoys' statistic, read-only."""
    slices, offset = {}, len(names)
    for template, dt in decoy_texts.items():
        slices[template] = slice(offset, offset + len(dt))
        offset += len(dt)
    null_of: dict[tuple[str, tuple[int, ...]], DecoyNull] = {}
    for name, subset in zip(names, unseen, strict=True):
        template = decoy_template(name)
        if (template, subset) not in null_of:
            m = judged[subset][0][slices[template]].copy()
            m.flags.writeable = False
            labelled = subset if by_patient else ()
            null_of[template, subset] = DecoyNull(
                template, tuple(decoy_texts[template]), m, labelled
            )
    return null_of


def _ranked(
    names: Sequence[str],
    unseen: Sequence[tuple[int, ...]],
    judged: Judged,
    null_of: dict[tuple[str, tuple[int, ...]], DecoyNull],
    scan: _Scan,
    config: LeakScanConfig,
    by_patient: bool,
) -> tuple[NameResult, ...]:
    """Each name's calibrated test among its decoys (and the paper's test beside),
    corrected over the roster, ranked by p (ties: larger M first)."""
    statistic = np.array([judged[u][0][i] for i, u in enumerate(unseen)])
    m_refs = np.array([judged[u][1][i] for i, u in enumerate(unseen)])
    per_name = []
    for i, name in enumerate(names):
        template = decoy_template(name)
        dr = scan.controls[0][1][template]
        calibrated = decoy_test(statistic[i], null_of[template, unseen[i]].m)
        row = scan.passes.name_rows[i]
        per_name.append((calibrated, one_tailed_test(row, dr, config.test), dr.mean()))
    pvalues = np.array([c.pvalue for c, _, _ in per_name])
    correct = {"bh": benjamini_hochberg, "bonferroni": bonferroni}.get(config.correction, np.copy)
    adjusted = correct(pvalues)
    m_all = np.array([c.statistic for c, _, _ in per_name])
    mean_d = scan.passes.means[0]
    order = np.lexsort((-m_all, pvalues))  # by p, then larger M first
    return tuple(
        NameResult(
            rank=rank,
            name=names[i],
            m=float(m_all[i]),
            pvalue=float(pvalues[i]),
            pvalue_adjusted=float(adjusted[i]),
            significant=bool(adjusted[i] < config.alpha),
            exposure=float(per_name[i][0].exposure),
            decoys_at_or_above=per_name[i][0].rank - 1,
            n_decoys=per_name[i][0].n_decoys,
            test_statistic=float(per_name[i][1].statistic),
            test_pvalue=float(per_name[i][1].pvalue),
            mean_d_unique=float(mean_d[i]),
            mean_d_random=float(per_name[i][2]),
            m_references=float(m_refs[i]),
            references=unseen[i] if by_patient else (),
        )
        for rank, i in enumerate(order, start=1)
    )


def _warn_short_decoys(
    names: Sequence[str], nulls: list[DecoyNull], config: LeakScanConfig
) -> float:
    """Warn where a kind of name has too few decoys for any name of it to reach alpha;
    return the smallest adjusted p any name could reach (that of the kind with the most
    decoys)."""
    factor = len(names) if config.correction in ("bh", "bonferroni") else 1
    best = min(1.0, factor / (max(len(n.texts) for n in nulls) + 1))
    short = [n for n in nulls if factor / (len(n.texts) + 1) >= config.alpha]
    if short:
        # name decoys run short for short names (e.g. about 500 of 3 letters): say which
        kinds = ", ".join(f"{n.template} ({len(n.texts)} decoys)" for n in short)
        every = len(short) == len(nulls)
        smallest = min(1.0, factor / (min(len(n.texts) for n in short) + 1))
        warnings.warn(
            f"with {len(names)} names, {'no name' if every else 'no name of the kinds'} "
            f"{'' if every else kinds + ' '}can reach {config.correction}-adjusted p < "
            f"{config.alpha} (smallest possible {smallest:.3g}); pass decoys >= "
            f"{default_decoys(len(names), config.alpha, config.correction)}"
            + ("" if config.decoy_source == "letters" else " or random-letter decoys"),
            UserWarning,
            stacklevel=3,
        )
    return best
