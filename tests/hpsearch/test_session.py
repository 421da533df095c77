"""`SearchSession`, the driver's ledger: it keeps one record per trial, saves after each, counts failures in a row
and calls the trial-end hooks (a hook that raises is logged, never raised)."""

from __future__ import annotations

import logging

import pytest

from hpsearch.errors import TooManyFailedTrials
from hpsearch.results import SearchResult
from hpsearch.session import SearchSession
from hpsearch.settings import TrialSettings
from hpsearch.trial import Evaluation, TrialRecord, TrialState


@pytest.fixture
def new_session(output_dir):
    """``new_session(max_failed_trials=3)`` -> an empty session writing to `output_dir` (no trainer needed)."""

    def make(max_failed_trials: int = 3, trial_end_hooks=()) -> SearchSession:
        settings = TrialSettings(
            trainer=None,
            compute_objective=lambda m: m["eval_accuracy"],  # type: ignore[arg-type]
            objective_name="eval_accuracy",
            directions=("maximize",),
            output_dir=str(output_dir),
            backend="random",
        )
        result = SearchResult(
            backend="random", directions=["maximize"], records=[], n_trials=10, output_dir=str(output_dir)
        )
        return SearchSession(
            settings,
            result,
            n_trials=10,
            max_failed_trials=max_failed_trials,
            trial_end_hooks=trial_end_hooks,
        )

    return make


def record(
    number: int,
    state: TrialState = TrialState.COMPLETE,
    objective: float | None = 0.5,
    error: str | None = None,
) -> TrialRecord:
    return TrialRecord(
        trial_id=str(number),
        number=number,
        name=f"run-{number}",
        state=state,
        params={"learning_rate": 0.01},
        objective=objective if state is not TrialState.FAIL else None,
        error=error,
        intermediates=[Evaluation(step=2, epoch=0.1, objective=objective, metrics={"eval_accuracy": 0.5})],
    )


def failed(number: int) -> TrialRecord:
    return record(number, TrialState.FAIL, error=f"ValueError: failure {number}")


def test_a_record_of_the_same_trial_replaces_the_earlier_one(new_session, output_dir):
    session = new_session()
    session.record(record(0, TrialState.RUNNING, objective=None))
    session.record(record(1))
    finished = record(0, objective=0.9)
    session.record(finished)
    assert [r.trial_id for r in session.records] == ["0", "1"]
    assert session.records[0] is finished
    assert session.known("0") is finished and session.known("7") is None
    assert [r.objective for r in SearchResult.load(output_dir).records] == [0.9, 0.5]


def test_search_json_is_saved_after_every_record(new_session, output_dir):
    session = new_session()
    for number in range(3):
        session.record(record(number, objective=0.1 * number))
        loaded = SearchResult.load(output_dir)
        assert loaded.records == session.records
        assert len(loaded.records) == number + 1
    assert (output_dir / "trials.csv").is_file() and (output_dir / "intermediates.csv").is_file()


def test_consecutive_failures_stop_the_search_and_a_success_resets_the_count(new_session, output_dir):
    session = new_session(max_failed_trials=3)
    session.record(failed(0))
    session.record(failed(1))
    session.record(record(2))  # COMPLETE: the count starts again
    session.record(failed(3))
    session.record(failed(4))
    session.record(record(5, TrialState.PRUNED))  # PRUNED resets it too
    session.record(failed(6))
    session.record(failed(7))
    with pytest.raises(TooManyFailedTrials) as caught:
        session.record(failed(8))
    message = str(caught.value)
    assert "3 trials failed in a row (max_failed_trials=3)" in message
    for number in (6, 7, 8):
        assert f"run-{number} {{'learning_rate': 0.01}}: ValueError: failure {number}" in message
    for number in (0, 1, 3, 4):
        assert f"run-{number} " not in message
    # The failure that stopped the search was saved first.
    assert [r.trial_id for r in SearchResult.load(output_dir).records][-1] == "8"


