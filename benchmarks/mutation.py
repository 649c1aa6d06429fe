"""Mutation testing of the decision modules: does some test fail when a decision is wrong?

Each mutant changes one decision of the code (a comparison flipped, a bound dropped, an
off-by-one, a numerator and a denominator swapped: the mistakes a reviewer would fear),
in a copy of the repository, and runs the test files that cover that module. A mutant is
killed when those tests fail; the first failing test is named, run again alone against the
mutant (a kill counts as "killed" only if it kills it alone), and its tier (quick or
slow) marked. The mutants are written by hand, where each decision is made, so every one
of them is a wrong program (none is an equivalent rewrite).

Run before a stop that changes a decision module (all 126: about 75 minutes on 2 cores;
``--only`` for the mutants of the module changed)::

    python benchmarks/mutation.py --out benchmarks/results/mutation.md
    python benchmarks/mutation.py --only refmodel   # the mutants whose name has "refmodel"
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _markdown import log, say, write

REPO = Path(__file__).resolve().parents[1]
COPIED = ("monai_forget", "tests", "bundles", "pyproject.toml", "README.md", "docs", "benchmarks")


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


#: A mutant's tests run in both tiers (the quick tier alone is pytest's default).
BOTH_TIERS = ("-m", "slow or not slow")
LEAK_REPORT_TESTS = ("tests/test_leak_scan_report_reach.py",)
REFMODEL_TESTS = ("tests/test_audit_refmodel.py", "tests/test_remembered_share.py")
GATE_TESTS = ("tests/test_bundles.py",)
EMA_TESTS = ("tests/test_audit_ema.py", "tests/test_audit_ema_sources.py")
PATIENT_REFERENCE_TESTS = "tests/test_leak_scan_patient_references.py"
PROTOCOL_TESTS = ("tests/test_auditor_protocol.py",)
MUTANTS = (
    # legibility at the model input, sequential decoys, reports of their own path (issue 65)
    Mutant(
        "legibility: a capital just short of the height called legible",
        "monai_forget/canary/legibility.py",
        "        if self.cap_height < MIN_CAP_HEIGHT:",
        "        if self.cap_height < MIN_CAP_HEIGHT - 0.5:",
        ("tests/test_canary_legibility.py",),
    ),
    Mutant(
        "legibility: the shape's correlation over the ink only (no gaps)",
        "monai_forget/canary/legibility.py",
        "    reached = (to_rows @ box @ to_cols.T) > 0",
        "    reached = drawn > 0",
        ("tests/test_canary_legibility.py",),
    ),
    Mutant(
        "legibility: an illegible canary planted without being allowed",
        "monai_forget/dicom/legible.py",
        "        if illegible and not self.allow_illegible:",
        "        if illegible and self.allow_illegible:",
        ("tests/test_canary_legibility.py",),
    ),
    Mutant(
        "sequential decoys: p once h decoys reach the name off by one",
        "monai_forget/memorisation/sequential.py",
        "    p = h / followed if g == h else (g + 1) / (followed + 1)",
        "    p = h / (followed + 1) if g == h else (g + 1) / (followed + 1)",
        ("tests/test_leak_scan_sequential.py",),
    ),
    Mutant(
        "sequential decoys: an unflagged name never undecided",
        "monai_forget/memorisation/leak_scan.py",
        "    return UNDECIDED if lower_bound(g, n) <= level else NO_EVIDENCE",
        "    return NO_EVIDENCE",
        ("tests/test_leak_scan_sequential.py",),
    ),
    Mutant(
        "sequential decoys: an unflagged name always undecided",
        "monai_forget/memorisation/leak_scan.py",
        "    return UNDECIDED if lower_bound(g, n) <= level else NO_EVIDENCE",
        "    return UNDECIDED",
        ("tests/test_leak_scan_sequential.py",),
    ),
    Mutant(
        "sequential decoys: a stream never stops early",
        "monai_forget/memorisation/scan_models.py",
        "np.count_nonzero(decoys >= passes.means[0, i]) >= h for",
        "np.count_nonzero(decoys >= passes.means[0, i]) > len(decoys) for",
        ("tests/test_leak_scan_sequential.py",),
    ),
    Mutant(
        "leak-scan report: a row of another path quoted",
        "monai_forget/memorisation/report.py",
        '        and row["path"] == path\n',
        "",
        ("tests/test_leak_scan_report_path.py",),
    ),
    Mutant(
        "leak-scan report: a row of another input size quoted",
        "monai_forget/memorisation/report.py",
        "        and tuple(input_shape) == (size, size)\n",
        "",
        ("tests/test_leak_scan_report_path.py",),
    ),
    Mutant(
        "exposure: no evidence without the planted files in the training set",
        "monai_forget/memorisation/exposure.py",
        "            if not self.training.complete:",
        "            if False:",
        ("tests/test_canary_exposure.py",),
    ),
    Mutant(
        "scan: a font that is not the manifest's accepted",
        "monai_forget/dicom/manifest.py",
        "    if (font is not None and font != burned_font) or (",
        "    if (font is not None and font == burned_font) or (",
        ("tests/test_leak_scan_report_path.py",),
    ),
    # issue 65, item 5: a bundle read at the size its model was trained at
    Mutant(
        "bundle parameters: --bundle-set ignored",
        "monai_forget/memorisation/preprocessing.py",
        "            parser[key] = value\n",
        "",
        ("tests/test_bundle_set.py",),
    ),
    Mutant(
        "bundle parameters: a scan at another model input than the canary's accepted",
        "monai_forget/dicom/manifest.py",
        "    if measured is None or tuple(measured[-2:]) == tuple(input_shape[-2:]):",
        "    if measured is None or tuple(measured[-2:]) != tuple(input_shape[-2:]):",
        ("tests/test_bundle_set.py",),
    ),
    # issue 66, item 2: copies in D_Q are one sample
    Mutant(
        "copies: a correlation equal to the threshold not a near copy",
        "monai_forget/audit/duplicates.py",
        "rows, cols = np.nonzero(r >= threshold)",
        "rows, cols = np.nonzero(r > threshold)",
        ("tests/test_audit_duplicates.py",),
    ),
    Mutant(
        "copies: the shadow auditors decide on D_Q as given",
        "monai_forget/audit/auditors.py",
        "        query = self.query_collapsed_.distinct\n        check_disjoint(",
        "        check_disjoint(",
        ("tests/test_audit_duplicates.py",),
    ),
    Mutant(
        "copies: the reference-model auditor decides on D_Q as given",
        "monai_forget/audit/refmodel_auditor.py",
        "        query = self.query_collapsed_.distinct\n",
        "",
        ("tests/test_audit_duplicates.py",),
    ),
    Mutant(
        "copies: the handlers count the copies the audit collapsed",
        "monai_forget/metrics/query_check.py",
        "        keep = first & np.isin(evaluated, self.decided)",
        "        keep = np.isin(evaluated, self.expected)",
        ("tests/test_handlers_data_check.py",),
    ),
    # issue 66, item 4: a bound that reads 100 % bounds nothing
    Mutant(
        "reports: a bound of 100 % or more read as a bound",
        "monai_forget/audit/result.py",
        '    return None if bound in ("any share", "100%") else bound',
        '    return None if bound == "any share" else bound',
        ("tests/test_remembered_share.py",),
    ),
    # one auditor protocol: every route to a reference-model audit (issue 52)
    Mutant(
        "protocol: the target's accuracy not passed with its outputs",
        "monai_forget/audit/refmodel_reference.py",
        "            float(np.mean(nonmembers.probs.argmax(1) == nonmembers.labels)),\n",
        '            float("nan"),\n',
        PROTOCOL_TESTS,
    ),
    Mutant(
        "protocol: the target's accuracy on the known members, not the non-members",
        "monai_forget/audit/refmodel_reference.py",
        '        nonmembers = predictions["nonmembers"]\n',
        '        nonmembers = predictions["members"]\n',
        PROTOCOL_TESTS,
    ),
    Mutant(
        "sample check: a check's own hashes ignored for the reference's",
        "monai_forget/metrics/base.py",
        "        hashes = check.hashes if check.hashes is not None else audited\n",
        "        hashes = audited if audited is not None else check.hashes\n",
        ("tests/test_handlers_data_check.py", "tests/test_segmentation_scores.py"),
    ),
    Mutant(
        "sample check: extra samples always ignored",
        "monai_forget/metrics/base.py",
        "on_mismatch=check.on_mismatch, on_extra=check.on_extra,",
        'on_mismatch=check.on_mismatch, on_extra="ignore",',
        ("tests/test_handlers_data_check.py",),
    ),
    Mutant(
        "probe settings: any object taken as the seed",
        "monai_forget/memorisation/settings.py",
        "        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)):",
        "        if isinstance(self.seed, bool):",
        ("tests/test_memorisation_reference_test.py",),
    ),
    Mutant(
        "probe settings: the random controls drawn from another seed on the references",
        "monai_forget/memorisation/score.py",
        "probe_outputs(r, probes, feature, settings) for r in references",
        "probe_outputs(r, probes, feature, replace(settings, seed=settings.seed + 1))"
        " for r in references",
        ("tests/test_memorisation_reference_test.py",),
    ),
    Mutant(
        "protocol: a saved reference loses the auditor's seed",
        "monai_forget/audit/refmodel_reference.py",
        '            seed=int(data.get("seed", 0)),\n',
        "",
        PROTOCOL_TESTS,
    ),
    # the reference-model auditor's decision (audit/refmodel.py)
    Mutant(
        "refmodel: p < alpha instead of <=",
        "monai_forget/audit/refmodel.py",
        "    if test.pvalue <= alpha:",
        "    if test.pvalue < alpha:",
        REFMODEL_TESTS,
    ),
    Mutant(
        "refmodel: members' effect >= 0 instead of > 0",
        "monai_forget/audit/refmodel.py",
        "test.member_effect_low > 0 else",
        "test.member_effect_low >= 0 else",
        REFMODEL_TESTS,
    ),
    Mutant(
        "refmodel: bound <= margin instead of <",
        "monai_forget/audit/refmodel.py",
        "if test.share_upper < test.margin:",
        "if test.share_upper <= test.margin:",
        REFMODEL_TESTS,
    ),
    Mutant(
        "refmodel: bound dropped (forgotten whenever p > alpha)",
        "monai_forget/audit/refmodel.py",
        "if test.share_upper < test.margin:",
        "if True:",
        REFMODEL_TESTS,
    ),
    Mutant(
        "refmodel: shift check ignored",
        "monai_forget/audit/refmodel.py",
        "    if shift is not None and shift.shifted:\n        return INCONCLUSIVE",
        "    if False:\n        return INCONCLUSIVE",
        REFMODEL_TESTS,
    ),
    Mutant(
        "refmodel: shift only when both comparisons shift",
        "monai_forget/audit/shift_check.py",
        "return min(self.pvalue_query, self.pvalue_members) < self.level",
        "return max(self.pvalue_query, self.pvalue_members) < self.level",
        REFMODEL_TESTS,
    ),
    Mutant(
        "refmodel: shift features compared without centring within labels",
        "monai_forget/audit/shift_check.py",
        "    if labels is not None:\n        centred",
        "    if False:\n        centred",
        REFMODEL_TESTS,
    ),
    Mutant(
        "refmodel: shift check on column 0 only (Hotelling dropped)",
        "monai_forget/audit/shift_check.py",
        "return float(min(1.0, 2 * min(ks, t2)))",
        "return float(min(1.0, 2 * ks))",
        REFMODEL_TESTS,
    ),
    Mutant(
        "refmodel: Hotelling's F with a wrong denominator degree of freedom",
        "monai_forget/audit/shift_check.py",
        "t2 * dof / (f * (n_a + n_b - 2)), f, dof",
        "t2 * dof / (f * (n_a + n_b - 2)), f, dof + 50",
        REFMODEL_TESTS,
    ),
    Mutant(
        "refmodel: Hotelling without the query's covariance",
        "monai_forget/audit/shift_check.py",
        "(n_a - 1) * np.atleast_2d(np.cov(a, rowvar=False))",
        "(n_a - 1) * np.eye(f)",
        REFMODEL_TESTS,
    ),
    Mutant(
        "refmodel: class profile kept for two classes",
        "monai_forget/audit/shift_check.py",
        "np.shape(probs)[-1] > 2",
        "np.shape(probs)[-1] >= 2",
        REFMODEL_TESTS,
    ),
    Mutant(
        "refmodel: RMIA's offline coefficients swapped",
        "monai_forget/audit/refmodel.py",
        "marginal = (1 + a) / 2 * reference_p_mean + (1 - a) / 2",
        "marginal = (1 - a) / 2 * reference_p_mean + (1 + a) / 2",
        REFMODEL_TESTS,
    ),
    Mutant(
        "refmodel: RMIA ratio inverted",
        "monai_forget/audit/refmodel.py",
        "return np.log(np.maximum(target_p, _TINY)) - np.log(np.maximum(marginal, _TINY))",
        "return np.log(np.maximum(marginal, _TINY)) - np.log(np.maximum(target_p, _TINY))",
        REFMODEL_TESTS,
    ),
    # the bound and the powers (audit/remembered_share.py)
    Mutant(
        "share: two-sided quantile (alpha / 2)",
        "monai_forget/audit/remembered_share.py",
        "z2 = float(scipy.stats.norm.ppf(1 - alpha)) ** 2",
        "z2 = float(scipy.stats.norm.ppf(1 - alpha / 2)) ** 2",
        REFMODEL_TESTS,
    ),
    Mutant(
        "share: the smaller root",
        "monai_forget/audit/remembered_share.py",
        "return ShareBound(estimate, max(roots), alpha)",
        "return ShareBound(estimate, min(roots), alpha)",
        REFMODEL_TESTS,
    ),
    Mutant(
        "share: the larger root of each quadratic replaced by the smaller",
        "monai_forget/audit/remembered_share.py",
        "roots.append((-lin + math.sqrt(disc)) / (2 * quad))",
        "roots.append((-lin - math.sqrt(disc)) / (2 * quad))",
        REFMODEL_TESTS,
    ),
    Mutant(
        "share: mixture variance without the between-component term",
        "monai_forget/audit/remembered_share.py",
        "share * self.member_var + (1 - share) * self.nonmember_var + share * (1 - share) * d * d",
        "share * self.member_var + (1 - share) * self.nonmember_var",
        REFMODEL_TESTS,
    ),
    Mutant(
        "share: unbounded case not detected (quad sign)",
        "monai_forget/audit/remembered_share.py",
        "        if d <= 0 or quad <= 0:\n            return ShareBound(estimate, math.inf, alpha)",
        "        if d == 0:\n            return ShareBound(estimate, math.inf, alpha)",
        REFMODEL_TESTS,
    ),
    Mutant(
        "power: forgetting power with the members' spread",
        "monai_forget/audit/remembered_share.py",
        "spread = math.sqrt(known.nonmember_var / n_query + (1 - margin) ** 2 * c_n",
        "spread = math.sqrt(known.member_var / n_query + (1 - margin) ** 2 * c_n",
        REFMODEL_TESTS,
    ),
    Mutant(
        "power: detection threshold with the members' spread",
        "monai_forget/audit/remembered_share.py",
        "threshold = z * math.sqrt(known.nonmember_var * (1 / n_query + 1 / n_n))",
        "threshold = z * math.sqrt(known.member_var * (1 / n_query + 1 / n_n))",
        REFMODEL_TESTS,
    ),
    Mutant(
        "members' effect: upper instead of lower bound",
        "monai_forget/audit/remembered_share.py",
        "return self.effect - float(scipy.stats.norm.ppf(level)) * se",
        "return self.effect + float(scipy.stats.norm.ppf(level)) * se",
        REFMODEL_TESTS,
    ),
    # the permutation test and the cross-fitted map (audit/refmodel_calibration.py)
    Mutant(
        "permutation p without its +1",
        "monai_forget/audit/refmodel_calibration.py",
        "return float((1 + np.sum(resampled >= observed - tolerance)) / (1 + n_resamples))",
        "return float(np.sum(resampled >= observed - tolerance) / n_resamples)",
        REFMODEL_TESTS,
    ),
    Mutant(
        "map: known samples mapped in fold (no cross-fitting)",
        "monai_forget/audit/refmodel_calibration.py",
        "m_maps, n_maps = 1 - m_folds, 1 - n_folds",
        "m_maps, n_maps = m_folds, n_folds",
        REFMODEL_TESTS,
    ),
    # the compliance gate (handlers/compliance.py)
    Mutant(
        "gate: bound <= margin passes",
        "monai_forget/handlers/compliance.py",
        "upper < self.margin",
        "upper <= self.margin",
        GATE_TESTS,
    ),
    Mutant(
        "gate: the audit's own decision ignored",
        "monai_forget/handlers/compliance.py",
        "ok = audit_says and upper < self.margin",
        "ok = upper < self.margin",
        GATE_TESTS,
    ),
    Mutant(
        "gate: p = alpha passes",
        "monai_forget/handlers/compliance.py",
        "if p <= self.refmodel_alpha:\n                    return NOT_FORGOTTEN",
        "if p < self.refmodel_alpha:\n                    return NOT_FORGOTTEN",
        GATE_TESTS,
    ),
    # the papers' rules (audit/ks.py, audit/ema.py)
    Mutant(
        "K-S: rho > 1 instead of >= 1",
        "monai_forget/audit/ks.py",
        "return FORGOTTEN if rho >= 1.0 else NOT_FORGOTTEN",
        "return FORGOTTEN if rho > 1.0 else NOT_FORGOTTEN",
        ("tests/test_audit_ks.py",),
    ),
    Mutant(
        "EMA: rho < alpha instead of <=",
        "monai_forget/audit/ema.py",
        "return FORGOTTEN if pvalue <= alpha else NOT_FORGOTTEN",
        "return FORGOTTEN if pvalue < alpha else NOT_FORGOTTEN",
        EMA_TESTS,
    ),
    Mutant(
        "EMA: threshold > instead of >=",
        "monai_forget/audit/ema.py",
        "member |= scores[metric] >= per_class[cls]",
        "member |= scores[metric] > per_class[cls]",
        EMA_TESTS,
    ),
    # unique-feature memorisation (memorisation/decoys.py, reference_test.py)
    Mutant(
        "decoys: ties counted for the name",
        "monai_forget/memorisation/decoys.py",
        "rank = 1 + int(np.count_nonzero(d >= m))",
        "rank = 1 + int(np.count_nonzero(d > m))",
        ("tests/test_memorisation_decoys.py",),
    ),
    Mutant(
        "decoys: p = rank / n (off by one)",
        "monai_forget/memorisation/decoys.py",
        "return DecoyTest(m, n, rank, rank / (n + 1),",
        "return DecoyTest(m, n, rank, rank / n,",
        ("tests/test_memorisation_decoys.py",),
    ),
    Mutant(
        "name decoys: the roster not excluded",
        "monai_forget/memorisation/decoys.py",
        "return draw_distinct(choices, n, rng, compose, lambda text: key(text) not in excluded)",
        "return draw_distinct(choices, n, rng, compose, lambda text: True)",
        ("tests/test_memorisation_decoys.py",),
    ),
    Mutant(
        "name decoys: the run's letter case ignored",
        "monai_forget/memorisation/name_decoys.py",
        'return "".join(c if k == "A" else c.lower() for c, k in zip(name, run, strict=True))',
        "return name",
        ("tests/test_memorisation_decoys.py",),
    ),
    Mutant(
        "decoys: every text of a kind when the excluded ones merely outnumber n",
        "monai_forget/memorisation/decoys.py",
        "        if len(found) <= n:\n            return found",
        "        return found",
        ("tests/test_memorisation_decoys.py",),
    ),
    Mutant(
        "leak scan: random letters as the default decoys",
        "monai_forget/defaults.py",
        'LEAK_SCAN_DECOY_SOURCES: tuple[str, ...] = ("names", "letters")',
        'LEAK_SCAN_DECOY_SOURCES: tuple[str, ...] = ("letters", "names")',
        ("tests/test_benchmark_records.py", "tests/test_memorisation_scan.py"),
    ),
    Mutant(
        "leak scan: names drawn as letters whatever the source",
        "monai_forget/memorisation/scan_models.py",
        "source=config.decoy_source)",
        'source="letters")',
        ("tests/test_memorisation_scan.py",),
    ),
    Mutant(
        "leak scan: a kind short of decoys judged with > alpha",
        "monai_forget/memorisation/leak_scan.py",
        "short = {t: n for t, n in available.items() if factor / (n + 1) >= config.alpha}",
        "short = {t: n for t, n in available.items() if factor / (n + 1) > 2 * config.alpha}",
        ("tests/test_memorisation_scan.py",),
    ),
    Mutant(
        "checks: an interval's open lower end included (a margin or ratio of 0 accepted)",
        "monai_forget/checks.py",
        '        above = x >= self.low if self.closed in ("left", "both") else x > self.low',
        "        above = x >= self.low",
        ("tests/test_checks.py",),
    ),
    Mutant(
        "auditor registry: the renamed 'reference' accepted as refmodel",
        "monai_forget/auditor_registry.py",
        "        if kind.name == name:",
        "        if kind.name == RENAMED.get(name, name):",
        ("tests/test_auditor_registry.py",),
    ),
    Mutant(
        "hidden shift: the tolerance read with D_Q's scores lowered, not raised",
        "monai_forget/audit/hidden_shift.py",
        "        if not still_forgotten(q + shift * spread):",
        "        if not still_forgotten(q - shift * spread):",
        ("tests/test_hidden_shift.py",),
    ),
    Mutant(
        "hidden shift: the tolerance read on the raw scores, not the membership probabilities",
        "monai_forget/audit/refmodel.py",
        "    tolerance = hidden_shift_tolerance(q, n, still_forgotten)",
        "    tolerance = hidden_shift_tolerance(query, n, still_forgotten)",
        ("tests/test_hidden_shift.py",),
    ),
    Mutant(
        "hidden shift: the tolerance one grid step past the last forgotten",
        "monai_forget/audit/hidden_shift.py",
        "        tolerance = shift\n",
        "        tolerance = shift + TOLERANCE_STEP\n",
        ("tests/test_hidden_shift.py",),
    ),
    Mutant(
        "method equivalence: the method's own spread left out of the interval",
        "monai_forget/unlearning/method_equivalence.py",
        "    se = math.sqrt(m.var(ddof=1) / m.size + r.var(ddof=1) / r.size)",
        "    se = math.sqrt(r.var(ddof=1) / r.size)",
        ("tests/test_method_equivalence.py",),
    ),
    Mutant(
        "method equivalence: the larger sample's degrees of freedom",
        "monai_forget/unlearning/method_equivalence.py",
        "    return float(m.mean() - r.mean()), se, min(m.size, r.size) - 1",
        "    return float(m.mean() - r.mean()), se, max(m.size, r.size) - 1",
        ("tests/test_method_equivalence.py",),
    ),
    Mutant(
        "method equivalence: the runs' confidence elsewhere not read",
        "monai_forget/unlearning/method_equivalence.py",
        "equivalent=inside and not changed,",
        "equivalent=inside,",
        ("tests/test_method_equivalence.py",),
    ),
    Mutant(
        "method equivalence: the check elsewhere one-sided",
        "monai_forget/unlearning/method_equivalence.py",
        "elsewhere_pvalue = float(2 * scipy.stats.t.sf(abs(t), df))",
        "elsewhere_pvalue = float(scipy.stats.t.sf(abs(t), df))",
        ("tests/test_method_equivalence.py",),
    ),
    Mutant(
        "rates: the interval of a packaged rate not Wilson's",
        "monai_forget/rates.py",
        '.proportion_ci(0.95, method="wilson")',
        '.proportion_ci(0.95, method="exact")',
        ("tests/test_rates.py",),
    ),
    Mutant(
        "checks: a level of 1 accepted (leak scan, verdict, auditors, gate)",
        "monai_forget/checks.py",
        "LEVEL = Interval(0.0, 1.0)\n",
        'LEVEL = Interval(0.0, 1.0, "right")\n',
        ("tests/test_checks.py", "tests/test_memorisation_scan.py"),
    ),
    # leak scans against references by patient (memorisation/patient_references.py)
    Mutant(
        "patient references: each name against the references that saw its patient",
        "monai_forget/memorisation/patient_references.py",
        "if str(patient) not in patients)",
        "if str(patient) in patients)",
        (PATIENT_REFERENCE_TESTS,),
    ),
    Mutant(
        "patient references: every name against every reference",
        "monai_forget/memorisation/leak_scan.py",
        "    return unseen_references(names, name_patients, reference_patients)",
        "    return [tuple(range(len(references)))] * len(names)",
        (PATIENT_REFERENCE_TESTS,),
    ),
    Mutant(
        "patient references: decoys not taken relative to the name's references",
        "monai_forget/memorisation/leak_scan.py",
        "            m = judged[subset][0][scored].copy()",
        "            m = scan.m(0)[scored].copy()",
        (PATIENT_REFERENCE_TESTS,),
    ),
    Mutant(
        "patient references: IDs that match no list judged against every reference",
        "monai_forget/memorisation/patient_references.py",
        "    if absent and len(absent) == len(name_patients):",
        "    if False:",
        (PATIENT_REFERENCE_TESTS,),
    ),
    Mutant(
        "patient references: both models of a pair on the same half",
        "monai_forget/memorisation/patient_references.py",
        "        out += [first, frozenset(unique) - first]",
        "        out += [first, first]",
        (PATIENT_REFERENCE_TESTS,),
    ),
    Mutant(
        "audit plan: an unknown auditor accepted",
        "monai_forget/unlearning/evaluation.py",
        "            auditor_kind(name)  # refuses a renamed or unknown auditor, naming the "
        "choices",
        "            pass",
        ("tests/test_unlearning_scenario.py",),
    ),
    Mutant(
        "reference test: prediction interval without sqrt(1 + 1/n)",
        "monai_forget/memorisation/reference_test.py",
        "t = (float(m) - refs.mean()) / (refs.std(ddof=1) * np.sqrt(1 + 1 / n))",
        "t = (float(m) - refs.mean()) / refs.std(ddof=1)",
        ("tests/test_memorisation_reference_test.py",),
    ),
    Mutant(
        "reference test: rank p without its +1",
        "monai_forget/memorisation/reference_test.py",
        "rank_pvalue=(1 + int(np.count_nonzero(refs >= m))) / (1 + n),",
        "rank_pvalue=int(np.count_nonzero(refs >= m)) / n,",
        ("tests/test_memorisation_reference_test.py",),
    ),
    # Forsaken's forgetting rate (unlearning/rate.py)
    Mutant(
        "forgetting rate: A.R.R of the members",
        "monai_forget/unlearning/rate.py",
        "return self.false_after / (self.true_after + self.false_after)",
        "return self.true_after / (self.true_after + self.false_after)",
        ("tests/test_unlearning.py",),
    ),
    Mutant(
        "forgetting rate: B.R.R of the non-members",
        "monai_forget/unlearning/rate.py",
        "return self.true_before / (self.true_before + self.false_before)",
        "return self.false_before / (self.true_before + self.false_before)",
        ("tests/test_unlearning.py",),
    ),
    # Forsaken's stop at non-member confidence (unlearning/dummy_gradient.py)
    Mutant(
        "forsaken stop: bisection keeps the end above the target",
        "monai_forget/unlearning/dummy_gradient.py",
        "            if at_mid <= target:\n",
        "            if at_mid > target:\n",
        ("tests/test_unlearning.py",),
    ),
    Mutant(
        "forsaken stop: confidence measured at W_e, not W_e + step",
        "monai_forget/unlearning/dummy_gradient.py",
        "        params = base if step is None else {k: base[k] + scale * step[k] for k in base}\n",
        "        params = base\n",
        ("tests/test_unlearning.py",),
    ),
    # a late joiner and its removal from the checkpoint on FLARE (issue 53)
    *(
        Mutant(f"late joiner: {name}", path, old, new, tests)
        for name, path, old, new, tests in (
            (
                "trains one round after it joined",
                "monai_forget/fl/spec.py",
                "return self.first_round + job_round >= self.joined.get(client, 0)",
                "return self.first_round + job_round > self.joined.get(client, 0)",
                ("tests/test_fl_client.py",),
            ),
            (
                "default removal retrains from scratch",
                "monai_forget/fl/spec.py",
                'method = "checkpoint" if joined else "retrain"',
                'method = "retrain"',
                ("tests/test_fl_client.py",),
            ),
            (
                "seeds by the job's round, not the federation's",
                "monai_forget/fl/client.py",
                "federation_round = self.spec.schedule.first_round + current_round",
                "federation_round = current_round",
                ("tests/test_fl_client.py",),
            ),
            (
                "a result without weights refused",
                "monai_forget/fl/aggregator.py",
                "        if not model.params:  # no contribution: not joined yet, or left without "
                "a step\n            return\n",
                "",
                ("tests/test_fl_aggregator.py", *BOTH_TIERS),
            ),
            (
                "owes every round",
                "monai_forget/fl/job.py",
                "if schedule.trains(name, r)]",
                "]",
                ("tests/test_fl_aggregator.py", *BOTH_TIERS),
            ),
            (
                "retrained from the initial model",
                "monai_forget/unlearning/federaser.py",
                "kept = history.checkpoints[start] if start else history.initial",
                "kept = history.initial",
                ("tests/test_federaser.py",),
            ),
            (
                "the FLARE rerun seeded as the federation's round 0",
                "monai_forget/fl/erase.py",
                "schedule=Schedule(restart.start, restart.joined, restart.positions),",
                "schedule=Schedule(0, restart.joined, restart.positions),",
                ("tests/test_fl_federaser.py", *BOTH_TIERS),
            ),
        )
    ),
    # report outputs (io.py)
    Mutant(
        "report outputs: a file accepted as the folder",
        "monai_forget/io.py",
        "    if out.exists() and not out.is_dir():\n"
        '        raise ValueError(f"{out} is a file; pass a folder for the {what}")\n',
        "",
        ("tests/test_io.py",),
    ),
    # equivalence to retraining (unlearning/retrain_reference.py)
    *(
        Mutant(
            f"equivalence: {name}",
            "monai_forget/unlearning/retrain_reference.py",
            old,
            new,
            ("tests/test_retrain_reference.py",),
        )
        for name, old, new in (
            (
                "interval overlapping the margin passes",
                "inside = -margin < interval[0] and interval[1] < margin",
                "inside = interval[0] < margin and -margin < interval[1]",
            ),
            (
                "no interval (the point inside the margin passes)",
                "half = float(",
                "half = 0 * float(",
            ),
            (
                "two-sided quantile",
                "scipy.stats.t.ppf(1 - alpha, df=k - 1)",
                "scipy.stats.t.ppf(1 - alpha / 2, df=k - 1)",
            ),
            (
                "a model changed everywhere passes",
                "decision=EQUIVALENT if inside and not elsewhere else",
                "decision=EQUIVALENT if inside else",
            ),
            (
                "reference subtracted as one constant",
                "means = means - ref_k.mean(axis=1)",
                "means = means - ref_k.mean()",
            ),
            (
                "exact retraining judged against itself too",
                "others = np.arange(k) != i",
                "others = np.arange(k) >= 0",
            ),
            (
                "exact retraining's misses counted as passes",
                "found.retraining_passes += retrained.decision == EQUIVALENT",
                "found.retraining_passes += retrained.decision != EQUIVALENT",
            ),
        )
    ),
    # ACDC diagnosis features (acdc/features.py)
    Mutant(
        "features: RV/LV at ES divided by the LV at ED",
        "monai_forget/acdc/features.py",
        '"rv_lv_es": vol["ES", RV] / vol["ES", LV],',
        '"rv_lv_es": vol["ES", RV] / vol["ED", LV],',
        ("tests/test_acdc_diagnosis.py",),
    ),
    Mutant(
        "features: thickening inverted",
        "monai_forget/acdc/features.py",
        '"wall_thickening": mean_thick["ES"] / mean_thick["ED"],',
        '"wall_thickening": mean_thick["ED"] / mean_thick["ES"],',
        ("tests/test_acdc_diagnosis.py",),
    ),
    Mutant(
        "features: wall max at ES from the ED thickness",
        "monai_forget/acdc/features.py",
        '"wall_max_es": max(float(t.max()) for t in thick["ES"]) / diameter,',
        '"wall_max_es": max(float(t.max()) for t in thick["ED"]) / diameter,',
        ("tests/test_acdc_diagnosis.py",),
    ),
    Mutant(
        "features: myocardium ES/ED inverted",
        "monai_forget/acdc/features.py",
        '"myo_es_ed": vol["ES", MYO] / vol["ED", MYO],',
        '"myo_es_ed": vol["ED", MYO] / vol["ES", MYO],',
        ("tests/test_acdc_diagnosis.py",),
    ),
    Mutant(
        "features: thickness heterogeneity as std only",
        "monai_forget/acdc/features.py",
        '"wall_cv_ed": float(np.mean([t.std() / t.mean() for t in thick["ED"]])),',
        '"wall_cv_ed": float(np.mean([t.std() for t in thick["ED"]])),',
        ("tests/test_acdc_diagnosis.py",),
    ),
    # the reference-model auditor's online setting (audit/refmodel_*.py)
    Mutant(
        "online: RMIA's offline Pr(x) kept",
        "monai_forget/audit/refmodel_reference.py",
        'a = 1.0 if self.setting == "online" else RMIA_OFFLINE_A',
        "a = RMIA_OFFLINE_A",
        ("tests/test_refmodel_online.py",),
    ),
    Mutant(
        "online: both models of a pair on the same half",
        "monai_forget/audit/refmodel_auditor.py",
        "            sets.append(halves[k % 2])",
        "            sets.append(halves[0])",
        ("tests/test_refmodel_online.py",),
    ),
    Mutant(
        "online: the scored samples left out of the pool",
        "monai_forget/audit/refmodel_auditor.py",
        "models = self.reference_models(concat(population, scored) if online else population)",
        "models = self.reference_models(population)",
        ("tests/test_refmodel_online.py",),
    ),
    # the federation's checks and export (fl/)
    Mutant(
        "fl: the last round's update not required",
        "monai_forget/fl/job.py",
        "wanted = [r for r in range(min(last, rounds)) if",
        "wanted = [r for r in range(min(last, rounds) - 1) if",
        ("tests/test_fl_aggregator.py",),
    ),
    Mutant(
        "fl export: the job's data paths dropped",
        "monai_forget/fl/export.py",
        '{s: f"--data {data_paths[s]}" if s in data_paths else "" for s in sites}',
        '{s: "" for s in sites}',
        ("tests/test_fl_export.py",),
    ),
    # the leak scan's attribution of several flags and its report (memorisation/)
    Mutant(
        "attribution: decoys less like the other name",
        "monai_forget/memorisation/attribution.py",
        "near = likeness(drawn, given, scale) >= likeness([name], given, scale)[0]",
        "near = likeness(drawn, given, scale) <= likeness([name], given, scale)[0]",
        ("tests/test_leak_attribution.py",),
    ),
    Mutant(
        "attribution: ties counted for the name",
        "monai_forget/memorisation/attribution.py",
        "p = (1 + int(np.sum(m[1:] >= m[0]))) / (1 + len(texts))",
        "p = (1 + int(np.sum(m[1:] > m[0]))) / (1 + len(texts))",
        ("tests/test_leak_attribution.py",),
    ),
    Mutant(
        "attribution: an untested pair explains",
        "monai_forget/memorisation/attribution.py",
        "explained = p_adj is not None and p_adj >= alpha",
        "explained = p_adj is None or p_adj >= alpha",
        ("tests/test_leak_attribution.py",),
    ),
    Mutant(
        "attribution: every flag can be set aside",
        "monai_forget/memorisation/attribution.py",
        "return kept or list(flagged)",
        "return kept",
        ("tests/test_leak_attribution.py",),
    ),
    Mutant(
        "leak report: a series found in half the runs is not found",
        "monai_forget/memorisation/report.py",
        'if cell["images"] is None and rate >= FOUND_SHARE:',
        'if cell["images"] is None and rate > FOUND_SHARE:',
        ("tests/test_memorisation_scan.py",),
    ),
    Mutant(
        "audit report: an online audit quotes the offline cells",
        "monai_forget/audit/report.py",
        '        and r.get("setting", "offline") == setting\n',
        "",
        ("tests/test_result_report.py",),
    ),
    Mutant(
        "segmentation bundle: the best epoch so far forgotten on resume",
        "monai_forget/bundles/segmentation.py",
        '        self.tracking.load_state_dict(state["saved"])',
        "        return",
        ("tests/test_segmentation_bundle.py",),
    ),
    Mutant(
        "segmentation audit: a share bound without a significant member lead (bundle run)",
        "monai_forget/audit/remembered_share.py",
        "        if d <= 0 or quad <= 0:\n            return ShareBound(estimate, math.inf, alpha)",
        "        if d <= 0:\n            return ShareBound(estimate, math.inf, alpha)",
        ("tests/test_segmentation_bundle.py",),
    ),
    Mutant(
        "canary inject: a burn-in that changes no pixel reported as injected",
        "monai_forget/dicom/options.py",
        "        if count == 0:",
        "        if count < 0:",
        ("tests/test_dicom_refusals.py",),
    ),
    Mutant(
        "leak-scan report: a name whose smallest reachable p equals alpha counted reachable",
        "monai_forget/memorisation/scan_result.py",
        "if self.reachable_pvalue(r) >= self.alpha]",
        "if self.reachable_pvalue(r) > self.alpha]",
        LEAK_REPORT_TESTS,
    ),
    Mutant(
        "leak-scan report: reachable p off by one decoy",
        "monai_forget/memorisation/scan_result.py",
        "self.n_tests / (max(row.n_decoys, row.max_decoys) + 1)",
        "self.n_tests / max(row.n_decoys, row.max_decoys)",
        LEAK_REPORT_TESTS,
    ),
    Mutant(
        "leak-scan report: a p-value printed to 3 digits whatever alpha",
        "monai_forget/reporting.py",
        "        if (float(text) < alpha) == (p < alpha):",
        "        if True:",
        LEAK_REPORT_TESTS,
    ),
    Mutant(
        "leak scan through a pipeline: the box-local shortcut trusted unchecked",
        "monai_forget/memorisation/pipeline.py",
        "fast.shape != exact.shape or np.abs(fast - exact).max() > 1e-4 * scale",
        "False",
        ("tests/test_leak_scan_pipeline.py",),
    ),
    Mutant(
        "leak scan through a bundle: texts burned along the loaded axes, not the file's rows",
        "monai_forget/memorisation/pipeline.py",
        "        if not self.transposed:\n            return masks, position",
        "        if True:\n            return masks, position",
        ("tests/test_leak_scan_pipeline.py",),
    ),
    Mutant(
        "leak scan through a pipeline: the canary manifest's place ignored",
        "monai_forget/leak_scan_plan.py",
        '            position, scale = placement["position"], placement["scale"]',
        "            pass",
        ("tests/test_leak_scan_pipeline.py",),
    ),
    Mutant(
        "recipe: mixed precision allowed off CUDA",
        "monai_forget/shadow/recipes.py",
        'if self.amp and torch.device(device).type != "cuda":',
        "if False:",
        ("tests/test_shadow.py",),
    ),
    Mutant(
        "audit: a query set of blank frames decided",
        "monai_forget/audit/query_checks.py",
        "    if constant.mean() > OUTSIDE_SHARE:",
        "    if False:",
        ("tests/test_query_checks.py", "tests/test_cli_audit.py"),
    ),
    Mutant(
        "audit: a query set of another modality decided",
        "monai_forget/audit/query_checks.py",
        "    if share > OUTSIDE_SHARE:",
        "    if share > 1:",
        ("tests/test_query_checks.py", "tests/test_cli_audit.py"),
    ),
    Mutant(
        "audit: a reference model with the target's weights trusted",
        "monai_forget/audit/refmodel_auditor.py",
        "        refuse_target_as_reference(target, self.reference_models_)\n",
        "",
        ("tests/test_cache_entries.py",),
    ),
    Mutant(
        "leak scan: the class shift takes the class a text lowers most",
        "monai_forget/memorisation/statistics.py",
        "raised = delta.mean(axis=1).argmax(axis=1)",
        "raised = delta.mean(axis=1).argmin(axis=1)",
        ("tests/test_leak_scan_statistics.py",),
    ),
    Mutant(
        "memorisation score: the paper's test decides over the decoys",
        "monai_forget/memorisation/score.py",
        '        return self.deciding_pvalue < check_fraction("alpha", alpha)',
        '        return self.pvalue < check_fraction("alpha", alpha)',
        ("tests/test_memorisation_verdict.py",),
    ),
    Mutant(
        "handlers: the reference-model bound stored past 100 %",
        "monai_forget/handlers/evaluation_audits.py",
        '        upper = min(max(float(result.details["membership_strength_upper"]), 0.0), 1.0)',
        '        upper = float(result.details["membership_strength_upper"])',
        ("tests/test_handlers_data_check.py",),
    ),
    Mutant(
        "exposure: the pipeline memorises when every canary is flagged",
        "monai_forget/memorisation/exposure.py",
        "        return any(c.significant for c in self.canaries)",
        "        return all(c.significant for c in self.canaries)",
        ("tests/test_canary_exposure.py",),
    ),
    Mutant(
        "exposure: the extrapolation takes the lower tail",
        "monai_forget/memorisation/exposure.py",
        "    bits = -stats.skewnorm.logsf(np.asarray(score, dtype=np.float64), shape, loc, scale)",
        "    bits = -stats.skewnorm.logcdf(np.asarray(score, dtype=np.float64), shape, loc, scale)",
        ("tests/test_canary_exposure.py",),
    ),
    Mutant(
        "plant: two canaries may share a file",
        "monai_forget/dicom/plant.py",
        "        left[folder] = [p for i, p in enumerate(left[folder]) if i not in picks]\n",
        "",
        ("tests/test_canary_exposure.py",),
    ),
    Mutant(
        "lettering: coverage burns the full value wherever it is not zero",
        "monai_forget/canary/render.py",
        "    out = region.astype(np.float64) + coverage * (fill - region)",
        "    out = region.astype(np.float64) + (coverage > 0) * (fill - region)",
        ("tests/test_canary_lettering.py",),
    ),
    Mutant(
        "lettering: the scan burns coverage as a binary mask",
        "monai_forget/memorisation/pipeline.py",
        "        if masks.dtype != bool:  # ink coverage: composited, as the injector burns it",
        "        if False:",
        ("tests/test_canary_lettering.py",),
    ),
    Mutant(
        "audit: the bound read as a share of D_Q still remembered",
        "monai_forget/audit/result.py",
        "        f\"D_Q's membership strength at most {bound} of the known members' \"",
        '        f"at most {bound} of D_Q still remembered "',
        ("tests/test_remembered_share.py", "tests/test_handlers_data_check.py"),
    ),
    Mutant(
        "audit verify: a changed file counted as matching",
        "monai_forget/audit/verify.py",
        "        elif file_sha256(name) != digest:",
        "        elif False:",
        ("tests/test_audit_verify.py",),
    ),
    Mutant(
        "stats: the AUC's upper bound below the AUC",
        "monai_forget/stats.py",
        "min(1.0, a + float(scipy.stats.norm.ppf(1.0 - alpha))",
        "min(1.0, a - float(scipy.stats.norm.ppf(1.0 - alpha))",
        ("tests/test_stats.py", "tests/test_audit_refmodel.py"),
    ),
    Mutant(
        "exposure: the command ranks by M, not the measured class shift",
        "monai_forget/defaults.py",
        'EXPOSURE_STATISTIC = "class-shift"',
        'EXPOSURE_STATISTIC = "m"',
        ("tests/test_canary_exposure.py",),
    ),
    Mutant(
        "leak scan: M by default through the pipeline",
        "monai_forget/memorisation/scan_models.py",
        "config.statistic or (PIPELINE_STATISTIC if pipeline else STATISTICS[0])",
        "config.statistic or STATISTICS[0]",
        ("tests/test_leak_scan_statistics.py",),
    ),
    Mutant(
        "exposure: a caller's config without a statistic falls to the scan's default",
        "monai_forget/memorisation/exposure.py",
        "        statistic=config.statistic or EXPOSURE_STATISTIC,",
        "        statistic=config.statistic,",
        ("tests/test_canary_exposure.py",),
    ),
    Mutant(
        "audit: the no-memorisation finding printed although a bound exists",
        "monai_forget/audit/refmodel_reference.py",
        "    if not np.isfinite(test.share_upper):\n        if separability",
        "    if True:\n        if separability",
        ("tests/test_audit_refmodel.py", "tests/test_result_report.py"),
    ),
    Mutant(
        "plant: a space under 10^6 texts accepted",
        "monai_forget/dicom/plant.py",
        "    if size < MIN_SPACE_SIZE:",
        "    if size < 0:",
        ("tests/test_canary_exposure.py",),
    ),
    Mutant(
        "grouped training: the seeds handed to the wrong models",
        "monai_forget/shadow/grouped.py",
        "zip(sizes, seeds, strict=True)",
        "zip(sizes, seeds[::-1], strict=True)",
        ("tests/test_grouped_training.py",),
    ),
    Mutant(
        "grouped training: batch norm grouped",
        "monai_forget/shadow/grouped.py",
        "    if running:",
        "    if not running:",
        ("tests/test_grouped_training.py",),
    ),
    Mutant(
        "reference auditor: labels the target cannot output accepted",
        "monai_forget/audit/refmodel_auditor.py",
        '            check_labels_fit(target, {"query set D_Q": query, **known, **extra})',
        "            pass",
        ("tests/test_cli_errors.py",),
    ),
    Mutant(
        "federated withdrawal: the reference-model auditor allowed with 2 providers",
        "monai_forget/fl/run.py",
        "    if known and len(clients) < REFMODEL_MIN_PROVIDERS:",
        "    if known and len(clients) < 2:",
        ("tests/test_fl_simulator.py",),
    ),
    Mutant(
        "recipe: config code in network_args passed on",
        "monai_forget/recipe_files.py",
        "    if found:\n        raise ValueError(",
        "    if False:\n        raise ValueError(",
        ("tests/test_cli_errors.py",),
    ),
    Mutant(
        "ACDC export: an existing folder written into",
        "monai_forget/data_prep/acdc_dicom.py",
        "    if folder.exists() and not (folder.is_dir() and not any(folder.iterdir())):",
        "    if False:",
        ("tests/test_data_prep_acdc.py",),
    ),
    # issue 50: a withdrawn site that looks different; issue 52: the cache's lock files
    Mutant(
        "site shift: a forgotten decision quotes the same-source cells only",
        "monai_forget/audit/report.py",
        '            mine = [r for r in here if (r["share"] >= margin if kind == "forgotten"\n',
        '            mine = [r for r in here if (r["share"] >= margin and source == "same"'
        ' if kind == "forgotten"\n',
        ("tests/test_result_report.py",),
    ),
    Mutant(
        "report sentences: a rate above alpha not said to be uncontrolled",
        "monai_forget/audit/report.py",
        '                if worst[kind]["rate"] > alpha\n',
        '                if worst[kind]["rate"] > 2 * alpha\n',
        ("tests/test_result_report.py",),
    ),
    Mutant(
        "report sentences: a decision quotes the other error's rates",
        "monai_forget/audit/report.py",
        '    return {FORGOTTEN: ("forgotten",), NOT_FORGOTTEN: ("not_forgotten",)}.get(',
        '    return {FORGOTTEN: ("not_forgotten",), NOT_FORGOTTEN: ("forgotten",)}.get(',
        ("tests/test_result_report.py",),
    ),
    Mutant(
        "report sentences: the papers' false forgotten read on never-seen sets",
        "monai_forget/audit/report.py",
        '_PAPER_KINDS = {"forgotten": "members", "not_forgotten": "non-members"}',
        '_PAPER_KINDS = {"forgotten": "non-members", "not_forgotten": "members"}',
        ("tests/test_result_report.py",),
    ),
    Mutant(
        "site shift: an audit given the site quotes cells measured without it",
        "monai_forget/audit/report.py",
        '        and bool(r.get("site")) == site\n',
        "",
        ("tests/test_result_report.py",),
    ),
    Mutant(
        "site shift: both designs answer as the one without the site's images",
        "monai_forget/audit/refmodel.py",
        "    return first if first == second else INCONCLUSIVE",
        "    return first",
        ("tests/test_refmodel_online.py",),
    ),
    Mutant(
        "site shift: both designs' bound the lower of the two",
        "monai_forget/audit/refmodel_designs.py",
        "    wider = max((without, with_site),",
        "    wider = min((without, with_site),",
        ("tests/test_refmodel_online.py",),
    ),
    Mutant(
        "site shift: the site's images left out of the reference models' training",
        "monai_forget/audit/refmodel_auditor.py",
        "            population = concat(population, site)\n",
        "",
        ("tests/test_refmodel_online.py",),
    ),
    Mutant(
        "cli: a default of its own for EMA's test (the library's is Welch)",
        "monai_forget/cli/audit.py",
        '("--test", ("welch", "student"), defaults.EMA_TEST,',
        '("--test", ("welch", "student"), "student",',
        ("tests/test_cli_audit.py::test_the_command_line_and_the_python_api_decide_alike",),
    ),
    Mutant(
        "cache: lock files kept",
        "monai_forget/cache.py",
        "        lock.unlink(missing_ok=True)",
        "        pass",
        ("tests/test_cache_entries.py",),
    ),
    # FedEraser and retraining from a checkpoint (unlearning/federaser.py, fl/aggregator.py)
    Mutant(
        "federaser: the calibration update's own norm kept (no rescaling)",
        "monai_forget/unlearning/federaser.py",
        "        out[k] = v * (retained_norms[k] / norm) if norm > 0 else torch.zeros_like(v)",
        "        out[k] = v if norm > 0 else torch.zeros_like(v)",
        ("tests/test_federaser.py",),
    ),
    Mutant(
        "federaser: one norm over the whole model instead of per tensor",
        "monai_forget/unlearning/federaser.py",
        "        norm = torch.linalg.vector_norm(v)\n",
        "        norm = torch.linalg.vector_norm(\n"
        "            torch.cat([x.flatten() for x in calibration.values()])\n"
        "        )\n",
        ("tests/test_federaser.py",),
    ),
    Mutant(
        "federaser: round 0 calibrated like the others",
        "monai_forget/unlearning/federaser.py",
        "        if t == 0:  # computed from the initial model",
        "        if t < 0:  # computed from the initial model",
        ("tests/test_federaser.py",),
    ),
    Mutant(
        "federaser: the withdrawn site's round-0 update kept",
        "monai_forget/unlearning/federaser.py",
        "            new = first_round_model(history, clients)",
        "            new = first_round_model(history, list(history.norms[t]))",
        ("tests/test_federaser.py",),
    ),
    Mutant(
        "checkpoint: retrained from the checkpoint after the site joined",
        "monai_forget/unlearning/federaser.py",
        "    start = min(history.joined[n] for n in withdrawn)",
        "    start = min(history.joined[n] for n in withdrawn) + 1",
        ("tests/test_federaser.py",),
    ),
    Mutant(
        "fl federaser: a FLARE round calibrated to round 0's norms",
        "monai_forget/fl/aggregator.py",
        "        stands_for = self.retained[self._current_round()]",
        "        stands_for = 0",
        ("tests/test_fl_federaser.py", *BOTH_TIERS),
    ),
    # a POC deployment's leftovers and its admin login (fl/poc.py, processes.py)
    Mutant(
        "poc: a recorded process id stopped whatever its start time",
        "monai_forget/processes.py",
        '    return start_time(pid) == int(recorded["start"]) and _running(pid)',
        "    return _running(pid)",
        ("tests/test_fl_poc_shutdown.py",),
    ),
    Mutant(
        "poc: the admin's login timeout ignores the load",
        "monai_forget/fl/poc.py",
        "    return (30.0 + 2.0 * clients) * load_per_core(load, cores)",
        "    return 30.0 + 2.0 * clients",
        ("tests/test_fl_poc_shutdown.py",),
    ),
)


#: The scenario tests that decide with the reference-model auditor: run against an auditor
#: that always answers "inconclusive" (``--inconclusive-stub``), each must fail.
SCENARIO_TESTS = (
    "tests/test_demo.py",
    "tests/test_unlearning_scenario.py",
    "tests/test_segmentation_refmodel.py",
    "tests/test_cli_audit.py",
    "tests/test_handlers_data_check.py",
    "tests/test_audit_refmodel.py",
    "tests/test_bundles.py",
)
ALWAYS_INCONCLUSIVE = Mutant(
    "always inconclusive",
    "monai_forget/audit/refmodel.py",
    "    if shift is not None and shift.shifted:\n        return INCONCLUSIVE",
    "    return INCONCLUSIVE",
    SCENARIO_TESTS,
)


def stub_check(root: Path) -> list[tuple[str, str]]:
    """(test, outcome) of every scenario test against the always-inconclusive auditor."""
    path = root / ALWAYS_INCONCLUSIVE.path
    original = path.read_text()
    path.write_text(original.replace(ALWAYS_INCONCLUSIVE.old, ALWAYS_INCONCLUSIVE.new))
    try:
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-rA", "-n", "0", "-p", "no:cacheprovider",
             *BOTH_TIERS, *SCENARIO_TESTS],
            cwd=root, capture_output=True, text=True, env={**_env(), "PYTHONPATH": str(root)},
        )  # fmt: skip
    finally:
        path.write_text(original)
    out = []
    for line in result.stdout.splitlines():
        for outcome in ("PASSED", "FAILED", "ERROR", "SKIPPED"):
            if line.startswith(outcome + " "):
                out.append((line.split()[1], outcome))
    return out


def run_mutant(mutant: Mutant, root: Path, timeout: int) -> tuple[str, float, str]:
    """Apply ``mutant`` in the copy ``root``, run its tests until one fails, run that test
    alone against the mutant, restore the file. Returns the outcome, the seconds of the
    first run and the killing test (``""`` where none failed)."""
    path = root / mutant.path
    original = path.read_text()
    if mutant.old and original.count(mutant.old) != 1:
        return "not applied (the code changed: update the mutant)", 0.0, ""
    path.write_text(original.replace(mutant.old, mutant.new))
    start = time.perf_counter()
    killer = ""
    try:
        result = _pytest(root, ("-x", "-rfE", *mutant.tests), timeout)
        seconds = time.perf_counter() - start
        # exit 5: no test ran, which kills nothing
        outcome = "killed" if result.returncode not in (0, 5) else "SURVIVED"
        killer = _first_failure(result.stdout)
        if outcome == "killed" and killer:
            alone = _pytest(root, (killer,), timeout)
            if alone.returncode in (0, 5):
                outcome = "killed (not by the first failing test alone)"
    except subprocess.TimeoutExpired:
        outcome, seconds = "killed (timeout)", time.perf_counter() - start
    finally:
        path.write_text(original)
    return outcome, seconds, killer


def _pytest(root: Path, args: tuple[str, ...], timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
         *BOTH_TIERS, *args],
        cwd=root, capture_output=True, text=True, timeout=timeout,
        env={**_env(), "PYTHONPATH": str(root)},
    )  # fmt: skip


def _first_failure(stdout: str) -> str:
    """The node id of the first failed or erroring test in pytest's short summary."""
    summary = stdout.split("short test summary info", 1)[-1]
    for line in summary.splitlines():
        for outcome in ("FAILED ", "ERROR "):
            if line.startswith(outcome):
                return line[len(outcome) :].split(" - ")[0].strip()
    return ""


