"""The one place that imports plotly, and the way a figure becomes HTML.

plotly is optional (``pip install 'hpsearch[report]'``), so it is imported when a report is rendered,
never when ``hpsearch`` or ``hpsearch.report`` is imported.
"""

from __future__ import annotations

import html
from types import ModuleType
from typing import Any

__all__ = ["bundle_script", "plot_div", "require_plotly"]

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
