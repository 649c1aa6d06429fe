"""AuditResult JSON round trip, atomic non-clobbering saves, and the HTML report."""

import base64
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
