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

import os
import warnings
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np
import torch

from monai_forget.canary.font import TYPEFACE
from monai_forget.memorisation.attribution import attribute_flags
from monai_forget.memorisation.decoys import DecoyTest, decoy_template, decoy_test, fresh_seed
from monai_forget.memorisation.feature import as_probe_images, warn_if_in_distribution
from monai_forget.memorisation.name_decoys import faker_version
from monai_forget.memorisation.patient_references import unseen_references
from monai_forget.memorisation.pipeline import PipelineProbes
from monai_forget.memorisation.reference_scan import check_reference_count, relative_to_each_set
from monai_forget.memorisation.roster import Roster, check_names, read_roster
from monai_forget.memorisation.scan_config import (
    CORRECTIONS,
    LeakScanConfig,
    default_decoys,
    drawn_with,
    truetype,
)
from monai_forget.memorisation.scan_models import ScanModels, texts_by_kind
from monai_forget.memorisation.scan_passes import ScanCheckpoint
from monai_forget.memorisation.scan_result import (
    EVIDENCE,
    NO_EVIDENCE,
    UNDECIDED,
    DecoyNull,
    LeakScanResult,
    NameResult,
)
from monai_forget.memorisation.sequential import (
    lower_bound,
    needed_decoys,
    sequential_decoy_test,
    settling_level,
)
from monai_forget.memorisation.significance import one_tailed_test
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


def _unseen(names, references, reference_patients, name_patients) -> list[tuple[int, ...]]:
    """Per name, the references it is judged against: those that never saw its patient
    (references by patient), every one, or none."""
    if reference_patients is None and name_patients is None:
        return [tuple(range(len(references)))] * len(names)
    if reference_patients is None or name_patients is None:
        raise ValueError(
            "references by patient need both each reference's training patients and each "
            "roster name's patient (`reference_patients` and `patient_column`)"
        )
    if len(reference_patients) != len(references):
        raise ValueError(
            f"{len(reference_patients)} patient lists for {len(references)} reference models: "
            "give one list per reference model, in the same order"
        )
    return unseen_references(names, name_patients, reference_patients)


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
    if truetype(config) and pipeline is None:
        raise ValueError(
            "TrueType text is scanned where it is burned: pass the probes at acquisition "
            "resolution with the model's preprocessing (PipelineProbes; `bundle`)"
        )
    images = as_probe_images(probes if pipeline is None else pipeline.clean())
    grid = images.shape[-2:] if pipeline is None else pipeline.grid
    if name_patients is None:
        name_patients = getattr(names, "patients", None) if reference_patients else None
    unseen = _unseen(names, references, reference_patients, name_patients)
    names = check_names(names, config.position, drawn_with(config), grid)
    check_reference_count(len(references))
    saved = ScanCheckpoint(checkpoint) if checkpoint is not None else None
    decoy_seed = config.decoy_seed
    if decoy_seed is None:  # an interrupted scan resumes with its own decoys
        decoy_seed = saved.decoy_seed() if saved is not None else None
    decoy_seed = fresh_seed() if decoy_seed is None else int(decoy_seed)
    if training_data is not None:
        warn_if_in_distribution(images, training_data)
    by_patient = bool(reference_patients)
    sequential = config.sequential(len(references))
    # 1. texts: the names, and decoys of each kind of name; 2. every text on every model
    features, decoy_texts = texts_by_kind(names, config, decoy_seed, len(references))
    scan = ScanModels.run(
        [model, *references], images, pipeline, names, features, decoy_texts, config,
        decoy_seed, saved, progress,
    )  # fmt: skip
    # 3. per set of references a name is judged against (one set, or none, unless the
    # references are by patient): every text's statistic and the references' mean
    judged = relative_to_each_set(scan.m(0), scan.reference_m(), scan.texts, len(names), unseen)
    nulls = _decoy_nulls(names, unseen, judged, scan, by_patient)
    # 4. each name ranked among its decoys, corrected over the roster
    rows = _ranked(names, unseen, judged, nulls, scan, config, by_patient, sequential)
    attribute = config.attribution and not references and not truetype(config)
    flagged = [r.name for r in rows if r.significant]
    attributions = ()
    if attribute and len(flagged) > 1:
        attributions = attribute_flags(
            flagged, scan.m_of, roster=names, alpha=config.alpha,
            correction=config.correction, seed=decoy_seed, scale=drawn_with(config),
        )  # fmt: skip
    best = _warn_short_decoys(names, scan.available, config)
    # 5. what the result records
    settings, provenance = _records(
        config, scan, decoy_seed, len(names), len(references), by_patient, attribute, best
    )
    settings["sequential_decoys"] = sequential
    if sequential:
        settings["exceedances"] = int(config.exceedances)
    return LeakScanResult(
        rows, config.test, config.correction, float(config.alpha), len(images),
        tuple(nulls.values()), settings, provenance, attributions,
    )  # fmt: skip


