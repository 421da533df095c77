"""SearchResult: the pandas schema, best trial / Pareto front, save/load round trip, Markdown."""

from __future__ import annotations

import json
import math
import os
from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest

from hpsearch.report import render_markdown
from hpsearch.results import SearchResult
from hpsearch.trial import Evaluation, TrialRecord, TrialState

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)

FIXED_LEADING = ["trial_id", "name", "number", "state", "source", "config_id", "seed", "fold"]
FIXED_TRAILING = [
    "started",
    "finished",
    "duration_s",
    "cpu_s",
    "device_s",
    "peak_memory_mb",
    "energy_kwh",
    "emissions_kg",
    "n_evaluations",
    "last_step",
    "checkpoint",
    "node",
    "error",
]
FIXED_DTYPES = {
    "trial_id": "object",
    "name": "object",
    "number": "int64",
    "state": "object",
    "source": "object",
    "config_id": "object",
    "seed": "Int64",
    "fold": "Int64",
    "started": "datetime64[us, UTC]",
    "finished": "datetime64[us, UTC]",
    "duration_s": "float64",
    "cpu_s": "float64",
    "device_s": "float64",
    "peak_memory_mb": "float64",
    "energy_kwh": "float64",
    "emissions_kg": "float64",
    "n_evaluations": "int64",
    "last_step": "Int64",
    "checkpoint": "object",
    "node": "object",
    "error": "object",
}


def make_record(number, state, objective, params, steps=4, **kw):
    """A trial that evaluated every 10 steps (objective rising to its final value), 2 s per step."""
    evaluations = []
    if objective is not None:
        for i in range(1, steps + 1):
            value = (
                [v - 0.05 * (steps - i) for v in objective]
                if isinstance(objective, list)
                else objective - 0.05 * (steps - i)
            )
            evaluations.append(
                Evaluation(
                    step=10 * i,
                    epoch=0.5 * i,
                    objective=value,
                    metrics={"eval_loss": 1.0 / i, "epoch": 0.5 * i},
                )
            )
    started = T0 + timedelta(seconds=200 * number)
    defaults = dict(
        trial_id=f"id-{number}",
        number=number,
        name=f"run-{number}",
        state=state,
        params=params,
        objective=objective,
        started=started,
        finished=started + timedelta(seconds=20 * steps),
        intermediates=evaluations,
        last_step=10 * steps if evaluations else None,
        checkpoint=f"/out/run-id-{number}/checkpoint-{10 * steps}" if state == TrialState.COMPLETE else None,
        node="host-a",
    )
    defaults.update(kw)
    return TrialRecord(**defaults)


def single_records():
    # lr: float; optimizer: categorical strings; batch_size: categorical ints; momentum: conditional (sgd only);
    # warmup: bool; betas: a tuple choice.
    return [
        make_record(
            0,
            TrialState.COMPLETE,
            0.80,
            {"lr": 1e-3, "optimizer": "adamw", "batch_size": 32, "warmup": True, "betas": (0.9, 0.999)},
        ),
        make_record(
            1,
            TrialState.COMPLETE,
            0.90,
            {
                "lr": 1e-4,
                "optimizer": "sgd",
                "batch_size": 64,
                "momentum": 0.9,
                "warmup": False,
                "betas": (0.9, 0.98),
            },
        ),
        make_record(
            2,
            TrialState.PRUNED,
            0.95,
            {
                "lr": 1e-2,
                "optimizer": "sgd",
                "batch_size": 16,
                "momentum": 0.5,
                "warmup": True,
                "betas": (0.9, 0.999),
            },
            steps=1,
        ),
        make_record(
            3,
            TrialState.FAIL,
            None,
            {"lr": 1e-5, "optimizer": "adamw", "batch_size": 32, "warmup": False, "betas": (0.9, 0.98)},
            error="RuntimeError: CUDA out of memory",
        ),
        make_record(
            4,
            TrialState.COMPLETE,
            0.85,
            {
                "lr": 3e-3,
                "optimizer": "sgd",
                "batch_size": 16,
                "momentum": 0.7,
                "warmup": True,
                "betas": (0.9, 0.999),
            },
        ),
        make_record(
            5,
            TrialState.RUNNING,
            0.60,
            {"lr": 5e-4, "optimizer": "adamw", "batch_size": 64, "warmup": False, "betas": (0.9, 0.98)},
            steps=2,
            finished=None,
        ),
    ]


