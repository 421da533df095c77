"""The backend contract: every shared behaviour of a search, run once on every registered backend.

Each test takes the ``backend`` fixture (`tests/hpsearch/conftest.py`), which runs it on each name of
`hpsearch.backends.backend_names()`: Optuna (a real study), Ray (a real 2-node cluster, one per module), SigOpt
(its lite driver) and the engine-free ``random`` backend. A backend registered later runs the contract too. What
the trials do (raise, sleep, log what they saw) lives in `tests.hpsearch._trials`, importable by Ray's workers.

Run the Ray cases inside the loopback namespace: ``bash scripts/isolated.sh python -m pytest ...``.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Mapping
from pathlib import Path

import pytest

from hpsearch import SearchConfigError, SearchResult, TooManyFailedTrials, TrialState
from hpsearch.backends import backend_names
from spaces import Categorical, Float, Int, SearchSpace
from tests.hpsearch import _trials
from tests.hpsearch.conftest import load_search, read_search_json

ROOT = Path(__file__).resolve().parents[2]


def by_number(result: SearchResult) -> dict[int, object]:
    return {r.number: r for r in result.records}


# ---------------------------------------------------------------------------------------------- hp_name
@pytest.mark.parametrize("form", ["dict", "attribute"])
def test_hp_name_names_folders_and_records(backend, make_trainer, tiny_space, output_dir, saved, form):
    """Both forms of ``hp_name`` name each trial's folder and record (every trial failed on Ray before)."""
    hp_name = _trials.dict_hp_name if form == "dict" else _trials.attr_hp_name
    trainer = make_trainer(save_strategy="steps", save_steps=6)
    best = backend.search(
        trainer,
        hp_space=tiny_space,
        compute_objective="eval_accuracy",
        direction="maximize",
        n_trials=2,
        hp_name=hp_name,
    )
    records = best.run_summary.records
    assert len(records) == 2
    for record in records:
        assert record.state is TrialState.COMPLETE, record.error
        expected = _trials.dict_hp_name(record.params) if form == "dict" else f"t{record.number}"
        assert record.name == expected
        assert (output_dir / record.name / "checkpoint-6").is_dir()
    assert best.name in {r.name for r in records}
    assert sorted(r.name for r in saved().records) == sorted(r.name for r in records)


@pytest.mark.parametrize(
    ("hp_name", "message"),
    [
        (_trials.slash_hp_name, "non-empty folder name"),
        (_trials.results_file_hp_name, "search's own files"),
        (_trials.long_hp_name, "256 bytes .* longer than the 255 bytes"),
        (_trials.surrogate_hp_name, "surrogate"),
    ],
    ids=["path", "results-file", "too-long", "lone-surrogate"],
)
def test_an_hp_name_that_gives_no_folder_name_stops_the_search(
    backend, make_trainer, tiny_space, hp_name, message
):
    """A bad ``hp_name`` is a configuration error, not a failed trial: the search stops with it on every backend
    (a name of the search's own files too: its folder would stand where search.json is saved; a name no file
    system or search.json can hold: too long, or not encodable)."""
    with pytest.raises(SearchConfigError, match=f"hp_name.*{message}"):
        backend.search(
            make_trainer(),
            hp_space=tiny_space,
            compute_objective="eval_accuracy",
            n_trials=2,
            hp_name=hp_name,
        )


def test_an_hp_name_of_a_file_in_output_dir_gets_a_folder_of_its_own(
    backend, make_trainer, tiny_space, output_dir, saved
):
    """A name that is a file in output_dir (e.g. a study's database kept there) is taken: each trial gets
    ``<name>-<trial id>``, trains and saves its checkpoints there, and the file is left as it was."""
    output_dir.mkdir(parents=True)
    (output_dir / "study.db").write_bytes(b"not a folder")
    best = backend.search(
        make_trainer(save_strategy="steps", save_steps=6),
        hp_space=tiny_space,
        compute_objective="eval_accuracy",
        direction="maximize",
        n_trials=2,
        hp_name=_trials.file_hp_name,
    )
    records = best.run_summary.records
    assert [r.state for r in records] == [TrialState.COMPLETE] * 2, [r.error for r in records]
    assert sorted(r.name for r in records) == sorted(f"study.db-{r.trial_id}" for r in records)
    for record in records:
        assert (output_dir / record.name / "checkpoint-6").is_dir()
        assert record.extra["hp_name"] == "study.db"
    assert (output_dir / "study.db").read_bytes() == b"not a folder"
    assert sorted(r.name for r in saved().records) == sorted(r.name for r in records)


