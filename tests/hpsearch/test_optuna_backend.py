"""hyperparameter_search with the Optuna backend, for real: studies in memory, SQLite and journal files."""

from __future__ import annotations

import json
import logging
import math
import os
import signal

import optuna
import pytest
import torch

import hpsearch
import spaces
from hpsearch import BestRun, SearchConfigError, SearchResult, TooManyFailedTrials, TrialState
from tests._digits import DigitsMLP, digits_datasets, digits_trainer
from trainer import Trainer, TrainingArguments
from trainer._checkpoint import load_model_weights

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _model_init(trial):
    hidden = trial["hidden"] if trial is not None and "hidden" in trial else 64
    return DigitsMLP(hidden=hidden)


def make_trainer(tmp_path, model_init=_model_init, **overrides) -> Trainer:
    settings = dict(
        eval_strategy="epoch",
        save_strategy="epoch",
        num_train_epochs=4,
        learning_rate=3e-3,
        per_device_train_batch_size=32,
        per_device_eval_batch_size=256,
        logging_strategy="no",
        disable_tqdm=True,
    )
    settings.update(overrides)
    return digits_trainer(str(tmp_path / "search"), model_init, **settings)


SPACE = {
    "learning_rate": spaces.Float(3e-4, 3e-2, log=True),
    "hidden": spaces.Categorical([16, 64, 128]),
    "per_device_train_batch_size": spaces.Categorical([16, 32]),
}


@pytest.mark.slow
def test_pruned_search_finds_accurate_model_and_checkpoint_reproduces(tmp_path):
    trainer = make_trainer(tmp_path)
    best = trainer.hyperparameter_search(
        hp_space=SPACE,
        compute_objective="eval_accuracy",
        direction="maximize",
        n_trials=12,
        backend="optuna",
        sampler=optuna.samplers.TPESampler(seed=0),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=0),
    )
    assert isinstance(best, BestRun)
    result = best.run_summary
    assert isinstance(result, SearchResult)
    df = result.trials_dataframe()
    assert len(df) == 12
    states = set(df["state"])
    assert "PRUNED" in states, df[["state", "objective"]]
    assert best.objective >= 0.95
    complete = df[df.state == "COMPLETE"]
    assert best.objective == pytest.approx(complete.objective.max())
    assert best.run_id == complete.loc[complete.objective.idxmax(), "trial_id"]
    assert set(best.hyperparameters) == set(SPACE)
    assert best.hyperparameters["hidden"] in (16, 64, 128)
    for column in ("trial_id", "name", "state", "objective", "params_learning_rate", "params_hidden"):
        assert column in df.columns
    # Every trial trained in its own run folder.
    assert best.checkpoint is not None and os.path.isdir(best.checkpoint)
    assert os.path.dirname(best.checkpoint) == os.path.join(trainer.args.output_dir, f"run-{best.run_id}")

    # The checkpoint, loaded into a fresh model_init(...), reproduces the reported objective.
    trial = hpsearch.Trial(best.run_id, 0, best.hyperparameters, "optuna")
    model = _model_init(trial)
    load_model_weights(model, best.checkpoint)
    _, evaluation = digits_datasets()
    with torch.no_grad():
        preds = model(evaluation.x)["logits"].argmax(-1)
    assert float((preds == evaluation.y).double().mean()) == pytest.approx(best.objective, abs=1e-9)

    # Pruned trials stopped before the last epoch and kept their intermediate values.
    pruned = [r for r in result.records if r.state is TrialState.PRUNED]
    full_steps = max(r.last_step for r in result.records if r.state is TrialState.COMPLETE)
    assert all(r.last_step < full_steps and r.intermediates for r in pruned)
    # Results were written to disk as the search ran.
    assert SearchResult.load(trainer.args.output_dir).trials_dataframe().shape[0] == 12


