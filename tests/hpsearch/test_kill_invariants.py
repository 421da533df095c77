"""Randomised kills of a sweep's driver, then reruns until done: the three invariants of DESIGN.md hold.

A driver (``_sweep_worker.py sweep``) is killed with SIGKILL K >= 8 times at seeded random moments after a trial
started (mid-training, mid-evaluation, mid-checkpoint, between saving search.json and telling the study, during a
retry, during the last trial), and rerun each time; a last rerun runs to the end. Then:

1. exactly ``n_trials`` trials finished in the study's budget (superseded, killed trials excluded);
2. after the last kill no set of parameters trains to completion twice, and none that the study already had
   COMPLETE trains again;
3. ``search.json`` agrees with the study: the same trials, states and objectives.

On SQLite, journal and PostgreSQL storage; with ``trial_workers=2`` (the trials in worker processes: the driver
killed, no worker outlives it; and the workers killed at random moments instead, which fails their trials only); on
SigOpt's lite driver with ``resume=True`` (``_sweep_worker.py
sigopt``), where each rerun tells a new experiment the trials of ``search.json`` and the store compared with
``search.json`` is the experiment the last run ended with; and on Ray (``_sweep_worker.py ray`` on a 2-node
cluster, rerun with ``resume=True``; the store is Tune's experiment state).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import optuna
import pytest

from hpsearch import SearchResult, TrialState
from tests.hpsearch import _ray_cluster as rc
from tests.hpsearch._postgres import postgres  # noqa: F401 - the session fixture
from tests.hpsearch.test_reliability import PATIENCE_S, _finish, _open_storage, _spawn, digits_npz  # noqa: F401
from tests.hpsearch.test_trial_workers import _alive, _workers

#: Kills per storage kind: five seeded moments each (eight before; every kill costs a driver restart, and the storages,
#: the engines and the worker path together still see over thirty).
KILLS = 5
N_TRIALS = 8
N_SIGOPT_TRIALS = 10
STATES = {
    optuna.trial.TrialState.COMPLETE: TrialState.COMPLETE,
    optuna.trial.TrialState.PRUNED: TrialState.PRUNED,
    optuna.trial.TrialState.FAIL: TrialState.FAIL,
}


def _wait_for_trial_start(markers: Path, pid: int, proc, deadline: float, nth: int = 1) -> bool:
    """True once the driver started its ``nth`` trial; False if it exited (finished) first."""
    while time.monotonic() < deadline:
        if len(list(markers.glob(f"started-*-{pid}"))) >= nth:
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.05)
    proc.kill()
    pytest.fail("the driver started no trial in time")


def _kill_at_random_moments(
    spawn: Callable[[], subprocess.Popen],
    started: Callable[[subprocess.Popen, float], bool],
    rng: random.Random,
    longest_wait_s: float,
    after_kill: Callable[[subprocess.Popen, float], None] | None = None,
    before_kill: Callable[[subprocess.Popen], None] | None = None,
    times: int = KILLS,
) -> int:
    """Start a driver with ``spawn`` and SIGKILL it at a random moment (up to ``longest_wait_s``) after ``started``
    says it began training, ``times`` times (fewer when the sweep finishes first); ``before_kill`` looks at the
    driver just before, ``after_kill`` checks what the kill left. Returns the number of kills that landed."""
    kills = 0
    deadline = time.monotonic() + PATIENCE_S
    while kills < times:
        driver = spawn()
        if not started(driver, deadline):
            break  # the sweep finished before this kill
        time.sleep(rng.uniform(0.0, longest_wait_s))
        if driver.poll() is not None:
            break
        if before_kill is not None:
            before_kill(driver)
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        kills += 1
        if after_kill is not None:
            after_kill(driver, deadline)
    return kills


def _kill_sweep_driver(
    mode: str, config: dict, log: Path, markers: Path, rng: random.Random, trials: tuple[int, ...] = (1,)
) -> int:
    """`_kill_at_random_moments` for a ``_sweep_worker`` driver, killed after it started its n-th trial (n drawn
    from ``trials``)."""

    def started(driver: subprocess.Popen, deadline: float) -> bool:
        nth = rng.choice(trials) if len(trials) > 1 else trials[0]
        return _wait_for_trial_start(markers, driver.pid, driver, deadline, nth)

    return _kill_at_random_moments(lambda: _spawn(mode, config, log), started, rng, 1.5)


def _completed_in(markers: Path, pid: int) -> list[str]:
    """The run names the process ``pid`` trained to their last step."""
    return [m.name[len("completed-") :].rsplit("-", 1)[0] for m in markers.glob(f"completed-*-{pid}")]


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.parametrize("kind", ["sqlite", "journal", "postgresql"])
def test_random_kills_lose_duplicate_or_misreport_no_trial(kind, tmp_path, request, digits_npz):  # noqa: F811
    if kind == "sqlite":
        location = f"sqlite:///{tmp_path}/study.db"
    elif kind == "journal":
        location = str(tmp_path / "study.log")
    else:
        location = request.getfixturevalue("postgres").url
    study_name = f"kills-{kind}-{uuid.uuid4().hex[:8]}"
    markers = tmp_path / "markers"
    markers.mkdir()
    output_dir = tmp_path / "out"
    log = tmp_path / "driver.log"
    config = dict(
        storage=location,
        study_name=study_name,
        output_dir=str(output_dir),
        n_trials=N_TRIALS,
        max_steps=6,
        eval_strategy="steps",
        eval_steps=2,
        save_strategy="steps",
        save_steps=2,
        step_sleep=0.1,
        marker_dir=str(markers),
        data=digits_npz,
    )
    kills = _kill_sweep_driver("sweep", config, log, markers, random.Random(f"{kind}-kills"))
    storage = _open_storage(kind, location)
    before_last = {
        t.number
        for t in optuna.load_study(study_name=study_name, storage=storage).trials
        if t.state == optuna.trial.TrialState.COMPLETE
    }
    last = _spawn("sweep", config, log)
    _finish(last, log)
    assert kills >= KILLS - 1, f"only {kills} kills landed before the sweep finished; make its trials longer"

    _assert_sweep_invariants(
        optuna.load_study(study_name=study_name, storage=storage),
        output_dir,
        _completed_in(markers, last.pid),
        before_last,
    )


def _assert_sweep_invariants(
    study: optuna.Study,
    output_dir: Path,
    completed_last: list[str],
    before_last: set[int],
    killed_by_test: Callable[[optuna.trial.FrozenTrial], bool] = lambda t: False,
) -> None:
    """The three invariants of an Optuna sweep of N_TRIALS trials whose driver was killed and rerun (none of its
    trials fails on its own: only those ``killed_by_test`` says the test killed may be FAIL); ``completed_last``:
    the runs trained to their last step after the last kill, ``before_last``: the trials COMPLETE before it."""
    trials = [t for t in study.trials if not t.user_attrs.get("hpsearch_over_budget")]
    superseded = {t.user_attrs["hpsearch_retry_of"] for t in trials if "hpsearch_retry_of" in t.user_attrs}
    budget = [t for t in trials if not (t.state == optuna.trial.TrialState.FAIL and t.number in superseded)]
    # 1. Exactly n_trials trials finished (Optuna's default MedianPruner may prune some).
    finished = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    assert len(budget) == N_TRIALS, [(t.number, t.state.name) for t in trials]
    assert all(t.state in finished or killed_by_test(t) for t in budget), [
        (t.number, t.state.name) for t in budget
    ]
    # 2. After the last kill: no parameters trained to completion twice, nothing COMPLETE trained again.
    params_of = {f"run-{t.number}": tuple(sorted(t.params.items())) for t in trials}
    trained = [params_of[name] for name in completed_last]
    assert len(trained) == len(set(trained)), completed_last
    assert not {int(name.split("-")[1]) for name in completed_last} & before_last
    # The same parameters never finished twice in the budget.
    finished_params = [tuple(sorted(t.params.items())) for t in budget]
    assert len(finished_params) == len(set(finished_params))
    # 3. search.json agrees with the study.
    result = SearchResult.load(output_dir)
    saved = {int(r.trial_id): r for r in result.records}
    expected = {
        t.number: t for t in trials if not t.user_attrs.get("hpsearch_interrupted") and t.state in STATES
    }
    assert set(saved) == set(expected), (sorted(saved), sorted(expected))
    for number, frozen in expected.items():
        record = saved[number]
        assert record.state is STATES[frozen.state], (number, record.state, frozen.state)
        if frozen.state == optuna.trial.TrialState.COMPLETE:
            assert record.objective == pytest.approx(frozen.value)
    counts = result.counts()
    failed = sum(t.state == optuna.trial.TrialState.FAIL for t in budget)
    assert counts["COMPLETE"] + counts["PRUNED"] + failed == N_TRIALS


# ---------------------------------------------------------------------------------------------- trial_workers
WORKER_PATH_KILLS = 5


def _sweep_config(tmp_path: Path, digits_npz: str, **extra) -> dict:  # noqa: F811
    """The Optuna sweep of the worker-path tests: SQLite, trials of ~6 slow steps, markers, two trial workers."""
    (tmp_path / "markers").mkdir()
    return dict(
        storage=f"sqlite:///{tmp_path}/study.db",
        study_name="workers",
        output_dir=str(tmp_path / "out"),
        n_trials=N_TRIALS,
        max_steps=6,
        eval_strategy="steps",
        eval_steps=2,
        save_strategy="steps",
        save_steps=2,
        step_sleep=0.1,
        marker_dir=str(tmp_path / "markers"),
        data=digits_npz,
        trial_workers=2,
        **extra,
    )


def _trainer_pids(markers: Path, driver: int | None = None) -> dict[int, int]:
    """Trial number -> pid of the process that trained it, from the start markers (of one driver, or of all)."""
    out = {}
    for marker in markers.glob(f"started-*-{driver if driver is not None else '*'}"):
        text = ""
        for _ in range(50):  # written just after it was created
            text = marker.read_text()
            if text:
                break
            time.sleep(0.02)
        out[int(marker.name.split("-")[1])] = int(text)
    return out


def _assert_all_exit(pids: set[int], within_s: float = 10.0) -> None:
    """Each of ``pids`` is gone (or a zombie) within ``within_s``: no orphan worker process outlives its driver."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline and any(map(_alive, pids)):
        time.sleep(0.1)
    assert not any(map(_alive, pids)), f"orphan worker processes: {sorted(p for p in pids if _alive(p))}"


