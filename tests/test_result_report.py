"""AuditResult JSON round trip, atomic non-clobbering saves, and the HTML report."""

import base64
import math
import re

import numpy as np
import pytest

from monai_forget.audit import AuditResult, KSAuditor, render_report, write_report
from monai_forget.inference import Predictions


def _ks_result(rho_inputs=(0.95, 0.9, 0.5)) -> AuditResult:
    rng = np.random.default_rng(0)
    preds = [
        Predictions(np.stack([1 - c, c], 1), np.ones(20, dtype=int))
        for c in (rng.uniform(lo, 1, 20) for lo in rho_inputs)
    ]
    return KSAuditor.audit_predictions(*preds, label="provider <C>")


def test_json_round_trip_keeps_every_field(tmp_path):
    result = _ks_result()
    result.provenance = {"seed": 3, "models": {"target": "abc"}}
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
    from monai_forget.audit import RefModelReference

    rng = np.random.default_rng(1)
    sizes = {"query": 40, "members": 300, "nonmembers": 300}
    reference = RefModelReference(
        hashes={r: np.array([f"{r}{i:060d}" for i in range(n)]) for r, n in sizes.items()},
        labels={r: rng.integers(0, 3, n) for r, n in sizes.items()},
        reference_mean={r: np.zeros(n) for r, n in sizes.items()},
        sigma=1.0,
        n_references=4,
    )
    phi = {
        "query": rng.normal(shift, 1, 40),
        "members": rng.normal(member_shift, 1, 300),
        "nonmembers": rng.normal(0, 1, 300),
    }
    return reference.audit(phi, label=label)


def test_report_leads_with_one_verdict_per_scenario_decided_by_reference_models():
    remembered = _refmodel_result(1.5, "provider C")
    papers_view = _ks_result()
    papers_view.label = "provider C"
    unclear = _refmodel_result(0.0, "provider D", member_shift=0.2)  # too weak a signal
    html = render_report([papers_view, remembered, unclear], title="Audit")
    verdicts = html.split("<h2>All audits</h2>")[0]
    # The reference-model audit decides provider C even though K-S's result came first.
    assert re.search(
        r"provider C</td><td><span[^>]*>not forgotten</span></td><td>reference models", verdicts
    )
    assert "K-S (Liu &amp; Tsaftaris 2020): " + papers_view.decision in verdicts
    assert unclear.decision == "inconclusive"
    assert "Warning: too little power" in html
    # the warning says what would give the power: a query size, or none at all
    need = unclear.details["needed_query_size"]
    sizing = f"about {int(need)} query samples" if math.isfinite(need) else "no query size would"
    assert sizing in html
    assert "TPR" in html and "at FPR 0.001" in html
    assert html.count("data:image/png") == 3


def test_report_shows_long_values_whole():
    """Issue 16 item 14: no value is cut (the old report stopped at 400 characters)."""
    import json

    thresholds = [round(0.001 * k + 1e-7, 7) for k in range(300)]  # ~3000 characters
    result = _ks_result()
    result.details["thresholds"] = thresholds
    result.provenance = {"argv": ["audit", "ks", "--label", "x" * 900 + "END"]}
    html = render_report([result], title="Audit")
    assert len(json.dumps(thresholds)) > 2000
    assert json.dumps(thresholds) in html
    assert "x" * 900 + "END" in html


def test_report_quotes_the_error_rates_of_the_design_that_decided() -> None:
    """The shipped rates file holds both reference designs; a report quotes the rows of
    its own design (the segmentation audit's paired one, else the classifier's
    population one) at the nearest measured |D_Q|, and none for an unknown design."""
    import json
    from importlib import resources

    from monai_forget.audit.report import measured_error_rates

    cells = json.loads(
        resources.files("monai_forget.audit").joinpath("measured_error_rates.json").read_text()
    )["cells"]
    refmodel = [c for c in cells if c["auditor"] == "refmodel" and c["k"] == 100]
    for design in ("population", "paired"):
        rows = measured_error_rates("refmodel", 35, design)
        expected = [c for c in refmodel if c["design"] == design and c["size"] == 50]
        assert rows == expected and rows
    assert measured_error_rates("refmodel", 35, "paired") != measured_error_rates("refmodel", 35)
    assert measured_error_rates("refmodel", 35, "unknown") == []
    result = _refmodel_result(0.0, "provider P")
    result.details["reference_design"] = "paired"
    html = render_report([result], title="Audit")
    paired = measured_error_rates("refmodel", 40, "paired")
    population = measured_error_rates("refmodel", 40)
    assert all(r["not_forgotten"] in html for r in paired)
    assert any(r["not_forgotten"] not in html for r in population)
