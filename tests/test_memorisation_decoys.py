"""The calibrated test of M: decoys, the permutation p-value and exposure, its validity."""

from __future__ import annotations

import math
import string

import numpy as np
import pytest
import scipy.stats
import torch

from monai_forget.memorisation import (
    LeakScanConfig,
    UniqueFeature,
    decoy_template,
    decoy_test,
    default_decoys,
    draw_decoys,
    leak_scan,
    memorisation_score,
)
from monai_forget.memorisation.passes import predict_probs, text_divergences
from monai_forget.networks import MLP1

# --------------------------------------------------------------------------- p and exposure


def test_decoy_pvalue_hand_worked():
    # M = 0.5 among decoys 0.1, 0.5, 0.7, 0.2: two decoys reach it (0.5 ties, 0.7), so
    # rank 3 of 5 candidates, p = 3 / 5, exposure log2(5 / 3).
    t = decoy_test(0.5, [0.1, 0.5, 0.7, 0.2], ["B", "C", "D", "E"])
    assert (t.rank, t.n_decoys) == (3, 4)
    assert t.pvalue == pytest.approx(0.6)
    assert t.exposure == pytest.approx(math.log2(5 / 3))
    assert t.min_pvalue == pytest.approx(0.2)
    top = decoy_test(0.9, [0.1, 0.5, 0.7, 0.2])
    assert (top.rank, top.pvalue, top.exposure) == (1, 0.2, pytest.approx(math.log2(5)))
    bottom = decoy_test(-1.0, [0.1, 0.5, 0.7, 0.2])
    assert (bottom.rank, bottom.pvalue, bottom.exposure) == (5, 1.0, 0.0)
    assert t.to_dict(decoys=True)["decoys"] == ["B", "C", "D", "E"]
    for bad in ([], [0.1, float("nan")]):
        with pytest.raises(ValueError, match=r"decoy|NaN"):
            decoy_test(0.5, bad)


def test_decoy_pvalue_is_valid_under_exchangeability():
    """With the statistic and n decoys i.i.d., P(p <= k/(n+1)) = k/(n+1) exactly; with
    ties (a discrete statistic) the test only gets more conservative."""
    rng = np.random.default_rng(0)
    n, reps = 19, 20000
    draws = rng.gamma(0.5, size=(reps, n + 1))  # skewed, like KL divergences
    p = np.array([decoy_test(row[0], row[1:]).pvalue for row in draws])
    counts = np.bincount(np.rint(p * (n + 1)).astype(int), minlength=n + 2)[1:]
    assert scipy.stats.chisquare(counts).pvalue > 1e-3  # uniform on {1/20, ..., 1}
    for k in (1, 2, 5, 10):
        level = k / (n + 1)
        assert abs(np.mean(p <= level) - level) < 4 * math.sqrt(level * (1 - level) / reps)
    ties = rng.integers(0, 4, size=(reps, n + 1)).astype(float)
    p_ties = np.array([decoy_test(row[0], row[1:]).pvalue for row in ties])
    for level in (0.05, 0.1, 0.25, 0.5):
        assert np.mean(p_ties <= level) <= level + 4 * math.sqrt(level / reps)


def test_calibrated_p_on_a_model_is_uniform_when_the_name_is_a_decoy():
    """An untrained network and a 'name' drawn like its decoys: the name is exchangeable
    with them, so over many seeds the calibrated p is uniform."""
    torch.manual_seed(0)
    model = MLP1((1, 12, 12), 3, hidden=(16,)).eval()
    probes = np.random.default_rng(1).random((30, 1, 12, 12)).astype(np.float32)
    space = draw_decoys("AA", 676)  # every two-letter text, scored once
    clean = predict_probs(model, probes, "clean")
    mean_d = text_divergences(model, probes, clean, space, position=(1, 1)).mean(axis=1)
    m_of = dict(zip(space, mean_d, strict=True))  # M up to the shared random arm
    p = []
    for seed in range(2000):
        name = draw_decoys("AA", 1, seed)[0]
        decoys = draw_decoys("AA", 9, 10_000 + seed, exclude=[name])
        p.append(decoy_test(m_of[name], [m_of[t] for t in decoys]).pvalue)
    counts = np.bincount(np.rint(np.array(p) * 10).astype(int), minlength=11)[1:]
    assert scipy.stats.chisquare(counts).pvalue > 1e-3
    assert np.mean(np.array(p) <= 0.1) <= 0.1 + 4 * math.sqrt(0.09 / 2000)


