"""The live dashboard in a real browser, following a real search as it runs.

A digits search (Optuna, a ThresholdPruner, a model_init that raises for ``hidden=8``) runs in a subprocess;
``hpsearch dashboard`` serves its folder from another subprocess; headless Chromium (driven over the DevTools
protocol, as in ``test_report_browser``) opens the page once. Checked without any reload: the trial count and
the history plot grow, a running trial's learning curve shows, a PRUNED and a FAIL trial appear with their
states, the final page agrees with search.json, a corrupt search.json mid-run leaves the last good state on the
page with a warning (gone once the file is good again), no console error; a screenshot is written.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpsearch.results import SearchResult
from tests.hpsearch.test_report_browser import browser, png_size  # noqa: F401  (browser is a fixture)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
N_TRIALS = 6

SAMPLE_JS = """(() => {
  const s = document.getElementById('hp-status'), w = document.getElementById('hp-warning');
  const h = document.getElementById('hp-plot-history'), c = document.getElementById('hp-plot-curves');
  const points = (h && h.data) ? h.data.filter(t => t.name !== 'best so far')
                                       .reduce((n, t) => n + (t.x || []).length, 0) : 0;
  const running = (c && c.data) ? c.data.filter(t => t.name === 'RUNNING' && (t.x || []).length).length : 0;
  const d = s.dataset;
  return {trials: Number(d.trials || -1), complete: Number(d.complete || 0), pruned: Number(d.pruned || 0),
          fail: Number(d.fail || 0), running: Number(d.running || 0), history: points, runningCurves: running,
          warning: w.hidden ? null : w.textContent, marker: window.__hpMarker || null,
          extended: window.hpExtended || 0};
})()"""

STATES_JS = """(() => {
  const table = document.querySelector('#trials table.sortable');
  if (!table) return [];
  const head = Array.from(table.querySelectorAll('thead th')).map(th => th.textContent);
  const state = head.indexOf('state'), error = head.indexOf('error');
  return Array.from(table.querySelectorAll('tbody tr')).map(tr => [tr.children[state].textContent,
                                                                  tr.children[error].textContent]);
})()"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _wait(predicate, timeout: float, what: str, interval: float = 0.25):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def _stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()  # by its own pid
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=20)


def _console_problems(events: list[dict]) -> list[str]:
    problems = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            problems.append(details.get("exception", {}).get("description") or details.get("text"))
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            problems.append(
                " ".join(str(a.get("value", a.get("description"))) for a in params.get("args", []))
            )
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            problems.append(params["entry"].get("text"))
    return problems


def test_dashboard_follows_a_live_search_in_headless_chromium(browser, tmp_path):  # noqa: F811
    out = tmp_path / "search"
    search_log = (tmp_path / "search.log").open("wb")
    search = subprocess.Popen(
        [sys.executable, "-m", "tests.hpsearch._dashboard_search", str(out)],
        cwd=ROOT,
        env=_env(),
        stdout=search_log,
        stderr=subprocess.STDOUT,
    )
    dashboard = None
    try:
        # The folder becomes a search when the first trial starts (events.jsonl) - before any search.json.
        _wait(lambda: (out / "events.jsonl").is_file() or search.poll() is not None, 180, "the first trial")
        assert search.poll() is None, (tmp_path / "search.log").read_text()[-3000:]
        dashboard = subprocess.Popen(
            [sys.executable, "-m", "hpsearch", "dashboard", str(out), "--port", "0"],
            cwd=ROOT,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = dashboard.stdout.readline()  # type: ignore[union-attr]
        assert "http://127.0.0.1:" in line, line + (
            dashboard.stderr.read() if dashboard.poll() is not None else ""
        )  # type: ignore[union-attr]
        url = line.split()[2]

        browser.call("Page.navigate", url=url)
        browser.wait_event("Page.loadEventFired", timeout=120)
        browser.evaluate("window.__hpMarker = 'same page'")

        samples = []
        deadline = time.monotonic() + 400
        while search.poll() is None and time.monotonic() < deadline:
            samples.append(browser.evaluate(SAMPLE_JS))
            time.sleep(0.3)
        assert search.wait(timeout=60) == 0, (tmp_path / "search.log").read_text()[-3000:]
        saved = SearchResult.load(out)
        assert len(saved.records) == N_TRIALS
        final = _wait(
            lambda: (
                (s := browser.evaluate(SAMPLE_JS))["trials"] == N_TRIALS
                and s["running"] == 0
                and s["history"] == sum(1 for r in saved.records if r.objective is not None)
                and s
            ),
            60,
            "the final state on the page",
        )
        samples.append(final)

        # It grew while we watched, in one page (no navigation, our marker still there).
        assert all(s["marker"] == "same page" for s in samples)
        assert sum(1 for e in browser.events if e.get("method") == "Page.loadEventFired") == 1
        trial_counts = sorted({s["trials"] for s in samples if s["trials"] > 0})
        assert len(trial_counts) >= 3 and trial_counts[-1] == N_TRIALS, trial_counts
        history = [s["history"] for s in samples]
        assert len(set(history)) >= 3 and history == sorted(history), history
        assert any(s["runningCurves"] > 0 for s in samples), "never saw a running trial's learning curve"
        # A finished trial's point came as a delta and was appended to the drawn history at least once (the count
        # above says the appended points are the right ones).
        assert final["extended"] >= 1, samples

        # A pruned and a failed trial, with their states, as search.json has them.
        counts = saved.counts()
        assert counts["PRUNED"] >= 1 and counts["FAIL"] >= 1
        assert (final["complete"], final["pruned"], final["fail"]) == (
            counts["COMPLETE"],
            counts["PRUNED"],
            counts["FAIL"],
        )
        rows = browser.evaluate(STATES_JS)
        assert sorted(state for state, _ in rows) == sorted(r.state.value for r in saved.records)
        assert any(state == "FAIL" and "model_init refuses hidden=8" in error for state, error in rows), rows

        # A corrupt search.json: the page keeps the last good state and warns; a good file clears the warning.
        good = (out / "search.json").read_text()
        (out / "search.json").write_text(good[: len(good) // 2])
        warned = _wait(lambda: (s := browser.evaluate(SAMPLE_JS))["warning"] and s, 30, "the warning")
        assert "search.json could not be read" in warned["warning"] and "last good state" in warned["warning"]
        assert warned["trials"] == N_TRIALS and warned["history"] == final["history"]
        tmp = out / ".restore.tmp"
        tmp.write_text(good)
        os.replace(tmp, out / "search.json")
        _wait(lambda: browser.evaluate(SAMPLE_JS)["warning"] is None, 30, "the warning to clear")

        assert not _console_problems(browser.events), _console_problems(browser.events)

        height = browser.call("Page.getLayoutMetrics")["cssContentSize"]["height"]
        shot = browser.call(
            "Page.captureScreenshot",
            format="png",
            captureBeyondViewport=True,
            clip={"x": 0, "y": 0, "width": 1280, "height": min(height, 16000), "scale": 1},
        )
        png = tmp_path / "dashboard.png"
        png.write_bytes(base64.b64decode(shot["data"]))
        width, shot_height = png_size(png.read_bytes())
        assert width == 1280 and shot_height > 2000
    finally:
        _stop(dashboard)
        _stop(search)
        search_log.close()
    assert dashboard is not None and dashboard.returncode is not None
