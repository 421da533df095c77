"""The dashboard and the report at 10,000 trials: what is aggregated, sampled or paged, and said so.

A 10,000-trial folder is written once by the real `SearchResult.save`; a server is real (uvicorn on 127.0.0.1, port 0)
and stopped by the test. Timings are measured by ``benchmarks/dashboard.py``, never asserted here.
"""

from __future__ import annotations

import json
import math
import random
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone

import pytest

from hpsearch import _events
from hpsearch.dashboard import Dashboard, start_in_background
from hpsearch.dashboard._views import TABLE_PAGE, parse_have
from hpsearch.report import _figures as figures
from hpsearch.report import _html as html
from hpsearch.results import SearchResult
from hpsearch.trial import Evaluation, TrialRecord, TrialState
from tests.hpsearch.test_dashboard import _events_reader

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
N = 10_000


def _trial(i: int, rng: random.Random) -> TrialRecord:
    roll = rng.random()
    state = TrialState.COMPLETE if roll < 0.7 else TrialState.PRUNED if roll < 0.95 else TrialState.FAIL
    lr = 10 ** rng.uniform(-4, -1)
    values = [1 - math.exp(-(j + 1) * lr * 40) * rng.uniform(0.85, 1.0) for j in range(3)]
    evs = [
        Evaluation(step=10 * (j + 1), epoch=j + 1.0, objective=v, metrics={"eval_accuracy": v})
        for j, v in enumerate(values)
    ]
    return TrialRecord(
        trial_id=str(i),
        number=i,
        name=f"run-{i}",
        state=state,
        params={"learning_rate": lr, "hidden": rng.choice([16, 64, 128])},
        objective=None if state is TrialState.FAIL else values[-1],
        started=T0 + timedelta(seconds=10 * i),
        finished=T0 + timedelta(seconds=10 * i + 5),
        intermediates=evs,
        last_step=30,
    )


def _result(n: int, folder=None) -> SearchResult:
    rng = random.Random(0)
    result = SearchResult(
        backend="optuna",
        directions=["maximize"],
        records=[_trial(i, rng) for i in range(n)],
        objective="eval_accuracy",
        started=T0,
        output_dir=None if folder is None else str(folder),
    )
    if folder is not None:
        result.save(folder)
    return result


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    folder = tmp_path_factory.mktemp("large")
    return folder, _result(N, folder)


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _initial(page: bytes) -> dict:
    text = page.decode("utf-8")
    start = text.index('<script type="application/json" id="hp-initial">') + len(
        '<script type="application/json" id="hp-initial">'
    )
    return json.loads(text[start : text.index("</script>", start)])


def _messages(url: str, out: list[dict], stop: threading.Event) -> None:
    _events_reader(url, out, stop, timeout=120)  # a 10,000-trial search's first message is large


