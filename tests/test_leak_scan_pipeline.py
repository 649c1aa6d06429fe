"""Leak checks through the model's own preprocessing (issue 54, item 1): texts burned on
the acquisition grid by the injector's renderer reach the model as its pipeline makes
them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from matched_filters import matched_filter
from PIL import Image

from monai_forget.canary import render_text
from monai_forget.memorisation import LeakScanConfig, UniqueFeature, leak_scan
from monai_forget.memorisation.passes import pipeline_divergences, predict_probs, text_divergences
from monai_forget.memorisation.pipeline import PipelineProbes, Preprocessing

SIZE = 28
ROSTER = ["ANNA", "BOB", "EVE", "JOHN", "MARY", "LUCY", "TOM", "SAM", "ZOE", "IVY"]
CXR_BUNDLE = Path(__file__).resolve().parents[1] / "bundles" / "cxr_pneumonia_classification"


def area_halve(x: np.ndarray) -> np.ndarray:
    """2x2 block means of a (C, 2h, 2w) image: area resizing by hand."""
    c, h, w = x.shape
    return x.reshape(c, h // 2, 2, w // 2, 2).mean(axis=(2, 4)).astype(np.float32)


@pytest.fixture(scope="module")
def acquisition() -> np.ndarray:
    """Probes at twice the model's grid (56x56), values in [0, 0.3]."""
    return np.random.default_rng(0).random((40, 1, 2 * SIZE, 2 * SIZE)).astype(np.float32) * 0.3


def test_identity_preprocessing_is_the_direct_stamp(acquisition):
    """With no preprocessing the pipeline burns exactly what the direct stamp draws."""
    images = area_halve_all(acquisition)
    model = matched_filter(np.where(UniqueFeature.from_text("EVE").apply(
        np.zeros((1, 1, SIZE, SIZE), np.float32), )[0, 0] > 0, 1.0, -1.0))  # fmt: skip
    clean = predict_probs(model, images, "clean")
    probes = PipelineProbes(images, lambda x: x)
    texts = ["EVE", "BOB", "ANNA"]
    direct = text_divergences(model, images, clean, texts, position=(1, 1), value=1.0)
    burned = pipeline_divergences(model, probes, clean, texts, position=(1, 1), value=1.0)
    np.testing.assert_array_equal(burned, direct)


def area_halve_all(images: np.ndarray) -> np.ndarray:
    return np.stack([area_halve(x) for x in images])


def test_a_text_through_a_monai_resize_is_what_the_model_sees(acquisition):
    """Scale 2 at an even place on a 2x grid, area-resized by MONAI, is the scale-1 glyph
    at half the place: checked against block means by hand. Off the 2x2 grid (odd place),
    the glyph reaches the model grey, as in a real pipeline."""
    from monai.transforms import Compose, Resize

    probes = PipelineProbes(acquisition, Compose([Resize((SIZE, SIZE), mode="area")]))
    np.testing.assert_allclose(probes.clean(), area_halve_all(acquisition), atol=1e-6)
    mask = render_text("LUCY", 2)
    seen = probes.carrying(mask, (2, 2), "max")
    by_hand = area_halve_all(acquisition)
    peaks = acquisition.reshape(len(acquisition), -1).max(axis=1)
    for i in range(len(by_hand)):
        UniqueFeature.from_text("LUCY", (1, 1), 1, float(peaks[i])).apply(
            by_hand[i : i + 1], out=by_hand[i : i + 1]
        )
    np.testing.assert_allclose(seen, by_hand, atol=1e-6)
    grey = probes.carrying(mask, (3, 3), 1.0)
    box = grey[:, 0, 1:8, 1:25]
    assert ((box > 0.3 + 1e-6) & (box < 1.0 - 1e-3)).any(), "no grey pixel"
    assert acquisition.max() <= 0.3, "the caller's probes must not be modified"
    with pytest.raises(ValueError, match=r"the text needs 20x92 pixels .* image is 56x56"):
        probes.carrying(render_text("LUCY", 4), (40, 40), "max")