def _assert_results_readable(output_dir: Path) -> None:
    import pandas as pd

    saved = {r.trial_id for r in SearchResult.load(output_dir).records}
    for name in ("trials.csv", "intermediates.csv"):
        frame = pd.read_csv(output_dir / name)  # the last snapshot's export: a subset of the records
        if "trial_id" in frame:
            assert set(frame["trial_id"].astype(str)) <= saved, name


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_random_worker_kills_fail_only_their_trial(tmp_path, digits_npz):  # noqa: F811
    """trial_workers=2: a worker SIGKILLed (as the OOM killer does) at seeded random moments after a trial started
    fails the trial it was training, FAIL with the signal's name, and nothing else: the driver replaces the worker,
    finishes exactly n_trials, records every trial once with its true state, agrees with the study, and leaves no
    worker process behind. A worker killed while idle fails the next trial sent to it, with the same cause."""
    config = _sweep_config(tmp_path, digits_npz, max_failed_trials=WORKER_PATH_KILLS + 1)
    markers, output_dir, log = Path(config["marker_dir"]), Path(config["output_dir"]), tmp_path / "driver.log"
    rng = random.Random("worker-kills")
    driver = _spawn("sweep", config, log)
    deadline = time.monotonic() + PATIENCE_S
    kills: dict[int, tuple[int, float]] = {}  # worker pid -> (the trial it had started, when it was killed)
    for nth in sorted(rng.sample(range(1, N_TRIALS), WORKER_PATH_KILLS - 1)):
        if not _wait_for_trial_start(markers, driver.pid, driver, deadline, nth):
            break
        started = _trainer_pids(markers, driver.pid)
        number = max(started, key=lambda n: (markers / f"started-{n}-{driver.pid}").stat().st_mtime_ns)
        pid = started[number]
        if pid in kills:
            continue  # its trial failed before it started the next one: killed already
        time.sleep(rng.uniform(0.0, 1.0))
        if driver.poll() is not None:
            break
        when = time.time()
        os.kill(pid, signal.SIGKILL)
        kills[pid] = (number, when)
    _finish(driver, log)
    assert len(kills) >= WORKER_PATH_KILLS - 2, f"only {len(kills)} kills landed; make the trials longer"
    _assert_all_exit(set(_trainer_pids(markers).values()))

    study = optuna.load_study(study_name="workers", storage=config["storage"])
    records = {int(r.trial_id): r for r in SearchResult.load(output_dir).records}
    failed = {n: r for n, r in records.items() if r.state is TrialState.FAIL}

    def killed_by_test(t: optuna.trial.FrozenTrial) -> bool:
        return t.state == optuna.trial.TrialState.FAIL and records[t.number].extra["worker_pid"] in kills

    _assert_sweep_invariants(study, output_dir, _completed_in(markers, driver.pid), set(), killed_by_test)
    assert failed, "no kill failed a trial"
    for (
        number,
        record,
    ) in failed.items():  # each with its cause, and each killed worker failed one trial at most
        assert "killed by SIGKILL (signal 9)" in record.error, (number, record.error)
    assert len({r.extra["worker_pid"] for r in failed.values()}) == len(failed)
    for pid, (
        number,
        when,
    ) in kills.items():  # the trial it was training: FAIL, or it had finished before the kill
        record = records[number]
        assert record.extra["worker_pid"] == pid
        assert record.state is TrialState.FAIL or record.finished.timestamp() <= when, (number, record.state)
    # Every trial after a failure ran in a fresh worker: no trial ran in a killed process after its kill.
    for record in records.values():
        pid = record.extra["worker_pid"]
        if pid in kills and record.state is not TrialState.FAIL:
            assert record.finished.timestamp() <= kills[pid][1], (record.number, pid)
    _assert_results_readable(output_dir)


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_random_driver_kills_on_the_worker_path(tmp_path, digits_npz):  # noqa: F811
    """trial_workers=2: the driver SIGKILLed at seeded random moments after a trial started in a worker, and rerun
    each time: no worker outlives its killed driver (checked by pid), and the three invariants of DESIGN.md hold."""
    config = _sweep_config(tmp_path, digits_npz)
    markers, output_dir, log = Path(config["marker_dir"]), Path(config["output_dir"]), tmp_path / "driver.log"
    rng = random.Random("worker-path-driver-kills")
    workers: set[int] = set()

    def started(driver: subprocess.Popen, deadline: float) -> bool:
        return _wait_for_trial_start(markers, driver.pid, driver, deadline, rng.choice((1, 2)))

    def before_kill(driver: subprocess.Popen) -> None:
        workers.clear()
        workers.update(_workers(driver.pid))
        workers.update(_trainer_pids(markers, driver.pid).values())
        assert workers, "the driver runs no worker process"

    def after_kill(driver: subprocess.Popen, deadline: float) -> None:
        _assert_all_exit(workers)

    kills = _kill_at_random_moments(
        lambda: _spawn("sweep", config, log),
        started,
        rng,
        1.5,
        after_kill,
        before_kill,
        times=WORKER_PATH_KILLS,
    )
    study_name, storage = config["study_name"], config["storage"]
    before_last = {
        t.number
        for t in optuna.load_study(study_name=study_name, storage=storage).trials
        if t.state == optuna.trial.TrialState.COMPLETE
    }
    last = _spawn("sweep", config, log)
    _finish(last, log)
    assert kills >= WORKER_PATH_KILLS - 1, f"only {kills} kills landed before the sweep finished"
    _assert_all_exit(set(_trainer_pids(markers).values()))
    _assert_sweep_invariants(
        optuna.load_study(study_name=study_name, storage=storage),
        output_dir,
        _completed_in(markers, last.pid),
        before_last,
    )
    _assert_results_readable(output_dir)


