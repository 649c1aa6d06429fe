"""The audit report as a data-protection officer sees it, in a real browser (issue 66,
item 4): headless Chromium lays the page out; nothing overlaps, nothing runs off the
page, every figure loads; every figure names its axes."""

from __future__ import annotations

import dataclasses
import itertools
import shutil
from pathlib import Path

import pytest
from test_result_report import _ks_result, _refmodel_result

from monai_forget.audit import write_report
from monai_forget.audit.figures import FIGURES

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")

#: Block elements whose boxes must not overlap one another, in document order.
_BOXES = """
const blocks = [...document.body.querySelectorAll('h1, h2, h3, p, ul, table, img, details, pre')]
  .filter(e => !e.closest('table') || e.tagName === 'TABLE')
  .filter(e => !e.parentElement.closest('li'))
  .filter(e => !e.parentElement.closest('details') && e.getClientRects().length);
return {
  boxes: blocks.map(e => {
    const r = e.getBoundingClientRect();
    return {tag: e.tagName, text: e.textContent.slice(0, 60), top: r.top, bottom: r.bottom,
            left: r.left, right: r.right};
  }),
  page: document.documentElement.scrollWidth,
  view: window.innerWidth,
  images: [...document.images].map(i => [i.naturalWidth, i.getBoundingClientRect().right]),
};
"""


@pytest.fixture(scope="module")
def browser():
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("Chromium is not installed: apt-get install chromium chromium-driver")
    webdriver = pytest.importorskip("selenium.webdriver")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync",
                 "--window-size=1280,900"):  # fmt: skip
        options.add_argument(flag)
    service = webdriver.ChromeService(executable_path=CHROMEDRIVER)
    driver = webdriver.Chrome(options=options, service=service)
    yield driver
    driver.quit()


def _layout(browser, page: Path) -> dict:
    browser.get(page.resolve().as_uri())
    return browser.execute_script(_BOXES)


def test_the_audit_report_lays_out_without_overlap(browser, tmp_path):
    results = [_refmodel_result(1.5, "provider C"), _ks_result(),
               dataclasses.replace(_ks_result(), label="provider C"),
               _refmodel_result(0.0, "provider E", member_shift=3.0),
               _refmodel_result(0.0, "provider D", member_shift=0.2)]  # fmt: skip
    layout = _layout(browser, write_report(results, tmp_path / "report.html"))
    boxes = layout["boxes"]
    assert len(boxes) > 20 and boxes[0]["tag"] == "H1"
    for above, below in itertools.pairwise(boxes):
        assert above["bottom"] <= below["top"] + 0.5, (above, below)
    assert layout["page"] <= layout["view"], "the page is wider than the window"
    assert layout["images"] and all(width > 0 for width, _ in layout["images"])
    assert all(right <= layout["view"] for _, right in layout["images"])


def test_the_leak_scan_report_lays_out_without_overlap(browser, tmp_path):
    from test_leak_scan_report_path import _result

    from monai_forget.memorisation import write_scan_report

    _, page = write_scan_report(_result("pipeline", 64, "class-shift"), tmp_path)
    layout = _layout(browser, page)
    boxes = layout["boxes"]
    assert len(boxes) > 5
    for above, below in itertools.pairwise(boxes):
        assert above["bottom"] <= below["top"] + 0.5, (above, below)
    assert layout["page"] <= layout["view"], "the page is wider than the window"
    assert layout["images"] and all(width > 0 for width, _ in layout["images"])


def test_an_overlap_is_seen(browser, tmp_path):
    """The check can fail: a paragraph pulled up over the heading above it is caught."""
    page = tmp_path / "overlap.html"
    page.write_text("<html><body><h1>Title</h1><p style='margin-top:-30px'>over it</p>"
                    "</body></html>")  # fmt: skip
    boxes = _layout(browser, page)["boxes"]
    assert boxes[0]["bottom"] > boxes[1]["top"] + 0.5


@pytest.mark.parametrize("make", [_ks_result, lambda: _refmodel_result(1.5, "provider C")])
def test_every_figure_names_its_axes(make):
    result = make()
    figure = FIGURES[result.method](result)
    assert figure.axes
    for ax in figure.axes:
        assert ax.get_xlabel() and ax.get_ylabel(), ax.get_title()
    assert "at most 100%" not in figure.get_suptitle()
