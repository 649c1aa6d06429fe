"""AuditResult JSON round trip, atomic non-clobbering saves, and the HTML report."""

import base64
import dataclasses
import re

import markupsafe
import numpy as np
import pytest

from monai_forget.audit import AuditResult, KSReference, render_report, write_report
from monai_forget.audit.result import share_text
from monai_forget.inference import Predictions


def _ks_result(rho_inputs=(0.95, 0.9, 0.5)) -> AuditResult:
    rng = np.random.default_rng(0)
    preds = [
        Predictions(np.stack([1 - c, c], 1), np.ones(20, dtype=int))
        for c in (rng.uniform(lo, 1, 20) for lo in rho_inputs)
    ]
    target, query_shadow, calibration_shadow = preds
    reference = KSReference.from_predictions(query_shadow, calibration_shadow)
    return reference.audit(target, label="provider <C>")


def test_json_round_trip_keeps_every_field(tmp_path):
    result = _ks_result().adding(provenance={"seed": 3, "models": {"target": "abc"}})
    path = result.save(tmp_path / "r.json")
    again = AuditResult.load(path)
    assert again.to_dict() == result.to_dict()
    assert again.decision == result.decision and again.statistic == result.statistic
    np.testing.assert_allclose(
        again.arrays["target_confidence"], result.arrays["target_confidence"]
    )


def test_non_finite_values_survive_json():
    result = AuditResult("ks", "forgotten", "rho_KS", float("inf"), "rule", details={"df": np.nan})
    again = AuditResult.from_json(result.to_json())
    assert again.statistic == float("inf")
    assert again.details["df"] == "nan"


