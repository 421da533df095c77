"""Trackers as transformers runs them (issue 35, item 9): MLflow's environment variables, model uploads
(``WANDB_LOG_MODEL``, ``HF_MLFLOW_LOG_ARTIFACTS``), offline, and a line saying where a tracker logs when it logs only
on this machine (a warning when an API key says the script expected an upload)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from torch.utils.data import Subset

from tests._digits import digits_datasets
from tests.trainer import _tracker_readers as readers
from tests.trainer.test_trackers import _clean_tracker_env, make_trainer  # noqa: F401 (its autouse fixture)
from trainer.integrations import MLflowCallback

pytestmark = pytest.mark.slow

_ENV = (
    "MLFLOW_TRACKING_URI",
    "MLFLOW_EXPERIMENT_NAME",
    "MLFLOW_TAGS",
    "MLFLOW_FLATTEN_PARAMS",
    "MLFLOW_NESTED_RUN",
    "MLFLOW_RUN_ID",
    "HF_MLFLOW_LOG_ARTIFACTS",
    "DISABLE_MLFLOW_INTEGRATION",
    "WANDB_LOG_MODEL",
    "WANDB_API_KEY",
    "MLFLOW_TRACKING_TOKEN",
    "MLFLOW_TRACKING_USERNAME",
    "DATABRICKS_TOKEN",
    "DATABRICKS_HOST",
    "COMET_API_KEY",
    "NEPTUNE_API_TOKEN",
    "CLEARML_API_ACCESS_KEY",
    "CLEARML_API_SECRET_KEY",
    "HF_DVCLIVE_LOG_MODEL",
    "COMET_LOG_ASSETS",
    "CLEARML_LOG_MODEL",
)


@pytest.fixture(scope="module")
def digits():
    train, evaluation = digits_datasets()
    return Subset(train, range(128)), Subset(evaluation, range(50))


@pytest.fixture(autouse=True)
def _clean_hf_env(monkeypatch):
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)


def mlflow_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from mlflow.tracking import MlflowClient

    uri = "sqlite:///" + str(tmp_path / "store.db")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return MlflowClient(tracking_uri=uri)


def only_run(client):
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert len(runs) == 1, [r.info.run_name for r in runs]
    return runs[0]


def test_mlflow_tags_and_flattened_params(digits, tmp_path, monkeypatch):
    client = mlflow_client(tmp_path, monkeypatch)
    monkeypatch.setenv("MLFLOW_TAGS", '{"release": "rc1", "team": "hp"}')
    monkeypatch.setenv("MLFLOW_FLATTEN_PARAMS", "true")
    make_trainer(
        digits, tmp_path / "out", "mlflow", optim="sgd", optim_args="momentum=0.5", max_steps=2
    ).train()
    run = only_run(client)
    assert (run.data.tags["release"], run.data.tags["team"]) == ("rc1", "hp")
    assert run.data.params["optim_args.momentum"] == "0.5"
    assert "optim_args" not in run.data.params


def test_mlflow_nested_params_are_json_without_flattening(digits, tmp_path, monkeypatch):
    client = mlflow_client(tmp_path, monkeypatch)
    make_trainer(
        digits, tmp_path / "out", "mlflow", optim="sgd", optim_args="momentum=0.5", max_steps=2
    ).train()
    assert only_run(client).data.params["optim_args"] == '{"momentum": 0.5}'


def test_a_malformed_mlflow_tags_fails_when_the_trainer_is_built(digits, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TAGS", "release=rc1")
    with pytest.raises(ValueError, match=r"MLFLOW_TAGS='release=rc1' is not a JSON object"):
        make_trainer(digits, tmp_path / "out", "mlflow")


def test_mlflow_run_id_logs_into_that_run(digits, tmp_path, monkeypatch):
    client = mlflow_client(tmp_path, monkeypatch)
    existing = client.create_run("0", run_name="made-by-the-script")
    monkeypatch.setenv("MLFLOW_RUN_ID", existing.info.run_id)
    make_trainer(digits, tmp_path / "out", "mlflow", max_steps=2).train()
    run = only_run(client)
    assert run.info.run_id == existing.info.run_id
    assert "loss" in run.data.metrics and run.data.params["max_steps"] == "2"


def test_mlflow_logs_into_the_active_run_or_nests_under_it(digits, tmp_path, monkeypatch):
    import mlflow

    client = mlflow_client(tmp_path, monkeypatch)
    mlflow.set_tracking_uri(client.tracking_uri)
    with mlflow.start_run(run_name="script") as parent:
        make_trainer(digits, tmp_path / "a", "mlflow", max_steps=2).train()
        assert (
            client.get_run(parent.info.run_id).info.status == "RUNNING"
        )  # the script's run: the script ends it
        monkeypatch.setenv("MLFLOW_NESTED_RUN", "1")
        make_trainer(digits, tmp_path / "b", "mlflow", max_steps=2).train()
    runs = client.search_runs(["0"])
    assert len(runs) == 2
    child = next(r for r in runs if r.info.run_id != parent.info.run_id)
    assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert "loss" in client.get_run(parent.info.run_id).data.metrics


def test_hf_mlflow_log_artifacts_uploads_each_checkpoint(digits, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_MLFLOW_LOG_ARTIFACTS", "TRUE")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "ported")
    out = tmp_path / "out"
    trainer = make_trainer(digits, out, "mlflow", save_strategy="steps", save_steps=4)
    trainer.train()
    callback = next(cb for cb in trainer.callback_handler.callbacks if isinstance(cb, MLflowCallback))
    client = callback._client()
    assert sorted(a.path for a in client.list_artifacts(callback.run_id)) == ["checkpoint-4", "checkpoint-8"]
    files = {a.path for a in client.list_artifacts(callback.run_id, "checkpoint-8")}
    assert "checkpoint-8/model.safetensors" in files
    assert (out / "mlruns" / "artifacts").is_dir()  # beside the local store, not in the working directory


def test_disable_mlflow_integration(digits, tmp_path, monkeypatch):
    monkeypatch.setenv("DISABLE_MLFLOW_INTEGRATION", "TRUE")
    with pytest.raises(ValueError, match="DISABLE_MLFLOW_INTEGRATION='TRUE' switches MLflow off"):
        make_trainer(digits, tmp_path / "out", "mlflow")
    trainer = make_trainer(digits, tmp_path / "out", "all")
    assert not any(isinstance(cb, MLflowCallback) for cb in trainer.callback_handler.callbacks)


@pytest.mark.parametrize("setting", ["checkpoint", "end"])
def test_wandb_log_model_offline(digits, tmp_path, monkeypatch, setting):
    monkeypatch.setenv("WANDB_LOG_MODEL", setting)
    out = tmp_path / "out"
    make_trainer(digits, out, "wandb", save_strategy="steps", save_steps=4).train()
    [run] = readers.read_wandb(str(out))
    artifacts = run.raw.get("artifacts", [])
    assert all(a["type"] == "model" and a["name"].startswith("model-") for a in artifacts)
    if setting == "checkpoint":
        steps = [
            next(alias for alias in a["aliases"] if alias.startswith("checkpoint_global_step_"))
            for a in artifacts
        ]
        assert steps == [f"checkpoint_global_step_{s}" for s in (4, 8)]
        assert all("trainer_state.json" in a["files"] for a in artifacts)
    else:
        assert len(artifacts) == 1 and "final" in artifacts[0]["aliases"]
        assert "model.safetensors" in artifacts[0]["files"]


def test_a_malformed_wandb_log_model_fails_when_the_trainer_is_built(digits, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_LOG_MODEL", "sometimes")
    with pytest.raises(ValueError, match="WANDB_LOG_MODEL='sometimes' is not one of"):
        make_trainer(digits, tmp_path / "out", "wandb")


@pytest.mark.parametrize(
    ("report_to", "key", "needle"),
    [
        ("wandb", "WANDB_API_KEY", "W&B logs only on this machine"),
        ("mlflow", "MLFLOW_TRACKING_TOKEN", "MLflow logs only on this machine"),
        ("comet_ml", "COMET_API_KEY", "Comet logs only on this machine"),
        ("neptune", "NEPTUNE_API_TOKEN", "Neptune logs only on this machine"),
        ("clearml", "CLEARML_API_ACCESS_KEY", "ClearML logs only on this machine"),
    ],
)
def test_a_script_with_an_api_key_is_told_where_the_tracker_logs(
    digits, tmp_path, monkeypatch, caplog, report_to, key, needle
):
    trainer = make_trainer(digits, tmp_path / "quiet", report_to, max_steps=2)
    with caplog.at_level(logging.INFO, logger="trainer.integrations"):
        trainer.train()
    said = [r for r in caplog.records if needle in r.getMessage()]
    assert [r.levelno for r in said] == [logging.INFO]  # no key: said, not warned
    caplog.clear()
    monkeypatch.setenv(key, "x" * 40)
    trainer = make_trainer(digits, tmp_path / "keyed", report_to, max_steps=2)
    with caplog.at_level(logging.INFO, logger="trainer.integrations"):
        trainer.train()
    warned = [r for r in caplog.records if needle in r.getMessage()]
    assert [r.levelno for r in warned] == [logging.WARNING]
    assert f"{key} is set, but nothing is uploaded" in warned[0].getMessage()
    assert "x" * 40 not in warned[0].getMessage()


def test_a_model_upload_variable_this_trainer_does_not_read_is_warned_about(
    digits, tmp_path, monkeypatch, caplog
):
    monkeypatch.setenv("HF_DVCLIVE_LOG_MODEL", "true")
    trainer = make_trainer(digits, tmp_path / "out", "dvclive", max_steps=2)
    with caplog.at_level(logging.WARNING, logger="trainer.integrations"):
        trainer.train()
    assert any(
        "HF_DVCLIVE_LOG_MODEL=true asks dvclive to upload the model" in r.getMessage() for r in caplog.records
    )