def test_native_optuna_space_and_suggest_inside_model_init(tmp_path):
    def model_init(trial):
        hidden = trial.suggest_categorical("hidden", [32, 64]) if trial is not None else 64
        return DigitsMLP(hidden=hidden)

    def hp_space(trial):
        return {"learning_rate": trial.suggest_float("learning_rate", 1e-3, 1e-2, log=True)}

    trainer = make_trainer(tmp_path, model_init=model_init, num_train_epochs=1)
    best = trainer.hyperparameter_search(
        hp_space=hp_space,
        compute_objective="eval_loss",
        n_trials=3,
        backend="optuna",
        sampler=optuna.samplers.RandomSampler(seed=1),
    )
    df = best.run_summary.trials_dataframe()
    assert list(df.state) == ["COMPLETE"] * 3
    # The parameter suggested inside model_init is recorded like the others.
    assert set(best.hyperparameters) == {"learning_rate", "hidden"}
    assert df["params_hidden"].isin([32, 64]).all()
    study = best.run_summary.native
    assert isinstance(study, optuna.Study)
    assert {t.params["hidden"] for t in study.trials} <= {32, 64}


def test_default_space_in_both_forms(tmp_path):
    for form, hp_space in (("portable", None), ("native", hpsearch.default_hp_space_optuna)):
        # A search per folder: a second search is not written over the first one's results.
        trainer = make_trainer(
            tmp_path / form,
            model_init=lambda: DigitsMLP(),
            max_steps=3,
            eval_strategy="steps",
            eval_steps=3,
            save_strategy="no",
        )
        best = trainer.hyperparameter_search(
            hp_space=hp_space, n_trials=2, backend="optuna", sampler=optuna.samplers.RandomSampler(seed=0)
        )
        assert set(best.hyperparameters) == {
            "learning_rate",
            "num_train_epochs",
            "seed",
            "per_device_train_batch_size",
        }
        assert 1e-6 <= best.hyperparameters["learning_rate"] <= 1e-4
        # The default objective is the eval loss when accuracy is absent... here accuracy is present: it sums
        # the non-loss metrics (accuracy), as the seed documentation says.
        assert 0 <= best.objective <= 1


@pytest.mark.slow
def test_resume_study_from_sqlite_continues_numbering(tmp_path):
    storage = f"sqlite:///{tmp_path}/study.db"
    common = dict(
        hp_space={"learning_rate": spaces.Float(1e-3, 1e-2, log=True)},
        compute_objective="eval_loss",
        backend="optuna",
        storage=storage,
        study_name="resume",
        load_if_exists=True,
        sampler=optuna.samplers.RandomSampler(seed=0),
    )
    trainer = make_trainer(tmp_path, num_train_epochs=1)
    first = trainer.hyperparameter_search(n_trials=2, **common)
    assert sorted(first.run_summary.trials_dataframe().number) == [0, 1]
    first_params = {r.trial_id: r.params for r in first.run_summary.records}

    trainer = make_trainer(tmp_path, num_train_epochs=1)
    second = trainer.hyperparameter_search(n_trials=4, **common)
    df = second.run_summary.trials_dataframe()
    assert sorted(df.number) == [0, 1, 2, 3]  # two new trials, numbers continue
    kept = {r.trial_id: r.params for r in second.run_summary.records if r.trial_id in first_params}
    assert kept == first_params  # the first two were not re-run
    assert len(optuna.load_study(study_name="resume", storage=storage).trials) == 4
    # A third call with the budget already spent runs nothing.
    trainer = make_trainer(tmp_path, num_train_epochs=1)
    third = trainer.hyperparameter_search(n_trials=4, **common)
    assert len(third.run_summary.records) == 4


@pytest.mark.slow
def test_resuming_with_a_budget_below_the_trials_done_runs_nothing_and_says_so(tmp_path, caplog):
    storage = f"sqlite:///{tmp_path}/study.db"
    common = dict(
        hp_space={"learning_rate": spaces.Float(1e-3, 1e-2, log=True)},
        compute_objective="eval_loss",
        backend="optuna",
        storage=storage,
        study_name="smaller",
        load_if_exists=True,
        sampler=optuna.samplers.RandomSampler(seed=0),
    )
    make_trainer(tmp_path, num_train_epochs=1).hyperparameter_search(n_trials=2, **common)
    with caplog.at_level(logging.WARNING, logger="hpsearch"):
        again = make_trainer(tmp_path, num_train_epochs=1).hyperparameter_search(n_trials=1, **common)
    assert len(again.run_summary.records) == 2
    assert len(optuna.load_study(study_name="smaller", storage=storage).trials) == 2
    assert "already has 2 trials, more than n_trials=1" in caplog.text and "n_trials=3 or more" in caplog.text