def single_result(records=None, **kw):
    defaults = dict(
        backend="optuna",
        directions=["maximize"],
        records=single_records() if records is None else records,
        space={"lr": {"type": "float", "low": 1e-5, "high": 1e-2, "log": True}},
        n_trials=10,
        objective="eval_accuracy",
        started=T0,
        finished=T0 + timedelta(hours=1),
        settings={
            "sampler": "TPESampler",
            "seed": 0,
            "pruner": {"name": "MedianPruner", "n_warmup_steps": 2},
        },
        versions={"optuna": "5.0.0"},
    )
    defaults.update(kw)
    return SearchResult(**defaults)


def multi_result():
    # minimize objective_0, maximize objective_1; front: 0 (0.1, 0.5), 1 (0.2, 0.7), 3 (0.4, 0.9).
    # 2 (0.3, 0.6) is dominated by 1; 4 is dominated by 3; 5 is pruned; 6 has a NaN.
    values = {0: [0.1, 0.5], 1: [0.2, 0.7], 2: [0.3, 0.6], 3: [0.4, 0.9], 4: [0.5, 0.9]}
    records = [
        make_record(n, TrialState.COMPLETE, v, {"x": n, "kind": "ab"[n % 2]}) for n, v in values.items()
    ]
    records.append(make_record(5, TrialState.PRUNED, [0.0, 1.0], {"x": 5, "kind": "b"}))
    records.append(make_record(6, TrialState.COMPLETE, [math.nan, 2.0], {"x": 6, "kind": "a"}))
    return SearchResult("ray", ["minimize", "maximize"], records, objective="loss_and_accuracy")


# ---------------------------------------------------------------------- dataframes


def test_trials_dataframe_columns_and_dtypes():
    df = single_result().trials_dataframe()
    params = [
        "params_batch_size",
        "params_betas",
        "params_lr",
        "params_momentum",
        "params_optimizer",
        "params_warmup",
    ]
    assert list(df.columns) == FIXED_LEADING + ["objective"] + params + FIXED_TRAILING
    dtypes = {c: str(t) for c, t in df.dtypes.items()}
    assert dtypes == {
        **FIXED_DTYPES,
        "objective": "float64",
        "params_batch_size": "Int64",
        "params_betas": "object",
        "params_lr": "float64",
        "params_momentum": "float64",
        "params_optimizer": "object",
        "params_warmup": "boolean",
    }
    assert df["number"].tolist() == [0, 1, 2, 3, 4, 5]
    assert df["state"].tolist() == ["COMPLETE", "COMPLETE", "PRUNED", "FAIL", "COMPLETE", "RUNNING"]
    # The conditional parameter is missing where it was inactive, the failed trial has no objective.
    assert df["params_momentum"].isna().tolist() == [True, False, False, True, False, True]
    assert math.isnan(df.loc[3, "objective"])
    assert df.loc[3, "error"] == "RuntimeError: CUDA out of memory"
    assert df.loc[0, "params_betas"] == (0.9, 0.999)
    assert df.loc[0, "duration_s"] == 80.0
    assert pd.isna(df.loc[5, "duration_s"])
    assert df.loc[0, "n_evaluations"] == 4
    assert df.loc[3, "n_evaluations"] == 0
    assert pd.isna(df.loc[3, "last_step"])
    assert df.loc[3, "checkpoint"] is None
    assert df.loc[0, "started"] == pd.Timestamp(T0)


