"""The callback system: `TrainerState`, `TrainerControl`, `TrainerCallback` and the one dispatcher, `CallbackHandler`.

Callbacks observe the loop and flip switches on `TrainerControl`; the loop alone acts on them. Every event is a
no-op by default, so a callback implements only what it needs.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._training_args import IntervalStrategy, SaveStrategy

if TYPE_CHECKING:
    from ._training_args import TrainingArguments

__all__ = [
    "CallbackHandler",
    "DefaultFlowCallback",
    "EarlyStoppingCallback",
    "ExportableState",
    "PrinterCallback",
    "ProgressCallback",
    "TrainerCallback",
    "TrainerControl",
    "TrainerState",
]

logger = logging.getLogger(__name__)


class ExportableState:
    """Mixin for callbacks (and `TrainerControl`) whose state is saved in checkpoints.

    `state()` returns ``{"args": <constructor kwargs>, "attributes": <mutable attributes>}``; `from_state` rebuilds
    an equal object. The trainer stores these under ``TrainerState.stateful_callbacks`` when it saves.
    """

    def state(self) -> dict[str, Any]:
        raise NotImplementedError(f"{type(self).__name__} must implement state() to be saved in checkpoints.")

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> Any:
        instance = cls(**state.get("args", {}))
        for key, value in state.get("attributes", {}).items():
            setattr(instance, key, value)
        return instance


@dataclass
class TrainerState:
    """The state of a training run, handed to every callback event and saved in every checkpoint.

    ``epoch`` is fractional (2.5 = halfway through the third epoch) and 0 before training, as in transformers 5. ``logging_steps``/``eval_steps``/``save_steps``
    are the resolved integer intervals (ratios in `TrainingArguments` are turned into steps once ``max_steps``
    is known). ``log_history`` holds every dict passed to `Trainer.log`, with its ``step``.
    """

    epoch: float | None = 0
    global_step: int = 0
    max_steps: int = 0
    logging_steps: int = 500
    eval_steps: int = 500
    save_steps: int = 500
    train_batch_size: int | None = None
    num_train_epochs: int = 0
    num_input_tokens_seen: int = 0
    total_flos: float = 0
    log_history: list[dict[str, float]] = field(default_factory=list)
    best_metric: float | None = None
    best_global_step: int | None = None
    best_model_checkpoint: str | None = None
    is_local_process_zero: bool = True
    is_world_process_zero: bool = True
    is_hyper_param_search: bool = False
    trial_name: str | None = None
    trial_params: dict[str, Any] | None = None
    stateful_callbacks: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # As transformers: None means empty, and a list of stateful callbacks is stored as their states (a list of
        # states under the class name when a class appears more than once).
        if self.log_history is None:
            self.log_history = []
        callbacks: Any = self.stateful_callbacks
        if callbacks is None:
            self.stateful_callbacks = {}
        elif not isinstance(callbacks, Mapping):
            states: dict[str, Any] = {}
            for callback in callbacks:
                if not isinstance(callback, ExportableState):
                    raise TypeError(
                        f"stateful_callbacks holds a {type(callback).__name__}, which is not an ExportableState; "
                        "pass only callbacks with state()/from_state (or their saved states in a dict)."
                    )
                name = type(callback).__name__
                if name in states:
                    earlier = states[name]
                    states[name] = [*(earlier if isinstance(earlier, list) else [earlier]), callback.state()]
                else:
                    states[name] = callback.state()
            self.stateful_callbacks = states

    def save_to_json(self, json_path: str) -> None:
        text = json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True, default=json_default) + "\n"
        with open(json_path, "w", encoding="utf-8") as f:
            f.write(text)

    @classmethod
    def load_from_json(cls, json_path: str) -> TrainerState:
        """The state saved in ``json_path``; `ValueError` naming the file when it is not a saved state."""
        try:
            with open(json_path, encoding="utf-8") as f:
                data = json.load(f)
            if not isinstance(data, dict):
                raise TypeError(f"expected a JSON object, got {type(data).__name__}")
            known = {f.name for f in dataclasses.fields(cls)}
            return cls(**{k: v for k, v in data.items() if k in known})
        except (ValueError, TypeError) as error:
            raise ValueError(
                f"{json_path!r} is not a readable trainer state ({type(error).__name__}: {error}); the checkpoint is "
                "corrupt: resume from another checkpoint (resume_from_checkpoint=<folder>) or delete it."
            ) from None

    def compute_steps(self, args: TrainingArguments, max_steps: int) -> None:
        """Resolve the logging/eval/save intervals (ratios of ``max_steps`` below 1) into steps."""
        for name in ("logging", "eval", "save"):
            value = getattr(args, f"{name}_steps")
            if value is None:
                continue
            steps = math.ceil(max_steps * value) if value < 1 else int(value)
            setattr(self, f"{name}_steps", max(steps, 1))

    def init_training_references(
        self, trainer: Any, max_steps: int, num_train_epochs: int, trial: Any
    ) -> None:
        self.max_steps = max_steps
        self.num_train_epochs = num_train_epochs
        self.train_batch_size = trainer.args.per_device_train_batch_size
        self.is_hyper_param_search = trial is not None
        if trial is not None:
            self.trial_name = getattr(trial, "name", None)
            self.trial_params = dict(getattr(trial, "params", {}) or {})


def json_default(value: Any) -> Any:
    """JSON for a ``log_history`` value ``json`` cannot encode, in ``trainer_state.json`` and ``log_history.jsonl``.

    numpy scalars and other number-likes sneak into ``log_history`` through ``compute_metrics``. (hpsearch keeps
    its own, wider default in ``hpsearch/_files.py``: it must not import trainer, which loads torch.)
    """
    if hasattr(
        value, "tolist"
    ):  # an array or tensor (a confusion matrix) as lists, a numpy scalar as a number
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    return str(value)


@dataclass
class TrainerControl(ExportableState):
    """Switches the loop reads after each event. Callbacks flip them; the loop resets them.

    Reset rules: ``should_training_stop`` at the start of training, ``should_epoch_stop`` at the start of each
    epoch, ``should_log``/``should_evaluate``/``should_save`` at the start of each step and once their action ran.
    """

    should_training_stop: bool = False
    should_epoch_stop: bool = False
    should_save: bool = False
    should_evaluate: bool = False
    should_log: bool = False

    def _new_training(self) -> None:
        self.should_training_stop = False

    def _new_epoch(self) -> None:
        self.should_epoch_stop = False

    def _new_step(self) -> None:
        self.should_save = False
        self.should_evaluate = False
        self.should_log = False

    def state(self) -> dict[str, Any]:
        return {"args": dataclasses.asdict(self), "attributes": {}}


_CONTROL_FLAGS = frozenset(f.name for f in dataclasses.fields(TrainerControl))


class TrainerCallback:
    """Base class of every callback: each event below is a no-op; override the ones you need.

    Every event is called as ``event(args, state, control, **kwargs)`` where the keyword arguments are
    ``model``, ``optimizer``, ``lr_scheduler``, ``train_dataloader``, ``eval_dataloader``, ``processing_class`` and
    its older name ``tokenizer`` (always passed, possibly None) plus ``metrics`` (`on_evaluate`, `on_predict`) and ``logs`` (`on_log`). An event may return a
    `TrainerControl` or a mapping of control flags (``{"should_training_stop": True}``); returning anything else
    is an error.
    """

    def on_init_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ):
        """At the end of `Trainer.__init__`."""

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ):
        """At the beginning of training, after the model, optimizer and data are ready."""

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ):
        """At the end of training (also after an early stop or a prune)."""

    def on_epoch_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ):
        """At the beginning of an epoch."""

    def on_epoch_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ):
        """At the end of an epoch."""

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ):
        """At the beginning of an optimizer step (before its first micro-batch under gradient accumulation)."""

    def on_pre_optimizer_step(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ):
        """After gradient clipping, just before ``optimizer.step()``."""

    def on_optimizer_step(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ):
        """Just after ``optimizer.step()``, before the gradients are zeroed."""

    def on_substep_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ):
        """At the end of a micro-batch that did not step the optimizer (gradient accumulation)."""

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ):
        """At the end of an optimizer step, after ``state.global_step`` was incremented."""

    def on_evaluate(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ):
        """After an evaluation; ``metrics`` holds its results."""

    def on_predict(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ):
        """After a successful `Trainer.predict`; ``metrics`` holds its results."""

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any):
        """After a checkpoint was saved."""

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any):
        """After something was logged; ``logs`` holds it."""

    def on_prediction_step(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ):
        """After each batch of an evaluation or prediction loop."""

    def on_push_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ):
        """Before a push to a model hub; this trainer never pushes, so it is never called (kept so that callbacks
        written for transformers that define it still load)."""


EVENTS = tuple(
    name
    for name in vars(TrainerCallback)
    if name.startswith("on_") and callable(getattr(TrainerCallback, name))
)


class _EventArgument:
    """A `CallbackHandler` attribute that is also a keyword argument of every event (``handler.model`` is the
    ``model`` each callback gets): stored in the handler's ``_event_kwargs``, which `CallbackHandler.call_event`
    passes without building it again at every call (several events are dispatched per training step).
    ``processing_class`` is also passed under its older name ``tokenizer``."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, handler: Any, owner: type | None = None) -> Any:
        if handler is None:
            return self
        return handler._event_kwargs[self.name]

    def __set__(self, handler: Any, value: Any) -> None:
        handler._event_kwargs[self.name] = value
        if self.name == "processing_class":
            handler._event_kwargs["tokenizer"] = value