@pytest.mark.slow
def test_a_storage_without_the_study_does_not_continue_the_search_in_output_dir(tmp_path):
    """A storage that would load the study named after output_dir continues the search there only if it holds that
    study: a new (empty) database continues nothing, and the earlier search.json is kept."""
    space = {"learning_rate": spaces.Float(1e-3, 1e-2, log=True)}
    common = dict(hp_space=space, compute_objective="eval_loss", n_trials=2)
    make_trainer(tmp_path, num_train_epochs=1).hyperparameter_search(backend="random", **common)
    search_json = tmp_path / "search" / "search.json"
    before = search_json.read_bytes()
    for backend in ("random", "optuna"):
        if backend == "optuna":  # an earlier Optuna search of the same space, kept in its own storage
            search_json.unlink()
            make_trainer(tmp_path, num_train_epochs=1).hyperparameter_search(
                backend="optuna", storage=f"sqlite:///{tmp_path}/first.db", **common
            )
            before = search_json.read_bytes()
        new_db = tmp_path / f"new-{backend}.db"
        new_db.touch()
        with pytest.raises(
            SearchConfigError,
            match=rf"holds an earlier search \(2 trials, backend='{backend}'.*"
            "nothing was started.*another output_dir",
        ):
            make_trainer(tmp_path, num_train_epochs=1).hyperparameter_search(
                backend="optuna", storage=f"sqlite:///{new_db}", **common
            )
        assert search_json.read_bytes() == before
        assert new_db.stat().st_size == 0  # not even Optuna's tables were written
    # The storage that holds the study continues it (its budget is spent: nothing runs, the records stay).
    again = make_trainer(tmp_path, num_train_epochs=1).hyperparameter_search(
        backend="optuna", storage=f"sqlite:///{tmp_path}/first.db", **common
    )
    assert len(again.run_summary.records) == 2


def test_journal_storage(tmp_path):
    trainer = make_trainer(tmp_path, num_train_epochs=1)
    journal = str(tmp_path / "study.log")
    trainer.hyperparameter_search(
        hp_space={"learning_rate": spaces.Float(1e-3, 1e-2)},
        compute_objective="eval_loss",
        n_trials=2,
        backend="optuna",
        storage=journal,
        study_name="j",
    )
    assert os.path.getsize(journal) > 0


@pytest.mark.slow
def test_multi_objective_returns_pareto_front(tmp_path):
    trainer = make_trainer(tmp_path, num_train_epochs=2)
    front = trainer.hyperparameter_search(
        hp_space=SPACE,
        compute_objective=lambda m: (m["eval_accuracy"], m["eval_loss"]),
        direction=["maximize", "minimize"],
        n_trials=5,
        backend="optuna",
        sampler=optuna.samplers.RandomSampler(seed=0),
    )
    assert isinstance(front, list) and front
    assert all(isinstance(b, BestRun) and len(b.objective) == 2 for b in front)
    df = front[0].run_summary.trials_dataframe()
    assert {"objective_0", "objective_1"} <= set(df.columns)
    # No member of the front is dominated by another trial.
    points = [tuple(r.objective) for r in front[0].run_summary.records if r.state is TrialState.COMPLETE]
    for b in front:
        acc, loss = b.objective
        assert not any(a >= acc and lo <= loss and (a, lo) != (acc, loss) for a, lo in points)


@pytest.mark.slow
def test_failing_trial_is_recorded_and_search_completes(tmp_path):
    def model_init(trial):
        if trial is not None and trial["hidden"] == 16:
            raise RuntimeError("hidden=16 is broken on purpose")
        return _model_init(trial)

    trainer = make_trainer(tmp_path, model_init=model_init, num_train_epochs=1)
    space = {"hidden": spaces.Categorical([16, 64])}
    best = trainer.hyperparameter_search(
        hp_space=space,
        compute_objective="eval_loss",
        n_trials=6,
        backend="optuna",
        sampler=optuna.samplers.RandomSampler(seed=0),
        max_failed_trials=6,
    )
    records = best.run_summary.records
    failed = [r for r in records if r.state is TrialState.FAIL]
    assert failed and all("broken on purpose" in r.error for r in failed)
    assert all(r.params["hidden"] == 16 for r in failed)
    assert len(records) == 6
    assert best.hyperparameters["hidden"] == 64
    study = best.run_summary.native
    assert sum(t.state == optuna.trial.TrialState.FAIL for t in study.trials) == len(failed)