def test_trials_rows_are_the_dataframe_rows_as_plain_values():
    """The report's table reads `trials_rows` (no pandas): the same columns and values as `trials_dataframe`, for
    any subset of the trials in any order."""
    result = single_result()
    df = result.trials_dataframe()
    expected = df.astype(object).where(df.notna(), None).values.tolist()
    records = sorted(result.records, key=lambda r: r.number)
    columns, rows = result.trials_rows(records)
    assert columns == list(df.columns)
    assert rows == expected
    assert rows[3][columns.index("objective")] is None  # the failed trial: missing, not NaN
    assert all(not isinstance(v, pd.Timestamp) for row in rows for v in row)  # plain datetimes, in UTC
    assert rows[0][columns.index("started")] == T0 and rows[0][columns.index("started")].tzinfo is not None
    subset = [records[4], records[0]]
    assert result.trials_rows(subset) == (columns, [expected[4], expected[0]])
    assert result.trials_rows([]) == (columns, [])


def test_dtypes_do_not_depend_on_who_produced_the_values():
    """A backend handing numpy scalars (Ray does) gives the same frame as one handing Python values."""
    plain = single_result().trials_dataframe()
    records = single_records()
    for record in records:
        record.params = {
            k: (np.float64(v) if isinstance(v, float) else np.int64(v) if type(v) is int else v)
            for k, v in record.params.items()
        }
        if isinstance(record.objective, float):
            record.objective = np.float64(record.objective)
    numpy_df = single_result(records=records, backend="ray").trials_dataframe()
    pd.testing.assert_frame_equal(plain, numpy_df)


def test_an_int_beyond_64_bits_keeps_the_object_dtype():
    # Categorical([10**30, 5]) and Fixed(2**70) are legal values; an Int64 column cannot hold them (OverflowError).
    records = single_records()
    for i, record in enumerate(records):
        record.params = {**record.params, "big": [10**30, 5][i % 2], "fixed": 2**70}
    df = single_result(records=records).trials_dataframe()
    assert str(df["params_big"].dtype) == "object" and str(df["params_fixed"].dtype) == "object"
    assert df["params_big"].tolist() == [[10**30, 5][i % 2] for i in range(len(records))]
    assert str(df["params_batch_size"].dtype) == "Int64"


def test_empty_result_has_the_same_columns_and_dtypes():
    df = single_result(records=[]).trials_dataframe()
    assert list(df.columns) == FIXED_LEADING + ["objective"] + FIXED_TRAILING
    assert {c: str(t) for c, t in df.dtypes.items()} == {**FIXED_DTYPES, "objective": "float64"}
    inter = single_result(records=[]).intermediates_dataframe()
    assert list(inter.columns) == ["trial_id", "step", "epoch", "objective"]


def test_multi_objective_columns():
    result = multi_result()
    df = result.trials_dataframe()
    assert list(df.columns[:10]) == [
        "trial_id",
        "name",
        "number",
        "state",
        "source",
        "config_id",
        "seed",
        "fold",
        "objective_0",
        "objective_1",
    ]
    assert df["objective_0"].dtype == "float64" and df["objective_1"].dtype == "float64"
    assert df.loc[1, ["objective_0", "objective_1"]].tolist() == [0.2, 0.7]
    inter = result.intermediates_dataframe()
    assert list(inter.columns[:5]) == ["trial_id", "step", "epoch", "objective_0", "objective_1"]


def test_intermediates_dataframe():
    result = single_result()
    df = result.intermediates_dataframe()
    # "epoch" is both a column and a metric name: the metric is renamed rather than lost (and sorted by its
    # own name, so before eval_loss).
    assert list(df.columns) == ["trial_id", "step", "epoch", "objective", "metric_epoch", "eval_loss"]
    assert {c: str(t) for c, t in df.dtypes.items()} == {
        "trial_id": "object",
        "step": "int64",
        "epoch": "float64",
        "objective": "float64",
        "eval_loss": "float64",
        "metric_epoch": "float64",
    }
    assert len(df) == sum(len(r.intermediates) for r in result.records)
    first = df[df["trial_id"] == "id-0"]
    assert first["step"].tolist() == [10, 20, 30, 40]
    assert first["objective"].tolist() == pytest.approx([0.65, 0.70, 0.75, 0.80])


# ---------------------------------------------------------------------- best / pareto / counts


def test_best_trial_maximize_ignores_non_complete_trials():
    # The pruned trial (0.95) and the running one are better or comparable but not COMPLETE.
    assert single_result().best_trial.name == "run-1"


