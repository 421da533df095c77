"""The live dashboard against optuna-dashboard on the same 1,000-trial Optuna study, side by side.

One study is built with optuna's own API (TPE-like spread of a log learning rate and two categorical
parameters; 10 intermediate values per trial; 70% COMPLETE, 25% PRUNED, 5% FAIL) into SQLite, and the same
trials are written as an hpsearch search folder (search.json), so both dashboards show the same data. Measured,
each dashboard in its own process, alternated over ``--rounds``:

- start-up: process start to the first HTTP 200 of its page;
- first view, server side: the cold JSON the page needs (ours: /api/views/search-0 with every section
  rendered; optuna-dashboard: /api/studies/1?after=0, the trials its page draws from);
- render in headless Chromium (when /usr/bin/chromium exists): navigation to (a) the optimization history drawn
  with every objective, (b) every figure and the trials table drawn (ours; for optuna-dashboard: its study
  page's figures drawn);
- update latency: a new trial written to the folder / study while the page is open, until the page shows it;
- memory while a search runs: RSS of each server while N more trials are written at full speed (each with 10
  evaluations) with a client connected, and the cost of one refresh after one event at 1,000 trials versus a
  full re-parse of search.json.

    python -m benchmarks.dashboard            # 1,000 trials, 3 rounds
    python -m benchmarks.dashboard --quick    # 30 trials, 1 round, then 2 trials written on the same servers
                                              # (CI smoke, in tmpfs)

Timings are printed, never asserted. optuna-dashboard (``pip install optuna-dashboard``) is optional: without it
the baseline columns are empty.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from benchmarks._common import emit_json, median, print_table, result_row

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
EVALS = 10


# ---------------------------------------------------------------------------------------------- the data


def _trial_spec(rng: random.Random, i: int) -> dict[str, Any]:
    lr = 10 ** rng.uniform(-4, -1)
    hidden = rng.choice([16, 64, 128])
    batch = rng.choice([16, 32])
    roll = rng.random()
    state = "COMPLETE" if roll < 0.70 else "PRUNED" if roll < 0.95 else "FAIL"
    n = EVALS if state == "COMPLETE" else rng.randint(1, EVALS - 1)
    rate = lr * 40 * (hidden / 64) ** 0.3
    values = [1 - math.exp(-(j + 1) * rate) * rng.uniform(0.85, 1.0) for j in range(n)]
    start = T0 + timedelta(seconds=12 * i)
    return {
        "number": i,
        "params": {"learning_rate": lr, "hidden": hidden, "per_device_train_batch_size": batch},
        "state": state,
        "values": values,
        "start": start,
        "end": start + timedelta(seconds=1 + n),
    }


def _optuna_trial(spec: dict[str, Any]) -> Any:
    from optuna.distributions import CategoricalDistribution, FloatDistribution
    from optuna.trial import FrozenTrial, TrialState

    state = {"COMPLETE": TrialState.COMPLETE, "PRUNED": TrialState.PRUNED, "FAIL": TrialState.FAIL}[
        spec["state"]
    ]
    return FrozenTrial(
        number=spec["number"],
        trial_id=spec["number"],
        state=state,
        value=spec["values"][-1] if state != TrialState.FAIL else None,
        values=None,
        datetime_start=spec["start"],
        datetime_complete=spec["end"],
        params=spec["params"],
        distributions={
            "learning_rate": FloatDistribution(1e-4, 1e-1, log=True),
            "hidden": CategoricalDistribution([16, 64, 128]),
            "per_device_train_batch_size": CategoricalDistribution([16, 32]),
        },
        user_attrs={},
        system_attrs={},
        intermediate_values={23 * (j + 1): v for j, v in enumerate(spec["values"])},
    )


def _record(spec: dict[str, Any]) -> Any:
    from hpsearch.trial import Evaluation, TrialRecord, TrialState

    evs = [
        Evaluation(step=23 * (j + 1), epoch=j + 1.0, objective=v, metrics={"eval_accuracy": v})
        for j, v in enumerate(spec["values"])
    ]
    return TrialRecord(
        trial_id=str(spec["number"]),
        number=spec["number"],
        name=f"run-{spec['number']}",
        state=TrialState(spec["state"]),
        params=dict(spec["params"]),
        objective=spec["values"][-1] if spec["state"] != "FAIL" else None,
        started=spec["start"],
        finished=spec["end"],
        intermediates=evs,
        last_step=evs[-1].step,
        error="RuntimeError: diverged" if spec["state"] == "FAIL" else None,
    )


SPACE = {
    "learning_rate": {"type": "float", "low": 1e-4, "high": 0.1, "log": True},
    "hidden": {"type": "categorical", "choices": [16, 64, 128]},
    "per_device_train_batch_size": {"type": "categorical", "choices": [16, 32]},
}


def build(folder: Path, n: int, seed: int = 0, study: bool = True) -> tuple[str, Any]:
    """The same n trials as an Optuna SQLite study (returned as its URL) and as an hpsearch search folder.

    ``study=False``: the search folder only (ours alone: writing 10,000 trials into SQLite takes minutes).
    """
    import optuna

    from hpsearch.results import SearchResult

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    specs = [_trial_spec(rng, i) for i in range(n)]
    url = f"sqlite:///{folder / 'study.db'}"
    if study:
        created = optuna.create_study(study_name="bench", storage=url, direction="maximize")
        created.add_trials([_optuna_trial(s) for s in specs])
    result = SearchResult(
        backend="optuna",
        directions=["maximize"],
        records=[_record(s) for s in specs],
        space=SPACE,
        n_trials=None,
        objective="eval_accuracy",
        started=T0,
        settings={"sampler": "TPESampler"},
        output_dir=str(folder / "search"),
    )
    result.save(folder / "search")
    return url, result


# ---------------------------------------------------------------------------------------------- browser


class Chromium:
    """Headless Chromium with one page, driven over the DevTools protocol (the test suite's client)."""

    FLAGS = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1280,900",
        "--remote-debugging-port=0",
    ]

    def __enter__(self) -> Any:
        from tests.hpsearch.test_report_browser import DevTools

        self.profile = Path(tempfile.mkdtemp(prefix="bench-chromium-"))
        self.proc = subprocess.Popen(
            [CHROMIUM, *self.FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        active = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (active.is_file() and len(active.read_text().split()) >= 2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("chromium did not start")
            time.sleep(0.1)
        port = int(active.read_text().split()[0])
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30))
        page = next(t for t in targets if t["type"] == "page")
        self.tools = DevTools(page["webSocketDebuggerUrl"])
        self.tools.call("Page.enable")
        self.tools.call("Network.enable")
        self.tools.call("Network.setCacheDisabled", cacheDisabled=True)
        return self.tools

    def __exit__(self, *exc: Any) -> None:
        self.tools.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=20)
        shutil.rmtree(self.profile, ignore_errors=True)