def test_consecutive_failures_stop_the_search_quoting_them(tmp_path):
    def model_init(trial):
        if trial is not None:
            raise ValueError("no model today")
        return DigitsMLP()

    trainer = make_trainer(tmp_path, model_init=model_init, num_train_epochs=1)
    with pytest.raises(TooManyFailedTrials, match="no model today") as info:
        trainer.hyperparameter_search(
            hp_space={"learning_rate": spaces.Float(1e-3, 1e-2)},
            n_trials=10,
            backend="optuna",
            max_failed_trials=2,
        )
    assert "2 trials failed in a row" in str(info.value)
    saved = SearchResult.load(trainer.args.output_dir)
    assert len(saved.records) == 2 and all(r.state is TrialState.FAIL for r in saved.records)


def test_nan_objective_fails_the_trial(tmp_path):
    calls = []

    def objective(metrics):
        calls.append(1)
        return float("nan") if len(calls) == 1 else metrics["eval_loss"]

    trainer = make_trainer(tmp_path, num_train_epochs=1)
    best = trainer.hyperparameter_search(
        hp_space={"learning_rate": spaces.Float(1e-3, 1e-2)},
        compute_objective=objective,
        n_trials=2,
        backend="optuna",
    )
    states = [r.state for r in best.run_summary.records]
    assert states == [TrialState.FAIL, TrialState.COMPLETE]
    assert "not finite" in best.run_summary.records[0].error


@pytest.mark.slow
def test_objective_scope_best_and_hp_name(tmp_path):
    trainer = make_trainer(tmp_path, num_train_epochs=3)
    best = trainer.hyperparameter_search(
        hp_space={"learning_rate": spaces.Float(1e-3, 1e-2)},
        compute_objective="eval_accuracy",
        direction="maximize",
        n_trials=2,
        backend="optuna",
        objective_scope="best",
        hp_name=lambda t: f"lr-trial-{t.number}",
    )
    for record in best.run_summary.records:
        assert record.name == f"lr-trial-{record.number}"
        assert record.objective == max(e.objective for e in record.intermediates)
        assert os.path.isdir(os.path.join(trainer.args.output_dir, record.name))


@pytest.mark.slow
def test_concurrent_trials_get_their_own_trainer(tmp_path):
    trainer = make_trainer(tmp_path, num_train_epochs=1)
    best = trainer.hyperparameter_search(
        hp_space=SPACE,
        compute_objective="eval_loss",
        n_trials=4,
        backend="optuna",
        n_jobs=2,
        sampler=optuna.samplers.RandomSampler(seed=0),
    )
    records = best.run_summary.records
    assert len(records) == 4 and all(r.state is TrialState.COMPLETE for r in records)
    # The original trainer was not touched by the trials.
    assert trainer.args.output_dir == str(tmp_path / "search")
    assert trainer.state.global_step == 0


def test_optimize_options_hold_under_ask_and_tell(tmp_path, capsys):
    """What study.optimize gave before the loop asked and told the study itself: callbacks(study, FrozenTrial) after
    every tell (the trial already finished in the study; one may stop the study), gc_after_trial, Optuna's progress
    bar, and timeout."""
    seen = []

    def callback(study, frozen):
        assert isinstance(study, optuna.Study) and isinstance(frozen, optuna.trial.FrozenTrial)
        seen.append((frozen.number, frozen.state, study.trials[frozen.number].state))

    def stop_after_two(study, frozen):
        if frozen.number == 1:
            study.stop()

    trainer = make_trainer(tmp_path, num_train_epochs=1)
    best = trainer.hyperparameter_search(
        hp_space=SPACE,
        compute_objective="eval_loss",
        n_trials=4,
        backend="optuna",
        sampler=optuna.samplers.RandomSampler(seed=0),
        callbacks=[callback, stop_after_two],
        gc_after_trial=True,
        show_progress_bar=True,
    )
    complete = optuna.trial.TrialState.COMPLETE
    assert seen == [(n, complete, complete) for n in range(2)]
    assert len(best.run_summary.records) == 2
    assert "Best trial: " in capsys.readouterr().err
    # timeout: no trial starts once it has passed (here, before the first one could).
    with pytest.raises(hpsearch.HPSearchError, match="No trial completed"):
        make_trainer(tmp_path / "late", num_train_epochs=1).hyperparameter_search(
            hp_space=SPACE, compute_objective="eval_loss", n_trials=3, backend="optuna", timeout=1e-9
        )