def test_best_trial_minimize_nan_never_wins_ties_go_to_the_earliest():
    records = [
        make_record(0, TrialState.COMPLETE, math.nan, {"x": 0}),
        make_record(1, TrialState.COMPLETE, 0.3, {"x": 1}),
        make_record(2, TrialState.COMPLETE, 0.2, {"x": 2}),
        make_record(3, TrialState.COMPLETE, 0.2, {"x": 3}),
        make_record(4, TrialState.FAIL, None, {"x": 4}),
    ]
    result = SearchResult("optuna", ["minimize"], records)
    assert result.best_trial.number == 2
    assert result.best_trials == [result.best_trial]


def test_best_trial_is_none_without_complete_trials():
    records = [make_record(0, TrialState.FAIL, None, {}), make_record(1, TrialState.PRUNED, 0.5, {})]
    result = SearchResult("optuna", ["maximize"], records)
    assert result.best_trial is None
    assert result.best_trials == []


def test_best_trial_raises_for_multi_objective():
    with pytest.raises(ValueError, match="best_trials"):
        _ = multi_result().best_trial


def test_pareto_front():
    assert [r.number for r in multi_result().best_trials] == [0, 1, 3]


def test_pareto_front_keeps_equal_points():
    records = [make_record(n, TrialState.COMPLETE, [1.0, 1.0], {}) for n in range(2)]
    result = SearchResult("optuna", ["minimize", "minimize"], records)
    assert [r.number for r in result.best_trials] == [0, 1]


def test_counts():
    assert single_result().counts() == {"COMPLETE": 3, "PRUNED": 1, "FAIL": 1, "RUNNING": 1}
    assert single_result(records=[]).counts() == {"COMPLETE": 0, "PRUNED": 0, "FAIL": 0, "RUNNING": 0}


def test_directions_are_validated():
    with pytest.raises(ValueError, match="'minimize'/'maximize'"):
        SearchResult("optuna", ["up"], [])
    with pytest.raises(ValueError, match="non-empty"):
        SearchResult("optuna", [], [])
    assert SearchResult("optuna", "MAXIMIZE", []).directions == ["maximize"]


def test_repr_is_short():
    text = repr(single_result())
    assert "\n" not in text and len(text) < 160
    assert "optuna" in text and "best=0.9" in text


# ---------------------------------------------------------------------- save / load


def test_save_load_round_trip(tmp_path):
    result = single_result()
    result.records[0].started = datetime(2024, 5, 1, 12, 0, 0, 123456)  # naive stays naive
    result.records[0].finished = datetime(2024, 5, 1, 12, 1, 30)
    result.records[0].extra = {"workers": 2, "restored_from": None}
    result.save(tmp_path)
    assert sorted(os.listdir(tmp_path)) == [
        "intermediates.csv",
        "search.journal.jsonl",
        "search.json",
        "trials.csv",
    ]

    loaded = SearchResult.load(tmp_path)
    pd.testing.assert_frame_equal(result.trials_dataframe(), loaded.trials_dataframe())
    pd.testing.assert_frame_equal(result.intermediates_dataframe(), loaded.intermediates_dataframe())
    assert loaded.records == result.records
    for name in (
        "backend",
        "directions",
        "space",
        "n_trials",
        "objective",
        "started",
        "finished",
        "settings",
        "versions",
    ):
        assert getattr(loaded, name) == getattr(result, name), name
    assert loaded.output_dir == os.fspath(tmp_path)
    assert loaded.native is None

    params = loaded.records[1].params
    assert type(params["batch_size"]) is int
    assert type(params["lr"]) is float
    assert type(params["optimizer"]) is str
    assert type(params["warmup"]) is bool
    assert params["betas"] == (0.9, 0.98) and type(params["betas"]) is tuple
    assert loaded.records[0].started.tzinfo is None
    assert loaded.records[0].state is TrialState.COMPLETE
    assert isinstance(loaded.records[0].intermediates[0], Evaluation)
    assert loaded.records[0].intermediates[0].metrics == {"eval_loss": 1.0, "epoch": 0.5}


