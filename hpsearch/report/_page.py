"""The HTML page around the figures: layout, CSS, tables (sortable by a click on a header), escaping.

Everything a user or a backend wrote (names, values, errors, settings, labels) goes through `esc`.
"""

from __future__ import annotations

import html
import json
import math
import os
from collections.abc import Collection, Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hpsearch.report._format import DASH, fmt_datetime, fmt_number, fmt_value, is_missing

__all__ = ["CSS", "SORT_JS", "esc", "kv_table", "page", "section", "sortable_table", "write_page"]

_CSS = """
:root { --fg:#1f2937; --muted:#6b7280; --line:#e5e7eb; --bg:#f9fafb; --accent:#2563eb; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; color:var(--fg); background:var(--bg); }
header { background:#111827; color:#f9fafb; padding:18px 32px; }
header h1 { margin:0; font-size:20px; font-weight:600; }
header .sub { color:#9ca3af; font-size:13px; }
nav { padding:8px 32px; background:#fff; border-bottom:1px solid var(--line); position:sticky; top:0; z-index:10; }
nav a { color:var(--accent); margin-right:14px; text-decoration:none; font-size:13px; }
main { max-width:1280px; margin:0 auto; padding:16px 32px 48px; }
section { background:#fff; border:1px solid var(--line); border-radius:8px; padding:16px 20px; margin:16px 0; }
section h2 { margin:0 0 10px; font-size:17px; }
.note { color:var(--muted); font-style:italic; }
.caption, .footnote { color:var(--muted); font-size:12px; margin:4px 0 0; }
.grid { display:grid; grid-template-columns:repeat(auto-fit,minmax(520px,1fr)); gap:12px; }
figure.plot-wrap { margin:0; min-width:0; }
.grid > * { min-width:0; }
.hp-plot { width:100%; min-height:380px; }
table { border-collapse:collapse; font-size:13px; }
th, td { border-bottom:1px solid var(--line); padding:4px 10px; text-align:left; vertical-align:top; }
td.num { text-align:right; font-variant-numeric:tabular-nums; }
tr:nth-child(even) td { background:#fafafa; }
tr.best td { background:#dcfce7; font-weight:600; } tr.best td:first-child::before { content:"\\2605 "; color:#15803d; }
table.kv th { color:var(--muted); font-weight:500; white-space:nowrap; }
.table-scroll { overflow:auto; max-height:640px; border:1px solid var(--line); border-radius:6px; }
table.sortable td { white-space:nowrap; }
table.sortable th { position:sticky; top:0; background:#f3f4f6; cursor:pointer; user-select:none; white-space:nowrap; }
table.sortable th[aria-sort=ascending]::after { content:" \\25B2"; }
table.sortable th[aria-sort=descending]::after { content:" \\25BC"; }
.state-COMPLETE { color:#2563eb; } .state-PRUNED { color:#b45309; } .state-FAIL { color:#dc2626; } .state-RUNNING { color:#6b7280; }
details summary { cursor:pointer; } pre { white-space:pre-wrap; margin:4px 0; font-size:12px; }
.cards { display:flex; flex-wrap:wrap; gap:12px; margin-bottom:12px; }
.card { border:1px solid var(--line); border-radius:6px; padding:8px 14px; min-width:140px; }
.card .v { font-size:18px; font-weight:600; } .card .k { color:var(--muted); font-size:12px; }
"""

# Click a header to sort by it; click again to reverse. Cells carry their sort key in data-v: numbers
# compare as numbers, the rest as text, empty cells last either way.
# hpSortable(root) wires the tables under root (the live dashboard calls it again on each table it replaces).
_SORT_JS = """
function hpSortable(root) {
root.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("th").forEach(function (th, col) {
    th.addEventListener("click", function () {
      var asc = th.getAttribute("aria-sort") !== "ascending";
      table.querySelectorAll("th").forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", asc ? "ascending" : "descending");
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      function key(row) { var c = row.cells[col]; return c ? c.getAttribute("data-v") : ""; }
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        if (x === "" || x === null) return (y === "" || y === null) ? 0 : 1;
        if (y === "" || y === null) return -1;
        var nx = Number(x), ny = Number(y), r;
        if (!isNaN(nx) && !isNaN(ny)) r = nx - ny; else r = x.localeCompare(y);
        return asc ? r : -r;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
}
hpSortable(document);
"""
#: The page's style sheet and table-sorting script, shared with the live dashboard.
CSS, SORT_JS = _CSS, _SORT_JS


def esc(value: Any) -> str:
    """Any value as escaped HTML text."""
    return html.escape(str(value), quote=True)


