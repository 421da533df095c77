"""Faults and mistakes a search must survive or refuse (issue 14), each one on a real Optuna study:

- the README's call (a storage, no study_name) rerun after a crash resumes instead of starting over;
- Ctrl-C in a trial, then a rerun: the interrupted trial does not use the budget, its parameters are retried;
- a stored study reused with another direction, objective or space is refused before any trial;
- an ``hp_name`` that names two trials alike: they get different folders;
- ``sys.exit()`` or ``KeyboardInterrupt`` inside a trial run in a thread: that trial fails, the search goes on;
- ``trial_timeout`` stops a threaded trial stuck before its first step;
- a database server that accepts the connection and never answers: a clear error, not a hang;
- a metric name no evaluation produces stops the search at the first evaluation, not after N failed trials, and so
  do directions that do not match the number of values compute_objective returns; a callable objective reading a
  missing metric fails its trial naming the metrics there are;
- ``hp_space`` / ``hp_name`` that raise on a later trial: that trial fails, the search goes on.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import optuna
import pytest
import torch

import hpsearch
import spaces
from hpsearch import SearchConfigError, SearchResult, TrialState
from tests._digits import DigitsMLP, accuracy, digits_datasets
from trainer import Trainer, TrainerCallback, TrainingArguments

optuna.logging.set_verbosity(optuna.logging.WARNING)
SPACE = {"learning_rate": spaces.Float(1e-3, 1e-1, log=True), "hidden": spaces.Categorical([8, 16, 32])}


def _trainer(out: Path, model_init=None, callbacks=(), **args) -> Trainer:
    train, evaluation = digits_datasets()
    settings = dict(
        output_dir=str(out),
        max_steps=4,
        eval_strategy="steps",
        eval_steps=2,
        save_strategy="no",
        per_device_train_batch_size=64,
        logging_strategy="no",
        disable_tqdm=True,
        report_to="none",
    )
    settings.update(args)
    return Trainer(
        model_init=model_init or (lambda trial: DigitsMLP(hidden=trial.get("hidden", 16) if trial else 16)),
        args=TrainingArguments(**settings),
        train_dataset=train,
        eval_dataset=evaluation,
        compute_metrics=accuracy,
        callbacks=list(callbacks),
    )


@pytest.mark.slow
def test_rerun_of_the_readme_call_resumes(tmp_path, caplog):
    built: list[int] = []

    def model_init(trial):
        built.append(1)
        return DigitsMLP(hidden=trial["hidden"] if trial else 16)

    out = tmp_path / "out"
    storage = f"sqlite:///{tmp_path}/study.db"
    hpsearch.hyperparameter_search(
        _trainer(out, model_init),
        hp_space=SPACE,
        n_trials=3,
        backend="optuna",
        storage=storage,
        compute_objective="eval_loss",
    )
    first = len(built)
    caplog.set_level("INFO")
    hpsearch.hyperparameter_search(
        _trainer(out, model_init),
        hp_space=SPACE,
        n_trials=3,
        backend="optuna",
        storage=storage,
        compute_objective="eval_loss",
    )
    assert len(built) == first + 1  # the Trainer builds one model up front; no trial trained again
    assert len(SearchResult.load(out).records) == 3
    assert any("named after output_dir" in r.getMessage() for r in caplog.records)
    assert len(optuna.get_all_study_summaries(storage)) == 1


@pytest.mark.slow
def test_interrupted_trial_is_retried_and_does_not_use_the_budget(tmp_path):
    class Interrupt(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if args.run_name == "run-1" and state.global_step == 2:
                raise KeyboardInterrupt

    out = tmp_path / "out"
    storage = f"sqlite:///{tmp_path}/study.db"
    kwargs = dict(
        hp_space=SPACE,
        n_trials=3,
        backend="optuna",
        storage=storage,
        study_name="s",
        load_if_exists=True,
        compute_objective="eval_loss",
    )
    hpsearch.hyperparameter_search(_trainer(out, callbacks=[Interrupt()]), **kwargs)  # returns trial 0
    hpsearch.hyperparameter_search(_trainer(out), **kwargs)
    study = optuna.load_study(study_name="s", storage=storage)
    finished = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(finished) == 3
    retry = next(t for t in study.trials if t.user_attrs.get("hpsearch_retry_of") == 1)
    assert retry.params == study.trials[1].params and retry.state == optuna.trial.TrialState.COMPLETE
    records = SearchResult.load(out).records
    assert sorted(r.number for r in records) == sorted(t.number for t in finished)  # interrupted stays out


@pytest.mark.slow
def test_a_second_ctrl_c_while_the_interrupted_trial_is_queued_again_loses_no_trial(tmp_path, monkeypatch):
    """Ctrl-C in trial 1, then another Ctrl-C while its parameters are being queued again: the queueing completes
    (the second Ctrl-C is held off), so a rerun still trains it and finishes exactly n_trials."""
    import os
    import signal

    from hpsearch.backends.optuna import _storage

    class Interrupt(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if args.run_name == "run-1" and state.global_step == 2:
                raise KeyboardInterrupt

    real = _storage.requeue

    def requeue_under_a_second_ctrl_c(study, number, params):
        os.kill(os.getpid(), signal.SIGINT)
        real(study, number, params)

    monkeypatch.setattr(_storage, "requeue", requeue_under_a_second_ctrl_c)
    storage = f"sqlite:///{tmp_path}/study.db"
    kwargs = dict(
        hp_space=SPACE,
        n_trials=3,
        backend="optuna",
        storage=storage,
        study_name="s",
        load_if_exists=True,
        compute_objective="eval_loss",
    )
    out = tmp_path / "out"
    handler = signal.getsignal(signal.SIGINT)
    hpsearch.hyperparameter_search(_trainer(out, callbacks=[Interrupt()]), **kwargs)
    monkeypatch.setattr(_storage, "requeue", real)
    assert signal.getsignal(signal.SIGINT) is handler  # put back
    hpsearch.hyperparameter_search(_trainer(out), **kwargs)
    study = optuna.load_study(study_name="s", storage=storage)
    assert len([t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]) == 3
    retry = next(t for t in study.trials if t.user_attrs.get("hpsearch_retry_of") == 1)
    assert retry.params == study.trials[1].params and retry.state == optuna.trial.TrialState.COMPLETE


@pytest.mark.parametrize("moment", ["sampling", "storing"])
@pytest.mark.slow
def test_ctrl_c_outside_a_trials_training_also_queues_it_again(tmp_path, monkeypatch, moment):
    """Ctrl-C while the trial's parameters are suggested, or after it trained and before its record is stored in
    the study, interrupts the trial as Ctrl-C during training does: it uses no budget and a rerun trains it."""
    interrupted: list[int] = []

    def interrupt_once(number: int) -> None:
        if number == 1 and not interrupted:
            interrupted.append(number)
            raise KeyboardInterrupt

    kwargs: dict = dict(
        n_trials=3,
        backend="optuna",
        storage=f"sqlite:///{tmp_path}/study.db",
        study_name="s",
        load_if_exists=True,
        compute_objective="eval_loss",
        hp_space=SPACE,
    )
    if moment == "sampling":

        def hp_space(trial):
            params = {"learning_rate": trial.suggest_float("learning_rate", 1e-3, 1e-1, log=True)}
            interrupt_once(trial.number)
            return params

        kwargs["hp_space"] = hp_space
    else:
        from hpsearch.backends.optuna import _storage

        real = _storage.record_attr

        def record_attr(record):
            interrupt_once(record.number)
            return real(record)

        monkeypatch.setattr(_storage, "record_attr", record_attr)
    out = tmp_path / "out"
    hpsearch.hyperparameter_search(_trainer(out), **kwargs)
    assert interrupted == [1]
    hpsearch.hyperparameter_search(_trainer(out), **kwargs)
    study = optuna.load_study(study_name="s", storage=kwargs["storage"])
    finished = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(finished) == 3
    assert study.trials[1].user_attrs.get("hpsearch_interrupted") is True
    retry = next(t for t in study.trials if t.user_attrs.get("hpsearch_retry_of") == 1)
    assert retry.state == optuna.trial.TrialState.COMPLETE
    records = SearchResult.load(out).records
    assert sorted(r.number for r in records) == sorted(t.number for t in finished)  # interrupted stays out


@pytest.mark.parametrize("interrupted_first", [False, True], ids=["killed", "interrupted-then-killed"])
@pytest.mark.multiprocess
def test_a_dead_drivers_trial_is_queued_again_exactly_once(tmp_path, interrupted_first):
    """A rerun fails the RUNNING trial of a driver that died and queues its parameters again, once: also when Ctrl-C
    had already queued them again just before the kill (it used to queue them a second time, so one set of
    parameters trained twice and the budget ended one trial short)."""
    from hpsearch.backends.optuna import _storage

    study = optuna.create_study(storage=f"sqlite:///{tmp_path}/study.db", study_name="s")
    trial = study.ask({"x": optuna.distributions.FloatDistribution(0.0, 1.0)})
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    trial.set_user_attr(_storage.OWNER_ATTR, f"{socket.gethostname()}:{gone.pid}")
    if interrupted_first:
        trial.set_user_attr(_storage.INTERRUPTED_ATTR, True)
        _storage.requeue(study, trial.number, trial.params)
    _storage.recover_dead_drivers(study, str(tmp_path))
    _storage.recover_dead_drivers(study, str(tmp_path))  # a second rerun finds nothing left to do
    trials = study.get_trials(deepcopy=False)
    assert trials[0].state == optuna.trial.TrialState.FAIL
    waiting = [t for t in trials if t.state == optuna.trial.TrialState.WAITING]
    queued = [(t.user_attrs.get(_storage.RETRY_OF_ATTR), t.system_attrs.get("fixed_params")) for t in waiting]
    assert queued == [(0, trial.params)]


_KILLED_WHILE_ASKING = """
import os, signal, sys
import optuna
from hpsearch.backends.optuna import _storage
study = optuna.load_study(study_name="s", storage=sys.argv[1])
with _storage.asking(sys.argv[2], "s"):
    study.ask({"x": optuna.distributions.FloatDistribution(0.0, 1.0)})
    if sys.argv[3] == "torn":
        for path in os.listdir(sys.argv[2]):
            open(os.path.join(sys.argv[2], path), "w").write('{"study": "s", "si')
    os.kill(os.getpid(), signal.SIGKILL)  # before the owner attr is written