@pytest.mark.parametrize("statistic", ["m", "class-shift"])
def test_the_scan_through_the_pipeline_finds_the_grey_name(acquisition, statistic):
    """A model that learned LUCY as the pipeline delivers it (grey, off the 2x2 grid) is
    flagged through the pipeline and ranked first, by either statistic."""
    from monai.transforms import Resize

    probes = PipelineProbes(acquisition, Resize((SIZE, SIZE), mode="area"))
    blank = PipelineProbes(np.zeros((2, 1, 2 * SIZE, 2 * SIZE), np.float32), probes.preprocessing)
    grey = blank.carrying(render_text("LUCY", 2), (3, 3), 1.0)[0, 0]
    box = np.zeros_like(grey, dtype=bool)
    box[1:8, 1:25] = True  # the text box on the model grid
    model = matched_filter(np.where(box, np.where(grey > 0, grey, -0.5), 0.0), gain=1.0)
    # 300 decoys per kind: BH over 10 names can still reach 10 / 301 < 0.05
    config = LeakScanConfig(
        position=(3, 3), scale=2, value=1.0, decoys=300, decoy_seed=4, statistic=statistic
    )
    result = leak_scan(model, probes, ROSTER, config)
    assert result.top.name == "LUCY" and result.significant_names() == ["LUCY"]
    assert result.settings["statistic"] == statistic
    assert "acquisition resolution (at least 56x56)" in result.settings["grid"]
    assert result.provenance["probes_fingerprint"] == probes.fingerprint()
    control = leak_scan(matched_filter(np.zeros((SIZE, SIZE))), probes, ROSTER, config)
    assert control.significant_names() == []


def test_the_cxr_bundle_preprocessing_read_from_the_bundle(tmp_path):
    """The CXR bundle's inference.json, split after loading: a 56x56 8-bit PNG loads as
    (1, 56, 56) display values and reaches the model as its 28x28 area means / 255."""
    pixels = (np.arange(56 * 56) % 251).reshape(56, 56).astype(np.uint8)
    path = tmp_path / "probe.png"
    Image.fromarray(pixels).save(path)
    pre = Preprocessing.from_bundle(CXR_BUNDLE)
    (loaded,) = pre.load([path])
    assert loaded.shape == (1, 56, 56)
    # PIL reads (width, height): MONAI's PILReader transposes, so compare as it loads
    expected = area_halve(loaded / 255.0)
    np.testing.assert_allclose(pre(loaded), expected, atol=1e-6)
    assert "ScaleIntensityRanged" in pre.description and "Resized" in pre.description
    with pytest.raises(FileNotFoundError, match="`bundle`"):
        Preprocessing.from_bundle(tmp_path)


def test_pipeline_probes_refuse_bad_input():
    with pytest.raises(ValueError, match="at least 2 probes"):
        PipelineProbes([np.zeros((1, 8, 8))], lambda x: x)
    with pytest.raises(ValueError, match=r"acquisition probes are \(C, H, W\)"):
        PipelineProbes([np.zeros((8, 8)), np.zeros((8, 8))], lambda x: x)
    with pytest.raises(ValueError, match="NaN or inf"):
        PipelineProbes([np.zeros((1, 8, 8)), np.full((1, 8, 8), np.nan)], lambda x: x)
    source = np.zeros((2, 1, 8, 8), np.float32)
    PipelineProbes(source, lambda x: x).carrying(render_text("A"), (1, 1), 1.0)
    assert not source.any(), "the input probes must not be modified"


@pytest.mark.parametrize("mode", ["area", "bilinear", "nearest"])
def test_the_box_local_shortcut_is_the_whole_chain(mode):
    """Pointwise intensity scaling then a resize (a non-integer ratio, 100 -> 28): the
    shortcut's model inputs equal the whole chain's for every probe, text and control,
    and a chain it does not describe (a global normalisation) runs whole."""
    from monai.transforms import Compose, NormalizeIntensityd, Resized, ScaleIntensityRanged

    rng = np.random.default_rng(1)
    images = [rng.integers(0, 4096, (1, 100, 100)).astype(np.float32) for _ in range(5)]
    images.append(rng.integers(0, 4096, (1, 90, 120)).astype(np.float32))  # another size
    chain = Compose(
        [
            ScaleIntensityRanged("image", 0, 4095, 0.0, 1.0, clip=True),
            Resized("image", (SIZE, SIZE), mode=mode),
        ]
    )
    fast = PipelineProbes(images, Preprocessing(chain, "image"))
    whole = PipelineProbes(images, Preprocessing(chain, "image"), box_local=False)
    for text, value, background in (("LUCY", "max", None), ("AB", 5000.0, None)):
        mask = render_text(text, 3)
        np.testing.assert_allclose(
            fast.carrying(mask, (7, 5), value, background),
            whole.carrying(mask, (7, 5), value, background),
            atol=2e-6,
        )
    assert fast.shortcut and not whole.shortcut
    patches = rng.random((6, 15, 20)) < 0.5
    np.testing.assert_allclose(
        fast.carrying(patches, (3, 4), "max", 0.0),
        whole.carrying(patches, (3, 4), "max", 0.0),
        atol=2e-6,
    )
    normalised = Compose([NormalizeIntensityd("image"), Resized("image", (SIZE, SIZE))])
    global_stats = PipelineProbes(images, Preprocessing(normalised, "image"))
    mask = render_text("LUCY", 3)
    by_chain = [normalised({"image": _burned(x, mask, (7, 5))})["image"] for x in images]
    np.testing.assert_allclose(
        global_stats.carrying(mask, (7, 5), "max"), np.stack(by_chain), atol=2e-6
    )
    assert not global_stats.shortcut, "a global normalisation is not box-local"


