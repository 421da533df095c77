"""`run_trial`: the one backend-agnostic way a trial runs, and `SearchContext`, what a search shares with it.

A trial: the trainer is cloned with the trial's `TrainingArguments`, the reporting callback is attached, the
Accelerate loop trains (``model_init(trial)`` builds a fresh model), an evaluation is added if training made
none, the objective is taken (last or best evaluation), and a `TrialRecord` says how it ended. A trial that
raises or whose objective is not finite is recorded FAIL and the search goes on.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import logging
import math
import os
import socket
import threading
import traceback
import typing
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from . import _events
from .errors import SearchConfigError, TooManyFailedTrials
from .objective import to_objective
from .trial import Trial, TrialRecord, TrialState

if TYPE_CHECKING:
    from trainer import Trainer, TrainingArguments

    from .backends.base import TrialReporter
    from .results import SearchResult

__all__ = ["RESERVED_PARAMS", "SearchContext", "build_trial_args", "check_param_names", "clone_trainer", "run_trial"]

logger = logging.getLogger(__name__)

# Arguments the search sets per trial itself: a space may not choose them.
RESERVED_PARAMS = frozenset({"output_dir", "logging_dir", "run_name", "overwrite_output_dir"})

#: Called as ``hook(ctx, record)`` after each finished trial is recorded and saved, in the process that records
#: it (the CLI's sweep progress bar registers here, see ``hpsearch._progress``). A hook that raises is logged
#: and ignored: a display must never stop a search.
TRIAL_END_HOOKS: list[Callable[[SearchContext, TrialRecord], None]] = []


def _now() -> datetime:
    return datetime.now(timezone.utc)


@dataclasses.dataclass
class SearchContext:
    """Everything a backend adapter and `run_trial` share during one search."""

    trainer: Trainer
    compute_objective: Callable[[Mapping[str, float]], Any]
    objective_name: str
    directions: list[str]
    output_dir: str
    hp_name: Callable[[Trial], str] | None = None
    max_failed_trials: int = 3
    objective_scope: str = "last"
    trial_timeout: float | None = None
    result: SearchResult | None = None
    _consecutive_failures: list[TrialRecord] = dataclasses.field(default_factory=list)
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    @property
    def n_objectives(self) -> int:
        return len(self.directions)

    def objective_of(self, metrics: Mapping[str, float]) -> float | list[float]:
        return to_objective(self.compute_objective(dict(metrics)), self.n_objectives)

    def trial_name(self, trial: Trial) -> str:
        if self.hp_name is None:
            return f"run-{trial.id}"
        name = self.hp_name(trial)
        if not isinstance(name, str) or not name or os.sep in name or name in (".", ".."):
            raise SearchConfigError(
                f"hp_name(trial) must return a non-empty folder name without {os.sep!r}, got {name!r}."
            )
        return name

    def better(self, a: float, b: float) -> bool:
        return a > b if self.directions[0] == "maximize" else a < b

    def finish(self, record: TrialRecord) -> None:
        """Keep the record, write the results to disk, and stop the search after too many failures in a row."""
        with self._lock:
            if self.result is not None:
                records = self.result.records
                for i, existing in enumerate(records):
                    if existing.trial_id == record.trial_id:
                        records[i] = record
                        break
                else:
                    records.append(record)
                self.result.finished = _now()
                if _is_main():
                    # search.json now; the CSV exports when cheap enough (the search's last save writes them).
                    self.result._save_after_trial(self.output_dir)
                    _events.trial_finished(self.output_dir, record)
                    for hook in list(TRIAL_END_HOOKS):
                        try:
                            hook(self, record)
                        except Exception:
                            logger.warning("Trial-end hook %r failed; ignoring it.", hook, exc_info=True)
            if record.state is TrialState.FAIL:
                self._consecutive_failures.append(record)
            elif record.state in (TrialState.COMPLETE, TrialState.PRUNED):
                self._consecutive_failures.clear()
            if len(self._consecutive_failures) >= self.max_failed_trials:
                quoted = "\n".join(f"  - {r.name} {r.params}: {r.error}" for r in self._consecutive_failures)
                raise TooManyFailedTrials(
                    f"{len(self._consecutive_failures)} trials failed in a row (max_failed_trials="
                    f"{self.max_failed_trials}); the search stops. The failures:\n{quoted}"
                )


def _is_main() -> bool:
    from . import _dist

    return _dist.is_main_process()


# ---------------------------------------------------------------------------------------------- arguments
@functools.lru_cache(maxsize=1)
def _field_types() -> dict[str, Any]:
    """Field name -> type hint of `TrainingArguments` (read-only; cached: resolving the hints took ~2 ms a trial)."""
    from trainer import TrainingArguments

    hints = typing.get_type_hints(TrainingArguments)
    return {f.name: hints.get(f.name) for f in dataclasses.fields(TrainingArguments) if f.init and not f.name.startswith("_")}


def argument_fields() -> set[str]:
    return set(_field_types())


def _coerce(name: str, value: Any, hint: Any) -> Any:
    """Make a sampled value fit the argument's type (an Int 3 for a float field, 4.0 for an int field)."""
    args = typing.get_args(hint)
    base = {t for t in (args or (hint,)) if t is not type(None)}
    if isinstance(value, bool) or value is None:
        return value
    if int in base and float not in base and isinstance(value, float):
        if not value.is_integer():
            raise SearchConfigError(
                f"Parameter {name!r} is an integer argument of TrainingArguments, but the space gave {value!r}; "
                "use spaces.Int for it."
            )
        return int(value)
    if float in base and isinstance(value, int):
        return float(value)
    if hasattr(value, "item") and not isinstance(value, str):  # numpy scalars
        return value.item()
    return value