"""


@pytest.mark.parametrize("marker", ["whole", "torn"])
@pytest.mark.multiprocess
def test_a_driver_killed_between_creating_its_trial_and_naming_itself_is_recovered(tmp_path, marker):
    """SIGKILL between ``study.ask()`` (the trial RUNNING in the storage) and the owner attr: the asking marker the
    driver left in output_dir names it, so a rerun fails that trial and queues it again (it stayed RUNNING forever
    and took a trial of the budget). A live driver's owner-less trial is left alone."""
    from hpsearch.backends.optuna import _storage

    storage = f"sqlite:///{tmp_path}/study.db"
    study = optuna.create_study(storage=storage, study_name="s")
    out = tmp_path / "out"
    out.mkdir()
    killed = subprocess.run([sys.executable, "-c", _KILLED_WHILE_ASKING, storage, str(out), marker])
    assert killed.returncode == -9
    assert [t.state for t in study.get_trials()] == [optuna.trial.TrialState.RUNNING]
    assert _storage.OWNER_ATTR not in study.trials[0].user_attrs
    with _storage.asking(str(out), "s"):  # this driver, alive, asking too: its own trial stays its own
        live = study.ask()
    _storage.recover_dead_drivers(study, str(out))
    trials = study.get_trials(deepcopy=False)
    assert trials[0].state == optuna.trial.TrialState.FAIL
    assert trials[live.number].state == optuna.trial.TrialState.RUNNING
    waiting = [t for t in trials if t.state == optuna.trial.TrialState.WAITING]
    assert [t.user_attrs.get(_storage.RETRY_OF_ATTR) for t in waiting] == [0]
    assert list(out.iterdir()) == []  # the dead driver's marker is gone with it


