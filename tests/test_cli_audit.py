"""`monai-forget audit ks|ema` end to end on digits files, and its refusals."""

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from monai_forget.audit import AuditResult
from monai_forget.cli import main
from monai_forget.data import concat
from monai_forget.demo import digits_split
from monai_forget.shadow import ShadowTrainer, SupervisedRecipe

# The embedded default's design, as a user would write it in a recipe file.
SPEC = {
    "network": "mlp",
    "network_args": {"in_shape": [1, 8, 8], "num_classes": 10, "hidden": [256]},
    "steps": 1500,
    "batch_size": 32,
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    sets = digits_split(seed=0)
    recipe = SupervisedRecipe.from_dict(SPEC)
    target = ShadowTrainer(recipe).train(concat(sets["A"], sets["C"]), seed=0)
    torch.save(target.state_dict(), root / "target.pt")
    for name in ("A", "B", "C", "calibration"):
        np.savez(root / f"{name}.npz", images=sets[name].images, labels=sets[name].labels)
    (root / "recipe.json").write_text(json.dumps(SPEC))
    return root


def _args(files, method, query, out, *extra):
    return [
        "audit", method, "--model", str(files / "target.pt"), "--network", "mlp",
        "--network-args", json.dumps(SPEC["network_args"]), "--query", str(files / f"{query}.npz"),
        "--calibration", str(files / "calibration.npz"), "--recipe", str(files / "recipe.json"),
        "--out", str(out), "--cache-dir", str(files / "cache"), *extra,
    ]  # fmt: skip


def _reference_args(files, query, out, *extra):
    """`audit refmodel` with known members A and known non-members the calibration set."""
    base = _args(files, "refmodel", query, out, *extra)
    i = base.index("--calibration")
    base[i : i + 2] = [
        "--members",
        str(files / "A.npz"),
        "--nonmembers",
        str(files / "calibration.npz"),
    ]
    return base


def test_ema_audit_writes_result_and_report(files, tmp_path, capsys):
    # The exit code says the decision: 3 not forgotten (A trained on), 0 forgotten (B).
    assert main(_args(files, "ema", "A", tmp_path / "member")) == 3
    assert main(_args(files, "ema", "B", tmp_path / "held_out")) == 0
    member = AuditResult.load(tmp_path / "member" / "result.json")
    held_out = AuditResult.load(tmp_path / "held_out" / "result.json")
    assert member.decision == "not forgotten"
    assert held_out.decision == "forgotten"
    assert (tmp_path / "member" / "report.html").read_text().count("data:image/png") == 1
    assert "rho_EMA" in capsys.readouterr().out
    assert member.provenance["recipe"].startswith("supervised:")


def test_ks_audit_and_no_silent_overwrite(files, tmp_path, capsys):
    out = tmp_path / "ks"
    code = main(_args(files, "ks", "A", out))
    assert (
        code == {"forgotten": 0, "not forgotten": 3}[AuditResult.load(out / "result.json").decision]
    )
    before = (out / "result.json").read_bytes()
    assert main(_args(files, "ks", "A", out)) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert (out / "result.json").read_bytes() == before
    assert main(_args(files, "ks", "A", out, "--overwrite")) == code


def test_overlapping_query_and_calibration_refused(files, tmp_path, capsys):
    args = _args(files, "ks", "calibration", tmp_path / "x")
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "also appear in the calibration set" in err and "remove these samples" in err
    assert not (tmp_path / "x" / "result.json").exists()


class _Payload:
    def __reduce__(self):
        return (print, ("arbitrary code ran",))


def test_pickled_model_file_refused(files, tmp_path, capsys):
    bad = tmp_path / "evil.pt"
    bad.write_bytes(pickle.dumps({"weights": _Payload()}))
    args = _args(files, "ks", "A", tmp_path / "y")
    args[args.index("--model") + 1] = str(bad)
    assert main(args) == 2
    captured = capsys.readouterr()
    assert "arbitrary code ran" not in captured.out
    assert "pickle" in captured.err.lower() or "unsafe" in captured.err.lower()


def test_bad_network_args(files, tmp_path, capsys):
    args = _args(files, "ks", "A", tmp_path / "z")
    args[args.index("--network-args") + 1] = "{not json"
    assert main(args) == 2
    assert "--network-args" in capsys.readouterr().err


def test_network_args_must_be_json() -> None:
    import argparse

    from monai_forget.cli.options import load_model_from_args

    args = argparse.Namespace(model="m.pt", network="mlp", network_args="{num_classes: 2}")
    with pytest.raises(ValueError, match=r"--network-args is not valid JSON.*num_classes"):
        load_model_from_args(args)


@pytest.mark.slow
def test_reference_audit_three_way_exit_code_json_and_trail(files, tmp_path, capsys):
    """`audit refmodel`: known members A, known non-members (calibration); the target was
    trained on A and C, so C is remembered and B never seen."""

    def args(query, out, *extra):
        return _reference_args(files, query, out, "--references", "4", "--json", *extra)

    np.savez(tmp_path / "C.npz", **{k: v for k, v in np.load(files / "B.npz").items()})
    code = main(args("B", tmp_path / "b"))
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # B was never trained on, and the setting has the power to say so: with 4 reference
    # models a D_Q of 359 is certified forgotten at margin 0.5 with power above 0.9
    assert record["details"]["power_forgotten"] > 0.9
    assert record["decision"] == "forgotten" and code == 0
    assert record["details"]["membership_strength_upper"] < record["details"]["margin"]
    assert record["exit_code"] == code and record["statistic_name"] == "p_member"
    assert {
        "membership_strength",
        "membership_strength_upper",
        "margin",
        "reason",
        "needed_sizes",
    } <= set(record["details"])
    result = AuditResult.load(tmp_path / "b" / "result.json")
    trail = result.provenance["audit_trail"]
    assert trail["command_line"][:3] == ["monai-forget", "audit", "refmodel"]
    assert len(trail["model_sha256"]) == 64
    assert main(args("A", tmp_path / "a")) == 2  # D_Q is among the known members
    assert "share samples" in capsys.readouterr().err
    _check_verify(result, tmp_path / "b" / "result.json", files, capsys)


def _check_verify(result, path, files, capsys) -> None:
    """Issue 50, item 6: `audit verify` hashes again the model file and every cache entry
    the result records; a swapped reference model (its .sha256 record rewritten too, the
    issue's attack) and a moved model are named, with exit code 1."""
    import shutil

    from monai_forget.audit.verify import verify_result

    entries = result.provenance["cache_entries"]
    assert any(p.endswith(".pt") for p in entries), "reference weights are recorded"
    assert main(["audit", "verify", str(path)]) == 0
    assert f"all {len(entries) + 1} recorded files match" in capsys.readouterr().out
    weights = next(p for p in sorted(entries) if p.endswith(".pt"))
    saved = Path(weights).read_bytes()
    try:
        shutil.copyfile(files / "target.pt", weights)  # the target posing as a reference
        assert main(["audit", "verify", str(path)]) == 1
        printed = capsys.readouterr().out
        assert f"changed: {weights}" in printed
        found = verify_result(path)  # the library's answer is the command's (issue 52)
        assert not found.ok and found.summary() in printed
    finally:
        Path(weights).write_bytes(saved)
    moved = path.parent / "moved.pt"
    shutil.copyfile(files / "target.pt", moved)
    assert main(["audit", "verify", str(path), "--model", str(moved)]) == 0
    moved.write_bytes(b"not the model")
    assert main(["audit", "verify", str(path), "--model", str(moved)]) == 1
    assert f"changed: {moved}" in capsys.readouterr().out
    assert main(["audit", "verify", str(path.parent / "nothing.json")]) == 2


def test_reference_audit_refuses_a_bad_group_pattern(files, tmp_path, capsys):
    args = _reference_args(files, "B", tmp_path / "g", "--group-pattern", "patient(")
    assert main(args) == 2
    assert "not a regular expression" in capsys.readouterr().err
    assert not (tmp_path / "g" / "result.json").exists()


def _query(files, name, images, labels=None):
    labels = np.arange(len(images)) % 10 if labels is None else labels
    np.savez(files / f"{name}.npz", images=images.astype(np.float32), labels=labels)
    return name


@pytest.mark.parametrize("method", ["ks", "ema", "refmodel"])
@pytest.mark.parametrize(
    "kind, message",
    [("zeros", "are constant"), ("nan", "NaN or inf"), ("repeated", "but only 1 distinct"),
     ("negative", "does not look like the model's data")],
)  # fmt: skip
def test_a_degenerate_query_set_is_refused_not_decided(
    files, tmp_path, capsys, method, kind, message
):
    """Issue 50, item 4: 100 blank images were "forgotten" with exit 0 by every auditor."""
    rng = np.random.default_rng(0)
    images = np.load(files / "B.npz")["images"][:100].copy()
    if kind == "zeros":
        images[:] = 0.0
    elif kind == "nan":
        images[3, 0, 2, 2] = np.nan
    elif kind == "repeated":
        images[:] = images[0]
    else:  # another intensity scale: the digits inverted to [-1, 0]
        images = -images - rng.random(images.shape).astype(np.float32) * 0.01
    query = _query(files, f"degenerate_{kind}", images)
    out = tmp_path / "out"
    args = _reference_args(files, query, out) if method == "refmodel" else _args(
        files, method, query, out)  # fmt: skip
    assert main(args) == 2
    assert message in capsys.readouterr().err
    assert not (out / "result.json").exists()


@pytest.mark.slow
def test_reference_audit_given_the_sites_images(files, tmp_path, capsys):
    """`audit refmodel --site-images`: both designs run (the offline one, and online
    reference models that also train on the site's images), both are recorded; a
    never-seen D_Q is not called remembered (issue 50)."""
    out = tmp_path / "site"
    args = _reference_args(files, "B", out, "--references", "4", "--json")
    code = main([*args, "--site-images", str(files / "C.npz")])
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    n_site = len(np.load(files / "C.npz")["labels"])
    assert record["details"]["site_images"] == n_site
    designs = record["details"]["designs"]
    assert designs["without_site"]["reference_setting"] == "offline"
    assert designs["with_site"]["reference_setting"] == "online"
    result = AuditResult.load(out / "result.json")
    assert sum(k.startswith("with_site_reference_") for k in result.provenance["models"]) == 4
    assert record["decision"] != "not forgotten" and code in (0, 4)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["ks", "ema", "refmodel"])
