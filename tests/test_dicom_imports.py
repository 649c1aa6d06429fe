"""The DICOM path and the canary command's parser load neither torch nor MONAI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PROBE = """
import argparse, json, sys
import monai_forget.dicom
import monai_forget.cli.canary as canary

parser = argparse.ArgumentParser()
canary.register(parser.add_subparsers())
parser.parse_args(["canary", "inject", "in.dcm", "out.dcm", "--text", "A"])
print(json.dumps({m: m in sys.modules for m in ("torch", "monai", "nibabel")}))
"""


def test_dicom_and_cli_parsing_import_no_torch_or_monai():
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    loaded = json.loads(result.stdout.splitlines()[-1])
    assert loaded == {"torch": False, "monai": False, "nibabel": False}


def test_transforms_still_import_from_the_canary_package():
    from monai_forget.canary import BurnInText, BurnInTextD, BurnInTextd, BurnInTextDict
    from monai_forget.canary.transforms import BurnInText as Direct

    assert BurnInText is Direct
    assert BurnInTextD is BurnInTextd and BurnInTextDict is BurnInTextd