@pytest.mark.slow
@pytest.mark.multiprocess
def test_random_kills_of_a_resumed_sigopt_search(tmp_path, digits_npz):  # noqa: F811
    markers = tmp_path / "markers"
    markers.mkdir()
    output_dir = tmp_path / "out"
    log = tmp_path / "driver.log"
    observations = tmp_path / "observations.json"
    config = dict(
        output_dir=str(output_dir),
        n_trials=N_SIGOPT_TRIALS,
        max_steps=6,
        eval_strategy="steps",
        eval_steps=2,
        save_strategy="steps",
        save_steps=2,
        step_sleep=0.1,
        marker_dir=str(markers),
        data=digits_npz,
        observations=str(observations),
    )
    # A process's first trial takes longest (the first model, the first evaluation): some kills wait for its
    # second trial, so that trials finish between kills and each rerun has earlier trials to tell.
    kills = _kill_sweep_driver("sigopt", config, log, markers, random.Random("sigopt-kills"), trials=(1, 2))
    before_last = SearchResult.load(output_dir).records if (output_dir / "search.json").exists() else []
    last = _spawn("sigopt", config, log)
    _finish(last, log)
    assert kills >= KILLS - 1, f"only {kills} kills landed before the sweep finished; make its trials longer"
    assert "Resuming SigOpt search in" in log.read_text()

    def key(params: dict) -> tuple:
        return params["hidden"], round(params["learning_rate"], 12)

    result = SearchResult.load(output_dir)
    records = result.records
    # 1. Exactly n_trials trials finished, each with its own id and number (none of this sweep's trials fails on
    # its own, and SigOpt prunes nothing).
    assert len(records) == N_SIGOPT_TRIALS, [(r.trial_id, r.state.name) for r in records]
    assert all(r.state is TrialState.COMPLETE for r in records), [(r.name, r.error) for r in records]
    assert len({r.trial_id for r in records}) == len({r.number for r in records}) == N_SIGOPT_TRIALS
    assert result.settings.get("resumed_trials") == len(before_last)
    # 2. After the last kill no parameters trained to completion twice, and nothing search.json already had as
    # finished trained again; the records the last run took over are the ones it found.
    by_name = {r.name: r for r in records}
    completed_last = _completed_in(markers, last.pid)
    trained = [key(by_name[name].params) for name in completed_last]
    assert len(trained) == len(set(trained)), completed_last
    assert not {by_name[name].trial_id for name in completed_last} & {r.trial_id for r in before_last}
    assert not set(trained) & {key(r.params) for r in before_last}
    assert len(completed_last) == N_SIGOPT_TRIALS - len(before_last)
    fields = ("trial_id", "name", "number", "state", "params", "objective")
    final = {r.trial_id: r.to_dict() for r in records}
    for earlier in before_last:
        saved = earlier.to_dict()
        assert {k: final[earlier.trial_id][k] for k in fields} == {k: saved[k] for k in fields}
    assert len({key(r.params) for r in records}) == N_SIGOPT_TRIALS
    # 3. search.json agrees with SigOpt's store: the last run's experiment holds exactly one observation per
    # record, with its assignments (SigOpt's label for the categorical) and value.
    told = json.loads(observations.read_text())
    assert len(told) == len(records)
    expected = sorted(
        (str(r.params["hidden"]), r.params["learning_rate"], r.objective, False) for r in records
    )
    got = sorted(
        (
            o["assignments"]["hidden"],
            o["assignments"]["learning_rate"],
            o["values"][0] if o["values"] else None,
            o["failed"],
        )
        for o in told
    )
    for (hidden, rate, value, failed), (s_hidden, s_rate, s_value, s_failed) in zip(expected, got):
        assert (s_hidden, s_failed) == (hidden, failed)
        assert s_rate == pytest.approx(rate, rel=1e-12) and s_value == pytest.approx(value, rel=1e-12)


