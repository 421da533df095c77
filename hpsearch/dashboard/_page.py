"""The dashboard's page: an HTML shell, its style sheet (the report's, plus a status line) and its script.

The server renders the view's current state into the page (a JSON script element the client applies before the
page's load event), so a fresh load or a screenshot shows the search as it is, never an empty "connecting" page.
The script then opens an `EventSource` on ``/events/<view>`` and applies each message: header text, the warning
line, and every changed section (HTML replaced, figures redrawn in place with ``Plotly.react``, so zoom and
scroll survive and nothing reloads). Every string it puts in the page is either text (``textContent``) or
HTML the server escaped (the report's builders escape every user string).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpsearch.dashboard._dashboard import EAGER_TRIALS
from hpsearch.report._page import CSS, SORT_JS, esc
from hpsearch.report._plotly import FIT_JS, json_for_script

if TYPE_CHECKING:
    from hpsearch.dashboard._dashboard import Dashboard

__all__ = ["STATIC", "page_html"]

_EXTRA_CSS = """
#hp-status { padding:6px 32px; font-size:13px; color:var(--muted); background:#fff; border-bottom:1px solid var(--line); }
#hp-status .dot { display:inline-block; width:8px; height:8px; border-radius:50%; background:#9ca3af; margin-right:6px; }
#hp-status.live .dot { background:#16a34a; } #hp-status.loaded .dot { background:#60a5fa; } #hp-status.lost .dot { background:#dc2626; }
#hp-warning { margin:12px 32px 0; padding:8px 14px; border:1px solid #f59e0b; background:#fffbeb; color:#92400e; border-radius:6px; }
#hp-views a { color:#93c5fd; margin-right:12px; font-size:13px; text-decoration:none; }
#hp-views a.current { color:#fff; font-weight:600; }
.hp-pager { display:flex; gap:6px; align-items:center; margin:0 0 8px; font-size:13px; color:var(--muted); }
.hp-pager button { font:inherit; padding:2px 10px; border:1px solid var(--line); border-radius:4px; background:#fff; cursor:pointer; }
.hp-pager button[disabled] { opacity:.45; cursor:default; }
"""

_CLIENT_JS = """
(function () {
  "use strict";
  var CONFIG = {responsive: true, displaylogo: false};
  var view = document.body.getAttribute("data-view");
  var main = document.getElementById("hp-main"), nav = document.getElementById("hp-nav");
  var status = document.getElementById("hp-status"), statusText = document.getElementById("hp-status-text");
  var warning = document.getElementById("hp-warning");

  function el(tag, cls) { var e = document.createElement(tag); if (cls) e.className = cls; return e; }

  function plotBox(part) {
    var fig = el("figure", "plot-wrap"), div = el("div", "hp-plot"), cap = el("p", "caption");
    div.id = part.plot; fig.appendChild(div); fig.appendChild(cap); return fig;
  }

  function drawPlot(part) {
    var div = document.getElementById(part.plot);
    div.parentNode.querySelector(".caption").innerHTML = part.caption;
    Plotly.react(div, part.figure.data || [], part.figure.layout || {}, CONFIG);
    hpFit(div);
  }

  function sortState(box) {
    var th = box.querySelector("th[aria-sort]");
    if (!th) return null;
    return {col: Array.prototype.indexOf.call(th.parentNode.children, th), dir: th.getAttribute("aria-sort")};
  }

  function setHtml(box, html) {
    var sorted = sortState(box);
    box.innerHTML = html;  // escaped by the server
    hpSortable(box);
    if (sorted) {
      var th = box.querySelectorAll("thead th")[sorted.col];
      if (th) { th.click(); if (sorted.dir === "descending") th.click(); }
    }
  }

  function shape(parts) {
    return JSON.stringify(parts.map(function (p) {
      if (p.plot) return "P" + p.plot;
      if (p.grid) return "G" + p.grid.map(function (q) { return q.plot; }).join(",");
      return "H";
    }));
  }

  // A section that only grew (a finished trial's point on the history) comes as the points to append to the figures
  // this page drew: appended in place, not 10,000 points parsed and drawn again. False when a figure it names is not
  // drawn here (the page then asks for the whole section again).
  function extendSection(sec, data) {
    sec.querySelector("h2").textContent = data.title;
    return data.extend.every(function (e) {
      var div = document.getElementById(e.plot);
      if (!div || !div.data) return false;
      div.parentNode.querySelector(".caption").innerHTML = e.caption;
      e.calls.forEach(function (call) { Plotly.extendTraces(div, call[1], call[0]); });
      return true;
    });
  }

  function renderSection(sec, data) {
    sec.querySelector("h2").textContent = data.title;
    var body = sec.querySelector(".hp-body"), parts = data.parts, sig = shape(parts);
    if (body.getAttribute("data-shape") !== sig) {
      body.querySelectorAll(".hp-plot").forEach(function (d) { Plotly.purge(d); });
      body.textContent = "";
      parts.forEach(function (p) {
        if (p.plot) body.appendChild(plotBox(p));
        else if (p.grid) { var g = el("div", "grid"); p.grid.forEach(function (q) { g.appendChild(plotBox(q)); }); body.appendChild(g); }
        else body.appendChild(el("div", "hp-html"));
      });
      body.setAttribute("data-shape", sig);
    }
    var boxes = body.children;
    parts.forEach(function (p, i) {
      if (p.plot) drawPlot(p);
      else if (p.grid) p.grid.forEach(drawPlot);
      else setHtml(boxes[i], p.html);
    });
  }

  // The trials table of a large search comes a page at a time: the view holds the first page, the pager's buttons
  // fetch the others; a page other than the first is fetched again when the table changes, so it stays in view.
  var trialsPage = 0;
  function loadTrials(page) {
    var box = document.querySelector("#trials .hp-html");
    if (!box) return;
    fetch("/api/trials/" + encodeURIComponent(view) + "?page=" + page).then(function (r) {
      if (!r.ok) throw new Error("HTTP " + r.status);
      return r.json();
    }).then(function (data) { trialsPage = data.page; setHtml(box, data.html); })
      .catch(function () { status.className = "lost"; statusText.textContent = "could not fetch that page of trials"; });
  }
  main.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest(".hp-pager button[data-page]");
    if (button && !button.disabled) loadTrials(Number(button.getAttribute("data-page")));
  });

  // Above EAGER trials the quick sections (what a person watches a search for) are drawn at once and the others one
  // per task after them, so the history of a large search shows, and the page answers, before its slower figures
  // are drawn (a screenshot at load shows those as they come); the server sends each of those again at most every
  // few seconds (LATER_EVERY_S), while the quick ones come with every change. Up to EAGER every section is drawn
  // before the load event. The latest data of a section waiting to be drawn replaces the older.
  var EAGER = __EAGER__;
  var QUICK = {waiting: true, summary: true, history: true, trials: true};
  var later = {}, drainScheduled = false;
  var missed = {};  // sections whose delta could not be applied: asked for whole once the message is applied
  function draw(anchor, sec, data) {
    var t0 = performance.now();
    // A delta applies to the rendering it was made from only (the page's own hash of that section).
    if (data.extend) {
      if (data.from !== have[anchor] || !extendSection(sec, data)) missed[anchor] = true;
      else window.hpExtended = (window.hpExtended || 0) + 1;  // deltas applied (read by the browser test)
    } else renderSection(sec, data);
    window.hpTimings[anchor] = performance.now() - t0;
    if (anchor === "trials" && trialsPage > 0) loadTrials(trialsPage);
  }
  function drain() {
    drainScheduled = false;
    var anchor = Object.keys(later).sort(function (a, b) {
      var x = document.getElementById(a), y = document.getElementById(b);
      return Array.prototype.indexOf.call(main.children, x) - Array.prototype.indexOf.call(main.children, y);
    })[0];
    if (anchor === undefined) return;
    var data = later[anchor], sec = document.getElementById(anchor), t0 = performance.now();
    delete later[anchor];
    if (sec) draw(anchor, sec, data);
    // The next one waits as long as this one took: the slower figures take at most half of the page's thread, so a
    // finished trial's point is drawn soon after it comes even while they are being drawn.
    if (Object.keys(later).length) { drainScheduled = true; setTimeout(drain, performance.now() - t0); }
  }

  function apply(state, how) {
    document.getElementById("hp-title").textContent = state.title;
    document.getElementById("hp-subtitle").textContent = state.subtitle;
    document.title = state.title;
    if (state.warning) { warning.textContent = state.warning; warning.hidden = false; }
    else { warning.textContent = ""; warning.hidden = true; }
    var keep = {}, timings = {};
    window.hpTimings = timings;  // ms per section redrawn by the last update (read by benchmarks/dashboard.py)
    state.order.forEach(function (anchor, i) {
      keep[anchor] = true;
      var sec = document.getElementById(anchor);
      if (!sec) {
        sec = el("section"); sec.id = anchor;
        sec.appendChild(el("h2")); sec.appendChild(el("div", "hp-body"));
      }
      if (main.children[i] !== sec) main.insertBefore(sec, main.children[i] || null);
      var data = state.sections[anchor];
      if (data && (QUICK[anchor] || data.extend || state.trials <= EAGER)) { delete later[anchor]; draw(anchor, sec, data); }
      else if (data) { sec.querySelector("h2").textContent = data.title; later[anchor] = data; }
    });
    if (Object.keys(later).length && !drainScheduled) { drainScheduled = true; setTimeout(drain, 0); }
    Array.prototype.slice.call(main.children).forEach(function (sec) {
      if (!keep[sec.id]) { sec.querySelectorAll(".hp-plot").forEach(function (d) { Plotly.purge(d); }); sec.remove(); }
    });
    nav.textContent = "";
    state.order.forEach(function (anchor) {
      var a = el("a"); a.href = "#" + anchor; a.textContent = document.querySelector("#" + anchor + " h2").textContent;
      nav.appendChild(a);
    });
    var counts = state.counts || {}, running = counts.RUNNING || 0;
    status.setAttribute("data-trials", String(state.trials));
    status.setAttribute("data-version", String(state.version));
    Object.keys(counts).forEach(function (k) { status.setAttribute("data-" + k.toLowerCase(), String(counts[k])); });
    status.className = how === "loaded" ? "loaded" : "live";
    status.setAttribute("data-warm", String(state.warm || 0));
    statusText.textContent = how + " · " + state.trials + " trial(s)" +
      (state.warm ? " + " + state.warm + " warm-start" : "") + ", " + running + " running · updated " +
      new Date().toLocaleTimeString();
  }

  // The sections this page holds (anchor -> hash): the stream is opened with them, so it sends only what changed
  // since (a 10,000-trial page would otherwise receive, parse and draw every section a second time).
  var have = {};
  function holding() {
    return Object.keys(have).map(function (a) { return a + ":" + have[a]; }).join(",");
  }

  var initial = document.getElementById("hp-initial");
  if (initial) { var first = JSON.parse(initial.textContent); apply(first, "loaded"); have = first.hashes || {}; }

  var source = null;
  function connect() {
    var held = holding();
    source = new EventSource("/events/" + encodeURIComponent(view) + (held ? "?have=" + encodeURIComponent(held) : ""));
    source.addEventListener("update", function (event) {
      var t0 = performance.now(), state = JSON.parse(event.data);
      apply(state, "live");
      have = state.hashes || {};
      window.hpTimings.parse = performance.now() - t0 - Object.keys(window.hpTimings).reduce(function (n, k) { return n + window.hpTimings[k]; }, 0);
      var lost = Object.keys(missed);
      if (lost.length) {  // reconnect saying these are not held: the stream sends them whole
        lost.forEach(function (a) { delete have[a]; delete missed[a]; });
        source.close(); connect();
      }
    });
    source.addEventListener("error", function () {
      status.className = "lost";
      statusText.textContent = "connection lost, retrying… (the page keeps the last state it received)";
      // Reconnect ourselves, with what the page holds now (the browser's own retry would name the hashes it
      // held when this stream opened).
      source.close(); setTimeout(connect, 1000);
    });
  }
  connect();
})();
"""

#: name -> (body, media type) of the page's own static files.
STATIC: dict[str, tuple[bytes, str]] = {
    "dashboard.js": (
        (SORT_JS + FIT_JS + _CLIENT_JS.replace("__EAGER__", str(EAGER_TRIALS))).encode("utf-8"),
        "text/javascript",
    ),
    "dashboard.css": ((CSS + _EXTRA_CSS).encode("utf-8"), "text/css"),
}


def page_html(dashboard: Dashboard, view: str, initial: str | None = None) -> str:
    """The page of ``view``: a shell holding ``initial`` (the view's current message, `View.message`), which the
    script draws at once and then keeps up to date from the event stream."""
    links = []
    for name in dashboard.views:
        label = "comparison" if name == "compare" else dashboard.labels[int(name[7:])]
        href = "/compare" if name == "compare" else f"/search/{name[7:]}"
        current = ' class="current"' if name == view else ""
        links.append(f'<a href="{href}"{current}>{esc(label)}</a>')
    views = f'<div id="hp-views">{"".join(links)}</div>' if len(links) > 1 else ""
    state = (
        f'<script type="application/json" id="hp-initial">{json_for_script(initial)}</script>\n'
        if initial
        else ""
    )
    waiting = "loading…" if initial else "connecting…"
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<title>hpsearch dashboard</title>\n<link rel="icon" href="data:,">\n'
        '<link rel="stylesheet" href="/static/dashboard.css">\n'
        '<script src="/static/plotly.min.js"></script>\n'
        '<script src="/static/dashboard.js" defer></script>\n'
        f'</head>\n<body data-view="{esc(view)}">\n'
        f'<header><h1 id="hp-title">hpsearch dashboard</h1><div class="sub" id="hp-subtitle">{waiting}</div>'
        f"{views}</header>\n"
        f'<div id="hp-status"><span class="dot"></span><span id="hp-status-text">{waiting}</span></div>\n'
        '<div id="hp-warning" role="alert" hidden></div>\n'
        f'<nav id="hp-nav"></nav>\n<main id="hp-main"></main>\n{state}</body>\n</html>\n'
    )