@pytest.mark.slow
def test_an_hp_name_of_a_users_folder_in_output_dir_gets_a_folder_of_its_own(
    backend, make_trainer, tiny_space, output_dir
):
    """A folder in output_dir that no trial made (the user's data) is taken too: the trials wrote their checkpoints
    into it, and `hpsearch run --fresh` then deleted it with the trial's folders."""
    (output_dir / "data").mkdir(parents=True)
    (output_dir / "data" / "keep.txt").write_text("precious")
    best = backend.search(
        make_trainer(save_strategy="steps", save_steps=6),
        hp_space=tiny_space,
        compute_objective="eval_accuracy",
        direction="maximize",
        n_trials=2,
        hp_name=_trials.folder_hp_name,
    )
    records = best.run_summary.records
    assert sorted(r.name for r in records) == sorted(f"data-{r.trial_id}" for r in records)
    assert sorted(p.name for p in (output_dir / "data").iterdir()) == ["keep.txt"]


# ---------------------------------------------------------------------------------------------- Trial
def test_model_init_and_hp_name_get_the_same_trial_type(backend, make_trainer, tiny_space, tmp_path):
    """``model_init(trial)`` and ``hp_name(trial)`` see the one `Trial` type on every backend: a read-only mapping of
    the trial's parameters, naming its backend."""
    log = str(tmp_path / "seen.jsonl")
    trainer = make_trainer(model_init=_trials.LoggingModelInit(log))
    best = backend.search(
        trainer,
        hp_space=tiny_space,
        compute_objective="eval_accuracy",
        direction="maximize",
        n_trials=2,
        hp_name=_trials.LoggingHpName(log),
    )
    seen = _trials.read_log(log)
    records = {r.name: r for r in best.run_summary.records}
    assert {e["by"] for e in seen} == {"model_init", "hp_name"}
    for entry in seen:
        assert entry["type"] == "hpsearch.trial.Trial", entry
        assert entry["is_mapping"] and entry["read_only"], entry
        assert entry["backend"] == backend.name
        assert set(entry["params"]) == {"learning_rate", "hidden"}
    for entry in (e for e in seen if e["by"] == "model_init"):
        record = records[f"t{entry['number']}"]
        assert entry["params"] == record.params
    assert {f"t{e['number']}" for e in seen if e["by"] == "model_init"} == set(records)


# ---------------------------------------------------------------------------------------------- trial_timeout
@pytest.mark.slow
def test_trial_timeout_fails_the_trial_and_the_search_goes_on(backend, make_trainer, tiny_space, tmp_path):
    timeout = _trials.TIMEOUT_S
    sleeper = _trials.SleepInFirstTrial(str(tmp_path / "slept"), seconds=timeout + 2)
    trainer = make_trainer(callbacks=[sleeper])
    best = backend.search(
        trainer,
        hp_space=tiny_space,
        compute_objective="eval_accuracy",
        direction="maximize",
        n_trials=2,
        trial_timeout=timeout,
    )
    slow = (tmp_path / "slept").read_text()
    records = {r.name: r for r in best.run_summary.records}
    assert len(records) == 2
    assert records[slow].state is TrialState.FAIL
    assert "trial_timeout" in records[slow].error and "TrialTimeout" in records[slow].error
    (other,) = [r for name, r in records.items() if name != slow]
    assert other.state is TrialState.COMPLETE, other.error
    assert best.run_id == other.trial_id


# ---------------------------------------------------------------------------------------------- objective_scope
EXPECTED_SCOPE = {
    "last": lambda values: values[-1],
    "best": max,  # direction maximize
    "avg": statistics.fmean,
}


@pytest.mark.parametrize("scope", sorted(EXPECTED_SCOPE))
def test_objective_scope_picks_the_evaluation_it_names(backend, make_trainer, tiny_space, scope):
    trainer = make_trainer(save_strategy="steps", save_steps=2)
    best = backend.search(
        trainer,
        hp_space=tiny_space,
        compute_objective=_trials.peaked,
        direction="maximize",
        n_trials=1,
        objective_scope=scope,
    )
    (record,) = best.run_summary.records
    assert record.state is TrialState.COMPLETE, record.error
    assert [e.step for e in record.intermediates] == [2, 4, 6]
    for evaluation in record.intermediates:
        assert evaluation.objective == pytest.approx(_trials.peaked(evaluation.metrics))
    values = [e.objective for e in record.intermediates]
    assert record.objective == pytest.approx(EXPECTED_SCOPE[scope](values))
    assert best.objective == record.objective
    # The checkpoint is the one of the chosen evaluation (the last one for the averages).
    step = 4 if scope == "best" else 6
    assert best.checkpoint is not None and _checkpoint_step(best.checkpoint) == step