class CallbackHandler(TrainerCallback):
    """Calls the callbacks, in order, for every event (`call_event` is the one dispatcher).

    Built as transformers' is: ``CallbackHandler(callbacks, model, processing_class, optimizer, lr_scheduler)``.
    """

    model = _EventArgument()
    optimizer = _EventArgument()
    lr_scheduler = _EventArgument()
    train_dataloader = _EventArgument()
    eval_dataloader = _EventArgument()
    processing_class = _EventArgument()

    def __init__(
        self,
        callbacks: Iterable[TrainerCallback | type[TrainerCallback]] | None,
        model: Any = None,
        processing_class: Any = None,
        optimizer: Any = None,
        lr_scheduler: Any = None,
    ) -> None:
        # The keyword arguments of every event, kept in one dict that the attributes set below write through (see
        # _EventArgument): a dispatch passes it as it is instead of building it per call.
        self._event_kwargs: dict[str, Any] = {}
        self.callbacks: list[TrainerCallback] = []
        self._step_dispatch: (
            tuple[tuple[int, ...], dict[str, list[tuple[TrainerCallback, Any]]], frozenset[str]] | None
        ) = None
        self.processing_class = processing_class
        for cb in callbacks or ():
            self.add_callback(cb)
        self.model = model
        self.optimizer = optimizer
        self.lr_scheduler = lr_scheduler
        self.train_dataloader = None
        self.eval_dataloader = None
        if not any(isinstance(cb, DefaultFlowCallback) for cb in self.callbacks):
            logger.warning(
                "The Trainer has no DefaultFlowCallback: it will never log, evaluate or save on its own. "
                "Add DefaultFlowCallback unless that is what you want."
            )

    def __copy__(self) -> CallbackHandler:
        # A copy's event arguments are its own, as its attributes were before they wrote through _event_kwargs.
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone._event_kwargs = dict(self._event_kwargs)
        return clone

    def add_callback(self, callback: TrainerCallback | type[TrainerCallback]) -> None:
        cb = callback() if isinstance(callback, type) else callback
        if not isinstance(cb, TrainerCallback):
            raise TypeError(
                f"callbacks must be TrainerCallback instances or subclasses, got {callback!r}; "
                "subclass trainer.TrainerCallback."
            )
        cb_class = type(cb)
        if any(type(existing) is cb_class for existing in self.callbacks):
            # Formatted here, as transformers does: tests read the message from the logger call's first argument.
            logger.warning(
                f"You are adding a {cb_class} to the callbacks of this Trainer, but there is already one (another is "
                f"added). The current list of callbacks is:\n{self.callback_list}"
            )
        self.callbacks.append(cb)

    def pop_callback(self, callback: TrainerCallback | type[TrainerCallback]) -> TrainerCallback | None:
        for i, cb in enumerate(self.callbacks):
            if (isinstance(callback, type) and type(cb) is callback) or cb is callback:
                return self.callbacks.pop(i)
        return None

    def remove_callback(self, callback: TrainerCallback | type[TrainerCallback]) -> None:
        self.pop_callback(callback)

    @property
    def callback_list(self) -> str:
        return "\n".join(type(cb).__name__ for cb in self.callbacks)

    def on_init_end(self, args, state, control, **kwargs):
        return self.call_event("on_init_end", args, state, control)

    def on_train_begin(self, args, state, control, **kwargs):
        control._new_training()
        self._step_dispatch = None  # callbacks (or their methods) may have changed since the last run
        return self.call_event("on_train_begin", args, state, control)

    def on_train_end(self, args, state, control, **kwargs):
        return self.call_event("on_train_end", args, state, control)

    def on_epoch_begin(self, args, state, control, **kwargs):
        control._new_epoch()
        return self.call_event("on_epoch_begin", args, state, control)

    def on_epoch_end(self, args, state, control, **kwargs):
        return self.call_event("on_epoch_end", args, state, control)

    def on_step_begin(self, args, state, control, **kwargs):
        control._new_step()
        return self.call_event("on_step_begin", args, state, control)

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        return self.call_event("on_pre_optimizer_step", args, state, control)

    def on_optimizer_step(self, args, state, control, **kwargs):
        return self.call_event("on_optimizer_step", args, state, control)

    def on_substep_end(self, args, state, control, **kwargs):
        return self.call_event("on_substep_end", args, state, control)

    def on_step_end(self, args, state, control, **kwargs):
        return self.call_event("on_step_end", args, state, control)

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        control.should_evaluate = False
        return self.call_event("on_evaluate", args, state, control, metrics=metrics)

    def on_predict(self, args, state, control, metrics=None, **kwargs):
        return self.call_event("on_predict", args, state, control, metrics=metrics)

    def on_save(self, args, state, control, **kwargs):
        control.should_save = False
        return self.call_event("on_save", args, state, control)

    def on_log(self, args, state, control, logs=None, **kwargs):
        control.should_log = False
        return self.call_event("on_log", args, state, control, logs=logs)

    def on_prediction_step(self, args, state, control, **kwargs):
        return self.call_event("on_prediction_step", args, state, control)

    def on_push_begin(self, args, state, control, **kwargs):
        return self.call_event("on_push_begin", args, state, control)

    def step_listeners(self) -> frozenset[str]:
        """The per-step events that some callback overrides (for the callbacks there are now).

        The training loop skips the dispatch of the others, which would call nothing; it asks again after anything
        that may have changed the callbacks (a callback, the training step).
        """
        return self._current_step_dispatch()[2]

    def _current_step_dispatch(
        self,
    ) -> tuple[tuple[int, ...], dict[str, list[tuple[TrainerCallback, Any]]], frozenset[str]]:
        """(ids of the callbacks, per step event the (callback, method) pairs overriding it, the events some
        callback overrides).

        Dispatched several times per step, so worked out once per train() and per list of callbacks (the ids in
        order; the cache keeps the callbacks alive, so an id cannot be reused meanwhile), not at every call.
        """
        ids = tuple(map(id, self.callbacks))
        cached = self._step_dispatch
        if cached is None or cached[0] != ids:
            methods = {name: self._overriding(name) for name in _STEP_EVENTS}
            cached = self._step_dispatch = (
                ids,
                methods,
                frozenset(name for name in methods if methods[name]),
            )
        return cached

    def _overriding(self, event: str) -> list[tuple[TrainerCallback, Any]]:
        """(callback, bound method) of the callbacks, in order, whose ``event`` is not the base class's no-op."""
        noop = _NOOP_EVENTS.get(event)
        methods = []
        for callback in self.callbacks:
            method = getattr(callback, event)
            if noop is None or getattr(method, "__func__", None) is not noop:
                methods.append((callback, method))
        return methods

    def call_event(self, event: str, args, state, control, **kwargs) -> TrainerControl:
        """Call ``event`` on every callback in order; a returned control (or mapping of flags) is applied.

        A callback that does not override ``event`` (the base class's no-op) is skipped: calling it would do nothing,
        and the loop dispatches several events per step.
        """
        if event in _STEP_EVENTS:
            methods = self._current_step_dispatch()[1][event]
            if not methods:
                return control
        else:
            methods = self._overriding(event)
        # The callee gets its own copy (its **kwargs), so the handler's dict is passed as it is.
        extra = {**self._event_kwargs, **kwargs} if kwargs else self._event_kwargs
        for callback, method in methods:
            result = method(args, state, control, **extra)
            if result is None:
                continue
            if isinstance(result, TrainerControl):
                control = result
            elif isinstance(result, Mapping):
                unknown = set(result) - _CONTROL_FLAGS
                if unknown:
                    raise ValueError(
                        f"{type(callback).__name__}.{event} returned unknown control flags {sorted(unknown)}; "
                        f"the flags are {sorted(_CONTROL_FLAGS)}."
                    )
                for key, value in result.items():
                    setattr(control, key, bool(value))
            else:
                raise TypeError(
                    f"{type(callback).__name__}.{event} returned {type(result).__name__} ({result!r}); an event may "
                    "return None, a TrainerControl or a mapping of control flags such as "
                    "{'should_training_stop': True}."
                )
        return control