def test_max_failed_trials_one_stops_at_the_first_failure(new_session):
    session = new_session(max_failed_trials=1)
    session.record(record(0))
    with pytest.raises(TooManyFailedTrials, match="run-1"):
        session.record(failed(1))


def test_trial_end_hooks_run_after_the_save_and_a_raising_hook_is_logged(new_session, output_dir, caplog):
    seen = []

    def watcher(session, finished):
        seen.append((finished.trial_id, [r.trial_id for r in SearchResult.load(output_dir).records]))

    def broken(session, finished):
        raise RuntimeError("display crashed")

    session = new_session(trial_end_hooks=[broken, watcher])
    assert new_session().trial_end_hooks == session.trial_end_hooks[:1]  # owned by each session, not shared
    with caplog.at_level(logging.WARNING, logger="hpsearch.session"):
        session.record(record(0))
        session.record(record(1))
    assert seen == [("0", ["0"]), ("1", ["0", "1"])]  # each hook saw its record already saved
    warnings = [r for r in caplog.records if "Trial-end hook" in r.getMessage()]
    assert len(warnings) == 2 and warnings[0].exc_info[0] is RuntimeError


def test_adopted_records_are_kept_without_counting_or_saving(new_session, output_dir):
    session = new_session(max_failed_trials=2)
    session.adopt([failed(0), failed(1)])
    assert [r.trial_id for r in session.records] == ["0", "1"]
    assert not (output_dir / "search.json").exists()
    session.record(failed(2))  # one failure in a row, not three
    session.replace_all([record(5), *session.records])
    assert [r.trial_id for r in SearchResult.load(output_dir).records] == ["5", "0", "1", "2"]


def test_the_trial_end_event_carries_the_record_as_search_json_stores_it(new_session, output_dir):
    import json
    import math

    from hpsearch._events import EVENTS_FILE

    session = new_session()
    odd = record(
        1, objective=math.nan
    )  # a NaN objective, a failure, numpy-free extras: all as search.json has them
    odd.extra["note"] = "ünïcode"
    for r in (record(0), odd, failed(2)):
        session.record(r)
    with open(output_dir / EVENTS_FILE, encoding="utf-8") as handle:
        ends = [json.loads(line) for line in handle if '"trial_end"' in line]
    from hpsearch.results import SearchResult

    stored = [r.to_dict() for r in SearchResult.load(output_dir).records]  # search.json, then its journal
    assert [e["record"]["trial_id"] for e in ends] == ["0", "1", "2"]
    assert json.dumps([e["record"] for e in ends]) == json.dumps(stored)  # NaN compared as text
    assert all(set(e) == {"event", "time", "record"} for e in ends)
    assert all(
        json.dumps(TrialRecord.from_dict(e["record"]).to_dict()) == json.dumps(r.to_dict())
        for e, r in zip(ends, session.records)
    )


def test_a_killed_search_resumed_reads_the_trials_only_its_journal_holds(new_session, output_dir):
    import os

    session = new_session()
    for number in range(4):  # a snapshot at the first trial, then one journal line per trial
        session.record(record(number, objective=0.1 * number))
    path = output_dir / "search.journal.jsonl"
    whole = path.read_bytes()
    path.write_bytes(whole[:-25])  # the process was killed while writing trial 3's line
    del session  # no final save: what a SIGKILL leaves

    resumed = new_session()
    saved = resumed.saved_records()  # what a resume adopts (Optuna, Ray) or tells its new experiment (SigOpt)
    assert [r.trial_id for r in saved] == ["0", "1", "2"]  # trials 1 and 2 exist only in the journal
    assert SearchResult.from_json((output_dir / "search.json").read_text()).records[0].trial_id == "0"
    resumed.adopt(saved)
    resumed.record(record(3, objective=0.7))  # trial 3 runs again: its torn line is not in the results
    assert [r.trial_id for r in resumed.records] == ["0", "1", "2", "3"]
    assert [r.objective for r in SearchResult.load(output_dir).records] == [0.0, 0.1, 0.2, 0.7]
    assert os.path.getsize(path) < len(whole)  # the resumed run started a new journal after its snapshot
