"""What every tracker integration shares: availability checks, the guarded run lifecycle and safe parameters.

A `TrackerCallback` opens one run per training (one per trial during a hyperparameter search), logs the
parameters once when the run opens, logs the numeric logs at every logging step and closes the run with a final
state. The library is imported only when the run opens. Every library call goes through `_guard`: a tracker that
raises is logged once, its error is kept in ``errors`` and training goes on; a tracker never kills training.

The run's end:

- outside a search, ``on_train_end`` closes the run as ``"COMPLETE"``;
- during a search (``state.is_hyper_param_search``), ``on_train_end`` only flushes: the search closes the run with
  the trial's final state and objective through `close` (hpsearch calls `close_trackers` for every trial, also
  when the trial raised). A run the search never closes is closed by the next ``train()`` of the same trainer, or
  when the process exits (``"COMPLETE"`` if training ended, ``"FAIL"`` if it did not).
"""

from __future__ import annotations

import atexit
import importlib.util
import logging
import math
import os
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from .._callbacks import TrainerCallback, TrainerState
from ..redact import redact, safe_params

if TYPE_CHECKING:
    from .._training_args import TrainingArguments

logger = logging.getLogger("trainer.integrations")

#: The final states a run is closed with (those of a hyperparameter-search trial).
STATES = ("COMPLETE", "PRUNED", "FAIL")


# ---------------------------------------------------------------------------------------------- availability
def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken or half-installed package
        return False


def install_hint(name: str, extra: str | None = None) -> str:
    """The ImportError text for integration ``name`` whose library is missing: it carries the install command."""
    extra = extra or name
    return (
        f"report_to includes {name!r} but its library is not installed; run "
        f"`pip install 'hpsearch[{extra}]'` or remove {name!r} from report_to."
    )


# ---------------------------------------------------------------------------------------------- values
def scalar(value: Any) -> float | None:
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


def numeric_logs(logs: Mapping[str, Any], owner: TrainerCallback) -> dict[str, float]:
    """The numbers among ``logs``; anything else is skipped with one warning per key and callback."""
    out: dict[str, float] = {}
    for key, value in logs.items():
        number = scalar(value)
        if number is None:
            warned: set[str] = owner.__dict__.setdefault("_warned_keys", set())
            if key not in warned:
                warned.add(key)
                logger.warning(
                    "%s logs numbers only; %r=%r (a %s) is not logged.",
                    type(owner).__name__,
                    key,
                    value,
                    type(value).__name__,
                )
            continue
        out[key] = number
    return out


def redact_secrets(text: str) -> str:
    """``text`` masked by the one rule (`trainer.redact.redact`): URL passwords, secret query values and the
    values of secret-named environment variables."""
    return str(redact(text))


def run_params(args: TrainingArguments, state: TrainerState) -> dict[str, bool | int | float | str]:
    """The parameters a run logs once: the arguments, then the trial's parameters; no secret-looking names, every
    value masked by the one rule."""
    params: dict[str, Any] = dict(args.to_sanitized_dict())
    for key, value in (state.trial_params or {}).items():
        params[str(key)] = value if isinstance(value, bool | int | float | str) else str(value)
    return safe_params(params)


def run_name(args: TrainingArguments, state: TrainerState) -> str:
    """The trial's name during a search, else ``run_name`` (which defaults to the output folder)."""
    if state.is_hyper_param_search and state.trial_name:
        return str(state.trial_name)
    if args.run_name and os.path.abspath(args.run_name) != os.path.abspath(args.output_dir):
        return args.run_name
    return os.path.basename(os.path.abspath(args.output_dir))  # the folder's name, not its whole path


def search_group(args: TrainingArguments) -> str:
    """The name grouping a search's trials: its output folder, the parent of each trial's ``output_dir``."""
    return os.path.basename(os.path.dirname(os.path.abspath(args.output_dir)))


def finite_objective(objective: Any) -> float | list[float] | None:
    if objective is None:
        return None
    if isinstance(objective, list | tuple):
        values = [scalar(v) for v in objective]
        return [v for v in values if v is not None] or None
    value = scalar(objective)
    return value if value is not None and not math.isnan(value) else None


# ---------------------------------------------------------------------------------------------- open runs
# Strong references: a run stays reachable until it is closed, even when its trainer is gone.
_OPEN: set[TrackerCallback] = set()
_OPEN_LOCK = threading.Lock()


def _close_open_runs_at_exit() -> None:
    with _OPEN_LOCK:
        trackers = list(_OPEN)
    for tracker in trackers:
        tracker.close("COMPLETE" if tracker._trained else "FAIL")


def _register_open(tracker: TrackerCallback) -> None:
    with _OPEN_LOCK:
        _OPEN.add(tracker)
    # Re-registered after each library opened a run so that ours runs first at exit (atexit is last-in first-out)
    # and the libraries' own shutdown hooks still find their runs open.
    atexit.unregister(_close_open_runs_at_exit)
    atexit.register(_close_open_runs_at_exit)


# ---------------------------------------------------------------------------------------------- base class
def announce_destination(tracker: str, where: str, change: str, credentials: tuple[str, ...]) -> None:
    """Say where a tracker logs when it logs only on this machine (our default, where transformers' callbacks
    upload): a warning when one of ``credentials`` is set (a ported script that expects an upload), else info."""
    given = [name for name in credentials if os.environ.get(name)]
    text = f"{tracker} logs only on this machine, to {where} (this trainer's default); {change}."
    if given:
        logger.warning("%s (%s is set, but nothing is uploaded.)", text, ", ".join(given))
    else:
        logger.info(text)


