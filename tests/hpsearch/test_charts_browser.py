"""Every chart of the report, the comparison page and the live dashboard fits its cell and shows every trial.

Each page is opened in headless Chromium (driven as in ``test_report_browser``) at 1400 and 1920 px wide and
measured as soon as its load event fires (no waiting: a figure drawn before its cell had its final width was the
defect). For every plotly figure: the drawn SVG is exactly as wide as its cell and inside its section, and every
point of every trace lies inside its axis' visible range. Each chart is also written as a PNG (to
``$HPSEARCH_SCREENSHOTS`` when set, else the test's tmp folder) for a person to look at.

The searches hold warm-start rows and a parameter named as HTML markup: no chart may render it as an element.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from hpsearch.report import write_compare_html, write_html
from hpsearch.results import SearchResult
from hpsearch.trial import TrialRecord, TrialState
from tests.hpsearch.test_report import record, search
from tests.hpsearch.test_report_browser import browser, png_size  # noqa: F401  (browser is a fixture)

pytestmark = pytest.mark.slow

WIDTHS = (1400, 1920)
LINK_PARAM = '<a href="x">p</a>'
WARM_VALUE = 0.99  # the warm-start rows' objective, better than any trial of the search itself

# For each figure: the cell's width and the width plotly drew it at, the section's right edge, and the points of cartesian
# traces outside their axes' ranges (plotly's own d2l maps a value to the axis' linear units: category index,
# log10 on a log axis).
MEASURE_JS = """(() => Array.from(document.querySelectorAll('.hp-plot')).map(div => {
  const svg = div.querySelector('svg.main-svg'), fl = div._fullLayout;
  const section = div.closest('section').getBoundingClientRect();
  const best = (div.data || []).filter(t => t.name === 'best so far').map(t => Math.max(...t.y));
  const out = {id: div.id, best: best.length ? best[0] : null, cell: div.getBoundingClientRect().width, svg: null, right: null,
               sectionRight: section.right, points: 0, outside: [], links: div.querySelectorAll('svg a').length,
               texts: Array.from(div.querySelectorAll('svg text')).map(t => t.textContent)};
  if (!svg || !fl) return out;
  const box = svg.getBoundingClientRect();
  out.svg = fl.width; out.right = box.left + fl.width;
  (div._fullData || []).forEach(t => {
    if (t.type !== 'scatter' && t.type !== 'bar') return;
    const xa = fl[(t.xaxis || 'x').replace('x', 'xaxis')], ya = fl[(t.yaxis || 'y').replace('y', 'yaxis')];
    const xs = t.x || [], ys = t.y || [];
    for (let i = 0; i < xs.length; i++) {
      if (xs[i] === null || ys[i] === null || xs[i] === undefined || ys[i] === undefined) continue;
      out.points++;
      [[xa, xs[i]], [ya, ys[i]]].forEach(([ax, v]) => {
        const l = ax.d2l(v), lo = Math.min(ax.range[0], ax.range[1]), hi = Math.max(ax.range[0], ax.range[1]);
        if (!(l >= lo && l <= hi)) out.outside.push([t.name, ax._name, v, ax.range]);
      });
    }
  });
  return out;
}))()"""


def _result(offset: float, warm: bool) -> SearchResult:
    params = [
        {"lr": 10 ** -(1 + i % 4), "optimizer": ["adamw", "sgd", "rmsprop"][i % 3], LINK_PARAM: i % 2}
        for i in range(8)
    ]
    records = [
        record(
            i,
            TrialState.PRUNED if i == 5 else TrialState.COMPLETE,
            offset + 0.05 * i - 0.02 * (i % 3),
            params[i],
            steps=1 if i == 5 else 4,
        )
        for i in range(8)
    ]
    if warm:  # two earlier searches' trials told to this one, better than any of its own
        records += [
            TrialRecord(
                trial_id=f"warm-{i}",
                number=-(i + 1),
                name=f"warm-{i}",
                state=TrialState.COMPLETE,
                params=dict(params[i]),
                objective=WARM_VALUE,
                extra={"source": "warm_start"},
            )
            for i in range(2)
        ]
    return search(records, n_trials=8)


@pytest.fixture
def pages(tmp_path):
    """(name, url) of every page to measure; the dashboard serves two saved searches from this process."""
    from hpsearch.dashboard import start_in_background

    first, second = _result(0.5, warm=True), _result(0.45, warm=False)
    for name, result in (("first", first), ("second", second)):
        result.save(tmp_path / name)
    report = Path(write_html(first, tmp_path / "report.html"))
    compare = Path(write_compare_html([first, second], tmp_path / "compare.html", labels=["first", "second"]))
    url, stop = start_in_background([tmp_path / "first", tmp_path / "second"])
    try:
        yield [
            ("dashboard", url + "search/0"),
            ("dashboard-compare", url + "compare"),
            ("report", report.resolve().as_uri()),
            ("compare", compare.resolve().as_uri()),
        ]
    finally:
        stop()


def _shoot(browser, plot: dict, path: Path, box: str = "figure") -> None:  # noqa: F811
    rect = browser.evaluate(f"""(() => {{ const d = document.getElementById({plot["id"]!r});
        document.querySelectorAll('nav').forEach(n => {{ n.style.position = 'static'; }});  // not over the chart
        d.scrollIntoView(); const r = d.closest({box!r}).getBoundingClientRect();
        return {{x: r.x + window.scrollX, y: r.y + window.scrollY, width: r.width, height: r.height}}; }})()""")
    shot = browser.call(
        "Page.captureScreenshot", format="png", captureBeyondViewport=True, clip={**rect, "scale": 1}
    )
    path.write_bytes(base64.b64decode(shot["data"]))
    assert png_size(path.read_bytes())[0] == round(rect["width"])


@pytest.mark.parametrize("width", WIDTHS)
def test_every_chart_fits_its_cell_and_shows_every_trial(browser, pages, width, tmp_path):  # noqa: F811
    shots = Path(os.environ.get("HPSEARCH_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    browser.call(
        "Emulation.setDeviceMetricsOverride", width=width, height=1000, deviceScaleFactor=1, mobile=False
    )
    problems = []
    for name, url in pages:
        browser.events.clear()
        browser.call("Page.navigate", url=url)
        browser.wait_event("Page.loadEventFired", timeout=120)
        plots = browser.evaluate(MEASURE_JS)  # at load, as a screenshot taken then would show it
        if len(plots) < (2 if "compare" in name else 6):
            problems.append(f"{name}@{width}: {len(plots)} charts drawn at load: {[p['id'] for p in plots]}")
        for plot in plots:
            where = f"{name}@{width} {plot['id']}"
            if plot["svg"] is None:
                problems.append(f"{where}: not drawn")
                continue
            if abs(plot["svg"] - plot["cell"]) > 1 or plot["right"] > plot["sectionRight"] + 1:
                problems.append(f"{where}: drawn {plot['svg']:.0f} px wide in a {plot['cell']:.0f} px cell")
            if plot["outside"]:
                problems.append(f"{where}: points outside the axes {plot['outside'][:3]}")
            if plot["best"] is not None and plot["best"] >= WARM_VALUE:
                problems.append(f"{where}: the best-so-far line reaches a warm-start row ({plot['best']})")
            if plot["links"]:
                problems.append(f"{where}: {plot['links']} live link(s) in the chart")
            named = plot["id"] in (
                "hp-plot-parallel",
                "hp-plot-importance",
                "hp-plot-slice-0",
            )  # slice 0: sorted first
            if named and not any(LINK_PARAM in text for text in plot["texts"]):
                problems.append(f"{where}: the parameter {LINK_PARAM!r} is not shown as text")
            _shoot(browser, plot, shots / f"{name}-{width}-{plot['id']}.png")
        # A cell that changes width later (here the page's column narrows; no window resize, which plotly's own
        # `responsive` would follow) gets its figure redrawn at the new width.
        browser.evaluate("""new Promise(done => { document.querySelector('main').style.maxWidth = '900px';
            setTimeout(done, 1000); })""")
        for plot in browser.evaluate(MEASURE_JS):
            if plot["svg"] is not None and abs(plot["svg"] - plot["cell"]) > 1:
                problems.append(
                    f"{name}@{width} {plot['id']} after its cell narrowed: drawn {plot['svg']:.0f} px "
                    f"wide in a {plot['cell']:.0f} px cell"
                )
        browser.evaluate("document.querySelector('main').style.maxWidth = ''")
        table = "#best" if "compare" in name else "#trials"  # the best search / the best trial, starred
        marked = browser.evaluate(f"""Array.from(document.querySelectorAll('{table} tr.best')).map(tr =>
            [tr.cells[{0 if "compare" in name else 1}].textContent, getComputedStyle(tr.cells[0]).backgroundColor])""")
        expected = "first" if "compare" in name else "run-7"  # warm rows are better, but never the best run
        if [m[0] for m in marked] != [expected] or marked[0][1] != "rgb(220, 252, 231)":
            problems.append(f"{name}@{width}: best row marked {marked}, expected {expected!r} on green")
        _shoot(browser, {"id": table[1:]}, shots / f"{name}-{width}-table.png", "section")
        if name == "compare":
            trials = next(p for p in plots if p["id"] == "hp-plot-compare-trials")
            assert trials["points"] >= 14, trials  # 7 complete trials of each search, every one drawn
    assert not problems, "\n".join(problems)