def test_a_sampler_that_stops_the_study_ends_the_search(tmp_path):
    """GridSampler calls study.stop() once its grid is done (Optuna allows that only inside optimize): the search
    ends there, short of n_trials, instead of failing."""
    best = make_trainer(tmp_path, num_train_epochs=1).hyperparameter_search(
        hp_space={"hidden": spaces.Categorical([16, 64])},
        compute_objective="eval_loss",
        n_trials=4,
        backend="optuna",
        sampler=optuna.samplers.GridSampler({"hidden": [16, 64]}, seed=0),
    )
    assert sorted(r.params["hidden"] for r in best.run_summary.records) == [16, 64]


@pytest.mark.slow
def test_search_files_are_json_and_secret_free(tmp_path):
    trainer = make_trainer(tmp_path, num_train_epochs=1)
    storage = f"sqlite:///{tmp_path}/s.db"
    trainer.hyperparameter_search(
        hp_space={"learning_rate": spaces.Float(1e-3, 1e-2)},
        n_trials=1,
        backend="optuna",
        storage=storage,
    )
    with open(os.path.join(trainer.args.output_dir, "search.json")) as f:
        meta = json.load(f)
    assert meta["backend"] == "optuna"
    assert meta["settings"]["storage"] == storage


# ---------------------------------------------------------------------------------------------- bad input
def _trainer_no_eval(tmp_path):
    return make_trainer(tmp_path, eval_strategy="no", save_strategy="no")


BAD_INPUTS = [
    ("unknown kwarg", {"sampler_seed": 3}, "sampler_seed"),
    ("unknown backend", {"backend": "hyperopt"}, "hyperopt"),
    ("direction", {"direction": "up"}, "direction"),
    ("n_trials zero", {"n_trials": 0}, "n_trials"),
    ("n_trials bool", {"n_trials": True}, "n_trials"),
    ("reserved param", {"hp_space": {"output_dir": spaces.Categorical(["a", "b"])}}, "reserved"),
    (
        "unused param",
        {"hp_space": {"dropout_rate": spaces.Float(0.0, 0.5)}, "_model_init": lambda: DigitsMLP()},
        "dropout_rate",
    ),
    ("invalid arg value", {"hp_space": {"learning_rate": spaces.Float(-1.0, 1.0)}}, "learning_rate"),
    (
        "int field float",
        {"hp_space": {"per_device_train_batch_size": spaces.Float(1.0, 8.5)}},
        "per_device_train_batch_size",
    ),
    ("bad storage", {"storage": "notadb://x"}, "storage"),
    ("journal folder", {"storage": "/nonexistent/dir/study.log"}, "does not exist"),
    ("pruner no eval", {"pruner": optuna.pruners.MedianPruner(), "_no_eval": True}, "eval_strategy"),
    (
        "pruner multi",
        {
            "pruner": optuna.pruners.MedianPruner(),
            "direction": ["minimize", "maximize"],
            "compute_objective": lambda m: (m["eval_loss"], m["eval_accuracy"]),
        },
        "multi-objective",
    ),
    (
        "directions one value",
        {"direction": ["minimize", "maximize"]},
        "compute_objective=None gives one value",
    ),
    (
        "n_jobs accum",
        {"n_jobs": 2, "_args": {"gradient_accumulation_steps": 2}},
        "gradient_accumulation_steps",
    ),
    ("objective scope", {"objective_scope": "median"}, "objective_scope"),
    ("max failed", {"max_failed_trials": 0}, "max_failed_trials"),
    ("compute objective", {"compute_objective": 3}, "compute_objective"),
    ("timeout", {"timeout": -5}, "timeout"),
    ("trial_timeout", {"trial_timeout": 0}, "trial_timeout"),
    ("sampler type", {"sampler": "tpe"}, "sampler"),
    ("hp_space type", {"hp_space": 42}, "hp_space"),
]