@pytest.mark.parametrize("change", ["direction", "objective", "space"])
@pytest.mark.slow
def test_reusing_a_study_of_another_search_is_refused(change, tmp_path):
    storage = f"sqlite:///{tmp_path}/study.db"
    base = dict(
        hp_space=SPACE,
        n_trials=2,
        backend="optuna",
        storage=storage,
        study_name="s",
        load_if_exists=True,
        compute_objective="eval_loss",
        direction="minimize",
    )
    hpsearch.hyperparameter_search(_trainer(tmp_path / "a"), **base)
    other = {
        "direction": {"direction": "maximize"},
        "objective": {"compute_objective": "eval_accuracy"},
        "space": {"hp_space": {"learning_rate": spaces.Float(1e-4, 1e-1, log=True)}},
    }[change]
    with pytest.raises(SearchConfigError, match=r"belongs to another search.*new study_name"):
        hpsearch.hyperparameter_search(_trainer(tmp_path / "b"), **{**base, **other})
    assert not (tmp_path / "b").exists()


def test_a_trial_whose_folder_cannot_be_created_fails_before_training_and_the_search_goes_on(tmp_path):
    """Trial 0's name is a file, and so is its fallback name ``<name>-0``: with checkpoints to save there it fails
    at once with the reason (not after training), and trial 1 gets its own folder."""
    out = tmp_path / "out"
    out.mkdir()
    for name in ("taken", "taken-0"):
        (out / name).write_text("a file")
    built = []

    def model_init(trial):
        if trial is not None:  # None: the model the Trainer builds up front
            built.append(trial.number)
        return DigitsMLP(hidden=8)

    best = hpsearch.hyperparameter_search(
        _trainer(out, model_init, save_strategy="steps", save_steps=2),
        hp_space=SPACE,
        n_trials=2,
        backend="random",
        hp_name=lambda trial: "taken",
        compute_objective="eval_loss",
    )
    failed, done = sorted(best.run_summary.records, key=lambda r: r.number)
    assert failed.state is TrialState.FAIL and failed.name == "taken-0", failed
    assert (
        "its folder" in failed.error and "taken-0" in failed.error and "could not be created" in failed.error
    )
    assert (
        done.state is TrialState.COMPLETE
        and done.name == "taken-1"
        and (out / "taken-1" / "checkpoint-4").is_dir()
    )
    assert built == [1]  # trial 0 never trained
    assert (out / "taken").read_text() == (out / "taken-0").read_text() == "a file"