# ---------------------------------------------------------------------------------------------- servers


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            response.read()
            return int(response.status)
    except Exception:
        return 0


class Server:
    """One dashboard process: ours (``hpsearch dashboard``) or optuna-dashboard, on a free port."""

    def __init__(self, kind: str, target: str) -> None:
        self.kind = kind
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = _free_port()
        if kind == "ours":
            self.cmd = [sys.executable, "-m", "hpsearch", "dashboard", target, "--port", str(self.port)]
            self.page = f"http://127.0.0.1:{self.port}/"
            self.api = f"http://127.0.0.1:{self.port}/api/views/search-0"
        else:
            exe = shutil.which("optuna-dashboard") or str(Path(sys.executable).parent / "optuna-dashboard")
            self.cmd = [exe, target, "--port", str(self.port), "--quiet"]
            self.page = f"http://127.0.0.1:{self.port}/dashboard/studies/1"
            self.api = f"http://127.0.0.1:{self.port}/api/studies/1?after=0"

    def start(self) -> float:
        """Start the process; return the seconds until its page answers 200."""
        started = time.perf_counter()
        self.proc = subprocess.Popen(
            self.cmd, cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        while _status(self.page) != 200:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.kind} dashboard exited with {self.proc.returncode}")
            if time.perf_counter() - started > 120:
                raise RuntimeError(f"{self.kind} dashboard did not answer within 120 s")
            time.sleep(0.02)
        return time.perf_counter() - started

    def rss_mb(self) -> float:
        import psutil

        assert self.proc is not None, "start() first"
        proc = psutil.Process(self.proc.pid)
        return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)]) / 2**20

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)