def check_param_names(names: Iterable[Any], trainer: Trainer) -> None:
    """Every parameter must be a `TrainingArguments` field or reachable by ``model_init(trial)``, and none reserved.

    Shared by portable spaces (checked before any trial) and backend-native ones (checked on the values they give).
    """
    fields = argument_fields()
    takes_trial = getattr(trainer, "_model_init_arity", 0) == 1
    for name in names:
        if not isinstance(name, str):
            raise SearchConfigError(f"hp_space keys must be parameter names (str), got {name!r}.")
        if name in RESERVED_PARAMS:
            raise SearchConfigError(
                f"hp_space parameter {name!r} is reserved: the search sets it for every trial "
                f"(reserved: {sorted(RESERVED_PARAMS)}); rename the parameter (rename it e.g. to {name + '_'!r})."
            )
        if name not in fields and not takes_trial:
            raise SearchConfigError(
                f"hp_space parameter {name!r} is not a TrainingArguments field and model_init takes no trial, so "
                f"nothing would use it; give model_init a `trial` parameter and read trial[{name!r}], or remove it."
            )


def build_trial_args(base: TrainingArguments, params: Mapping[str, Any], output_dir: str, run_name: str) -> TrainingArguments:
    """The trial's arguments: ``base`` with every parameter that names an argument replaced (re-validated)."""
    types = _field_types()
    overrides = {k: _coerce(k, v, types[k]) for k, v in params.items() if k in types and k not in RESERVED_PARAMS}
    overrides["output_dir"] = output_dir
    overrides["run_name"] = run_name
    return dataclasses.replace(base, **overrides)


# ---------------------------------------------------------------------------------------------- trainer
def clone_trainer(trainer: Trainer, args: TrainingArguments) -> Trainer:
    """A copy of ``trainer`` for one trial: same data and functions, its own arguments, callbacks and state.

    Callbacks are deep-copied so a stateful one (early stopping) starts fresh in every trial, and concurrent
    trials never share mutable state.
    """
    from trainer import CallbackHandler, TrainerControl, TrainerState
    from trainer._utils import MemoryTracker

    clone = copy.copy(trainer)
    clone.args = args
    clone.accelerator = None
    clone._accelerator_key = None
    clone._create_accelerator()
    clone.optimizer = None
    clone.lr_scheduler = None
    callbacks = [copy.deepcopy(cb) for cb in trainer.callback_handler.callbacks]
    clone.callback_handler = CallbackHandler(callbacks, clone.model, None, None)
    clone.state = TrainerState(
        is_local_process_zero=clone.is_local_process_zero(), is_world_process_zero=clone.is_world_process_zero()
    )
    clone.control = TrainerControl()
    clone._memory_tracker = MemoryTracker(skip=args.skip_memory_metrics)
    return clone