def _cell(value: Any) -> tuple[str, str, bool]:
    """(displayed HTML, sort key, is numeric) for one table cell."""
    if is_missing(value):
        return DASH, "", False
    if isinstance(value, bool):
        return esc(value), esc(value), False
    if isinstance(value, (int, float)) or type(value).__module__ == "numpy":
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if not math.isnan(number):
            key = repr(number) if math.isfinite(number) else ("1e999" if number > 0 else "-1e999")
            return esc(fmt_number(value)), key, True
    if isinstance(value, datetime):
        text = fmt_datetime(value)
        return (
            esc(text),
            esc(value.astimezone(timezone.utc).isoformat() if value.tzinfo else value.isoformat()),
            False,
        )
    if hasattr(value, "to_pydatetime"):  # pandas Timestamp
        return _cell(value.to_pydatetime())
    text = fmt_value(value)
    if "\n" in text or len(text) > 120:
        first = text.strip().splitlines()[0][:120] if text.strip() else ""
        shown = f"<details><summary>{esc(first)}</summary><pre>{esc(text)}</pre></details>"
        return shown, esc(text[:200]), False
    return esc(text), esc(text), False


def sortable_table(
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    state_column: str | None = "state",
    highlight: Collection[int] = (),
) -> str:
    """An HTML table whose headers sort it; values are formatted and escaped here.

    ``highlight``: indices of rows to mark as the best (class ``best``: bold on green, a star in the first cell).
    """
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    state_index = (
        list(columns).index(state_column) if state_column is not None and state_column in columns else None
    )
    body = []
    for n, row in enumerate(rows):
        cells = []
        for i, value in enumerate(row):
            shown, key, numeric = _cell(value)
            cls = ' class="num"' if numeric else ""
            if i == state_index and not is_missing(value):
                cls = f' class="state-{esc(value)}"'
            cells.append(f'<td{cls} data-v="{key}">{shown}</td>')
        body.append(
            ('<tr class="best" title="best">' if n in highlight else "<tr>") + "".join(cells) + "</tr>"
        )
    return (
        f'<div class="table-scroll"><table class="sortable"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def kv_table(items: Iterable[tuple[str, str]]) -> str:
    """A two-column table; keys are escaped here, values must be HTML already."""
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v in items)
    return f'<table class="kv">{rows}</table>'


def json_text(value: Any) -> str:
    """A JSON-ish value (settings, space) as escaped, readable text."""
    if isinstance(value, str):
        return esc(value)
    try:
        return esc(json.dumps(value, default=str, sort_keys=True))
    except (TypeError, ValueError):
        return esc(repr(value))


def section(anchor: str, title: str, body: str) -> str:
    return f'<section id="{esc(anchor)}"><h2>{esc(title)}</h2>{body}</section>\n'


def note(text: str) -> str:
    """A muted sentence; ``text`` must already be HTML."""
    return f'<p class="note">{text}</p>'


def page(title: str, subtitle: str, nav: Sequence[tuple[str, str]], body: str, bundle: str) -> str:
    """The whole document. ``bundle`` (plotly.js) goes in once, in the head, before every figure script."""
    links = "".join(f'<a href="#{esc(a)}">{esc(t)}</a>' for a, t in nav)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)}</title>\n<style>{_CSS}</style>\n{bundle}\n</head>\n<body>\n"
        f'<header><h1>{esc(title)}</h1><div class="sub">{esc(subtitle)}</div></header>\n'
        f"<nav>{links}</nav>\n<main>\n{body}</main>\n<script>{_SORT_JS}</script>\n</body>\n</html>\n"
    )


def _is_html(path: Path) -> bool:
    if path.suffix.lower() in (".html", ".htm"):
        return True
    try:
        with open(path, "rb") as f:
            return f.read(15).lower() == b"<!doctype html>"  # an earlier report written without the suffix
    except OSError:
        return False


def write_page(text: str, path: str | os.PathLike[str], default_name: str) -> str:
    """Write a page to ``path`` atomically (a folder: ``default_name`` inside it; missing folders are made).

    An existing file that is no HTML page (a search's search.json, a sweep file, code) is never replaced: ValueError.
    """
    from hpsearch._files import RESULT_FILES, atomic_write_text

    target = Path(path)
    if target.is_dir():
        target = target / default_name
    if target.name in RESULT_FILES or (target.is_file() and not _is_html(target)):
        raise ValueError(
            f"{os.fspath(path)!r} is {'a search results file' if target.name in RESULT_FILES else 'an existing file'} "
            "that is no HTML page, which the report would replace; write it elsewhere (e.g. a path ending in .html)."
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, text)
    return str(target)
