"""Shared data_prep machinery: splits, provider assignment, datalist assembly and writing."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from monai.data import load_decathlon_datalist

from monai_forget.data.acdc import ACDC_GROUPS
from monai_forget.data_prep.datalist import PathStyle, build_datalist, write_datalist
from monai_forget.data_prep.sites import (
    EXPLICIT,
    RANDOM,
    SINGLE,
    SITE_MAP,
    SiteSpec,
    parse_provider,
    random_sites,
)
from monai_forget.data_prep.splits import parse_fractions, split_patients


def acdc_like_strata() -> dict[str, str]:
    """100 patients, 20 per group, as in ACDC."""
    return {f"patient{i:03d}": ACDC_GROUPS[(i - 1) // 20] for i in range(1, 101)}


# --- splits ---------------------------------------------------------------------------


def test_parse_fractions_accepts_and_rejects():
    assert parse_fractions("0.7,0.1,0.2") == (0.7, 0.1, 0.2)
    with pytest.raises(ValueError, match=r"sum to 0\.9"):
        parse_fractions("0.7,0.1,0.1")
    with pytest.raises(ValueError, match="three non-negative"):
        parse_fractions("0.8,0.2")
    with pytest.raises(ValueError, match="three non-negative"):
        parse_fractions("1.2,-0.1,-0.1")
    with pytest.raises(ValueError, match="three non-negative"):
        parse_fractions("release")


def test_split_patients_is_stratified_seeded_and_complete():
    strata = acdc_like_strata()
    split = split_patients(strata, (0.7, 0.1, 0.2), seed=3)
    assert set(split) == set(strata)
    assert Counter(split.values()) == {"training": 70, "validation": 10, "test": 20}
    for group in ACDC_GROUPS:  # every group is cut 14 / 2 / 4
        members = [p for p, g in strata.items() if g == group]
        assert Counter(split[p] for p in members) == {"training": 14, "validation": 2, "test": 4}
    assert split_patients(strata, (0.7, 0.1, 0.2), seed=3) == split
    assert split_patients(strata, (0.7, 0.1, 0.2), seed=4) != split


def test_split_patients_balances_small_strata_overall():
    # 7 strata of 3: per-stratum rounding alone would never give a validation patient.
    strata = {f"p{i:02d}": f"s{i % 7}" for i in range(21)}
    split = split_patients(strata, (0.6, 0.2, 0.2), seed=0)
    # cumulative rounding over all 21 patients: round(12.6) = 13, round(16.8) - 13 = 4
    assert Counter(split.values()) == {"training": 13, "validation": 4, "test": 4}
    for stratum in {f"s{i}" for i in range(7)}:  # each stratum of 3 still has training
        assert "training" in {split[p] for p, s in strata.items() if s == stratum}


# --- providers ------------------------------------------------------------------------


def test_random_sites_stratified_balanced_and_seeded():
    strata = acdc_like_strata()
    sites = random_sites(strata, 3, seed=0)
    sizes = Counter(sites.values())
    assert set(sizes) == {"random1", "random2", "random3"}
    assert max(sizes.values()) - min(sizes.values()) <= 1
    for group in ACDC_GROUPS:  # 20 per group dealt over 3 sites: 6 or 7 each
        per_site = Counter(sites[p] for p, g in strata.items() if g == group)
        assert sorted(per_site.values()) in ([6, 7, 7], [6, 6, 7])
    assert random_sites(strata, 3, seed=0) == sites
    assert random_sites(strata, 3, seed=1) != sites


def test_site_map_assigns_and_labels(tmp_path):
    site_map = tmp_path / "sites.csv"
    site_map.write_text("patient,site\na,1.5T\nb,3T\nc,3T\n")
    spec = SiteSpec(site_map=site_map)
    assert spec.method == SITE_MAP
    assert spec.assign({"a": "x", "b": "x", "c": "y"}) == {"a": "1.5T", "b": "3T", "c": "3T"}


def test_site_map_unknown_and_unassigned_patients(tmp_path):
    site_map = tmp_path / "sites.csv"
    site_map.write_text("patient,site\na,1.5T\nb,3T\nzz,3T\n")
    with pytest.raises(ValueError, match=r"not in the data: .*sites\.csv line 4;") as caught:
        SiteSpec(site_map=site_map).assign({"a": "x", "b": "x"})
    assert "zz" not in str(caught.value)  # named by file and line, not by its id
    site_map.write_text("patient,site\na,1.5T\n")
    with pytest.raises(ValueError, match=r"leaves 1 patient\(s\) in no provider: b"):
        SiteSpec(site_map=site_map).assign({"a": "x", "b": "x"})


def test_site_map_malformed_lines_name_the_line(tmp_path):
    site_map = tmp_path / "sites.csv"
    site_map.write_text("patient,site\na,1.5T\nb,3T,extra\n")
    with pytest.raises(ValueError, match=r"sites.csv, line 3: 3 field\(s\), expected 2"):
        SiteSpec(site_map=site_map).assign({"a": "x", "b": "x"})
    site_map.write_text("patient,site\na,1.5T\n\na,3T\n")
    with pytest.raises(ValueError, match=r"line 4: its patient is given .* line 2 gave '1.5T'"):
        SiteSpec(site_map=site_map).assign({"a": "x"})
    site_map.write_text("id,scanner\na,1.5T\n")
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['patient', 'site'\]"):
        SiteSpec(site_map=site_map).assign({"a": "x"})
    with pytest.raises(FileNotFoundError, match="site map"):
        SiteSpec(site_map=tmp_path / "absent.csv").assign({"a": "x"})


def test_explicit_providers(tmp_path):
    listed = tmp_path / "withdrawn.txt"
    listed.write_text("# withdrawn\nc\n\nd\n")
    strata = dict.fromkeys("abcd", "g")
    spec = SiteSpec(providers=(parse_provider("A=a,b"), parse_provider(f"B=@{listed}")))
    assert spec.method == EXPLICIT
    assert spec.assign(strata) == {"a": "A", "b": "A", "c": "B", "d": "B"}
    spec = SiteSpec(providers=(parse_provider("A=a"),))
    with pytest.raises(ValueError, match=r"in no provider: b, c, d; list it or pass `other_site`"):
        spec.assign(strata)
    spec = SiteSpec(providers=(parse_provider("A=a"),), other_site="rest")
    assert spec.assign(strata) == {"a": "A", "b": "rest", "c": "rest", "d": "rest"}
    spec = SiteSpec(providers=(parse_provider("A=a,b"), parse_provider("B=b,c,d")))
    with pytest.raises(ValueError, match="patient b is in providers 'A' and 'B'"):
        spec.assign(strata)
    with pytest.raises(ValueError, match="NAME=patient001"):
        parse_provider("a,b")
    with pytest.raises(ValueError, match="lists no patients"):
        parse_provider("A=")


def test_provider_options_exclude_each_other(tmp_path):
    with pytest.raises(ValueError, match="choose one provider option"):
        SiteSpec(site_map=tmp_path / "s.csv", random_sites=2)
    with pytest.raises(ValueError, match="`other_site` only applies"):
        SiteSpec(other_site="rest")
    assert SiteSpec().method == SINGLE
    assert SiteSpec(random_sites=2).method == RANDOM == "random-stratified (not field strength)"


# --- datalist -------------------------------------------------------------------------


def make_samples(root: Path, n_patients: int = 10) -> list[dict]:
    samples = []
    for i in range(n_patients):
        for j in range(2):
            image = root / "images" / f"p{i}_{j}.png"
            image.parent.mkdir(parents=True, exist_ok=True)
            image.write_bytes(b"x")
            samples.append(
                {"image": image, "label": i % 2, "patient": f"p{i}", "group": "ab"[i % 2]}
            )
    return samples


def test_datalist_round_trips_through_monai(tmp_path):
    samples = make_samples(tmp_path / "src")
    output = tmp_path / "out" / "datalist.json"
    datalist = build_datalist(
        samples,
        sites=SiteSpec(random_sites=2),
        fractions=(0.6, 0.2, 0.2),
        seed=0,
        labels=("a", "b"),
        paths=PathStyle.for_output(output),
        description="test",
        provenance={"source": "here"},
    )
    write_datalist(datalist, output, overwrite=False)
    written = json.loads(output.read_text())
    assert written["provenance"]["site_assignment"] == "random-stratified (not field strength)"
    assert written["labels"] == {"0": "a", "1": "b"}
    patients_by_split = {
        key: {e["patient"] for e in written[key]} for key in ("training", "validation", "test")
    }
    assert sum(len(v) for v in patients_by_split.values()) == 10  # no patient twice
    entry = written["training"][0]
    assert entry["image"].startswith("../src/images/")  # relative to the datalist folder
    loaded = load_decathlon_datalist(output, data_list_key="training")
    assert Path(loaded[0]["image"]).is_file()
    assert loaded[0]["patient"] == entry["patient"] and loaded[0]["site"] == entry["site"]
    with pytest.raises(FileExistsError, match="--overwrite"):
        write_datalist(datalist, output, overwrite=False)


def test_datalist_absolute_paths(tmp_path):
    samples = make_samples(tmp_path)
    paths = PathStyle.for_output(tmp_path / "d.json", absolute=True)
    datalist = build_datalist(
        samples,
        sites=SiteSpec(),
        fractions=(1.0, 0.0, 0.0),
        seed=0,
        labels=("a", "b"),
        paths=paths,
        description="",
        provenance={},
    )
    assert all(Path(e["image"]).is_absolute() for e in datalist["training"])
    assert datalist["validation"] == [] and datalist["test"] == []
    assert {e["site"] for e in datalist["training"]} == {"all"}
    with pytest.raises(ValueError, match="exclude each other"):
        PathStyle.for_output(tmp_path / "d.json", base_dir=tmp_path, absolute=True)


def test_datalist_refuses_fields_monai_would_rewrite(tmp_path):
    samples = make_samples(tmp_path)
    (tmp_path / "p3").mkdir()  # e.g. a datalist written into the patient folders' parent
    output = tmp_path / "d.json"
    datalist = build_datalist(
        samples,
        sites=SiteSpec(),
        fractions=(0.6, 0.2, 0.2),
        seed=0,
        labels=("a", "b"),
        paths=PathStyle.for_output(output),
        description="",
        provenance={},
    )
    with pytest.raises(ValueError, match=r"field patient='p3' names an existing path"):
        write_datalist(datalist, output, overwrite=False)
    assert not output.exists()


def test_datalist_refuses_empty_data(tmp_path):
    with pytest.raises(ValueError, match="no samples found"):
        build_datalist(
            [],
            sites=SiteSpec(),
            fractions=None,
            seed=0,
            labels=("a",),
            paths=PathStyle(None),
            description="",
            provenance={},
        )


def test_prepare_is_wired_into_the_dispatcher(tmp_path, capsys):
    from monai_forget.cli import main

    (tmp_path / "release").mkdir()
    code = main(["prepare", "rsna", str(tmp_path / "release"), "-o", str(tmp_path / "d.json")])
    err = capsys.readouterr().err
    assert code == 2
    assert "stage_2_train_images not found" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "d.json").exists()


def test_the_command_line_names_the_flags_where_the_library_names_parameters(tmp_path, capsys):
    """Issue 67, item 2: ``SiteSpec`` names its fields (``other_site``, ``providers``);
    ``monai-forget prepare`` shows its own flags for them, and writes nothing."""
    from monai_forget.cli import main

    npz = tmp_path / "tiny.npz"
    rng = np.random.default_rng(0)
    shapes = {"images": (4, 28, 28), "labels": (4, 1)}
    arrays = {f"{split}_{kind}": rng.integers(0, 2, shape, dtype=np.uint8)
              for split in ("train", "val", "test") for kind, shape in shapes.items()}  # fmt: skip
    np.savez(npz, **arrays)
    code = main(["prepare", "medmnist", str(npz), "--image-dir", str(tmp_path / "png"),
                 "-o", str(tmp_path / "d.json"), "--other-site", "rest"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert "--other-site only applies together with --provider" in err, err
    assert "`" not in err and not (tmp_path / "d.json").exists()