def test_multi_objective_round_trip(tmp_path):
    result = multi_result()
    result.save(tmp_path)
    loaded = SearchResult.load(tmp_path)
    pd.testing.assert_frame_equal(result.trials_dataframe(), loaded.trials_dataframe())
    assert [r.number for r in loaded.best_trials] == [0, 1, 3]


def test_saved_files_are_readable_without_hpsearch(tmp_path):
    result = single_result(output_dir=str(tmp_path))
    assert result.save() == str(tmp_path)
    trials = pd.read_csv(tmp_path / "trials.csv")
    assert len(trials) == 6
    assert trials["params_optimizer"].tolist() == ["adamw", "sgd", "sgd", "adamw", "sgd", "adamw"]
    intermediates = pd.read_csv(tmp_path / "intermediates.csv")
    assert len(intermediates) == len(result.intermediates_dataframe())
    meta = json.loads((tmp_path / "search.json").read_text())
    assert meta["counts"] == {"COMPLETE": 3, "PRUNED": 1, "FAIL": 1, "RUNNING": 1}
    assert meta["format_version"] == 2
    assert len(meta["records"]) == 6


def test_partial_save_loads_what_was_saved(tmp_path):
    records = single_records()
    for k in (0, 2, 5):
        single_result(records=records[:k]).save(tmp_path)
        loaded = SearchResult.load(tmp_path)
        assert len(loaded.trials_dataframe()) == k
        assert len(pd.read_csv(tmp_path / "trials.csv")) == k


@pytest.mark.parametrize("dies_at", [2, 3])  # after search.json, before the new journal / before trials.csv
def test_interrupted_save_leaves_complete_files(tmp_path, monkeypatch, caplog, dies_at):
    records = single_records()
    single_result(records=records[:3]).save(tmp_path)

    real_replace = os.replace
    calls = []

    def dying_replace(src, dst):
        calls.append(dst)
        if (
            len(calls) == dies_at
        ):  # search.json went through; the process "dies" before the next file is replaced
            raise KeyboardInterrupt
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", dying_replace)
    with pytest.raises(KeyboardInterrupt):
        single_result(records=records[:4]).save(tmp_path)
    monkeypatch.undo()

    assert sorted(os.listdir(tmp_path)) == [
        "intermediates.csv",
        "search.journal.jsonl",
        "search.json",
        "trials.csv",
    ]  # no temp left
    assert len(SearchResult.load(tmp_path).records) == 4
    if (
        dies_at == 2
    ):  # the earlier snapshot's journal is left: older than search.json, so ignored, and said so
        assert "search.journal.jsonl is not the journal the snapshot search.json names" in caplog.text
    assert len(pd.read_csv(tmp_path / "trials.csv")) == 3  # the previous, complete version


def test_a_running_search_appends_to_the_journal_and_snapshots_at_growing_intervals(tmp_path):
    records = single_records()
    result = single_result(records=records[:1])
    result.record_trial(tmp_path, records[0])  # the first trial: a snapshot naming a new, empty journal
    search, trials, journal = (
        tmp_path / "search.json",
        tmp_path / "trials.csv",
        tmp_path / "search.journal.jsonl",
    )
    kept = {path: (os.stat(path).st_ino, os.stat(path).st_mtime_ns) for path in (search, trials)}
    assert len(journal.read_text().splitlines()) == 1  # the header
    for record in records[1:]:  # the next trials: one journal line each; search.json and the CSVs untouched
        result.records.append(record)
        result.record_trial(tmp_path, record)
    assert {path: (os.stat(path).st_ino, os.stat(path).st_mtime_ns) for path in (search, trials)} == kept
    lines = journal.read_text().splitlines()
    assert [json.loads(line)["seq"] for line in lines[1:]] == [1, 2, 3, 4, 5]
    loaded = SearchResult.load(tmp_path)
    assert loaded.records == result.records and len(pd.read_csv(trials)) == 1  # CSVs: as of the snapshot
    assert loaded.finished == result.finished

    result._schedule.min_lines = (
        2  # now due: the next trial takes a snapshot, CSVs included, and a new journal
    )
    result.records[0] = make_record(
        0, TrialState.FAIL, None, dict(result.records[0].params)
    )  # a changed trial
    result.record_trial(tmp_path, result.records[0])
    assert os.stat(search).st_ino != kept[search][0] and len(pd.read_csv(trials)) == 6
    assert pd.read_csv(trials)["state"].tolist()[0] == "FAIL"
    assert len(journal.read_text().splitlines()) == 1
    assert SearchResult.load(tmp_path).records == result.records


