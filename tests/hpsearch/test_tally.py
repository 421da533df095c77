"""RunningTally: the session's counts, best so far and spent compute, per trial in O(1), always equal to what the
records say."""

from __future__ import annotations

import math
import random

import pytest

from hpsearch._progress import SweepProgress
from hpsearch._tally import RunningTally
from hpsearch.results import SearchResult
from hpsearch.trial import TrialRecord, TrialState
from hpsearch.warmstart import own_counts, prior_records

STATES = [TrialState.COMPLETE, TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL]


def _record(rng: random.Random, number: int, k: int) -> TrialRecord:
    state = rng.choice(STATES)
    objective = None
    if state is not TrialState.FAIL:
        values = [rng.choice([rng.random(), rng.random(), math.nan, 0.5]) for _ in range(k)]
        objective = values[0] if k == 1 else values
    extra = {"source": "warm_start"} if rng.random() < 0.05 else {}
    cost = {"device_s": rng.random()} if rng.random() < 0.7 else {}
    if rng.random() < 0.3:
        cost["energy_kwh"] = rng.random() / 100
    return TrialRecord(
        trial_id=str(number),
        number=number,
        name=f"run-{number}",
        state=state,
        params={},
        objective=objective,
        extra=extra,
        cost=cost,
    )


@pytest.mark.parametrize(
    "directions", [["minimize"], ["maximize"], ["minimize", "maximize"], ["maximize", "maximize", "minimize"]]
)
def test_tally_agrees_with_the_records_after_every_trial(directions):
    rng = random.Random(len(directions) * 7 + (directions[0] == "maximize"))
    result = SearchResult("optuna", directions, [])
    tally = RunningTally()
    for step in range(300):
        number = rng.randrange(step + 1) if rng.random() < 0.1 and result.records else step
        record = _record(rng, number, len(directions))
        same = [i for i, r in enumerate(result.records) if r.trial_id == record.trial_id]
        if same:  # a trial recorded again (a restart): it replaces the earlier record
            result.records[same[0]] = record
        else:
            result.records.append(record)
        if rng.random() < 0.03:  # records adopted behind the tally's back (a resumed search)
            result.records.append(_record(rng, 10_000 + step, len(directions)))
            continue
        tally.update(result, record)
        own, warm = own_counts(result)  # warm-start rows apart: not among this search's n_trials
        assert {s: n for s, n in tally.counts.items() if n} == {s: n for s, n in own.items() if n}
        assert tally.warm == warm
        if len(directions) == 1:
            assert tally.best_trial is result.best_trial
        else:
            assert tally.front_size == len(result.best_trials)
        totals = result.total_cost()
        for column, expected in (("device_s", totals["device_s"]), ("energy_kwh", totals["energy_kwh"])):
            got = tally.spent(column)
            assert (math.isnan(got) and math.isnan(expected)) or got == pytest.approx(expected)


def test_the_progress_bar_reads_the_tally_not_every_record(monkeypatch):
    class Session:
        def __init__(self) -> None:
            self.result = SearchResult("optuna", ["minimize"], [])
            self.tally = RunningTally()

    session = Session()
    progress = SweepProgress(total=10, enabled=False)
    for name in ("counts", "best_trial", "best_trials", "scored_trials"):  # each a pass over all the records
        monkeypatch.setattr(
            SearchResult, name, property(lambda self, name=name: pytest.fail(f"{name} called"))
        )
    rng = random.Random(0)
    for number in range(5):
        record = _record(rng, number, 1)
        session.result.records.append(record)
        session.tally.update(session.result, record)
        progress.on_trial_end(session, record)  # type: ignore[arg-type]
    assert progress.postfix.startswith("done ")


def test_warm_start_rows_are_counted_apart_in_the_progress_line_and_bar(caplog):
    # n_trials=5 after 3 earlier trials told by warm start: "[2/5 +3 warm]", never "[5/5]" after two trials.
    from hpsearch import _progress
    from hpsearch.warmstart import Prior

    class Session:
        n_trials = 5

        def __init__(self) -> None:
            self.result = SearchResult("optuna", ["maximize"], [])
            self.tally = RunningTally()

    session = Session()
    priors = [Prior(params={"x": i}, objective=0.99, origin="earlier") for i in range(3)]
    session.result.records.extend(prior_records(priors))
    session.tally.recount(session.result)  # as SearchSession.adopt
    caplog.set_level("INFO", logger="hpsearch.progress")
    rng = random.Random(1)
    for number in range(2):
        record = _record(rng, number, 1)
        record.state, record.objective, record.extra = TrialState.COMPLETE, 0.5 + number / 10, {}
        session.result.records.append(record)
        session.tally.update(session.result, record)
        _progress.trial_line(session, record)  # type: ignore[arg-type]
    lines = [r.getMessage() for r in caplog.records]
    assert [line.split("]")[0] for line in lines] == ["[1/5 +3 warm", "[2/5 +3 warm"], lines
    assert lines[-1].endswith("| best 0.6 (run-1)")  # the warm rows' 0.99 is not this search's best
    progress = SweepProgress(total=5, enabled=False)
    progress.on_trial_end(session, record)  # type: ignore[arg-type]
    assert progress.postfix == "done 2, pruned 0, failed 0, +3 warm, best 0.6 (run-1)"
