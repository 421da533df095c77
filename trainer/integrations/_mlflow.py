"""MLflow: a run per training, nested under one parent run per hyperparameter search."""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._callbacks import TrainerState
from ..redact import is_secret_name, redact
from . import _base
from ._base import TrackerCallback, numeric_logs

if TYPE_CHECKING:
    from .._training_args import TrainingArguments

logger = logging.getLogger(__name__)

_MLFLOW_KEY_BAD_CHARS = re.compile(r"[^\w\-. /]")
# One parent run per search (keyed by the search's callback lineage), shared by the trials' copies in-process.
_PARENT_RUNS: dict[tuple[str, str, str], str] = {}
_PARENT_LOCK = threading.Lock()
# The MLflow run status of each final state.
_STATUS = {"COMPLETE": "FINISHED", "PRUNED": "KILLED", "FAIL": "FAILED"}


_TRUE = ("1", "TRUE", "YES", "ON")


def _env_true(name: str) -> bool:
    return os.environ.get(name, "FALSE").strip().upper() in _TRUE


def is_mlflow_available() -> bool:
    """mlflow installed and not switched off by ``DISABLE_MLFLOW_INTEGRATION`` (as transformers reads it)."""
    return _base._installed("mlflow") and not _env_true(
        "DISABLE_MLFLOW_INTEGRATION"
    )  # looked up at call time


def _env_tags() -> dict[str, str]:
    """``MLFLOW_TAGS``: a JSON object of tags set on every run, as transformers reads it."""
    text = os.environ.get("MLFLOW_TAGS")
    if not text:
        return {}
    try:
        tags = json.loads(text)
    except ValueError:
        tags = None
    if not isinstance(tags, dict):
        raise ValueError(
            f'MLFLOW_TAGS={text!r} is not a JSON object; set it to e.g. \'{{"release": "rc1"}}\' or unset it.'
        )
    return {str(k): str(v) for k, v in tags.items()}


