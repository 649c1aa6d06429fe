"""The leak scan against reference models: one scan's p-values and outcome, shared by
``leak_scan_references.py`` and ``leak_scan_patient_references.py``."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _ufm_engine as ufm

from monai_forget.memorisation import LeakScanConfig, leak_scan
from monai_forget.memorisation.decoys import decoy_template, decoy_test
from monai_forget.stats import benjamini_hochberg


def scan_vector(
    model: torch.nn.Module, decoy_seed: int, seed: int, data: str = "mnist"
) -> tuple[list[str], list]:
    """Every text's M on one model (names first, then the decoys) and the texts, on the
    probes of ``data``'s models."""
    split = ufm.STATE["splits"][data]
    config = LeakScanConfig(decoy_seed=decoy_seed, seed=seed)
    res = leak_scan(model, split.probes, ufm.ROSTER, config)
    by_name = {r.name: r.m for r in res.rows}
    texts = list(ufm.ROSTER) + [t for n in res.nulls for t in n.texts]
    m = [by_name[n] for n in ufm.ROSTER] + [float(v) for n in res.nulls for v in n.m]
    return texts, m


def scanned(key: str, build, decoy_seed: int, seed: int, data: str = "mnist") -> dict:
    """A model's scan vector, from the cache or computed (``build`` returns the model
    and the name it carries; ``data``: whose probes)."""
    store = ufm.STATE["store"]
    record = store.get(key)
    if record is None or record["decoy_seed"] != decoy_seed:
        model, name = build()
        texts, m = scan_vector(model, decoy_seed, seed, data)
        record = {"texts": texts, "m": m, "name": name, "decoy_seed": decoy_seed}
        store.put(key, record)
    return record


def pvalues(statistic: np.ndarray, texts: list[str]) -> np.ndarray:
    """Each roster name's decoy p-value (ranked among the decoys of its kind)."""
    n = len(ufm.ROSTER)
    kinds = np.array([decoy_template(t) for t in texts])
    return np.array([
        decoy_test(statistic[i], statistic[n:][kinds[n:] == kinds[i]]).pvalue for i in range(n)
    ])  # fmt: skip


def outcome(p: np.ndarray, statistic: np.ndarray, name: str | None, alpha: float) -> dict:
    order = np.lexsort((-statistic[: len(p)], p))
    ranked = [ufm.ROSTER[i] for i in order]
    flagged = [ufm.ROSTER[i] for i, q in enumerate(benjamini_hochberg(p)) if q < alpha]
    return {
        "rank": ranked.index(name) + 1 if name else None,
        "flagged": flagged,
        "top": ranked[0],
    }