def test_save_refuses_to_overwrite_and_leaves_file_intact(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("precious")
    with pytest.raises(FileExistsError, match="overwrite"):
        _ks_result().save(path)
    assert path.read_text() == "precious"
    _ks_result().save(path, overwrite=True)
    assert AuditResult.load(path).method == "ks"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary left behind


def test_bad_decision_refused():
    with pytest.raises(ValueError, match="decision"):
        AuditResult("ks", "maybe", "rho_KS", 1.0, "rule")


def test_report_has_table_escaped_labels_and_valid_png(tmp_path):
    result = _ks_result()
    html = render_report([result], title="Audit")
    assert "provider &lt;C&gt;" in html and "<C>" not in html
    assert result.decision in html and "rho_KS" in html
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', html)
    assert len(images) == 1
    assert base64.b64decode(images[0]).startswith(b"\x89PNG")
    path = write_report(result, tmp_path / "report.html")
    assert path.read_text() == render_report([result], title="Withdrawal audit")
    with pytest.raises(FileExistsError):
        write_report(result, path)
    with pytest.raises(ValueError, match="no audit results"):
        write_report([], tmp_path / "empty.html")


def _refmodel_result(shift: float, label: str, member_shift: float = 1.5) -> AuditResult:
    from monai_forget.audit import RefModelReference, RoleOutputs

    rng = np.random.default_rng(1)
    sizes = {"query": 40, "members": 300, "nonmembers": 300}
    reference = RefModelReference(
        hashes={r: np.array([f"{r}{i:060d}" for i in range(n)]) for r, n in sizes.items()},
        labels={r: rng.integers(0, 3, n) for r, n in sizes.items()},
        reference_mean={r: np.zeros(n) for r, n in sizes.items()},
        sigma=1.0,
        n_references=4,
        score="lira",
    )
    phi = {
        "query": rng.normal(shift, 1, 40),
        "members": rng.normal(member_shift, 1, 300),
        "nonmembers": rng.normal(0, 1, 300),
    }
    return reference.audit(RoleOutputs(phi), label=label)


def test_report_leads_with_one_verdict_per_scenario_decided_by_reference_models():
    remembered = _refmodel_result(1.5, "provider C")
    papers_view = dataclasses.replace(_ks_result(), label="provider C")
    unclear = _refmodel_result(0.0, "provider D", member_shift=0.2)  # too weak a signal
    html = render_report([papers_view, remembered, unclear], title="Audit")
    verdicts = html.split("<h2>All audits</h2>")[0]
    # The reference-model audit decides provider C even though K-S's result came first.
    # its bound reads 100 % (a wholly remembered D_Q): said to be no bound, never "at most 100%"
    assert share_text(remembered.details["membership_strength_upper"]) == "100%"
    assert re.search(
        r"provider C</td><td><span[^>]*>not forgotten</span></td><td>no bound: the audit "
        r"cannot exclude full membership</td><td>reference models",
        verdicts,
    )
    assert "at most 100%" not in html
    assert "K-S (Liu &amp; Tsaftaris 2020): " + papers_view.decision in verdicts
    assert unclear.decision == "inconclusive"
    # the lead says what is short: no bound (the members do not stand out), or a size
    lead = html.split("<table>")[0]
    assert str(markupsafe.escape(unclear.details["reason"])) in lead
    assert "more known members and non-members" in unclear.details["reason"] or (
        "it would take" in unclear.details["reason"]
    )
    # "inconclusive" is drawn in its own colour, not in the red of "not forgotten"
    assert '<span class="inconclusive">inconclusive</span>' in html
    assert '<span class="not-forgotten">inconclusive</span>' not in html
    assert "TPR" in html and "at FPR 0.001" in html
    assert html.count("data:image/png") == 3
    # issue 66, item 4: the terms are defined before the first verdict uses them
    terms = lead.split("<strong>provider")[0]
    terms_defined = ("<strong>D_Q</strong> is", "<strong>known members</strong> are",
                     "<strong>membership strength</strong> is",
                     "<strong>p_member</strong> is a p-value")  # fmt: skip
    for term in terms_defined:
        assert term in terms, term


def test_report_shows_long_values_whole():
    """Issue 16 item 14: no value is cut (the old report stopped at 400 characters)."""
    import json

    thresholds = [round(0.001 * k + 1e-7, 7) for k in range(300)]  # ~3000 characters
    result = _ks_result().adding(
        details={"thresholds": thresholds},
        provenance={"argv": ["audit", "ks", "--label", "x" * 900 + "END"]},
    )
    html = render_report([result], title="Audit")
    assert len(json.dumps(thresholds)) > 2000
    # every value, at 4 significant digits (no 16-digit floats reach the reader)
    assert json.dumps([float(f"{t:.4g}") for t in thresholds]) in html
    assert "x" * 900 + "END" in html


def test_report_quotes_the_error_rates_of_the_matching_cell() -> None:
    """The reference-model report quotes, for its margin and the nearest measured |D_Q|,
    the false "forgotten" rate where the true share is at or above the margin (for
    "forgotten") and the false "not forgotten" rate on never-seen sets (for "not
    forgotten"); for a margin or design never measured it says that no cell matches."""
    from monai_forget.audit.report import matching_error_rates

    remembered = _refmodel_result(1.5, "provider C")
    assert remembered.decision == "not forgotten"
    quoted = matching_error_rates(remembered)
    assert quoted["rows"] and all(r["size"] == 50 for r in quoted["rows"])  # |D_Q| 40
    assert quoted["sentences"][0].startswith(
        "Where the model never saw D_Q (MNIST; D_Q from the non-members' source; |D_Q| 50; "
        '15 trainings), the audit wrongly said "not forgotten" in '
    )
    assert all(x.endswith(".") and ". " not in x for x in quoted["sentences"])  # one sentence each
    assert 'said "forgotten"' not in quoted["statement"]
    assert all(r["margin"] == 0.5 for r in quoted["rows"])
    shares = {r["share"] for r in quoted["rows"]}
    assert 0.0 in shares and shares <= {0.0, 0.5, 1.0}
    html = render_report([remembered], title="Audit")
    for sentence in quoted["sentences"]:
        assert f"<li>{markupsafe.escape(sentence)}</li>" in html
    other_margin = remembered.adding(details={"margin": 0.3})
    assert matching_error_rates(other_margin)["statement"].startswith("No measured cell matches")
    unknown = remembered.adding(details={"reference_design": "never measured"})
    assert matching_error_rates(unknown)["statement"].startswith("No measured cell matches")
    # the segmentation audit's paired design quotes its own benchmark's cells (ACDC)
    paired = matching_error_rates(remembered.adding(details={"reference_design": "paired"}))
    assert paired["rows"] and all(r["dataset"].startswith("ACDC") for r in paired["rows"])
    # online reference models quote the online benchmark's cells, offline ones never do
    online = matching_error_rates(remembered.adding(details={"reference_setting": "online"}))
    assert online["rows"] and all(r["setting"] == "online" for r in online["rows"])
    assert all("; online reference models)" in x for x in online["sentences"])
    assert "reference models)" not in quoted["statement"]
    assert all(r.get("setting", "offline") == "offline" for r in quoted["rows"])
    assert {r["trainings"] for r in online["rows"]} == {15}


def _rate(text: str) -> dict:
    """A packaged measured rate (numbers) from how a report prints it."""
    value, low, high = (float(x.strip("[],")) for x in text.split())
    return {"count": 0, "draws": 100, "rate": value, "low": low, "high": high, "interval": "wilson"}


def test_a_forgotten_decision_quotes_the_shifted_sites_cells_too(monkeypatch) -> None:
    """A "forgotten" answer quotes the false "forgotten" rate of every measured D_Q
    source, the shifted sites' too (issue 50: the auditor cannot tell which one D_Q
    comes from): the worst cell of each, named, and flagged where above alpha."""
    from monai_forget.audit import report

    forgotten = _refmodel_result(0.0, "provider E", member_shift=3.0)
    assert forgotten.decision == "forgotten"
    size = forgotten.details["units"]["query"]

    def cell(source: str, share: float, rate: dict) -> dict:
        return {"auditor": "refmodel", "design": "population", "dataset": "X", "source": source,
                "share": share, "size": size, "margin": 0.5, "trainings": 5,
                "forgotten": rate, "not_forgotten": _rate("0.000 [0.000, 0.010]")}  # fmt: skip

    few = "other site, a few of its images trained on"
    cells = [
        cell("same", 0.5, _rate("0.020 [0.010, 0.040]")),
        cell("same", 1.0, _rate("0.000 [0.000, 0.010]")),
        cell(few, 0.5, _rate("0.070 [0.050, 0.100]")),
        cell(few, 0.0, _rate("0.900 [0.850, 0.930]")),  # a never-seen D_Q: "forgotten" is right
    ]
    monkeypatch.setattr(report, "_cells", lambda: cells)
    quoted = report.matching_error_rates(forgotten)
    statement = quoted["statement"]
    same, few_site = quoted["sentences"]
    assert same == (
        f"Where 50% or more of D_Q was trained on (X; D_Q from the non-members' source; "
        f'|D_Q| {size}; 5 trainings), the audit wrongly said "forgotten" in 2.0 % of 100 '
        "audits (95 % interval 1.0 to 4.0 %)."
    )
    assert few_site.startswith(
        "Where 50% or more of D_Q was trained on (X; D_Q from another site the target trained "
        f"on only a few images of; |D_Q| {size}; 5 trainings), the audit wrongly said "
        '"forgotten" in 7.0 % of 100 audits'
    )
    assert few_site.endswith("more than its alpha of 0.05: this error is not shown to be "
                             "controlled there.")  # fmt: skip
    assert "90.0 %" not in statement and {r["share"] for r in quoted["rows"]} == {0.5, 1.0}


def test_an_audit_given_the_sites_images_quotes_the_cells_measured_so(monkeypatch) -> None:
    """An audit given D_Q's site's images (both designs) quotes the cells measured that
    way and no other; an audit without them never quotes those; an online audit given
    the site's images matches no cell."""
    from monai_forget.audit import report

    remembered = _refmodel_result(1.5, "provider C")
    size = remembered.details["units"]["query"]

    def cell(site: bool, rate: dict) -> dict:
        return {"auditor": "refmodel", "design": "population", "dataset": "X",
                "source": "other site, trained on it", "share": 0.0, "size": size,
                "margin": 0.5, "trainings": 5, "setting": "offline", "site": site,
                "not_forgotten": rate, "forgotten": _rate("0.000 [0.000, 0.010]")}  # fmt: skip

    monkeypatch.setattr(
        report,
        "_cells",
        lambda: [cell(True, _rate("0.040 [0.026, 0.061]")), cell(False, _rate("0.3 [0.2, 0.4]"))],
    )
    given = remembered.adding(details={"site_images": 600})
    quoted = report.matching_error_rates(given)
    assert [r["site"] for r in quoted["rows"]] == [True]
    assert quoted["sentences"] == [
        f"Where the model never saw D_Q (X; D_Q from another site the target trained on other "
        f"images of; |D_Q| {size}; 5 trainings; both designs, the answer where they agree), "
        'the audit wrongly said "not forgotten" in 4.0 % of 100 audits (95 % interval 2.6 to '
        "6.1 %)."
    ]
    assert [r["site"] for r in report.matching_error_rates(remembered)["rows"]] == [False]
    online = report.matching_error_rates(given.adding(details={"reference_setting": "online"}))
    assert online["statement"].startswith("No measured cell matches this setting")
    assert "given D_Q's site's images" in online["statement"]


def test_a_measured_error_above_alpha_is_flagged(monkeypatch) -> None:
    """Where the matching cell's measured error exceeds the audit's alpha, the quoted
    statement says the error is not controlled there; at or below alpha it does not."""
    from monai_forget.audit import report

    remembered = _refmodel_result(1.5, "provider C")
    assert remembered.details["alpha"] == 0.05

    def cells(rate: dict) -> list[dict]:
        return [{"auditor": "refmodel", "design": "population", "dataset": "X",
                 "source": "same", "share": 0.0, "size": 50, "margin": 0.5, "trainings": 5,
                 "not_forgotten": rate, "forgotten": _rate("0.000 [0.000, 0.010]")}]  # fmt: skip

    monkeypatch.setattr(report, "_cells", lambda: cells(_rate("0.080 [0.060, 0.100]")))
    flagged = report.matching_error_rates(remembered)["statement"]
    assert "8.0 % of 100 audits" in flagged and "more than its alpha of 0.05" in flagged
    monkeypatch.setattr(report, "_cells", lambda: cells(_rate("0.050 [0.030, 0.070]")))
    assert "alpha" not in report.matching_error_rates(remembered)["statement"]


def test_the_summary_says_what_p_member_is_and_never_bounds_at_100_percent():
    """Issue 66, item 4: p_member read backwards ("p_member = 0.0001 ... not forgotten"):
    the summary says it is a p-value whose small values are evidence of remembering; a
    statistic that needs no such words gets none; an upper bound at or past 100 % is said
    to be no bound, never "at most 100%"."""
    from monai_forget.audit.result import strength_text

    remembered = AuditResult(
        method="refmodel", decision="not forgotten", statistic_name="p_member",
        statistic=0.0001, rule="p <= alpha",
        details={"reason": f"evidence of remembering; {strength_text(1.2)}"},
    )  # fmt: skip
    line = remembered.summary()
    assert "p_member = 0.0001, a p-value: small means evidence the model still remembers" in line
    assert "no bound (the audit cannot exclude full membership)" in line and "100%" not in line
    ks = AuditResult(method="ks", decision="forgotten", statistic_name="rho_KS",
                     statistic=0.4, rule="rho <= 0.5", details={"reason": "below"})  # fmt: skip
    assert "a p-value" not in ks.summary() and "rho_KS = 0.4)" in ks.summary()


def test_each_verdict_leads_with_one_plain_sentence():
    """Issue 66, item 4: what was audited, the decision and the bound in words, one
    sentence per decision, each rendered in its case and absent from the others."""
    from monai_forget.audit.report import plain_verdict

    remembered = _refmodel_result(1.5, "provider C")
    forgotten = _refmodel_result(0.0, "provider E", member_shift=3.0)
    unclear = _refmodel_result(0.0, "provider D", member_shift=0.2)
    assert [r.decision for r in (remembered, forgotten, unclear)] == [
        "not forgotten", "forgotten", "inconclusive"]  # fmt: skip
    said = {r.decision: plain_verdict(r) for r in (remembered, forgotten, unclear)}
    assert said["not forgotten"].startswith("The audit found evidence that the model still "
                                            "remembers the 40 images of provider C: ")  # fmt: skip
    assert f"p-value {remembered.statistic:.2g}, at most 0.05): not forgotten." in said[
        "not forgotten"]  # fmt: skip
    upper = share_text(forgotten.details["membership_strength_upper"])
    assert said["forgotten"] == (
        "The audit found no evidence that the model remembers the 40 images of provider E, and "
        f"their membership strength is at most {upper} of the known members' (95% confidence), "
        "below the margin of 50%: forgotten. This stands against a shift the reference models "
        "cannot see (the target alone scoring D_Q's site lower than they do), by up to "
        f"{forgotten.details['hidden_shift_tolerance']:.2f} sd of the known non-members' "
        "membership probabilities; a larger one could hide remembering."
    )
    assert said["inconclusive"].startswith("The audit cannot tell whether the model remembers "
                                           "the 40 images of provider D")  # fmt: skip
    html = render_report([remembered, forgotten, unclear], title="Audit")
    lead = html.split("<h2>All audits</h2>")[0]
    for decision, sentence in said.items():
        assert lead.count(str(markupsafe.escape(sentence))) == 1, decision
        # each sentence is in the paragraph before its own scenario's line, no other
        mine = lead.split(str(markupsafe.escape(sentence)))[1].split("<strong>")[1]
        assert mine.startswith({"not forgotten": "provider C", "forgotten": "provider E",
                                "inconclusive": "provider D"}[decision])  # fmt: skip


def test_the_papers_auditors_carry_their_measured_error_rates():
    """Issue 66, item 4: a K-S or EMA verdict carries the rate at which the auditor gave
    that decision wrongly on the packaged benchmark (a false "forgotten" on sets the
    model trained on, a false "not forgotten" on sets it never saw), one sentence per
    data set, beside its verdict and beside its view of a scenario another auditor
    decided; never the other decision's rate."""
    import json
    from importlib import resources

    from monai_forget.audit.report import paper_rate_sentences

    cells = json.loads(resources.files("monai_forget.audit").joinpath(
        "measured_error_rates.json").read_text())["cells"]  # fmt: skip

    def packaged(kind: str, error: str) -> list[str]:
        rows = [r for r in cells if r["auditor"] == "ks" and r.get("k") == 100
                and r["kind"] == kind and r["size"] == 20]  # fmt: skip
        return [f"{100 * r[error]['rate']:.1f} % of {r[error]['draws']} audits" for r in rows]

    said = _ks_result()  # |D_Q| 20, the measured size
    for decision, kind, error, seen in (
        ("forgotten", "members", "forgotten", "the model trained on"),
        ("not forgotten", "non-members", "not_forgotten", "the model never saw"),
    ):
        result = dataclasses.replace(said, decision=decision)
        sentences = paper_rate_sentences(result)
        figures = packaged(kind, error)
        assert len(sentences) == len(figures) == 2  # MNIST and PneumoniaMNIST
        for sentence, figure in zip(sentences, figures, strict=True):
            assert f"20 MNIST images {seen}" in sentence or f"images {seen}" in sentence
            assert f'wrongly said "{decision}" in {figure}' in sentence
        other = "not forgotten" if decision == "forgotten" else "forgotten"
        assert not any(f'said "{other}"' in x for x in sentences)
        # beside the view, under the reference-model verdict that decided the scenario
        view = dataclasses.replace(result, label="provider C")
        html = render_report([_refmodel_result(1.5, "provider C"), view], title="Audit")
        lead = html.split("<h2>All audits</h2>")[0]
        beside = lead.split(f"The paper's view, K-S (Liu &amp; Tsaftaris 2020): {decision}")
        assert len(beside) == 2, decision
        for sentence in sentences:
            assert f"<li>{markupsafe.escape(sentence)}</li>" in beside[1]
        # and under its own verdict where it decides alone
        alone = render_report([result], title="Audit").split("<h2>All audits</h2>")[0]
        assert all(f"<li>{markupsafe.escape(x)}</li>" in alone for x in sentences)
        assert "The paper's view" not in alone
