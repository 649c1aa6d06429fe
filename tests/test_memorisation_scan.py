"""Leak scan over a roster of names: ranking, correction, report, CLI, a real model."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from monai_forget.cli import main
from monai_forget.memorisation import (
    EarlyStoppingTraining,
    LeakScanConfig,
    UniqueFeature,
    inject_feature,
    leak_scan,
    read_roster,
    write_scan_report,
)
from monai_forget.memorisation.reference_scan import in_decoy_units, relative_to_references
from monai_forget.memorisation.report import (
    MEASURED_DETECTION,
    MEASURED_FALSE_ALARMS,
    smallest_found_series,
)
from monai_forget.networks import MLP1

#: The scan the checkpoint tests interrupt and resume.
SAVED_SCAN = LeakScanConfig(decoys=600, decoy_seed=5)
ROSTER = ["ANNA", "BOB", "EVE", "JOHN", "MARY", "LUCY", "TOM", "SAM", "ZOE", "IVY"]
SIZE = 28
ARGS = {"in_shape": [1, SIZE, SIZE], "num_classes": 2, "hidden": 2}


def knows(*names: str, gain: float = 0.5) -> MLP1:
    """An MLP-1 whose first hidden units are matched filters of ``names`` at (1, 1)."""
    net = MLP1((1, SIZE, SIZE), 2, hidden=2)
    with torch.no_grad():
        first, _, second = net.head[1], net.head[2], net.head[3]
        first.weight.zero_()
        first.bias.zero_()
        second.weight.zero_()
        second.bias.zero_()
        for unit, name in enumerate(names):
            f = UniqueFeature.from_text(name, (1, 1))
            template = np.zeros((SIZE, SIZE), np.float32)
            h, w = f.shape
            template[1 : 1 + h, 1 : 1 + w] = np.where(f.mask, 1.0, -1.0)
            first.weight[unit] = gain * torch.from_numpy(template.ravel())
            second.weight[0, unit] = 1.0
    return net.eval()


@pytest.fixture(scope="module")
def probes() -> np.ndarray:
    return np.random.default_rng(0).random((80, 1, SIZE, SIZE)).astype(np.float32) * 0.3


def test_scan_ranks_the_known_name_first(probes):
    result = leak_scan(knows("LUCY"), probes, ROSTER, LeakScanConfig(seed=0))
    assert result.top.name == "LUCY"
    assert result.rank_of("LUCY") == 1
    assert "LUCY" in result.significant_names()
    assert [r.rank for r in result.rows] == list(range(1, 11))
    p = [r.pvalue for r in result.rows]
    assert p == sorted(p)
    # BH-adjusted p-values: p_(i) * m / i made monotone, never below the raw p.
    assert all(r.pvalue_adjusted >= r.pvalue for r in result.rows)


def test_reference_models_remove_what_every_model_of_the_design_does(probes, tmp_path):
    """ANNA moves every model of the design (the references too); only the audited
    model reacts to EVE. Without references both are flagged; with them only EVE."""
    target = knows("ANNA", "EVE")
    config = LeakScanConfig(decoy_seed=3, decoy_source="letters")  # as the rows measured
    alone = leak_scan(target, probes, ROSTER, config)
    assert {"ANNA", "EVE"} <= set(alone.significant_names())
    references = [knows("ANNA"), knows("ANNA")]
    scan = leak_scan(target, probes, ROSTER, config, references=references)
    assert scan.significant_names() == ["EVE"]
    assert scan.top.name == "EVE"
    rows = {r.name: r for r in scan.rows}
    assert rows["ANNA"].m_references > 0 and rows["EVE"].m > 0
    assert scan.settings["references"] == 2
    # The report quotes the false alarms measured with reference models, not without.
    _, html_path = write_scan_report(scan, tmp_path)
    page = html_path.read_text()
    assert "with 8 reference models" in page and "1 of 20 control scans" in page
    assert "decoys of its kind (random texts of the same length" in page  # letters here
    with pytest.raises(ValueError, match="at least 2 reference models"):
        leak_scan(target, probes, ROSTER, references=references[:1])
    # A target that is one of its references: every statistic is 0, every decoy ties
    # with every name, so each p is (1 + n) / (1 + n) = 1.
    same = leak_scan(
        knows("ANNA"), probes, ROSTER, LeakScanConfig(decoy_seed=3), references=references
    )
    assert {r.pvalue for r in same.rows} == {1.0}


def test_reference_statistic_by_hand():
    """One name and two decoys of its kind (decoys' M 1 and 3: mean 2, sd 1, so a text's
    units are M - 2). Target M [4, 1, 3] -> units [2, -1, 1]; references [3, 1, 3] ->
    [1, -1, 1] and [1, 1, 3] -> [-1, -1, 1]: mean [0, -1, 1], spread (ddof 1) [sqrt 2,
    0, 0], pooled sqrt(2/3); scale sqrt((s^2 + 2/3) / 2) = [sqrt(4/3), sqrt(1/3),
    sqrt(1/3)]; statistic [2 / sqrt(4/3), 0, 0] = [sqrt 3, 0, 0]."""
    texts = ["AB", "XY", "QQ"]
    target = np.array([4.0, 1.0, 3.0])
    references = [np.array([3.0, 1.0, 3.0]), np.array([1.0, 1.0, 3.0])]
    np.testing.assert_allclose(in_decoy_units(target, texts, 1), [2.0, -1.0, 1.0])
    statistic, mean = relative_to_references(target, references, texts, 1)
    np.testing.assert_allclose(statistic, [np.sqrt(3.0), 0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(mean, [0.0, -1.0, 1.0])
    # References that agree on every text: the plain difference.
    statistic, _ = relative_to_references(target, [references[0]] * 2, texts, 1)
    np.testing.assert_allclose(statistic, [1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="at least 2"):
        relative_to_references(target, references[:1], texts, 1)


def test_name_decoys_carry_what_names_share(probes):
    """A model that reacts to any text starting with AN saw no name. Random letters
    rarely start with AN (1 in 676), real 4-letter names often do (about 1 in 90): among
    letter decoys ANNA stands out, among name decoys it does not. Every decoy that starts
    with AN ties with ANNA (the model sees only those two letters), so ANNA's count of
    decoys at or above it is exactly the count of such decoys."""
    model = knows("AN")
    # a fixed number of decoys: ANNA is ranked among every one of them
    fixed = dict(decoy_seed=2, decoys=999)
    letters = leak_scan(model, probes, ROSTER, LeakScanConfig(**fixed, decoy_source="letters"))
    names = leak_scan(model, probes, ROSTER, LeakScanConfig(**fixed, decoy_source="names"))
    anna = {}
    for result in (letters, names):
        row = next(r for r in result.rows if r.name == "ANNA")
        decoys = next(n for n in result.nulls if n.template == "AAAA").texts
        assert row.decoys_at_or_above == sum(t.startswith("AN") for t in decoys)
        anna[result.settings["decoy_source"]] = row.pvalue
    assert anna["letters"] < anna["names"]
    assert "ANNA" not in names.significant_names()
    assert names.provenance["versions"]["faker"]
    with pytest.raises(ValueError, match="decoy_source must be one of"):
        LeakScanConfig(decoy_source="words")


def test_a_kind_short_of_name_decoys_is_named_in_the_warning(probes):
    """About 500 names have 3 letters: with 30 names and BH at 0.05 a 3-letter name needs
    at least 599 decoys, while 4-letter names have enough; the warning says which kind."""
    more = ["ADAM", "ALAN", "BILL", "CORA", "DAVE", "DICK", "ERIC", "FRED", "GINA", "GREG"]
    roster = ROSTER + more + ["ABE", "AMY", "DAN", "GUS", "JAN", "KIM", "LEO", "MAX", "NED", "RAY"]
    config = LeakScanConfig(decoy_seed=0, decoy_source="names")
    with pytest.warns(UserWarning, match=r"no name of the kinds AAA \(\d+ decoys\) can reach"):
        result = leak_scan(knows(), probes, roster, config)
    # 4-letter names could draw the sequential cap, twice the fixed default (999)
    assert {r.max_decoys for r in result.rows if len(r.name) == 4} == {1998}


def test_corrections_and_order_independence(probes):
    model = knows("EVE")
    bh = leak_scan(model, probes, ROSTER, LeakScanConfig(correction="bh", decoy_seed=1))
    bonf = leak_scan(model, probes, ROSTER, LeakScanConfig(correction="bonferroni", decoy_seed=1))
    none = leak_scan(
        model, probes, list(reversed(ROSTER)), LeakScanConfig(correction="none", decoy_seed=1)
    )
    by_name = {r.name: r for r in bonf.rows}
    for r in none.rows:  # same name -> same controls and decoys, whatever the roster order
        assert r.pvalue == by_name[r.name].pvalue
        assert by_name[r.name].pvalue_adjusted == pytest.approx(min(1.0, 10 * r.pvalue))
    raw = np.array([by_name[n].pvalue for n in ROSTER])
    adj = {r.name: r.pvalue_adjusted for r in bh.rows}
    from scipy.stats import false_discovery_control

    np.testing.assert_allclose([adj[n] for n in ROSTER], false_discovery_control(raw))


def test_scan_refuses_bad_rosters_without_repeating_names(probes):
    model = knows("EVE")
    # Roster names are personal data: errors name the entry, and what is wrong, not the name.
    with pytest.raises(ValueError, match=r"entry 3 repeats entry 1") as err:
        leak_scan(model, probes, ["EVE", "BOB", "EVE"])
    assert "EVE" not in str(err.value)
    with pytest.raises(
        ValueError, match=r"entry 2 .*has 1 character\(s\) outside the monai-forget-5x5"
    ) as err:
        leak_scan(model, probes, ["EVE", "B@B"])
    assert "B@B" not in str(err.value)
    with pytest.raises(ValueError, match=r"do not fit 28x28.*entry 2.*at most 4 characters") as err:
        leak_scan(model, probes, ["EVE", "ALEXANDRA"])
    assert "ALEXANDRA" not in str(err.value)
    with pytest.raises(ValueError, match="correction must be one of"):
        LeakScanConfig(correction="holm")
    with pytest.raises(ValueError, match="test must be one of"):
        LeakScanConfig(test="z")
    with pytest.raises(ValueError, match=r"alpha must be in \(0, 1\)"):
        LeakScanConfig(alpha=1.0)
    with pytest.raises(ValueError, match="decoys must be an integer >= 1"):
        LeakScanConfig(decoys=0)


def test_read_roster(tmp_path):
    (tmp_path / "a.csv").write_text("id,Name\n1, ANNA \n2,\n3,BOB\n")
    assert read_roster(tmp_path / "a.csv") == ["ANNA", "BOB"]
    (tmp_path / "b.csv").write_text("patient\nEVE\nTOM\n")
    assert read_roster(tmp_path / "b.csv") == ["EVE", "TOM"]
    (tmp_path / "c.csv").write_text("id,surname\n1,EVE\n")
    assert read_roster(tmp_path / "c.csv", column="SURNAME") == ["EVE"]
    with pytest.raises(ValueError, match="pass the column"):
        read_roster(tmp_path / "c.csv")
    (tmp_path / "d.csv").write_text("name\n\n")
    with pytest.raises(ValueError, match="no names"):
        read_roster(tmp_path / "d.csv")
    with pytest.raises(FileNotFoundError):
        read_roster(tmp_path / "missing.csv")


def test_report_is_written_atomically_and_not_overwritten(probes, tmp_path):
    result = leak_scan(knows("TOM"), probes, [*ROSTER[:5], "TOM"])
    json_path, html_path = write_scan_report(result, tmp_path / "out")
    record = json.loads(json_path.read_text())
    assert record["rows"][0]["name"] == "TOM" and record["correction"] == "bh"
    assert record["provenance"]["seed"] == 0 and len(record["rows"]) == 6
    page = html_path.read_text()
    assert "data:image/png;base64," in page and "TOM" in page
    # The report gives evidence, never a verdict that a name was memorised, with the
    # caution and the false-alarm rate measured for its configuration (BH, alpha 0.05,
    # the default decoys: names).
    assert "evidence of memorisation" in page and "memorised" not in page
    assert "not proof" in page and "not proof of absence" in page
    assert result.settings["decoy_source"] == "names"
    assert "decoys of its kind (real given and family names of the same length" in page
    measured = [
        r
        for r in MEASURED_FALSE_ALARMS
        if r["correction"] == "bh"
        and not r["references"]
        and r["decoy_source"] == "names"
        and r.get("statistic", "m") == "m"  # this scan ranks by M (on the model grid)
    ]
    assert {r["data"].split()[0] for r in measured} == {"MNIST", "PneumoniaMNIST"}
    for r in measured:
        assert f"{r['flagged']} of {r['scans']} control scans" in page
    assert record["measured_false_alarms"] == measured
    # ... and the detection curve measured for this kind of scan (names, BH, 0.05)
    # (not the curve of scans against references by patient)
    curve = [
        r
        for r in MEASURED_DETECTION
        if r["decoy_source"] == "names"
        and not r.get("references_by_patient")
        and r.get("statistic", "m") == "m"  # this scan's statistic and path only
        and r["path"] == "model grid"
    ]
    assert record["measured_detection"] == curve and curve
    assert "measured detection curve" in page and page.count("data:image/png;base64,") == 2
    for r in curve:
        assert f"<td>{r['images']}</td><td>{r['detected']} of {r['runs']}</td>" in page
    # sequential decoys: up to twice the fixed default (999) per kind
    assert len(record["decoys"]) == 2 and record["settings"]["decoys_per_kind"] == 1998
    before = json_path.read_bytes()
    with pytest.raises(FileExistsError, match="overwrite"):
        write_scan_report(result, tmp_path / "out")
    assert json_path.read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "leak_scan.html",
        "leak_scan.json",
    ]
    write_scan_report(result, tmp_path / "out", overwrite=True)


def test_smallest_found_series_by_hand():
    """Found means at least half the runs found it: 10 of 20 counts, 9 of 20 does not;
    the shortest such series is reported, not the first row or the best rate."""

    def row(images: int, detected: int, runs: int = 20, data: str = "MNIST") -> dict:
        return {"data": data, "network": "MLP-1", "images": images, "detected": detected,
                "runs": runs}  # fmt: skip

    rows = [row(30, 19), row(3, 9), row(10, 10), row(1, 1), row(30, 4, 5, "X"), row(3, 2, 5, "X")]
    found = smallest_found_series(rows)
    assert found["MNIST, MLP-1"] == {"images": 10, "best": 0.95, "best_images": 30}
    assert found["X, MLP-1"] == {"images": 30, "best": 0.8, "best_images": 30}
    none = smallest_found_series([row(1, 1), row(10, 9), row(30, 7)])["MNIST, MLP-1"]
    assert none == {"images": None, "best": 0.45, "best_images": 10}


def test_a_clean_scan_says_what_it_could_not_have_found(probes, tmp_path):
    """Issue 36, item 6: "no evidence" comes with the measured curve of its kind of scan
    (name decoys here) and the series it would not have found."""
    from monai_forget.memorisation import LeakScanConfig
    from monai_forget.memorisation.report import render_scan_report

    result = leak_scan(knows(), probes, ROSTER[:5], LeakScanConfig(decoy_source="names"))
    assert not result.significant_names()
    page = render_scan_report(result)
    curve = [
        r
        for r in MEASURED_DETECTION
        if r["decoy_source"] == "names" and r.get("statistic", "m") == "m"
        and r["path"] == "model grid"
    ]  # fmt: skip
    mnist = max((r for r in curve if r["data"] == "MNIST"), key=lambda r: r["detected"] / r["runs"])
    assert mnist["detected"] / mnist["runs"] < 0.5  # measured: MLP-1 MNIST never reached half
    best = f"best: {100 * mnist['detected'] / mnist['runs']:.0f} % at {mnist['images']} images"
    assert "no series length measured was found in 50 % of the runs" in page and best in page
    assert "does not clear a name burned into fewer images" in page
    # a model the scan never found a name in says so, not "best: 0 % at 1 images"
    cells = {f"{r['data']}, {r['network']}" for r in curve}
    never = cells - {f"{r['data']}, {r['network']}" for r in curve if r["detected"]}
    assert never  # measured: CNN-1 on MNIST and PneumoniaMNIST, 0 of 5 at every length
    for cell in never:
        said = page.split(f"{cell}: ", 1)[1].split("</li>")[0].split(".")[0]
        assert "not one run found it at any length measured" in said, said
    assert "best: 0 %" not in page


# --------------------------------------------------------------------------- CLI


@pytest.fixture(scope="module")
def cli_files(tmp_path_factory, probes):
    root = tmp_path_factory.mktemp("memorisation_cli")
    torch.save(knows("MARY").state_dict(), root / "model.pt")
    np.savez(root / "probes.npz", images=probes, labels=np.zeros(len(probes), np.int64))
    (root / "roster.csv").write_text("name\n" + "\n".join(ROSTER) + "\n")
    return root


def _model_args(root):
    return ["--model", str(root / "model.pt"), "--network", "mlp-1",
            "--network-args", json.dumps(ARGS), "--probes", str(root / "probes.npz")]  # fmt: skip


def test_cli_score(cli_files, tmp_path, capsys):
    out = tmp_path / "score.json"
    args = ["memorisation", "score", *_model_args(cli_files), "--text", "MARY", "--out", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "evidence of memorisation" in printed and "memorised" not in printed
    assert "wilcoxon" in printed and "paper's test" in printed
    record = json.loads(out.read_text())
    assert record["feature"]["text"] == "MARY" and record["m"] > 0
    # MARY above every one of the 199 decoys: p = 1 / 200, exposure log2(200).
    assert record["calibrated"]["rank"] == 1 and record["calibrated"]["pvalue"] == 1 / 200
    assert len(record["calibrated"]["decoys"]) == 199
    assert set(record["tests"]) == {"student", "welch", "paired", "wilcoxon"}
    assert len(record["d_unique"]) == 80
    assert main(args) == 2  # refuses to overwrite
    assert "already exists" in capsys.readouterr().err
    level = tmp_path / "level.json"
    with pytest.raises(SystemExit) as refused:  # refused while parsing, in the library's words
        main([*args[:-2], "--alpha", "1.5", "--out", str(level)])
    assert refused.value.code == 2
    assert "--alpha: must be in (0, 1), got 1.5" in capsys.readouterr().err
    assert not level.exists()
    assert main([*args, "--overwrite", "--text", "BOB"]) == 0


def test_cli_scan(cli_files, tmp_path, capsys):
    out = tmp_path / "scan"
    base = ["memorisation", "scan", *_model_args(cli_files), "--roster"]
    assert main([*base, str(cli_files / "roster.csv"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "MARY" in printed.splitlines()[2]  # first row of the table
    assert json.loads((out / "leak_scan.json").read_text())["rows"][0]["name"] == "MARY"
    assert (out / "leak_scan.html").is_file()
    assert json.loads((out / "leak_scan.json").read_text())["settings"]["attribution"]
    off = tmp_path / "off"
    roster = str(cli_files / "roster.csv")
    assert main([*base, roster, "--out", str(off), "--no-attribution"]) == 0
    record = json.loads((off / "leak_scan.json").read_text())
    assert record["settings"]["attribution"] is False and record["attributions"] == []
    capsys.readouterr()
    bad = tmp_path / "bad.csv"
    bad.write_text("name\nMARY\nJOSEPHINE\n")
    assert main([*base, str(bad), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    # Issue 16 item 10: the message names the roster line, never the (patient) name.
    assert err.count("\n") == 1 and "do not fit" in err and "line 3 of bad.csv" in err
    assert "JOSEPHINE" not in err
    assert not (tmp_path / "x").exists()


class _SigtermError(Exception):
    """Stands for SIGTERM arriving during a chunk of passes."""


def _interrupted(monkeypatch, after: int) -> list[int]:
    """Make the scan's text passes die after ``after`` chunks; returns the chunk sizes run."""
    import importlib

    module = importlib.import_module("monai_forget.memorisation.scan_models")
    original, sizes = module.text_divergences, []

    def dying(model, images, clean, texts, **kwargs):
        if len(sizes) == after:
            raise _SigtermError
        sizes.append(len(texts))
        return original(model, images, clean, texts, **kwargs)

    monkeypatch.setattr(module, "text_divergences", dying)
    return sizes