# ---------------------------------------------------------------------------------------------- max_failed_trials
def test_max_failed_trials_stops_the_search_naming_the_failures(
    backend, make_trainer, tiny_space, output_dir
):
    trainer = make_trainer(model_init=_trials.ScriptedModelInit(dict.fromkeys(range(10), "raise")))
    with pytest.raises(TooManyFailedTrials) as caught:
        backend.search(
            trainer,
            hp_space=tiny_space,
            compute_objective="eval_accuracy",
            direction="maximize",
            n_trials=6,
            max_failed_trials=2,
        )
    message = str(caught.value)
    assert "max_failed_trials=2" in message
    saved = load_search(output_dir)
    failed = [r for r in saved.records if r.state is TrialState.FAIL]
    assert len(failed) >= 2
    assert len(saved.records) < 6  # the search stopped before its budget
    for record in failed[:2]:
        assert record.name in message
        assert f"scripted failure of trial {record.number}" in message
        assert f"scripted failure of trial {record.number}" in record.error


# ---------------------------------------------------------------------------------------------- failed trials
def test_failed_trials_are_recorded_with_their_reason_and_the_search_goes_on(
    backend, make_trainer, tiny_space
):
    script = {0: "raise", 1: "memory", 2: "nan", 3: "base"}
    trainer = make_trainer(model_init=_trials.ScriptedModelInit(script))
    best = backend.search(
        trainer,
        hp_space=tiny_space,
        compute_objective="eval_loss",
        direction="minimize",
        n_trials=5,
        max_failed_trials=5,
    )
    records = by_number(best.run_summary)
    assert sorted(records) == [0, 1, 2, 3, 4]
    for number in (0, 1, 2, 3):
        assert records[number].state is TrialState.FAIL, (number, records[number])
        assert records[number].objective is None
    assert "ValueError: scripted failure of trial 0" in records[0].error
    assert "MemoryError: scripted out of memory in trial 1" in records[1].error
    assert "not finite" in records[2].error
    # A BaseException other than KeyboardInterrupt and SystemExit is the trial's failure too, not the search's.
    assert "ScriptedAbort: scripted BaseException in trial 3" in records[3].error
    assert records[4].state is TrialState.COMPLETE, records[4].error
    assert best.run_id == records[4].trial_id


def test_every_trial_has_its_whole_cost_whatever_its_end(backend, make_trainer, tiny_space):
    """Each trial's cost is measured in its process over the whole trial: COMPLETE, PRUNED (a pruner, or a Ray
    scheduler that stops the trial's process), FAIL in training and FAIL before training (hp_name raised)."""
    trainer = make_trainer(model_init=_trials.ScriptedModelInit({1: "raise"}))
    best = backend.search(
        trainer,
        hp_space=tiny_space,
        compute_objective="eval_loss",
        direction="minimize",
        n_trials=5,
        max_failed_trials=5,
        hp_name=_trials.hp_name_failing_trial_3,
        **_trials.prune_trial_2(backend.name),
    )
    records = by_number(best.run_summary)
    assert sorted(records) == [0, 1, 2, 3, 4]
    assert records[1].state is TrialState.FAIL and records[3].state is TrialState.FAIL
    pruning = bool(_trials.prune_trial_2(backend.name))
    assert records[2].state is (TrialState.PRUNED if pruning else TrialState.COMPLETE), records[2]
    for number, record in records.items():
        for column in ("cpu_s", "device_s", "peak_memory_mb"):
            assert column in record.cost, (number, record.state, record.cost)
        # The device was held for the whole trial: its device-seconds cover its duration.
        assert record.cost["device_s"] >= 0.9 * record.duration_s - 0.05, (
            number,
            record.state,
            record.cost,
            record.duration_s,
        )
    frame = best.run_summary.trials_dataframe()
    assert not frame["device_s"].isna().any()


