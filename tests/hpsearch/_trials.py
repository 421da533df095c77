"""What the tests' trials run, in an importable module so that Ray pickles it by reference for its workers.

Everything here must work in another process: behaviour is keyed on the `Trial` a model_init receives (its
``number``) or on marker files, never on test-process state. The digits task is the one of `tests._digits`.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping
from typing import Any

from hpsearch.trial import TrialReporter
from tests._digits import DigitsMLP
from trainer import TrainerCallback

#: Steps per epoch of the digits training split at batch size 64 (1,437 examples).
STEPS_PER_EPOCH = 23

#: Arguments of the tests' tiny trials: 6 steps of batch 64, evaluated every 2 steps, nothing saved by default.
TINY_ARGS: dict[str, Any] = {
    "max_steps": 6,
    "per_device_train_batch_size": 64,
    "per_device_eval_batch_size": 512,
    "learning_rate": 1e-2,
    "eval_strategy": "steps",
    "eval_steps": 2,
    "save_strategy": "no",
    "logging_strategy": "no",
    "disable_tqdm": True,
    "report_to": "none",
    "skip_memory_metrics": True,
}


def digits_search_trainer(
    output_dir: str, model_init: Any = None, callbacks: Any = (), **overrides: Any
) -> Any:
    """A digits `Trainer` for a search: `TINY_ARGS` with ``overrides``, ``model_init`` (default: `model_init`)."""
    from tests._digits import digits_trainer

    return digits_trainer(
        output_dir,
        model_init if model_init is not None else globals()["model_init"],
        callbacks=callbacks,
        **{**TINY_ARGS, **overrides},
    )


def model_init(trial: Any = None) -> DigitsMLP:
    """The MLP shaped by the trial's ``hidden`` (16 outside a search or when the space has no ``hidden``)."""
    hidden = trial["hidden"] if trial is not None and "hidden" in trial else 16
    return DigitsMLP(hidden=int(hidden))


def peaked(metrics: Mapping[str, float]) -> float:
    """An objective with its maximum at step 4 of a tiny trial: -|step - 4| (steps 2, 4, 6 give -2, 0, -2).

    Deterministic, so that 'last', 'best' and the averages of a trial's evaluations are all different."""
    return -abs(metrics["epoch"] * STEPS_PER_EPOCH - 4.0)


def loss_and_accuracy(metrics: Mapping[str, float]) -> tuple[float, float]:
    """Two objectives: the evaluation loss (minimize) and accuracy (maximize)."""
    return metrics["eval_loss"], metrics["eval_accuracy"]


def dict_hp_name(params: Mapping[str, Any]) -> str:
    """transformers' dict-taking ``hp_name`` form."""
    return "-".join(f"{k}={v}" for k, v in sorted(params.items()))


def attr_hp_name(trial: Any) -> str:
    """The attribute form of ``hp_name``."""
    return f"t{trial.number}"


def slash_hp_name(trial: Any) -> str:
    """An ``hp_name`` that gives no folder name (a path)."""
    return f"runs/{trial.number}"


def results_file_hp_name(trial: Any) -> str:
    """An ``hp_name`` that names the search's own results file (its folder would take search.json's place)."""
    return "search.json"


def long_hp_name(trial: Any) -> str:
    """An ``hp_name`` longer than a folder name may be (256 bytes in UTF-8, 128 characters)."""
    return "é" * 128


def surrogate_hp_name(trial: Any) -> str:
    """An ``hp_name`` with a lone surrogate: no file name or JSON file can be written from it in UTF-8."""
    return f"run-\udc80-{trial.number}"


def file_hp_name(trial: Any) -> str:
    """An ``hp_name`` that names a file the user keeps in output_dir (a study's database)."""
    return "study.db"


def folder_hp_name(trial: Any) -> str:
    """An ``hp_name`` that names a folder of the user's in output_dir (their data)."""
    return "data"


def describe_trial(trial: Any) -> dict[str, Any]:
    """What a model_init or hp_name sees of its trial, as JSON."""
    from collections.abc import Mapping as MappingABC

    try:
        trial["__probe__"] = 1
        read_only = False
    except TypeError:
        read_only = True
    return {
        "type": f"{type(trial).__module__}.{type(trial).__qualname__}",
        "is_mapping": isinstance(trial, MappingABC),
        "read_only": read_only,
        "backend": getattr(trial, "backend", None),
        "number": getattr(trial, "number", None),
        "params": dict(trial) if isinstance(trial, MappingABC) else None,
    }


def _append(path: str, entry: dict[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry, default=str) + "\n")


def read_log(path: str) -> list[dict[str, Any]]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


class LoggingModelInit:
    """A model_init that appends what it sees of each trial to ``path`` (one JSON line per call)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, trial: Any) -> DigitsMLP:
        if trial is not None:
            _append(self.path, {"by": "model_init", **describe_trial(trial)})
        return model_init(trial)


class LoggingHpName:
    """An hp_name (attribute form) that appends what it sees to ``path``."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, trial: Any) -> str:
        _append(self.path, {"by": "hp_name", **describe_trial(trial)})
        return f"t{trial.number}"


class ScriptedAbort(BaseException):
    """A BaseException that is neither KeyboardInterrupt nor SystemExit, as a trial's own code may raise one."""


