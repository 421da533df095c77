"""Experiment trackers (issue 17): each real library in its offline/local mode, read back from its own files.

One conformance suite over every tracker: a run logs the parameters once and the metrics at every logging step
and ends COMPLETE; a search's trials are runs named after the trial, grouped under the search, with their
parameters, final state (PRUNED, FAIL) and objective. Then the faults: a missing library, a tracker that raises,
secrets.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
from typing import Any

import pytest
from torch.utils.data import Subset

from tests._digits import DigitsMLP, accuracy, digits_datasets
from tests.trainer import _tracker_readers as readers
from trainer import Trainer, TrainerCallback, TrainingArguments, integrations
from trainer.integrations import (
    ClearMLCallback,
    CodeCarbonCallback,
    _base,
    close_trackers,
    get_reporting_integration_callbacks,
    tracker_errors,
)

# ClearML keeps its offline sessions in its cache folder; keep this test run's out of the home folder.
os.environ.setdefault("CLEARML_CACHE_DIR", tempfile.mkdtemp(prefix="clearml-cache-"))

TRACKERS = ["wandb", "comet_ml", "neptune", "clearml", "dvclive"]
_TRACKER_ENV = (
    "WANDB_MODE",
    "WANDB_PROJECT",
    "WANDB_NAME",
    "WANDB_RUN_GROUP",
    "WANDB_TAGS",
    "WANDB_DIR",
    "COMET_MODE",
    "COMET_PROJECT_NAME",
    "COMET_OFFLINE_DIRECTORY",
    "NEPTUNE_MODE",
    "NEPTUNE_PROJECT",
    "NEPTUNE_DATA_DIRECTORY",
    "CLEARML_OFFLINE_MODE",
    "CLEARML_PROJECT",
    "CLEARML_TASK",
    "DVCLIVE_DIR",
    "DVC_EXP_NAME",
    "CODECARBON_COUNTRY_ISO_CODE",
    "CODECARBON_OUTPUT_DIR",
    "CODECARBON_PROJECT_NAME",
)


@pytest.fixture(autouse=True)
def _clean_tracker_env(monkeypatch):
    for name in _TRACKER_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("DVC_NO_ANALYTICS", "1")
    monkeypatch.setenv("DO_NOT_TRACK", "1")


@pytest.fixture(scope="module")
def data():
    train, evaluation = digits_datasets()
    return Subset(train, range(128)), Subset(evaluation, range(50))


def make_trainer(data, output_dir, report_to, callbacks=None, **overrides: Any) -> Trainer:
    args: dict[str, Any] = dict(
        output_dir=str(output_dir),
        per_device_train_batch_size=16,
        max_steps=8,
        learning_rate=1e-2,
        logging_steps=2,
        eval_strategy="steps",
        eval_steps=4,
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
        report_to=report_to,
    )
    args.update(overrides)
    return Trainer(
        model_init=lambda: DigitsMLP(hidden=16),
        args=TrainingArguments(**args),
        train_dataset=data[0],
        eval_dataset=data[1],
        compute_metrics=accuracy,
        callbacks=callbacks,
    )


def logged(trainer: Trainer, key: str) -> dict[int, float]:
    return {e["step"]: e[key] for e in trainer.state.log_history if key in e and "train_runtime" not in e}


def runs_of(name: str, trainer: Trainer) -> list[readers.Run]:
    """The runs tracker ``name`` wrote for ``trainer``, read back from its library's files."""
    out = trainer.args.output_dir
    if name == "wandb":
        return readers.read_wandb(out)
    if name == "comet_ml":
        return readers.read_comet(os.path.join(out, "comet"))
    if name == "neptune":
        return readers.read_neptune(os.path.join(out, ".neptune"))
    if name == "clearml":
        callback = next(cb for cb in trainer.callback_handler.callbacks if isinstance(cb, ClearMLCallback))
        assert callback.offline_folder is not None
        return [readers.read_clearml(callback.offline_folder)]
    if name == "dvclive":
        return [readers.read_dvclive(os.path.join(out, "dvclive"))]
    raise AssertionError(name)


