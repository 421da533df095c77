"""The one place that imports plotly, and the way a figure becomes HTML.

plotly is optional (``pip install 'hpsearch[report]'``), so it is imported when a report is rendered,
never when ``hpsearch`` or ``hpsearch.report`` is imported.
"""

from __future__ import annotations

import functools
import html
import json
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Union

__all__ = [
    "FIT_JS",
    "LightFigure",
    "Part",
    "Plot",
    "bundle_script",
    "figure_json",
    "json_for_script",
    "light_figure",
    "plot_div",
    "plot_text",
    "plotly_js_path",
    "render_parts",
    "require_plotly",
]

_INSTALL = "pip install 'hpsearch[report]'"
_CONFIG = '{"responsive": true, "displaylogo": false}'
# Every figure fits its cell at any width. A figure drawn while the page is still being parsed takes the width
# its cell has then: the first plot of a grid spans the whole row until its neighbours exist, so it was drawn
# twice too wide and clipped (the comparison's first chart, a report's first slice plot). So figures are drawn
# once the document is parsed (every cell has its final width), and each is redrawn at its cell's width whenever
# that width changes later (a resized window, a grid that reflows, a dashboard section that grows): plotly's own
# `responsive` follows only the window. hpFit is shared with the live dashboard's script.
FIT_JS = """
function hpFit(div) {
  if (div.__hpFit || typeof ResizeObserver === "undefined") return;
  var width = div.clientWidth;
  div.__hpFit = new ResizeObserver(function () {
    if (div.clientWidth !== width && div._fullLayout) { width = div.clientWidth; Plotly.Plots.resize(div); }
  });
  div.__hpFit.observe(div);
}
function hpPlot(id, fig) {
  function draw() {
    var div = document.getElementById(id);
    Plotly.newPlot(div, fig.data, fig.layout, __CONFIG__);
    hpFit(div);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", draw); else draw();
}
""".replace("__CONFIG__", _CONFIG)
# "<", ">" and "&" only ever occur inside JSON strings, where their \u escapes mean the same characters;
# escaped, no trial name or parameter value can close the <script> element the figure lives in.
_JSON_GUARD = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def plot_text(value: Any) -> str:
    """Any value as text for plotly: the one escaping of every string a figure shows (names, hover text, tick
    labels, axis and legend titles, parallel-coordinates labels; the report, the comparison and the dashboard).

    plotly parses a subset of HTML in the text it draws (``<a href>`` becomes a live link, ``<b>`` bold), so "&",
    "<" and ">" become entities, which plotly shows as the characters themselves. Quotes are kept: plotly decodes
    only a few named entities, and ``&quot;`` would be shown literally; without "<" no tag can start.
    """
    return html.escape(str(value), quote=False)


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
            out.append(
                f'<div class="grid">{"".join(plot_div(p.figure, p.plot_id, p.caption) for p in part)}</div>'
            )
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

    return f'<script type="text/javascript">{get_plotlyjs()}</script>\n<script>{FIT_JS}</script>'


class LightFigure:
    """A figure kept as the trace and layout dicts plotly.js reads (``{"type": "scattergl", "x": [...]}``), never
    turned into plotly's objects: `light_figure` builds it, `figure_json` writes it as it is.

    Read like a plotly Figure (``fig.data[0].x``, ``fig.layout.yaxis.title.text``; an unset property reads None).
    Not meant to be changed once built.
    """

    def __init__(self, data: list[dict[str, Any]], layout: dict[str, Any]) -> None:
        self._data, self._layout = data, layout

    @property
    def data(self) -> tuple[Any, ...]:
        return tuple(_Attributes(trace) for trace in self._data)

    @property
    def layout(self) -> Any:
        return _Attributes(self._layout)

    def to_plotly_json(self) -> dict[str, Any]:
        return {"data": self._data, "layout": self._layout}


class _Attributes:
    """Read-only attribute access to a figure's dict (nested dicts too)."""

    def __init__(self, values: dict[str, Any]) -> None:
        self._values = values

    def __getattr__(self, name: str) -> Any:
        value = self._values.get(name)
        return _Attributes(value) if isinstance(value, dict) else value


def light_figure(data: list[dict[str, Any]], layout: dict[str, Any]) -> LightFigure:
    """A figure made of trace and layout dicts as plotly.js reads them, built without plotly's objects.

    Validating a trace copies and checks every element of its data lists, and writing a plotly Figure as JSON
    copies them again: at 10,000 trials that was most of the time the optimization history took, and the dashboard
    builds and writes it again for each finished trial. The builders that use this write only properties the
    validated builders wrote (the figure's JSON is the same); a template named in ``layout`` is expanded here, as
    validation would.
    """
    require_plotly()
    layout = dict(layout)
    if isinstance(layout.get("template"), str):
        layout["template"] = _template(layout["template"])
    return LightFigure(data, layout)


@functools.lru_cache(maxsize=8)
def _template(name: str) -> dict[str, Any]:
    import plotly.io as pio

    template: dict[str, Any] = pio.templates[name].to_plotly_json()
    return template


def figure_json(fig: Any) -> str:
    """A plotly Figure or a `LightFigure` as the JSON plotly.js reads (safe inside a <script> element)."""
    if isinstance(fig, LightFigure):
        try:  # NaN is no JSON: such a figure goes through plotly, which writes it as null
            text = json.dumps(fig.to_plotly_json(), separators=(",", ":"), allow_nan=False)
        except ValueError:
            go = require_plotly()
            fig = go.Figure(data=fig._data, layout=fig._layout, _validate=False)
        else:
            return text.translate(_JSON_GUARD)
    import plotly.io as pio

    return pio.to_json(fig, validate=False, pretty=False).translate(_JSON_GUARD)


def json_for_script(text: str) -> str:
    """A JSON text made safe to place inside a <script> element (same value, "<", ">" and "&" as \\u escapes)."""
    return text.translate(_JSON_GUARD)


def plot_div(fig: Any, plot_id: str, caption: str = "") -> str:
    """A figure as ``<div class="hp-plot" id=...>`` plus the script that draws it with the inlined plotly.js.

    ``caption`` is HTML (already escaped by the caller).
    """
    pid = html.escape(plot_id, quote=True)
    cap = f'<p class="caption">{caption}</p>' if caption else ""
    return (
        f'<figure class="plot-wrap"><div class="hp-plot" id="{pid}"></div>{cap}</figure>\n'
        f'<script>hpPlot("{pid}",{figure_json(fig)});</script>\n'
    )