def test_batched_text_divergences_equal_one_text_at_a_time(monkeypatch):
    """The scan's batched pass (texts grouped, one buffer reused, several batches) gives
    each text's d_u^i as stamping that text alone and running the model would (Eq. 1),
    computed here with scipy's relative entropy."""
    from scipy.special import rel_entr, softmax

    torch.manual_seed(0)
    from monai_forget.memorisation import passes

    model = MLP1((1, 12, 28), 3, hidden=(16,)).eval()
    probes = np.random.default_rng(2).random((23, 1, 12, 28)).astype(np.float32)
    texts = ["AB", "Q", "ZED", "AB C", "J", "XY"]
    clean = predict_probs(model, probes, "clean")
    monkeypatch.setattr(passes, "_GROUP_BYTES", 2 * probes[0].nbytes * len(probes))  # 2 texts
    batched = text_divergences(model, probes, clean, texts, position=(2, 1), batch_size=7)
    with torch.no_grad():
        base = softmax(model(torch.tensor(probes)).double().numpy(), axis=1)
    for text, row in zip(texts, batched, strict=True):
        stamped = UniqueFeature.from_text(text, position=(2, 1)).apply(probes)
        with torch.no_grad():
            probs = softmax(model(torch.tensor(stamped)).double().numpy(), axis=1)
        expected = rel_entr(base, probs).sum(axis=1)
        np.testing.assert_allclose(row, expected, rtol=1e-5, atol=1e-9)
    assert not np.allclose(batched[0], batched[1])  # different texts, different d_u
    with pytest.raises(ValueError, match="a text of 5 characters") as info:
        text_divergences(model, probes, clean, ["ANNAS"], position=(2, 1))
    assert "ANNAS" not in str(info.value)  # a roster name is not echoed


# --------------------------------------------------------------------------- decoys


def test_decoys_are_distinct_texts_of_the_same_kind_and_never_the_names():
    assert decoy_template("Anna O'Neil-2") == "Aaaa A'Aaaa-0"
    decoys = draw_decoys("Anna O'Neil-2", 500, 3, exclude=["Anna O'Neil-2"])
    assert len(set(decoys)) == 500 and "Anna O'Neil-2" not in decoys
    for text in decoys:
        assert decoy_template(text) == "Aaaa A'Aaaa-0"
    assert draw_decoys("ANNA", 50, 7) == draw_decoys("ANNA", 50, 7)
    assert draw_decoys("ANNA", 50, 7) != draw_decoys("ANNA", 50, 8)
    # Uniform letters: every capital letter about equally often.
    letters = "".join(draw_decoys("AAAA", 5000, 0))
    counts = [letters.count(c) for c in string.ascii_uppercase]
    assert scipy.stats.chisquare(counts).pvalue > 1e-3
    # A small space is enumerated: the 25 other letters for the paper's letter A.
    assert draw_decoys("A", 999, 0, exclude=["A"]) == list(string.ascii_uppercase[1:])
    roster = ["BOB", "EVE"]
    assert not set(draw_decoys("AAA", 20000, 0, exclude=roster)) & set(roster)
    with pytest.raises(ValueError, match="n >= 1"):
        draw_decoys("AAA", 0)