@pytest.mark.parametrize("case", BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_bad_input_is_refused_before_any_trial(tmp_path, case):
    _, kwargs, expected = case
    kwargs = dict(kwargs)
    model_init = kwargs.pop("_model_init", _model_init)
    overrides = kwargs.pop("_args", {})
    if kwargs.pop("_no_eval", False):
        overrides.update(eval_strategy="no", save_strategy="no")
    trainer = make_trainer(tmp_path, model_init=model_init, **overrides)
    kwargs.setdefault("backend", "optuna")
    kwargs.setdefault("hp_space", {"learning_rate": spaces.Float(1e-3, 1e-2)})
    with pytest.raises((SearchConfigError, ValueError, TypeError)) as info:
        hpsearch.hyperparameter_search(trainer, **kwargs)
    assert expected in str(info.value)
    assert not os.path.exists(trainer.args.output_dir)  # nothing written


def test_model_init_required(tmp_path):
    train, _evaluation = digits_datasets()
    trainer = Trainer(
        model=DigitsMLP(), args=TrainingArguments(output_dir=str(tmp_path)), train_dataset=train
    )
    with pytest.raises(SearchConfigError, match="model_init"):
        trainer.hyperparameter_search(backend="optuna")


def test_native_space_returning_non_dict_is_refused(tmp_path):
    trainer = make_trainer(tmp_path, num_train_epochs=1)
    with pytest.raises(SearchConfigError, match="must return a dict"):
        trainer.hyperparameter_search(hp_space=lambda trial: [1, 2], n_trials=2, backend="optuna")


def test_native_space_values_that_training_arguments_reject_are_refused_before_any_trial(tmp_path):
    """A native hp_space is checked like a portable one: the values its probe returns (and the choices of a
    categorical it returns as drawn) must be valid arguments, or no trial starts."""
    built = []

    def model_init(trial):
        built.append(trial)
        return DigitsMLP()

    trainer = make_trainer(tmp_path, model_init=model_init, num_train_epochs=1)
    built.clear()
    spaces_and_refusals = [
        (
            lambda trial: {"learning_rate": trial.suggest_categorical("learning_rate", [1e-3, "fast"])},
            r"hp_space parameter 'learning_rate' can take 'fast', which TrainingArguments rejects: .*pass an int",
        ),
        (
            lambda trial: {"warmup_ratio": trial.suggest_float("warmup_ratio", 2.0, 3.0)},
            r"hp_space parameter 'warmup_ratio' can take 2\.\d*, which TrainingArguments rejects",
        ),
        (
            lambda trial: {
                "learning_rate": trial.suggest_float("learning_rate", 1e-3, 1e-2),
                "lr_scheduler_type": "zig",
            },
            r"hp_space parameter 'lr_scheduler_type' can take 'zig', which TrainingArguments rejects",
        ),
    ]
    spaces_and_refusals.append(
        (
            lambda trial: {"num_train_epochs": trial.suggest_int("num_train_epochs", 1, 3)},
            r"hp_space searches num_train_epochs, but max_steps=5 decides how long every trial trains",
        )
    )
    trainer.args = trainer.args.replace(
        max_steps=5
    )  # the last space searches epochs that max_steps would ignore
    for hp_space, refusal in spaces_and_refusals:
        with pytest.raises(SearchConfigError, match=refusal) as caught:
            trainer.hyperparameter_search(hp_space=hp_space, n_trials=2, backend="optuna")
        assert caught.value.about[0] == "hp_space"
    assert built == [] and not os.path.exists(trainer.args.output_dir)


def test_a_native_space_is_checked_on_the_values_it_returns_not_on_the_bounds_it_suggests(tmp_path):
    """A value computed from a suggestion (10 ** exponent; epochs + 1) is checked as returned: the bounds of the
    suggestion (-4 as a learning rate, 0 epochs) are not the argument's values."""

    def hp_space(trial):
        return {
            "learning_rate": 10 ** trial.suggest_float("learning_rate", -3.0, -2.0),
            "num_train_epochs": trial.suggest_int("num_train_epochs", 0, 1) + 1,
        }

    best = make_trainer(tmp_path, max_steps=-1).hyperparameter_search(
        hp_space=hp_space, n_trials=1, backend="optuna", compute_objective="eval_loss"
    )
    assert 1e-3 <= best.hyperparameters["learning_rate"] <= 1e-2
    assert best.hyperparameters["num_train_epochs"] in (1, 2)


def test_optunas_own_study_direction_is_a_direction(tmp_path):
    """transformers hands direction to optuna.create_study, which takes optuna's StudyDirection too."""
    best = make_trainer(tmp_path, num_train_epochs=1).hyperparameter_search(
        hp_space={"learning_rate": spaces.Float(1e-3, 1e-2)},
        n_trials=1,
        backend="optuna",
        compute_objective="eval_loss",
        direction=optuna.study.StudyDirection.MAXIMIZE,
    )
    assert best.run_summary.directions == ["maximize"]
    with pytest.raises(SearchConfigError, match=r"direction=.*NOT_SET.*is not 'minimize' or 'maximize'"):
        make_trainer(tmp_path).hyperparameter_search(
            hp_space={"learning_rate": spaces.Float(1e-3, 1e-2)},
            backend="optuna",
            direction=optuna.study.StudyDirection.NOT_SET,
        )


def test_default_compute_objective_follows_the_seed(caplog):
    assert hpsearch.default_compute_objective({"eval_loss": 0.5, "epoch": 1.0, "eval_runtime": 3.0}) == 0.5
    assert hpsearch.default_compute_objective(
        {"eval_loss": 0.5, "eval_accuracy": 0.9, "eval_samples_per_second": 100.0}
    ) == pytest.approx(0.9)
    value = hpsearch.default_compute_objective({"eval_loss": 0.5, "eval_f1": 0.5, "eval_accuracy": 0.25})
    assert math.isclose(value, 0.75)
    # A metric that is no single number (a confusion matrix, a per-class tensor) is not summed: it raised TypeError.
    import numpy as np
    import torch

    assert (
        hpsearch.default_compute_objective(
            {
                "eval_loss": 0.5,
                "eval_accuracy": 0.25,
                "eval_confusion": np.array([[1, 2], [3, 4]]),
                "eval_per_class": torch.tensor([0.1, 0.2]),
            }
        )
        == 0.25
    )
    assert hpsearch.default_compute_objective({"eval_loss": 0.5, "eval_confusion": np.eye(2)}) == 0.5


@pytest.mark.slow
def test_hanging_and_memory_error_trials_fail_and_search_goes_on(tmp_path):
    import time

    def model_init(trial):
        if trial is not None and trial.number == 0:
            time.sleep(60)  # hangs past trial_timeout
        if trial is not None and trial.number == 1:
            raise MemoryError("simulated out of memory")
        return DigitsMLP()

    trainer = make_trainer(tmp_path, model_init=model_init, num_train_epochs=1)
    best = trainer.hyperparameter_search(
        hp_space={"learning_rate": spaces.Float(1e-3, 1e-2)},
        compute_objective="eval_loss",
        n_trials=3,
        backend="optuna",
        trial_timeout=3,
    )
    records = best.run_summary.records
    assert [r.state for r in records] == [TrialState.FAIL, TrialState.FAIL, TrialState.COMPLETE]
    assert "trial_timeout" in records[0].error
    assert "MemoryError" in records[1].error


def test_the_record_kept_in_the_study_reads_back_as_text_and_in_the_older_dict_form(tmp_path):
    # The whole record is stored as JSON text (Optuna deep-copies user attrs often; text copies for free); studies
    # written before kept the decoded dict. Both read back to the same record; unreadable text is no record.
    import numpy as np

    from hpsearch.backends.optuna import _storage
    from hpsearch.trial import Evaluation, TrialRecord

    record = TrialRecord(
        trial_id="4",
        number=4,
        name="run-4",
        state=TrialState.COMPLETE,
        params={"lr": np.float64(0.1)},
        objective=0.75,
        intermediates=[Evaluation(step=3, epoch=1.0, objective=0.75, metrics={"a": 1.0})],
    )
    text = _storage.record_attr(record)
    assert isinstance(text, str)
    from_text = _storage.saved_record({_storage.RECORD_ATTR: text})
    from_dict = _storage.saved_record({_storage.RECORD_ATTR: json.loads(text)})
    assert from_text == from_dict and from_text is not None
    assert from_text.params == {"lr": 0.1} and from_text.intermediates[0].metrics == {"a": 1.0}
    assert _storage.saved_fields({_storage.RECORD_ATTR: text})["objective"] == 0.75
    assert _storage.saved_record({_storage.RECORD_ATTR: "{not json"}) is None
    # Through a real study on disk: what Optuna stores and gives back.
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'study.db'}")
    trial = study.ask()
    trial.set_user_attr(_storage.RECORD_ATTR, text)
    study.tell(trial, 0.75)
    assert _storage.saved_record(study.trials[0].user_attrs) == from_text