def _fetch_seconds(url: str) -> tuple[float, int]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=300) as response:
        size = len(response.read())
    return time.perf_counter() - started, size


# What "drawn" means on each page. Ours: every figure container holds a drawn plotly figure, the importance is
# computed and the trials table lists every trial. optuna-dashboard's study page: its four figures hold data.
_HISTORY_JS = {
    "ours": "(() => { const d = document.getElementById('hp-plot-history'); return d && d.data ? "
    "d.data.filter(t => t.name !== 'best so far').reduce((n, t) => n + (t.x || []).length, 0) : 0; })()",
    "optuna-dashboard": "(() => { const d = document.getElementById('plot-history'); return d && d.data ? "
    "Math.max(0, ...d.data.map(t => (t.x || []).length)) : 0; })()",
}
_ALL_JS = {
    "ours": """(() => { const plots = Array.from(document.querySelectorAll('.hp-plot'));
        const rows = document.querySelectorAll('#trials tbody tr').length;
        return plots.length >= 6 && plots.every(d => d.querySelector('.main-svg') && (d.data || []).length)
               && !!document.getElementById('hp-plot-importance') && rows; })()""",
    "optuna-dashboard": """(() => { const ids = ['plot-history', 'graph-hyperparameter-importances',
        'graph-timeline', 'graph-intermediate-values'];
        return ids.every(id => { const d = document.getElementById(id);
                                 return d && d.querySelector('.main-svg') && (d.data || []).some(t => (t.x || t.y || []).length); }); })()""",
}


def _wait_js(tools: Any, expression: str, ok: Any, timeout: float = 120) -> float:
    started = time.perf_counter()
    while True:
        value = tools.evaluate(expression)
        if ok(value):
            return time.perf_counter() - started
        if time.perf_counter() - started > timeout:
            raise RuntimeError(f"timed out waiting for {expression[:60]}... (last {value!r})")
        time.sleep(0.02)


def render_in_browser(tools: Any, server: Server, n_complete: int) -> tuple[float, float]:
    """Seconds from navigation until (history drawn with every complete trial, every figure drawn)."""
    tools.call("Page.navigate", url="about:blank")
    started = time.perf_counter()
    tools.call("Page.navigate", url=server.page)
    _wait_js(tools, _HISTORY_JS[server.kind], lambda v: (v or 0) >= n_complete)
    history = time.perf_counter() - started
    _wait_js(tools, _ALL_JS[server.kind], bool)
    return history, time.perf_counter() - started


# ---------------------------------------------------------------------------------------------- live writes


class Writer:
    """Writes new trials the way a running search does: ours into the folder, optuna's into its storage."""

    def __init__(self, folder: Path, url: str, result: Any, seed: int = 1) -> None:
        self.folder, self.url, self.result = folder / "search", url, result
        self.rng = random.Random(seed)
        self.next = len(result.records)

    def spec(self) -> dict[str, Any]:
        spec = _trial_spec(self.rng, self.next)
        spec["state"], spec["values"] = "COMPLETE", [0.5 + 0.04 * j for j in range(EVALS)]
        spec["start"] = datetime.now(timezone.utc)
        spec["end"] = spec["start"] + timedelta(seconds=1)
        self.next += 1
        return spec

    def ours(self, spec: dict[str, Any]) -> None:
        from hpsearch import _events

        record = _record(spec)
        running = dataclasses_replace(record, intermediates=[], objective=None)
        _events.trial_started(self.folder, running)
        for ev in record.intermediates:
            _events.evaluated(self.folder, record.trial_id, ev)
        # As a running search records a trial (the session calls `record_trial`): one journal line, a snapshot only now and then
        # (it was `save`, the whole search.json rewritten per trial, which a search never does).
        self.result.records.append(record)
        self.result.record_trial(self.folder, record)
        _events.trial_finished(self.folder, record)

    def optuna(self, spec: dict[str, Any], study: Any) -> None:
        study.enqueue_trial(spec["params"])
        trial = study.ask()
        trial.suggest_float("learning_rate", 1e-4, 1e-1, log=True)
        trial.suggest_categorical("hidden", [16, 64, 128])
        trial.suggest_categorical("per_device_train_batch_size", [16, 32])
        for j, v in enumerate(spec["values"]):
            trial.report(v, 23 * (j + 1))
        study.tell(trial, spec["values"][-1])