class DefaultFlowCallback(TrainerCallback):
    """Decides when to log, evaluate and save from the strategies in `TrainingArguments`, and when to stop."""

    def on_step_end(self, args, state, control, **kwargs):
        step = state.global_step
        if step == 1 and args.logging_first_step:
            control.should_log = True
        if args.logging_strategy == IntervalStrategy.STEPS and step % state.logging_steps == 0:
            control.should_log = True
        if (
            args.eval_strategy == IntervalStrategy.STEPS
            and step % state.eval_steps == 0
            and args.eval_delay <= step
        ):
            control.should_evaluate = True
        if args.save_strategy == SaveStrategy.STEPS and step % state.save_steps == 0:
            control.should_save = True
        if step >= state.max_steps:
            control.should_training_stop = True
            # Keep the final weights when saving by steps, and evaluate them when evaluating by steps, even off
            # the interval (as transformers does).
            if args.save_strategy == SaveStrategy.STEPS:
                control.should_save = True
            if args.eval_strategy == IntervalStrategy.STEPS and args.eval_delay <= step:
                control.should_evaluate = True
        return control

    def on_epoch_end(self, args, state, control, **kwargs):
        if args.logging_strategy == IntervalStrategy.EPOCH:
            control.should_log = True
        if args.eval_strategy == IntervalStrategy.EPOCH and args.eval_delay <= (state.epoch or 0):
            control.should_evaluate = True
        if args.save_strategy == SaveStrategy.EPOCH:
            control.should_save = True
        return control