_OPEN_AT_ONCE = """
import sys, time
from hpsearch.backends.optuna._study import open_study
from hpsearch.settings import TrialSettings

url, out, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
settings = TrialSettings(trainer=None, compute_objective=None, objective_name="eval_loss", directions=("minimize",),
                         output_dir=out, backend="optuna")
while time.time() < start:
    pass
study = open_study({"storage": url, "study_name": "race", "load_if_exists": True}, settings, None)
print(study.study_name)
"""


@pytest.mark.multiprocess
def test_workers_started_at_once_on_a_new_sqlite_database_all_open_the_study(tmp_path):
    """Four workers starting together on a database file that does not exist yet race to create Optuna's tables;
    the losers stopped with "table studies already exists" or "UNIQUE constraint failed: alembic_version" (5 of 12
    in three rounds before). Opening is retried on those errors, so every worker opens the one study."""
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": root}
    for round_ in range(3):
        url = f"sqlite:///{tmp_path}/race-{round_}.db"
        start = time.time() + 6  # every worker has imported what it needs and spins until then
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _OPEN_AT_ONCE, url, str(tmp_path / "out"), str(start)],
                cwd=root,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(4)
        ]
        results = [p.communicate(timeout=120) for p in procs]
        for proc, (out, err) in zip(procs, results):
            assert proc.returncode == 0 and out.strip() == "race", err[-2000:]
        study = optuna.load_study(study_name="race", storage=url)
        assert study.study_name == "race" and len(optuna.get_all_study_names(storage=url)) == 1


