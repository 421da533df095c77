"""Logging integrations chosen by ``TrainingArguments.report_to``: TensorBoard, MLflow and a JSON-lines file.

Each integration is a `TrainerCallback` that imports its library only when it first writes, so choosing
``report_to="none"`` (or never training) costs nothing, and ``import trainer`` never pulls in TensorBoard or
MLflow. Only the world main process writes. ``report_to`` is ``"none"``, ``"all"`` (the JSON-lines file plus
every integration whose library is installed) or a list of names; a library named explicitly but not
installed is an ImportError carrying the install command.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import os
import re
import threading
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._callbacks import TrainerCallback, TrainerState

if TYPE_CHECKING:
    from ._training_args import TrainingArguments

__all__ = [
    "INTEGRATIONS",
    "JsonlCallback",
    "MLflowCallback",
    "TensorBoardCallback",
    "get_available_reporting_integrations",
    "get_reporting_integration_callbacks",
    "is_mlflow_available",
    "is_tensorboard_available",
]

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------- availability
def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken or half-installed package
        return False


def is_tensorboard_available() -> bool:
    """Whether the ``tensorboard`` package (needed by ``torch.utils.tensorboard``) is installed."""
    return _installed("tensorboard")


def is_mlflow_available() -> bool:
    return _installed("mlflow")


def _scalar(value: Any) -> float | None:
    """``value`` as a float when it is a real number (numpy/torch scalars included), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        try:
            item = value.item()
        except (TypeError, ValueError, RuntimeError):
            return None
        return float(item) if isinstance(item, int | float) and not isinstance(item, bool) else None
    return None


def _numeric_logs(logs: Mapping[str, Any], owner: TrainerCallback) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in logs.items():
        number = _scalar(value)
        if number is None:
            warned: set[str] = owner.__dict__.setdefault("_warned_keys", set())
            if key not in warned:
                warned.add(key)
                logger.warning(
                    "%s logs numbers only; %r=%r (a %s) is not logged.",
                    type(owner).__name__, key, value, type(value).__name__,
                )
            continue
        out[key] = number
    return out


# ---------------------------------------------------------------------------------------------- jsonl
class JsonlCallback(TrainerCallback):
    """Appends every log line (the dicts of ``state.log_history``) to ``output_dir/log_history.jsonl``.

    The file mirrors the run's ``log_history``: when training begins it is rewritten from ``state.log_history``
    (empty for a fresh run, the checkpoint's history after a resume, so lines logged after the last checkpoint
    of an interrupted run are not duplicated), then each log appends one JSON object per line.
    """

    file_name = "log_history.jsonl"

    def _path(self, args: TrainingArguments) -> str:
        return os.path.join(args.output_dir, self.file_name)

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        os.makedirs(args.output_dir, exist_ok=True)
        path = self._path(args)
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            for entry in state.log_history:
                f.write(_json_line(entry))
        os.replace(tmp, path)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or logs is None:
            return
        os.makedirs(args.output_dir, exist_ok=True)
        # The trainer appends {**logs, "step": ...} to log_history just before this event; write that same dict.
        entry = state.log_history[-1] if state.log_history else {**logs, "step": state.global_step}
        with open(self._path(args), "a", encoding="utf-8") as f:
            f.write(_json_line(entry))


def _json_line(entry: Mapping[str, Any]) -> str:
    return json.dumps(dict(entry), default=_json_default, allow_nan=True) + "\n"


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


# ---------------------------------------------------------------------------------------------- tensorboard
class TensorBoardCallback(TrainerCallback):
    """Writes scalars per step to TensorBoard event files under ``args.logging_dir`` (world main process only).

    Keys are grouped as TensorBoard does best: ``eval_loss`` -> ``eval/loss``, ``test_*`` -> ``test/*`` and the
    rest (``loss``, ``learning_rate``, ...) -> ``train/*``. The arguments are written once per writer, as text
    and as hparams. ``tb_writer`` may be a ready ``SummaryWriter`` (then its folder is used as is).
    """

    def __init__(self, tb_writer: Any = None) -> None:
        if not is_tensorboard_available() and tb_writer is None:
            raise ImportError(_install_hint("tensorboard"))
        self.tb_writer = tb_writer
        self._own_writer = tb_writer is None
        self._args_logged = False

    def _init_writer(self, args: TrainingArguments) -> None:
        if self.tb_writer is not None:
            return
        from torch.utils.tensorboard import SummaryWriter

        self.tb_writer = SummaryWriter(log_dir=args.logging_dir)
        self._own_writer = True
        self._args_logged = False

    def _log_args_once(self, args: TrainingArguments, state: TrainerState) -> None:
        if self._args_logged:
            return
        self._args_logged = True
        self.tb_writer.add_text("args", "```json\n" + args.to_json_string() + "```")
        try:
            from torch.utils.tensorboard.summary import hparams

            params = dict(args.to_sanitized_dict())
            for key, value in (state.trial_params or {}).items():
                number = _scalar(value)
                params[f"trial/{key}"] = number if number is not None else str(value)
            exp, ssi, sei = hparams(params, {})
            writer = self.tb_writer._get_file_writer()
            for summary in (exp, ssi, sei):
                writer.add_summary(summary)
        except Exception as error:  # hparams are a convenience; never fail a run over them
            logger.warning("TensorBoard: could not write the hparams summary (%s).", error)

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        self._init_writer(args)
        self._log_args_once(args, state)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        self._init_writer(args)  # evaluate() after train() closed the writer opens a new one
        for key, value in _numeric_logs(logs, self).items():
            self.tb_writer.add_scalar(_tb_tag(key), value, state.global_step)
        self.tb_writer.flush()

    def on_train_end(self, args, state, control, **kwargs):
        if self.tb_writer is not None and self._own_writer:
            self.tb_writer.close()
            self.tb_writer = None

    def __deepcopy__(self, memo: dict[int, Any]) -> TensorBoardCallback:
        # Trials get copies of the callbacks; an open writer (threads, file handles) cannot be copied, nor shared.
        clone = type(self).__new__(type(self))
        clone.__dict__.update(self.__dict__)
        if self._own_writer:
            clone.tb_writer = None
            clone._args_logged = False
        return clone


