"""Randomised kills of a sweep's driver, then reruns until done: the three invariants of DESIGN.md hold.

A driver (``_sweep_worker.py sweep``) is killed with SIGKILL K >= 8 times at seeded random moments after a trial
started (mid-training, mid-evaluation, mid-checkpoint, between saving search.json and telling the study, during a
retry, during the last trial), and rerun each time; a last rerun runs to the end. Then:

1. exactly ``n_trials`` trials finished in the study's budget (superseded, killed trials excluded);
2. after the last kill no set of parameters trains to completion twice, and none that the study already had
   COMPLETE trains again;
3. ``search.json`` agrees with the study: the same trials, states and objectives.

On SQLite, journal and PostgreSQL storage; and on SigOpt's lite driver with ``resume=True`` (``_sweep_worker.py
sigopt``), where each rerun tells a new experiment the trials of ``search.json`` and the store compared with
``search.json`` is the experiment the last run ended with.
"""

from __future__ import annotations

import json
import random
import signal
import time
import uuid
from pathlib import Path

import optuna
import pytest

from hpsearch import SearchResult, TrialState
from tests.hpsearch._postgres import postgres  # noqa: F401 - the session fixture
from tests.hpsearch.test_reliability import PATIENCE_S, _finish, _open_storage, _spawn, digits_npz  # noqa: F401

KILLS = 8
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


def _kill_at_random_moments(mode: str, config: dict, log: Path, markers: Path, rng: random.Random,
                            trials: tuple[int, ...] = (1,)) -> int:
    """Start the driver and SIGKILL it at a random moment after it started its n-th trial (n drawn from
    ``trials``), KILLS times (fewer when the sweep finishes first); returns the number of kills that landed."""
    kills = 0
    deadline = time.monotonic() + PATIENCE_S
    while kills < KILLS:
        driver = _spawn(mode, config, log)
        nth = rng.choice(trials) if len(trials) > 1 else trials[0]
        if not _wait_for_trial_start(markers, driver.pid, driver, deadline, nth):
            break  # the sweep finished before this kill
        time.sleep(rng.uniform(0.0, 1.5))
        if driver.poll() is not None:
            break
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        kills += 1
    return kills


def _completed_in(markers: Path, pid: int) -> list[str]:
    """The run names the process ``pid`` trained to their last step."""
    return [m.name[len("completed-"):].rsplit("-", 1)[0] for m in markers.glob(f"completed-*-{pid}")]


@pytest.mark.slow
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
    config = dict(storage=location, study_name=study_name, output_dir=str(output_dir), n_trials=N_TRIALS,
                  max_steps=6, eval_strategy="steps", eval_steps=2, save_strategy="steps", save_steps=2,
                  step_sleep=0.1, marker_dir=str(markers), data=digits_npz)
    kills = _kill_at_random_moments("sweep", config, log, markers, random.Random(f"{kind}-kills"))
    storage = _open_storage(kind, location)
    before_last = {t.number for t in optuna.load_study(study_name=study_name, storage=storage).trials
                   if t.state == optuna.trial.TrialState.COMPLETE}
    last = _spawn("sweep", config, log)
    _finish(last, log)
    assert kills >= 6, f"only {kills} kills landed before the sweep finished; make its trials longer"

    study = optuna.load_study(study_name=study_name, storage=storage)
    trials = [t for t in study.trials if not t.user_attrs.get("hpsearch_over_budget")]
    superseded = {t.user_attrs["hpsearch_retry_of"] for t in trials if "hpsearch_retry_of" in t.user_attrs}
    budget = [t for t in trials if not (t.state == optuna.trial.TrialState.FAIL and t.number in superseded)]
    # 1. Exactly n_trials trials finished (none of this sweep's trials fails on its own; Optuna's default
    # MedianPruner may prune some).
    finished = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    assert len(budget) == N_TRIALS, [(t.number, t.state.name) for t in trials]
    assert all(t.state in finished for t in budget), [(t.number, t.state.name) for t in budget]
    # 2. After the last kill: no parameters trained to completion twice, nothing COMPLETE trained again.
    params_of = {f"run-{t.number}": tuple(sorted(t.params.items())) for t in trials}
    completed_last = _completed_in(markers, last.pid)
    trained = [params_of[name] for name in completed_last]
    assert len(trained) == len(set(trained)), completed_last
    assert not {int(name.split("-")[1]) for name in completed_last} & before_last
    # The same parameters never finished twice in the budget.
    finished_params = [tuple(sorted(t.params.items())) for t in budget]
    assert len(finished_params) == len(set(finished_params))
    # 3. search.json agrees with the study.
    result = SearchResult.load(output_dir)
    saved = {int(r.trial_id): r for r in result.records}
    expected = {t.number: t for t in trials if not t.user_attrs.get("hpsearch_interrupted")
                and t.state in STATES}
    assert set(saved) == set(expected), (sorted(saved), sorted(expected))
    for number, frozen in expected.items():
        record = saved[number]
        assert record.state is STATES[frozen.state], (number, record.state, frozen.state)
        if frozen.state == optuna.trial.TrialState.COMPLETE:
            assert record.objective == pytest.approx(frozen.value)
    counts = result.counts()
    assert counts["COMPLETE"] + counts["PRUNED"] == N_TRIALS


@pytest.mark.slow
def test_random_kills_of_a_resumed_sigopt_search(tmp_path, digits_npz):  # noqa: F811
    markers = tmp_path / "markers"
    markers.mkdir()
    output_dir = tmp_path / "out"
    log = tmp_path / "driver.log"
    observations = tmp_path / "observations.json"
    config = dict(output_dir=str(output_dir), n_trials=N_SIGOPT_TRIALS, max_steps=6, eval_strategy="steps", eval_steps=2,
                  save_strategy="steps", save_steps=2, step_sleep=0.1, marker_dir=str(markers), data=digits_npz,
                  observations=str(observations))
    # A process's first trial takes longest (the first model, the first evaluation): some kills wait for its
    # second trial, so that trials finish between kills and each rerun has earlier trials to tell.
    kills = _kill_at_random_moments("sigopt", config, log, markers, random.Random("sigopt-kills"), trials=(1, 2))
    before_last = SearchResult.load(output_dir).records if (output_dir / "search.json").exists() else []
    last = _spawn("sigopt", config, log)
    _finish(last, log)
    assert kills >= 6, f"only {kills} kills landed before the sweep finished; make its trials longer"
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
    expected = sorted((str(r.params["hidden"]), r.params["learning_rate"], r.objective, False) for r in records)
    got = sorted((o["assignments"]["hidden"], o["assignments"]["learning_rate"],
                  o["values"][0] if o["values"] else None, o["failed"]) for o in told)
    for (hidden, rate, value, failed), (s_hidden, s_rate, s_value, s_failed) in zip(expected, got):
        assert (s_hidden, s_failed) == (hidden, failed)
        assert s_rate == pytest.approx(rate, rel=1e-12) and s_value == pytest.approx(value, rel=1e-12)