class _CtrlCWhileAsking(optuna.samplers.RandomSampler):
    """Ctrl-C, a real SIGINT to this process, inside ``study.ask()`` of trial ``at``: after the storage created the
    trial (RUNNING) and before ask returned it, where a loaded machine lands a user's Ctrl-C now and then."""

    def __init__(self, at: int) -> None:
        super().__init__(seed=0)
        self.at = at

    def before_trial(self, study, trial):
        super().before_trial(study, trial)
        if trial.number == self.at:
            os.kill(os.getpid(), signal.SIGINT)


def test_ctrl_c_inside_the_engines_ask_leaves_no_running_trial_and_queues_it_again(tmp_path, sigint_raises):
    """The interrupt is held until the asked trial is the adapter's, then handled as anywhere else: the trial is
    failed in the study with its parameters queued again, and the saved results hold no RUNNING record."""
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    best = make_trainer(tmp_path, num_train_epochs=1, save_strategy="no").hyperparameter_search(
        hp_space={"hidden": spaces.Categorical([16, 64])},
        compute_objective="eval_loss",
        n_trials=4,
        backend="optuna",
        sampler=_CtrlCWhileAsking(at=1),
        storage=storage,
        study_name="ask",
    )
    saved = SearchResult.load(tmp_path / "search")
    assert [r.state for r in saved.records] == [TrialState.COMPLETE], saved.records
    assert best.run_id == saved.records[0].trial_id
    states = [
        t.state for t in optuna.load_study(study_name="ask", storage=storage).get_trials(deepcopy=False)
    ]
    assert states == [
        optuna.trial.TrialState.COMPLETE,
        optuna.trial.TrialState.FAIL,
        optuna.trial.TrialState.WAITING,
    ]
