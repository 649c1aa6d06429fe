"""The cxr bundle's bounded end-to-end run on the real data (checks in tests/bundle_runs.py)."""

import pytest
from bundle_runs import BoundedRunTests

pytestmark = pytest.mark.slow  # minutes of training on real data


class TestCxrBundleRun(BoundedRunTests):
    BUNDLE = "cxr"