def test_the_command_line_and_the_python_api_decide_alike(files, tmp_path, method, capsys):
    """Issue 52: the same inputs through `monai-forget audit METHOD` (its defaults) and
    through the auditor's Python API (the library's defaults) give the same decision,
    statistic and details, every one of them."""
    from monai_forget.audit import EMAAuditor, KSAuditor, ReferenceModelAuditor
    from monai_forget.data.readers import load_npz

    out = tmp_path / "cli"
    if method == "refmodel":
        args = _reference_args(files, "B", out, "--references", "4", "--label", "B")
    else:
        args = _args(files, method, "B", out, "--label", "B")
    assert main(args) in (0, 3, 4)
    capsys.readouterr()
    cli = AuditResult.load(out / "result.json")

    recipe = SupervisedRecipe.from_dict(SPEC)
    target = recipe.build()
    target.load_state_dict(torch.load(files / "target.pt", weights_only=True))
    target.eval()
    sets = {name: load_npz(files / f"{name}.npz", None) for name in ("A", "B", "calibration")}
    options = {"recipe": recipe, "cache_dir": files / "cache", "progress": False}
    if method == "ks":
        api = KSAuditor(**options).audit(target, sets["B"], sets["calibration"], label="B")
    elif method == "ema":
        api = EMAAuditor(**options).audit(target, sets["B"], sets["calibration"], label="B")
    else:
        auditor = ReferenceModelAuditor(**options, n_references=4)
        api = auditor.audit(target, sets["B"], (sets["A"], sets["calibration"]), label="B")
    assert (api.decision, api.statistic, api.statistic_name) == (
        cli.decision,
        cli.statistic,
        cli.statistic_name,
    )
    assert json.loads(json.dumps(api.to_dict()["details"], default=str)) == json.loads(
        json.dumps(cli.to_dict()["details"], default=str)
    )
