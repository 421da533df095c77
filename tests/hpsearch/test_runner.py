"""`run_trial` and `finish_record` on their own: one trial in this process, no engine (the random backend's Trial)."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time

import pytest

from hpsearch.runner import finish_record, run_trial
from hpsearch.trial import Evaluation, Trial, TrialRecord, TrialState
from tests._digits import DigitsMLP
from tests.hpsearch import _trials
from trainer import TrainerCallback


def random_trial(params, number=0, native=None) -> Trial:
    return Trial(str(number), number, params, "random", native=native)


def test_complete_trial_has_its_evaluations_checkpoint_and_arguments(make_trainer, make_settings, output_dir):
    settings = make_settings(make_trainer(save_strategy="steps", save_steps=2))
    reporter = _trials.RecordingReporter()
    record = run_trial(settings, random_trial({"learning_rate": 0.02, "hidden": 8}), reporter)

    assert record.state is TrialState.COMPLETE and record.error is None
    assert reporter.started is record  # the reporter saw the record before training
    assert (record.trial_id, record.number, record.name) == ("0", 0, "run-0")
    assert record.params == {"learning_rate": 0.02, "hidden": 8}
    assert [e.step for e in record.intermediates] == [2, 4, 6]
    for evaluation in record.intermediates:
        assert evaluation.objective == evaluation.metrics["eval_accuracy"]
    assert record.objective == record.intermediates[-1].objective  # objective_scope 'last'
    assert record.last_step == 6
    assert record.checkpoint == str(output_dir.resolve() / "run-0" / "checkpoint-6")
    assert [r["step"] for r in reporter.reports] == [2, 4, 6]
    assert record.node == socket.gethostname()
    assert record.started is not None and record.finished is not None and record.started <= record.finished
    # The trial's parameters that are arguments reached its TrainingArguments.
    with open(f"{record.checkpoint}/training_args.json", encoding="utf-8") as f:
        args = json.load(f)
    assert args["learning_rate"] == 0.02 and args["run_name"] == "run-0"


def test_a_trial_started_afresh_clears_the_checkpoints_an_unrecorded_attempt_left(
    make_trainer, make_settings, output_dir
):
    """A trial id can come again with nothing recorded of its first attempt: SigOpt's resume after a kill, a study
    deleted by --fresh. That attempt's checkpoints must not outlive it: with save_total_limit they would be the
    "newest" and the rotation would delete the new run's."""
    settings = make_settings(make_trainer(save_strategy="steps", save_steps=2, save_total_limit=1))
    first = run_trial(
        settings, random_trial({"learning_rate": 0.02, "hidden": 8}), _trials.RecordingReporter()
    )
    stale = output_dir / "run-0" / "checkpoint-999"
    (output_dir / "run-0" / "checkpoint-6").rename(stale)  # an attempt that got further, never recorded
    (output_dir / "run-0" / "notes.txt").write_text("mine")
    assert first.state is TrialState.COMPLETE
    record = run_trial(
        settings, random_trial({"learning_rate": 0.03, "hidden": 8}), _trials.RecordingReporter()
    )
    assert record.state is TrialState.COMPLETE
    assert record.checkpoint == str(output_dir.resolve() / "run-0" / "checkpoint-6")
    assert sorted(p.name for p in (output_dir / "run-0").glob("checkpoint-*")) == ["checkpoint-6"]
    assert (output_dir / "run-0" / "notes.txt").read_text() == "mine"  # only checkpoint folders are cleared


def test_a_trial_that_raises_is_recorded_fail_with_the_error(make_trainer, make_settings):
    settings = make_settings(make_trainer(model_init=_trials.ScriptedModelInit({3: "raise"})))
    record = run_trial(settings, random_trial({"learning_rate": 0.02}, number=3), _trials.RecordingReporter())
    assert record.state is TrialState.FAIL
    assert record.error == "ValueError: scripted failure of trial 3"
    assert record.objective is None and record.intermediates == [] and record.checkpoint is None
    assert record.finished is not None


