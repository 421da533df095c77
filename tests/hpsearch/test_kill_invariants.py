"""Randomised kills of a sweep's driver, then reruns until done: the three invariants of DESIGN.md hold.

A driver (``_sweep_worker.py sweep``) is killed with SIGKILL K >= 8 times at seeded random moments after a trial
started (mid-training, mid-evaluation, mid-checkpoint, between saving search.json and telling the study, during a
retry, during the last trial), and rerun each time; a last rerun runs to the end. Then:

1. exactly ``n_trials`` trials finished in the study's budget (superseded, killed trials excluded);
2. after the last kill no set of parameters trains to completion twice, and none that the study already had
   COMPLETE trains again;
3. ``search.json`` agrees with the study: the same trials, states and objectives.

On SQLite, journal and PostgreSQL storage. (SigOpt's lite driver keeps its experiment in memory, so a killed
SigOpt search cannot be continued: a rerun starts a new experiment; the README says so.)
"""

from __future__ import annotations

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
STATES = {
    optuna.trial.TrialState.COMPLETE: TrialState.COMPLETE,
    optuna.trial.TrialState.PRUNED: TrialState.PRUNED,
    optuna.trial.TrialState.FAIL: TrialState.FAIL,
}


def _wait_for_trial_start(markers: Path, pid: int, proc, deadline: float) -> bool:
    """True once the driver started a trial; False if it exited (finished) first."""
    while time.monotonic() < deadline:
        if any(markers.glob(f"started-*-{pid}")):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.05)
    proc.kill()
    pytest.fail("the driver started no trial in time")


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
    rng = random.Random(f"{kind}-kills")
    kills = 0
    deadline = time.monotonic() + PATIENCE_S
    while kills < KILLS:
        driver = _spawn("sweep", config, log)
        if not _wait_for_trial_start(markers, driver.pid, driver, deadline):
            break  # the sweep finished before this kill
        time.sleep(rng.uniform(0.0, 1.5))
        if driver.poll() is not None:
            break
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        kills += 1
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
    completed_last = [m.name.split("-")[1:3] for m in markers.glob(f"completed-*-{last.pid}")]
    trained = [params_of[f"run-{number}"] for _, number in completed_last]
    assert len(trained) == len(set(trained)), completed_last
    assert not {int(number) for _, number in completed_last} & before_last
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
