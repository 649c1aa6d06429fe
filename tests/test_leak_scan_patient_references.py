"""Leak scans against reference models trained on halves of the patients (issue 36,
item 5): the splits, which references judge each name, the scan, the report, the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from test_memorisation_scan import ARGS, ROSTER, knows

from monai_forget.cli import main
from monai_forget.memorisation import (
    LeakScanConfig,
    Roster,
    leak_scan,
    read_patient_ids,
    read_roster,
    split_patients,
    write_scan_report,
)
from monai_forget.memorisation.decoys import decoy_template
from monai_forget.memorisation.patient_references import unseen_references
from monai_forget.memorisation.reference_scan import relative_to_references

#: Each roster name is the patient of the same index: EVE's is "p2".
PATIENTS = [f"p{i}" for i in range(len(ROSTER))]
LEAKED = "EVE"
#: Two pairs of halves; EVE's patient p2 is in reference 0 (pair 1) and 3 (pair 2).
HALVES = ["p0 p2 p4 p6 p8", "p1 p3 p5 p7 p9", "p1 p4 p5 p8 p9", "p0 p2 p3 p6 p7"]
REFERENCE_PATIENTS = [h.split() for h in HALVES]


@pytest.fixture(scope="module")
def probes() -> np.ndarray:
    return np.random.default_rng(0).random((80, 1, 28, 28)).astype(np.float32) * 0.3


@pytest.fixture(scope="module")
def references() -> list:
    """Every model of the design reacts to ANNA; the two references whose training
    patients include EVE's (0 and 3) saw her name burned into her series."""
    return [
        knows("ANNA", LEAKED, gain=0.5),
        knows("ANNA", gain=0.45),
        knows("ANNA", gain=0.55),
        knows("ANNA", LEAKED, gain=0.45),
    ]


def test_split_patients_leaves_each_patient_out_of_one_model_per_pair():
    ids = [f"p{i % 7}" for i in range(30)]  # one ID per image; 7 patients
    splits = split_patients(ids, pairs=3, seed=1)
    assert len(splits) == 6
    everyone = {f"p{i}" for i in range(7)}
    for first, second in zip(splits[::2], splits[1::2], strict=True):
        assert first | second == everyone and not first & second
        assert {len(first), len(second)} == {3, 4}
    assert splits == split_patients(ids, pairs=3, seed=1)
    assert splits != split_patients(ids, pairs=3, seed=2)
    with pytest.raises(ValueError, match="pairs >= 2"):
        split_patients(ids, pairs=1)
    with pytest.raises(ValueError, match="at least 2"):
        split_patients(["p0", "p0"], pairs=2)


def test_unseen_references_by_hand():
    """p1 is in references 0 and 3, p2 in 1 and 2, p3 in 1 and 3."""
    seen = [{"p1"}, {"p2", "p3"}, {"p2"}, {"p1", "p3"}]
    got = unseen_references(["A", "B", "C"], ["p1", "p2", "p3"], seen)
    assert got == [(1, 2), (0, 3), (0, 2)]
    # p1 also in reference 1: only reference 2 never saw it, one short of the 2 needed;
    # the error names the roster entry, never the name.
    names = Roster(["ALICE", "BOB", "CAROL"], [2, 3, 4], "roster.csv")
    with pytest.raises(ValueError, match=r"entry 1 \(line 2 of roster.csv\)") as err:
        unseen_references(names, ["p1", "p2", "p3"], [{"p1"}, {"p1", "p3"}, {"p2"}, {"p1"}])
    assert "ALICE" not in str(err.value) and "as few as 1 of the 4" in str(err.value)
    with pytest.raises(ValueError, match="one patient ID per name"):
        unseen_references(["A", "B"], ["p1"], seen)
    # IDs in another format match no list: refused, not judged against every reference
    with pytest.raises(ValueError, match="use different IDs"):
        unseen_references(["A", "B", "C"], ["P1", "P2", "P3"], seen)
    # a patient outside the training data is judged against every reference, with a
    # warning that names its entry (a mistyped ID would hide a leak)
    with pytest.warns(UserWarning, match=r"entry 3 of the roster: the patient is in no"):
        got = unseen_references(["A", "B", "C"], ["p1", "p2", "p9"], seen)
    assert got[2] == (0, 1, 2, 3)


