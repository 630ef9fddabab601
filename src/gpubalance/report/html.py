"""Self-contained HTML reports: inline SVG plots (matplotlib), no external assets.

Usage::

    page = HtmlReport("Plan")
    page.add_text("Recommendation", "...")
    page.add_table("Candidates", ["gpu", "cost"], rows)
    fig, ax = new_figure(); ax.plot(...); page.add_figure("Cost vs p99", fig)
    page.write("report.html")
"""

from __future__ import annotations

import html
import io
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["HtmlReport", "figure_to_svg", "new_figure"]

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;
max-width:1100px;color:#1d1d1f;line-height:1.45;padding:0 1rem}
h1{font-size:1.6rem;border-bottom:2px solid #4c72b0;padding-bottom:.3rem}
h2{font-size:1.2rem;margin-top:2rem}
table{border-collapse:collapse;font-size:.88rem;margin:.5rem 0}
th,td{border:1px solid #d0d0d0;padding:.25rem .5rem;text-align:right}
th{background:#f2f4f8}td:first-child,th:first-child{text-align:left}
.note{color:#555;font-size:.9rem}figure{margin:.5rem 0}svg{max-width:100%;height:auto}
"""


def new_figure(width_in: float = 8.0, height_in: float = 4.0) -> tuple[Figure, Axes]:
    """A matplotlib figure + axes on the non-interactive Agg backend."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_in, height_in), layout="constrained")
    return fig, fig.add_subplot(1, 1, 1)


def figure_to_svg(fig: Figure) -> str:
    """Render a figure to an inline ``<svg>`` string (no XML header)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    text = buf.getvalue()
    start = text.find("<svg")
    return text[start:] if start >= 0 else text


class HtmlReport:
    """An ordered list of sections rendered into one self-contained HTML page."""

    def __init__(self, title: str) -> None:
        self.title = title
        self._parts: list[str] = []

    def add_text(self, heading: str | None, text: str) -> None:
        """A paragraph (plain text, escaped) under an optional heading."""
        if heading:
            self._parts.append(f"<h2>{html.escape(heading)}</h2>")
        for para in text.split("\n\n"):
            self._parts.append(f"<p>{html.escape(para)}</p>")

    def add_table(
        self, heading: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]
    ) -> None:
        """A table; floats are shown with 4 significant digits."""
        if heading:
            self._parts.append(f"<h2>{html.escape(heading)}</h2>")
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
        body = []
        for row in rows:
            cells = "".join(f"<td>{html.escape(_fmt(v))}</td>" for v in row)
            body.append(f"<tr>{cells}</tr>")
        self._parts.append(f"<table><tr>{head}</tr>{''.join(body)}</table>")

    def add_figure(self, heading: str | None, fig: Figure, caption: str = "") -> None:
        """An inline SVG plot."""
        if heading:
            self._parts.append(f"<h2>{html.escape(heading)}</h2>")
        cap = f"<figcaption class='note'>{html.escape(caption)}</figcaption>" if caption else ""
        self._parts.append(f"<figure>{figure_to_svg(fig)}{cap}</figure>")

    def render(self) -> str:
        """The whole page as a string."""
        return (
            "<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>{html.escape(self.title)}</title><style>{_STYLE}</style></head><body>"
            f"<h1>{html.escape(self.title)}</h1>{''.join(self._parts)}</body></html>"
        )

    def write(self, path: str | Path) -> Path:
        """Write the page atomically (temp file + rename); returns the path."""
        p = Path(path)
        tmp = p.with_name(p.name + ".tmp")
        tmp.write_text(self.render(), encoding="utf-8")
        tmp.replace(p)
        return p


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