# ---------------------------------------------------------------------------------------------- the trial
def _error_text(error: BaseException) -> str:
    lines = traceback.format_exception_only(type(error), error)
    return "".join(lines).strip()


def _choose(ctx: SearchContext, record: TrialRecord) -> tuple[Any, int | None]:
    evaluations = [e for e in record.intermediates if e.objective is not None]
    if not evaluations:
        return None, None
    chosen = evaluations[-1]
    if ctx.objective_scope == "best" and ctx.n_objectives == 1:
        for e in evaluations:
            # One objective here, so these are single floats (mypy can't tie that to n_objectives).
            if ctx.better(e.objective, chosen.objective):  # type: ignore[arg-type]
                chosen = e
    return chosen.objective, chosen.step


def run_trial(
    ctx: SearchContext,
    trial: Trial,
    reporter: TrialReporter,
    resume_from_checkpoint: str | None = None,
) -> TrialRecord:
    """Train one trial and return its record (COMPLETE, PRUNED or FAIL); never raises for a failed trial.

    KeyboardInterrupt and `TooManyFailedTrials` still propagate: they stop the search.
    """
    from .callback import ReportingCallback, Watchdog

    name = ctx.trial_name(trial)
    trial.name = name
    record = TrialRecord(
        trial_id=trial.id,
        number=trial.number,
        name=name,
        state=TrialState.RUNNING,
        params=dict(trial.params),
        started=_now(),
        node=socket.gethostname(),
    )
    _events.trial_started(ctx.output_dir, record)
    run_dir = os.path.join(ctx.output_dir, name)
    trainer = None
    callback = None
    watchdog = Watchdog(ctx.trial_timeout)
    try:
        watchdog.start()
        args = build_trial_args(ctx.trainer.args, trial.params, run_dir, name)
        trainer = clone_trainer(ctx.trainer, args)
        callback = ReportingCallback(ctx, reporter, record)
        trainer.add_callback(callback)
        trainer.add_callback(watchdog)
        trainer.train(resume_from_checkpoint=resume_from_checkpoint, trial=trial)
        record.params = dict(trial.params)  # including values suggested inside model_init
        if not record.intermediates:
            trainer.evaluate()
        objective, step = _choose(ctx, record)
        record.objective = objective
        if step is not None:
            path = callback.checkpoints.get(step)
            record.checkpoint = path if path is not None and os.path.isdir(path) else None
        record.last_step = trainer.state.global_step
        watchdog.check()
        record.state = TrialState.PRUNED if callback.pruned else TrialState.COMPLETE
    except (KeyboardInterrupt, TooManyFailedTrials):
        record.state = TrialState.FAIL
        record.error = "interrupted"
        record.finished = _now()
        raise
    except Exception as error:  # a failed trial is recorded, the search goes on
        record.params = dict(trial.params)
        record.state = TrialState.FAIL
        record.error = _error_text(error)
        if record.intermediates and record.objective is None:
            record.objective, _ = _choose(ctx, record)
        logger.warning("Trial %s failed: %s", name, record.error)
        logger.debug("Trial %s traceback", name, exc_info=True)
    finally:
        watchdog.stop()
        record.finished = _now()
        if trainer is not None:
            _release(trainer)
        del trainer
    if record.objective is not None and record.state is not TrialState.FAIL:
        values = record.objective if isinstance(record.objective, list) else [record.objective]
        if not all(math.isfinite(v) for v in values):
            record.state = TrialState.FAIL
            record.error = f"the objective is {record.objective} (not finite)"
    return record


def _release(trainer: Trainer) -> None:
    """Drop the trial's model, optimizer and accelerator so their memory is freed before the next trial."""
    # Trainer types model as always set; this trainer is never trained again, so None only frees memory.
    trainer.model = None  # type: ignore[assignment]
    trainer.model_wrapped = None  # type: ignore[assignment]
    trainer.optimizer = None
    trainer.lr_scheduler = None
    trainer.accelerator = None
    handler = trainer.callback_handler
    handler.model = handler.optimizer = handler.lr_scheduler = None
    handler.train_dataloader = handler.eval_dataloader = None