def test_each_name_is_judged_against_the_references_that_never_saw_its_patient(
    probes, references, tmp_path
):
    """EVE leaked (the target and the two references that saw her patient react to
    her); ANNA moves every model of the design. Against the references that never saw
    each patient, only EVE is flagged; every reference for every name (the plain option)
    lets the two that saw her absorb the leak."""
    target = knows("ANNA", LEAKED)
    config = LeakScanConfig(decoy_seed=3, decoy_source="letters", decoys=999)  # as measured
    scan = leak_scan(
        target,
        probes,
        ROSTER,
        config,
        references=references,
        reference_patients=REFERENCE_PATIENTS,
        name_patients=PATIENTS,
    )
    assert scan.significant_names() == [LEAKED] and scan.top.name == LEAKED
    rows = {r.name: r for r in scan.rows}
    assert rows[LEAKED].references == (1, 2) and rows["BOB"].references == (0, 3)
    assert scan.settings["references_by_patient"] is True
    # Independent computation: each name's statistic and p are those of a plain scan
    # with only its unseen references, decoys included.
    for name, subset in ((LEAKED, (1, 2)), ("BOB", (0, 3)), ("JOHN", (0, 2))):
        plain = leak_scan(
            target, probes, ROSTER, config, references=[references[k] for k in subset]
        )
        alone = {r.name: r for r in plain.rows}[name]
        assert rows[name].references == subset
        assert rows[name].m == pytest.approx(alone.m, rel=1e-12)
        assert rows[name].pvalue == alone.pvalue
        assert rows[name].m_references == pytest.approx(alone.m_references, rel=1e-12)
        template = decoy_template(name)
        (null,) = [n for n in scan.nulls if (n.template, n.references) == (template, subset)]
        (plain_null,) = [n for n in plain.nulls if n.template == template]
        assert null.texts == plain_null.texts
        np.testing.assert_allclose(null.m, plain_null.m, rtol=1e-12)

    # And from scratch: every model's own M (scans without references, the same decoys)
    # put relative to the unseen references by relative_to_references.
    def own_m(model) -> tuple[list[str], np.ndarray]:
        raw = leak_scan(model, probes, ROSTER, config)
        by_name = {r.name: r.m for r in raw.rows}
        texts = ROSTER + [t for n in raw.nulls for t in n.texts]
        return texts, np.concatenate([[by_name[n] for n in ROSTER], *(n.m for n in raw.nulls)])

    texts, m_target = own_m(target)
    expected, _ = relative_to_references(
        m_target, [own_m(references[k])[1] for k in (1, 2)], texts, len(ROSTER)
    )
    assert rows[LEAKED].m == pytest.approx(expected[ROSTER.index(LEAKED)], rel=1e-9)
    key = (decoy_template(LEAKED), (1, 2))
    (null,) = [n for n in scan.nulls if (n.template, n.references) == key]
    start = texts.index(null.texts[0])
    np.testing.assert_allclose(null.m, expected[start : start + len(null.texts)], rtol=1e-9)
    every = leak_scan(target, probes, ROSTER, config, references=references)
    assert {r.name: r for r in every.rows}[LEAKED].m < rows[LEAKED].m
    # One null per kind of name and set of references, labelled with that set.
    used = {(decoy_template(r.name), r.references) for r in scan.rows}
    assert sorted((n.template, n.references) for n in scan.nulls) == sorted(used)
    # The report quotes the false alarms measured for references by patient.
    json_path, html_path = write_scan_report(scan, tmp_path)
    record = json.loads(json_path.read_text())
    measured = record["measured_false_alarms"]
    assert [r["references_by_patient"] for r in measured] == [True, True]  # two data sets
    assert record["measured_detection"] and all(
        r["references_by_patient"] for r in record["measured_detection"]
    )
    page = html_path.read_text()
    assert "3 of 100 control scans" in page and "4 of 100 control scans" in page
    assert "never saw its patient" in page
    # EVE's row names references 2 and 3 (numbered from 1), BOB's 1 and 4
    assert "<td>2, 3</td></tr>" in page and "<td>1, 4</td></tr>" in page


