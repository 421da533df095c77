"""The one place that imports plotly, and the way a figure becomes HTML.

plotly is optional (``pip install 'hpsearch[report]'``), so it is imported when a report is rendered,
never when ``hpsearch`` or ``hpsearch.report`` is imported.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Union

__all__ = ["Part", "Plot", "bundle_script", "figure_json", "plot_div", "plotly_js_path", "render_parts", "require_plotly"]

_INSTALL = "pip install 'hpsearch[report]'"
_CONFIG = '{"responsive": true, "displaylogo": false}'
# "<", ">" and "&" only ever occur inside JSON strings, where their \u escapes mean the same characters;
# escaped, no trial name or parameter value can close the <script> element the figure lives in.
_JSON_GUARD = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def require_plotly() -> ModuleType:
    """Return ``plotly.graph_objects``, or raise an ImportError that says how to install plotly."""
    try:
        import plotly.graph_objects as go
    except ImportError as exc:
        raise ImportError(
            f"The HTML reports of hpsearch draw their figures with plotly, which is not installed; run `{_INSTALL}`."
        ) from exc
    return go


@dataclass(frozen=True)
class Plot:
    """A figure of a report section: drawn inline by `render_parts`, or sent as JSON by the live dashboard.

    ``caption`` is HTML (already escaped by the caller).
    """

    plot_id: str
    figure: Any
    caption: str = ""


#: What a report section is made of, in order: HTML, a figure, or a grid of figures side by side.
Part = Union[str, Plot, list[Plot]]


def render_parts(parts: Sequence[Part]) -> str:
    """A section's parts as HTML for a self-contained page (figures drawn by the inlined plotly.js)."""
    out = []
    for part in parts:
        if isinstance(part, Plot):
            out.append(plot_div(part.figure, part.plot_id, part.caption))
        elif isinstance(part, list):
            out.append(f'<div class="grid">{"".join(plot_div(p.figure, p.plot_id, p.caption) for p in part)}</div>')
        else:
            out.append(part)
    return "".join(out)


def plotly_js_path() -> str:
    """The minified plotly.js file that ships inside the plotly package (served by the live dashboard)."""
    require_plotly()
    from importlib import resources

    return str(resources.files("plotly") / "package_data" / "plotly.min.js")


def bundle_script() -> str:
    """plotly.js itself, inlined once in the page so that the report opens offline."""
    require_plotly()
    from plotly.offline import get_plotlyjs

    return f'<script type="text/javascript">{get_plotlyjs()}</script>'


def figure_json(fig: Any) -> str:
    import plotly.io as pio

    return pio.to_json(fig, validate=False, pretty=False).translate(_JSON_GUARD)


def plot_div(fig: Any, plot_id: str, caption: str = "") -> str:
    """A figure as ``<div class="hp-plot" id=...>`` plus the script that draws it with the inlined plotly.js.

    ``caption`` is HTML (already escaped by the caller).
    """
    pid = html.escape(plot_id, quote=True)
    cap = f'<p class="caption">{caption}</p>' if caption else ""
    return (
        f'<figure class="plot-wrap"><div class="hp-plot" id="{pid}"></div>{cap}</figure>\n'
        f"<script>(function(){{var fig={figure_json(fig)};"
        f'Plotly.newPlot("{pid}",fig.data,fig.layout,{_CONFIG});}})();</script>\n'
    )