def test_score_ranks_a_known_letter_among_the_25_others():
    # A matched filter of 'A' at (1, 1): 'A' moves it more than any other letter.
    feature = UniqueFeature.from_text("A", (1, 1))
    template = np.zeros((12, 12), np.float32)
    template[1:6, 1:6] = np.where(feature.mask, 1.0, -1.0)
    model = MLP1((1, 12, 12), 2, hidden=(1,)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.head[1].weight[0] = torch.from_numpy(template.ravel())
        model.head[3].weight[0, 0] = 3.0
    probes = np.random.default_rng(0).random((40, 1, 12, 12)).astype(np.float32) * 0.2
    s = memorisation_score(model, probes, feature, decoys=999, decoy_seed=0)
    assert s.calibrated.n_decoys == 25 and s.calibrated.rank == 1
    assert s.calibrated.pvalue == pytest.approx(1 / 26)
    assert s.to_dict()["calibrated"]["decoy_seed"] == 0
    assert "calibrated (decoys): rank 1 of 26" in s.summary()
    plain = memorisation_score(model, probes, feature)  # no decoys: three passes only
    assert plain.calibrated is None and plain.m == s.m
    with pytest.raises(ValueError, match="decoys are texts"):
        memorisation_score(model, probes, UniqueFeature(feature.mask), decoys=5)


# --------------------------------------------------------------------------- scan settings


def test_default_decoys_let_one_name_reach_alpha():
    assert default_decoys(10, 0.05, "bh") == 999
    assert default_decoys(50, 0.05, "bh") == 1000
    assert default_decoys(50, 0.05, "none") == 999
    for m in (50, 1000):  # the smallest p, corrected over m names, is below alpha
        n = default_decoys(m, 0.05, "bonferroni")
        assert m / (n + 1) < 0.05


def test_scan_draws_fresh_decoys_per_scan_and_records_them():
    torch.manual_seed(0)
    model = MLP1((1, 12, 12), 3, hidden=(8,)).eval()
    probes = np.random.default_rng(1).random((20, 1, 12, 12)).astype(np.float32)
    names = ["AB", "CD", "Xy"]
    with pytest.warns(UserWarning, match="no name can reach"):
        a = leak_scan(model, probes, names, LeakScanConfig(decoys=20))
    with pytest.warns(UserWarning, match="no name can reach"):
        b = leak_scan(model, probes, names, LeakScanConfig(decoys=20))
    assert a.settings["decoy_seed"] != b.settings["decoy_seed"]  # fresh per scan
    record = a.to_dict()
    assert record["provenance"]["decoy_seed"] == a.settings["decoy_seed"]
    kinds = {d["template"]: d for d in record["decoys"]}
    assert set(kinds) == {"AA", "Aa"} and all(len(d["texts"]) == 20 for d in kinds.values())
    assert all(decoy_template(t) == "Aa" for t in kinds["Aa"]["texts"])
    with pytest.warns(UserWarning, match="no name can reach"):
        again = leak_scan(
            model, probes, names, LeakScanConfig(decoys=20, decoy_seed=a.settings["decoy_seed"])
        )
    assert [r.pvalue for r in again.rows] == [r.pvalue for r in a.rows]
    for r in a.rows:  # the p-value is the name's rank among its kind's decoys
        null = kinds[decoy_template(r.name)]["m"]
        assert r.decoys_at_or_above == sum(m >= r.m for m in null)
        assert r.pvalue == (1 + r.decoys_at_or_above) / 21
        assert r.exposure == pytest.approx(-math.log2(r.pvalue))


def _faker_names(length: int) -> set[str]:
    """Every A-Z name of ``length`` letters in Faker's person providers, read here
    independently of the package's pool."""
    import importlib

    from faker.config import AVAILABLE_LOCALES

    found = set()
    for locale in AVAILABLE_LOCALES:
        try:
            provider = importlib.import_module(f"faker.providers.person.{locale}").Provider
        except ModuleNotFoundError:
            continue
        for attribute in ("first_names", "first_names_male", "first_names_female", "last_names"):
            listed = provider.__dict__.get(attribute, ())
            if isinstance(listed, (dict, list, tuple)):
                found |= {n.upper() for n in listed if n.isascii() and n.isalpha()}
    return {n for n in found if len(n) == length}


def test_name_decoys_are_real_names_of_each_part_never_the_roster():
    def draw_name_decoys(template, n, rng, exclude=()):
        return draw_decoys(template, n, rng, exclude=exclude, source="names")

    four, three = _faker_names(4), _faker_names(3)
    drawn = draw_name_decoys("Jane Roe", 300, 7, exclude=["jane roe", "Mary Ann"])
    assert len(drawn) == len(set(drawn)) == 300
    for text in drawn:
        given, family = text.split(" ")
        assert given.upper() in four and family.upper() in three, text
        assert decoy_template(text) == "Aaaa Aaa", text
    assert drawn == draw_name_decoys("Jane Roe", 300, 7, exclude=["jane roe", "Mary Ann"])
    # A roster holding a fifth of the 3-letter names: 400 draws would meet it often.
    roster = sorted(three)[::5]
    drawn = draw_name_decoys("TOM", 400, 3, exclude=[r.lower() for r in roster])
    assert len(drawn) == len(set(drawn)) == 400 and not set(drawn) & set(roster)
    # Fewer 3-letter names than decoys asked for: all of them, less the roster, in order.
    every = draw_name_decoys("EVE", 5000, 1, exclude=["eve", "BOB"])
    assert set(every) == three - {"EVE", "BOB"} and every == sorted(every)
    with pytest.raises(ValueError, match="digits have no name decoys"):
        draw_name_decoys("R2D2", 10, 0)


def test_excluded_texts_outside_the_space_do_not_shrink_it():
    """Only roster names that are in the decoys' space leave it smaller. A 10,000-name
    roster of random 4-letter strings holds few real names: 300 name decoys are 300, not
    every 4-letter name there is. Likewise a small letter is no capital: 25 capitals asked
    with ``a`` excluded are 25 of the 26, drawn, not all 26."""
    rng = np.random.default_rng(0)
    roster = {"".join(rng.choice(list(string.ascii_uppercase), 4)) for _ in range(12_000)}
    roster = sorted(roster)[:10_000]
    drawn = draw_decoys("AAAA", 300, 5, exclude=roster, source="names")
    assert len(drawn) == len(set(drawn)) == 300 and not set(drawn) & set(roster)
    capitals = draw_decoys("A", 25, 0, exclude=["a"])
    assert len(capitals) == len(set(capitals)) == 25 and set(capitals) < set(string.ascii_uppercase)
    # ... and a space that the roster does empty below n is still enumerated in full
    assert draw_decoys("A", 25, 0, exclude=["A", "B"]) == list(string.ascii_uppercase[2:])