class TrackerCallback(TrainerCallback):
    """Base of the experiment-tracker callbacks: one run per training, guarded calls, a final state.

    Subclasses set ``name`` (the ``report_to`` value), ``module`` (the library's import name) and ``extra`` (the
    ``pip install 'hpsearch[<extra>]'`` extra), and implement three methods, each called on the world main
    process only and always inside `_guard`:

    - ``_open(args, state)``: when a run starts (``on_train_begin``, or the first ``on_log`` of an
      ``evaluate()`` without training): import the library, start the run, log `run_params` once;
    - ``_log(metrics, step)``: at every logging step, with the numeric logs;
    - ``_finish(final_state, objective)``: once per run, from `close`: record the final state (one of `STATES`)
      and the objective when known, and end the run so that nothing is left running.
    """

    name: ClassVar[str] = ""
    module: ClassVar[str] = ""
    extra: ClassVar[str] = ""
    # transformers' variables asking this tracker to upload models or assets, which this callback does not do.
    unread_uploads: ClassVar[tuple[str, ...]] = ()

    def __init__(self) -> None:
        if not self.is_available():
            raise ImportError(install_hint(self.name, self.extra))
        self.errors: list[str] = []
        self._reset_run()

    @classmethod
    def is_available(cls) -> bool:
        return _installed(cls.module)

    def _reset_run(self) -> None:
        self._open_run = False
        self._trained = False
        self._failed_open = False
        self._search = False

    # ---- to implement
    def _open(self, args: TrainingArguments, state: TrainerState) -> None:
        raise NotImplementedError

    def _log(self, metrics: dict[str, float], step: int) -> None:
        raise NotImplementedError

    def _finish(self, final_state: str, objective: float | list[float] | None) -> None:
        raise NotImplementedError

    def _flush(self) -> None:
        """Called when training ends during a search, before the search closes the run: nothing by default."""

    # ---- guard
    def _guard(self, what: str, function: Any, *arguments: Any) -> bool:
        """Call ``function``; an exception is logged (the first one per callback), kept in ``errors`` and
        swallowed. Returns whether the call succeeded."""
        try:
            function(*arguments)
            return True
        except Exception as error:
            text = redact_secrets(f"{self.name} {what}: {type(error).__name__}: {error}")
            if not self.errors:
                logger.error("Tracker %s failed (%s); training goes on without it.", self.name, text)
            else:
                logger.debug("Tracker %s failed again: %s", self.name, text)
            if len(self.errors) < 20:
                self.errors.append(text)
            return False

    # ---- lifecycle
    def _start(self, args: TrainingArguments, state: TrainerState) -> None:
        for variable in self.unread_uploads:
            if os.environ.get(variable, "").strip().upper() in ("1", "TRUE", "YES", "ON", "ALL"):
                logger.warning(
                    "%s=%s asks %s to upload the model, which this trainer's %s callback does not do (see "
                    "README, experiment trackers); nothing is uploaded.",
                    variable,
                    os.environ[variable],
                    self.name,
                    self.name,
                )
        self._search = bool(state.is_hyper_param_search)
        self._trained = False
        if self._guard("opening the run", self._open, args, state):
            self._open_run = True
            _register_open(self)
        else:
            self._failed_open = True  # no run: the events of this training are skipped

    def _forget(self) -> None:
        """The run is over for good: no `close` will reach the library again."""
        self._open_run = False
        with _OPEN_LOCK:
            _OPEN.discard(self)

    def close(self, state: str = "COMPLETE", objective: Any = None) -> None:
        """End the open run as ``state`` (``"COMPLETE"``, ``"PRUNED"`` or ``"FAIL"``), recording ``objective``
        when given. Idempotent: a closed or never opened run is left alone. Never raises for the tracker's faults."""
        final = str(getattr(state, "value", state)).upper()
        if final not in STATES:
            raise ValueError(f"close(state={state!r}): the state must be one of {STATES}.")
        if not self._open_run:
            return
        self._forget()
        self._guard("closing the run", self._finish, final, finite_objective(objective))

    # ---- events
    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        if self._open_run:  # train() again on the same trainer: the previous run ended
            self.close("COMPLETE" if self._trained else "FAIL")
        self._failed_open = False
        self._start(args, state)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs or self._failed_open:
            return
        if not self._open_run:  # evaluate() without training: a run of its own
            self._start(args, state)
            if not self._open_run:
                return
        metrics = numeric_logs(logs, self)
        if metrics:
            self._guard("logging metrics", self._log, metrics, state.global_step)

    def on_train_end(self, args, state, control, **kwargs):
        if not state.is_world_process_zero or not self._open_run:
            return
        self._trained = True
        if self._search:
            self._guard("flushing", self._flush)  # the search closes the run with the trial's state
        else:
            self.close("COMPLETE")

    # ---- copies
    def _run_attributes(self) -> tuple[str, ...]:
        """Attributes that hold the library's live run objects (dropped by copies and pickles)."""
        return ()

    def __deepcopy__(self, memo: dict[int, Any]) -> TrackerCallback:
        # Trials get copies of the trainer's callbacks: each opens its own run, none shares the original's.
        clone = type(self).__new__(type(self))
        clone.__dict__.update({k: v for k, v in self.__dict__.items() if k not in self._run_attributes()})
        for key in self._run_attributes():
            setattr(clone, key, None)
        clone.errors = []
        clone._reset_run()
        return clone

    def __getstate__(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        for key in self._run_attributes():
            data[key] = None
        data["_open_run"] = False  # an unpickled copy has no live run
        return data