def test_snapshot_schedule_costs_o1_per_trial():
    from hpsearch._journal import SnapshotSchedule

    schedule = SnapshotSchedule(min_seconds=1e9)
    snapshots, lines, written = [], 0, 0
    for n in range(1, 10_001):
        lines += 1
        if schedule.due(lines, n, 0.0, 0.0):
            snapshots.append(n)
            written += n  # a snapshot writes every record
            lines = 0
    assert written <= 4 * 10_000  # the records written by all snapshots stay within a constant times n
    assert snapshots[0] == 100 and len(snapshots) < 20
    # The time rule: with slow trials, a snapshot at most a minute (or 20 snapshot durations) behind.
    assert schedule.due(1, 10_000, 2e9, 0.0) and not SnapshotSchedule().due(1, 10_000, 59.0, 0.0)
    assert not SnapshotSchedule().due(1, 10_000, 61.0, 10.0) and SnapshotSchedule().due(
        1, 10_000, 201.0, 10.0
    )
    assert not schedule.due(0, 10_000, 2e9, 0.0)  # nothing new: nothing to write


def test_only_the_searchs_last_save_is_fsynced(tmp_path, monkeypatch):
    import hpsearch._files as files

    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(files.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    result = single_result()
    for record in result.records:  # after each trial: a journal line (or a snapshot), not fsynced
        result.record_trial(tmp_path, record)
    assert synced == [] and len(SearchResult.load(tmp_path).records) == 6
    result.save(
        tmp_path
    )  # the search's last save and any explicit save: search.json, the journal and the folder
    assert len(synced) == 4


def test_load_missing_file_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"search\.json"):
        SearchResult.load(tmp_path)


def test_load_corrupt_file_names_it(tmp_path):
    single_result().save(tmp_path)
    path = tmp_path / "search.json"
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    with pytest.raises(ValueError, match=r"search\.json.*corrupt"):
        SearchResult.load(tmp_path)

    data = json.loads(text)
    del data["records"][0]["state"]
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"search\.json.*'state'"):
        SearchResult.load(tmp_path)

    path.write_text(json.dumps({"hello": 1}))
    with pytest.raises(ValueError, match="not an hpsearch search file"):
        SearchResult.load(tmp_path)

    data["format_version"] = 99
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="format_version 99"):
        SearchResult.load(tmp_path)


