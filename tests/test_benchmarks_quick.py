"""Every benchmark's ``--quick`` mode still runs and prints a readable result (timings are never asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.__main__ import BENCHMARKS, read_rows
from benchmarks._common import JSON_PREFIX

ROOT = Path(__file__).resolve().parents[1]
NAMES = [name for name in BENCHMARKS if (ROOT / "benchmarks" / f"{name}.py").is_file()]

pytestmark = [pytest.mark.slow]
# Each --quick run is a benchmark process that trains in itself (beside another test, it only runs slower); these
# start services or process groups besides (a local Ray, the dashboards' servers and a browser, trial workers), so
# they run alone, in the services tier.
_LAUNCHES = {"ray_overhead", "dashboard", "parallel_scaling", "trial_workers", "time_to_target"}
#: Those that start a Ray: they run with the other Ray tests, one at a time (see tests/conftest.py).
_STARTS_RAY = {"ray_overhead", "time_to_target"}


def _marks(name: str) -> list[pytest.MarkDecorator]:
    marks = [pytest.mark.multiprocess] if name in _LAUNCHES else []
    return marks + [pytest.mark.ray] if name in _STARTS_RAY else marks


def _run(*args: str, timeout: float = 480) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, "-m", *args], cwd=str(ROOT), env=env, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


@pytest.mark.parametrize("name", [pytest.param(n, marks=_marks(n)) for n in NAMES])
def test_quick_mode_runs_and_reports(name):
    proc = _run(f"benchmarks.{name}", "--quick")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    rows = read_rows(name, proc.stdout)
    assert rows, f"{name} printed no readable result:\n{proc.stdout[-2000:]}"
    for row in rows:
        assert {"name", "ours", "baseline", "ratio", "target", "met"} <= set(row), row
    last = proc.stdout.strip().splitlines()[-1]
    if BENCHMARKS[name] is None:  # ours print their JSON line last
        assert last.startswith(JSON_PREFIX), last
        payload = json.loads(last[len(JSON_PREFIX) :])
        assert payload["benchmark"] == name and payload["rows"] == rows


def test_suite_runner_collects_a_table():
    # The runner itself on the cheapest benchmark: its row in the table, and the runner's own JSON line last.
    proc = _run("benchmarks", "--quick", "--only", "memory")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "| benchmark" in proc.stdout
    payload = json.loads(proc.stdout.strip().splitlines()[-1][len(JSON_PREFIX) :])
    assert [row["benchmark"] for row in payload["rows"]] == ["memory"]


@pytest.mark.multiprocess  # the dashboard's server
def test_a_failing_baseline_is_left_out_and_ours_still_measured(monkeypatch, capsys):
    """The dashboard benchmark drives optuna-dashboard through page ids that are not its API; when a release of it
    breaks the run, its columns are left empty with the reason instead of failing the benchmark."""
    from benchmarks import dashboard

    started = dashboard.Server.start

    def start(server):
        if server.kind != "ours":
            raise RuntimeError("optuna-dashboard changed its page")
        return started(server)

    monkeypatch.setattr(dashboard.Server, "start", start)
    monkeypatch.setattr(dashboard, "_have_baseline", lambda: True)
    # Smaller than the quick mode: only the baseline's failure and our start-up are checked.
    dashboard.main(["--quick", "--no-browser", "--trials", "8", "--grow", "1"])
    out = capsys.readouterr().out
    payload = json.loads(out.strip().splitlines()[-1][len(JSON_PREFIX) :])
    assert payload["baseline_failed"] == {
        "optuna-dashboard": "RuntimeError: optuna-dashboard changed its page"
    }
    startup = next(row for row in payload["rows"] if row["name"].startswith("start-up"))
    assert startup["ours"] > 0 and startup["baseline"] is None


def test_peer_reports_a_failing_transformers_instead_of_failing(monkeypatch, capsys):
    from benchmarks import peer

    def run_transformers(*args, **kwargs):
        raise TypeError("an argument this release no longer takes")

    monkeypatch.setattr(peer, "run_transformers", run_transformers)
    assert peer.main(["--quick"]) == {}
    payload = json.loads(capsys.readouterr().out.strip().splitlines()[-1][len(JSON_PREFIX) :])
    [row] = payload["rows"]
    assert row["ratio"] is None and "TypeError: an argument this release no longer takes" in row["note"]


def test_hpobench_trials_answer_the_recorded_result_of_the_seed_they_trained_with(tmp_path):
    """The HPOBench benchmark's searches run through hyperparameter_search: every run, search trial or
    re-evaluation, scores its configuration's recorded accuracy at its own TrainingArguments.seed (modulo the 5
    recorded seeds), and a pick is judged by the share of the grid whose 5-seed mean is strictly higher."""
    import statistics

    from benchmarks import reevaluation_hpobench as bench

    best = bench._search("car", "ours", 3, 8, 2, str(tmp_path))
    task = bench._task("car")
    records = best.run_summary.records
    assert len(records) == 8 and any(r.extra.get("source") == "reevaluation" for r in records)
    for r in records:
        assert r.objective == pytest.approx(task.recorded(r.params, r.extra["seed"])), r.trial_id
    assert {r.extra["seed"] for r in records} == {3, 4, 5}
    picked = task.truth[task.key(dict(best.hyperparameters))]
    higher = sum(statistics.fmean(v["val_acc"]) > picked for v in task.table.values())
    assert task.share_beating(dict(best.hyperparameters)) == pytest.approx(higher / len(task.table))