def test_a_roster_with_patients_feeds_the_scan(probes, references, tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text(
        "name,patient_id\n" + "".join(f"{n},{p}\n" for n, p in zip(ROSTER, PATIENTS, strict=True))
    )
    names = read_roster(roster, patient_column="Patient_ID")
    assert names.patients == PATIENTS
    scan = leak_scan(
        knows("ANNA", LEAKED),
        probes,
        names,
        LeakScanConfig(decoy_seed=3, decoy_source="letters", decoys=999),
        references=references,
        reference_patients=REFERENCE_PATIENTS,
    )
    assert scan.significant_names() == [LEAKED]
    assert read_roster(roster).patients is None
    with pytest.raises(ValueError, match="no column 'mrn'"):
        read_roster(roster, patient_column="mrn")
    gap = tmp_path / "gap.csv"
    gap.write_text("name,patient_id\nANNA,p0\nBOB,\n")
    with pytest.raises(ValueError, match=r"1 name\(s\) without a patient ID .*line 3"):
        read_roster(gap, patient_column="patient_id")


def test_references_by_patient_refuse_inputs_that_do_not_match(probes, references):
    target = knows("ANNA", LEAKED)
    with pytest.raises(ValueError, match="need both"):
        leak_scan(target, probes, ROSTER, references=references, name_patients=PATIENTS)
    for lists, message in (
        (REFERENCE_PATIENTS[:3], "3 patient lists for 4 reference models"),
        # every patient in every reference: no name has a reference that never saw it
        ([PATIENTS] * 4, "entry 1, entry 2, entry 3 and 7 more of the roster: as few as 0"),
    ):
        with pytest.raises(ValueError, match=message):
            leak_scan(
                target,
                probes,
                ROSTER,
                references=references,
                reference_patients=lists,
                name_patients=PATIENTS,
            )


def test_cli_split_patients_then_scan(probes, references, tmp_path, capsys):
    ids = tmp_path / "patients.txt"
    ids.write_text("\n".join(PATIENTS * 3) + "\n")
    splits = tmp_path / "refs"
    args = ["memorisation", "split-patients", "--patients", str(ids), "--pairs", "2",
            "--out", str(splits)]  # fmt: skip
    assert main(args) == 0
    assert (
        "4 reference models in 2 pairs, each on half of the 10 patients" in capsys.readouterr().out
    )
    written = [read_patient_ids(splits / f"reference_{k}_patients.txt") for k in (1, 2, 3, 4)]
    assert written == [sorted(s) for s in split_patients(PATIENTS, 2, 0)]
    assert main(args) == 2 and "already exists" in capsys.readouterr().err
    # The scan, with the hand-made halves (EVE's patient in references 1 and 4).
    torch.save(knows("ANNA", LEAKED).state_dict(), tmp_path / "model.pt")
    np.savez(tmp_path / "probes.npz", images=probes, labels=np.zeros(len(probes), np.int64))
    (tmp_path / "roster.csv").write_text(
        "name,mrn\n" + "".join(f"{n},{p}\n" for n, p in zip(ROSTER, PATIENTS, strict=True))
    )
    base = ["memorisation", "scan", "--model", str(tmp_path / "model.pt"), "--network",
            "mlp-1", "--network-args", json.dumps(ARGS), "--probes", str(tmp_path / "probes.npz"),
            "--roster", str(tmp_path / "roster.csv"), "--decoy-seed", "3"]  # fmt: skip
    for k, (model, half) in enumerate(zip(references, HALVES, strict=True), start=1):
        torch.save(model.state_dict(), tmp_path / f"ref{k}.pt")
        (tmp_path / f"ref{k}.txt").write_text(half.replace(" ", "\n"))
        base += ["--reference-model", str(tmp_path / f"ref{k}.pt")]
    lists = [
        a for k in (1, 2, 3, 4) for a in ("--reference-patients", str(tmp_path / f"ref{k}.txt"))
    ]
    out = tmp_path / "scan"
    assert main([*base, *lists, "--patient-column", "mrn", "--out", str(out)]) == 0
    record = json.loads((out / "leak_scan.json").read_text())
    assert record["significant"] == [LEAKED] and record["settings"]["references_by_patient"]
    capsys.readouterr()
    assert main([*base, *lists, "--out", str(tmp_path / "x")]) == 2
    assert "each roster name's patient (--reference-patients and --patient-column)" in (
        capsys.readouterr().err
    )  # the library's rule (leak_scan), not one of the command line's own
    assert main([*base, *lists[:6], "--patient-column", "mrn", "--out", str(tmp_path / "x")]) == 2
    assert "3 patient lists for 4 reference models" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