class ProgressCallback(TrainerCallback):
    """tqdm bars for training and for evaluation/prediction, on the local main process only."""

    def __init__(self, max_str_len: int = 100) -> None:
        self.training_bar: Any = None
        self.prediction_bar: Any = None
        self.max_str_len = max_str_len

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            from tqdm.auto import tqdm

            self.training_bar = tqdm(
                total=state.max_steps, dynamic_ncols=True, desc=_bar_desc(state, "train")
            )
        self.current_step = state.global_step
        if self.training_bar is not None and self.current_step:
            self.training_bar.update(self.current_step)

    def on_step_end(self, args, state, control, **kwargs):
        if self.training_bar is not None:
            self.training_bar.update(state.global_step - self.current_step)
            self.current_step = state.global_step

    def on_prediction_step(self, args, state, control, eval_dataloader=None, **kwargs):
        if not state.is_world_process_zero:
            return
        if self.prediction_bar is None:
            from tqdm.auto import tqdm

            try:
                total = len(eval_dataloader) if eval_dataloader is not None else None
            except TypeError:  # an IterableDataset without a length: a bar that counts up
                total = None
            self.prediction_bar = tqdm(
                total=total,
                leave=self.training_bar is None,
                dynamic_ncols=True,
                desc=_bar_desc(state, "eval"),
            )
        self.prediction_bar.update(1)

    def _close_prediction_bar(self) -> None:
        if self.prediction_bar is not None:
            self.prediction_bar.close()
            self.prediction_bar = None

    def on_evaluate(self, args, state, control, **kwargs):
        self._close_prediction_bar()

    def on_predict(self, args, state, control, **kwargs):
        self._close_prediction_bar()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or self.training_bar is None or not logs:
            return
        shown = {k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in logs.items() if k != "total_flos"}
        text = str(shown)
        self.training_bar.write(text[: self.max_str_len] + ("..." if len(text) > self.max_str_len else ""))

    def on_train_end(self, args, state, control, **kwargs):
        if self.training_bar is not None:
            self.training_bar.close()
            self.training_bar = None


