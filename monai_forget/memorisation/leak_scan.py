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
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from monai_forget.canary.font import TYPEFACE
from monai_forget.canary.lettering import Lettering, TrueTypeLettering, as_lettering
from monai_forget.defaults import (
    LEAK_SCAN_ALPHA,
    LEAK_SCAN_CORRECTIONS,
    LEAK_SCAN_DECOY_SOURCES,
    PIPELINE_STATISTIC,
)
from monai_forget.memorisation.attribution import attribute_flags
from monai_forget.memorisation.decoys import decoy_template, decoy_test, draw_decoys, fresh_seed
from monai_forget.memorisation.feature import (
    RandomFeature,
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
from monai_forget.memorisation.scan_passes import ScanCheckpoint, run_passes, scan_key
from monai_forget.memorisation.scan_result import DecoyNull, LeakScanResult, NameResult
from monai_forget.memorisation.significance import PAPER_TEST, TESTS, one_tailed_test
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
class LeakScanConfig:
    """How a leak scan renders the names, draws the decoys, tests and runs the model.

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
        test: the uncalibrated one-tailed test reported beside (default the paper's).
        correction: ``"bh"`` (Benjamini-Hochberg, default), ``"bonferroni"`` or ``"none"``.
        alpha: level for the adjusted calibrated p-values.
        statistic: what each text is ranked by among its decoys: ``"m"`` (Eq. 1's M, the
            paper's) or ``"class-shift"`` (the rise in log-probability of the class the
            text raises most, less its random control's; a departure, see
            :mod:`~monai_forget.memorisation.statistics`). Default (``None``): the class
            shift through a pipeline (:data:`~monai_forget.defaults.PIPELINE_STATISTIC`,
            whose control scans met the false-alarm target where M's did not), M on the
            model grid (measured on more data sets and networks).
        random_feature: ``"patch"`` (the paper's), ``"ink"`` or ``"text"`` controls
            (shared by the names of one kind and their decoys).
        seed: seed of the random controls.
        attribution: when several names are flagged, test each against its likeness to
            every other (:mod:`~monai_forget.memorisation.attribution`), so
            names flagged only for looking like a leaked name are told apart (not run on
            scans with reference models).
        batch_size: images per forward pass.
        device, outputs: see :func:`monai_forget.inference.predict`.

    Raises:
        ValueError: an unknown test or correction, alpha outside (0, 1), or fewer than
            one decoy.
    """

    position: tuple[int, int] = (1, 1)
    scale: int = 1
    font: str | None = None
    font_size: int | None = None
    value: float | str = 1.0
    decoys: int | None = None
    decoy_seed: int | None = None
    decoy_source: DecoySource = LEAK_SCAN_DECOY_SOURCES[0]
    test: str = PAPER_TEST
    correction: Correction = "bh"
    alpha: float = LEAK_SCAN_ALPHA
    random_feature: RandomFeature = "patch"
    statistic: Statistic | None = None
    seed: int = 0
    attribution: bool = True
    batch_size: int = 1024
    device: str | torch.device = "cpu"
    outputs: Literal["logits", "probs"] = "logits"

    def __post_init__(self) -> None:
        if self.test not in TESTS:
            raise ValueError(f"unknown test {self.test!r}; choose from {TESTS}")
        if self.correction not in CORRECTIONS:
            raise ValueError(f"unknown correction {self.correction!r}; choose from {CORRECTIONS}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")
        if self.decoy_source not in LEAK_SCAN_DECOY_SOURCES:
            raise ValueError(
                f"unknown decoy source {self.decoy_source!r}; choose from {LEAK_SCAN_DECOY_SOURCES}"
            )
        if self.decoys is not None and int(self.decoys) < 1:
            raise ValueError(f"decoys must be at least 1, got {self.decoys}")
        if self.statistic is not None and self.statistic not in STATISTICS:
            raise ValueError(f"unknown statistic {self.statistic!r}; choose from {STATISTICS}")
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
    position, value, lettering = config.position, config.value, config.lettering
    truetype = isinstance(lettering, TrueTypeLettering)
    scale = lettering if truetype else config.scale  # what the passes draw texts with
    random_feature, seed, alpha = config.random_feature, config.seed, config.alpha
    test, correction, outputs = config.test, config.correction, config.outputs
    from monai_forget.fingerprint import data_fingerprint, model_fingerprint
    from monai_forget.memorisation.passes import probe_set

    pipeline = probes if isinstance(probes, PipelineProbes) else None
    if truetype and pipeline is None:
        raise ValueError(
            "TrueType text is scanned where it is burned: pass the probes at acquisition "
            "resolution with the model's preprocessing (PipelineProbes; CLI: --bundle)"
        )
    images = as_probe_images(probes if pipeline is None else pipeline.clean())
    grid = images.shape[-2:] if pipeline is None else pipeline.grid
    if name_patients is None:
        name_patients = getattr(names, "patients", None) if reference_patients else None
    unseen = _unseen(names, references, reference_patients, name_patients)
    names = check_names(names, position, scale, grid)
    n_decoys = config.decoys_for(len(names))
    check_reference_count(len(references))
    saved = ScanCheckpoint(checkpoint) if checkpoint is not None else None
    decoy_seed = config.decoy_seed
    if decoy_seed is None:  # an interrupted scan resumes with its own decoys
        decoy_seed = saved.decoy_seed() if saved is not None else None
    decoy_seed = fresh_seed() if decoy_seed is None else int(decoy_seed)
    if training_data is not None:
        warn_if_in_distribution(images, training_data)
    kwargs = dict(batch_size=config.batch_size, device=config.device, outputs=outputs)
    features, decoy_texts = {}, {}
    for name in names:
        template = decoy_template(name)
        if template not in features:
            features[template] = (
                UniqueFeature(lettering.render(name) >= 0.5, position, value, name)
                if truetype  # the controls' box and ink count (patch and ink controls)
                else UniqueFeature.from_text(name, position, scale, value)
            )
            decoy_texts[template] = draw_decoys(
                template,
                n_decoys,
                _rng(decoy_seed, template),
                exclude=names,
                source=config.decoy_source,
            )
    texts = list(names) + [t for v in decoy_texts.values() for t in v]
    statistic_name = config.statistic or (PIPELINE_STATISTIC if pipeline else STATISTICS[0])
    stamp = dict(position=position, scale=scale, value=value, statistic=statistic_name)
    models = [model, *references]
    fingerprints = [model_fingerprint(m) for m in models]
    probes_fingerprint = (
        data_fingerprint(probe_set(images)) if pipeline is None else pipeline.fingerprint()
    )
    key = scan_key(
        {
            "models": fingerprints,
            "probes": probes_fingerprint,
            **stamp,
            "outputs": outputs,
            "random_feature": random_feature,
            "seed": int(seed),
        },
        texts,
    )
    # The same texts, controls and probes on every model.
    controls = [
        _controls(m, images, features, random_feature, seed, kwargs, pipeline, statistic_name)
        for m in models
    ]

    def divergences(index: int, chunk: Sequence[str]) -> np.ndarray:
        clean = controls[index][0]
        return _text_divergences(models[index], images, clean, chunk, pipeline, stamp, kwargs)

    passes = run_passes(
        models, texts, len(names), len(images), divergences, decoy_seed, key, saved, progress
    )
    m_target = _m(passes.means[0], controls[0][1], texts)
    reference_m = [_m(passes.means[k], controls[k][1], texts) for k in range(1, len(models))]
    # Per set of references a name is judged against (one set, or none, unless the
    # references are by patient): every text's statistic and the references' mean.
    judged = relative_to_each_set(m_target, reference_m, texts, len(names), unseen)
    mean_d = passes.means[0]
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
            labelled = subset if reference_patients else ()
            null_of[template, subset] = DecoyNull(
                template, tuple(decoy_texts[template]), m, labelled
            )
    nulls = list(null_of.values())
    statistic = np.array([judged[u][0][i] for i, u in enumerate(unseen)])
    m_refs = np.array([judged[u][1][i] for i, u in enumerate(unseen)])
    per_name = []
    for i, name in enumerate(names):
        template = decoy_template(name)
        dr = controls[0][1][template]
        calibrated = decoy_test(statistic[i], null_of[template, unseen[i]].m)
        row = passes.name_rows[i]
        per_name.append((calibrated, one_tailed_test(row, dr, test), dr.mean()))
    pvalues = np.array([c.pvalue for c, _, _ in per_name])
    adjusted = {"bh": benjamini_hochberg, "bonferroni": bonferroni}.get(correction, np.copy)(
        pvalues
    )
    m_all = np.array([c.statistic for c, _, _ in per_name])
    order = np.lexsort((-m_all, pvalues))  # by p, then larger M first
    rows = tuple(
        NameResult(
            rank=rank,
            name=names[i],
            m=float(m_all[i]),
            pvalue=float(pvalues[i]),
            pvalue_adjusted=float(adjusted[i]),
            significant=bool(adjusted[i] < alpha),
            exposure=float(per_name[i][0].exposure),
            decoys_at_or_above=per_name[i][0].rank - 1,
            n_decoys=per_name[i][0].n_decoys,
            test_statistic=float(per_name[i][1].statistic),
            test_pvalue=float(per_name[i][1].pvalue),
            mean_d_unique=float(mean_d[i]),
            mean_d_random=float(per_name[i][2]),
            m_references=float(m_refs[i]),
            references=unseen[i] if reference_patients else (),
        )
        for rank, i in enumerate(order, start=1)
    )
    flagged = [r.name for r in rows if r.significant]
    attributions = ()
    attribute = config.attribution and not references and not truetype
    if attribute and len(flagged) > 1:

        def m_of(chunk: Sequence[str]) -> np.ndarray:
            d = _text_divergences(model, images, controls[0][0], chunk, pipeline, stamp, kwargs)
            return _m(d.mean(axis=1), controls[0][1], chunk)

        attributions = attribute_flags(
            flagged,
            m_of,
            roster=names,
            alpha=alpha,
            correction=correction,
            seed=decoy_seed,
            scale=scale,
        )
    factor = len(names) if correction in ("bh", "bonferroni") else 1
    # the smallest adjusted p any name could reach: that of the kind with the most decoys
    best = min(1.0, factor / (max(len(n.texts) for n in nulls) + 1))
    short = [n for n in nulls if factor / (len(n.texts) + 1) >= alpha]
    if short:
        # name decoys run short for short names (e.g. about 500 of 3 letters): say which
        kinds = ", ".join(f"{n.template} ({len(n.texts)} decoys)" for n in short)
        every = len(short) == len(nulls)
        warnings.warn(
            f"with {len(names)} names, {'no name' if every else 'no name of the kinds'} "
            f"{'' if every else kinds + ' '}can reach {correction}-adjusted p < {alpha} "
            f"(smallest possible {min(1.0, factor / (min(len(n.texts) for n in short) + 1)):.3g}"
            f"); pass decoys >= {default_decoys(len(names), alpha, correction)}"
            + ("" if config.decoy_source == "letters" else " or random-letter decoys"),
            UserWarning,
            stacklevel=2,
        )
    settings = {
        "position": [int(p) for p in position],
        "scale": None if truetype else int(scale),
        "value": value,
        **({"typeface": TYPEFACE} if not truetype else lettering.record()),
        "statistic": statistic_name,
        "grid": "model input" if pipeline is None else pipeline.describe(),
        "random_feature": random_feature,
        "decoys_per_kind": n_decoys,
        "decoy_source": config.decoy_source,
        "decoy_seed": decoy_seed,
        "smallest_adjusted_pvalue": best,
        "references": len(references),
        "references_by_patient": bool(reference_patients),
        "attribution": bool(attribute),
    }
    provenance = {
        "model_fingerprint": fingerprints[0],
        "reference_fingerprints": fingerprints[1:],
        "probes_fingerprint": probes_fingerprint,
        "seed": int(seed),
        "decoy_seed": decoy_seed,
        "versions": {
            **package_versions(),
            **({"faker": faker_version()} if config.decoy_source == "names" else {}),
        },
    }
    return LeakScanResult(
        rows,
        test,
        correction,
        float(alpha),
        len(images),
        tuple(nulls),
        settings,
        provenance,
        attributions,
    )