def test_an_interrupted_scan_resumes_where_it_stopped(probes, tmp_path, monkeypatch):
    """Issue 34, item 7: a scan killed part way kept nothing. Its passes are saved chunk by
    chunk; run again, it computes only what is left, with the same decoys, and gives
    the uninterrupted scan's numbers; a checkpoint of another scan is refused."""
    from monai_forget.memorisation.scan_passes import CHUNK

    model, refs = knows("MARY"), [knows(), knows("BOB", gain=0.1)]
    whole = leak_scan(model, probes, ROSTER, SAVED_SCAN, references=refs)
    checkpoint = tmp_path / "scan.partial.npz"
    texts = len(ROSTER) + sum(len(n.texts) for n in whole.nulls)  # names and decoys
    with monkeypatch.context() as patch:
        _interrupted(patch, after=3)
        with pytest.raises(_SigtermError):
            leak_scan(model, probes, ROSTER, SAVED_SCAN, references=refs, checkpoint=checkpoint)
    assert checkpoint.is_file() and b"MARY" not in checkpoint.read_bytes()  # no name kept
    with monkeypatch.context() as patch:
        sizes = _interrupted(patch, after=10**6)
        resumed = leak_scan(
            model,
            probes,
            ROSTER,
            LeakScanConfig(decoys=600),
            references=refs,
            checkpoint=checkpoint,
        )  # fmt: skip  (the decoy seed: the file's)
    assert sum(sizes) == 3 * texts - 3 * CHUNK  # three models' passes, three chunks done
    assert resumed.settings["decoy_seed"] == 5
    assert [r.__dict__ for r in resumed.rows] == [r.__dict__ for r in whole.rows]
    for a, b in zip(resumed.nulls, whole.nulls, strict=True):
        assert a.texts == b.texts and np.array_equal(a.m, b.m)
    with pytest.raises(ValueError, match="holds an interrupted scan of another model"):
        leak_scan(knows("BOB"), probes, ROSTER, SAVED_SCAN, checkpoint=checkpoint)