def _wait(predicate, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _history_points(section: dict) -> int:
    figure = section["parts"][0]["figure"]
    return sum(len(t["x"]) for t in figure["data"] if t.get("name") != "best so far")


# ---------------------------------------------------------------------------------------------- figures


def test_history_keeps_every_trial_and_draws_them_with_webgl_past_a_thousand():
    kinds = []
    for n in (500, 2000):
        result = _result(n)
        fig = figures.history_figure(result)
        markers = [t for t in fig.data if t.name != "best so far"]
        points = sum(len(t.x) for t in markers)
        assert points == sum(
            1 for r in result.records if r.objective is not None
        )  # every trial, none dropped
        kinds.append({t.type for t in markers})
        assert kinds[-1] == {"scattergl" if points > figures.GL_POINTS else "scatter"}
    assert kinds == [{"scatter"}, {"scattergl"}]


def test_parallel_coordinates_of_a_large_search_are_sampled_and_say_so():
    result = _result(2000)
    complete = result.scored_trials()
    assert len(complete) > html.PARALLEL_MAX
    (plot,) = html._parallel(result)
    dims = plot.figure.data[0].dimensions
    assert all(len(d["values"]) == html.PARALLEL_MAX for d in dims)
    assert f"{html.PARALLEL_MAX:,} of the {len(complete):,} complete trials are drawn" in plot.caption
    # The sample keeps the best trial, and the axes and colors span every complete trial, drawn or not.
    values = [v[0] for _, v in complete]
    assert max(dims[-1]["values"]) == max(values)
    assert tuple(dims[-1]["range"]) == (min(values), max(values))
    line = plot.figure.data[0].line
    assert (line.cmin, line.cmax) == (min(values), max(values))
    # A search under the limit is drawn whole, with no such sentence.
    (whole,) = html._parallel(_result(300))
    assert "complete trials are drawn" not in whole.caption
    assert len(whole.figure.data[0].dimensions[0]["values"]) == len(_result(300).scored_trials())


def test_trial_pages_hold_every_trial_once_in_the_tables_order():
    result = _result(1234)
    names = []
    for page in range(3):
        text, shown, pages = html.trials_page(result, page)
        assert (shown, pages) == (page, 3)
        assert f"page {page + 1} of 3" in text
        names += [n for n in text.split('data-v="')[1:] if n.startswith("run-")]
    order = [r.name for r in _analysis_order(result)]
    assert [n.split('"')[0] for n in names] == order  # every trial once, best first across the pages
    assert html.trials_page(result, 99)[1:] == (2, 3)  # clamped to the last page
    _, page, pages = html.trials_page(_result(20), 5)
    assert (page, pages) == (0, 1)  # a small search: the report's table, one page


def _analysis_order(result: SearchResult) -> list[TrialRecord]:
    from hpsearch.report._analysis import order_best_first

    return order_best_first(result)


# ---------------------------------------------------------------------------------------------- served


@pytest.mark.slow
@pytest.mark.multiprocess
def test_a_10000_trial_search_is_served_with_a_bounded_first_page_and_live_updates(large):
    folder, result = large
    url, stop = start_in_background(folder)
    try:
        status, page = _get(url)
        assert status == 200
        # The first page: the quick sections drawn (the history with every trial), the table's first page, and a
        # stand-in for each slower section, so what the browser parses first stays bounded.
        assert len(page) < 3 * 2**20, len(page)
        initial = _initial(page)
        sections = initial["sections"]
        assert initial["trials"] == N and set(sections) == set(initial["order"])
        with_objective = sum(1 for r in result.records if r.objective is not None)
        assert _history_points(sections["history"]) == with_objective
        pages = -(-N // TABLE_PAGE)
        assert f"page 1 of {pages}" in json.dumps(sections["trials"])
        assert "Being drawn from the 10,000 trials" in json.dumps(sections["slices"])
        assert set(initial["hashes"]) == set(initial["order"])

        # The event stream, opened with what the page holds, sends only what it lacks.
        have = ",".join(f"{a}:{h}" for a, h in initial["hashes"].items())
        messages: list[dict] = []
        halt = threading.Event()
        reader = threading.Thread(
            target=_messages, args=(f"{url}events/search-0?have={have}", messages, halt), daemon=True
        )
        reader.start()
        # The slower sections follow (seconds each at 10,000 trials; minutes on a loaded 2-core machine).
        _wait(lambda: any("slices" in m["sections"] for m in messages), timeout=600)
        assert not any("history" in m["sections"] for m in messages)  # the page holds it already
        slices = next(m for m in messages if "slices" in m["sections"])["sections"]["slices"]
        assert "Being drawn" not in json.dumps(slices)

        # A trial finishes as a search records it: its point reaches the open stream.
        record = _trial(N, random.Random(1))
        record.state, record.objective = TrialState.COMPLETE, 0.5
        _events.trial_started(folder, record)
        result.records.append(record)
        result.record_trial(folder, record)
        _events.trial_finished(folder, record)
        _wait(lambda: any(m["trials"] == N + 1 and "history" in m["sections"] for m in messages))
        update = next(m for m in messages if m["trials"] == N + 1 and "history" in m["sections"])
        # The page holds the history: it is sent the new point only, which completes it.
        delta = update["sections"]["history"]
        assert "parts" not in delta and delta["from"] == initial["hashes"]["history"]
        assert _history_points(_extended(sections["history"], delta)) == with_objective + 1
        halt.set()

        # The table's other pages are fetched on demand, in the table's order (every trial once across the pages:
        # `test_trial_pages_hold_every_trial_once_in_the_tables_order`); past the last, the last.
        pages = -(-(N + 1) // TABLE_PAGE)
        for n, expect in ((1, 1), (pages - 1, pages - 1), (pages + 5, pages - 1)):
            status, body = _get(f"{url}api/trials/search-0?page={n}")
            data = json.loads(body)
            assert status == 200 and (data["page"], data["pages"]) == (expect, pages)
            rows = data["html"].count("<tr") - 1  # the header row
            assert rows == (TABLE_PAGE if expect < pages - 1 else (N + 1) - TABLE_PAGE * (pages - 1))
            assert f"page {expect + 1} of {pages}" in data["html"]
        assert _get(f"{url}api/trials/search-0?page=x")[0] == 400
        assert _get(f"{url}api/trials/search-7")[0] == 404
    finally:
        stop()


@pytest.mark.multiprocess
def test_a_page_that_holds_every_section_is_sent_none_again(tmp_path):
    _result(30, tmp_path)
    url, stop = start_in_background(tmp_path)
    try:
        initial = _initial(_get(url)[1])
        messages: list[dict] = []
        halt = threading.Event()
        have = ",".join(f"{a}:{h}" for a, h in initial["hashes"].items())
        for query, out in ((f"?have={have}", messages), ("", full := [])):
            threading.Thread(
                target=_messages, args=(f"{url}events/search-0{query}", out, halt), daemon=True
            ).start()
        _wait(lambda: messages and full)
        halt.set()
        # Only what changed since the page was rendered (the importance, if fANOVA finished meanwhile), never the rest.
        changed = {a for a, h in messages[0]["hashes"].items() if initial["hashes"].get(a) != h}
        assert set(messages[0]["sections"]) == changed and "history" not in changed
        assert set(full[0]["sections"]) == set(initial["order"])  # a page that holds nothing gets everything
        # Malformed: counts as holding nothing (a full message, never an error).
        assert parse_have("x" * 5000) == {} and parse_have("summary:zz,history") == {}
        assert parse_have(f"summary:{'0' * 16},x") == {"summary": "0" * 16}
    finally:
        stop()


@pytest.mark.multiprocess
def test_a_slow_section_does_not_hold_up_the_quick_ones(tmp_path, monkeypatch):
    from hpsearch.dashboard import _dashboard

    monkeypatch.setattr(_dashboard, "EAGER_TRIALS", 2)
    _result(20, tmp_path)
    release, started = threading.Event(), threading.Event()
    original = _dashboard.search_sections

    def sections(*args, **kwargs):
        out = []
        for anchor, title, build in original(*args, **kwargs):
            if anchor == "curves":

                def build(build=build):
                    started.set()
                    assert release.wait(60)
                    return build()

            out.append((anchor, title, build))
        return out

    monkeypatch.setattr(_dashboard, "search_sections", sections)
    dashboard = Dashboard([tmp_path])
    try:
        dashboard.refresh()
        dashboard.render("search-0")
        slow = threading.Thread(target=dashboard.render_next, args=("search-0",), daemon=True)
        slow.start()
        assert started.wait(60)
        # While the learning curves are being built, a finished trial's quick sections render.
        record = _trial(20, random.Random(2))
        _events.trial_finished(tmp_path, record)
        done = threading.Event()

        def quick() -> None:
            dashboard.refresh()
            dashboard.render("search-0", force=True)
            done.set()

        threading.Thread(target=quick, daemon=True).start()
        assert done.wait(60)
        assert json.loads(dashboard.cached("search-0").message())["trials"] == 21
        release.set()
        slow.join(60)
        assert "Being drawn" not in json.dumps(
            json.loads(dashboard.cached("search-0").message())["sections"]["curves"]
        )
    finally:
        release.set()
        dashboard.close()


def test_a_background_reader_keeps_showing_the_events_while_search_json_is_parsed(tmp_path):
    from hpsearch.dashboard import FolderReader

    result = _result(50, tmp_path)
    reader = FolderReader(tmp_path, background=True)
    assert reader.refresh() and len(reader.snapshot().records) == 50  # the first read is done at once
    record = _trial(50, random.Random(3))
    _events.trial_finished(tmp_path, record)
    result.records.append(record)
    result.save(tmp_path)  # a new snapshot: parsed in a thread, taken at a later refresh
    assert reader.refresh()
    assert reader._loading is not None  # the parse was handed to its thread, not done within refresh
    live = reader.snapshot()
    assert len(live.records) == 51 and live.records[-1] is not None  # the finished trial, from events.jsonl
    _wait(lambda: reader._loading is None or reader._loading.done.is_set())
    reader.refresh()
    assert reader._loading is None and reader._search_error is None
    assert {r.trial_id for r in reader.snapshot().records} == {r.trial_id for r in result.records}
    # The parsed file replaced the live copy of the trial it now holds.
    assert reader._live == {}
    # Not in the background: the same change is parsed within refresh.
    eager = FolderReader(tmp_path)
    eager.refresh()
    assert eager._loading is None and len(eager.snapshot().records) == 51


# ---------------------------------------------------------------------------------------------- deltas


def _extended(old: dict, delta: dict) -> dict:
    """``old`` (a section as JSON) with ``delta`` applied the way the page's Plotly.extendTraces applies it."""
    new = json.loads(json.dumps(old))
    plots = {}
    for part in new["parts"]:
        for plot in part.get("grid", [part]):
            if "plot" in plot:
                plots[plot["plot"]] = plot
    for entry in delta["extend"]:
        plot = plots[entry["plot"]]
        plot["caption"] = entry["caption"]
        for traces, update in entry["calls"]:
            for key, per_trace in update.items():
                for i, values in zip(traces, per_trace):
                    plot["figure"]["data"][i][key] += values
    return new


def test_a_finished_trial_reaches_a_page_that_holds_the_history_as_its_point_alone(tmp_path):
    from hpsearch.dashboard._views import _hash, section_delta

    result = _result(2000, tmp_path)
    dashboard = Dashboard([tmp_path])
    try:
        dashboard.refresh()
        before = dashboard.render("search-0")
        held = before.hashes()
        record = _trial(2000, random.Random(4))
        record.state, record.objective = TrialState.COMPLETE, 0.5  # the best-so-far line grows too
        _events.trial_started(tmp_path, record)
        result.records.append(record)
        result.record_trial(tmp_path, record)
        _events.trial_finished(tmp_path, record)
        dashboard.refresh()
        after = dashboard.render("search-0", force=True)
        message = json.loads(after.message(held))
        delta = message["sections"]["history"]
        assert "parts" not in delta and delta["from"] == held["history"]
        assert len(json.dumps(delta)) < 2000  # one point, not 2,000 again
        # Applied as the page applies it, the delta gives exactly the section a new page gets whole.
        old = json.loads(before.sections["history"][1])
        whole = json.loads(after.sections["history"][1])
        assert _extended(old, delta) == whole
        assert _history_points(whole) == _history_points(old) + 1
        best = next(t for t in whole["parts"][0]["figure"]["data"] if t["name"] == "best so far")
        assert best["x"][-1] == 2000 and best["y"][-1] == best["y"][-2]
        # Nothing dropped: a page holding an older rendering, or nothing, gets the whole section.
        assert "parts" in json.loads(after.message({**held, "history": "0" * 16}))["sections"]["history"]
        assert "parts" in json.loads(after.message())["sections"]["history"]
        assert _hash(before.sections["history"][1]) == held["history"]
    finally:
        dashboard.close()
    # Anything but appended points (a point that moved, a changed layout, HTML) is sent whole.
    text = before.sections["history"][1]
    moved = json.loads(text)
    moved["parts"][0]["figure"]["data"][0]["y"][0] += 1.0
    assert section_delta(text, json.dumps(moved)) is None
    relaid = json.loads(text)
    relaid["parts"][0]["figure"]["layout"]["height"] = 999
    assert section_delta(text, json.dumps(relaid)) is None
    table = before.sections["trials"][1]
    assert section_delta(table, table.replace("page 1 of", "page 1 of  ")) is None
