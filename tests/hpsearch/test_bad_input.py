"""Malformed input is refused before any trial: a message naming the argument, the value and the fix.

Every case below must raise (or make the CLI exit 2) without building a model, without creating
``output_dir`` and without creating the SQLite file of the study. Cases cover `TrainingArguments`, spaces,
`hyperparameter_search` arguments, backend keyword arguments (Optuna, Ray, SigOpt), sweep files and CLI flags.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
import pytest

import hpsearch
import spaces
from hpsearch.cli import main as cli_main
from tests._digits import DigitsMLP, accuracy, digits_datasets
from trainer import Trainer, TrainingArguments

optuna.logging.set_verbosity(optuna.logging.WARNING)

LR = {"learning_rate": spaces.Float(1e-3, 1e-2, log=True)}


@dataclasses.dataclass
class Env:
    tmp_path: Path
    monkeypatch: pytest.MonkeyPatch
    built: list[int]

    @property
    def output_dir(self) -> Path:
        return self.tmp_path / "search"

    @property
    def db(self) -> Path:
        return self.tmp_path / "study.db"

    def trainer(self, takes_trial: bool = True, **overrides: Any) -> Trainer:
        def model_init(trial):
            self.built.append(1)
            return DigitsMLP(hidden=16)

        def model_init_no_trial():
            self.built.append(1)
            return DigitsMLP(hidden=16)

        settings: dict[str, Any] = dict(
            output_dir=str(self.output_dir),
            eval_strategy="epoch",
            save_strategy="no",
            num_train_epochs=1,
            report_to="none",
            disable_tqdm=True,
        )
        settings.update(overrides)
        train, evaluation = digits_datasets()
        trainer = Trainer(
            model_init=model_init if takes_trial else model_init_no_trial,
            args=TrainingArguments(**settings),
            train_dataset=train,
            eval_dataset=evaluation,
            compute_metrics=accuracy,
        )
        self.built.clear()  # the Trainer builds one model up front, as transformers' does; trials come later
        return trainer

    def search(self, trainer: Trainer | None = None, **kwargs: Any) -> Any:
        kwargs.setdefault("hp_space", LR)
        kwargs.setdefault("n_trials", 2)
        kwargs.setdefault("backend", "optuna")
        if kwargs["backend"] == "optuna":
            kwargs.setdefault("storage", f"sqlite:///{self.db}")
            kwargs.setdefault("study_name", "bad-input")
        return hpsearch.hyperparameter_search(trainer or self.trainer(), **kwargs)

    def sweep_file(self, **changes: Any) -> Path:
        """A valid sweep file (its output folder is this env's output_dir) with ``changes`` applied."""
        import yaml

        sweep: dict[str, Any] = {
            "model": "examples.digits.model:model_init",
            "data": "examples.digits.model:datasets",
            "metrics": "examples.digits.model:compute_metrics",
            "objective": "eval_accuracy",
            "direction": "maximize",
            "n_trials": 2,
            "output_dir": "search",
            "training_args": {
                "num_train_epochs": 1,
                "eval_strategy": "epoch",
                "save_strategy": "no",
                "report_to": "none",
            },
            "space": {"learning_rate": {"type": "float", "low": 1e-3, "high": 1e-2, "log": True}},
            "backend": "optuna",
            "backend_options": {"storage": f"sqlite:///{self.db}", "study_name": "bad-input"},
        }
        for key, value in changes.items():
            if value is None:
                sweep.pop(key, None)
            else:
                sweep[key] = value
        path = self.tmp_path / "sweep.yaml"
        path.write_text(yaml.safe_dump(sweep, sort_keys=False))
        return path

    def cli(self, *flags: str, **changes: Any) -> None:
        code = cli_main(["run", str(self.sweep_file(**changes)), "--no-progress", *flags])
        raise CliExit(code)

    def cli_text(self, text: str) -> None:
        """`hpsearch run` on a sweep file of exactly ``text`` (what yaml.safe_dump cannot write: aliases, bytes)."""
        path = self.tmp_path / "raw.yaml"
        path.write_text(text)
        raise CliExit(cli_main(["run", str(path), "--no-progress"]))


class CliExit(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _not_installed(env: Env) -> None:
    real = importlib.util.find_spec
    env.monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a, **k: None if name == "optuna" else real(name, *a, **k)
    )
    env.search()


def _native_space(result: Any) -> Callable[[Any], Any]:
    def hp_space(trial):
        trial.suggest_float("learning_rate", 1e-3, 1e-2)
        return result

    return hp_space


def _raising_space(trial):
    raise KeyError("lerning_rate")


def _exiting_module(env: Env) -> str:
    """A module path whose module calls sys.exit(3) when imported (a script, not a module)."""
    (env.tmp_path / "exiting_script.py").write_text("import sys\nsys.exit(3)\n")
    env.monkeypatch.syspath_prepend(str(env.tmp_path))
    return "exiting_script:datasets"


def _aliased_long_text(env: Env) -> str:
    """A valid sweep file plus one 5,000-character text repeated by 900 aliases (few values, 4.5 MB expanded)."""
    return (
        env.sweep_file().read_text()
        + f'note: &long "{"x" * 5000}"\n'
        + f"notes: [{', '.join(['*long'] * 900)}]\n"
    )


def _dashboard_port_in_use(env: Env) -> None:
    """The dashboard is started after output_dir was created: a port it cannot have leaves no folder behind."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        env.search(backend="random", dashboard=True, dashboard_port=taken.getsockname()[1])


def _results_path_taken(env: Env, name: str) -> None:
    """A folder where the search writes one of its results files is found before any trial, not after the first."""
    taken = env.tmp_path / "taken"
    (taken / name).mkdir(parents=True)
    env.search(env.trainer(output_dir=str(taken)), backend="random")


def _without_train(trainer: Trainer) -> Trainer:
    trainer.train_dataset = None
    return trainer


def _set_args(trainer: Trainer, **values: Any) -> Trainer:
    """Arguments set on the trainer's TrainingArguments after they were built (and validated)."""
    for name, value in values.items():
        setattr(trainer.args, name, value)
    return trainer


def _with_datasets(trainer: Trainer, train: Any = None, evaluation: Any = None) -> Trainer:
    if train is not None:
        trainer.train_dataset = train
    if evaluation is not None:
        trainer.eval_dataset = evaluation
    return trainer


def _second_search_in_same_folder(env: Env, earlier_backend: str = "random", **kwargs: Any) -> None:
    """An earlier search's results in output_dir (written here, not by a search: the check must see them without
    any trial of this test running) are not replaced by a second search that does not continue it."""
    from datetime import datetime, timezone

    from hpsearch import SearchResult, TrialState
    from hpsearch.trial import TrialRecord

    earlier = env.tmp_path / "earlier"
    record = TrialRecord(
        trial_id="0",
        number=0,
        name="run-0",
        state=TrialState.COMPLETE,
        params={"learning_rate": 0.01},
        objective=0.5,
        started=datetime.now(timezone.utc),
    )
    space = spaces.SearchSpace(LR).to_dict()
    SearchResult(earlier_backend, ["minimize"], [record], objective="eval_loss", space=space).save(earlier)
    before = (earlier / "search.json").read_bytes()
    try:
        env.search(env.trainer(output_dir=str(earlier)), **{"backend": "random", **kwargs})
    finally:
        assert (earlier / "search.json").read_bytes() == before  # nothing of the earlier search was touched


# (id, what to run, fragments the message must contain: the argument, the value, the fix)
CASES: list[tuple[str, Callable[[Env], Any], tuple[str, ...]]] = [
    # ------------------------------------------------------------ TrainingArguments
    (
        "args-load-best-strategies",
        lambda e: e.trainer(load_best_model_at_end=True, eval_strategy="epoch", save_strategy="steps"),
        ("load_best_model_at_end", "save_strategy='steps'", "pass save_strategy='epoch'"),
    ),
    (
        "args-eval-strategy",
        lambda e: e.trainer(eval_strategy="sometimes"),
        ("eval_strategy", "'sometimes'", "pass one of"),
    ),
    (
        "args-learning-rate",
        lambda e: e.trainer(learning_rate=-1.0),
        ("learning_rate", "-1.0", "pass 0.0 or more"),
    ),
    (
        "args-batch-size",
        lambda e: e.trainer(per_device_train_batch_size=0),
        ("per_device_train_batch_size", "got 0", "pass 1 or more"),
    ),
    (
        "args-scheduler",
        lambda e: e.trainer(lr_scheduler_type="zigzag"),
        ("lr_scheduler_type", "'zigzag'", "pass one of"),
    ),
    (
        "args-warmup-ratio",
        lambda e: e.trainer(warmup_ratio=1.5),
        ("warmup_ratio", "1.5", "pass a value <= 1.0"),
    ),
    # ------------------------------------------------------------ spaces
    (
        "space-bounds-swapped",
        lambda e: e.search(hp_space={"learning_rate": spaces.Float(1e-2, 1e-3)}),
        ("low must be < high", "low=0.01", "swap them"),
    ),
    (
        "space-log-zero",
        lambda e: e.search(hp_space={"learning_rate": spaces.Float(0.0, 1e-2, log=True)}),
        ("log=True", "low=0.0", "use log=False"),
    ),
    (
        "space-empty-choices",
        lambda e: e.search(hp_space={"seed": spaces.Categorical([])}),
        ("choices", "[]", "give at least one value"),
    ),
    (
        "space-int-float-bound",
        lambda e: e.search(hp_space={"seed": spaces.Int(1.5, 3)}),
        ("low", "1.5", "pass an integer"),
    ),
    (
        "space-unknown-type",
        lambda e: e.search(hp_space={"learning_rate": {"type": "gaussian", "low": 0, "high": 1}}),
        ("learning_rate", "'gaussian'", "accepted types are"),
    ),
    (
        "space-bound-rejected-by-args",
        lambda e: e.search(hp_space={"learning_rate": spaces.Float(-1.0, 1.0)}),
        ("learning_rate", "-1.0", "pass 0.0 or more"),
    ),
    (
        "space-choice-not-savable",
        lambda e: e.search(backend="random", hp_space={**LR, "hidden": spaces.Categorical([8, object()])}),
        ("hp_space['hidden'] cannot be saved with the results", "<object object", "Use a plain value"),
    ),
    (
        "space-native-distribution-in-portable-dict",
        lambda e: e.search(hp_space={**LR, "hidden": optuna.distributions.CategoricalDistribution([8, 16])}),
        (
            "hp_space['hidden']=CategoricalDistribution(choices=(8, 16)) is a native optuna object",
            "write it as a spaces domain",
            "a callable hp_space(trial)",
        ),
    ),
    (
        "space-float-for-int-arg",
        lambda e: e.search(hp_space={"per_device_train_batch_size": spaces.Float(1.0, 8.5)}),
        ("per_device_train_batch_size", "8.5", "use spaces.Int"),
    ),
    # ------------------------------------------------------------ hyperparameter_search arguments
    ("unknown-backend", lambda e: e.search(backend="hyperopt"), ("backend", "'hyperopt'", "use one of")),
    ("backend-not-installed", _not_installed, ("optuna", "not installed", "pip install 'hpsearch[optuna]'")),
    ("direction", lambda e: e.search(direction="up"), ("direction", "'up'", "pass one of them")),
    (
        "direction-in-list",
        lambda e: e.search(direction=["minimize", "sideways"]),
        ("direction", "'sideways'", "pass"),
    ),
    ("n-trials-zero", lambda e: e.search(n_trials=0), ("n_trials=0", ">= 1", "pass e.g. n_trials=10")),
    ("n-trials-negative", lambda e: e.search(n_trials=-4), ("n_trials=-4", ">= 1", "pass e.g.")),
    ("n-trials-float", lambda e: e.search(n_trials=2.5), ("n_trials", "2.5", "pass e.g.")),
    (
        "hp-space-non-dict",
        lambda e: e.search(hp_space=_native_space([1, 2])),
        ("hp_space(trial) must return a dict", "[1, 2]", "dict of parameter values"),
    ),
    (
        "hp-space-raises",
        lambda e: e.search(hp_space=_raising_space),
        ("hp_space(trial) raised", "lerning_rate", "must only call trial.suggest_*"),
    ),
    (
        "hp-space-type",
        lambda e: e.search(hp_space=42),
        ("hp_space", "got int 42", "a dict {name: Domain or value}"),
    ),
    (
        "reserved-param",
        lambda e: e.search(hp_space={"output_dir": spaces.Categorical(["a", "b"])}),
        ("'output_dir'", "reserved", "rename the parameter"),
    ),
    (
        "reserved-param-native",
        lambda e: e.search(hp_space=_native_space({"run_name": "x"})),
        ("'run_name'", "reserved", "rename it"),
    ),
    (
        "unused-param",
        lambda e: e.search(e.trainer(takes_trial=False), hp_space={"dropout": spaces.Float(0.0, 0.5)}),
        ("'dropout'", "not a TrainingArguments field", "give model_init a `trial` parameter"),
    ),
    (
        "unused-param-native",
        lambda e: e.search(e.trainer(takes_trial=False), hp_space=_native_space({"dropout": 0.1})),
        ("'dropout'", "not a TrainingArguments field", "give model_init a `trial` parameter"),
    ),
    (
        "compute-objective",
        lambda e: e.search(compute_objective=3),
        ("compute_objective", "got 3", "a metric name or None"),
    ),
    (
        "objective-scope",
        lambda e: e.search(objective_scope="median"),
        ("objective_scope", "'median'", "'last', 'best'"),
    ),
    (
        "max-failed-trials",
        lambda e: e.search(max_failed_trials=0),
        ("max_failed_trials=0", "must be an integer >= 1", "pass e.g."),
    ),
    (
        "trial-timeout",
        lambda e: e.search(trial_timeout=-1),
        ("trial_timeout=-1", "must be a finite number > 0", "seconds", "pass e.g."),
    ),
    ("hp-name", lambda e: e.search(hp_name="run"), ("hp_name", "'run'", "callable taking the trial")),
    ("trial-timeout-inf", lambda e: e.search(trial_timeout=float("inf")), ("trial_timeout", "inf", "finite")),
    (
        "no-eval-dataset",
        lambda e: e.search(_without_eval(e.trainer())),
        ("eval_dataset", "evaluation", "Trainer(eval_dataset=...)"),
    ),
    (
        "hp-space-empty",
        lambda e: e.search(hp_space={}),
        ("hp_space={}", "no parameter", "None for the default space"),
    ),
    (
        "space-float-for-batch-size",
        lambda e: e.search(hp_space={"per_device_train_batch_size": spaces.Float(8.0, 64.0)}),
        ("per_device_train_batch_size", "Float", "use spaces.Int(8, 64)"),
    ),
    (
        "space-zero-epochs",
        lambda e: e.search(hp_space={"num_train_epochs": spaces.Int(0, 3)}),
        ("num_train_epochs", "0", "start the domain above 0"),
    ),
    (
        "output-dir-query",
        lambda e: e.search(e.trainer(output_dir=str(e.tmp_path / "what?now"))),
        ("output_dir", "'?'", "without '?'"),
    ),
    (
        "optuna-sqlite-two-slashes",
        lambda e: e.search(storage="sqlite://study.db"),
        ("storage='sqlite://study.db'", "three slashes", "'sqlite:///study.db'"),
    ),
    (
        "optuna-journal-is-folder",
        lambda e: e.search(storage=str(e.tmp_path)),
        ("storage=", "is a folder", "study.log"),
    ),
    # ------------------------------------------------------------ Optuna keyword arguments
    ("optuna-unknown-kwarg", lambda e: e.search(sampler_seed=3), ("sampler_seed", "optuna", "it accepts")),
    (
        "optuna-pruner-no-eval",
        lambda e: e.search(e.trainer(eval_strategy="no"), pruner=optuna.pruners.MedianPruner()),
        ("pruner=MedianPruner", "eval_strategy='no'", "set eval_strategy='epoch' or 'steps'"),
    ),
    (
        "optuna-pruner-multi-objective",
        lambda e: e.search(
            pruner=optuna.pruners.MedianPruner(),
            direction=["minimize", "maximize"],
            compute_objective=lambda m: (m["eval_loss"], m["eval_accuracy"]),
        ),
        ("pruner=MedianPruner", "multi-objective", "remove the pruner"),
    ),
    (
        "optuna-sampler-type",
        lambda e: e.search(sampler="tpe"),
        ("sampler", "'tpe'", "optuna.samplers.BaseSampler"),
    ),
    (
        "optuna-storage-port",
        lambda e: e.search(storage="postgresql+psycopg2://me:hunter2@127.0.0.1:notaport/db"),
        ("storage=", "me:***@127.0.0.1:notaport/db", "'dialect+driver://user:password@host:port/database'"),
    ),
    (
        "optuna-storage-scheme",
        lambda e: e.search(storage="mongodb://127.0.0.1/db"),
        ("storage=", "mongodb://127.0.0.1/db", "use e.g. 'sqlite:///study.db'"),
    ),
    (
        "optuna-sqlite-folder",
        lambda e: e.search(storage="sqlite:////nonexistent/folder/study.db"),
        ("storage=", "/nonexistent/folder", "create it"),
    ),
    (
        "optuna-journal-folder",
        lambda e: e.search(storage="/nonexistent/folder/study.log"),
        ("storage journal file", "/nonexistent/folder", "create it"),
    ),
    (
        "optuna-n-jobs",
        lambda e: e.search(n_jobs=0),
        ("n_jobs=0", "must be an integer >= 1 or -1", "pass e.g. n_jobs=1"),
    ),
    (
        "optuna-n-jobs-accumulation",
        lambda e: e.search(e.trainer(gradient_accumulation_steps=2), n_jobs=2),
        ("n_jobs=2", "gradient_accumulation_steps=2", "use n_jobs=1"),
    ),
    (
        "optuna-n-jobs-accumulation-in-space",
        lambda e: e.search(hp_space={**LR, "gradient_accumulation_steps": spaces.Int(1, 4)}, n_jobs=2),
        ("n_jobs=2", "gradient_accumulation_steps=4", "hp_space", "use n_jobs=1"),
    ),
    (
        "optuna-timeout",
        lambda e: e.search(timeout=-5),
        ("timeout=-5", "must be a finite number > 0", "seconds", "pass e.g. timeout=3600"),
    ),
    ("optuna-study-name", lambda e: e.search(study_name=""), ("study_name", "''", "non-empty string")),
    # ------------------------------------------------------------ Ray and SigOpt keyword arguments
    (
        "ray-address-unreachable",
        lambda e: e.search(backend="ray", address="127.0.0.1:1"),
        ("address='127.0.0.1:1'", "no Ray cluster answers", "ray start --head"),
    ),
    (
        "ray-multi-objective",
        lambda e: e.search(
            backend="ray",
            direction=["minimize", "maximize"],
            compute_objective=lambda m: (m["eval_loss"], m["eval_accuracy"]),
        ),
        ("direction=", "['minimize', 'maximize']", "use backend='optuna'"),
    ),
    (
        "ray-scope-disagrees-with-default-objective-scope",
        lambda e: e.search(backend="ray", objective_scope="last", scope="all"),
        ("objective_scope='last'", "scope='all'", "disagree", "drop one of them"),
    ),
    (
        "ray-unknown-kwarg",
        lambda e: e.search(backend="ray", num_workers=2),
        ("num_workers", "ray", "it accepts"),
    ),
    (
        "sigopt-int-log",
        lambda e: e.search(backend="sigopt", hp_space={"seed": spaces.Int(1, 64, log=True)}),
        ("'seed'", "log=True", "use spaces.Float(1, 64, log=True)"),
    ),
    (
        "sigopt-driver",
        lambda e: e.search(backend="sigopt", driver="carrier-pigeon"),
        ("driver=", "'carrier-pigeon'", "one of 'lite', 'http'", "pass e.g. driver='lite'"),
    ),
    (
        "optuna-bool-option",
        lambda e: e.search(gc_after_trial="no"),
        ("gc_after_trial='no'", "(str)", "must be true or false"),
    ),
    (
        "optuna-timeout-nan",
        lambda e: e.search(timeout=float("nan")),
        ("timeout=nan", "finite number", "pass e.g."),
    ),
    (
        "optuna-missing-driver",
        lambda e: e.search(storage="postgresql+pg8000://me:hunter2@127.0.0.1:1/db"),
        (
            "storage=",
            "driver 'pg8000' is not installed",
            "e.g. 'postgresql+psycopg2://me:***@127.0.0.1:1/db'",
        ),
    ),
    (
        "typo-kwarg-suggested",
        lambda e: e.search(n_trial=3),
        ("n_trial", "did you mean 'n_trials'?", "it accepts"),
    ),
    (
        "kwarg-of-another-backend",
        lambda e: e.search(backend="random", sampler=optuna.samplers.TPESampler()),
        ("sampler", "is an option of backend='optuna'", "it accepts"),
    ),
    (
        "no-train-dataset",
        lambda e: e.search(_without_train(e.trainer())),
        ("train_dataset", "trains a model", "Trainer(train_dataset=...)"),
    ),
    (
        "empty-train-dataset",
        lambda e: e.search(_with_datasets(e.trainer(), train=[])),
        ("train_dataset", "has no examples", "pass a train_dataset with at least one example"),
    ),
    (
        "empty-eval-dataset",
        lambda e: e.search(_with_datasets(e.trainer(), evaluation=[])),
        ("eval_dataset", "has no examples", "pass an eval_dataset with at least one example"),
    ),
    (
        "empty-eval-dataset-in-dict",
        lambda e: e.search(
            _with_datasets(e.trainer(), evaluation={"valid": digits_datasets()[1], "test": []})
        ),
        ("eval_dataset['test']", "has no examples", "pass an eval_dataset with at least one example"),
    ),
    (
        "empty-eval-dataset-dict",
        lambda e: e.search(_with_datasets(e.trainer(), evaluation={})),
        ("eval_dataset={}", "has no examples", "pass an eval_dataset with at least one example"),
    ),
    (
        "args-set-after-construction",
        lambda e: e.search(_set_args(e.trainer(), per_device_train_batch_size=0)),
        ("trainer.args", "per_device_train_batch_size must be a positive integer, got 0", "pass 1 or more"),
    ),
    (
        "args-set-after-construction-not-blamed-on-the-space",
        lambda e: e.search(_set_args(e.trainer(), learning_rate=-1.0), hp_space={"seed": spaces.Int(1, 3)}),
        ("trainer.args", "learning_rate must be >= 0.0, got -1.0", "pass 0.0 or more"),
    ),
    (
        "directions-for-one-metric",
        lambda e: e.search(direction=["maximize", "minimize"], compute_objective="eval_loss"),
        (
            "direction=['maximize', 'minimize']",
            "'eval_loss' gives one value",
            "a callable returning 2 numbers",
        ),
    ),
    (
        "scope-best-multi-objective",
        lambda e: e.search(
            direction=["minimize", "maximize"],
            objective_scope="best",
            compute_objective=lambda m: (m["eval_loss"], m["eval_accuracy"]),
        ),
        ("objective_scope='best'", "several objectives", "use 'last'"),
    ),
    (
        "warm-start-options-alone",
        lambda e: e.search(warm_start_mode="evaluate", warm_start_top_k=2),
        ("warm_start_mode='evaluate' (and warm_start_top_k)", "needs warm_start", "pass warm_start="),
    ),
    (
        "dashboard-port-type",
        lambda e: e.search(dashboard=True, dashboard_port="abc"),
        ("dashboard_port", "'abc'", "integer from 0 to 65535"),
    ),
    ("dashboard-port-in-use", _dashboard_port_in_use, ("port", "is already in use", "--port 0")),
    (
        "on-trial-end-type",
        lambda e: e.search(on_trial_end="print"),
        ("on_trial_end", "'print'", "a callable (session, record)"),
    ),
    (
        "on-trial-end-arity",
        lambda e: e.search(on_trial_end=[lambda session, record: None, lambda record: None]),
        (
            "on_trial_end=",
            "cannot be called with two arguments (the session, the trial's record)",
            "give it exactly two parameters",
        ),
    ),
    (
        "dashboard-port-alone",
        lambda e: e.search(dashboard_port=8765),
        ("dashboard_port=8765", "dashboard=False", "pass dashboard=True"),
    ),
    (
        "earlier-search-kept",
        _second_search_in_same_folder,
        ("holds an earlier search (1 trial", "nothing was started", "another output_dir"),
    ),
    # A storage that would load the study named after output_dir, but holds none: it continues nothing.
    (
        "earlier-search-kept-from-new-storage",
        lambda e: _second_search_in_same_folder(
            e, "optuna", backend="optuna", compute_objective="eval_loss", study_name=None
        ),
        (
            "holds an earlier search (1 trial, backend='optuna'",
            "nothing was started",
            "another output_dir",
            "continue it (storage=",
        ),
    ),
    (
        "earlier-search-of-another-backend-kept-from-new-storage",
        lambda e: _second_search_in_same_folder(
            e, "random", backend="optuna", compute_objective="eval_loss", study_name=None, load_if_exists=True
        ),
        ("holds an earlier search (1 trial, backend='random'", "nothing was started", "another output_dir"),
    ),
    (
        "output-dir-search-json-folder",
        lambda e: _results_path_taken(e, "search.json"),
        ("output_dir=", "has a folder named 'search.json'", "move it away, or choose another output_dir"),
    ),
    (
        "output-dir-trials-csv-folder",
        lambda e: _results_path_taken(e, "trials.csv"),
        ("output_dir=", "has a folder named 'trials.csv'", "move it away"),
    ),
    (
        "output-dir-events-folder",
        lambda e: _results_path_taken(e, "events.jsonl"),
        ("output_dir=", "has a folder named 'events.jsonl'", "move it away"),
    ),
    (
        "trial-timeout-huge",
        lambda e: e.search(trial_timeout=1e10),
        ("trial_timeout=", "longer than a trial's timer", "pass None for no limit"),
    ),
    (
        "space-fsdp-in-one-process",
        lambda e: e.search(
            hp_space={
                "learning_rate": spaces.Float(1e-3, 1e-2),
                "fsdp": spaces.Categorical(["", "full_shard"]),
            }
        ),
        ("'fsdp'", "'full_shard'", "several processes", "remove 'full_shard'"),
    ),
    (
        "space-epochs-ignored",
        lambda e: e.search(e.trainer(max_steps=5), hp_space={"num_train_epochs": spaces.Int(1, 3)}),
        ("num_train_epochs", "max_steps=5", "set max_steps=-1"),
    ),
    (
        "compute-objective-arity",
        lambda e: e.search(compute_objective=lambda: 1.0),
        (
            "compute_objective=",
            "cannot be called with one argument (the metrics dict)",
            "give it exactly one parameter",
        ),
    ),
    (
        "hp-name-arity",
        lambda e: e.search(hp_name=lambda trial, prefix: "x"),
        ("hp_name=", "missing a required argument: 'prefix'", "give it exactly one parameter"),
    ),
    (
        "optuna-catch-base-exception",
        lambda e: e.search(catch=KeyboardInterrupt),
        ("catch must be an Exception class", "KeyboardInterrupt", "cannot be caught per trial"),
    ),
    (
        "space-all-fixed",
        lambda e: e.search(backend="random", hp_space={"learning_rate": 0.01, "seed": spaces.Fixed(3)}),
        ("no parameter to search", "learning_rate, seed", "give at least one a range"),
    ),
    (
        "optuna-load-if-exists-alone",
        lambda e: e.search(storage=None, load_if_exists=True),
        ("load_if_exists=True", "no storage is given", "pass storage='sqlite:///study.db'"),
    ),
    (
        "optuna-native-returns-domains",
        lambda e: e.search(hp_space=lambda trial: {"learning_rate": spaces.Float(0.1, 1.0)}),
        ("returned spaces domains for ['learning_rate']", "Float", "pass the dict itself as hp_space"),
    ),
    (
        "optuna-native-value-rejected-by-args",
        lambda e: e.search(
            hp_space=lambda t: {"learning_rate": t.suggest_categorical("learning_rate", [1e-3, "fast"])}
        ),
        (
            "hp_space parameter 'learning_rate' can take 'fast'",
            "TrainingArguments rejects",
            "pass an int or a float",
        ),
    ),
    (
        "sigopt-native-no-bounds",
        lambda e: e.search(backend="sigopt", hp_space=[{"name": "learning_rate", "type": "double"}]),
        ("'learning_rate'", "got None", "'bounds': {'min'"),
    ),
    (
        "sigopt-native-raises",
        lambda e: e.search(
            backend="sigopt", hp_space=lambda t: {"learning_rate": t.suggest_float("learning_rate", 0.1, 1)}
        ),
        ("written for backend='optuna'", "trial.suggest_float", "the portable form every backend takes"),
    ),
    (
        "sigopt-native-bounds-rejected",
        lambda e: e.search(
            backend="sigopt",
            hp_space=[
                {"name": "per_device_train_batch_size", "type": "int", "bounds": {"min": -5, "max": 0}}
            ],
        ),
        ("per_device_train_batch_size", "-5", "pass 1 or more"),
    ),
    # ------------------------------------------------------------ sweep files and CLI flags
    (
        "yaml-long-text-by-aliases",
        lambda e: e.cli_text(_aliased_long_text(e)),
        ("more than 1,000,000 characters", "aliases", "shorten the values"),
    ),
    (
        "yaml-control-character",
        lambda e: e.cli_text(e.sweep_file().read_text() + "extra: \x07\n"),
        ("character '\\x07'", "not allowed", "remove it"),
    ),
    (
        "yaml-integer-key",
        lambda e: e.cli_text(e.sweep_file().read_text() + "1: 2\n"),
        ("a key must be a string", "int 1", "quote it"),
    ),
    (
        "yaml-objective-direction-count",
        lambda e: e.cli(objective=["eval_accuracy", "eval_loss"], direction="maximize"),
        (
            "direction",
            "objective has 2 metric(s) but direction has 1 entry",
            "give one direction per objective",
        ),
    ),
    (
        "yaml-script-only-argument",
        lambda e: e.cli(
            training_args={"num_train_epochs": 1, "eval_strategy": "epoch", "resume_from_checkpoint": "/x"}
        ),
        ("resume_from_checkpoint='/x'", "read by a training script", "remove it"),
    ),
    (
        "yaml-torch-threads",
        lambda e: e.cli(torch_threads=10**11),
        ("torch_threads", "100000000000", "from 1 to 4096"),
    ),
    (
        "yaml-missing-import",
        lambda e: e.cli(model="examples.digits.model:no_such_factory"),
        ("model", "no_such_factory", "it defines"),
    ),
    (
        "yaml-module-exits",
        lambda e: e.cli(data=_exiting_module(e)),
        ("data", "raised SystemExit: 3", "fix that module"),
    ),
    (
        "yaml-missing-module",
        lambda e: e.cli(data="examples.nowhere:datasets"),
        ("data", "examples.nowhere", "check the spelling"),
    ),
    ("yaml-unknown-key", lambda e: e.cli(n_trial=3), ("n_trial", "unknown key", "did you mean 'n_trials'")),
    (
        "yaml-space-type",
        lambda e: e.cli(space={"learning_rate": {"type": "gaussian"}}),
        ("learning_rate", "gaussian", "accepted types are"),
    ),
    (
        "yaml-training-args",
        lambda e: e.cli(training_args={"eval_strategy": "sometimes"}),
        ("eval_strategy", "sometimes", "pass one of those strings"),
    ),
    ("cli-n-trials", lambda e: e.cli("--n-trials", "0"), ("--n-trials", "n_trials=0", ">= 1")),
    ("cli-backend", lambda e: e.cli("--backend", "hyperopt"), ("--backend", "hyperopt", "choose from")),
    (
        "cli-set",
        lambda e: e.cli("--set", "training_args.learning_rate=-1"),
        ("learning_rate", "got -1.0", "pass 0.0 or more"),
    ),
]


def _without_eval(trainer: Trainer) -> Trainer:
    trainer.eval_dataset = None
    return trainer


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.slow
def test_bad_input_is_refused_before_anything_happens(case, tmp_path, monkeypatch, capsys):
    _, run, fragments = case
    env = Env(tmp_path=tmp_path, monkeypatch=monkeypatch, built=[])
    monkeypatch.chdir(tmp_path)
    try:
        run(env)
    except CliExit as exit_:
        assert exit_.code == 2, capsys.readouterr()
        message = capsys.readouterr().err
    except (hpsearch.SearchConfigError, hpsearch.BackendNotAvailable, ValueError, TypeError) as error:
        message = str(error)
    else:
        pytest.fail("the bad input was accepted")
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in: {message}"
    assert "Traceback" not in message
    assert "hunter2" not in message  # a password in a bad URL is not repeated
    assert env.built == []  # no model was built: no trial started
    assert not env.output_dir.exists(), sorted(os.listdir(env.output_dir))
    assert not env.db.exists()


def test_there_are_at_least_thirty_cases():
    assert len(CASES) >= 30
    kinds = {c[0].split("-")[0] for c in CASES}
    assert {"args", "space", "optuna", "ray", "sigopt", "yaml", "cli"} <= kinds