def _flatten(params: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts as ``outer.inner`` keys (``MLFLOW_FLATTEN_PARAMS``, transformers' flatten_dict)."""
    flat: dict[str, Any] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def _active_fluent_run() -> Any:
    """The run the script started with ``mlflow.start_run()`` (only looked for when it imported mlflow)."""
    import sys

    module = sys.modules.get("mlflow")
    return module.active_run() if module is not None else None


def _mlflow_limits() -> tuple[int, int, int]:
    """(longest param value, longest key, params per batch) of the installed mlflow, with safe fallbacks."""
    try:
        from mlflow.utils import validation
    except ImportError:  # pragma: no cover - mlflow is there when this runs
        return 500, 250, 100
    return (
        int(getattr(validation, "MAX_PARAM_VAL_LENGTH", 500)),
        int(getattr(validation, "MAX_ENTITY_KEY_LENGTH", 250)),
        int(getattr(validation, "MAX_PARAMS_TAGS_PER_BATCH", 100)),
    )


class MLflowCallback(TrackerCallback):
    """Logs a run to MLflow: the arguments as params once, numeric logs as metrics at every step.

    Environment as transformers reads it: ``MLFLOW_RUN_ID`` (log into that run), ``MLFLOW_NESTED_RUN`` (a run
    under the script's active ``mlflow.start_run()``; without it that active run is logged into, as transformers),
    ``MLFLOW_TAGS`` (a JSON object of tags), ``MLFLOW_FLATTEN_PARAMS`` (nested dict arguments as ``a.b`` params),
    ``HF_MLFLOW_LOG_ARTIFACTS`` (each saved checkpoint's files uploaded as artifacts ``checkpoint-<step>``),
    ``DISABLE_MLFLOW_INTEGRATION`` (``report_to="all"`` skips MLflow; naming it is refused).

    Tracking store: ``MLFLOW_TRACKING_URI`` when set (an active fluent run: mlflow's current URI), else a local SQLite store at
    ``output_dir/mlruns/mlflow.db`` (during a search, in the ``output_dir`` of the trainer the search started from,
    so that every trial's run is in one store under one parent run; MLflow 3 refuses its plain-file store unless told otherwise, and a
    database file works with every MLflow >= 2). The experiment is ``MLFLOW_EXPERIMENT_NAME`` or MLflow's
    default. The run is named ``args.run_name``; during a hyperparameter search each trial gets a nested run
    (named after the trial) under one parent run named after the ``run_name`` of the trainer the search
    started from. Runs are ended when training ends (a later ``evaluate()`` reopens the run to log into it);
    `close` then records the trial's final state (tag ``hpsearch.state``; status FINISHED, KILLED for a pruned
    trial, FAILED) and its objective (metric ``objective``). Parameters whose names look like secrets (token,
    password, api_key, ...) are never logged; values longer than MLflow's limit are truncated.
    """

    name = "mlflow"
    module = "mlflow"
    extra = "mlflow"

    @classmethod
    def is_available(cls) -> bool:
        return is_mlflow_available()  # report_to="all" leaves it out when DISABLE_MLFLOW_INTEGRATION is set

    @staticmethod
    def disabled_reason() -> str | None:
        if not _env_true("DISABLE_MLFLOW_INTEGRATION"):
            return None
        return (
            f"report_to names 'mlflow' but DISABLE_MLFLOW_INTEGRATION={os.environ['DISABLE_MLFLOW_INTEGRATION']!r} "
            "switches MLflow off; unset the variable or remove 'mlflow' from report_to."
        )

    def __init__(self) -> None:
        reason = self.disabled_reason()
        if reason:
            raise ValueError(reason)
        self._tags = _env_tags()  # a malformed MLFLOW_TAGS fails here, before training
        self._owns_run = True
        super().__init__()
        self._search_key = uuid.uuid4().hex
        self._search_name: str | None = None
        self._search_dir: str | None = None
        self._tracking_uri: str | None = None
        self._run_id: str | None = None
        self._parent_run_id: str | None = None
        self._active = False

    # ---- setup
    def on_init_end(self, args, state, control, **kwargs):
        # The trainer a search starts from is built before any trial; its run_name names the parent run.
        if self._search_name is None:
            self._search_name = args.run_name or os.path.basename(os.path.abspath(args.output_dir))
        if self._search_dir is None:  # its output_dir holds the search's store, shared by every trial
            self._search_dir = args.output_dir

    def _client(self, args: TrainingArguments | None = None) -> Any:
        from mlflow.tracking import MlflowClient

        if self._tracking_uri is None:
            assert args is not None
            uri = os.environ.get("MLFLOW_TRACKING_URI")
            if not uri and _active_fluent_run() is not None:
                import mlflow

                uri = mlflow.get_tracking_uri()  # the store of the script's own run
            if not uri:
                owner = self._search_dir if self._search and self._search_dir else args.output_dir
                folder = os.path.abspath(os.path.join(owner, "mlruns"))
                os.makedirs(folder, exist_ok=True)
                uri = "sqlite:///" + os.path.join(folder, "mlflow.db")
                _base.announce_destination(
                    "MLflow",
                    f"a local store, {uri}",
                    "set MLFLOW_TRACKING_URI to log to a tracking server",
                    (
                        "MLFLOW_TRACKING_TOKEN",
                        "MLFLOW_TRACKING_USERNAME",
                        "DATABRICKS_TOKEN",
                        "DATABRICKS_HOST",
                    ),
                )
            self._tracking_uri = uri
        return MlflowClient(tracking_uri=self._tracking_uri)

    def _experiment_id(self, client: Any) -> str:
        name = os.environ.get("MLFLOW_EXPERIMENT_NAME")
        if not name:
            experiment = client.get_experiment_by_name("Default")
            return experiment.experiment_id if experiment is not None else "0"
        experiment = client.get_experiment_by_name(name)
        if experiment is not None:
            return experiment.experiment_id
        local = self._tracking_uri or ""
        if local.startswith("sqlite:///") and not os.environ.get("MLFLOW_TRACKING_URI"):
            # Artifacts beside our local store, not in mlflow's default ./mlruns of the working directory.
            folder = os.path.join(os.path.dirname(local[len("sqlite:///") :]), "artifacts")
            return client.create_experiment(name, artifact_location=Path(folder).as_uri())
        return client.create_experiment(name)

    def _open(self, args: TrainingArguments, state: TrainerState) -> None:
        client = self._client(args)
        existing = os.environ.get("MLFLOW_RUN_ID") or None
        active = _active_fluent_run()
        nested = _env_true("MLFLOW_NESTED_RUN")
        if existing is None and active is not None and not nested and not state.is_hyper_param_search:
            existing = active.info.run_id  # transformers logs into the script's active run
            self._owns_run = False
        if existing is not None and not state.is_hyper_param_search:
            client.update_run(existing, status="RUNNING")
            self._run_id = existing
            self._active = True
            self._set_tags(client, self._tags)
            self._log_params(client, args, state)
            return
        self._owns_run = True
        experiment_id = self._experiment_id(client)
        tags: dict[str, str] = dict(self._tags)
        if nested and active is not None:
            tags["mlflow.parentRunId"] = active.info.run_id
        run_name = args.run_name or os.path.basename(os.path.abspath(args.output_dir))
        if state.is_hyper_param_search:
            parent_name = self._search_name or run_name
            key = (self._tracking_uri or "", experiment_id, self._search_key)
            with _PARENT_LOCK:
                parent_id = _PARENT_RUNS.get(key)
                if parent_id is None:
                    parent_tags = {
                        **tags,
                        "hpsearch.role": "search",
                    }  # nested under the script's run, if asked
                    parent = client.create_run(experiment_id, run_name=parent_name, tags=parent_tags)
                    parent_id = _PARENT_RUNS[key] = parent.info.run_id
                else:
                    client.update_run(parent_id, status="RUNNING")
            self._parent_run_id = parent_id
            tags = {**self._tags, "mlflow.parentRunId": parent_id}
            tags["hpsearch.role"] = "trial"
            run_name = state.trial_name or run_name
        run = client.create_run(experiment_id, run_name=run_name, tags=tags)
        self._run_id = run.info.run_id
        self._active = True
        self._log_params(client, args, state)

    def _set_tags(self, client: Any, tags: dict[str, str]) -> None:
        from mlflow.entities import RunTag

        if tags:
            client.log_batch(self._run_id, tags=[RunTag(key, value) for key, value in tags.items()])

    def _log_params(self, client: Any, args: TrainingArguments, state: TrainerState) -> None:
        from mlflow.entities import Param

        max_value, max_key, per_batch = _mlflow_limits()
        params: dict[str, Any] = dict(args.to_dict())
        params.update(state.trial_params or {})
        if _env_true("MLFLOW_FLATTEN_PARAMS"):
            params = _flatten(params)
        entries = []
        for key, value in params.items():
            key = _MLFLOW_KEY_BAD_CHARS.sub("_", str(key))[:max_key]
            if is_secret_name(key):
                continue
            text = redact(value if isinstance(value, str) else json.dumps(value, default=str))
            if len(text) > max_value:
                logger.debug("MLflow: truncating param %s (%d characters) to %d.", key, len(text), max_value)
                text = text[:max_value]
            entries.append(Param(key, text))
        for start in range(0, len(entries), per_batch):
            client.log_batch(self._run_id, params=entries[start : start + per_batch])

    def _log(self, metrics: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        _, max_key, _ = _mlflow_limits()
        now = int(time.time() * 1000)
        entries = [
            Metric(_MLFLOW_KEY_BAD_CHARS.sub("_", key)[:max_key], value, now, step)
            for key, value in metrics.items()
            if not math.isinf(value)
        ]
        if entries:
            self._client().log_batch(self._run_id, metrics=entries)

    def _end(self, status: str = "FINISHED") -> None:
        client = self._client()
        if self._owns_run:  # the script's own active run is the script's to end (as transformers leaves it)
            client.set_terminated(self._run_id, status=status)
        if self._parent_run_id is not None:
            # The parent is reopened by the next trial; ending it now leaves nothing RUNNING if the search stops.
            client.set_terminated(self._parent_run_id)
        self._active = False

    # ---- events: MLflow runs can be reopened, so a run ends with every training and `close` amends it.
    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        if self._active:  # train() called again on the same trainer: a new run
            self._guard("ending the run", self._end)
        if self._open_run:  # a search's run that nobody closed: it ended with its training
            self.close("COMPLETE" if self._trained else "FAIL")
        self._failed_open = False
        self._run_id = None
        self._start(args, state)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs or self._failed_open:
            return
        if self._run_id is None:  # evaluate() without training: a run of its own
            self._start(args, state)
            if self._run_id is None:
                return
        metrics = numeric_logs(logs, self)
        if metrics:
            self._guard("logging metrics", self._log, metrics, state.global_step)

    def on_save(self, args, state, control, **kwargs):
        if state.is_world_process_zero and self._active and _env_true("HF_MLFLOW_LOG_ARTIFACTS"):
            self._guard("uploading the checkpoint", self._log_checkpoint, args, state)

    def _log_checkpoint(self, args: TrainingArguments, state: TrainerState) -> None:
        """``HF_MLFLOW_LOG_ARTIFACTS``: the checkpoint's files as the run's artifacts ``checkpoint-<step>``
        (transformers wraps them in a pyfunc model; the files are the same)."""
        name = f"checkpoint-{state.global_step}"
        folder = os.path.join(args.output_dir, name)
        logger.info("MLflow: uploading %s as artifacts of run %s.", folder, self._run_id)
        self._client().log_artifacts(self._run_id, folder, artifact_path=name)

    def on_train_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero and self._active:
            self._trained = True
            self._guard("ending the run", self._end)
            if not self._search:
                self._forget()  # outside a search nobody amends the run

    def close(self, state: str = "COMPLETE", objective: Any = None) -> None:
        """Record the final state and objective on the latest run (reopened if needed) and end it."""
        if self._run_id is None:
            return
        super().close(state, objective)

    def _finish(self, final_state: str, objective: float | list[float] | None) -> None:
        client = self._client()
        client.set_tag(self._run_id, "hpsearch.state", final_state)
        values = objective if isinstance(objective, list) else [objective] if objective is not None else []
        for index, value in enumerate(values):
            key = "objective" if len(values) == 1 else f"objective_{index}"
            client.log_metric(self._run_id, key, value)
        self._end(_STATUS[final_state])

    @property
    def run_id(self) -> str | None:
        """The MLflow run id of the latest run (None before training)."""
        return self._run_id

    def _run_attributes(self) -> tuple[str, ...]:
        return ("_run_id", "_parent_run_id", "_tracking_uri")

    def __deepcopy__(self, memo: dict[int, Any]) -> MLflowCallback:
        # Trial copies share the search lineage (one parent run) but each starts its own run.
        clone = super().__deepcopy__(memo)
        assert isinstance(clone, MLflowCallback)
        clone._active = False
        return clone
