"""A driver process for the reliability tests, killed (SIGKILL) and rerun by them.

    python -m tests.hpsearch._sweep_worker sweep CONFIG_JSON       an Optuna sweep on the digits MLP
    python -m tests.hpsearch._sweep_worker sigopt CONFIG_JSON      a SigOpt (lite) sweep with resume=True, idem
    python -m tests.hpsearch._sweep_worker checkpoint CONFIG_JSON  a training run that saves checkpoints
    python -m tests.hpsearch._sweep_worker ray CONFIG_JSON         a Ray Tune sweep on the digits MLP

Both take ``data``: an ``.npz`` of the digits split (x_train, y_train, x_eval, y_eval) saved by the test.
``sweep`` config: storage, study_name, output_dir, n_trials, max_steps, seed, and optionally ``hold_trial`` (the
trial with that number writes ``<marker_dir>/holding-<number>`` after its first step and then waits to be
killed), ``foreign_owner`` (the trials claim to belong to a driver on another machine, so only Optuna's heartbeat
can tell that this one died), ``heartbeat`` ([interval, grace] in seconds), ``step_sleep`` (seconds per step),
``eval_strategy``/``eval_steps``/``save_strategy``/``save_steps``, ``trial_workers`` (trials in worker processes)
and ``max_failed_trials``. Every trial start is marked with ``<marker_dir>/started-<number>-<driver pid>`` (the file holds the pid of the
process that trains it: the driver, or its worker), every trial trained to its last step with
``<marker_dir>/completed-<run name>-<driver pid>``.

``sigopt`` config: output_dir, n_trials, max_steps, marker_dir, step_sleep and the evaluation/save settings as for
``sweep``, and ``observations``: where to write, once the search ends, the observations of the experiment this
process's search ended with (SigOpt's own store: lite keeps it in the search's connection, which the worker takes
from the adapter as it is made) as JSON ``[{"assignments": {...}, "values": [...], "failed": bool}]``.

``ray`` config: address (a running cluster; this process needs its token), output_dir, n_trials, max_steps,
max_concurrent_trials, resume, marker_dir, step_sleep and the eval/save options above; trials mark their starts and
completions with `tests.hpsearch._ray_cluster.TrialMarkers` (``<marker_dir>/started@<run>@<driver pid>@<pid>``,
``completed@...``).

``checkpoint`` config: output_dir, max_steps, save_steps, resume, and ``kill_at_save`` (the process kills itself
with SIGKILL inside the n-th checkpoint save, after the files are written and before the folder is published).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from trainer import TrainerCallback  # noqa: E402 - once the path holds this checkout


def _datasets(config: dict):
    """The digits split, from the arrays the test saved (``data``), so the worker does not import scikit-learn."""
    from tests._digits import DigitsDataset, digits_datasets

    if "data" not in config:
        return digits_datasets()
    import numpy as np

    with np.load(config["data"]) as arrays:
        return (
            DigitsDataset(arrays["x_train"], arrays["y_train"]),
            DigitsDataset(arrays["x_eval"], arrays["y_eval"]),
        )


def _trainer(config: dict, output_dir: str, model_init, callbacks=()):
    from trainer import Trainer, TrainingArguments

    train, evaluation = _datasets(config)
    args = TrainingArguments(
        output_dir=output_dir,
        max_steps=config["max_steps"],
        per_device_train_batch_size=32,
        per_device_eval_batch_size=512,
        eval_strategy=config.get("eval_strategy", "no"),
        eval_steps=config.get("eval_steps"),
        save_strategy=config.get("save_strategy", "no"),
        save_steps=config.get("save_steps", 500),
        logging_strategy="no",
        disable_tqdm=True,
        report_to="none",
        seed=config.get("seed", 0),
        dataloader_num_workers=0,
    )
    return Trainer(
        model_init=model_init,
        args=args,
        train_dataset=train,
        eval_dataset=evaluation,
        callbacks=list(callbacks),
    )


def _space() -> dict:
    """The space of both sweeps."""
    import spaces

    return {
        "learning_rate": spaces.Float(1e-3, 1e-1, log=True),
        "hidden": spaces.Categorical([8, 16, 32, 64]),
    }


def _driver_pid() -> int:
    """The search's driver: this process, or the parent of a trial worker process (``trial_workers``)."""
    import multiprocessing

    parent = multiprocessing.parent_process()
    return parent.pid if parent is not None and parent.pid is not None else os.getpid()


class _MarkedModelInit:
    """The digits MLP, marking each trial's start with ``started-<number>-<driver pid>`` (holding the pid of the
    process that trains it). A class at module level: a worker process unpickles it."""

    def __init__(self, markers: str) -> None:
        self.markers = markers

    def __call__(self, trial=None):
        from tests._digits import DigitsMLP

        if trial is not None:
            marker = Path(self.markers) / f"started-{trial.number}-{_driver_pid()}"
            marker.write_text(str(os.getpid()))
        return DigitsMLP(hidden=trial["hidden"] if trial is not None else 32)


