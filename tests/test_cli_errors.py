"""Issue 16: bad input ends in one line naming the file (or set) and the fix, never a
traceback; errors name files and lines, not what an arbitrary file holds; recipes that
run code need the user's explicit trust."""

from __future__ import annotations

import io
import json
import os
import re
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from monai_forget.cli import main
from monai_forget.networks import UnsafeModelError, get_network, load_model

NET = {"in_shape": [1, 8, 8], "num_classes": 10, "hidden": [16]}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("errors")
    torch.manual_seed(0)
    model = get_network("mlp", **NET)
    torch.save(model.state_dict(), root / "good.pt")
    torch.jit.save(torch.jit.script(model), root / "script.pt")
    rng = np.random.default_rng(0)
    for name, n in (("query", 20), ("calibration", 40)):
        images = rng.random((n, 1, 8, 8), dtype=np.float32)
        np.savez(root / f"{name}.npz", images=images, labels=rng.integers(0, 10, n))
    (root / "recipe.json").write_text(
        json.dumps({"network": "mlp", "network_args": NET, "steps": 5})
    )
    return root


def audit(files: Path, out: Path, **changes: str) -> list[str]:
    """``monai-forget audit ks`` with one option changed."""
    options = {
        "--model": str(files / "good.pt"),
        "--network": "mlp",
        "--network-args": json.dumps(NET),
        "--query": str(files / "query.npz"),
        "--calibration": str(files / "calibration.npz"),
        "--recipe": str(files / "recipe.json"),
        "--out": str(out),
    }
    options.update({f"--{k.replace('_', '-')}": v for k, v in changes.items()})
    return ["audit", "ks", *[x for pair in options.items() for x in pair]]