# ---------------------------------------------------------------------------------------------- Ray
RAY_N_TRIALS = 6
#: Kills of a Ray driver: three seeded moments (2.66, 1.24 and 2.05 s into a run's first trial), whose runs snapshot
#: Tune's state at Ray's default pace, then after every event twice: both snapshot modes are killed. Each kill costs
#: a Ray driver's start (a new process) and a Tune restore.
RAY_KILLS = 3


def _spawn_ray_driver(config: dict, log: Path, snapshot_period: str) -> subprocess.Popen:
    env = {**rc.cluster_env(), "OMP_NUM_THREADS": "1", "TUNE_GLOBAL_CHECKPOINT_S": snapshot_period}
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.hpsearch._sweep_worker", "ray", json.dumps(config)],
            cwd=rc.ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _markers(markers: Path, event: str, driver: int | None = None) -> list[tuple[str, int, int, float]]:
    """(run name, driver pid, worker pid, time written) of each ``event`` marker (`rc.TrialMarkers`)."""
    found = []
    for marker in markers.glob(f"{event}@*"):
        _, run, driver_pid, pid = marker.name.split("@")
        if driver is None or int(driver_pid) == driver:
            found.append((run, int(driver_pid), int(pid), marker.stat().st_mtime))
    return found


def _wait_for_ray_trial_start(markers: Path, proc: subprocess.Popen, deadline: float) -> bool:
    """True once a trial of this driver started training; False if the driver exited (the sweep finished) first."""
    while time.monotonic() < deadline:
        if _markers(markers, "started", proc.pid):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.05)
    proc.kill()
    pytest.fail("the driver started no trial in time")


