"""The HTML report in a real browser: headless Chromium (Debian's ``chromium``) driven over the DevTools protocol.

The report of a real (tiny) search, with hostile strings planted in a trial's name, error and parameters, is
opened from a ``file://`` URL with the network off. Checked: no console error and no uncaught exception,
every plot drawn by plotly with data, the trials table lists every trial, the planted markup shows as text
and never runs, and a screenshot is written. Chromium is installed by ``scripts/install_chromium.sh``.
"""

from __future__ import annotations

import base64
import json
import shutil
import struct
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from hpsearch.report import write_html

pytestmark = pytest.mark.slow

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--enable-unsafe-swiftshader",  # WebGL in software (plotly draws parallel coordinates with it)
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1280,900",
    "--remote-debugging-port=0",
]
HOSTILE_NAME = "<script>window.__pwned = 1</script>"
HOSTILE_ERROR = '<img src=x onerror="window.__pwned = 2">'
HOSTILE_PARAM = "</script><script>window.__pwned = 3</script>"
SECTIONS_WITH_PLOTS = ["history", "curves", "parallel", "importance", "slices"]


class DevTools:
    """A minimal Chrome DevTools protocol client: commands by id, events kept in order."""

    def __init__(self, url: str) -> None:
        import websocket  # websocket-client, in the test extra

        self.ws = websocket.create_connection(url, timeout=60, suppress_origin=True)
        self.events: list[dict[str, Any]] = []
        self._id = 0

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self._id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]
            self.events.append(message)

    def wait_event(self, method: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {method} within {timeout}s")
            self.events.append(json.loads(self.ws.recv()))

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def close(self) -> None:
        self.ws.close()


@pytest.fixture
def browser(tmp_path):
    """Headless Chromium with a DevTools endpoint; yields a `DevTools` attached to its page."""
    if not Path(CHROMIUM).is_file():
        pytest.fail(
            f"{CHROMIUM} is missing; install it with scripts/install_chromium.sh (Debian package chromium)."
        )
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    log = (tmp_path / "chromium.log").open("wb")
    proc = subprocess.Popen(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"], stdout=log, stderr=log
    )
    try:
        # With port 0 Chromium picks a free port and writes it (and the browser's path) to DevToolsActivePort.
        active = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (active.is_file() and len(active.read_text().split()) >= 2):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(
                    f"chromium did not start: {(tmp_path / 'chromium.log').read_text()[-3000:]}"
                )
            time.sleep(0.1)
        port = int(active.read_text().split()[0])
        import urllib.request

        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30))
        page = next(t for t in targets if t["type"] == "page")
        tools = DevTools(page["webSocketDebuggerUrl"])
        try:
            tools.call("Runtime.enable")
            tools.call("Log.enable")
            tools.call("Page.enable")
            yield tools
        finally:
            tools.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)
        log.close()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def report(tmp_path):
    """The report of a real 6-trial Optuna search (one trial fails), with hostile strings planted in it."""
    import optuna

    from hpsearch import SearchResult, hyperparameter_search
    from tests.hpsearch.test_results_backends import make_trainer, space
    from trainer import TrainerCallback

    class FailSecondTrial(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.trial_name == "run-1" and state.global_step == 4:
                raise RuntimeError("diverged")

    out = tmp_path / "search"
    hyperparameter_search(
        # Two epochs of 23 steps, evaluated after each: enough for some trials to learn and some to be pruned.
        make_trainer(out, callbacks=[FailSecondTrial()], max_steps=46, eval_steps=23),
        hp_space=space(),
        compute_objective="eval_accuracy",
        n_trials=6,
        direction="maximize",
        backend="optuna",
        sampler=optuna.samplers.TPESampler(seed=0),
        pruner=optuna.pruners.ThresholdPruner(lower=0.5),
    )
    result = SearchResult.load(out)
    by_number = {r.number: r for r in result.records}
    by_number[0].name = HOSTILE_NAME
    by_number[1].error = f"RuntimeError: {HOSTILE_ERROR}"
    for record in result.records:  # a string parameter goes into the figures' JSON and the table
        record.params["note"] = HOSTILE_PARAM if record.number == 2 else "plain"
    path = Path(write_html(result, tmp_path / "report.html"))
    return result, path


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def test_report_renders_in_headless_chromium(browser, report, tmp_path):
    result, path = report
    browser.call("Page.navigate", url=path.resolve().as_uri())
    browser.wait_event("Page.loadEventFired", timeout=180)

    # Every plot container holds a plotly figure with data (plotly draws in newPlot; allow a moment anyway).
    plots_js = """Array.from(document.querySelectorAll('.hp-plot')).map(d => ({
        id: d.id, section: (d.closest('section') || {}).id || null,
        drawn: !!(d.querySelector('.main-svg') || d.querySelector('.plot-container')),
        traces: (d.data || []).length}))"""
    deadline = time.monotonic() + 60
    plots = browser.evaluate(plots_js)
    while not all(p["drawn"] for p in plots) and time.monotonic() < deadline:
        time.sleep(0.5)
        plots = browser.evaluate(plots_js)
    assert plots, "no .hp-plot element in the report"
    undrawn = [p for p in plots if not p["drawn"] or p["traces"] == 0]
    assert not undrawn, undrawn
    assert set(SECTIONS_WITH_PLOTS) <= {p["section"] for p in plots}, plots

    # The trials table lists every trial, names shown as text (the planted <script> is text, not an element).
    table = browser.evaluate("""(() => {
        const table = document.querySelector('#trials table.sortable');
        const head = Array.from(table.querySelectorAll('thead th')).map(th => th.textContent);
        const col = head.indexOf('name');
        return {head: head, names: Array.from(table.querySelectorAll('tbody tr'))
                                        .map(tr => tr.children[col].textContent)};
    })()""")
    assert sorted(table["names"]) == sorted(r.name for r in result.records)
    assert HOSTILE_NAME in table["names"]
    assert "params_note" in table["head"]
    assert browser.evaluate("typeof window.__pwned") == "undefined"
    assert browser.evaluate("document.querySelectorAll('main script:not([src])').length") == browser.evaluate(
        "document.querySelectorAll('.hp-plot').length"
    ), "a script element other than the figures' own appeared in the page"
    body_text = browser.evaluate("document.body.innerText")
    assert HOSTILE_ERROR in body_text or "RuntimeError" in body_text

    # No console error, no uncaught exception (warnings, e.g. WebGL's software fallback, are allowed).
    problems = []
    for event in browser.events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            problems.append(
                params["exceptionDetails"].get("exception", {}).get("description")
                or params["exceptionDetails"].get("text")
            )
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            problems.append(
                " ".join(str(a.get("value", a.get("description"))) for a in params.get("args", []))
            )
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            problems.append(params["entry"].get("text"))
    assert not problems, problems

    # A full-page screenshot.
    height = browser.call("Page.getLayoutMetrics")["cssContentSize"]["height"]
    shot = browser.call(
        "Page.captureScreenshot",
        format="png",
        captureBeyondViewport=True,
        clip={"x": 0, "y": 0, "width": 1280, "height": min(height, 16000), "scale": 1},
    )
    png = tmp_path / "report.png"
    png.write_bytes(base64.b64decode(shot["data"]))
    width, shot_height = png_size(png.read_bytes())
    assert width == 1280 and shot_height > 2000
