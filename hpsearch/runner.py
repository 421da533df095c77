"""`run_trial(settings, trial, reporter)`: the one backend-agnostic way a trial runs, in any process.

A trial: the trainer's recipe is copied with the trial's `TrainingArguments` (`Trainer.for_trial`), the reporting
callback is attached, the Accelerate loop trains (``model_init(trial)`` builds a fresh model), an evaluation is
added if training made none, the objective is chosen by the settings' scope, and a `TrialRecord` says how it
ended. A trial that raises or whose objective is not finite is recorded FAIL and the search goes on.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import traceback
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ._params import build_trial_args
from .errors import TooManyFailedTrials
from .trial import Trial, TrialRecord, TrialReporter, TrialState

if TYPE_CHECKING:
    from trainer import TrainerCallback

    from .settings import TrialSettings

__all__ = ["finish_record", "new_record", "run_trial"]

logger = logging.getLogger(__name__)


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _error_text(error: BaseException) -> str:
    lines = traceback.format_exception_only(type(error), error)
    return "".join(lines).strip()


def new_record(settings: TrialSettings, trial: Trial) -> TrialRecord:
    """A RUNNING record for ``trial`` (named by the settings: ``hp_name`` or ``run-<id>``)."""
    name = settings.trial_name(trial)
    trial.name = name
    return TrialRecord(
        trial_id=trial.id,
        number=trial.number,
        name=name,
        state=TrialState.RUNNING,
        params=trial.params,
        started=_now(),
        node=socket.gethostname(),
    )


def finish_record(settings: TrialSettings, record: TrialRecord, state: TrialState, error: str | None = None,
                  checkpoints: dict[int, str] | None = None) -> TrialRecord:
    """Close ``record`` as ``state``: the objective chosen from its evaluations by the settings' scope, its
    checkpoint, and FAIL for a finished trial without a finite objective. Shared by `run_trial` and by engines
    that end a trial from outside (a scheduler that stops a trial's process)."""
    objective, step = settings.choose(record.intermediates)
    record.objective = objective
    if step is not None and checkpoints:
        path = checkpoints.get(step)
        record.checkpoint = path if path is not None and os.path.isdir(path) else None
    record.state = state
    record.error = error
    if record.finished is None:
        record.finished = _now()
    if state is TrialState.COMPLETE and objective is None:
        record.state = TrialState.FAIL
        record.error = "the trial produced no finite objective"
    if record.objective is not None and record.state is not TrialState.FAIL:
        values = record.objective if isinstance(record.objective, list) else [record.objective]
        if not all(math.isfinite(v) for v in values):
            record.state = TrialState.FAIL
            record.error = f"the objective is {record.objective} (not finite)"
    return record


def run_trial(
    settings: TrialSettings,
    trial: Trial,
    reporter: TrialReporter,
    resume_from_checkpoint: str | None = None,
    callbacks: Sequence[TrainerCallback] = (),
) -> TrialRecord:
    """Train one trial and return its record (COMPLETE, PRUNED or FAIL); never raises for a failed trial.

    ``callbacks`` are added to the trial's trainer as they are (not copied). KeyboardInterrupt and
    `TooManyFailedTrials` still propagate: they stop the search.
    """
    # Imported here: the callback subclasses the trainer's callback class, and `import hpsearch` stays free of torch.
    from .callback import ReportingCallback, TrialTimeout, Watchdog

    record = new_record(settings, trial)
    reporter.start(record)
    run_dir = os.path.join(settings.output_dir, record.name)
    trainer = None
    callback = ReportingCallback(settings, reporter, record)
    watchdog = Watchdog(settings.trial_timeout)
    state, error = TrialState.FAIL, None
    try:
        watchdog.start()
        args = build_trial_args(settings.trainer.args, trial, run_dir, record.name)
        trainer = settings.trainer.for_trial(args, callbacks=[*callbacks, callback, watchdog])
        trainer.train(resume_from_checkpoint=resume_from_checkpoint, trial=trial)
        record.params = trial.params  # including values suggested inside model_init
        if not record.intermediates:
            trainer.evaluate()
        record.last_step = trainer.state.global_step
        watchdog.check()
        state = TrialState.PRUNED if callback.pruned else TrialState.COMPLETE
    except (KeyboardInterrupt, TooManyFailedTrials):
        record.state = TrialState.FAIL
        record.error = "interrupted"
        record.finished = _now()
        raise
    except (Exception, TrialTimeout) as exc:  # a failed trial is recorded, the search goes on
        record.params = trial.params
        error = _error_text(exc)
        logger.warning("Trial %s failed: %s", record.name, error)
        logger.debug("Trial %s traceback", record.name, exc_info=True)
    finally:
        watchdog.stop()
        record.finished = _now()
        if trainer is not None:
            trainer.release_memory()
        del trainer
    return finish_record(settings, record, state, error, callback.checkpoints)


def describe(trial: Trial) -> dict[str, Any]:
    """A short JSON-safe description of a trial for logs."""
    return {"id": trial.id, "number": trial.number, "params": trial.params}