def _wait_for_exit(pids: set[int], deadline: float) -> None:
    """Ray ends a job's trial processes when its driver dies: wait until those of the killed driver are gone."""
    import psutil

    while time.monotonic() < deadline:
        if not any(psutil.pid_exists(pid) for pid in pids):
            return
        time.sleep(0.1)
    pytest.fail(
        f"trial processes {sorted(p for p in pids if psutil.pid_exists(p))} outlived their killed driver"
    )


def _ray_store(experiment: Path) -> dict[str, dict]:
    """Ray's own view of the experiment (Tune's newest experiment snapshot): trial id -> status, config, last
    result and folder. Empty before Tune's first snapshot."""
    from ray.tune import ExperimentAnalysis

    if not list(experiment.glob("experiment_state-*.json")):
        return {}
    return {
        t.trial_id: {
            "status": t.status,
            "config": dict(t.config),
            "last": dict(t.last_result or {}),
            "path": t.path,
        }
        for t in ExperimentAnalysis(str(experiment)).trials
    }


def _saved_ids(output_dir: Path) -> set[str]:
    return (
        {r.trial_id for r in SearchResult.load(output_dir).records}
        if (output_dir / "search.json").exists()
        else set()
    )


@pytest.mark.slow
@pytest.mark.multiprocess
def test_random_kills_of_a_ray_driver_lose_duplicate_or_misreport_no_trial(ray_cluster, tmp_path, digits_npz):  # noqa: F811
    """The Ray equivalent, with ``resume=True`` on every run (the first one starts the experiment, and says so).

    Each run snapshots Tune's experiment state at Ray's default pace or after every event (TUNE_GLOBAL_CHECKPOINT_S,
    a seeded choice per run), so kills land before, between and after the snapshots that are Ray's store. A trial
    "trains to completion" when its training reaches its last step (a marker written at ``on_train_end`` with the
    pid of the driver that launched it); after each kill the test waits until Ray has ended the killed driver's
    trial processes, and "after the last kill" counts every completion written after that kill.
    """
    markers = tmp_path / "markers"
    markers.mkdir()
    output_dir = tmp_path / "out"
    experiment = output_dir / "ray_results" / "hpsearch"
    log = tmp_path / "driver.log"
    config = dict(
        address=ray_cluster.address,
        output_dir=str(output_dir),
        n_trials=RAY_N_TRIALS,
        max_steps=6,
        eval_strategy="steps",
        eval_steps=2,
        save_strategy="steps",
        save_steps=2,
        step_sleep=0.2,
        marker_dir=str(markers),
        data=digits_npz,
        max_concurrent_trials=2,
        resume=True,
    )
    rng = random.Random("ray-kills")
    last_kill = 0.0

    def after_kill(driver: subprocess.Popen, deadline: float) -> None:
        nonlocal last_kill
        last_kill = time.time()
        _wait_for_exit({pid for _, _, pid, _ in _markers(markers, "started", driver.pid)}, deadline)
        # search.json never drops a trial Ray had finished (a restored run lists them from its first save on).
        finished = {i for i, t in _ray_store(experiment).items() if t["status"] == "TERMINATED"}
        assert finished <= _saved_ids(output_dir), (sorted(finished), sorted(_saved_ids(output_dir)))

    kills = _kill_at_random_moments(
        lambda: _spawn_ray_driver(config, log, rng.choice(["auto", "0"])),
        lambda driver, deadline: _wait_for_ray_trial_start(markers, driver, deadline),
        rng,
        3.0,
        after_kill,
        times=RAY_KILLS,
    )
    before_last = {i for i, t in _ray_store(experiment).items() if t["status"] == "TERMINATED"}
    last = _spawn_ray_driver(config, log, "auto")
    _finish(last, log)
    assert kills >= RAY_KILLS - 1, (
        f"only {kills} kills landed before the sweep finished; make its trials longer"
    )
    assert (
        "no Ray Tune experiment to restore" in log.read_text()
    )  # the first run, with resume=True, started it

    store = _ray_store(experiment)
    params_of = {f"run-{i}": tuple(sorted(t["config"].items())) for i, t in store.items()}
    # 1. Exactly n_trials trials finished, each on its own (no scheduler stops one here).
    assert len(store) == RAY_N_TRIALS, sorted(store)
    assert all(t["status"] == "TERMINATED" and t["last"].get("done") for t in store.values()), store
    # 2. After the last kill no parameters trained to completion twice, and nothing Ray had finished trained again.
    completed = [run for run, _, _, written in _markers(markers, "completed") if written > last_kill]
    trained = [params_of[run] for run in completed]
    assert len(trained) == len(set(trained)), completed
    assert not {run.removeprefix("run-") for run in completed} & before_last, (completed, before_last)
    # The trials of the budget have different parameters (a restored search draws new ones).
    assert len(set(params_of.values())) == RAY_N_TRIALS, params_of
    # 3. search.json agrees with Ray's store: the same trials, states, objectives and parameters.
    _assert_agrees(SearchResult.load(output_dir), store)

    # Once more, as a rerun loop would after the end, with one trial's result files lost (a driver killed before
    # they reached storage): Ray's store alone rebuilds the same search.json, nothing trains.
    (victim,) = rng.sample(sorted(store), 1)
    for name in ("result.json", "progress.csv"):  # progress.csv only where tune_loggers=True asked for it
        (Path(store[victim]["path"]) / name).unlink(missing_ok=True)
    again = _spawn_ray_driver(config, log, "auto")
    _finish(again, log)
    assert not _markers(markers, "started", again.pid)
    _assert_agrees(SearchResult.load(output_dir), store)


def _assert_agrees(result: SearchResult, store: dict[str, dict]) -> None:
    saved = {r.trial_id: r for r in result.records}
    assert set(saved) == set(store), (sorted(saved), sorted(store))
    for trial_id, trial in store.items():
        record = saved[trial_id]
        assert record.state is TrialState.COMPLETE, (trial_id, record.state, record.error)
        assert record.objective == pytest.approx(trial["last"]["objective"])
        assert record.params == trial["config"]
        assert [e.step for e in record.intermediates] == [2, 4, 6], (trial_id, record.intermediates)
    counts = result.counts()
    assert counts["COMPLETE"] + counts["PRUNED"] == RAY_N_TRIALS