def test_one_progress_line_per_finished_trial_from_the_session(backend, make_trainer, tiny_space, caplog):
    """From Python, every backend: ``[n/N] name STATE objective X | best Y (name)`` after each trial."""
    caplog.set_level("INFO", logger="hpsearch.progress")
    trainer = make_trainer(model_init=_trials.ScriptedModelInit({1: "raise"}))
    best = backend.search(
        trainer,
        hp_space=tiny_space,
        compute_objective="eval_loss",
        direction="minimize",
        n_trials=3,
        max_failed_trials=3,
    )
    lines = [r.getMessage() for r in caplog.records if r.name == "hpsearch.progress"]
    assert [line.split()[0] for line in lines] == ["[1/3]", "[2/3]", "[3/3]"], lines
    records = {r.name: r for r in best.run_summary.records}
    for line in lines:
        name, state = line.split()[1:3]
        assert records[name].state.value == state, line
        assert " | best " in line, line
    failed = next(line for line in lines if " FAIL " in line)
    assert "objective - | " in failed and "scripted failure of trial 1" in failed
    best_record = best.run_summary.best_trial
    assert lines[-1].split(" | best ")[1].startswith(f"{best_record.objective:.4g} ({best_record.name})"), (
        lines[-1]
    )


# ---------------------------------------------------------------------------------------------- results schema
SCHEMA_SPACE = {
    "learning_rate": Float(1e-3, 1e-1, log=True),
    "hidden": Categorical([8, 16]),
    "layers": Int(1, 2),
    "dropout": Float(0.0, 0.3),
}
# trials_dataframe() of the search below, on every backend.
EXPECTED_TRIALS = {
    "trial_id": "object",
    "name": "object",
    "number": "int64",
    "state": "object",
    "source": "object",
    "config_id": "object",
    "seed": "Int64",
    "fold": "Int64",
    "objective": "float64",
    "params_dropout": "float64",
    "params_hidden": "Int64",
    "params_layers": "Int64",
    "params_learning_rate": "float64",
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


def _dtypes(frame) -> dict[str, str]:
    return {column: str(dtype) for column, dtype in frame.dtypes.items()}


def test_results_have_one_schema_and_reload_equal(backend, make_trainer, output_dir):
    from examples.digits.model import model_init

    trainer = make_trainer(model_init=model_init)
    best = backend.search(
        trainer, hp_space=SCHEMA_SPACE, compute_objective="eval_accuracy", direction="maximize", n_trials=2
    )
    result = best.run_summary
    loaded = SearchResult.load(output_dir)
    assert result.backend == loaded.backend == backend.name
    assert loaded.records == result.records
    for frame in (result.trials_dataframe(), loaded.trials_dataframe()):
        assert _dtypes(frame) == EXPECTED_TRIALS
        assert list(frame["state"]) == ["COMPLETE", "COMPLETE"]
        assert list(frame["n_evaluations"]) == [3, 3]
    assert loaded.trials_dataframe().equals(result.trials_dataframe())
    raw = read_search_json(output_dir)
    assert raw["backend"] == backend.name and raw["counts"]["COMPLETE"] == 2
    # The exports next to search.json have the same rows and columns.
    import pandas as pd

    trials_csv = pd.read_csv(output_dir / "trials.csv")
    assert list(trials_csv.columns) == list(EXPECTED_TRIALS) and len(trials_csv) == 2
    assert len(pd.read_csv(output_dir / "intermediates.csv")) == 6


# ---------------------------------------------------------------------------------------------- several objectives
#: Backends whose engine optimizes one metric: they refuse several directions before any trial.
SINGLE_OBJECTIVE = {"ray"}


@pytest.mark.slow
def test_several_objectives_give_the_pareto_front_or_are_refused_up_front(
    backend, make_trainer, tiny_space, output_dir
):
    def search():
        return backend.search(
            make_trainer(),
            hp_space=tiny_space,
            n_trials=3,
            direction=["minimize", "maximize"],
            compute_objective=_trials.loss_and_accuracy,
        )

    if backend.name in SINGLE_OBJECTIVE:
        with pytest.raises(SearchConfigError, match="direction="):
            search()
        assert not (output_dir / "search.json").exists()
        return
    front = search()
    assert isinstance(front, list) and front
    records = [r for r in front[0].run_summary.records if r.state is TrialState.COMPLETE]
    assert len(records) == 3

    def dominates(a, b):  # minimize the loss, maximize the accuracy
        return a[0] <= b[0] and a[1] >= b[1] and a != b

    expected = {r.trial_id for r in records if not any(dominates(o.objective, r.objective) for o in records)}
    assert {run.run_id for run in front} == expected
    for run in front:
        record = next(r for r in records if r.trial_id == run.run_id)
        assert (
            run.objective
            == record.objective
            == [
                record.intermediates[-1].metrics["eval_loss"],
                record.intermediates[-1].metrics["eval_accuracy"],
            ]
        )
    assert list(load_search(output_dir).trials_dataframe().columns[8:10]) == ["objective_0", "objective_1"]


# ---------------------------------------------------------------------------------------------- best checkpoint
def _checkpoint_step(folder: str) -> int:
    with open(os.path.join(folder, "trainer_state.json"), encoding="utf-8") as f:
        return int(json.load(f)["global_step"])


@pytest.mark.slow
def test_best_run_checkpoint_is_the_one_of_its_objective(backend, make_trainer, tiny_space):
    """With save_strategy = eval_strategy, `BestRun.checkpoint` holds the evaluation that gave `BestRun.objective`
    (the best of each trial here: step 4 of 6, not the last one)."""
    trainer = make_trainer(save_strategy="steps", save_steps=2)
    best = backend.search(
        trainer,
        hp_space=tiny_space,
        compute_objective=_trials.peaked,
        direction="maximize",
        n_trials=2,
        objective_scope="best",
    )
    assert best.checkpoint is not None and os.path.isdir(best.checkpoint)
    assert os.path.isfile(os.path.join(best.checkpoint, "model.safetensors"))
    record = next(r for r in best.run_summary.records if r.trial_id == best.run_id)
    (evaluation,) = [e for e in record.intermediates if e.step == _checkpoint_step(best.checkpoint)]
    assert evaluation.objective == best.objective == record.objective
    assert evaluation.step == 4


# ---------------------------------------------------------------------------------------------- conditional space
def test_inactive_conditional_parameters_are_absent(backend, make_trainer, output_dir):
    space = SearchSpace(
        {
            "learning_rate": Float(1e-3, 1e-1, log=True),
            "optimizer": Categorical(["adam", "sgd"]),
            "momentum": Float(0.1, 0.9, when={"optimizer": "sgd"}),
        }
    )
    trainer = make_trainer(model_init=_trials.CheckConditional())
    best = backend.search(
        trainer, hp_space=space, compute_objective="eval_accuracy", direction="maximize", n_trials=4
    )
    for result in (best.run_summary, load_search(output_dir)):
        for record in result.records:
            assert record.state is TrialState.COMPLETE, record.error  # model_init saw the same rule
            assert ("momentum" in record.params) == (record.params["optimizer"] == "sgd"), record.params
    optimizers = {r.params["optimizer"] for r in best.run_summary.records}
    assert optimizers == {"adam", "sgd"}, f"the seeded draws no longer reach both branches: {optimizers}"
    frame = best.run_summary.trials_dataframe()
    inactive = frame["params_optimizer"] == "adam"
    assert frame.loc[inactive, "params_momentum"].isna().all()


# ---------------------------------------------------------------------------------------------- common options
COMMON_BAD_VALUES = [("max_failed_trials", 0), ("objective_scope", "median"), ("trial_timeout", -1)]


def _check_common_scenario(result: SearchResult) -> None:
    """What `_trials.COMMON_SCRIPT` gives under trial_timeout=TIMEOUT_S, max_failed_trials=2, objective_scope=best."""
    records = by_number(result)
    assert sorted(records) == [0, 1, 2, 3], sorted(records)  # trial 4 never ran: 2 and 3 failed in a row
    assert records[0].state is TrialState.FAIL and "trial_timeout" in records[0].error
    assert records[1].state is TrialState.COMPLETE, records[1].error
    assert records[1].objective == max(e.objective for e in records[1].intermediates) == 0.0
    for number in (2, 3):
        assert records[number].state is TrialState.FAIL
        assert f"scripted failure of trial {number}" in records[number].error


def _common_options(backend) -> dict[str, object]:
    options = {"max_failed_trials": 2, "objective_scope": "best", "trial_timeout": _trials.TIMEOUT_S}
    if backend.name == "ray":
        options["max_concurrent_trials"] = 1  # the scenario is ordered
    return options


@pytest.mark.slow
def test_common_options_through_the_api(backend, make_trainer, tiny_space, output_dir):
    # Counts and seconds as numpy scalars (from an array or a grid), as users pass them: the same search as with
    # Python numbers (hpsearch run, below, passes Python numbers), and its results still save as JSON.
    import numpy as np

    trainer = make_trainer(model_init=_trials.common_scenario_model_init)
    options = {
        key: np.int64(value) if type(value) is int else np.float64(value) if type(value) is float else value
        for key, value in _common_options(backend).items()
    }
    with pytest.raises(TooManyFailedTrials, match="max_failed_trials=2"):
        backend.search(
            trainer,
            hp_space=tiny_space,
            compute_objective=_trials.peaked,
            direction="maximize",
            n_trials=np.int64(5),
            **options,
        )
    _check_common_scenario(load_search(output_dir))
    assert read_search_json(output_dir)["n_trials"] == 5


@pytest.mark.parametrize(("option", "value"), COMMON_BAD_VALUES)
@pytest.mark.parametrize("name", backend_names())
def test_api_refuses_a_bad_common_option(name, make_trainer, tiny_space, option, value):
    from hpsearch import hyperparameter_search

    with pytest.raises(SearchConfigError, match=option):
        hyperparameter_search(
            make_trainer(), hp_space=tiny_space, n_trials=1, backend=name, **{option: value}
        )


def _sweep_file(
    tmp_path: Path,
    backend_name: str,
    output_dir: Path,
    options: Mapping[str, object],
    model: str,
    n_trials: int,
) -> Path:
    import yaml

    training = {k: v for k, v in _trials.TINY_ARGS.items() if k not in ("disable_tqdm",)}
    sweep = {
        "model": model,
        "data": "examples.digits.model:datasets",
        "metrics": "examples.digits.model:compute_metrics",
        "objective": "tests.hpsearch._trials:peaked",
        "direction": "maximize",
        "n_trials": n_trials,
        "output_dir": str(output_dir),
        "training_args": training,
        "space": {
            "learning_rate": {"type": "float", "low": 1e-3, "high": 1e-1, "log": True},
            "hidden": {"type": "categorical", "choices": [8, 16]},
        },
        "backend": backend_name,
        "backend_options": dict(options),
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep, sort_keys=False), encoding="utf-8")
    return path