def metric_key(name: str, key: str) -> str:
    """Where a log key lands in tracker ``name`` (W&B and Comet keep it; the others group by train/eval)."""
    if name in ("wandb", "comet_ml"):
        return key
    return key.replace("_", "/", 1) if key.startswith("eval_") else f"train/{key}"


class FakeTrial:
    def __init__(self, name: str, params: dict[str, Any]) -> None:
        self.name = name
        self.params = params


class Boom(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == 3:
            raise RuntimeError("the trial broke at step 3")


# ---------------------------------------------------------------------------------------------- selection
def test_every_name_is_an_integration_and_all_means_every_installed_one():
    assert set(TrainingArguments(report_to="all").report_to) == {"all"}
    for name in [*TRACKERS, "codecarbon", "mlflow", "tensorboard", "jsonl"]:
        assert TrainingArguments(report_to=name).report_to == [name]
        assert get_reporting_integration_callbacks(name) == [integrations.INTEGRATIONS[name]]
    # Every tracker library is installed here, so "all" is every integration.
    assert get_reporting_integration_callbacks("all") == list(integrations.INTEGRATIONS.values())
    assert TrainingArguments(report_to=None).report_to == []  # None is the default, "none"
    assert TrainingArguments().report_to == []


def test_the_arguments_accept_exactly_the_integrations_and_the_refused_names():
    from trainer._training_args import _REPORT_TO

    assert set(_REPORT_TO) == {"all", "none", *integrations.INTEGRATIONS, *integrations.REFUSED}


def test_a_missing_library_is_refused_with_the_install_command_before_training(monkeypatch, data, tmp_path):
    real = _base._installed
    monkeypatch.setattr(
        _base, "_installed", lambda module: module not in ("wandb", "comet_ml") and real(module)
    )
    with pytest.raises(ImportError, match=r"pip install 'hpsearch\[wandb\]'"):
        make_trainer(data, tmp_path, report_to=["dvclive", "wandb"])
    with pytest.raises(ImportError, match=r"pip install 'hpsearch\[comet\]'"):
        make_trainer(data, tmp_path, report_to="comet_ml")
    assert integrations.WandbCallback not in get_reporting_integration_callbacks("all")
    assert not os.path.exists(tmp_path / "dvclive")  # refused before anything ran


def test_aim_is_refused_with_the_reason_and_the_install_command(data, tmp_path):
    assert TrainingArguments(report_to="aim").report_to == ["aim"]
    with pytest.raises(ValueError, match=r"filelock<4.*pip install 'aim"):
        make_trainer(data, tmp_path, report_to=["aim"])
    assert "aim" not in integrations.get_available_reporting_integrations()


@pytest.mark.multiprocess
def test_importing_the_integrations_loads_no_tracker_library():
    code = (
        "import sys, trainer\n"
        "from trainer import integrations\n"
        "trainer.TrainingArguments(output_dir='x', report_to='all')\n"
        "integrations.get_reporting_integration_callbacks('all')\n"
        "bad = [m for m in ('wandb', 'comet_ml', 'neptune', 'clearml', 'dvclive', 'codecarbon', 'mlflow') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=os.getcwd())


# ---------------------------------------------------------------------------------------------- one run
@pytest.mark.slow
@pytest.mark.parametrize("name", TRACKERS)
def test_a_run_has_params_once_metrics_per_step_and_ends_complete(name, data, tmp_path):
    trainer = make_trainer(data, tmp_path / "out", report_to=name, run_name="digits-run")
    trainer.train()
    runs = runs_of(name, trainer)
    assert len(runs) == 1
    run = runs[0]
    assert run.name == ("digits-run" if name != "dvclive" else None)  # DVCLive's files do not name the run
    assert float(run.params["learning_rate"]) == pytest.approx(0.01)
    assert int(run.params["max_steps"]) == 8
    assert run.metrics[metric_key(name, "loss")] == pytest.approx(logged(trainer, "loss"))
    assert sorted(run.metrics[metric_key(name, "eval_accuracy")]) == [4, 8]
    assert run.state == "COMPLETE"
    assert run.closed
    assert tracker_errors(trainer) == []


@pytest.mark.slow
def test_codecarbon_writes_a_row_per_logging_step_in_the_chosen_country(data, tmp_path, monkeypatch):
    trainer = make_trainer(
        data, tmp_path / "out", report_to="codecarbon", run_name="digits-run", eval_strategy="no"
    )
    trainer.train()
    rows = readers.read_codecarbon(str(tmp_path / "out"))
    assert len(rows) == 6  # the logging steps 2, 4, 6, 8, the training's summary log, then the end of the run
    assert set(rows.project_name) == {"digits-run"} and set(rows.country_iso_code) == {"USA"}
    assert rows.duration.is_monotonic_increasing and rows.energy_consumed.notna().all()
    assert tracker_errors(trainer) == []

    monkeypatch.setenv("CODECARBON_COUNTRY_ISO_CODE", "fra")
    monkeypatch.setenv("CODECARBON_OUTPUT_DIR", str(tmp_path / "carbon"))
    make_trainer(data, tmp_path / "out2", report_to="codecarbon", max_steps=2, eval_strategy="no").train()
    assert set(readers.read_codecarbon(str(tmp_path / "carbon")).country_iso_code) == {"FRA"}
    assert CodeCarbonCallback(country_iso_code="deu").country_iso_code == "DEU"
    with pytest.raises(ValueError, match="3-letter"):
        CodeCarbonCallback(country_iso_code="France")


# ---------------------------------------------------------------------------------------------- searches
@pytest.mark.slow
@pytest.mark.parametrize("name", TRACKERS)
def test_a_search_groups_trials_with_their_params_final_state_and_objective(name, data, tmp_path):
    search = tmp_path / "my-search"
    base = make_trainer(data, search, report_to=name, eval_strategy="no", max_steps=4)
    pruned = base.for_trial(base.args.replace(output_dir=str(search / "run-0")))
    pruned.train(trial=FakeTrial("run-0", {"hidden": 16}))
    # During a search training's end does not close the run: the search does, with the trial's state.
    assert close_trackers(pruned, "PRUNED", 0.25) == {}
    close_trackers(pruned, "COMPLETE", 1.0)  # a second close changes nothing

    failed = base.for_trial(base.args.replace(output_dir=str(search / "run-1")), callbacks=[Boom()])
    with pytest.raises(RuntimeError, match="step 3"):
        failed.train(trial=FakeTrial("run-1", {"hidden": 32}))
    close_trackers(failed, "FAIL")

    first, second = runs_of(name, pruned), runs_of(name, failed)
    assert len(first) == len(second) == 1
    for run, trial, hidden, state in ((first[0], "run-0", 16, "PRUNED"), (second[0], "run-1", 32, "FAIL")):
        assert run.name == (trial if name != "dvclive" else None)
        assert int(run.params["hidden"]) == hidden
        assert run.state == state and run.closed
        grouped = {"wandb": run.group, "neptune": run.group, "clearml": run.group, "comet_ml": run.tags}
        if name == "clearml":
            assert run.group == "hpsearch/my-search"
        elif name in grouped:
            assert "my-search" in (grouped[name] if isinstance(grouped[name], list) else [grouped[name]])
    assert float(first[0].objective) == pytest.approx(0.25)
    assert second[0].objective is None
    if name == "wandb":
        assert first[0].raw["exit_code"] == 0 and second[0].raw["exit_code"] == 1
        assert "pruned" in first[0].tags and "fail" in second[0].tags
    if name in ("comet_ml", "neptune"):
        assert "pruned" in first[0].tags and "fail" in second[0].tags
    if name == "neptune":
        assert second[0].raw["failed"] is True
    assert first[0].metrics[metric_key(name, "loss")] == pytest.approx(logged(pruned, "loss"))
    assert sorted(second[0].metrics.get(metric_key(name, "loss"), {})) == [2]  # logged before it broke


def test_a_run_the_search_never_closes_is_closed_by_the_next_training(data, tmp_path):
    trainer = make_trainer(data, tmp_path / "out", report_to="dvclive", eval_strategy="no", max_steps=2)
    trainer.train(trial=FakeTrial("t0", {"hidden": 16}))
    assert readers.read_dvclive(str(tmp_path / "out" / "dvclive")).state is None  # still open
    trainer.train(trial=FakeTrial("t1", {"hidden": 16}))
    # The first run ended when the second began (same folder: the second run started from a closed one).
    callback = next(
        cb for cb in trainer.callback_handler.callbacks if isinstance(cb, integrations.DVCLiveCallback)
    )
    assert callback._open_run
    close_trackers(trainer)
    assert readers.read_dvclive(str(tmp_path / "out" / "dvclive")).state == "COMPLETE"


@pytest.mark.multiprocess
def test_an_open_run_is_closed_when_the_process_exits(tmp_path):
    code = f"""
import sys
sys.path.insert(0, {os.getcwd()!r})
from torch.utils.data import Subset
from tests._digits import digits_datasets
from tests.trainer.test_trackers import make_trainer, FakeTrial, Boom
train, ev = digits_datasets()
data = (Subset(train, range(64)), Subset(ev, range(16)))
make_trainer(data, {str(tmp_path / "done")!r}, report_to='dvclive', eval_strategy='no', max_steps=2).train(
    trial=FakeTrial('t0', {{}}))
try:
    make_trainer(data, {str(tmp_path / "broken")!r}, report_to='dvclive', eval_strategy='no', callbacks=[Boom()]).train()
except RuntimeError:
    pass
"""
    subprocess.run(
        [sys.executable, "-c", code], check=True, cwd=os.getcwd(), env={**os.environ, "DVC_NO_ANALYTICS": "1"}
    )
    assert readers.read_dvclive(str(tmp_path / "done" / "dvclive")).state == "COMPLETE"
    assert readers.read_dvclive(str(tmp_path / "broken" / "dvclive")).state == "FAIL"


# ---------------------------------------------------------------------------------------------- faults
@pytest.mark.slow
def test_a_tracker_that_raises_is_logged_once_and_training_goes_on(data, tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where DVCLive wants its folder")
    monkeypatch.setenv("DVCLIVE_DIR", str(blocker))
    monkeypatch.setenv("WANDB_MODE", "no-such-mode")  # wandb.init refuses it
    trainer = make_trainer(data, tmp_path / "out", report_to=["dvclive", "wandb", "jsonl"])
    with caplog.at_level(logging.ERROR, logger="trainer.integrations"):
        output = trainer.train()
        trainer.evaluate()
    assert output.global_step == 8  # training went on
    errors = tracker_errors(trainer)
    assert [e.split(" ")[0] for e in errors] == ["dvclive", "wandb"]
    assert all("opening the run" in e for e in errors)
    assert len([r for r in caplog.records if r.name == "trainer.integrations"]) == 2  # once per tracker
    assert close_trackers(trainer, "COMPLETE") == {"tracker_errors": errors}
    assert blocker.read_text().startswith("a file")


@pytest.mark.multiprocess
def test_no_api_key_or_token_is_written(data, tmp_path, monkeypatch):
    secrets = {
        "WANDB_API_KEY": "wandb-secret-0123456789abcdef0123456789abcdef01234567",
        "COMET_API_KEY": "comet-secret-0123456789",
        "NEPTUNE_API_TOKEN": "neptune-secret-0123456789",
        "CLEARML_API_SECRET_KEY": "clearml-secret-0123456789",
        "CLEARML_API_ACCESS_KEY": "clearml-access-0123456789",
        "MLFLOW_TRACKING_TOKEN": "mlflow-secret-0123456789",
    }
    for key, value in secrets.items():
        monkeypatch.setenv(key, value)
    search = tmp_path / "search"
    base = make_trainer(
        data, search, report_to=[*TRACKERS, "codecarbon", "mlflow", "jsonl"], max_steps=2, eval_strategy="no"
    )
    trial = base.for_trial(base.args.replace(output_dir=str(search / "run-0")))
    trial.train(trial=FakeTrial("run-0", {"hidden": 16, "api_key": "param-secret-0123456789"}))
    assert close_trackers(trial, "COMPLETE", 0.5) == {}
    clearml = next(cb for cb in trial.callback_handler.callbacks if isinstance(cb, ClearMLCallback))
    written = readers.all_bytes_under(str(tmp_path)) + readers.all_bytes_under(str(clearml.offline_folder))
    assert b"run-0" in written and b"hidden" in written  # the reader sees the runs...
    for value in [*secrets.values(), "param-secret-0123456789"]:
        assert value.encode() not in written, f"{value} was written"  # ...and no secret


def test_tracker_errors_mask_secret_environment_values(monkeypatch):
    monkeypatch.setenv("SOME_API_KEY", "abcdef123456")
    callback = integrations.DVCLiveCallback()

    def fail() -> None:
        raise RuntimeError("rejected key abcdef123456")

    assert not callback._guard("opening the run", fail)
    assert callback.errors == ["dvclive opening the run: RuntimeError: rejected key ***"]


def test_close_refuses_an_unknown_state():
    with pytest.raises(ValueError, match="COMPLETE"):
        integrations.DVCLiveCallback().close("DONE")


def test_a_tracker_failing_at_every_step_is_logged_once(data, tmp_path, caplog):
    class BreakDVCLive(TrainerCallback):
        """After the run opened, put a file where DVCLive writes its plots: every later log fails in DVCLive."""

        def on_step_begin(self, args, state, control, **kwargs):
            if state.global_step == 0:
                plots = tmp_path / "out" / "dvclive" / "plots"
                plots.mkdir(parents=True, exist_ok=True)
                os.rename(plots, tmp_path / "moved-plots")
                plots.write_text("not a folder")

    trainer = make_trainer(
        data, tmp_path / "out", report_to="dvclive", callbacks=[BreakDVCLive()], eval_strategy="no"
    )
    with caplog.at_level(logging.DEBUG, logger="trainer.integrations"):
        assert trainer.train().global_step == 8
    errors = tracker_errors(trainer)
    assert len(errors) >= 4 and all(
        e.startswith("dvclive logging metrics") for e in errors
    )  # each step failed
    assert (
        len([r for r in caplog.records if r.levelno >= logging.ERROR and r.name == "trainer.integrations"])
        == 1
    )


@pytest.mark.parametrize("name", [*TRACKERS, "codecarbon"])
def test_only_the_world_main_process_opens_a_run(name, tmp_path):
    from trainer import TrainerControl, TrainerState

    args = TrainingArguments(output_dir=str(tmp_path / "out"), use_cpu=True)
    state = TrainerState(is_world_process_zero=False, is_local_process_zero=True, global_step=1)
    callback = integrations.INTEGRATIONS[name]()
    for event in ("on_init_end", "on_train_begin", "on_train_end"):
        getattr(callback, event)(args, state, TrainerControl())
    callback.on_log(args, state, TrainerControl(), logs={"loss": 1.0})
    callback.close("FAIL")
    assert not os.path.exists(tmp_path / "out") and callback.errors == []


@pytest.mark.slow
def test_mlflow_records_the_trials_final_state_and_objective(data, tmp_path, monkeypatch):
    import pickle

    import mlflow

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    search = tmp_path / "my-search"
    base = make_trainer(data, search, report_to="mlflow", eval_strategy="no", max_steps=4)
    pruned = base.for_trial(base.args.replace(output_dir=str(search / "run-0")))
    pruned.train(trial=FakeTrial("run-0", {"hidden": 16}))
    close_trackers(pruned, "PRUNED", 0.25)
    failed = base.for_trial(base.args.replace(output_dir=str(search / "run-1")), callbacks=[Boom()])
    with pytest.raises(RuntimeError):
        failed.train(trial=FakeTrial("run-1", {"hidden": 32}))
    close_trackers(failed, "FAIL")
    pickle.loads(pickle.dumps(failed.callback_handler.callbacks))  # a trainer's callbacks still travel (Ray)

    # One store for the search (in the search's folder), one parent run, a nested run per trial.
    assert not os.path.exists(search / "run-0" / "mlruns")
    mlflow.set_tracking_uri("sqlite:///" + str(search / "mlruns" / "mlflow.db"))
    runs = mlflow.search_runs(search_all_experiments=True)
    assert len(runs) == 3
    parent = runs[runs["tags.hpsearch.role"] == "search"]
    assert list(parent.status) == ["FINISHED"]  # the search's parent run is not left running
    assert set(runs[runs["tags.hpsearch.role"] == "trial"]["tags.mlflow.parentRunId"]) == set(parent.run_id)
    for name, status, objective in (("run-0", "KILLED", 0.25), ("run-1", "FAILED", None)):
        trial = runs[runs["tags.mlflow.runName"] == name].iloc[0]
        assert trial["status"] == status and trial["tags.hpsearch.state"] == (
            "PRUNED" if objective else "FAIL"
        )
        if objective is not None:
            assert trial["metrics.objective"] == pytest.approx(objective)


@pytest.mark.slow
def test_the_libraries_environment_variables_are_honoured(data, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_PROJECT", "proj-w")
    monkeypatch.setenv("WANDB_NAME", "name-w")
    monkeypatch.setenv("WANDB_TAGS", "a,b")
    monkeypatch.setenv("WANDB_RUN_GROUP", "group-w")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb-dir"))
    monkeypatch.setenv("COMET_PROJECT_NAME", "proj-c")
    monkeypatch.setenv("COMET_OFFLINE_DIRECTORY", str(tmp_path / "comet-dir"))
    monkeypatch.setenv("NEPTUNE_DATA_DIRECTORY", str(tmp_path / "neptune-dir"))
    monkeypatch.setenv("CLEARML_PROJECT", "proj-cl")
    monkeypatch.setenv("CLEARML_TASK", "task-cl")
    monkeypatch.setenv("DVCLIVE_DIR", str(tmp_path / "dvclive-dir"))
    (tmp_path / "wandb-dir").mkdir()
    trainer = make_trainer(data, tmp_path / "out", report_to=TRACKERS, max_steps=2, eval_strategy="no")
    trainer.train()
    assert tracker_errors(trainer) == []
    [wandb_run] = readers.read_wandb(str(tmp_path / "wandb-dir"))
    assert (wandb_run.raw["project"], wandb_run.name, wandb_run.group) == ("proj-w", "name-w", "group-w")
    assert sorted(wandb_run.tags) == ["a", "b"]
    [comet_run] = readers.read_comet(str(tmp_path / "comet-dir"))
    assert comet_run.group == "proj-c"
    assert len(readers.read_neptune(str(tmp_path / "neptune-dir"))) == 1
    clearml = next(cb for cb in trainer.callback_handler.callbacks if isinstance(cb, ClearMLCallback))
    task = readers.read_clearml(str(clearml.offline_folder))
    assert (task.group, task.name) == ("proj-cl", "task-cl")
    assert readers.read_dvclive(str(tmp_path / "dvclive-dir")).state == "COMPLETE"
    assert not any(
        (tmp_path / "out" / folder).exists() for folder in ("wandb", "comet", ".neptune", "dvclive")
    )