def dataclasses_replace(obj: Any, **changes: Any) -> Any:
    import dataclasses

    return dataclasses.replace(obj, **changes)


def update_latency(tools: Any, server: Server, write: Any) -> float:
    """Seconds from a finished trial written (the writer's calls returned: the trial is in the journal, or the
    study, and its end in events.jsonl) to its point appearing in the open page's history plot.

    The clock starts once the write returned: the writer's own time is the search's, not the dashboard's (a
    snapshot of a 10,000-trial search.json, due every minute or so, took seconds of it under load).
    """
    expression = _HISTORY_JS[server.kind]
    before = tools.evaluate(expression)
    write()
    started = time.perf_counter()
    _wait_js(tools, expression, lambda v: (v or 0) > before, timeout=120)
    return time.perf_counter() - started


def _sse_client(url: str, stop: threading.Event, connected: threading.Event) -> None:
    try:
        with urllib.request.urlopen(url, timeout=600) as response:
            connected.set()
            while not stop.is_set() and response.readline():
                pass
    except Exception:
        pass


def _poll_client(url: str, stop: threading.Event, connected: threading.Event) -> None:
    # optuna-dashboard's page asks for the trials after the last one it has, about once a second when live.
    after = 0
    while not stop.is_set():
        try:
            with urllib.request.urlopen(f"{url}?after={after}", timeout=60) as response:
                after += len(json.loads(response.read()).get("trials", []))
        except Exception:
            pass
        connected.set()
        stop.wait(1.0)