def quick_tier(root: Path, files: set[str]) -> set[str]:
    """The node ids of the quick tier (pytest's default ``-m "not slow"``) in ``files``
    (a mutant's own ``-m`` options are left out: they would select both tiers)."""
    paths = sorted(f for f in files if f.startswith("tests/"))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-p",
         "no:cacheprovider", *paths],
        cwd=root, capture_output=True, text=True, env={**_env(), "PYTHONPATH": str(root)},
    )  # fmt: skip
    return {line.strip() for line in done.stdout.splitlines() if "::" in line}


def _env() -> dict[str, str]:
    return {**os.environ, "MPLBACKEND": "Agg"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", help="run the mutants whose name contains this")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per mutant")
    parser.add_argument("--out", help="also write the markdown here")
    parser.add_argument(
        "--inconclusive-stub",
        action="store_true",
        help="also run the scenario tests against an auditor that always answers "
        '"inconclusive" and list which pass',
    )
    args = parser.parse_args(argv)
    mutants = [m for m in MUTANTS if args.only is None or args.only in m.name]
    baseline = Mutant("none (the code as it is)", mutants[0].path, "", "", ())
    rows = []
    with tempfile.TemporaryDirectory(prefix="monai-forget-mutation-") as tmp:
        root = Path(tmp)
        for name in COPIED:
            source = REPO / name
            if source.is_dir():
                shutil.copytree(source, root / name, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copyfile(source, root / name)
        tests = tuple(dict.fromkeys(t for m in mutants for t in m.tests))
        outcome, seconds, _ = run_mutant(dataclasses.replace(baseline, tests=tests), root, 3600)
        if outcome != "SURVIVED":  # the unmutated copy must pass, or every kill is void
            log(f"the tests fail on the unmutated copy ({outcome}); fix them first")
            return 2
        log(f"baseline: the tests pass on the unmutated copy ({seconds:.0f} s)")
        for mutant in mutants:
            outcome, seconds, killer = run_mutant(mutant, root, args.timeout)
            log(f"{outcome:>9}  {seconds:6.1f} s  {mutant.name}  {killer}")
            rows.append((mutant, outcome, seconds, killer))
        stub = stub_check(root) if args.inconclusive_stub else []
        quick = quick_tier(root, {t for m in mutants for t in m.tests})
    killed = sum(o.startswith("killed") for _, o, _, _ in rows)
    alone = sum(o == "killed" for _, o, _, _ in rows)
    by_quick = sum(o == "killed" and k in quick for _, o, _, k in rows)
    say("# Mutation testing of the decision modules")
    say()
    command = " ".join(sys.argv[1:] if argv is None else argv)
    share = 100 * killed / max(len(rows), 1)
    say(
        f"`python benchmarks/mutation.py {command}`: **{killed} of {len(rows)} mutants "
        f"killed** ({share:.0f} %), {alone} of them by a test that kills it alone; the "
        "unmutated copy passes the same tests first. Each mutant runs its tests (both "
        "tiers) until one fails (`-x`); that test is named, and run again by itself against "
        f"the mutant. The quick tier (`python -m pytest`) kills at least {by_quick} of "
        f"{len(rows)} ({100 * by_quick / max(len(rows), 1):.0f} %): those whose named test "
        "is a quick one (a mutant named by a slow test may still be killed by a quick one "
        "that ran later)."
    )
    say()
    say("| mutant | module | tests run | killed by (alone) | tier | outcome | seconds |")
    say("|---|---|---|---|---|---|---|")
    for mutant, outcome, seconds, killer in rows:
        tests = ", ".join(Path(t).name for t in mutant.tests)
        test = f"`{killer.removeprefix('tests/')}`" if killer else "-"
        tier = ("quick" if killer in quick else "slow") if killer else "-"
        say(f"| {mutant.name} | `{mutant.path}` | {tests} | {test} | {tier} | {outcome} "
            f"| {seconds:.0f} |")  # fmt: skip
    say()
    if stub:
        passed = [t for t, o in stub if o == "PASSED"]
        say('## Against an auditor that always answers "inconclusive"')
        say()
        say(f"The scenario tests ({', '.join(Path(t).name for t in SCENARIO_TESTS)}) with "
            f"`refmodel_decision` returning \"inconclusive\": {len(stub) - len(passed)} of "
            f"{len(stub)} tests fail. The ones that pass do not decide with the auditor "
            "(refusals, arithmetic, JSON round trips, the papers' auditors, the gate on given "
            "metrics), compare two runs of the same auditor (the handler against the offline "
            'audit), or expect "inconclusive" (a never-seen D_Q from another site):')  # fmt: skip
        say()
        for test in passed:
            say(f"- `{test}`")
        say()
    if args.out:
        write(args.out)
    return 0 if killed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
