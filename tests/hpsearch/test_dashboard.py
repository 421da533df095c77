"""The live dashboard without a browser: the event log, the folder reader, the server and the CLI's bad input.

Servers are real (uvicorn on 127.0.0.1, port 0) and stopped by the test; folders are written by the real
`SearchResult.save` and `hpsearch._events` functions that a search uses.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from hpsearch import _events
from hpsearch.cli import main
from hpsearch.dashboard import Dashboard, FolderReader, NotASearchFolder, start_in_background
from hpsearch.results import SearchResult
from hpsearch.trial import Evaluation, TrialRecord, TrialState

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
HOSTILE = "<script>window.__pwned=1</script>"


def _record(i: int, state: TrialState = TrialState.COMPLETE, name: str | None = None, **kw) -> TrialRecord:
    evs = [
        Evaluation(step=10 * (j + 1), epoch=j + 1.0, objective=0.5 + 0.1 * j + 0.01 * i, metrics={"acc": 0.5})
        for j in range(3)
    ]
    return TrialRecord(
        trial_id=str(i),
        number=i,
        name=name or f"run-{i}",
        state=state,
        params={"lr": 10.0 ** -(i % 4 + 1), "h": 8 * (i % 3 + 1)},
        objective=evs[-1].objective,
        started=T0 + timedelta(seconds=10 * i),
        finished=T0 + timedelta(seconds=10 * i + 9),
        intermediates=evs,
        last_step=30,
        **kw,
    )


def _search(folder: Path, records: list[TrialRecord]) -> SearchResult:
    result = SearchResult(
        backend="optuna",
        directions=["maximize"],
        records=records,
        objective="eval_accuracy",
        n_trials=10,
        started=T0,
    )
    result.save(folder)
    return result


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read()


# ---------------------------------------------------------------------------------------------- event log


def _write_events(folder: str, worker: int, n: int) -> None:
    pad = "x" * 3000  # lines far longer than a pipe's atomic size: only O_APPEND keeps them whole
    for step in range(n):
        _events.evaluated(
            folder, f"{worker}", Evaluation(step=step, epoch=None, objective=0.5, metrics={"pad": pad})
        )  # type: ignore[dict-item]


@pytest.mark.multiprocess
def test_event_log_lines_stay_whole_under_concurrent_processes_and_threads(tmp_path):
    folder = str(tmp_path)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_write_events, args=(folder, w, 150)) for w in range(3)]
    threads = [threading.Thread(target=_write_events, args=(folder, 10 + w, 150)) for w in range(3)]
    for p in procs:
        p.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    lines = (tmp_path / _events.EVENTS_FILE).read_bytes().split(b"\n")
    assert lines[-1] == b""
    events = [json.loads(line) for line in lines[:-1]]  # raises if any line is interleaved
    assert len(events) == 6 * 150
    for worker in ("0", "1", "2", "10", "11", "12"):
        steps = [e["step"] for e in events if e["trial_id"] == worker]
        assert steps == list(range(150))  # each writer's own lines in order


def test_event_log_never_raises_and_warns_once(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    record = _record(0, TrialState.RUNNING)
    _events._warned = False
    with caplog.at_level("WARNING", logger="hpsearch._events"):
        _events.trial_started(blocker / "out", record)  # the output_dir cannot be created: no exception
        _events.trial_finished(blocker / "out", record)
    assert len([r for r in caplog.records if "events.jsonl" in r.getMessage()]) == 1


def test_event_log_holds_the_record_as_search_json_does(tmp_path):
    record = _record(3)
    record.params["betas"] = (0.9, 0.999)
    _events.trial_started(tmp_path, record)
    _events.evaluated(tmp_path, record.trial_id, record.intermediates[0])
    _events.trial_finished(tmp_path, record)
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events] == ["trial_start", "evaluation", "trial_end"]
    assert events[0]["params"]["betas"] == {"__tuple__": [0.9, 0.999]}
    assert events[1]["step"] == 10 and events[1]["objective"] == pytest.approx(0.53)
    _record_to_json = TrialRecord.to_dict

    assert events[2]["record"] == json.loads(json.dumps(_record_to_json(record)))


# ---------------------------------------------------------------------------------------------- reader


def test_reader_follows_a_running_trial_incrementally_and_drops_it_once_saved(tmp_path):
    _search(tmp_path, [_record(0), _record(1, TrialState.PRUNED)])
    reader = FolderReader(tmp_path)
    assert reader.refresh() and reader.warning is None
    assert [r.state for r in reader.snapshot().records] == [TrialState.COMPLETE, TrialState.PRUNED]

    running = _record(2, TrialState.RUNNING)
    running.started = datetime.now(timezone.utc)
    _events.trial_started(tmp_path, running)
    _events.evaluated(tmp_path, "2", Evaluation(step=10, epoch=1.0, objective=0.7, metrics={}))
    # Half of the next line only: a writer caught mid-line. It is not read until it is whole.
    line = (
        json.dumps(
            {
                "event": "evaluation",
                "time": "x",
                "trial_id": "2",
                "step": 20,
                "epoch": 2.0,
                "objective": 0.8,
                "metrics": {},
            }
        )
        + "\n"
    )
    with open(tmp_path / "events.jsonl", "a") as handle:
        handle.write(line[:25])
    assert reader.refresh()
    snap = {r.trial_id: r for r in reader.snapshot().records}
    assert snap["2"].state is TrialState.RUNNING
    assert [e.step for e in snap["2"].intermediates] == [10]
    offset = reader._offset
    with open(tmp_path / "events.jsonl", "a") as handle:
        handle.write(line[25:])
    assert reader.refresh()
    assert reader._offset > offset  # read on from where it stopped
    assert [e.step for e in {r.trial_id: r for r in reader.snapshot().records}["2"].intermediates] == [10, 20]
    assert not reader.refresh()  # nothing new: nothing changes
    assert reader.warning is None

    # The trial ends: search.json holds its final record, and the live copy is dropped.
    done = _record(2)
    done.started, done.finished = running.started, datetime.now(timezone.utc)
    _search(tmp_path, [_record(0), _record(1, TrialState.PRUNED), done])
    _events.trial_finished(tmp_path, done)
    assert reader.refresh()
    assert [r.state for r in reader.snapshot().records] == [
        TrialState.COMPLETE,
        TrialState.PRUNED,
        TrialState.COMPLETE,
    ]
    assert reader._live == {}


def test_reader_keeps_the_last_good_state_of_a_corrupt_search_json(tmp_path):
    _search(tmp_path, [_record(0), _record(1)])
    reader = FolderReader(tmp_path)
    reader.refresh()
    good = (tmp_path / "search.json").read_text()
    (tmp_path / "search.json").write_text(good[: len(good) // 2])  # cut mid-file
    assert reader.refresh()
    assert len(reader.snapshot().records) == 2
    assert reader.warning is not None and "search.json could not be read" in reader.warning
    assert "last good state" in reader.warning
    (tmp_path / "search.json").write_text(good)
    reader.refresh()
    assert reader.warning is None


def test_reader_shows_a_search_before_its_first_search_json_and_skips_bad_lines(tmp_path):
    running = _record(0, TrialState.RUNNING)
    _events.trial_started(tmp_path, running)
    with open(tmp_path / "events.jsonl", "a") as handle:
        handle.write("{not json}\n")
    _events.evaluated(tmp_path, "0", Evaluation(step=5, epoch=None, objective=0.4, metrics={}))
    reader = FolderReader(tmp_path)
    reader.refresh()
    assert not reader.has_search
    records = reader.snapshot().records
    assert (
        len(records) == 1 and records[0].state is TrialState.RUNNING and records[0].intermediates[0].step == 5
    )
    assert "1 line(s) of events.jsonl" in (reader.warning or "")


def test_reader_starts_over_when_the_log_is_replaced(tmp_path):
    _events.trial_started(tmp_path, _record(0, TrialState.RUNNING))
    reader = FolderReader(tmp_path)
    reader.refresh()
    os.replace(tmp_path / "events.jsonl", tmp_path / "old.jsonl")
    _events.trial_started(tmp_path, _record(7, TrialState.RUNNING))
    reader.refresh()
    assert [r.trial_id for r in reader.snapshot().records] == ["7"]


@pytest.mark.multiprocess
def test_reader_never_writes_to_the_folder(tmp_path):
    _search(tmp_path, [_record(0), _record(1)])
    _events.trial_started(tmp_path, _record(2, TrialState.RUNNING))
    before = {p.name: (p.stat().st_mtime_ns, p.stat().st_size) for p in tmp_path.iterdir()}
    dashboard = Dashboard([tmp_path])
    dashboard.refresh()
    dashboard.render("search-0")
    dashboard.close()
    after = {p.name: (p.stat().st_mtime_ns, p.stat().st_size) for p in tmp_path.iterdir()}
    assert after == before


@pytest.mark.multiprocess
def test_a_large_search_gets_its_quick_sections_first_and_the_others_one_at_a_time(tmp_path, monkeypatch):
    from hpsearch.dashboard import _dashboard

    monkeypatch.setattr(_dashboard, "EAGER_TRIALS", 2)  # these 3 trials count as a large search
    monkeypatch.setattr(_dashboard, "LATER_EVERY_S", 3600.0)  # longer than this test takes under any load
    _search(tmp_path, [_record(0), _record(1), _record(2)])
    dashboard = Dashboard([tmp_path])
    try:
        dashboard.refresh()
        first = json.loads(dashboard.render("search-0").message())

        def pending() -> list[str]:
            view = json.loads(dashboard.cached("search-0").message())  # type: ignore[union-attr]
            return [a for a in view["order"] if "Being drawn" in json.dumps(view["sections"][a])]

        assert set(first["sections"]) == set(first["order"]) and first["trials"] == 3
        quick = ["summary", "history", "trials"]
        assert pending() == [a for a in first["order"] if a not in quick]
        assert "Being drawn from the 3 trials" in json.dumps(first["sections"]["curves"])
        while remaining := pending():  # one section per call, in page order
            assert dashboard.render_next("search-0")
            assert pending() == remaining[1:]
        done = json.loads(dashboard.cached("search-0").message())
        assert not any("Being drawn" in json.dumps(s) for s in done["sections"].values())
        assert done["sections"]["curves"]["parts"][0]["figure"]["data"]

        # A new trial: the quick sections follow at once, the others stay as drawn until render_next redoes them.
        _events.trial_finished(tmp_path, _record(3))
        dashboard.refresh()
        before = dashboard.cached("search-0")
        after = dashboard.render("search-0", force=True)
        assert after.sections["curves"] == before.sections["curves"]
        assert after.sections["history"] != before.sections["history"]
        assert json.loads(after.message())["trials"] == 4
        # A large search's slower sections are rendered again at most every LATER_EVERY_S, whatever their cost.
        assert not dashboard.render_next("search-0")
        cache = dashboard._sections["search-0"]
        assert all(cache[a].next_at >= time.monotonic() + 3000 for a in cache if a not in quick)
        cache["curves"].next_at = 0.0  # its time has come
        assert dashboard.render_next("search-0")
        assert dashboard.cached("search-0").sections["curves"] != before.sections["curves"]
        complete = dashboard.render("search-0", complete=True)
        assert complete.sections["parallel"] != before.sections["parallel"]
    finally:
        dashboard.close()


def test_not_a_search_folder(tmp_path):
    with pytest.raises(NotASearchFolder, match=r"neither search\.json nor events\.jsonl"):
        Dashboard([tmp_path])
    with pytest.raises(NotASearchFolder, match="is not a folder"):
        Dashboard([tmp_path / "missing"])


# ---------------------------------------------------------------------------------------------- server


@pytest.fixture
def served(tmp_path):
    folder = tmp_path / "search"
    _search(
        folder, [_record(0, name=HOSTILE), _record(1, TrialState.FAIL, error=f"boom {HOSTILE}"), _record(2)]
    )
    url, stop = start_in_background([folder], poll_interval=0.1)
    try:
        yield url, folder
    finally:
        stop()


@pytest.mark.multiprocess
def test_server_serves_the_views_escaped_with_security_headers(served):
    url, _ = served
    assert url.startswith("http://127.0.0.1:")
    status, headers, body = _get(url)
    assert status == 200 and b'data-view="search-0"' in body
    assert "script-src 'self'" in headers["content-security-policy"]
    assert b"<script>" not in body.replace(b'<script src="/static/', b"")  # no inline script at all
    status, _, body = _get(url + "api/views/search-0")
    view = json.loads(body)
    assert view["trials"] == 3 and view["counts"]["FAIL"] == 1
    assert view["order"][:3] == ["summary", "history", "curves"] and "trials" in view["order"]
    table = view["sections"]["trials"]["parts"][0]["html"]
    assert HOSTILE not in table and "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in table
    assert HOSTILE not in view["sections"]["summary"]["parts"][0]["html"]
    curves = view["sections"]["curves"]["parts"][0]
    assert curves["plot"] == "hp-plot-curves" and curves["figure"]["data"]
    status, headers, body = _get(url + "static/plotly.min.js")
    assert status == 200 and len(body) > 1_000_000 and headers["content-type"].startswith("text/javascript")


@pytest.mark.parametrize(
    "path",
    [
        "static/..%2F..%2Fsearch.json",
        "static/../search.json",
        "static/%2Fetc%2Fpasswd",
        "search/7",
        "search/-1",
        "api/views/..%2Fsearch.json",
        "events/compare",
        "search.json",
        "api/views/search-1",
    ],
)
@pytest.mark.multiprocess
def test_server_serves_nothing_outside_its_own_files(served, path):
    url, _ = served
    status, _, body = _get(url + path)
    assert status == 404, (path, status)
    assert b"format" not in body and b"root:" not in body


@pytest.mark.multiprocess
def test_server_refuses_foreign_host_headers(served):
    url, _ = served
    status, _, _ = _get(url, headers={"Host": "attacker.example:8765"})
    assert status == 400
    assert _get(url, headers={"Host": "localhost"})[0] == 200


def _events_reader(url: str, out: list[dict], stop: threading.Event, timeout: float = 60) -> None:
    """The server-sent events of ``url``, each message's JSON appended to ``out`` until ``stop`` is set."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        data: list[str] = []
        while not stop.is_set():
            line = response.readline().decode("utf-8")
            if not line:
                return
            if line.startswith("data: "):
                data.append(line[6:].rstrip("\n"))
            elif line == "\n" and data:
                out.append(json.loads("\n".join(data)))
                data = []