def _tb_tag(key: str) -> str:
    for prefix in ("eval_", "test_"):
        if key.startswith(prefix):
            return f"{prefix[:-1]}/{key[len(prefix):]}"
    return f"train/{key}"


# ---------------------------------------------------------------------------------------------- mlflow
_SECRET_KEY = re.compile(r"token|secret|passw|api_?key|credential|private_key|auth", re.IGNORECASE)
_MLFLOW_KEY_BAD_CHARS = re.compile(r"[^\w\-. /]")
# One parent run per search (keyed by the search's callback lineage), shared by the trials' copies in-process.
_PARENT_RUNS: dict[tuple[str, str, str], str] = {}
_PARENT_LOCK = threading.Lock()


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


class MLflowCallback(TrainerCallback):
    """Logs a run to MLflow: the arguments as params once, numeric logs as metrics at every step.

    Tracking store: ``MLFLOW_TRACKING_URI`` when set, else a local SQLite store at
    ``output_dir/mlruns/mlflow.db`` (MLflow 3 refuses its plain-file store unless told otherwise, and a
    database file works with every MLflow >= 2). The experiment is ``MLFLOW_EXPERIMENT_NAME`` or MLflow's
    default. The run is named ``args.run_name``; during a hyperparameter search each trial gets a nested run
    (named after the trial) under one parent run named after the ``run_name`` of the trainer the search
    started from. Runs are ended when training ends (a later ``evaluate()`` reopens the run to log into it).
    Parameters whose names look like secrets (token, password, api_key, ...) are never logged; values longer
    than MLflow's limit are truncated.
    """

    def __init__(self) -> None:
        if not is_mlflow_available():
            raise ImportError(_install_hint("mlflow"))
        self._search_key = uuid.uuid4().hex
        self._search_name: str | None = None
        self._tracking_uri: str | None = None
        self._run_id: str | None = None
        self._parent_run_id: str | None = None
        self._active = False

    # ---- setup
    def on_init_end(self, args, state, control, **kwargs):
        # The trainer a search starts from is built before any trial; its run_name names the parent run.
        if self._search_name is None:
            self._search_name = args.run_name or os.path.basename(os.path.abspath(args.output_dir))

    def _client(self, args: TrainingArguments) -> Any:
        from mlflow.tracking import MlflowClient

        if self._tracking_uri is None:
            uri = os.environ.get("MLFLOW_TRACKING_URI")
            if not uri:
                folder = os.path.abspath(os.path.join(args.output_dir, "mlruns"))
                os.makedirs(folder, exist_ok=True)
                uri = "sqlite:///" + os.path.join(folder, "mlflow.db")
            self._tracking_uri = uri
        return MlflowClient(tracking_uri=self._tracking_uri)

    def _experiment_id(self, client: Any, args: TrainingArguments) -> str:
        name = os.environ.get("MLFLOW_EXPERIMENT_NAME")
        if not name:
            experiment = client.get_experiment_by_name("Default")
            return experiment.experiment_id if experiment is not None else "0"
        experiment = client.get_experiment_by_name(name)
        if experiment is not None:
            return experiment.experiment_id
        return client.create_experiment(name)

    def _start(self, args: TrainingArguments, state: TrainerState) -> None:
        client = self._client(args)
        experiment_id = self._experiment_id(client, args)
        tags: dict[str, str] = {}
        run_name = args.run_name or os.path.basename(os.path.abspath(args.output_dir))
        if state.is_hyper_param_search:
            parent_name = self._search_name or run_name
            key = (self._tracking_uri or "", experiment_id, self._search_key)
            with _PARENT_LOCK:
                parent_id = _PARENT_RUNS.get(key)
                if parent_id is None:
                    parent = client.create_run(experiment_id, run_name=parent_name, tags={"hpsearch.role": "search"})
                    parent_id = _PARENT_RUNS[key] = parent.info.run_id
                else:
                    client.update_run(parent_id, status="RUNNING")
            self._parent_run_id = parent_id
            tags["mlflow.parentRunId"] = parent_id
            tags["hpsearch.role"] = "trial"
            run_name = state.trial_name or run_name
        run = client.create_run(experiment_id, run_name=run_name, tags=tags)
        self._run_id = run.info.run_id
        self._active = True
        self._log_params(client, args, state)

    def _log_params(self, client: Any, args: TrainingArguments, state: TrainerState) -> None:
        from mlflow.entities import Param

        max_value, max_key, per_batch = _mlflow_limits()
        params: dict[str, Any] = dict(args.to_dict())
        params.update(state.trial_params or {})
        entries = []
        for key, value in params.items():
            key = _MLFLOW_KEY_BAD_CHARS.sub("_", str(key))[:max_key]
            if _SECRET_KEY.search(key):
                continue
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            if len(text) > max_value:
                logger.debug("MLflow: truncating param %s (%d characters) to %d.", key, len(text), max_value)
                text = text[:max_value]
            entries.append(Param(key, text))
        for start in range(0, len(entries), per_batch):
            client.log_batch(self._run_id, params=entries[start : start + per_batch])

    # ---- events
    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        if self._active:  # train() called again on the same trainer: a new run
            self._end(args)
        self._start(args, state)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        from mlflow.entities import Metric

        if self._run_id is None:  # evaluate() without training: a run of its own
            self._start(args, state)
        client = self._client(args)
        _, max_key, _ = _mlflow_limits()
        now = int(time.time() * 1000)
        metrics = [
            Metric(_MLFLOW_KEY_BAD_CHARS.sub("_", key)[:max_key], value, now, state.global_step)
            for key, value in _numeric_logs(logs, self).items()
            if not math.isinf(value)
        ]
        if metrics:
            client.log_batch(self._run_id, metrics=metrics)

    def on_train_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero and self._active:
            self._end(args)

    def _end(self, args: TrainingArguments) -> None:
        client = self._client(args)
        client.set_terminated(self._run_id)
        if self._parent_run_id is not None:
            # The parent is reopened by the next trial; ending it now leaves nothing RUNNING if the search stops.
            client.set_terminated(self._parent_run_id)
        self._active = False

    @property
    def run_id(self) -> str | None:
        """The MLflow run id of the latest run (None before training)."""
        return self._run_id

    def __deepcopy__(self, memo: dict[int, Any]) -> MLflowCallback:
        # Trial copies share the search lineage (one parent run) but each starts its own run.
        clone = type(self).__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone._run_id = None
        clone._parent_run_id = None
        clone._active = False
        clone._tracking_uri = None
        return clone


