"""HTML reports: jinja2 templates with PNG figures embedded, so one file is the record."""

from __future__ import annotations

import base64
import io
import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monai_forget.io import atomic_write

if TYPE_CHECKING:
    import jinja2
    from matplotlib.figure import Figure

__all__ = ["figure_png", "pvalue_text", "render_html", "write_html"]


def pvalue_text(p: float, alpha: float, digits: int = 3) -> str:
    """``p`` to ``digits`` significant digits, or more where fewer would cross ``alpha``.

    A p-value below alpha never reads as alpha or above (0.04995 at alpha 0.05 reads
    ``0.04995``, not ``0.05``), and one at or above it never reads as below.
    """
    p = float(p)
    for width in range(digits, 18):
        text = f"{p:.{width}g}"
        if (float(text) < alpha) == (p < alpha):
            return text
    return repr(p)


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("monai_forget", "templates"),
        autoescape=True,  # every value is escaped unless a template marks it safe
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    environment.filters["ptext"] = pvalue_text
    return environment


def render_html(template: str, **context: Any) -> str:
    """Render ``templates/<template>`` with ``context`` (values are HTML-escaped)."""
    return _environment().get_template(template).render(**context)


def figure_png(fig: Figure) -> str:
    """A matplotlib figure as base64 PNG (for ``<img src="data:image/png;base64,...">``)."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def write_html(path: str | os.PathLike, page: str, *, overwrite: bool = False) -> Path:
    """Write a rendered page atomically; an existing file is refused unless ``overwrite``."""
    with atomic_write(path, "w", overwrite=overwrite) as handle:
        handle.write(page)
    return Path(path)