def _bar_desc(state: TrainerState, what: str) -> str:
    return f"{state.trial_name} {what}" if state.trial_name else what


class PrinterCallback(TrainerCallback):
    """Prints the logs (used instead of `ProgressCallback` when ``disable_tqdm`` is set).

    Takes ``total_flos`` out of the logs it is given, in place, as transformers' does: callbacks after it, and the
    metrics `Trainer.train` returns (the dict it logs), no longer have it; ``state.log_history`` keeps it.
    """

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs is not None:
            logs.pop("total_flos", None)
        if state.is_world_process_zero and logs:
            print(logs)


class _SetupError(ValueError, AssertionError):
    """A callback's requirement that the arguments do not meet: a ValueError, and an AssertionError as transformers
    raises (its callbacks assert their requirements), so code catching either sees it."""


class EarlyStoppingCallback(TrainerCallback, ExportableState):
    """Stops training when ``metric_for_best_model`` has not improved for ``early_stopping_patience`` evaluations.

    An evaluation improves when it is better than ``state.best_metric`` (the best before it, which the trainer
    tracks) by more than ``early_stopping_threshold``, in the direction ``greater_is_better`` gives, as in
    transformers. Needs ``metric_for_best_model`` and an evaluation strategy.
    """

    def __init__(
        self, early_stopping_patience: int = 1, early_stopping_threshold: float | None = 0.0
    ) -> None:
        if not isinstance(early_stopping_patience, int) or early_stopping_patience < 1:
            raise ValueError(
                f"early_stopping_patience must be an integer >= 1, got {early_stopping_patience!r}; "
                "it counts evaluations without improvement."
            )
        threshold = 0.0 if early_stopping_threshold is None else float(early_stopping_threshold)
        if threshold < 0 or math.isnan(threshold):
            raise ValueError(
                f"early_stopping_threshold must be >= 0, got {early_stopping_threshold!r}; "
                "it is the minimum improvement that counts."
            )
        self.early_stopping_patience = early_stopping_patience
        self.early_stopping_threshold = threshold
        self.early_stopping_patience_counter = 0
        self.best_value: float | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        if not args.metric_for_best_model:
            raise _SetupError(
                "EarlyStoppingCallback requires metric_for_best_model to be defined: it needs "
                "TrainingArguments.metric_for_best_model (got None); set it, e.g. metric_for_best_model='eval_loss'."
            )
        if args.eval_strategy == IntervalStrategy.NO:
            raise _SetupError(
                "EarlyStoppingCallback requires IntervalStrategy of steps or epoch: it needs evaluations, but "
                "eval_strategy='no'; set eval_strategy to 'steps' or 'epoch'."
            )

    def check_metric_value(self, args, state, control, metric_value) -> None:
        """Count ``metric_value`` against ``state.best_metric``: the counter goes back to 0 when the value is better
        (by more than ``early_stopping_threshold``, in the direction ``args.greater_is_better`` gives), else up by one.

        The trainer updates ``state.best_metric`` after ``on_evaluate``, so during training it is the best before
        this evaluation. Called by `on_evaluate`; a subclass may override it to judge improvement another way.
        """
        value = float(metric_value)
        best = state.best_metric
        greater = getattr(args, "greater_is_better", None)
        if greater is None:  # as TrainingArguments derives it
            greater = not str(getattr(args, "metric_for_best_model", None) or "loss").endswith("loss")
        better = best is None or (value > best if greater else value < best)
        if better:
            self.best_value = value  # the best seen so far, for inspection
        if best is None or (better and abs(value - best) > self.early_stopping_threshold):
            self.early_stopping_patience_counter = 0
        else:
            self.early_stopping_patience_counter += 1

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        name = args.metric_for_best_model
        key = name if name.startswith("eval_") else f"eval_{name}"
        if not metrics or key not in metrics:
            logger.warning(
                "Early stopping needs metric %r, which is not among the metrics %s; early stopping is off.",
                key,
                sorted(metrics or {}),
            )
            return
        self.check_metric_value(args, state, control, float(metrics[key]))
        if self.early_stopping_patience_counter >= self.early_stopping_patience:
            control.should_training_stop = True

    def state(self) -> dict[str, Any]:
        return {
            "args": {
                "early_stopping_patience": self.early_stopping_patience,
                "early_stopping_threshold": self.early_stopping_threshold,
            },
            "attributes": {
                "early_stopping_patience_counter": self.early_stopping_patience_counter,
                "best_value": self.best_value,
            },
        }


#: The events dispatched at every (sub)step, for which call_event keeps the overriding callbacks between calls.
_STEP_EVENTS = frozenset(
    {"on_step_begin", "on_pre_optimizer_step", "on_optimizer_step", "on_substep_end", "on_step_end"}
)

#: The base class's no-op of every event: `CallbackHandler.call_event` skips callbacks that do not override one.
_NOOP_EVENTS: dict[str, Any] = {
    name: value for name, value in vars(TrainerCallback).items() if name.startswith("on_") and callable(value)
}