def test_duplicate_trial_names_get_their_own_folders(tmp_path):
    out = tmp_path / "out"
    best = hpsearch.hyperparameter_search(
        _trainer(out, save_strategy="steps", save_steps=2),
        hp_space=SPACE,
        n_trials=3,
        backend="optuna",
        hp_name=lambda trial: "same",
        compute_objective="eval_loss",
    )
    names = [r.name for r in best.run_summary.records]
    assert len(set(names)) == 3 and names[0] == "same", names
    for record in best.run_summary.records:
        assert record.checkpoint is None or Path(record.checkpoint).parent.name == record.name


@pytest.mark.parametrize("exit_kind", ["sys-exit", "keyboard-interrupt"])
def test_exit_inside_a_threaded_trial_fails_only_that_trial(exit_kind, tmp_path):
    def model_init(trial):
        if trial is not None and trial.number == 0:
            if exit_kind == "sys-exit":
                sys.exit(3)
            raise KeyboardInterrupt
        return DigitsMLP(hidden=16)

    best = hpsearch.hyperparameter_search(
        _trainer(tmp_path / "out", model_init),
        hp_space=SPACE,
        n_trials=3,
        backend="optuna",
        n_jobs=2,
        compute_objective="eval_loss",
    )
    records = {r.number: r for r in best.run_summary.records}
    assert len(records) == 3
    assert records[0].state is TrialState.FAIL
    assert ("sys.exit(3)" if exit_kind == "sys-exit" else "KeyboardInterrupt") in records[0].error
    assert all(records[n].state is TrialState.COMPLETE for n in (1, 2))