def test_cli_scan_resumes_from_its_output_folder(cli_files, probes, tmp_path, monkeypatch, capsys):
    """The command keeps the scan's progress in --out and, run again, resumes; the
    progress file goes once the result is written."""
    from monai_forget.cli.memorisation_run import PARTIAL_SCAN

    out = tmp_path / "scan"
    args = ["memorisation", "scan", *_model_args(cli_files), "--roster",
            str(cli_files / "roster.csv"), "--decoys", "600", "--out", str(out)]  # fmt: skip
    with monkeypatch.context() as patch:
        _interrupted(patch, after=1)
        with pytest.raises(_SigtermError):
            main(args)
    assert (out / PARTIAL_SCAN).is_file() and not (out / "leak_scan.json").exists()
    capsys.readouterr()
    assert main(args) == 0
    assert "resuming the interrupted scan" in capsys.readouterr().err
    assert not (out / PARTIAL_SCAN).exists()
    record = json.loads((out / "leak_scan.json").read_text())
    config = LeakScanConfig(decoys=600, decoy_seed=record["settings"]["decoy_seed"])
    again = leak_scan(knows("MARY"), probes, ROSTER, config)
    assert [r["m"] for r in record["rows"]] == [r.m for r in again.rows]


def test_cli_errors_are_one_line(cli_files, tmp_path, capsys):
    args = [
        "memorisation",
        "score",
        *_model_args(cli_files),
        "--text",
        "A",
        "--position",
        "0",
        "27",
    ]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("monai-forget: error:") and "does not fit" in err