def one_line_error(capsys: pytest.CaptureFixture, argv: list[str]) -> str:
    """Run the CLI, expect exit status 2 and a single ``monai-forget: error:`` line."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("monai-forget: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# --- model files ----------------------------------------------------------------------


def test_empty_truncated_and_damaged_model_files(files: Path, tmp_path: Path, capsys) -> None:
    good = (files / "good.pt").read_bytes()
    script = (files / "script.pt").read_bytes()
    incomplete = "looks like a {} but is incomplete"
    cases = {
        "empty.pt": (b"", "is empty (0 bytes)"),
        "half.pt": (good[: len(good) // 2], incomplete.format("PyTorch (zip) checkpoint")),
        "half_script.pt": (script[: len(script) // 2], incomplete.format("TorchScript archive")),
        "text.pt": (b"hello, not a model", "is not a model"),
    }
    for name, (content, message) in cases.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(ValueError, match=re.escape(message)) as info:
            load_model(tmp_path / name, network="mlp", network_args=NET)
        assert not isinstance(info.value, UnsafeModelError), name  # damaged, not unsafe
        line = one_line_error(capsys, audit(files, tmp_path / "o", model=str(tmp_path / name)))
        assert name in line and message in line
    with pytest.raises(IsADirectoryError, match="is a folder"):
        load_model(tmp_path)


def test_a_data_file_given_as_the_model_is_named_for_what_it_is(files, tmp_path, capsys):
    """Issue 66, item 5: an .npz (a zip, like a PyTorch checkpoint) or .npy given as
    --model is called a data file, not a truncated or damaged model."""
    np.savez(tmp_path / "query.npz", images=np.zeros((2, 1, 8, 8)), labels=np.zeros(2))
    np.save(tmp_path / "arrays.npy", np.zeros(3))
    for name, what in (("query.npz", "a NumPy .npz data file (arrays: images, labels)"),
                       ("arrays.npy", "a NumPy .npy array file")):  # fmt: skip
        with pytest.raises(ValueError, match=re.escape(what)) as info:
            load_model(tmp_path / name, network="mlp", network_args=NET)
        assert "damaged" not in str(info.value) and "not a model" in str(info.value)
        line = one_line_error(capsys, audit(files, tmp_path / "o", model=str(tmp_path / name)))
        assert what in line


def test_pickled_objects_are_told_apart_from_damage(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    torch.save({"weights": torch.zeros(2), "args": argparse_namespace()}, buffer)
    (tmp_path / "objects.pt").write_bytes(buffer.getvalue())
    with pytest.raises(UnsafeModelError, match=r"pickled Python objects.*Namespace"):
        load_model(tmp_path / "objects.pt", network="mlp", network_args=NET)


class _Payload:
    """A pickle that runs ``call(*args)`` when unpickled, as the payloads in torch's own
    weights-only tests do; ``args`` would create a marker file if the call ever ran."""

    def __init__(self, call: object, args: tuple) -> None:
        self.call, self.args = call, args

    def __reduce__(self) -> tuple:
        return self.call, self.args


def _payloads(marker: Path) -> dict[str, _Payload]:
    import builtins
    import subprocess

    touch = f"open({str(marker)!r}, 'w').close()"
    return {
        "os.system": _Payload(os.system, (f"touch {marker}",)),
        "subprocess.call": _Payload(subprocess.call, (["touch", str(marker)],)),
        "builtins.eval": _Payload(builtins.eval, (touch,)),
        "builtins.exec": _Payload(builtins.exec, (touch,)),
    }


def _saved(payload: _Payload, how: str) -> bytes:
    import pickle

    if how.startswith("pickle protocol"):
        return pickle.dumps({"weight": payload}, protocol=int(how.split()[-1]))
    buffer = io.BytesIO()
    torch.save({"weight": payload}, buffer, _use_new_zipfile_serialization=how == "torch zip")
    return buffer.getvalue()


@pytest.mark.parametrize("how", ["torch zip", "torch legacy", "pickle protocol 2",
                                 "pickle protocol 5"])  # fmt: skip
def test_every_pickle_payload_is_refused_as_pickled_objects(
    tmp_path: Path, how: str, files: Path, capsys
) -> None:
    """Issue 34, item 4: a payload calling os.system was reported as 'truncated or
    damaged'; every payload is refused as pickled objects, named, and never run."""
    marker = tmp_path / "ran"
    for index, (name, payload) in enumerate(_payloads(marker).items()):
        path = tmp_path / f"payload{index}.pt"
        path.write_bytes(_saved(payload, how))
        with pytest.raises(UnsafeModelError, match=r"pickled Python objects") as info:
            load_model(path, network="mlp", network_args=NET)
        called = name.split(".")[-1]
        assert re.search(rf"refers to [\w.]*\b{called}$", str(info.value)), (how, name)
        line = one_line_error(capsys, audit(files, tmp_path / "o", model=str(path)))
        assert "pickled Python objects" in line and "weights_only=False" not in line
    assert not marker.exists(), "a payload ran"


def argparse_namespace() -> object:
    import argparse

    return argparse.Namespace(lr=0.1)


def test_model_folder_is_not_reported_missing(files: Path, tmp_path: Path, capsys) -> None:
    line = one_line_error(capsys, audit(files, tmp_path / "o", model=str(tmp_path)))
    assert "is a folder" in line and "does not exist" not in line


# --- data sets ------------------------------------------------------------------------


def _npy(shape: tuple[int, ...], dtype: str, payload: bytes) -> bytes:
    buffer = io.BytesIO()
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False,
              "shape": shape}  # fmt: skip
    np.lib.format.write_array_header_1_0(buffer, header)
    return buffer.getvalue() + payload


def test_npz_header_claiming_terabytes_is_refused_before_allocating(
    files: Path, tmp_path: Path, capsys
) -> None:
    path = tmp_path / "huge.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("images.npy", _npy((10**7, 1, 1024, 1024), "float32", bytes(64)))
        archive.writestr("labels.npy", _npy((10**7,), "int64", bytes(64)))
    start = time.perf_counter()
    line = one_line_error(capsys, audit(files, tmp_path / "o", query=str(path)))
    assert time.perf_counter() - start < 10
    assert "query set D_Q" in line and "huge.npz" in line and "claims shape" in line


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"images": np.array([None] * 4, dtype=object), "labels": np.arange(4)}, "Python objects"),
        ({"images": np.zeros((4, 1, 8, 8)), "labels": np.array(list("abcd"))}, "integer class"),
        ({"images": np.full((4, 1, 8, 8), np.nan), "labels": np.arange(4)}, "NaN or inf"),
    ],
    ids=["object-array", "string-labels", "nan"],
)
def test_bad_arrays_name_the_set_and_file(files, tmp_path, capsys, arrays, message) -> None:
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    line = one_line_error(capsys, audit(files, tmp_path / "o", calibration=str(path)))
    assert "calibration set D_C" in line and "bad.npz" in line and message in line