def growth(
    server: Server, writer: Writer, n_new: int, study: Any, settle: float = 1.0, readings: int = 4
) -> list[tuple[int, float]]:
    """RSS (MB) of the server every n_new/4 trials while n_new trials are written with a client connected.

    ``settle``: seconds the client has to connect and the server to settle before the first reading, and between
    ``readings`` (the lowest is kept); 0 in a smoke run, whose figures are not read: it waits for the connection
    alone."""
    stop, connected = threading.Event(), threading.Event()
    if server.kind == "ours":
        client = threading.Thread(
            target=_sse_client, args=(server.page + "events/search-0", stop, connected), daemon=True
        )
    else:
        client = threading.Thread(
            target=_poll_client, args=(server.api.split("?")[0], stop, connected), daemon=True
        )
    client.start()
    if settle:
        time.sleep(settle)  # the client connects and the server settles
    else:
        connected.wait(60)  # a smoke run: only until the client is there
    samples = [(0, min(server.rss_mb() for _ in range(3)))]
    step = max(1, n_new // 4)
    for i in range(1, n_new + 1):
        spec = writer.spec()
        writer.ours(spec) if server.kind == "ours" else writer.optuna(spec, study)
        if i % step == 0:
            # The resting level: the lowest of a few readings, so a render in progress (its transient peak) does
            # not pass for growth.
            rss = []
            for _ in range(readings):
                time.sleep(settle / 2)
                rss.append(server.rss_mb())
            samples.append((i, min(rss)))
    stop.set()
    return samples


def refresh_costs(folder: Path, repeats: int) -> tuple[float, float]:
    """(one incremental refresh after one event, one full re-parse of search.json) in ms, at this folder's size."""
    from hpsearch import _events
    from hpsearch.dashboard import FolderReader
    from hpsearch.results import SearchResult
    from hpsearch.trial import Evaluation

    reader = FolderReader(folder)
    reader.refresh()
    incremental, full = [], []
    for i in range(repeats):
        _events.evaluated(folder, "0", Evaluation(step=i, epoch=None, objective=0.5, metrics={"x": 1.0}))
        started = time.perf_counter()
        reader.refresh()
        incremental.append(time.perf_counter() - started)
        started = time.perf_counter()
        SearchResult.load(folder)
        full.append(time.perf_counter() - started)
    return median(incremental) * 1e3, median(full) * 1e3


# ---------------------------------------------------------------------------------------------- main


def _have_baseline() -> bool:
    # Found, not imported: importing it took seconds in this process, which only starts it as a command (a release
    # that is installed but broken is reported as the baseline's failure when its server does not start).
    return importlib.util.find_spec("optuna_dashboard") is not None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true",
        help="30 trials, 1 round, then a 2-trial memory run on the same server, no settling, in tmpfs (CI smoke)",
    )  # fmt: skip
    parser.add_argument("--trials", type=int, help="trials in the study (default 1000; quick 30)")
    parser.add_argument("--rounds", type=int, help="alternated rounds (default 3; quick 1)")
    parser.add_argument(
        "--grow", type=int, help="trials written during the memory run (default 1000; quick 2)"
    )
    parser.add_argument("--no-browser", action="store_true")
    parser.add_argument(
        "--no-baseline",
        action="store_true",
        help="ours only (optuna-dashboard takes minutes at 10,000 trials)",
    )
    args = parser.parse_args(argv)
    args.trials = args.trials or (30 if args.quick else 1000)
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.grow = args.grow or (2 if args.quick else 1000)
    # A smoke run's figures are never read: its memory run does not wait for the server to settle, and it works in
    # tmpfs where there is one (SQLite's commits on a disk other jobs keep busy took most of its time).
    settle, readings = (0.0, 1) if args.quick else (1.0, 4)
    shm = "/dev/shm" if args.quick and os.path.isdir("/dev/shm") else None
    import optuna

    baseline = not args.no_baseline and _have_baseline()
    browser = not args.no_browser and Path(CHROMIUM).is_file()
    kinds = ["ours", "optuna-dashboard"] if baseline else ["ours"]
    work = Path(tempfile.mkdtemp(prefix="bench-dashboard-", dir=shm))
    try:
        url, result = build(work, args.trials, study=baseline)
        n_complete = sum(1 for r in result.records if r.state.value == "COMPLETE")
        print(
            f"{args.trials} trials ({n_complete} complete), {os.cpu_count()} CPUs, load average "
            f"{os.getloadavg()[0]:.1f}; optuna-dashboard: {'yes' if baseline else 'not installed'}; "
            f"browser: {'chromium' if browser else 'none'}"
        )
        targets = {"ours": str(work / "search"), "optuna-dashboard": url}
        times: dict[str, dict[str, list[float]]] = {k: {} for k in kinds}

        def add(kind: str, name: str, value: float) -> None:
            times[kind].setdefault(name, []).append(value)

        broken: dict[str, str] = {}

        def baseline_failed(kind: str, error: Exception) -> None:
            # The baseline is another project's page, driven through element ids that are not its API: when a
            # release changes them, its columns are left empty with the reason, and ours are still measured.
            broken[kind] = f"{type(error).__name__}: {error}"[:300]
            times.pop(kind, None)
            print(f"{kind}: left out of the comparison ({broken[kind]})")

        growth_rows: dict[str, list[tuple[int, float]]] = {}

        def measure_growth(kind: str, server: Server) -> None:
            study = optuna.load_study(study_name="bench", storage=url) if baseline else None
            writer = Writer(work, url, result, seed=7)
            growth_rows[kind] = growth(server, writer, args.grow, study, settle, readings)

        chromium = Chromium() if browser else None
        tools = chromium.__enter__() if chromium else None
        try:
            for round_ in range(args.rounds):
                order = kinds if round_ % 2 == 0 else kinds[::-1]  # alternate who goes first
                for kind in order:
                    server = Server(kind, targets[kind])
                    try:
                        if kind in broken:
                            continue
                        add(kind, "startup", server.start())
                        seconds, size = _fetch_seconds(server.api)
                        add(kind, "api", seconds)
                        add(kind, "api_mb", size / 2**20)
                        if tools is not None:
                            history, every = render_in_browser(tools, server, n_complete)
                            add(kind, "history", history)
                            add(kind, "all", every)
                            writer = Writer(work, url, result, seed=100 + round_)
                            study = optuna.load_study(study_name="bench", storage=url) if baseline else None
                            write = (
                                (lambda w=writer: w.ours(w.spec()))
                                if kind == "ours"
                                else (lambda w=writer, s=study: w.optuna(w.spec(), s))
                            )
                            add(kind, "update", update_latency(tools, server, write))
                        if args.quick:  # a smoke run's memory run: on this server, not on a fresh one
                            measure_growth(kind, server)
                    except Exception as error:
                        if kind == "ours":
                            raise
                        baseline_failed(kind, error)
                    finally:
                        server.stop()
            for kind in kinds:
                if kind in broken or kind in growth_rows:
                    continue
                server = Server(kind, targets[kind])
                try:
                    server.start()
                    _fetch_seconds(server.api)
                    measure_growth(kind, server)
                except Exception as error:
                    if kind == "ours":
                        raise
                    baseline_failed(kind, error)
                finally:
                    server.stop()
        finally:
            if chromium is not None:
                chromium.__exit__(None, None, None)
        incremental_ms, full_ms = refresh_costs(work / "search", 2 if args.quick else 20)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def med(kind: str, name: str) -> float | None:
        values = times.get(kind, {}).get(name)
        return median(values) if values else None

    labels = [
        ("startup", "start-up: process start to page 200 (s)", 2.0),
        ("api", "first view, server side: cold JSON (s)", None),
        ("api_mb", "first view JSON size (MB)", None),
        ("history", f"render in Chromium: history with {n_complete} complete trials drawn (s)", 2.0),
        ("all", "render in Chromium: every figure drawn (s)", 2.0),
        ("update", "update: a finished trial written -> drawn in the open page (s)", 2.0),
    ]
    table, rows = [], []
    for key, label, target in labels:
        ours, theirs = med("ours", key), med("optuna-dashboard", key)
        if ours is None:
            continue
        ratio = theirs / ours if theirs is not None and ours else None
        table.append(
            [
                label,
                ours,
                theirs if theirs is not None else "-",
                ratio if ratio is not None else "-",
                f"< {target:g}" if target else "-",
            ]
        )
        if key != "api_mb":
            rows.append(
                result_row(
                    label,
                    ours * 1e3,
                    None if theirs is None else theirs * 1e3,
                    ratio,
                    f"< {target:g} s" if target else "report (>1 = ours faster)",
                    (ours < target) if target else None,
                    unit="ms",
                )
            )
    print_table(
        f"Dashboard vs optuna-dashboard, {args.trials}-trial study, median of {args.rounds} round(s) "
        "(ratio = optuna-dashboard / ours: > 1 means ours is faster)",
        ["figure", "ours", "optuna-dashboard", "ratio", "target"],
        table,
    )

    grow_table = []
    for kind, samples in growth_rows.items():
        start, end = samples[0][1], samples[-1][1]
        per_1000 = (end - start) / max(1, samples[-1][0]) * 1000
        grow_table.append([kind, start, end, per_1000, " ".join(f"{n}:{mb:.0f}" for n, mb in samples)])
    print_table(
        f"Memory while {args.grow} more trials are written ({EVALS} evaluations each, a client connected)",
        ["server", "RSS before (MB)", "RSS after (MB)", "growth per 1000 trials (MB)", "samples (trials:MB)"],
        grow_table,
    )
    for kind, _, _, per_1000, _ in grow_table:
        rows.append(
            result_row(
                f"RSS growth per 1000 trials written, {kind}",
                per_1000,
                None,
                None,
                "flat: report",
                None,
                unit="MB",
            )
        )
    print_table(
        f"One refresh at {args.trials} trials",
        ["figure", "ms"],
        [
            ["incremental refresh after one evaluation event (ours)", incremental_ms],
            ["full re-parse of search.json (what a re-read per event would cost)", full_ms],
            ["ratio", full_ms / incremental_ms if incremental_ms else "-"],
        ],
    )
    rows.append(
        result_row(
            "refresh after one event vs full re-parse",
            incremental_ms,
            full_ms,
            full_ms / incremental_ms if incremental_ms else None,
            "report (>1 = incremental cheaper)",
            None,
            unit="ms",
        )
    )
    emit_json("dashboard", rows, trials=args.trials, rounds=args.rounds, baseline_failed=broken)


if __name__ == "__main__":
    main()