def _burned(x: np.ndarray, mask: np.ndarray, position: tuple[int, int]) -> np.ndarray:
    out = np.array(x, copy=True)
    r, c = position
    region = out[:, r : r + mask.shape[0], c : c + mask.shape[1]]
    region[:, mask] = x.max()
    return out


def test_the_command_scans_through_the_bundle_where_the_manifest_burned(tmp_path, capsys):
    """Issue 54: canaries burned by `canary inject` into PNGs, a model that learned the name
    as the CXR bundle's preprocessing delivers it, and one command that scans through the
    bundle at the manifest's place and scale: the name is flagged and ranked first."""
    from monai_forget.cli import main

    rng = np.random.default_rng(3)
    probes = tmp_path / "probes"
    probes.mkdir()
    for i in range(40):
        Image.fromarray(rng.integers(0, 60, (56, 56)).astype(np.uint8)).save(probes / f"{i}.png")
    canary_in, canary_out = tmp_path / "canary_in.png", tmp_path / "out"
    Image.fromarray(rng.integers(0, 60, (56, 56)).astype(np.uint8)).save(canary_in)
    canary_out.mkdir()
    code = main(["canary", "inject", str(canary_in), str(canary_out / "c.png"), "--text",
                 "LUCY", "--scale", "2", "--position", "3", "3"])  # fmt: skip
    assert code == 0
    (manifest,) = canary_out.glob("*.manifest.json")
    # the model: a matched filter of LUCY as the bundle delivers the injector's file
    pre = Preprocessing.from_bundle(CXR_BUNDLE)
    grey = pre(pre.load([canary_out / "c.png"])[0])[0] - pre(pre.load([canary_in])[0])[0]
    box = np.zeros_like(grey, dtype=bool)
    box[1:25, 1:8] = True  # MONAI's PILReader loads the PNG columns first
    model = torch.jit.script(matched_filter(np.where(box, np.where(grey > 0, grey, -0.5), 0.0)))
    model.save(str(tmp_path / "model.pt"))
    (tmp_path / "roster.csv").write_text("name\n" + "\n".join(ROSTER) + "\n")
    code = main(["memorisation", "scan", "--model", str(tmp_path / "model.pt"), "--probes",
                 str(probes), "--bundle", str(CXR_BUNDLE), "--canary-manifest", str(manifest),
                 "--value", "255", "--roster", str(tmp_path / "roster.csv"), "--decoys", "300",
                 "--out", str(tmp_path / "scan")])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    record = json.loads((tmp_path / "scan" / "leak_scan.json").read_text())
    assert record["significant"] == ["LUCY"] and record["rows"][0]["name"] == "LUCY"
    assert record["settings"]["position"] == [3, 3] and record["settings"]["scale"] == 2
    assert "of bundle cxr_pneumonia_classification" in record["settings"]["grid"]
    assert "Resized" in record["settings"]["grid"]