def test_non_zip_npz_and_labels_beyond_the_model(files: Path, tmp_path: Path, capsys) -> None:
    (tmp_path / "text.npz").write_text("not an archive")
    line = one_line_error(capsys, audit(files, tmp_path / "o", query=str(tmp_path / "text.npz")))
    assert "query set D_Q" in line and "not an .npz file (not a zip archive)" in line
    np.savez(tmp_path / "eleven.npz", images=np.zeros((4, 1, 8, 8)), labels=np.arange(8, 12))
    line = one_line_error(capsys, audit(files, tmp_path / "o", query=str(tmp_path / "eleven.npz")))
    assert "query set D_Q: label 11 is outside the model's 10 classes" in line


def test_corrupt_png_and_missing_datalist_file(files: Path, tmp_path: Path, capsys) -> None:
    from PIL import Image

    for cls in ("a", "b"):
        (tmp_path / "folder" / cls).mkdir(parents=True)
        Image.fromarray(np.zeros((8, 8), np.uint8)).save(tmp_path / "folder" / cls / "ok.png")
    (tmp_path / "folder" / "b" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(10))
    line = one_line_error(capsys, audit(files, tmp_path / "o", query=str(tmp_path / "folder")))
    assert "broken.png" in line
    datalist = tmp_path / "list.json"
    datalist.write_text(json.dumps({"training": [{"image": "gone.png", "label": 0}]}))
    line = one_line_error(capsys, audit(files, tmp_path / "o", query=str(datalist)))
    assert "list.json" in line and "gone.png" in line and "do not exist" in line


# --- outputs --------------------------------------------------------------------------


def test_output_that_is_a_folder_even_with_overwrite(files: Path, tmp_path: Path, capsys) -> None:
    (tmp_path / "taken").mkdir()
    argv = ["memorisation", "score", "--model", str(files / "good.pt"), "--network", "mlp",
            "--network-args", json.dumps(NET), "--probes", str(files / "query.npz"),
            "--text", "A", "--out", str(tmp_path / "taken"), "--overwrite"]  # fmt: skip
    line = one_line_error(capsys, argv)
    assert "taken is a folder" in line
    assert (tmp_path / "taken").is_dir() and not any((tmp_path / "taken").iterdir())


def test_an_output_that_cannot_be_made_is_refused_before_any_work(
    files: Path, tmp_path: Path, capsys
) -> None:
    """An output folder under a file is refused before the model is even read (the
    model path here does not exist: its error would come first otherwise)."""
    (tmp_path / "a_file").write_text("x")
    out = tmp_path / "a_file" / "audit"
    line = one_line_error(capsys, audit(files, out, model=str(tmp_path / "gone.pt")))
    assert f"{out / 'result.json'} cannot be written: {tmp_path / 'a_file'} is a file" in line
    assert "gone.pt" not in line and (tmp_path / "a_file").read_text() == "x"


