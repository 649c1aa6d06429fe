"""The acdc bundle's bounded end-to-end run on the real data (checks in tests/bundle_runs.py)."""

from bundle_runs import BoundedRunTests


class TestAcdcBundleRun(BoundedRunTests):
    BUNDLE = "acdc"