def _records(
    config: LeakScanConfig,
    scan: ScanModels,
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
        "scale": None if truetype(config) else int(config.scale),
        "value": config.value,
        **({"typeface": TYPEFACE} if not truetype(config) else config.lettering.record()),
        "statistic": scan.statistic,
        "grid": "model input" if scan.pipeline is None else scan.pipeline.describe(),
        "path": "model grid" if scan.pipeline is None else "pipeline",
        "input_shape": [int(x) for x in scan.images.shape[-2:]],
        "random_feature": config.random_feature,
        "decoys_per_kind": config.decoys_for(n_names, n_references),
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


Judged = dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]]


def _decoy_nulls(
    names: Sequence[str],
    unseen: Sequence[tuple[int, ...]],
    judged: Judged,
    scan: ScanModels,
    by_patient: bool,
) -> dict[tuple[str, tuple[int, ...]], DecoyNull]:
    """Per (kind of name, set of references): the scored decoys' statistic, in the order
    scored, read-only."""
    null_of: dict[tuple[str, tuple[int, ...]], DecoyNull] = {}
    for name, subset in zip(names, unseen, strict=True):
        template = decoy_template(name)
        if (template, subset) not in null_of:
            scored = scan.decoy_slice(template)
            m = judged[subset][0][scored].copy()
            m.flags.writeable = False
            labelled = subset if by_patient else ()
            texts = tuple(scan.texts[scored])
            null_of[template, subset] = DecoyNull(template, texts, m, labelled)
    return null_of


def _ranked(
    names: Sequence[str],
    unseen: Sequence[tuple[int, ...]],
    judged: Judged,
    null_of: dict[tuple[str, tuple[int, ...]], DecoyNull],
    scan: ScanModels,
    config: LeakScanConfig,
    by_patient: bool,
    sequential: bool,
) -> tuple[NameResult, ...]:
    """Each name's calibrated test among its decoys (sequential: Besag & Clifford's p over
    its kind's stream; and the paper's test beside), corrected over the roster, ranked by
    p (ties: larger M first); an unflagged name is "no evidence" or "undecided"
    (:mod:`~monai_forget.memorisation.sequential`)."""
    statistic = np.array([judged[u][0][i] for i, u in enumerate(unseen)])
    m_refs = np.array([judged[u][1][i] for i, u in enumerate(unseen)])
    per_name = []
    for i, name in enumerate(names):
        template = decoy_template(name)
        dr = scan.controls[0][1][template]
        null = null_of[template, unseen[i]].m
        calibrated = (
            sequential_decoy_test(statistic[i], null, config.exceedances)
            if sequential
            else decoy_test(statistic[i], null)
        )
        row = scan.passes.name_rows[i]
        per_name.append((calibrated, one_tailed_test(row, dr, config.test), dr.mean()))
    pvalues = np.array([c.pvalue for c, _, _ in per_name])
    correct = {"bh": benjamini_hochberg, "bonferroni": bonferroni}.get(config.correction, np.copy)
    adjusted = correct(pvalues)
    m_all = np.array([c.statistic for c, _, _ in per_name])
    level = settling_level(
        config.correction, config.alpha, len(names), int(np.sum(adjusted < config.alpha))
    )
    available = scan.available
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
            decision=_decision(per_name[i][0], bool(adjusted[i] < config.alpha), level),
            max_decoys=available[decoy_template(names[i])],
            decoys_needed=_needed(per_name[i][0], bool(adjusted[i] < config.alpha), level),
            test_statistic=float(per_name[i][1].statistic),
            test_pvalue=float(per_name[i][1].pvalue),
            mean_d_unique=float(mean_d[i]),
            mean_d_random=float(per_name[i][2]),
            m_references=float(m_refs[i]),
            references=unseen[i] if by_patient else (),
        )
        for rank, i in enumerate(order, start=1)
    )


def _decision(calibrated: DecoyTest, flagged: bool, level: float) -> str:
    """Evidence, or, unflagged, whether more decoys could flag the name: undecided while
    the lower bound of its exceedance probability is at or below ``level``."""
    if flagged:
        return EVIDENCE
    g, n = calibrated.rank - 1, calibrated.n_decoys
    return UNDECIDED if lower_bound(g, n) <= level else NO_EVIDENCE


def _needed(calibrated: DecoyTest, flagged: bool, level: float) -> int:
    """For an undecided name, the decoys with which it could reach ``level``; else 0."""
    if _decision(calibrated, flagged, level) != UNDECIDED:
        return 0
    return needed_decoys(calibrated.rank - 1, level)


def _warn_short_decoys(
    names: Sequence[str], available: dict[str, int], config: LeakScanConfig
) -> float:
    """Warn where a kind of name has too few decoys for any name of it to reach alpha;
    return the smallest adjusted p any name could reach (that of the kind with the most
    decoys)."""
    factor = len(names) if config.correction in ("bh", "bonferroni") else 1
    best = min(1.0, factor / (max(available.values()) + 1))
    short = {t: n for t, n in available.items() if factor / (n + 1) >= config.alpha}
    if short:
        # name decoys run short for short names (e.g. about 500 of 3 letters): say which
        kinds = ", ".join(f"{t} ({n} decoys)" for t, n in short.items())
        every = len(short) == len(available)
        smallest = min(1.0, factor / (min(short.values()) + 1))
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
