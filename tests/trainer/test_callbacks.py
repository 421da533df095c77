"""The callback system: exact event order, the kwargs events receive, control flags, state, handler, defaults."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from torch.utils.data import Subset

from tests._digits import DigitsMLP, accuracy, digits_datasets
from trainer import (
    CallbackHandler,
    DefaultFlowCallback,
    EarlyStoppingCallback,
    PrinterCallback,
    ProgressCallback,
    Trainer,
    TrainerCallback,
    TrainerControl,
    TrainerState,
)

EVENTS = (
    "on_init_end",
    "on_train_begin",
    "on_train_end",
    "on_epoch_begin",
    "on_epoch_end",
    "on_step_begin",
    "on_substep_end",
    "on_pre_optimizer_step",
    "on_optimizer_step",
    "on_step_end",
    "on_evaluate",
    "on_predict",
    "on_save",
    "on_log",
    "on_prediction_step",
)


def _recording_event(name: str):
    def event(self, args, state, control, **kwargs):
        self.events.append(name)
        self.calls.append((name, state.global_step, dict(kwargs)))

    event.__name__ = name
    return event


class Recorder(TrainerCallback):
    """Records every event, the global step it saw and the keyword arguments it got."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.calls: list[tuple[str, int, dict]] = []


for _name in EVENTS:
    setattr(Recorder, _name, _recording_event(_name))


def _small_sets(n_train: int = 12, n_eval: int = 4):
    train, val = digits_datasets()
    return Subset(train, range(n_train)), Subset(val, range(n_eval))


def test_every_documented_event_exists_and_is_a_noop():
    cb = TrainerCallback()
    for name in EVENTS:
        assert getattr(cb, name)(None, TrainerState(), TrainerControl(), model=None) is None


def test_exact_event_order_with_accumulation_eval_logging_and_save(make_args):
    # 12 examples, batch 2 -> 6 micro-batches; accumulation 2 -> 3 optimizer steps. Log every step,
    # evaluate every 2 steps (4 eval examples, batch 2 -> 2 prediction steps), save every 3 steps.
    train, val = _small_sets()
    rec = Recorder()
    args = make_args(
        per_device_train_batch_size=2,
        per_device_eval_batch_size=2,
        gradient_accumulation_steps=2,
        num_train_epochs=1,
        eval_strategy="steps",
        eval_steps=2,
        logging_steps=1,
        save_strategy="steps",
        save_steps=3,
    )
    trainer = Trainer(model=DigitsMLP(), args=args, train_dataset=train, eval_dataset=val, callbacks=[rec])
    assert rec.events == ["on_init_end"]
    trainer.train()

    step = ["on_step_begin", "on_substep_end", "on_pre_optimizer_step", "on_optimizer_step", "on_step_end"]
    evaluation = ["on_prediction_step", "on_prediction_step", "on_log", "on_evaluate"]
    expected = [
        "on_init_end",
        "on_train_begin",
        "on_epoch_begin",
        *step, "on_log",                     # step 1: logged
        *step, "on_log", *evaluation,        # step 2: logged, evaluated
        *step, "on_log", *evaluation, "on_save",  # step 3, the last: logged, evaluated (off eval_steps, as
                                                  # transformers does at the end), saved (save_steps=3)
        "on_epoch_end",
        "on_log",                            # the train metrics
        "on_train_end",
    ]  # fmt: skip
    assert rec.events == expected
    assert trainer.state.global_step == 3

    # Global step as each event saw it: incremented between on_optimizer_step and on_step_end.
    steps_seen = [(name, gs) for name, gs, _ in rec.calls if name in ("on_optimizer_step", "on_step_end")]
    assert steps_seen == [
        ("on_optimizer_step", 0), ("on_step_end", 1),
        ("on_optimizer_step", 1), ("on_step_end", 2),
        ("on_optimizer_step", 2), ("on_step_end", 3),
    ]  # fmt: skip

    # Keyword arguments: the live objects during training, metrics on on_evaluate, logs on on_log.
    for name, _, kwargs in rec.calls[1:]:
        assert kwargs["model"] is trainer.model, name
        assert kwargs["optimizer"] is trainer.optimizer, name
        assert kwargs["lr_scheduler"] is trainer.lr_scheduler, name
        assert isinstance(trainer.optimizer, torch.optim.Optimizer)
        if name != "on_train_end":
            assert kwargs["train_dataloader"] is not None, name
            assert len(kwargs["train_dataloader"]) == 6
    assert {"model", "optimizer", "lr_scheduler", "train_dataloader", "eval_dataloader"} <= set(
        rec.calls[0][2]
    )
    pred_kwargs = [kw for name, _, kw in rec.calls if name == "on_prediction_step"]
    assert all(kw["eval_dataloader"] is not None for kw in pred_kwargs)
    eval_kwargs = [kw for name, _, kw in rec.calls if name == "on_evaluate"]
    assert len(eval_kwargs) == 2 and all("eval_loss" in kw["metrics"] for kw in eval_kwargs)
    logs = [kw["logs"] for name, _, kw in rec.calls if name == "on_log"]
    assert [set(log) >= {"loss", "learning_rate", "epoch"} for log in logs[:1]] == [True]
    assert "eval_loss" in logs[2]
    assert "train_loss" in logs[-1] and "train_runtime" in logs[-1]
    assert [h["step"] for h in trainer.state.log_history] == [
        1,
        2,
        2,
        3,
        3,
        3,
    ]  # the last step: loss, eval, train metrics