@pytest.mark.parametrize(
    "path, value",
    [
        (("records", 0, "number"), 1e308),
        (("records", 0, "number"), "3"),
        (("records", 0, "objective"), "x"),
        (("records", 0, "objective"), {}),
        (("records", 0, "last_step"), "x"),
        (("records", 0, "intermediates", 0, "epoch"), "x"),
        (("records", 0, "intermediates", 0, "objective"), [{}]),
        (("settings",), "x"),
        (("versions",), ["x"]),
        (("n_trials",), "many"),
    ],
)
def test_load_refuses_a_field_of_the_wrong_type(tmp_path, path, value):
    # Such a file loaded, then trials_dataframe(), repr() or the report failed with OverflowError, TypeError or
    # AttributeError far from the file; it is refused when loaded, naming the file and the field.
    single_result().save(tmp_path)
    data = json.loads((tmp_path / "search.json").read_text())
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    (tmp_path / "search.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match=rf"search\.json.*corrupt.*{path[-1]}"):
        SearchResult.load(tmp_path)


def test_load_refuses_values_nested_too_deeply(tmp_path):
    # json.loads raised RecursionError (no ValueError): hpsearch report printed a traceback, the dashboard's reader died.
    (tmp_path / "search.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match=r"search\.json.*nests its values too deeply.*corrupt"):
        SearchResult.load(tmp_path)
    single_result().save(tmp_path)
    data = json.loads((tmp_path / "search.json").read_text())
    value: object = 1
    for _ in range(900):  # json reads it; turning it back into parameters recurses past the limit
        value = [value]
    data["records"][0]["params"]["deep"] = value
    (tmp_path / "search.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"search\.json.*corrupt"):
        SearchResult.load(tmp_path)


def test_save_needs_a_folder():
    with pytest.raises(ValueError, match="output_dir"):
        single_result().save()


def test_save_accepts_non_json_values(tmp_path):
    result = single_result(settings={"seed": np.int64(3), "grid": np.array([1, 2]), "tags": {"b", "a"}})
    result.records[0].extra = {"score": np.float32(0.5)}
    result.save(tmp_path)
    loaded = SearchResult.load(tmp_path)
    assert loaded.settings == {"seed": 3, "grid": [1, 2], "tags": ["a", "b"]}
    assert loaded.records[0].extra == {"score": 0.5}


# ---------------------------------------------------------------------- markdown


def test_to_markdown():
    text = render_markdown(single_result())
    assert "optuna" in text and "eval_accuracy" in text
    assert "3 COMPLETE, 1 PRUNED, 1 FAIL, 1 RUNNING" in text
    assert "**Best**: 0.9 by run-1" in text
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| # |"))
    assert "| lr |" in lines[header] and "| momentum |" in lines[header]
    rows = lines[header + 2 :]
    # Best first: complete by objective, then pruned, running, failed.
    assert [row.split("|")[2].strip() for row in rows] == [
        "run-1 ★",
        "run-4",
        "run-0",
        "run-2",
        "run-5",
        "run-3",
    ]
    assert all(row.count("|") == lines[header].count("|") for row in rows)


def test_to_markdown_escapes_and_truncates():
    records = single_records()
    records[0].name = "a|b <i>x</i>"
    text = render_markdown(single_result(records=records), max_rows=2)
    assert "a\\|b &lt;i&gt;x&lt;/i&gt;" not in text  # run-0 is third best: cut
    assert "4 more trial(s)" in text
    full = render_markdown(single_result(records=records), max_rows=None)
    assert "a\\|b &lt;i&gt;x&lt;/i&gt;" in full
    assert "<i>" not in full


def test_to_markdown_multi_objective_and_empty():
    text = render_markdown(multi_result())
    assert "Pareto front**: 3 trial(s)" in text
    assert "| objective_0 | objective_1 |" in text
    empty = render_markdown(single_result(records=[]))
    assert "No trials recorded" in empty


def test_best_run_is_transformers_four_field_tuple_with_its_checkpoint_and_name_beside():
    """Code written for transformers unpacks BestRun into its four fields; the checkpoint and the trial's name are
    attributes outside the tuple, and they survive pickling (Ray), copies and _replace."""
    import copy
    import pickle

    from transformers.trainer_utils import BestRun as TransformersBestRun

    from hpsearch import BestRun

    best = BestRun(
        "3", 0.25, {"learning_rate": 0.01}, None, checkpoint="/out/run-3/checkpoint-8", name="run-3"
    )
    assert len(best) == len(TransformersBestRun._fields) == 4
    assert BestRun._fields == TransformersBestRun._fields
    run_id, objective, hyperparameters, run_summary = best
    assert (run_id, objective, hyperparameters, run_summary) == ("3", 0.25, {"learning_rate": 0.01}, None)
    for other in (pickle.loads(pickle.dumps(best)), copy.deepcopy(best), copy.copy(best)):
        assert other == best and (other.checkpoint, other.name) == ("/out/run-3/checkpoint-8", "run-3")
    changed = best._replace(objective=0.5)
    assert changed.objective == 0.5 and (changed.checkpoint, changed.name) == (best.checkpoint, best.name)
    assert "checkpoint='/out/run-3/checkpoint-8'" in repr(best)
    assert BestRun(run_id="1", objective=1.0, hyperparameters={}).checkpoint is None