class _Marks(TrainerCallback):
    """Marks a trial trained to its last step (``completed-<run name>-<driver pid>``); sleeps ``step_sleep`` per
    step; holds trial ``hold_trial`` after its first step until the test kills this process."""

    def __init__(self, markers: str, step_sleep: float, hold: int | None) -> None:
        self.markers, self.step_sleep, self.hold = Path(markers), step_sleep, hold

    def on_train_end(self, args, state, control, **kwargs):
        if state.global_step >= state.max_steps:  # trained to completion (not stopped, not killed)
            (self.markers / f"completed-{args.run_name}-{_driver_pid()}").touch()

    def on_step_end(self, args, state, control, **kwargs):
        if self.step_sleep:
            time.sleep(self.step_sleep)
        if self.hold is not None and args.run_name == f"run-{self.hold}":
            (self.markers / f"holding-{self.hold}").touch()
            while True:  # mid-trial, until the test kills this process
                time.sleep(0.5)


def _marked_trainer(config: dict):
    """The digits trainer whose trials leave started-/completed- markers (and may hold or sleep, see above)."""
    return _trainer(
        config,
        config["output_dir"],
        _MarkedModelInit(config["marker_dir"]),
        [_Marks(config["marker_dir"], config.get("step_sleep", 0.0), config.get("hold_trial"))],
    )


def sweep(config: dict) -> None:
    import optuna

    import hpsearch
    import hpsearch.backends.optuna._storage as optuna_storage

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if config.get("heartbeat"):
        optuna_storage.HEARTBEAT_INTERVAL, optuna_storage.GRACE_PERIOD = config["heartbeat"]
    if config.get("foreign_owner"):
        optuna_storage.owner = lambda: "another-machine:1"
    hpsearch.hyperparameter_search(
        _marked_trainer(config),
        hp_space=_space(),
        compute_objective="eval_loss",
        n_trials=config["n_trials"],
        backend="optuna",
        storage=config["storage"],
        study_name=config["study_name"],
        load_if_exists=True,
        sampler=optuna.samplers.RandomSampler(seed=config.get("seed", 0) + os.getpid()),
        trial_workers=config.get("trial_workers"),
        **({"max_failed_trials": config["max_failed_trials"]} if "max_failed_trials" in config else {}),
    )


def sigopt(config: dict) -> None:
    import logging

    import hpsearch
    from hpsearch.backends.sigopt import SigOptBackend

    logging.basicConfig(format="%(name)s %(levelname)s %(message)s")
    logging.getLogger("hpsearch.backends.sigopt").setLevel(logging.INFO)  # the resume line, for the log

    # lite keeps its experiment in the Connection that created it (one store per Connection, none on disk): keep
    # the connections the adapter makes, to read the experiment's observations once the search is over.
    connections = []
    connect = SigOptBackend._connect

    def keeping_connect(adapter):
        conn = connect(adapter)
        connections.append(conn)
        return conn

    SigOptBackend._connect = keeping_connect
    best = hpsearch.hyperparameter_search(
        _marked_trainer(config),
        hp_space=_space(),
        compute_objective="eval_loss",
        n_trials=config["n_trials"],
        backend="sigopt",
        driver="lite",
        resume=True,
    )
    experiment = best.run_summary.native
    # The last connection made is run()'s, the one holding the experiment (validate() only checks the driver).
    observations = connections[-1].experiments(experiment.id).observations().fetch().iterate_pages()
    dumped = [
        {
            "assignments": dict(o.assignments),
            "values": [v.value for v in o.values or []],
            "failed": bool(o.failed),
        }
        for o in observations
    ]
    Path(config["observations"]).write_text(json.dumps(dumped), encoding="utf-8")


def ray_sweep(config: dict) -> None:
    import logging

    import hpsearch
    import spaces
    from examples.digits.model import model_init
    from tests.hpsearch._ray_cluster import TrialMarkers

    logging.basicConfig(format="%(name)s %(levelname)s: %(message)s")
    logging.getLogger("hpsearch").setLevel(logging.INFO)  # the test reads what the search says it did
    markers = TrialMarkers(config["marker_dir"], os.getpid(), config.get("step_sleep", 0.0))
    trainer = _trainer(config, config["output_dir"], model_init, [markers])
    hpsearch.hyperparameter_search(
        trainer,
        hp_space={
            "learning_rate": spaces.Float(1e-3, 1e-1, log=True),
            "hidden": spaces.Categorical([8, 16, 32, 64]),
        },
        compute_objective="eval_loss",
        n_trials=config["n_trials"],
        backend="ray",
        address=config["address"],
        max_concurrent_trials=config.get("max_concurrent_trials", 2),
        resume=config.get("resume", False),
    )


def checkpoint(config: dict) -> None:
    import trainer._checkpoint as ckpt
    from tests._digits import DigitsMLP

    kill_at = config.get("kill_at_save")
    saves = []
    original = ckpt._before_checkpoint_rename

    def before_rename(tmp_folder: str) -> None:
        original(tmp_folder)
        saves.append(tmp_folder)
        if kill_at is not None and len(saves) == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)  # the files are written, the folder is not yet published

    ckpt._before_checkpoint_rename = before_rename
    config = {**config, "save_strategy": "steps"}
    trainer = _trainer(config, config["output_dir"], lambda: DigitsMLP(hidden=16))
    trainer.train(resume_from_checkpoint=True if config.get("resume") else None)


if __name__ == "__main__":
    mode, config_json = sys.argv[1], sys.argv[2]
    {"sweep": sweep, "sigopt": sigopt, "checkpoint": checkpoint, "ray": ray_sweep}[mode](
        json.loads(config_json)
    )