def test_event_order_by_epoch_with_predict(make_args):
    train, val = _small_sets(8, 2)
    rec = Recorder()
    args = make_args(
        per_device_train_batch_size=4, per_device_eval_batch_size=2, num_train_epochs=2,
        eval_strategy="epoch", logging_strategy="epoch",
    )  # fmt: skip
    trainer = Trainer(model=DigitsMLP(), args=args, train_dataset=train, eval_dataset=val, callbacks=[rec])
    trainer.train()
    step = ["on_step_begin", "on_pre_optimizer_step", "on_optimizer_step", "on_step_end"]
    epoch = [
        "on_epoch_begin",
        *step,
        *step,
        "on_epoch_end",
        "on_log",
        "on_prediction_step",
        "on_log",
        "on_evaluate",
    ]
    assert rec.events == ["on_init_end", "on_train_begin", *epoch, *epoch, "on_log", "on_train_end"]

    rec.events.clear()
    out = trainer.predict(val)
    assert rec.events == ["on_prediction_step", "on_predict"]
    (predict_kwargs,) = [kw for name, _, kw in rec.calls if name == "on_predict"]
    assert predict_kwargs["metrics"] is out.metrics


class StopAfterFirstStep(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        return {"should_training_stop": True}


def test_mapping_returning_callback_stops_training(make_args):
    train, _ = _small_sets(40)
    args = make_args(per_device_train_batch_size=4, num_train_epochs=3)
    trainer = Trainer(model=DigitsMLP(), args=args, train_dataset=train, callbacks=[StopAfterFirstStep])
    out = trainer.train()
    assert out.global_step == 1


@pytest.mark.parametrize("returned", [42, "stop", {"bogus": 1}])
def test_invalid_callback_return_names_callback_and_event(make_args, returned):
    class BadReturn(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            return returned

    train, _ = _small_sets()
    trainer = Trainer(
        model=DigitsMLP(), args=make_args(max_steps=2), train_dataset=train, callbacks=[BadReturn]
    )
    with pytest.raises((TypeError, ValueError)) as info:
        trainer.train()
    assert "BadReturn.on_step_end" in str(info.value)


def test_callback_returning_a_control_replaces_it():
    class NewControl(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            return TrainerControl(should_log=True)

    handler = CallbackHandler([DefaultFlowCallback, NewControl])
    original = TrainerControl()
    state = TrainerState(max_steps=10, logging_steps=5, global_step=1)

    class Args:
        logging_first_step = False
        logging_strategy = "no"
        eval_strategy = "no"
        save_strategy = "no"
        eval_delay = 0

    result = handler.on_step_end(Args(), state, original)
    assert result is not original and result.should_log


def test_callback_handler_takes_transformers_positional_order():
    seen = {}

    class Record(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            seen.update(kwargs)

    model, processing_class, optimizer, lr_scheduler = object(), object(), object(), object()
    handler = CallbackHandler([DefaultFlowCallback, Record], model, processing_class, optimizer, lr_scheduler)
    handler.on_train_begin(None, TrainerState(), TrainerControl())
    assert seen["model"] is model and seen["processing_class"] is processing_class
    assert seen["optimizer"] is optimizer and seen["lr_scheduler"] is lr_scheduler


def test_trainer_and_its_copies_hand_callbacks_their_own_objects(make_args):
    class Tokenizer:
        def pad(
            self, features, **kwargs
        ):  # what makes a processing_class a tokenizer to the default collator
            raise AssertionError("not called")

    tokenizer = Tokenizer()
    trainer = Trainer(model=DigitsMLP(), args=make_args(), processing_class=tokenizer)
    copies = (trainer.for_trial(make_args()), trainer.recipe())
    for handler in (trainer.callback_handler, *(copy.callback_handler for copy in copies)):
        assert (
            handler.processing_class is tokenizer
            and handler.optimizer is None
            and handler.lr_scheduler is None
        )
    assert trainer.callback_handler.model is trainer.model


# ------------------------------------------------------------------ TrainerControl / TrainerState
def _all_set() -> TrainerControl:
    return TrainerControl(**{f.name: True for f in dataclasses.fields(TrainerControl)})


def test_trainer_control_reset_rules():
    handler = CallbackHandler([DefaultFlowCallback])
    state = TrainerState()

    control = handler.on_train_begin(None, state, _all_set())
    assert not control.should_training_stop
    assert (
        control.should_epoch_stop and control.should_log and control.should_evaluate and control.should_save
    )

    control = handler.on_epoch_begin(None, state, _all_set())
    assert not control.should_epoch_stop
    assert (
        control.should_training_stop
        and control.should_log
        and control.should_evaluate
        and control.should_save
    )

    control = handler.on_step_begin(None, state, _all_set())
    assert not (control.should_log or control.should_evaluate or control.should_save)
    assert control.should_training_stop and control.should_epoch_stop

    control = handler.on_log(None, state, _all_set(), logs={})
    assert not control.should_log and control.should_evaluate and control.should_save
    control = handler.on_evaluate(None, state, _all_set(), metrics={})
    assert not control.should_evaluate and control.should_log and control.should_save
    control = handler.on_save(None, state, _all_set())
    assert not control.should_save and control.should_log and control.should_evaluate


def test_trainer_control_state_round_trip():
    control = TrainerControl(should_training_stop=True, should_log=True)
    assert TrainerControl.from_state(control.state()) == control


def test_trainer_state_json_round_trip(tmp_path):
    state = TrainerState(
        epoch=1.5,
        global_step=7,
        max_steps=10,
        log_history=[{"loss": 0.5, "step": 5, "epoch": 1.0}],
        best_metric=0.25,
        best_global_step=5,
        trial_name="run-3",
        trial_params={"learning_rate": 1e-3},
        stateful_callbacks={"EarlyStoppingCallback": {"args": {}, "attributes": {"best_value": 0.1}}},
    )
    path = tmp_path / "trainer_state.json"
    state.save_to_json(str(path))
    assert TrainerState.load_from_json(str(path)) == state


def test_trainer_state_defaults_and_a_list_of_stateful_callbacks_as_transformers():
    # transformers 5: epoch starts at 0, None means empty, callbacks given as a list are stored as their states.
    assert TrainerState().epoch == 0
    empty = TrainerState(log_history=None, stateful_callbacks=None)
    assert (empty.log_history, empty.stateful_callbacks) == ([], {})
    first, second = EarlyStoppingCallback(2), EarlyStoppingCallback(3)
    state = TrainerState(stateful_callbacks=[first, second, TrainerControl(should_save=True)])
    assert state.stateful_callbacks == {
        "EarlyStoppingCallback": [first.state(), second.state()],
        "TrainerControl": TrainerControl(should_save=True).state(),
    }
    with pytest.raises(TypeError, match="ExportableState"):
        TrainerState(stateful_callbacks=[Recorder()])


def test_trainer_state_has_the_documented_fields():
    names = {f.name for f in dataclasses.fields(TrainerState)}
    documented = {
        "epoch", "global_step", "max_steps", "logging_steps", "eval_steps", "save_steps", "train_batch_size",
        "num_train_epochs", "num_input_tokens_seen", "total_flos", "log_history", "best_metric",
        "best_model_checkpoint", "is_local_process_zero", "is_world_process_zero", "is_hyper_param_search",
        "trial_name", "trial_params", "stateful_callbacks",
    }  # fmt: skip
    assert documented <= names


# ------------------------------------------------------------------ CallbackHandler
def test_default_callbacks_in_order(make_args):
    train, _ = _small_sets()
    quiet = Trainer(model=DigitsMLP(), args=make_args(disable_tqdm=True), train_dataset=train)
    assert [type(cb) for cb in quiet.callback_handler.callbacks] == [DefaultFlowCallback, PrinterCallback]
    rec = Recorder()
    bars = Trainer(
        model=DigitsMLP(), args=make_args(disable_tqdm=False), train_dataset=train, callbacks=[rec]
    )
    assert [type(cb) for cb in bars.callback_handler.callbacks] == [
        DefaultFlowCallback,
        Recorder,
        ProgressCallback,
    ]


def test_add_pop_remove_by_class_and_instance(make_args):
    train, _ = _small_sets()
    rec = Recorder()
    trainer = Trainer(model=DigitsMLP(), args=make_args(), train_dataset=train, callbacks=[rec])
    handler = trainer.callback_handler

    assert trainer.pop_callback(Recorder) is rec
    assert trainer.pop_callback(Recorder) is None
    trainer.add_callback(rec)
    assert handler.callbacks[-1] is rec
    assert trainer.pop_callback(rec) is rec

    trainer.add_callback(Recorder)  # a class is instantiated
    added = handler.callbacks[-1]
    assert type(added) is Recorder and added is not rec
    trainer.remove_callback(added)
    assert not any(isinstance(cb, Recorder) for cb in handler.callbacks)

    trainer.add_callback(rec)
    trainer.remove_callback(Recorder)
    assert not any(isinstance(cb, Recorder) for cb in handler.callbacks)

    trainer.remove_callback(PrinterCallback)
    assert [type(cb) for cb in handler.callbacks] == [DefaultFlowCallback]
    with pytest.raises(TypeError, match="TrainerCallback"):
        trainer.add_callback(object())


def test_pop_by_instance_leaves_another_instance_of_the_class(make_args):
    train, _ = _small_sets()
    first, second = Recorder(), Recorder()
    trainer = Trainer(model=DigitsMLP(), args=make_args(), train_dataset=train, callbacks=[first, second])
    assert trainer.pop_callback(second) is second
    assert [cb for cb in trainer.callback_handler.callbacks if isinstance(cb, Recorder)] == [first]


def test_progress_callback_runs_with_tqdm(make_args, capsys):
    train, val = _small_sets(16, 4)
    args = make_args(
        disable_tqdm=False,
        per_device_train_batch_size=4,
        num_train_epochs=2,
        eval_strategy="epoch",
        logging_steps=2,
    )
    trainer = Trainer(
        model=DigitsMLP(), args=args, train_dataset=train, eval_dataset=val, compute_metrics=accuracy
    )
    trainer.train()
    trainer.evaluate()
    trainer.predict(val)
    progress = trainer.pop_callback(ProgressCallback)
    assert progress.training_bar is None and progress.prediction_bar is None  # closed
    err = capsys.readouterr().err
    assert "8/8" in err  # the training bar reached max_steps


def test_printer_callback_prints_logs(make_args, capsys):
    train, _ = _small_sets()
    trainer = Trainer(model=DigitsMLP(), args=make_args(max_steps=2, logging_steps=1), train_dataset=train)
    trainer.train()
    out = capsys.readouterr().out
    assert "'loss'" in out and "train_runtime" in out


# ------------------------------------------------------------------ EarlyStoppingCallback
def test_early_stopping_stops_when_the_metric_stops_improving(make_args):
    train, val = _small_sets(64, 16)
    # learning_rate=0: the weights never move, so eval_loss never improves after the first evaluation.
    args = make_args(
        learning_rate=0.0,
        per_device_train_batch_size=4,
        num_train_epochs=2,
        eval_strategy="steps",
        eval_steps=1,
        metric_for_best_model="eval_loss",
    )
    early = EarlyStoppingCallback(early_stopping_patience=2)
    trainer = Trainer(model=DigitsMLP(), args=args, train_dataset=train, eval_dataset=val, callbacks=[early])
    out = trainer.train()
    # Evaluation 1 sets the best, 2 and 3 do not improve -> patience 2 is exhausted at step 3 (of 32).
    assert out.global_step == 3
    assert early.early_stopping_patience_counter == 2
    assert trainer.state.best_metric == pytest.approx(early.best_value)


def test_early_stopping_with_an_improving_metric_runs_to_the_end(make_args):
    train, val = _small_sets(64, 16)
    args = make_args(
        learning_rate=1e-2, per_device_train_batch_size=16, num_train_epochs=3, eval_strategy="epoch",
        metric_for_best_model="accuracy",
    )  # fmt: skip
    early = EarlyStoppingCallback(early_stopping_patience=3, early_stopping_threshold=0.0)
    trainer = Trainer(
        model=DigitsMLP(),
        args=args,
        train_dataset=train,
        eval_dataset=val,
        compute_metrics=accuracy,
        callbacks=[early],
    )
    assert trainer.train().global_step == 12


def test_early_stopping_state_round_trip():
    early = EarlyStoppingCallback(early_stopping_patience=3, early_stopping_threshold=0.01)
    early.early_stopping_patience_counter = 2
    early.best_value = 0.5
    restored = EarlyStoppingCallback.from_state(early.state())
    assert restored.early_stopping_patience == 3
    assert restored.early_stopping_threshold == 0.01
    assert restored.early_stopping_patience_counter == 2
    assert restored.best_value == 0.5


def test_early_stopping_check_metric_value_counts_against_the_states_best():
    # transformers' public hook: on_evaluate calls it, subclasses and tests call it directly.
    class Args:
        greater_is_better = True

    early = EarlyStoppingCallback(early_stopping_patience=3)
    early.check_metric_value(Args(), TrainerState(best_metric=0.9), TrainerControl(), 0.8)
    assert early.early_stopping_patience_counter == 1
    early.check_metric_value(Args(), TrainerState(best_metric=0.8), TrainerControl(), 0.95)
    assert early.early_stopping_patience_counter == 0
    strict = EarlyStoppingCallback(early_stopping_patience=3, early_stopping_threshold=0.1)
    strict.check_metric_value(
        Args(), TrainerState(best_metric=0.8), TrainerControl(), 0.85
    )  # better, not by 0.1
    assert strict.early_stopping_patience_counter == 1
    Args.greater_is_better = False
    strict.check_metric_value(Args(), TrainerState(), TrainerControl(), 3.0)  # no best yet: improves
    assert strict.early_stopping_patience_counter == 0


def test_early_stopping_needs_metric_for_best_model(make_args):
    train, val = _small_sets()
    args = make_args(eval_strategy="steps", eval_steps=1, max_steps=2)
    trainer = Trainer(
        model=DigitsMLP(),
        args=args,
        train_dataset=train,
        eval_dataset=val,
        callbacks=[EarlyStoppingCallback()],
    )
    with pytest.raises(ValueError, match="metric_for_best_model"):
        trainer.train()


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"early_stopping_patience": 0}, "early_stopping_patience"),
        ({"early_stopping_threshold": -1.0}, "early_stopping_threshold"),
        ({"early_stopping_threshold": math.nan}, "early_stopping_threshold"),
    ],
)
def test_early_stopping_rejects_bad_arguments(kwargs, field):
    with pytest.raises(ValueError, match=field):
        EarlyStoppingCallback(**kwargs)


