"""Logging integrations (report_to): selection, TensorBoard event files, MLflow runs, the JSON-lines log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from torch.utils.data import Subset

from tests._digits import DigitsMLP, accuracy, digits_datasets
from trainer import Trainer, TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from trainer._integrations import (
    JsonlCallback,
    MLflowCallback,
    TensorBoardCallback,
    get_reporting_integration_callbacks,
)
from trainer.integrations import _base as integrations_base


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
    return {e["step"]: e[key] for e in trainer.state.log_history if key in e}


# ---------------------------------------------------------------------------------------------- selection
def test_report_to_selects_callback_classes():
    assert get_reporting_integration_callbacks("none") == []
    assert get_reporting_integration_callbacks(None) == []
    assert get_reporting_integration_callbacks([]) == []
    assert get_reporting_integration_callbacks("jsonl") == [JsonlCallback]
    assert get_reporting_integration_callbacks(["mlflow", "tensorboard"]) == [
        MLflowCallback,
        TensorBoardCallback,
    ]
    # Here every library is installed, so "all" starts with these three (the trackers follow: test_trackers.py).
    assert get_reporting_integration_callbacks("all")[:3] == [
        JsonlCallback,
        TensorBoardCallback,
        MLflowCallback,
    ]
    with pytest.raises(ValueError, match="azure_ml"):
        get_reporting_integration_callbacks(["azure_ml"])


def test_missing_library_named_explicitly_is_an_import_error_with_the_install_command(monkeypatch, tmp_path):
    # The availability checks live in trainer.integrations now; trainer._integrations only re-exports.
    real = integrations_base._installed
    monkeypatch.setattr(
        integrations_base, "_installed", lambda module: module != "tensorboard" and real(module)
    )
    with pytest.raises(ImportError, match=r"pip install 'hpsearch\[tensorboard\]'"):
        get_reporting_integration_callbacks(["jsonl", "tensorboard"])
    # "all" quietly leaves out what is not installed.
    assert TensorBoardCallback not in get_reporting_integration_callbacks("all")
    with pytest.raises(ImportError, match="tensorboard"):
        make_trainer((None, None), tmp_path, report_to=["tensorboard"])


def test_the_trainer_registers_the_chosen_callbacks(data, tmp_path):
    trainer = make_trainer(data, tmp_path, report_to=["jsonl", "tensorboard"])
    kinds = [type(cb) for cb in trainer.callback_handler.callbacks]
    assert JsonlCallback in kinds and TensorBoardCallback in kinds and MLflowCallback not in kinds


@pytest.mark.multiprocess
def test_importing_the_trainer_loads_no_logging_library():
    code = (
        "import sys, trainer\n"
        "from trainer import _integrations\n"
        "trainer.TrainingArguments(output_dir='x', report_to='all')\n"
        "bad = [m for m in ('mlflow', 'tensorboard', 'torch.utils.tensorboard') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=os.getcwd())


@pytest.mark.parametrize("callback_class", [JsonlCallback, TensorBoardCallback, MLflowCallback])
def test_only_the_world_main_process_writes(tmp_path, callback_class, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///" + str(tmp_path / "never.db"))
    args = TrainingArguments(output_dir=str(tmp_path / "out"), use_cpu=True)
    state = TrainerState(is_world_process_zero=False, is_local_process_zero=True, global_step=1)
    callback = callback_class()
    callback.on_init_end(args, state, TrainerControl())
    callback.on_train_begin(args, state, TrainerControl())
    state.log_history.append({"loss": 1.0, "step": 1})
    callback.on_log(args, state, TrainerControl(), logs={"loss": 1.0})
    callback.on_train_end(args, state, TrainerControl())
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------------------------------------- jsonl
def read_jsonl(path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_jsonl_mirrors_log_history(data, tmp_path):
    trainer = make_trainer(data, tmp_path, report_to="jsonl")
    trainer.train()
    trainer.evaluate()  # logs after training are appended too
    lines = read_jsonl(tmp_path / "log_history.jsonl")
    assert lines == trainer.state.log_history
    assert [e["step"] for e in lines if "loss" in e] == [2, 4, 6, 8]
    assert sum("eval_accuracy" in e for e in lines) == 3


def test_jsonl_after_a_resume_has_no_duplicate_lines(data, tmp_path):
    class StopAt6(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 6:
                control.should_training_stop = True

    # Checkpoint at 4, stopped at 6: steps 5-6 were logged but are not in the checkpoint.
    make_trainer(
        data, tmp_path, report_to="jsonl", callbacks=[StopAt6()], save_strategy="steps", save_steps=4
    ).train()
    assert 6 in [e["step"] for e in read_jsonl(tmp_path / "log_history.jsonl") if "loss" in e]
    resumed = make_trainer(data, tmp_path, report_to="jsonl", save_strategy="steps", save_steps=4)
    resumed.train(resume_from_checkpoint=True)
    lines = read_jsonl(tmp_path / "log_history.jsonl")
    assert lines == resumed.state.log_history
    assert [e["step"] for e in lines if "loss" in e] == [2, 4, 6, 8]


# ---------------------------------------------------------------------------------------------- tensorboard
def test_tensorboard_event_files_hold_the_logged_scalars(data, tmp_path):
    from tbparse import SummaryReader

    trainer = make_trainer(data, tmp_path, report_to="tensorboard", logging_dir=str(tmp_path / "tb"))
    trainer.train()
    assert any(name.startswith("events.out.tfevents") for name in os.listdir(tmp_path / "tb"))
    reader = SummaryReader(str(tmp_path / "tb"))
    scalars = reader.scalars
    loss = scalars[scalars.tag == "train/loss"]
    assert dict(zip(loss.step, loss.value)) == pytest.approx(logged(trainer, "loss"), rel=1e-6)
    accuracy_rows = scalars[scalars.tag == "eval/accuracy"]
    assert dict(zip(accuracy_rows.step, accuracy_rows.value)) == pytest.approx(
        logged(trainer, "eval_accuracy"), rel=1e-6
    )
    lr = scalars[scalars.tag == "train/learning_rate"]
    assert list(lr.step) == [2, 4, 6, 8]
    text = reader.text
    args_rows = text[text.tag.str.startswith("args")]
    assert len(args_rows) == 1  # the arguments, once
    assert '"learning_rate": 0.01' in args_rows.value.iloc[0]


def test_tensorboard_uses_the_default_logging_dir(data, tmp_path):
    trainer = make_trainer(data, tmp_path, report_to="tensorboard", max_steps=2, eval_strategy="no")
    trainer.train()
    logging_dir = trainer.args.logging_dir
    assert os.path.dirname(logging_dir) == str(tmp_path / "runs")
    assert any(name.startswith("events.out.tfevents") for name in os.listdir(logging_dir))


# ---------------------------------------------------------------------------------------------- mlflow
class FakeTrial:
    def __init__(self, name: str, params: dict[str, Any]) -> None:
        self.name = name
        self.params = params


@pytest.mark.slow
def test_mlflow_run_has_params_once_and_metrics_per_step(data, tmp_path, monkeypatch):
    import mlflow
    from mlflow.tracking import MlflowClient

    uri = "sqlite:///" + str(tmp_path / "tracking.db")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    trainer = make_trainer(data, tmp_path / "out", report_to="mlflow", run_name="digits-run")
    trainer.train()
    assert not os.path.exists(tmp_path / "out" / "mlruns")  # MLFLOW_TRACKING_URI wins over the default store

    mlflow.set_tracking_uri(uri)
    runs = mlflow.search_runs(search_all_experiments=True)
    assert len(runs) == 1
    run = runs.iloc[0]
    assert run["tags.mlflow.runName"] == "digits-run"
    assert run["status"] == "FINISHED"
    assert run["params.learning_rate"] == "0.01"
    assert run["params.max_steps"] == "8"
    assert run["metrics.loss"] == pytest.approx(logged(trainer, "loss")[8])
    history = MlflowClient(uri).get_metric_history(run["run_id"], "loss")
    assert {m.step: m.value for m in history} == pytest.approx(logged(trainer, "loss"))
    accuracy_history = MlflowClient(uri).get_metric_history(run["run_id"], "eval_accuracy")
    assert sorted(m.step for m in accuracy_history) == [4, 8]


@pytest.mark.slow
def test_mlflow_search_nests_trials_under_a_parent_and_logs_no_secrets(data, tmp_path, monkeypatch):
    import mlflow

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    out = tmp_path / "search"
    trainer = make_trainer(
        data, out, report_to="mlflow", run_name="my-search", max_steps=4, eval_strategy="no"
    )
    secret = {"wandb_api_key": "s3cr3t-value", "db_password": "hunter2", "notes": "x" * 10_000}
    trainer.train(trial=FakeTrial("trial-0", {"hidden": 16, **secret}))
    trainer.train(trial=FakeTrial("trial-1", {"hidden": 32, **secret}))

    # Without MLFLOW_TRACKING_URI the runs go to a local store in output_dir.
    store = out / "mlruns" / "mlflow.db"
    assert store.is_file()
    mlflow.set_tracking_uri("sqlite:///" + str(store))
    runs = mlflow.search_runs(search_all_experiments=True)
    assert len(runs) == 3
    parent = runs[runs["tags.mlflow.runName"] == "my-search"]
    assert len(parent) == 1
    trials = runs[runs["tags.mlflow.parentRunId"] == parent.run_id.iloc[0]]
    assert sorted(trials["tags.mlflow.runName"]) == ["trial-0", "trial-1"]
    assert set(runs.status) == {"FINISHED"}  # nothing left running
    assert sorted(trials["params.hidden"]) == ["16", "32"]
    assert trials["metrics.loss"].notna().all()
    param_columns = [c for c in runs.columns if c.startswith("params.")]
    assert "params.wandb_api_key" not in param_columns and "params.db_password" not in param_columns
    assert (
        not runs[param_columns].astype(str).apply(lambda col: col.str.contains("s3cr3t|hunter2")).any().any()
    )
    from trainer.integrations._mlflow import _mlflow_limits  # mlflow's limit, read where this mlflow keeps it

    assert trials["params.notes"].str.len().tolist() == [_mlflow_limits()[0]] * 2