@pytest.mark.slow
def test_common_options_through_hpsearch_run(backend, tmp_path, output_dir, capsys, monkeypatch):
    """The scenario of `test_common_options_through_the_api`, from a sweep file: the same records."""
    from hpsearch.cli import main

    monkeypatch.chdir(ROOT)
    options = {**backend.options, **_common_options(backend)}
    if "sampler" in options:  # a sweep file names the class
        options["sampler"] = {"name": "RandomSampler", "seed": 0}
    path = _sweep_file(
        tmp_path,
        backend.name,
        output_dir,
        options,
        "tests.hpsearch._trials:common_scenario_model_init",
        n_trials=5,
    )
    code = main(["run", str(path)])
    err = capsys.readouterr().err
    assert code != 0 and "max_failed_trials=2" in err, err
    _check_common_scenario(load_search(output_dir))


@pytest.mark.parametrize(("option", "value"), COMMON_BAD_VALUES)
@pytest.mark.parametrize("name", backend_names())
def test_hpsearch_run_refuses_a_bad_common_option_like_the_api(
    name, make_trainer, tiny_space, tmp_path, output_dir, capsys, monkeypatch, option, value
):
    from hpsearch import hyperparameter_search
    from hpsearch.cli import main

    with pytest.raises(SearchConfigError) as caught:
        hyperparameter_search(
            make_trainer(), hp_space=tiny_space, n_trials=1, backend=name, **{option: value}
        )
    monkeypatch.chdir(ROOT)
    path = _sweep_file(
        tmp_path, name, output_dir, {option: value}, "tests.hpsearch._trials:model_init", n_trials=1
    )
    code = main(["run", str(path)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    assert option in err
    # The API's own explanation (the constraint and the fix), whatever the CLI adds around it.
    assert str(caught.value).split(";")[0].split(", got")[0] in err


def test_every_backend_is_in_the_contract():
    """The contract runs on the registry's names; a registered backend whose engine is missing must fail here."""
    from hpsearch.backends import get_backend

    names = backend_names()
    assert {"optuna", "ray", "sigopt", "random"} <= set(names)
    for name in names:
        assert get_backend(name).is_available(), (
            f"backend {name!r} is registered but its engine is not installed"
        )