@pytest.mark.slow
def test_trial_timeout_stops_a_threaded_trial_stuck_before_its_first_step(tmp_path):
    looped_to_the_end: list[bool] = []

    def model_init(trial):
        if trial is not None and trial.number == 0:
            # 30 s of a data set that never arrives. trial_timeout=3 s: trial 1 (the first trial of a cold process,
            # ~0.8 s on a busy 2-core machine) finishes well inside it, and this loop is stopped long before its end.
            for _ in range(600):
                time.sleep(0.05)
            looped_to_the_end.append(True)
        return DigitsMLP(hidden=16)

    best = hpsearch.hyperparameter_search(
        _trainer(tmp_path / "out", model_init),
        hp_space=SPACE,
        n_trials=2,
        backend="optuna",
        n_jobs=2,
        trial_timeout=3.0,
        compute_objective="eval_loss",
    )
    records = {r.number: r for r in best.run_summary.records}
    assert records[0].state is TrialState.FAIL and "trial_timeout" in records[0].error
    assert looped_to_the_end == []  # stopped inside model_init, not after it
    assert records[1].state is TrialState.COMPLETE


@contextlib.contextmanager
def _silent_server():
    """A TCP server on 127.0.0.1 that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                accepted.append(server.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        server.close()


@pytest.mark.slow
def test_a_database_that_never_answers_is_an_error_not_a_hang(tmp_path, monkeypatch):
    from hpsearch.backends.optuna import _storage

    monkeypatch.setattr(_storage, "CONNECT_TIMEOUT_S", 2)
    with _silent_server() as port, pytest.raises(SearchConfigError, match="did not answer") as caught:
        hpsearch.hyperparameter_search(
            _trainer(tmp_path / "out"),
            hp_space=SPACE,
            n_trials=1,
            backend="optuna",
            storage=f"postgresql+psycopg2://me:hunter2@127.0.0.1:{port}/db",
            compute_objective="eval_loss",
        )
    assert "hunter2" not in str(caught.value)
    assert not (tmp_path / "out").exists()


def _counting_trainer(out: Path) -> tuple[Trainer, list[int]]:
    """A trainer whose model_init notes each model it builds in the returned list (emptied of the one the Trainer
    builds when constructed): a search stopped at once built one."""
    built: list[int] = []

    def model_init(trial):
        built.append(1)
        return DigitsMLP(hidden=16)

    trainer = _trainer(out, model_init)
    built.clear()
    return trainer, built


def test_a_metric_no_evaluation_produces_stops_the_search_at_once(tmp_path):
    trainer, built = _counting_trainer(tmp_path / "out")
    with pytest.raises(SearchConfigError, match=r"eval_f1.*not among the evaluation metrics"):
        hpsearch.hyperparameter_search(
            trainer,
            hp_space=SPACE,
            n_trials=5,
            backend="optuna",
            compute_objective="eval_f1",
            max_failed_trials=3,
        )
    assert len(built) == 1  # one trial, not max_failed_trials of them


def test_directions_that_do_not_match_the_objective_values_stop_the_search_at_once(tmp_path):
    """direction names two objectives, compute_objective returns one number: no trial can satisfy that."""
    trainer, built = _counting_trainer(tmp_path / "out")
    with pytest.raises(SearchConfigError, match=r"returned \d+\.\d+, but direction has 2 entries") as caught:
        hpsearch.hyperparameter_search(
            trainer,
            hp_space=SPACE,
            n_trials=5,
            backend="random",
            direction=["minimize", "maximize"],
            compute_objective=lambda metrics: metrics["eval_loss"],
        )
    assert caught.value.about == ("direction",)
    assert len(built) == 1  # one trial, not max_failed_trials of them


class _Unlabelled(torch.utils.data.Dataset):
    """The digits evaluation split without its labels: the model returns no loss, so there is no eval_loss."""

    def __init__(self) -> None:
        self.data = digits_datasets()[1]

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> dict:
        return {"x": self.data[i]["x"]}


def test_a_default_objective_with_no_metric_to_optimize_stops_the_search_at_once(tmp_path):
    """No eval_loss and no other metric (no labels in the evaluation, no compute_metrics): the default objective has
    nothing to optimize in any trial."""
    trainer, built = _counting_trainer(tmp_path / "out")
    trainer.eval_dataset, trainer.compute_metrics = _Unlabelled(), None
    with pytest.raises(
        SearchConfigError, match=r"No metric to optimize among \['epoch', 'eval_runtime'"
    ) as caught:
        hpsearch.hyperparameter_search(trainer, hp_space=SPACE, n_trials=5, backend="random")
    assert caught.value.about == ("compute_objective",)
    assert len(built) == 1  # one trial, not max_failed_trials of them


def test_a_model_init_returning_one_model_object_for_every_trial_fails_the_later_trials(tmp_path):
    """A model built once outside model_init and returned by it: the second trial would start from the weights the
    first trained and its objective would not be its own, so it fails naming the cause; the first one stands."""
    shared = DigitsMLP(hidden=16)
    best = hpsearch.hyperparameter_search(
        _trainer(tmp_path / "out", lambda trial: shared),
        hp_space={"learning_rate": spaces.Float(1e-3, 1e-1, log=True)},
        n_trials=2,
        backend="random",
        compute_objective="eval_loss",
    )
    records = best.run_summary.records
    assert [r.state for r in records] == [TrialState.COMPLETE, TrialState.FAIL]
    assert "model_init returned the model object an earlier run trained" in records[1].error
    assert best.run_id == records[0].trial_id


def test_a_compute_objective_reading_a_missing_metric_fails_naming_the_metrics_there_are(tmp_path):
    """A callable objective that reads a metric the evaluation lacks (no compute_metrics gives it): each trial is
    recorded FAIL with the metrics that exist, and the search goes on to its next trial."""
    out = tmp_path / "out"
    with pytest.raises(hpsearch.HPSearchError, match="No trial completed"):
        hpsearch.hyperparameter_search(
            _trainer(out),
            hp_space=SPACE,
            n_trials=2,
            backend="random",
            compute_objective=lambda metrics: metrics["eval_f1"],
        )
    records = SearchResult.load(out).records
    assert [r.state for r in records] == [TrialState.FAIL, TrialState.FAIL]
    for record in records:
        assert "KeyError" in record.error and "'eval_f1'" in record.error
        assert "['epoch', 'eval_accuracy', 'eval_loss'" in record.error, record.error


@pytest.mark.parametrize("backend", ["optuna", "random"])
def test_the_corrected_search_replaces_one_that_stopped_on_a_misspelt_metric(tmp_path, caplog, backend):
    """A first run with a misspelt metric stops at its first evaluation; rerun with the right name in the same
    output_dir, it is not refused as "an earlier search" (which held nothing but that setup mistake)."""
    out = tmp_path / "out"
    with pytest.raises(SearchConfigError, match="not among the evaluation metrics"):
        hpsearch.hyperparameter_search(
            _trainer(out), hp_space=SPACE, n_trials=2, backend=backend, compute_objective="eval_acc"
        )
    assert [r.extra.get("config_error") for r in SearchResult.load(out).records] == [True]
    with caplog.at_level("WARNING", logger="hpsearch.api"):
        best = hpsearch.hyperparameter_search(
            _trainer(out),
            hp_space=SPACE,
            n_trials=2,
            backend=backend,
            compute_objective="eval_accuracy",
            direction="maximize",
        )
    assert "stopped on a setting error" in caplog.text
    result = SearchResult.load(out)
    assert result.objective == "eval_accuracy" and len(result.records) == 2
    assert all(r.state is TrialState.COMPLETE for r in result.records) and best.objective is not None


def test_hp_space_and_hp_name_that_raise_on_a_later_trial_fail_only_that_trial(tmp_path):
    def hp_space(trial):
        if trial.number == 1:
            raise ValueError("no value for trial 1")
        return {"learning_rate": trial.suggest_float("learning_rate", 1e-3, 1e-1, log=True)}

    def hp_name(trial):
        if trial.number == 2:
            raise RuntimeError("no name for trial 2")
        return f"t{trial.number}"

    best = hpsearch.hyperparameter_search(
        _trainer(tmp_path / "out"),
        hp_space=hp_space,
        hp_name=hp_name,
        n_trials=4,
        backend="optuna",
        compute_objective="eval_loss",
    )
    records = {r.number: r for r in best.run_summary.records}
    assert records[1].state is TrialState.FAIL and "no value for trial 1" in records[1].error
    assert records[2].state is TrialState.FAIL and "no name for trial 2" in records[2].error
    assert records[0].state is TrialState.COMPLETE and records[3].state is TrialState.COMPLETE


class _MemoryCap(TrainerCallback):
    """Fake a device with room for batches of 16: a larger batch raises torch's own out-of-memory error."""

    def on_step_begin(self, args, state, control, **kwargs):
        import torch

        if args.per_device_train_batch_size > 16:
            raise torch.OutOfMemoryError("CUDA out of memory (test cap: batches above 16)")


