"""Reports of a `SearchResult`: one self-contained HTML file (plotly, optional) and a Markdown summary.

No backend is needed to build them, only the result (for instance ``SearchResult.load(output_dir)``).
plotly is imported when an HTML report is rendered; without it the HTML functions raise an ImportError
that says ``pip install 'hpsearch[report]'``, while `render_markdown` needs nothing.
"""

from __future__ import annotations

from hpsearch.report._compare import compare_html, compare_sections, write_compare_html
from hpsearch.report._html import lazy_report_sections, render_html, report_sections, write_html
from hpsearch.report._markdown import render_markdown

__all__ = [
    "compare_html",
    "compare_sections",
    "lazy_report_sections",
    "render_html",
    "render_markdown",
    "report_sections",
    "write_compare_html",
    "write_html",
]