@pytest.mark.multiprocess
def test_event_stream_sends_the_view_then_only_changed_sections(served):
    url, folder = served
    messages: list[dict] = []
    stop = threading.Event()
    thread = threading.Thread(
        target=_events_reader, args=(url + "events/search-0", messages, stop), daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 60
    while not messages and time.monotonic() < deadline:
        time.sleep(0.05)
    assert messages and set(messages[0]["sections"]) == set(messages[0]["order"])
    running = _record(3, TrialState.RUNNING)
    running.started = datetime.now(timezone.utc)
    _events.trial_started(folder, running)
    _events.evaluated(folder, "3", Evaluation(step=10, epoch=1.0, objective=0.9, metrics={}))

    def updates() -> list[dict]:
        return list(messages[1:])

    def sent(section: str) -> bool:
        return any(section in m["sections"] for m in updates())

    # The two events are two writes: the server, polling every 0.1 s, may send one update per event.
    while not (sent("curves") and any(m["trials"] == 4 for m in updates())) and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    running_seen = [m for m in updates() if m["trials"] == 4 and m["counts"]["RUNNING"] == 1]
    assert running_seen, updates()
    assert sent("curves") and sent("summary")
    assert not sent("parallel")  # complete trials did not change: not sent again


@pytest.mark.multiprocess
def test_two_folders_get_a_comparison_view(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    _search(a, [_record(0), _record(1)])
    _search(b, [_record(0), _record(1), _record(2)])
    url, stop = start_in_background([a, b])
    try:
        status, _, body = _get(url)
        assert status == 200 and b'data-view="compare"' in body and b'href="/search/1"' in body
        view = json.loads(_get(url + "api/views/compare")[2])
        assert view["order"] == ["curves", "best", "target"] and view["trials"] == 5
        assert json.loads(_get(url + "api/views/search-1")[2])["trials"] == 3
    finally:
        stop()


def test_start_in_background_accepts_a_folder_that_is_still_empty(tmp_path):
    url, stop = start_in_background(tmp_path / "not-yet")
    try:
        view = json.loads(_get(url + "api/views/search-0")[2])
        assert view["trials"] == 0 and view["order"][0] == "waiting"
    finally:
        stop()
    assert not (tmp_path / "not-yet").exists()  # the dashboard creates nothing


# ---------------------------------------------------------------------------------------------- CLI


def test_cli_refuses_a_folder_that_is_not_a_search(tmp_path, capsys):
    assert main(["dashboard", str(tmp_path), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "not a search folder" in err and str(tmp_path) in err and "Traceback" not in err


def test_cli_refuses_a_port_in_use(tmp_path, capsys):
    _search(tmp_path, [_record(0)])
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        assert main(["dashboard", str(tmp_path), "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"port {port}" in err and "already in use" in err and "--port" in err


def test_cli_refuses_a_remote_address_without_allow_remote(tmp_path, capsys):
    _search(tmp_path, [_record(0)])
    assert main(["dashboard", str(tmp_path), "--host", "0.0.0.0", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "--allow-remote" in err and "authentication" in err


def test_reader_ignores_the_events_of_an_earlier_search_in_the_same_folder(tmp_path):
    # A search killed the day before left trial 5 running in the log.
    line = {
        "event": "trial_start",
        "time": (T0 - timedelta(days=1)).isoformat(),
        "trial_id": "5",
        "number": 5,
        "name": "run-5",
        "params": {},
    }
    (tmp_path / "events.jsonl").write_text(json.dumps(line) + "\n")
    _search(tmp_path, [_record(0)])  # today's search (started at T0) has finished one trial
    reader = FolderReader(tmp_path)
    reader.refresh()
    assert [r.trial_id for r in reader.snapshot().records] == ["0"]


def test_start_in_background_refuses_a_port_in_use(tmp_path):
    from hpsearch.dashboard import DashboardError

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        with pytest.raises(DashboardError, match="already in use"):
            start_in_background(tmp_path, port=busy.getsockname()[1])