@pytest.mark.parametrize("rescue", [True, False])
@pytest.mark.slow
def test_an_out_of_memory_trial_is_rescued_by_auto_find_batch_size(rescue, tmp_path):
    space = {"per_device_train_batch_size": spaces.Categorical([8, 64])}
    best = hpsearch.hyperparameter_search(
        _trainer(tmp_path / "out", callbacks=[_MemoryCap()], auto_find_batch_size=rescue),
        hp_space=space,
        n_trials=4,
        backend="random",
        seed=1,
        compute_objective="eval_loss",
        max_failed_trials=4,
    )
    records = best.run_summary.records
    large = [r for r in records if r.params["per_device_train_batch_size"] == 64]
    assert large, "the seed must draw the large batch at least once"
    for record in large:
        if rescue:
            assert record.state is TrialState.COMPLETE and record.extra["per_device_train_batch_size"] == 16
        else:
            assert record.state is TrialState.FAIL and "out of memory" in record.error
    small = [r for r in records if r.params["per_device_train_batch_size"] == 8]
    assert all(r.state is TrialState.COMPLETE and "per_device_train_batch_size" not in r.extra for r in small)


def test_hpsearch_run_with_a_database_that_never_answers_fails_within_the_same_bound(
    tmp_path, monkeypatch, capsys
):
    """The CLI's look for an earlier run in the storage went around the bounded engine and waited for ever."""
    from hpsearch.backends.optuna import _storage
    from hpsearch.cli import main
    from tests.hpsearch.test_cli import ROOT, TINY

    monkeypatch.setattr(_storage, "CONNECT_TIMEOUT_S", 2)
    monkeypatch.chdir(ROOT)
    codes: list[int] = []
    with _silent_server() as port:
        sweep = tmp_path / "sweep.yaml"
        sweep.write_text(
            TINY + f"  storage: postgresql+psycopg2://me:hunter2@127.0.0.1:{port}/db\n"
            f"output_dir: {tmp_path / 'out'}\n",
            encoding="utf-8",
        )
        thread = threading.Thread(target=lambda: codes.append(main(["run", str(sweep)])), daemon=True)
        thread.start()
        thread.join(timeout=60)
        assert not thread.is_alive(), "hpsearch run still waits for a server that never answers"
    err = capsys.readouterr().err
    assert codes == [2], err
    assert "did not answer" in err or "cannot open the storage" in err, err
    assert "hunter2" not in err
    assert not (tmp_path / "out").exists()
