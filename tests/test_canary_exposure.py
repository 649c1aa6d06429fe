"""Canary exposure of a pipeline (issue 54, item 2): random canaries planted by the
injector, ranked among never-planted canaries of their space (Carlini et al. 2019)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import scipy.stats
import torch
from matched_filters import matched_filter
from PIL import Image

from monai_forget.canary.space import space_size
from monai_forget.cli import main
from monai_forget.dicom.manifest import manifest_canaries
from monai_forget.dicom.plant import plan_canaries
from monai_forget.memorisation import LeakScanConfig, UniqueFeature
from monai_forget.memorisation.exposure import TrainingCheck, canary_exposure, extrapolated_exposure

SIZE = 32
CXR_BUNDLE = Path(__file__).resolve().parents[1] / "bundles" / "cxr_pneumonia_classification"


def png_tree(root: Path, folders: dict[str, int], side: int = SIZE, seed: int = 0) -> Path:
    """``folders`` of random 8-bit PNGs (values 0..59) and a text file that is no image."""
    rng = np.random.default_rng(seed)
    for folder, n in folders.items():
        (root / folder).mkdir(parents=True)
        for i in range(n):
            pixels = rng.integers(0, 60, (side, side)).astype(np.uint8)
            Image.fromarray(pixels).save(root / folder / f"{i:02d}.png")
    (root / "notes.txt").write_text("not an image")
    return root


def test_a_plan_puts_each_canary_into_one_folder_and_no_file_twice(tmp_path):
    tree = png_tree(tmp_path / "tree", {"a": 12, "b": 12, "c": 3})
    plan = plan_canaries(tree, 2, [1, 5], seed=3)
    assert sorted(plan.copies().values()) == [1, 1, 5, 5]
    assert all(len(t) == 5 and t.isalpha() and t.isupper() for t in plan.files)
    planted = plan.planted()
    assert len(planted) == 12, "a file carries at most one canary"
    folders = {t: {Path(f).parent.name for f in files} for t, files in plan.files.items()}
    assert all(len(f) == 1 for f in folders.values()), folders
    big = [next(iter(folders[t])) for t, n in plan.copies().items() if n == 5]
    assert sorted(big) == ["a", "b"], "five copies fit a and b only, one canary each"
    assert "notes.txt" not in planted
    assert plan_canaries(tree, 2, [1, 5], seed=3) == plan
    assert set(plan_canaries(tree, 2, [1, 5], seed=4).files) != set(plan.files)


def test_a_plan_refuses_a_small_space_and_too_many_copies(tmp_path):
    tree = png_tree(tmp_path / "tree", {"a": 6, "b": 6})
    assert space_size("AAAAA") == 26**5 and space_size("Aa-00") == 26 * 26 * 100
    with pytest.raises(ValueError, match=r"holds 456,976 texts, fewer than 1,000,000"):
        plan_canaries(tree, 1, 3, space="AAAA")
    with pytest.raises(ValueError, match=r"has 7 images left .*the most left: 6\).*`copies_from`"):
        plan_canaries(tree, 1, 7)
    spread = plan_canaries(tree, 1, 7, copies_from="tree")
    assert {Path(f).parent.name for f in spread.planted()} == {"a", "b"}
    with pytest.raises(ValueError, match=r"the most left: 2\)"):
        plan_canaries(tree, 3, 5, copies_from="tree")


def test_canary_inject_plants_random_canaries_and_records_them(tmp_path, capsys):
    """The command plants the plan's texts (drawn again here from the same seed), burns
    pixels into every planted file, copies the others byte for byte, and records each
    canary in plain text with its copy count."""
    tree = png_tree(tmp_path / "tree", {"a": 8, "b": 8})
    out = tmp_path / "out"
    args = ["canary", "inject", str(tree), str(out), "--random-canaries", "1", "--copies",
            "2", "4", "--seed", "5", "--position", "2", "2"]  # fmt: skip
    assert main(args) == 0
    plan = plan_canaries(tree, 1, [2, 4], seed=5)
    assert manifest_canaries(Path(f"{out}.manifest.json")) == plan.copies()
    assert "planting 2 canaries from the space AAAAA" in capsys.readouterr().out
    planted = plan.planted()
    for source in sorted(tree.rglob("*.png")):
        rel = source.relative_to(tree).as_posix()
        before, after = (np.asarray(Image.open(p)) for p in (source, out / rel))
        assert (rel in planted) == (not np.array_equal(before, after)), rel
    assert (out / "notes.txt").read_bytes() == (tree / "notes.txt").read_bytes()
    again = ["canary", "inject", str(tree), str(tmp_path / "o2"), "--random-canaries", "1",
             "--text", "ANNA"]  # fmt: skip
    assert main(again) == 2
    assert "drop --text" in capsys.readouterr().err


def test_a_hashed_manifest_cannot_be_audited(tmp_path):
    tree = png_tree(tmp_path / "tree", {"a": 3})
    assert main(["canary", "inject", str(tree), str(tmp_path / "out"), "--text", "EVA"]) == 0
    with pytest.raises(ValueError, match=r"hashed texts.*--random-canaries"):
        manifest_canaries(tmp_path / "out.manifest.json")


def test_the_extrapolated_exposure_is_the_skew_normal_tail():
    """Scores drawn from a known skew-normal: the fitted tail at the score 12 bits out
    gives about 12 bits (Carlini et al. Sec. 4.3), one at the median about 1."""
    truth = scipy.stats.skewnorm(4.0, loc=1.0, scale=2.0)
    never = truth.rvs(20_000, random_state=np.random.default_rng(0))
    assert extrapolated_exposure(truth.isf(2.0**-12), never) == pytest.approx(12, abs=0.8)
    assert extrapolated_exposure(truth.median(), never) == pytest.approx(1, abs=0.05)
    at = np.array([truth.median(), truth.isf(2.0**-12)])  # one fit for several canaries
    np.testing.assert_allclose(
        extrapolated_exposure(at, never), [extrapolated_exposure(x, never) for x in at]
    )
    with pytest.raises(ValueError, match="vary"):
        extrapolated_exposure(1.0, np.ones(10))


@pytest.mark.parametrize("statistic", ["m", "class-shift"])
def test_a_memorised_canary_has_the_most_exposure_the_rank_can_show(statistic):
    """A model that reacts to the planted canary QZXVK ranks it above all 299 never-planted
    canaries (exposure log2 300) and flags it; the other planted canary, which the model
    ignores, is not flagged, and each exposure is the brute-force count of never-planted
    canaries at or above it. A model that reacts to nothing gives no evidence."""
    probes = np.random.default_rng(1).random((30, 1, SIZE, SIZE)).astype(np.float32) * 0.3
    blank = np.zeros((1, 1, SIZE, SIZE), np.float32)
    ink = UniqueFeature.from_text("QZXVK", (1, 1)).apply(blank)[0, 0] > 0
    box = np.zeros((SIZE, SIZE), bool)
    box[1:6, 1 : 30 - 1] = True
    model = matched_filter(np.where(ink, 1.0, np.where(box, -0.5, 0.0)))
    config = LeakScanConfig(decoys=299, decoy_seed=2, statistic=statistic)
    audit = canary_exposure(model, probes, {"QZXVK": 10, "BRMTL": 3}, config)
    rows = {c.text: c for c in audit.canaries}
    never = audit.scan.nulls[0].m
    assert len(never) == 299 and not {"QZXVK", "BRMTL"} & set(audit.scan.nulls[0].texts)
    for c in audit.canaries:
        rank = 1 + int(np.sum(never >= c.score))
        assert (c.rank, c.exposure) == (rank, pytest.approx(math.log2(300 / rank)))
    assert rows["QZXVK"].rank == 1 and rows["QZXVK"].significant
    assert not rows["BRMTL"].significant
    assert audit.memorised and audit.flagged_copies() == [10]
    assert "evidence that the pipeline memorises burned-in text, at 10 copies" in audit.verdict()
    assert rows["QZXVK"].exposure_extrapolated > rows["QZXVK"].exposure
    blind = matched_filter(np.zeros((SIZE, SIZE)))
    trained = TrainingCheck(planted=13, found=13, datalist="train.json (training)")
    control = canary_exposure(blind, probes, {"QZXVK": 10, "BRMTL": 3}, config,
                              training=trained)  # fmt: skip
    assert not control.memorised and control.flagged_copies() == []
    assert all(math.isnan(c.exposure_extrapolated) for c in control.canaries), "no tail to fit"
    said = (
        "no evidence that the pipeline memorises burned-in text at these copy counts "
        "(bh-adjusted, alpha 0.05); the training datalist holds all 13 planted files"
    )
    assert control.verdict().endswith(said)
    # Issue 65, item 4: "no evidence" only for a model shown to have trained on the files
    for training, why in [
        (None, "nothing shows that the model trained on the planted files"),
        (TrainingCheck(13, 12, "train.json (training)"), "holds 12 of the 13 planted files"),
    ]:
        unknown = canary_exposure(blind, probes, {"QZXVK": 10, "BRMTL": 3}, config,
                                  training=training)  # fmt: skip
        assert "no evidence" not in unknown.verdict() and "cannot tell" in unknown.verdict()
        assert why in unknown.verdict()
    # ... and a flag is evidence whatever the datalist shows
    assert "cannot tell" not in audit.verdict()


def test_a_config_without_a_statistic_ranks_by_the_exposure_default():
    """A caller's config that leaves the statistic unset gets the exposure audit's
    measured default (the class shift), on the model grid too, where a leak scan's own
    default is M; a statistic the caller chose is kept."""
    import warnings

    probes = np.random.default_rng(2).random((6, 1, SIZE, SIZE)).astype(np.float32)
    model = matched_filter(np.zeros((SIZE, SIZE)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 9 never-planted canaries cannot reach alpha
        unset = canary_exposure(model, probes, {"QZXVK": 3}, LeakScanConfig(decoys=9))
        chosen = canary_exposure(
            model, probes, {"QZXVK": 3}, LeakScanConfig(decoys=9, statistic="m")
        )
    assert unset.scan.settings["statistic"] == "class-shift"
    assert chosen.scan.settings["statistic"] == "m"


def test_canaries_of_two_spaces_are_refused():
    probes = np.zeros((4, 1, SIZE, SIZE), np.float32)
    with pytest.raises(ValueError, match="2 spaces"):
        canary_exposure(matched_filter(np.zeros((SIZE, SIZE))), probes, {"ABCDE": 1, "ABCD": 1})
    with pytest.raises(ValueError, match="no planted canary"):
        canary_exposure(matched_filter(np.zeros((SIZE, SIZE))), probes, {})


def test_the_exposure_command_audits_what_the_injector_planted(tmp_path, capsys):
    """Plant one canary with the command into 56x56 PNGs, build a model that learned it as
    the CXR bundle delivers the injector's file, and audit with one command: the canary
    ranks first and is flagged; the record and figure are written, and not replaced
    without --overwrite."""
    from monai_forget.memorisation.pipeline import Preprocessing

    tree = png_tree(tmp_path / "tree", {"a": 4}, side=64)
    probes = png_tree(tmp_path / "probes", {"p": 30}, side=64, seed=1) / "p"
    out = tmp_path / "out"
    args = ["canary", "inject", str(tree), str(out), "--random-canaries", "1", "--copies", "2",
            "--scale", "2", "--position", "3", "3"]  # fmt: skip
    assert main(args) == 0
    ((text, files),) = plan_canaries(tree, 1, 2).files.items()
    pre = Preprocessing.from_bundle(CXR_BUNDLE)
    before, after = (pre(pre.load([root / files[0]])[0])[0] for root in (tree, out))
    grey = after - before  # the canary as the model sees it (grey, and transposed:
    rows, cols = np.nonzero(grey)  # MONAI's PILReader loads a PNG columns first)
    box = np.zeros_like(grey, dtype=bool)
    box[rows.min() : rows.max() + 1, cols.min() : cols.max() + 1] = True
    assert box.shape == (28, 28) and np.ptp(rows) > np.ptp(cols), "columns first"
    model = torch.jit.script(matched_filter(np.where(box, np.where(grey > 0, grey, -0.5), 0.0)))
    model.save(str(tmp_path / "model.pt"))
    audit = ["canary", "exposure", "--model", str(tmp_path / "model.pt"), "--bundle",
             str(CXR_BUNDLE), "--probes", str(probes), "--canary-manifest",
             f"{out}.manifest.json", "--value", "255", "--never-planted", "99", "--out",
             str(tmp_path / "audit")]  # fmt: skip
    capsys.readouterr()
    assert main(audit) == 0
    printed = capsys.readouterr().out
    assert "evidence that the pipeline memorises burned-in text, at 2 copies" in printed
    record = json.loads((tmp_path / "audit" / "exposure.json").read_text())
    (row,) = record["canaries"]
    assert (row["text"], row["copies"], row["rank"]) == (text, 2, 1)
    assert row["exposure"] == pytest.approx(math.log2(100))
    assert record["settings"]["position"] == [3, 3] and record["space_size"] == 26**5
    assert record["settings"]["statistic"] == "class-shift", "the measured default"
    assert (tmp_path / "audit" / "exposure.png").stat().st_size > 1000
    assert main(audit) == 2
    assert "already exists" in capsys.readouterr().err
    # issue 52: the command's verdict and rows are the library's on the same inputs
    from monai_forget.dicom.manifest import manifest_canaries, manifest_placement
    from monai_forget.memorisation import LeakScanConfig
    from monai_forget.memorisation.exposure import canary_exposure
    from monai_forget.memorisation.pipeline import PipelineProbes
    from monai_forget.results import jsonable

    manifest = f"{out}.manifest.json"
    placement = manifest_placement(manifest)
    config = LeakScanConfig(
        position=placement["position"], scale=placement["scale"], value=255.0, decoys=99,
        decoy_seed=record["settings"]["decoy_seed"],
    )  # fmt: skip
    api = canary_exposure(
        torch.jit.load(str(tmp_path / "model.pt")),
        PipelineProbes.from_bundle(CXR_BUNDLE, probes),
        manifest_canaries(manifest),
        config,
    ).to_dict()
    for key in ("verdict", "memorised", "flagged_copies", "canaries", "never_planted"):
        assert json.loads(json.dumps(jsonable(api[key]))) == record[key], key