class _RaiseAtStep(TrainerCallback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise RuntimeError(f"broken after step {self.step}")


def test_a_trial_that_fails_mid_training_records_the_last_step_it_finished(make_trainer, make_settings):
    settings = make_settings(make_trainer(callbacks=[_RaiseAtStep(3)]))  # evaluated every 2 steps
    record = run_trial(settings, random_trial({"learning_rate": 0.02}), _trials.RecordingReporter())
    assert record.state is TrialState.FAIL and record.error == "RuntimeError: broken after step 3"
    assert [e.step for e in record.intermediates] == [2]
    assert record.last_step == 3  # the steps after the last evaluation count too


def test_a_nan_objective_fails_the_trial(make_trainer, make_settings):
    settings = make_settings(
        make_trainer(model_init=_trials.ScriptedModelInit({0: "nan"})), "eval_loss", ("minimize",)
    )
    record = run_trial(settings, random_trial({}), _trials.RecordingReporter())
    assert record.state is TrialState.FAIL
    assert "not finite" in record.error and record.objective is None


@pytest.mark.parametrize("evaluated", ["during training", "at the end"])
def test_an_evaluation_of_a_dict_of_eval_datasets_is_one_objective_over_all_their_metrics(
    evaluated, make_trainer, make_settings
):
    """A dict eval_dataset is evaluated dataset by dataset (one on_evaluate each, as in transformers), and the search
    sees one evaluation of their merged metrics, as transformers hands them to its search: an objective may name any
    dataset's metric, and the backend gets one report per evaluation."""
    from torch.utils.data import Subset

    trainer = make_trainer(**({} if evaluated == "during training" else {"eval_strategy": "no"}))
    evaluation = trainer.eval_dataset
    trainer.eval_dataset = {"full": evaluation, "half": Subset(evaluation, range(len(evaluation) // 2))}
    settings = make_settings(trainer, "eval_full_accuracy")
    reporter = _trials.RecordingReporter()
    record = run_trial(settings, random_trial({"learning_rate": 0.02, "hidden": 8}), reporter)
    assert record.state is TrialState.COMPLETE, record.error
    steps = [2, 4, 6] if evaluated == "during training" else [6]
    assert [e.step for e in record.intermediates] == steps
    # One report per evaluation during training (an evaluation after training is no intermediate report).
    assert [r["step"] for r in reporter.reports] == (steps if evaluated == "during training" else [])
    for evaluation in record.intermediates:
        assert {"eval_full_accuracy", "eval_half_accuracy", "eval_full_loss", "eval_half_loss"} <= set(
            evaluation.metrics
        )
        assert evaluation.objective == evaluation.metrics["eval_full_accuracy"]
    assert record.objective == record.intermediates[-1].objective


def test_the_reporter_prunes_the_trial(make_trainer, make_settings):
    settings = make_settings(make_trainer())
    reporter = _trials.RecordingReporter(prune_at=4)
    record = run_trial(settings, random_trial({"learning_rate": 0.02}), reporter)
    assert record.state is TrialState.PRUNED and record.error is None
    assert [e.step for e in record.intermediates] == [2, 4]
    assert record.last_step == 4
    assert record.objective == record.intermediates[-1].objective
    assert record.checkpoint is None  # nothing saved


class _Native:
    """An engine's own trial object as far as `Trial` needs one: a suggest method and an attribute."""

    engine_attribute = "native value"

    def suggest_int(self, name, low, high):
        return high


def _suggesting_model_init(trial=None):
    if trial is None:
        return DigitsMLP()
    layers = trial.suggest_int("layers", 1, 2)
    if trial["learning_rate"] > 0.05:
        raise RuntimeError("too fast")
    return DigitsMLP(hidden=8, layers=layers)


@pytest.mark.parametrize("learning_rate", [0.02, 0.09])
def test_parameters_suggested_in_model_init_are_recorded(make_trainer, make_settings, learning_rate):
    settings = make_settings(make_trainer(model_init=_suggesting_model_init))
    trial = random_trial({"learning_rate": learning_rate}, native=_Native())
    record = run_trial(settings, trial, _trials.RecordingReporter())
    assert record.params == {"learning_rate": learning_rate, "layers": 2}  # failed or not
    assert record.state is (TrialState.COMPLETE if learning_rate < 0.05 else TrialState.FAIL)
    assert trial.engine_attribute == "native value"


def test_a_trial_without_evaluations_is_evaluated_once_at_its_end(make_trainer, make_settings):
    settings = make_settings(make_trainer(eval_strategy="no"))
    reporter = _trials.RecordingReporter()
    record = run_trial(settings, random_trial({}), reporter)
    assert record.state is TrialState.COMPLETE
    assert [e.step for e in record.intermediates] == [6]
    assert record.objective == record.intermediates[0].objective
    assert reporter.reports == []  # an evaluation after training is not an intermediate report


class _Interrupt(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        raise KeyboardInterrupt


def test_keyboard_interrupt_stops_the_search(make_trainer, make_settings):
    settings = make_settings(make_trainer(callbacks=[_Interrupt()]))
    with pytest.raises(KeyboardInterrupt):
        run_trial(settings, random_trial({}), _trials.RecordingReporter())


def test_trial_timeout_interrupts_a_hung_model_init_in_the_main_thread(make_trainer, make_settings):
    woke = []

    def hangs(trial=None):
        if trial is not None:
            time.sleep(60)
            woke.append(True)
        return DigitsMLP()

    settings = make_settings(make_trainer(model_init=hangs), trial_timeout=1)
    record = run_trial(settings, random_trial({}), _trials.RecordingReporter())
    assert record.state is TrialState.FAIL
    assert record.error.startswith("hpsearch.callback.TrialTimeout: trial_timeout")
    assert woke == []  # the alarm interrupted the sleep


class _SlowFirstStep(TrainerCallback):
    def __init__(self, seconds):
        self.seconds = seconds

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == 1:
            time.sleep(self.seconds)


@pytest.mark.slow
def test_trial_timeout_stops_training_at_a_step_outside_the_main_thread(make_trainer, make_settings):
    settings = make_settings(make_trainer(callbacks=[_SlowFirstStep(2.0)]), trial_timeout=1)
    records = []
    worker = threading.Thread(
        target=lambda: records.append(run_trial(settings, random_trial({}), _trials.RecordingReporter()))
    )
    worker.start()
    worker.join()
    (record,) = records
    assert record.state is TrialState.FAIL and "trial_timeout" in record.error
    # Stopped at the deadline, inside the first step (the timer raises in the trial's thread once the step's sleep
    # returns), never trained on to step 6.
    assert record.last_step is None or record.last_step <= 1


class _SlowFailureLog(logging.Handler):
    """A log handler as slow as a remote one: it takes ``seconds`` to write a trial's failure."""

    def __init__(self, seconds):
        super().__init__()
        self.seconds = seconds

    def emit(self, record):
        if "failed" in record.getMessage():
            time.sleep(self.seconds)


@pytest.mark.parametrize("thread", ["main", "worker"])
def test_a_deadline_reached_while_a_failure_is_logged_does_not_escape_the_trial(
    make_trainer, make_settings, thread
):
    """The trial raises before its deadline and logging its failure outlasts the deadline: the watchdog is stopped
    before run_trial handles the error, so the trial is FAIL with its own error and TrialTimeout does not escape
    (it used to end the search, leaving the trial RUNNING in the engine)."""

    def fails(trial=None):
        if trial is not None:
            raise ValueError("the trial's own error")
        return DigitsMLP()

    settings = make_settings(make_trainer(model_init=fails), trial_timeout=0.5)
    handler = _SlowFailureLog(1.5)
    runner_log = logging.getLogger("hpsearch.runner")
    runner_log.addHandler(handler)
    outcome = []
    try:

        def run():
            try:
                outcome.append(run_trial(settings, random_trial({}), _trials.RecordingReporter()))
            except BaseException as error:  # the test reports what escaped
                outcome.append(error)

        if thread == "main":
            run()
        else:
            worker = threading.Thread(target=run)
            worker.start()
            worker.join()
    finally:
        runner_log.removeHandler(handler)
    (record,) = outcome
    assert isinstance(record, TrialRecord), record
    assert record.state is TrialState.FAIL and "the trial's own error" in record.error


# ---------------------------------------------------------------------------------------------- finish_record
def _record(objectives) -> TrialRecord:
    return TrialRecord(
        trial_id="0",
        number=0,
        name="run-0",
        state=TrialState.RUNNING,
        params={},
        intermediates=[
            Evaluation(step=2 * (i + 1), epoch=None, objective=v) for i, v in enumerate(objectives)
        ],
    )


def test_finish_record_takes_the_checkpoint_of_the_chosen_evaluation(make_settings, tmp_path):
    settings = make_settings(objective_scope="best")
    (tmp_path / "checkpoint-4").mkdir()
    checkpoints = {2: str(tmp_path / "checkpoint-2"), 4: str(tmp_path / "checkpoint-4")}
    record = finish_record(settings, _record([0.5, 0.9, 0.7]), TrialState.COMPLETE, checkpoints=checkpoints)
    assert (record.state, record.objective, record.checkpoint) == (TrialState.COMPLETE, 0.9, checkpoints[4])
    # A checkpoint folder that is gone is not claimed.
    record = finish_record(settings, _record([0.9, 0.5]), TrialState.COMPLETE, checkpoints=checkpoints)
    assert record.objective == 0.9 and record.checkpoint is None


def test_finish_record_fails_a_complete_trial_without_a_finite_objective(make_settings):
    record = finish_record(make_settings(), _record([float("nan")]), TrialState.COMPLETE)
    assert record.state is TrialState.FAIL and record.error == "the trial produced no finite objective"
    assert record.finished is not None
    pruned = finish_record(make_settings(), _record([0.3]), TrialState.PRUNED)
    assert pruned.state is TrialState.PRUNED and pruned.objective == 0.3


def test_parameters_model_init_never_reads_are_noted_and_warned_once(make_trainer, make_settings, caplog):
    """A parameter that is no TrainingArguments field and that model_init(trial) does not read changes nothing (a
    misspelt name, most often): the record notes it, and the session warns once per search with a close match."""
    from datetime import datetime, timezone

    from hpsearch.results import SearchResult
    from hpsearch.session import SearchSession

    read_by_iteration = make_settings(
        make_trainer(model_init=lambda trial: DigitsMLP(hidden=dict(trial or {"hidden": 8})["hidden"]))
    )
    record = run_trial(
        read_by_iteration, random_trial({"hidden": 8, "dropout": 0.1}), _trials.RecordingReporter()
    )
    assert "unread_params" not in record.extra  # dict(trial) reads every parameter

    settings = make_settings(make_trainer())  # model_init reads trial["hidden"] only
    params = {"lerning_rate": 0.02, "learning_rate": 0.01, "hidden": 8, "warmup": 0.1}
    records = [
        run_trial(settings, random_trial(params, number=n), _trials.RecordingReporter()) for n in (0, 1)
    ]
    assert records[0].state is TrialState.COMPLETE
    assert records[0].extra["unread_params"] == ["lerning_rate", "warmup"]  # learning_rate is an argument

    session = SearchSession(
        settings, SearchResult("random", ["maximize"], [], started=datetime.now(timezone.utc)), 2
    )
    caplog.set_level("WARNING", logger="hpsearch.session")
    for record in records:
        session.record(record)
    warnings = [m.getMessage() for m in caplog.records if "did not read" in m.getMessage()]
    assert len(warnings) == 1
    assert "['lerning_rate', 'warmup']" in warnings[0] and "'lerning_rate' -> 'learning_rate'?" in warnings[0]


def test_a_huge_error_message_is_cut_in_the_record(make_trainer, make_settings, caplog):
    """A trial whose exception message is megabytes long: the record keeps its start and says how long it was, so
    search.json, the CSVs (Python's csv reader refuses fields over 128 KiB) and the log stay readable."""
    from hpsearch.runner import MAX_ERROR_CHARS

    def fails(trial=None):
        if trial is not None:
            raise ValueError("x" * 5_000_000)
        return DigitsMLP()

    with caplog.at_level(logging.WARNING, logger="hpsearch.runner"):
        record = run_trial(
            make_settings(make_trainer(model_init=fails)), random_trial({}), _trials.RecordingReporter()
        )
    assert record.state is TrialState.FAIL
    assert record.error.startswith("ValueError: xxx") and record.error.endswith(
        "[cut: 5,000,012 characters in all]"
    )
    assert len(record.error) <= MAX_ERROR_CHARS
    assert max(len(r.getMessage()) for r in caplog.records) < MAX_ERROR_CHARS + 200