class _Counts(TrainerCallback):
    def __init__(self) -> None:
        self.steps: list[int] = []

    def on_step_begin(self, args, state, control, **kwargs):
        self.steps.append(state.global_step)


def test_step_events_follow_callbacks_added_removed_replaced_or_patched_during_and_between_runs(make_args):
    # The handler keeps, per train() and list of callbacks, which callbacks override the per-step events; every
    # change to that list (or a method patched between runs) must reach the next event.
    train, _ = _small_sets(n_train=12)
    late, replaced, replacement, patched = _Counts(), _Counts(), _Counts(), _Counts()

    class Editor(TrainerCallback):
        active = True

        def on_step_end(self, args, state, control, **kwargs):
            handler = trainer.callback_handler
            if not self.active:
                return
            if state.global_step == 1:
                handler.add_callback(late)  # joins at step 1: sees the step-2 and later step_begin events
            if state.global_step == 2:
                handler.callbacks[handler.callbacks.index(replaced)] = replacement
            if state.global_step == 3:
                handler.remove_callback(late)

    trainer = Trainer(
        model=DigitsMLP(),
        args=make_args(max_steps=5, per_device_train_batch_size=2),
        train_dataset=train,
        callbacks=[Editor(), replaced],
    )
    trainer.train()
    assert late.steps == [1, 2]  # step_begin of the 2nd and 3rd steps (global_step 1 and 2 when they begin)
    assert replaced.steps == [0, 1]
    assert replacement.steps == [2, 3, 4]

    # Between two runs, the list unchanged: an event set on a callback's instance.
    Editor.active = False
    seen: list[int] = []
    replacement.on_optimizer_step = lambda args, state, control, **kwargs: seen.append(state.global_step)  # type: ignore[method-assign]
    trainer.train()
    assert seen == [0, 1, 2, 3, 4]
    # A callback appended to the list directly, not through the handler.
    trainer.callback_handler.callbacks.append(patched)
    trainer.train()
    assert patched.steps == [0, 1, 2, 3, 4]