# --------------------------------------------------------------------------- real model


@pytest.mark.slow
def test_scan_on_real_mnist_models_across_training_seeds(shared_data):
    """MLP-1 (App. A.3, the paper's training) on 600 MNIST digits, "ANNA" burned into one
    training image whose label the rest of the data contradicts (a mislabelled image: the
    model fits it only by memorising something about it). Memorisation varies with the
    training seed (the paper, Sec. 3.3), so the assertions are checked for several seeds:
    each canary model ranks ANNA first with evidence for it alone, and its control (the
    same data and seed without the name) gives evidence for no name. (Both held for all
    of seeds 0-9 when this test was written; it runs three.)"""
    from monai_forget.data import LabelledImages, load_mnist_test, load_pneumoniamnist

    mnist = load_mnist_test(shared_data)
    order = np.random.default_rng(0).permutation(len(mnist))
    train, val = mnist.subset(order[:600]), mnist.subset(order[600:900])
    labels = np.array(train.labels)
    labels[0] = (labels[0] + 1) % 10
    relabelled = LabelledImages(train.images, labels, train.ids, train.num_classes)
    canary = inject_feature(relabelled, 0, UniqueFeature.from_text("ANNA", (1, 1), 1, 1.0))
    probes = load_pneumoniamnist("test", shared_data).subset(np.arange(200))
    cfg = EarlyStoppingTraining.paper("mlp-1", {"in_shape": (1, 28, 28), "num_classes": 10})
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a small model: one thread is faster on a shared CPU
    try:
        for seed in (0, 1, 2):
            config = LeakScanConfig(decoys=249, decoy_seed=seed, seed=seed)  # BH floor 10/250
            model, _ = cfg.train(canary, val, seed=seed)
            result = leak_scan(model, probes, ROSTER, config)
            control, _ = cfg.train(relabelled, val, seed=seed)
            control_result = leak_scan(control, probes, ROSTER, config)
            assert result.rank_of("ANNA") == 1, seed
            assert result.significant_names() == ["ANNA"], seed
            assert control_result.significant_names() == [], seed
    finally:
        torch.set_num_threads(threads)