class ScriptedModelInit:
    """A model_init whose trial number ``n`` does ``script[n]`` (default "ok"):

    - "raise": raises ``ValueError("scripted failure of trial n")``;
    - "memory": raises ``MemoryError``;
    - "base": raises `ScriptedAbort` (a BaseException);
    - "nan": returns a model whose weights are all NaN (every loss and objective is NaN);
    - "sleep:<s>": sleeps s seconds first (longer than the trial_timeout of the test).
    """

    def __init__(self, script: Mapping[int, str]) -> None:
        self.script = dict(script)

    def __call__(self, trial: Any) -> DigitsMLP:
        action = self.script.get(trial.number, "ok") if trial is not None else "ok"
        if action == "raise":
            raise ValueError(f"scripted failure of trial {trial.number}")
        if action == "memory":
            raise MemoryError(f"scripted out of memory in trial {trial.number}")
        if action == "base":
            raise ScriptedAbort(f"scripted BaseException in trial {trial.number}")
        model = model_init(trial)
        if action == "nan":
            import torch

            with torch.no_grad():
                for parameter in model.parameters():
                    parameter.fill_(math.nan)
        elif action.startswith("sleep:"):
            time.sleep(float(action.split(":", 1)[1]))
        return model


#: The scenario of the common options (`hpsearch run` and the API alike): with trial_timeout=TIMEOUT_S,
#: max_failed_trials=2 and objective_scope='best', trial 0 times out, trial 1 completes, trials 2 and 3 raise,
#: and the search stops there (trial 4 never runs).
TIMEOUT_S = 8.0  # far above a tiny trial even on a loaded machine (a Ray trial takes ~2 s)
COMMON_SCRIPT = {0: f"sleep:{TIMEOUT_S + 2}", 2: "raise", 3: "raise", 4: "raise"}


def common_scenario_model_init(trial: Any = None) -> DigitsMLP:
    """`ScriptedModelInit` with `COMMON_SCRIPT`, as a function a sweep file can name."""
    return ScriptedModelInit(COMMON_SCRIPT)(trial)


class CheckConditional:
    """A model_init that fails its trial unless ``momentum`` is present exactly when ``optimizer == 'sgd'``."""

    def __call__(self, trial: Any) -> DigitsMLP:
        if trial is not None and ("momentum" in trial) != (trial["optimizer"] == "sgd"):
            raise AssertionError(
                f"momentum present={'momentum' in trial} with optimizer={trial['optimizer']!r}"
            )
        return model_init(trial)


class SleepInFirstTrial(TrainerCallback):
    """The first trial to evaluate (claimed through ``marker``, created exclusively) sleeps ``seconds`` there."""

    def __init__(self, marker: str, seconds: float) -> None:
        self.marker = marker
        self.seconds = seconds

    def on_evaluate(self, args, state, control, **kwargs):
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.write(fd, args.run_name.encode())
        os.close(fd)
        time.sleep(self.seconds)


class RecordingReporter(TrialReporter):
    """A `TrialReporter` that keeps every report (and whether its checkpoint folder existed then); it asks to prune
    at the first evaluation at or after ``prune_at``."""

    def __init__(self, prune_at: int | None = None) -> None:
        self.prune_at = prune_at
        self.started: Any = None
        self.reports: list[dict[str, Any]] = []

    def start(self, record: Any) -> None:
        self.started = record

    def report(self, objective: Any, step: int, metrics: Mapping[str, float], checkpoint: str | None) -> bool:
        self.reports.append(
            {
                "objective": objective,
                "step": step,
                "metrics": dict(metrics),
                "checkpoint": checkpoint,
                "checkpoint_exists": checkpoint is not None and os.path.isdir(checkpoint),
            }
        )
        return self.prune_at is not None and step >= self.prune_at


def hp_name_failing_trial_3(trial: Any) -> str:
    """An ``hp_name`` that raises for trial 3 (that trial fails before it trains) and names the others ``t<n>``."""
    if trial.number == 3:
        raise RuntimeError("scripted hp_name failure of trial 3")
    return f"t{trial.number}"


#: The trial a test's pruner or scheduler stops at its first evaluation (see `prune_trial_2`).
PRUNED_TRIAL = 2


def prune_trial_2(backend: str) -> dict[str, Any]:
    """The option with which ``backend`` stops trial `PRUNED_TRIAL` at its first evaluation (its own pruner, or a
    Ray scheduler that stops the trial's process), or {} for a backend that prunes nothing."""
    if backend == "optuna":
        import optuna

        class PruneOne(optuna.pruners.BasePruner):
            def prune(self, study: Any, trial: Any) -> bool:
                return trial.number == PRUNED_TRIAL

        return {"pruner": PruneOne()}
    if backend == "ray":
        from ray.tune.schedulers import FIFOScheduler, TrialScheduler

        class StopOne(FIFOScheduler):
            def on_trial_result(self, tune_controller: Any, trial: Any, result: Any) -> str:
                number = int(trial.trial_id.rsplit("_", 1)[1])
                return TrialScheduler.STOP if number == PRUNED_TRIAL else TrialScheduler.CONTINUE

        return {"scheduler": StopOne()}
    return {}