class _OptimizerEvents(TrainerCallback):
    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self.events.append(("pre", state.global_step))

    def on_optimizer_step(self, args, state, control, **kwargs):
        self.events.append(("post", state.global_step))


def test_a_callback_added_during_a_step_gets_the_rest_of_that_steps_events(make_args):
    # The loop skips step events no callback overrides, and asks again after anything that may add a callback: a
    # callback's event and the training step.
    train, _ = _small_sets(n_train=12)
    in_begin, in_step, in_pre = _OptimizerEvents(), _OptimizerEvents(), _OptimizerEvents()

    class Adder(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            if state.global_step == 1:
                trainer.callback_handler.add_callback(in_begin)

    class AdderAtPre(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, **kwargs):
            if state.global_step == 3 and in_pre not in trainer.callback_handler.callbacks:
                trainer.callback_handler.add_callback(in_pre)

    class StepAdder(Trainer):
        def training_step(self, model, inputs, num_items_in_batch=None):
            if self.state.global_step == 2:
                self.callback_handler.add_callback(in_step)
            return super().training_step(model, inputs, num_items_in_batch)

    trainer = StepAdder(
        model=DigitsMLP(),
        args=make_args(max_steps=5, per_device_train_batch_size=2),
        train_dataset=train,
        callbacks=[Adder()],
    )
    trainer.train()
    assert in_begin.events == [(kind, step) for step in (1, 2, 3, 4) for kind in ("pre", "post")]
    assert in_step.events == [(kind, step) for step in (2, 3, 4) for kind in ("pre", "post")]
    # Added in the last callback of an event: the next event of the same step reaches it.
    trainer.callback_handler.callbacks[:] = [
        cb for cb in trainer.callback_handler.callbacks if not isinstance(cb, _OptimizerEvents)
    ]
    trainer.add_callback(AdderAtPre())
    trainer.train()
    assert in_pre.events == [("post", 3), ("pre", 4), ("post", 4)]


def test_every_callback_gets_the_event_arguments_whatever_an_earlier_one_did_with_them(make_args):
    train, _ = _small_sets(n_train=4)
    seen: list[dict] = []

    class Greedy(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            kwargs.pop("model")
            kwargs["optimizer"] = "mine"

    class Reader(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            seen.append(dict(kwargs))

        def on_log(self, args, state, control, logs=None, **kwargs):
            seen.append({"logs": logs, **kwargs})

    trainer = Trainer(
        model=DigitsMLP(),
        args=make_args(max_steps=1, per_device_train_batch_size=2, logging_steps=1),
        train_dataset=train,
        callbacks=[Greedy(), Reader()],
        processing_class="a tokenizer",
    )
    trainer.train()
    step, log = seen[0], seen[1]
    assert step["model"] is trainer.model and step["optimizer"] is trainer.optimizer
    assert step["lr_scheduler"] is trainer.lr_scheduler and step["train_dataloader"] is not None
    assert step["processing_class"] == step["tokenizer"] == "a tokenizer" and step["eval_dataloader"] is None
    assert set(step) == {
        "model",
        "optimizer",
        "lr_scheduler",
        "train_dataloader",
        "eval_dataloader",
        "processing_class",
        "tokenizer",
    }
    assert "loss" in log["logs"] and log["model"] is trainer.model  # an event's own arguments join them
    handler = trainer.callback_handler
    handler.processing_class = "another"
    assert handler.processing_class == "another" and handler._event_kwargs["tokenizer"] == "another"
    assert handler.train_dataloader is None  # train() let go of its loader
    # A copy of the handler has its own arguments, as it had its own attributes.
    import copy

    clone = copy.copy(handler)
    clone.model = "the copy's"
    assert handler.model is trainer.model and clone.model == "the copy's"


def test_events_after_an_evaluation_or_training_get_its_loader_as_transformers_hands_it(make_args):
    # on_evaluate/on_predict and the events after them get the loader the evaluation read, as in transformers
    # (train() lets go of its own loader once on_train_end has run; transformers keeps it).
    train, val = _small_sets(n_train=4, n_eval=4)
    seen: dict[str, tuple[bool, bool]] = {}

    class Loaders(TrainerCallback):
        def _note(self, name, kwargs):
            seen[name] = (kwargs["train_dataloader"] is not None, kwargs["eval_dataloader"] is not None)

        def on_evaluate(self, args, state, control, **kwargs):
            self._note("evaluate", kwargs)

        def on_save(self, args, state, control, **kwargs):
            self._note("save", kwargs)

        def on_train_end(self, args, state, control, **kwargs):
            self._note("train_end", kwargs)

        def on_predict(self, args, state, control, **kwargs):
            self._note("predict", kwargs)

    args = make_args(
        max_steps=2,
        per_device_train_batch_size=2,
        eval_strategy="steps",
        eval_steps=2,
        save_strategy="steps",
        save_steps=2,
    )
    trainer = Trainer(
        model=DigitsMLP(), args=args, train_dataset=train, eval_dataset=val, callbacks=[Loaders()]
    )
    trainer.train()
    trainer.predict(val)
    assert seen == {
        "evaluate": (True, True),
        "save": (True, True),
        "train_end": (True, True),
        "predict": (False, True),
    }
    trainer.release_memory()
    assert (
        trainer.callback_handler.train_dataloader is None and trainer.callback_handler.eval_dataloader is None
    )
