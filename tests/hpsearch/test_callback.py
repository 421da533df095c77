"""The reporting callback on a real digits Trainer: the objective of every evaluation, when it is reported (with
which checkpoint), and pruning. No engine: the reporter is a `TrialReporter` that keeps what it is told."""

from __future__ import annotations

import pytest

from hpsearch.callback import ReportingCallback
from hpsearch.trial import TrialRecord, TrialState
from tests.hpsearch import _trials


def attach(trainer, settings, reporter) -> tuple[ReportingCallback, TrialRecord]:
    record = TrialRecord(trial_id="0", number=0, name="run-0", state=TrialState.RUNNING, params={})
    callback = ReportingCallback(settings, reporter, record)
    trainer.add_callback(callback)
    return callback, record


@pytest.mark.slow
def test_the_objective_of_every_evaluation_is_recorded_and_reported(make_trainer, make_settings):
    trainer = make_trainer()
    settings = make_settings(
        trainer, compute_objective=lambda m: 2 * m["eval_loss"], directions=("minimize",)
    )
    reporter = _trials.RecordingReporter()
    callback, record = attach(trainer, settings, reporter)
    trainer.train()
    assert [e.step for e in record.intermediates] == [2, 4, 6]
    for evaluation, report in zip(record.intermediates, reporter.reports):
        assert evaluation.objective == 2 * evaluation.metrics["eval_loss"]
        assert report["objective"] == evaluation.objective and report["step"] == evaluation.step
        assert report["metrics"] == evaluation.metrics
        assert evaluation.epoch == pytest.approx(evaluation.step / _trials.STEPS_PER_EPOCH, rel=0.05)
        assert report["checkpoint"] is None  # nothing is saved
    assert len(reporter.reports) == 3
    assert record.last_step == 6 and not callback.pruned


def test_a_report_waits_for_the_checkpoint_saved_at_its_step(make_trainer, make_settings, output_dir):
    trainer = make_trainer(save_strategy="steps", save_steps=4)
    reporter = _trials.RecordingReporter()
    callback, _ = attach(trainer, make_settings(trainer), reporter)
    trainer.train()
    # Saved every 4 steps and at the end of training (step 6); step 2 is evaluated only.
    saved = {step: str(output_dir / f"checkpoint-{step}") for step in (4, 6)}
    assert [(r["step"], r["checkpoint"]) for r in reporter.reports] == [
        (2, None),
        (4, saved[4]),
        (6, saved[6]),
    ]
    assert [r["checkpoint_exists"] for r in reporter.reports] == [False, True, True]  # reported after on_save
    assert callback.checkpoints == saved


def test_every_report_carries_its_checkpoint_when_saving_at_every_evaluation(
    make_trainer, make_settings, output_dir
):
    trainer = make_trainer(save_strategy="steps", save_steps=2)
    reporter = _trials.RecordingReporter()
    callback, _ = attach(trainer, make_settings(trainer), reporter)
    trainer.train()
    assert [r["checkpoint"] for r in reporter.reports] == [
        str(output_dir / f"checkpoint-{s}") for s in (2, 4, 6)
    ]
    assert all(r["checkpoint_exists"] for r in reporter.reports)
    assert sorted(callback.checkpoints) == [2, 4, 6]


def test_prune_stops_training(make_trainer, make_settings):
    trainer = make_trainer()
    reporter = _trials.RecordingReporter(prune_at=2)
    callback, record = attach(trainer, make_settings(trainer), reporter)
    trainer.train()
    assert callback.pruned
    assert trainer.state.global_step == 2
    assert [e.step for e in record.intermediates] == [2]
    assert not callback.training  # on_train_end ran


def test_an_evaluation_after_training_is_recorded_not_reported(make_trainer, make_settings):
    trainer = make_trainer()
    reporter = _trials.RecordingReporter()
    _, record = attach(trainer, make_settings(trainer), reporter)
    trainer.train()
    trainer.evaluate()
    assert [e.step for e in record.intermediates] == [2, 4, 6, 6]
    assert len(reporter.reports) == 3


def test_several_objectives_are_one_list_per_evaluation(make_trainer, make_settings):
    trainer = make_trainer()
    settings = make_settings(
        trainer,
        compute_objective=lambda m: (m["eval_loss"], m["eval_accuracy"]),
        directions=("minimize", "maximize"),
    )
    reporter = _trials.RecordingReporter()
    _, record = attach(trainer, settings, reporter)
    trainer.train()
    for evaluation in record.intermediates:
        assert evaluation.objective == [evaluation.metrics["eval_loss"], evaluation.metrics["eval_accuracy"]]
    assert [r["objective"] for r in reporter.reports] == [e.objective for e in record.intermediates]


def test_a_non_finite_objective_raises_at_its_evaluation(make_trainer, make_settings):
    trainer = make_trainer()
    settings = make_settings(trainer, compute_objective=lambda m: float("inf"))
    attach(trainer, settings, _trials.RecordingReporter())
    with pytest.raises(ValueError, match="not finite"):
        trainer.train()
