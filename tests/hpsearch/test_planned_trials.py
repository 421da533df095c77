"""How many trials a search says it will run, where that is not ``n_trials``: Ray Tune runs every ``tune.grid_search``
combination once per sample, so ``n_trials=1`` over a grid of 8 runs 8 trials. The progress lines, the CLI's bar and
the reports count towards that number ("[8/8]", never "[8/1]"). The search itself is in test_ray_backend (the grid
searches)."""

from __future__ import annotations

import logging

import pytest
from ray import tune

from hpsearch import _progress
from hpsearch._tally import RunningTally
from hpsearch.backends import get_backend
from hpsearch.backends.base import SearchBackend
from hpsearch.backends.ray._space import grid_combinations
from hpsearch.report import render_html, render_markdown
from hpsearch.results import SearchResult
from hpsearch.session import SearchSession
from hpsearch.trial import TrialRecord, TrialState


def test_a_grid_counts_every_combination_as_tune_expands_it():
    space = {
        "learning_rate": tune.grid_search([1e-3, 1e-2, 1e-1]),
        "warmup_ratio": tune.uniform(0.0, 0.1),
        "nested": {"hidden": tune.grid_search([8, 16])},
        "seed": 3,
    }
    assert grid_combinations(space) == 6
    assert grid_combinations({"learning_rate": tune.loguniform(1e-3, 1e-1)}) == 1
    ray = get_backend("ray")
    assert ray.planned_trials is not SearchBackend.planned_trials  # Ray says how its samples multiply


def _result(n_trials: int, planned: int | None, finished: int) -> SearchResult:
    records = [
        TrialRecord(trial_id=str(i), number=i, name=f"run-{i}", state=TrialState.COMPLETE, params={"lr": i},
                    objective=float(i))
        for i in range(finished)
    ]  # fmt: skip
    settings = {} if planned is None else {"planned_trials": planned}
    return SearchResult("ray", ["maximize"], records, n_trials=n_trials, settings=settings)


@pytest.mark.parametrize(("planned", "expected"), [(8, 8), (None, 1), (True, 1), ("8", 1)])
def test_the_planned_number_is_read_from_the_settings_or_is_n_trials(planned, expected):
    assert _result(1, planned, 0).planned_trials == expected


def test_progress_lines_count_towards_the_planned_trials(caplog):
    caplog.set_level(logging.INFO, logger="hpsearch.progress")
    result = _result(1, 8, 0)
    session = SearchSession.__new__(SearchSession)  # only what the line reads
    session.result, session.n_trials, session.tally = result, 1, RunningTally()
    for i in range(8):
        record = TrialRecord(trial_id=str(i), number=i, name=f"run-{i}", state=TrialState.COMPLETE,
                             params={"lr": i}, objective=float(i))  # fmt: skip
        result.records.append(record)
        session.tally.update(result, record)
        _progress.trial_line(session, record)
    assert [r.getMessage().split()[0] for r in caplog.records] == [f"[{i}/8]" for i in range(1, 9)]


def test_the_cli_bar_and_the_reports_count_towards_the_planned_trials():
    import io

    result = _result(1, 8, 3)
    with _progress.SweepProgress(1, enabled=True, file=io.StringIO()) as progress:
        session = SearchSession.__new__(SearchSession)
        session.result, session.n_trials, session.tally = result, 1, RunningTally()
        session.tally.recount(result)
        progress.on_trial_end(session, result.records[-1])
        assert (progress.bar.n, progress.bar.total) == (3, 8)
    html = render_html(result)
    assert "3 / 8" in html and "n_trials=1 samples of every grid_search combination" in html
    assert "**Trials**: 3 of 8 " in render_markdown(result)