def test_read_only_output_folder(files: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    def refuse(*args, **kwargs):  # what a read-only folder does to every writer (even root
        raise PermissionError(13, "Permission denied")  # cannot be refused by chmod here)

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    out = tmp_path / "ro"
    line = one_line_error(capsys, audit(files, out))
    assert f"cannot write {out / 'result.json'}: Permission denied (folder {out})" in line


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_output_folder_for_real(files: Path, tmp_path: Path, capsys) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        line = one_line_error(capsys, audit(files, folder))
    finally:
        folder.chmod(0o755)
    assert "Permission denied" in line and str(folder) in line


def test_prepare_medmnist_folder_follows_the_umask(tmp_path: Path) -> None:
    from monai_forget.data_prep import medmnist

    arrays = {f"{s}_{k}": np.zeros((2, 28, 28) if k == "images" else (2, 1), np.uint8)
              for s in ("train", "val", "test") for k in ("images", "labels")}  # fmt: skip
    np.savez(tmp_path / "tiny.npz", **arrays)
    previous = os.umask(0o022)
    try:
        medmnist.export_pngs(tmp_path / "tiny.npz", tmp_path / "png")
    finally:
        os.umask(previous)
    assert (tmp_path / "png").stat().st_mode & 0o777 == 0o755


def test_non_utf8_info_cfg_names_file_and_line(tmp_path: Path) -> None:
    from monai_forget.data_prep.acdc import read_info

    info = tmp_path / "Info.cfg"
    info.write_bytes(b"ED: 1\nES: 12\nGroup: NOR\nHeight: 180\nNbFrame: 30\nWeight: \xe9\xff\n")
    with pytest.raises(ValueError, match=r"Info\.cfg, line 6: not UTF-8 text"):
        read_info(info)


# --- issue 16 item 10: name the file and line, not the content ------------------------


SECRET = "root:x:0:0:secret-operator:/root:/bin/bash"


def test_provider_file_errors_do_not_echo_its_lines(tmp_path: Path, capsys) -> None:
    secret = tmp_path / "passwd"
    secret.write_text(f"{SECRET}\nnobody:x:65534:65534::/nonexistent:/usr/sbin/nologin\n")
    npz = tmp_path / "tiny.npz"
    np.savez(npz, **{f"{s}_{k}": np.zeros((2, 28, 28) if k == "images" else (2, 1), np.uint8)
                     for s in ("train", "val", "test") for k in ("images", "labels")})  # fmt: skip
    base = ["prepare", "medmnist", str(npz), "--image-dir", str(tmp_path / "png"),
            "-o", str(tmp_path / "list.json")]  # fmt: skip
    line = one_line_error(capsys, [*base, "--provider", f"x=@{secret}"])
    assert f"{secret} line 1" in line and f"{secret} line 2" in line
    assert "root" not in line.replace(str(tmp_path), "") and "nologin" not in line
    line = one_line_error(capsys, [*base, "--site-map", str(secret)])
    assert f"{secret}, line 1" in line and "secret-operator" not in line
    assert not (tmp_path / "list.json").exists() and not (tmp_path / "png").exists()


def test_roster_errors_name_lines_not_patients(files: Path, tmp_path: Path, capsys) -> None:
    roster = tmp_path / "roster.csv"
    base = ["memorisation", "scan", "--model", str(files / "good.pt"), "--network", "mlp",
            "--network-args", json.dumps(NET), "--probes", str(files / "query.npz"),
            "--out", str(tmp_path / "scan"), "--roster", str(roster)]  # fmt: skip
    for text, expected in (
        (
            "name\nANNA\nBOB\nANNA\n",
            "(line 4 of roster.csv) repeats entry 1 (line 2 of roster.csv)",
        ),
        ("name\nANNA\nJO@N\n", "entry 2 (line 3 of roster.csv)"),
        ("name\nANNA\nMAXIMILIAN\n", "entry 2 (line 3 of roster.csv))"),
    ):
        roster.write_text(text)
        line = one_line_error(capsys, base)
        assert expected in line, line
        assert not {"ANNA", "JO@N", "MAXIMILIAN"} & set(line.replace(",", " ").split()), line
    roster.write_text("a,b\nx,y\n")  # no 'name' column: the header is not repeated
    line = one_line_error(capsys, base)
    assert f"{roster}, line 1: 2 column(s)" in line and "'a'" not in line


# --- issue 16 item 8: recipes that run code need trust --------------------------------


def test_code_recipes_need_trust(files: Path, tmp_path: Path, capsys) -> None:
    marker = tmp_path / "ran"
    bundle = tmp_path / "train.json"
    bundle.write_text(json.dumps({"x": f"$__import__('pathlib').Path({str(marker)!r}).touch()",
                                  "train": {"trainer": "@x"}}))  # fmt: skip
    for recipe in (str(bundle), "os:getcwd"):
        line = one_line_error(capsys, audit(files, tmp_path / "o", recipe=recipe))
        assert "runs Python code" in line and "--trust-recipe" in line
    assert not marker.exists()  # nothing was evaluated
    from monai_forget.recipe_files import load_recipe

    assert load_recipe(bundle, allow_code=True).name.startswith("bundle:")  # trusted: accepted
    assert not marker.exists()
    help_text = io.StringIO()
    from contextlib import redirect_stdout

    with redirect_stdout(help_text), pytest.raises(SystemExit):
        main(["audit", "ks", "--help"])
    assert "data-only recipe .json" in help_text.getvalue()
    assert "trust it as you would a script" in " ".join(help_text.getvalue().split())


@pytest.mark.parametrize(
    ("network_args", "message"),
    [
        ({**NET, "_target_": "torch.nn.Linear"}, r"network_args\._target_ is MONAI config code"),
        ({**NET, "num_classes": "$10"}, r"network_args\.num_classes = '\$10' is MONAI config code"),
        ({**NET, "depth": 3}, r"'mlp' cannot be built .*unexpected keyword argument 'depth'"),
    ],
    ids=["_target_", "expression", "unknown-argument"],
)
def test_a_recipe_s_network_arguments_are_checked_naming_the_file(
    files: Path, tmp_path: Path, capsys, network_args, message
) -> None:
    """Issue 52, item 6: config code or arguments the network does not take are refused in
    one line naming the recipe file and the field, before any data is read."""
    recipe = tmp_path / "recipe.json"
    recipe.write_text(json.dumps({"network": "mlp", "network_args": network_args, "steps": 5}))
    line = one_line_error(capsys, audit(files, tmp_path / "o", recipe=str(recipe)))
    assert f"recipe {recipe}" in line and re.search(message, line), line


def test_a_utf16_roster_is_named_with_the_fix(tmp_path: Path) -> None:
    from monai_forget.memorisation import read_roster

    roster = tmp_path / "names.csv"
    roster.write_bytes("name\nANNA\n".encode("utf-16"))
    with pytest.raises(ValueError, match=r"names.csv is not UTF-8 text \(it is UTF-16.*CSV UTF-8"):
        read_roster(roster)


# --- issue 34 item 6: prepare never writes inside its input --------------------------


@pytest.mark.parametrize("layout", ["acdc-nifti", "acdc-h5", "kermany", "covidx", "rsna"])
def test_prepare_refuses_to_write_inside_its_input_release(layout, tmp_path, capsys) -> None:
    release = tmp_path / "release"
    (release / "data").mkdir(parents=True)
    before = sorted(p.name for p in release.rglob("*"))
    for output in (release / "list.json", release / "data" / "sub" / "list.json"):
        line = one_line_error(capsys, ["prepare", layout, str(release), "-o", str(output)])
        assert "inside the input release" in line and "write the datalist" in line, line
    # beside the release is fine as far as this check goes (the empty release fails later)
    line = one_line_error(capsys, ["prepare", layout, str(release), "-o", str(tmp_path / "x.json")])
    assert "inside the input release" not in line
    assert sorted(p.name for p in release.rglob("*")) == before


def test_prepare_medmnist_refuses_its_input_as_output(tmp_path, capsys) -> None:
    npz = tmp_path / "tiny.npz"
    np.savez(npz, **{f"{s}_{k}": np.zeros((2, 28, 28) if k == "images" else (2, 1), np.uint8)
                     for s in ("train", "val", "test") for k in ("images", "labels")})  # fmt: skip
    data = npz.read_bytes()
    png = str(tmp_path / "png")
    command = ["prepare", "medmnist", str(npz), "--image-dir", png, "-o", str(npz), "--overwrite"]
    line = one_line_error(capsys, command)
    assert "is the input" in line
    assert npz.read_bytes() == data and not (tmp_path / "png").exists()


# --- issue 34 item 10: messages that say what is wrong ---------------------------------


def test_prepare_medmnist_names_a_file_that_is_no_npz_archive(tmp_path, capsys) -> None:
    """A .npy saved as .npz, bytes that are no numpy file, and an archive of pickled
    objects: one line naming the file, no traceback, no numpy advice to load unsafely."""
    np.save(tmp_path / "array.npy", np.zeros(3))
    (tmp_path / "array.npy").rename(tmp_path / "array.npz")
    (tmp_path / "garbage.npz").write_bytes(b"not numpy at all")
    objects = np.array([{"a": 1}], dtype=object)
    np.savez(tmp_path / "objects.npz", train_images=objects, train_labels=objects)
    for name, expected in (
        ("array.npz", "is not an .npz archive of arrays"),
        ("garbage.npz", "is not an .npz archive of arrays"),
        ("objects.npz", "holds Python objects, which are never loaded"),
    ):
        command = ["prepare", "medmnist", str(tmp_path / name), "--image-dir",
                   str(tmp_path / "png"), "-o", str(tmp_path / "list.json")]  # fmt: skip
        line = one_line_error(capsys, command)
        assert str(tmp_path / name) in line and expected in line, line
        assert "unsafe" not in line and "allow_pickle" not in line
    assert not (tmp_path / "png").exists() and not (tmp_path / "list.json").exists()


def test_a_folder_given_for_a_table_is_called_a_folder(tmp_path, capsys) -> None:
    (tmp_path / "groups").mkdir()
    release = tmp_path / "release"
    (release / "data").mkdir(parents=True)
    command = ["prepare", "acdc-h5", str(release), "-o", str(tmp_path / "list.json"),
               "--groups", str(tmp_path / "groups")]  # fmt: skip
    line = one_line_error(capsys, command)
    assert f"groups file {tmp_path / 'groups'} is a folder; give the file itself" in line, line
    with pytest.raises(IsADirectoryError, match=r"site map .* is a folder; give the file"):
        from monai_forget.data_prep.tables import read_csv_rows

        list(read_csv_rows(tmp_path / "groups", ("patient", "site"), what="site map"))
    from monai_forget.data_prep.acdc import read_info

    (tmp_path / "Info.cfg").mkdir()
    with pytest.raises(IsADirectoryError, match=r"Info\.cfg is a folder; Info\.cfg must be a file"):
        read_info(tmp_path / "Info.cfg")


@pytest.mark.parametrize("command", [["demo"], ["shadow", "train"]])
def test_a_device_this_machine_lacks_is_a_usage_error(command, tmp_path, capsys) -> None:
    """``--device cuda:0`` on a CPU-only torch (or a GPU index beyond the machine's) and a
    string that is no device: one usage line naming the fix, no traceback, nothing run."""
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    missing, expected = (
        (f"cuda:{count}", f"this machine has {count} CUDA GPU(s)")
        if count
        else ("cuda:0", "no CUDA GPU is available here")
    )
    for device, message in ((missing, expected), ("gpu0", "'gpu0' is not a torch device")):
        with pytest.raises(SystemExit) as stopped:
            main([*command, "--device", device, "--out", str(tmp_path / "out")])
        assert stopped.value.code == 2
        err = capsys.readouterr().err
        assert f"argument --device: {device}" in err or message in err, err
        assert message in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("method", ["ks", "ema", "refmodel"])
def test_every_auditor_refuses_labels_the_target_cannot_output(method):
    """The check lives in the library (issue 52): the Python API refuses what the command
    line refuses, naming the set, before any model trains."""
    import numpy as np

    from monai_forget.auditor_registry import auditor_kind
    from monai_forget.data import LabelledImages, load_digits
    from monai_forget.networks import get_network
    from monai_forget.shadow import SupervisedRecipe

    digits = load_digits()
    recipe = SupervisedRecipe("mlp", {"in_shape": (1, 8, 8), "num_classes": 10}, steps=1)
    target = get_network("mlp", in_shape=(1, 8, 8), num_classes=10)
    query = digits.subset(np.arange(40))
    query = LabelledImages(query.images, np.where(query.labels == 3, 11, query.labels), None, 12)
    known = (digits.subset(np.arange(100, 200)), digits.subset(np.arange(200, 300)))
    kind = auditor_kind(method)
    auditor, calibration = kind.auditor, known if kind.calibration == "known" else known[1]
    with pytest.raises(ValueError, match="query set D_Q: label 11 is outside the model's 10"):
        auditor(recipe=recipe).audit(target, query, calibration)