def test_cli_score_and_scan_give_the_librarys_results(cli_files, tmp_path, capsys):
    """Issue 52: ``memorisation score`` and ``memorisation scan`` (their defaults) decide as
    ``memorisation_score`` + ``MemorisationScore.significant`` and ``leak_scan`` (the
    library's defaults) on the same model, probes and decoy seed."""
    from monai_forget.data import load_images
    from monai_forget.memorisation import memorisation_score

    probes = load_images(cli_files / "probes.npz")
    model = MLP1(**ARGS)
    model.load_state_dict(torch.load(cli_files / "model.pt", weights_only=True))
    verdicts = {}
    for text in ("MARY", "BOB"):  # the model knows MARY, not BOB
        out = tmp_path / f"{text}.json"
        assert main(["memorisation", "score", *_model_args(cli_files), "--text", text,
                     "--decoys", "49", "--decoy-seed", "4", "--out", str(out)]) == 0  # fmt: skip
        said = capsys.readouterr().out.splitlines()[0]
        api = memorisation_score(
            model, probes, UniqueFeature.from_text(text), decoys=49, decoy_seed=4
        )
        cli = json.loads(out.read_text())
        expected = json.loads(json.dumps(api.to_dict(per_probe=True)))
        assert {k: cli[k] for k in expected} == expected
        verdicts[text] = api.significant()
        assert ("no evidence of memorisation" not in said) is verdicts[text], said
    assert verdicts == {"MARY": True, "BOB": False}
    scan = tmp_path / "scan"
    command = ["memorisation", "scan", *_model_args(cli_files), "--roster",
               str(cli_files / "roster.csv"), "--decoy-seed", "4", "--out", str(scan)]  # fmt: skip
    assert main(command) == 0
    cli_rows = json.loads((scan / "leak_scan.json").read_text())["rows"]
    result = leak_scan(model, probes.images, ROSTER, LeakScanConfig(decoy_seed=4))
    api_rows = json.loads(json.dumps(result.to_dict()["rows"]))
    assert cli_rows == api_rows and [r["name"] for r in api_rows if r["significant"]] == ["MARY"]