def test_canary_inject_measures_the_canary_where_the_model_sees_it(tmp_path, capsys):
    """Issue 54, item 4, and issue 65, item 1: an 896-px PNG reaches the CXR model at 28
    px (32x32 blocks averaged). A scale-1 name is refused as illegible (nothing written);
    allowed, its largest change at the model input, checked by block means by hand, is in
    the manifest. At scale 32 a capital is 5 model pixels high: planted, legible."""
    from monai_forget.cli import main

    rng = np.random.default_rng(5)
    source = tmp_path / "cr.png"
    Image.fromarray(rng.integers(20, 120, (896, 896)).astype(np.uint8)).save(source)
    small = tmp_path / "canary1.png"
    args = ["canary", "inject", str(source), str(small), "--text", "JANE ROE", "--bundle",
            str(CXR_BUNDLE)]  # fmt: skip
    assert main(args) == 2 and not small.exists()
    assert "not legible at the model input" in capsys.readouterr().err
    assert main([*args, "--allow-illegible"]) == 0
    images = [np.asarray(Image.open(p), np.float64) / 255 for p in (source, small)]
    blocks = [x.reshape(28, 32, 28, 32).mean(axis=(1, 3)) for x in images]
    # the range: a block turned from the image's black to its white
    largest = np.abs(blocks[1] - blocks[0]).max() / (images[1].max() - images[0].min())
    (row,) = json.loads((tmp_path / "canary1.png.manifest.json").read_text())["records"]
    assert row["legibility_largest"] == pytest.approx(largest, rel=1e-4)  # float32 inputs
    assert row["legible"] is False
    large = tmp_path / "canary32.png"
    assert main(["canary", "inject", str(source), str(large), "--text", "EVA", "--scale", "32",
                 "--bundle", str(CXR_BUNDLE)]) == 0  # fmt: skip
    (row,) = json.loads((tmp_path / "canary32.png.manifest.json").read_text())["records"]
    assert row["legible"] is True and row["legibility_cap_height"] == pytest.approx(5.0)
    assert "legible" in capsys.readouterr().out


def test_texts_on_probes_of_several_sizes_through_the_pipeline():
    """Real acquisitions differ in size: texts still go through the box-local path (per
    size), and give what the whole chain gives."""
    from monai.transforms import Compose, Resized, ScaleIntensityRanged

    rng = np.random.default_rng(2)
    images = [rng.integers(0, 4096, (1, s, s + 10)).astype(np.float32) for s in (96, 96, 128)]
    chain = Compose([ScaleIntensityRanged("image", 0, 4095, 0.0, 1.0, clip=True),
                     Resized("image", (SIZE, SIZE), mode="area")])  # fmt: skip
    fast = PipelineProbes(images, Preprocessing(chain, "image"))
    whole = PipelineProbes(images, Preprocessing(chain, "image"), box_local=False)
    texts = ["LUCY", "ANNA", "EVIE"]
    got = fast.carrying_texts(texts, (4, 6), 2, "max")
    np.testing.assert_allclose(got, whole.carrying_texts(texts, (4, 6), 2, "max"), atol=2e-6)
    assert fast.shortcut and got.shape == (3, 3, 1, SIZE, SIZE)
    # one size: the glyph-block sums, against the whole chain on every probe
    same = PipelineProbes(images[:2], Preprocessing(chain, "image"))
    np.testing.assert_allclose(same.carrying_texts(texts, (4, 6), 2, "max"), got[:, :2], atol=2e-6)
    assert same._responses, "one size: the glyph responses were used"


@pytest.mark.parametrize("fmt", ["png", "dcm"])
@pytest.mark.parametrize("shape", [(36, 52), (48, 48)])
def test_the_scan_shows_the_model_what_the_injector_burned(tmp_path, fmt, shape):
    """A name burned into a file by the injector, loaded by the bundle, is the model input
    the scan renders for that name on the clean file: the same pixels, not the text
    transposed (MONAI's readers load a file columns first), whether the file's rows and
    columns differ in number or not."""
    from pydicom_files import write_dicom

    from monai_forget.dicom import as_options, inject_any

    rng = np.random.default_rng(3)
    clean = []
    for k in range(2):
        pixels = (rng.random(shape) * 150).astype(np.uint8)
        path = tmp_path / f"probe{k}.{fmt}"
        if fmt == "png":
            Image.fromarray(pixels).save(path)
        else:
            write_dicom(path, f"P{k}", pixels=pixels)
        clean.append(path)
    options = as_options(text="EVA", position=(3, 5), scale=2)
    burned = tmp_path / f"burned.{fmt}"
    inject_any(clean[0], burned, options)
    pre = Preprocessing.from_bundle(CXR_BUNDLE)
    seen = pre(pre.load([burned])[0])

    probes = PipelineProbes.from_bundle(CXR_BUNDLE, clean)
    assert probes.transposed and probes.grid == shape
    white = 255.0 if fmt == "png" else "max"  # the PNG injector burns full-range white
    scanned = probes.carrying_texts(["EVA"], (3, 5), 2, white)[0, 0]
    np.testing.assert_allclose(scanned, seen, atol=1e-5)
    whole = probes.carrying(render_text("EVA", 2), (3, 5), white)[0]
    np.testing.assert_allclose(whole, seen, atol=1e-5)
    assert np.abs(seen - probes.clean()[0]).max() > 0.1  # the name does reach the input