# ---------------------------------------------------------------------------------------------- selection
INTEGRATIONS: dict[str, type[TrainerCallback]] = {
    "jsonl": JsonlCallback,
    "tensorboard": TensorBoardCallback,
    "mlflow": MLflowCallback,
}
_AVAILABLE = {"jsonl": lambda: True, "tensorboard": is_tensorboard_available, "mlflow": is_mlflow_available}


def _install_hint(name: str) -> str:
    return (
        f"report_to includes {name!r} but the {name} package is not installed; run "
        f"`pip install 'hpsearch[{name}]'` or remove {name!r} from report_to."
    )


def get_available_reporting_integrations() -> list[str]:
    """Names of the integrations usable here (``"jsonl"`` always, the others when their library is installed)."""
    return [name for name, available in _AVAILABLE.items() if available()]


def get_reporting_integration_callbacks(report_to: str | list[str] | None) -> list[type[TrainerCallback]]:
    """The callback classes for ``report_to`` (``"none"``/None/[] -> none, ``"all"`` -> every available one).

    Raises ValueError for an unknown name and ImportError (with the install command) for a named integration
    whose library is missing.
    """
    if report_to is None:
        names: list[str] = []
    elif isinstance(report_to, str):
        names = [report_to]
    else:
        names = list(report_to)
    names = [str(n).strip().lower() for n in names]
    if names in (["none"], []):
        return []
    if names == ["all"]:
        return [INTEGRATIONS[name] for name in get_available_reporting_integrations()]
    unknown = [n for n in names if n not in INTEGRATIONS]
    if unknown:
        raise ValueError(
            f"report_to={report_to!r} names unknown integrations {unknown}; use 'all', 'none' or a list of "
            f"{sorted(INTEGRATIONS)}."
        )
    for name in names:
        if not _AVAILABLE[name]():
            raise ImportError(_install_hint(name))
    return [INTEGRATIONS[name] for name in dict.fromkeys(names)]
