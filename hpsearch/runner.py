"""`run_trial(settings, trial, reporter)`: the one backend-agnostic way a trial runs, in any process.

A trial: the trainer's recipe is copied with the trial's `TrainingArguments` (`Trainer.for_trial`), the reporting
callback is attached, the Accelerate loop trains (``model_init(trial)`` builds a fresh model), an evaluation is
added if training made none, the objective is chosen by the settings' scope, and a `TrialRecord` says how it
ended. A trial that raises or whose objective is not finite is recorded FAIL and the search goes on.
"""

from __future__ import annotations

import glob
import logging
import math
import os
import shutil
import socket
import threading
import traceback
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from . import _dist, _events
from ._cost import CostMeter
from ._params import argument_types, build_trial_args
from ._redact import redact
from .errors import SearchConfigError, TooManyFailedTrials
from .trial import Trial, TrialRecord, TrialReporter, TrialState

if TYPE_CHECKING:
    from trainer import Trainer, TrainerCallback

    from .settings import TrialSettings

__all__ = ["failed_record", "finish_record", "new_record", "run_trial"]

logger = logging.getLogger(__name__)


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _mark_config_error(record: TrialRecord, error: SearchConfigError) -> None:
    """Mark ``record`` as failed on a setting no trial can satisfy (the session then stops the search), keeping
    which argument the error is about for the session's error."""
    record.extra["config_error"] = True
    if error.about:
        record.extra["config_error_about"] = list(error.about)


def _error_text(error: BaseException) -> str:
    lines = traceback.format_exception_only(type(error), error)
    return _bounded(redact("".join(lines).strip()))  # an error may quote a connection URL


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


#: The file a trial leaves in its folder, holding its trial id: the folder is that trial's.
OWNER_FILE = ".hpsearch-trial"


def _has_entries(path: str) -> bool:
    try:
        with os.scandir(path) as entries:
            return any(True for _ in entries)
    except OSError:
        return False


def _claim_folder(
    output_dir: str, record: TrialRecord, trial: Trial, fresh: bool = True, saves: bool = True
) -> None:
    """Give the trial a folder no other trial uses: when ``hp_name`` returned a name another trial already has, or
    the name of a file in output_dir (e.g. a study's database) or of a folder there that no trial made (the user's
    data: a trial would write into it, and --fresh would delete it), the folder (and the record's name) become
    ``<name>-<trial id>``, and the log says so. A folder that cannot be created raises OSError when the trial
    ``saves`` checkpoints there (its trial fails now, not after training); otherwise the trial runs without it.

    A trial that starts from scratch (``fresh``) in a folder an earlier attempt of the same trial id left (one
    nothing recorded: an id an engine gives again after a kill, a study deleted with --fresh) removes that
    attempt's ``checkpoint-*`` folders: a later step's checkpoint would pass for the newest, and the rotation of
    ``save_total_limit`` would delete this run's instead. A trial resumed from a checkpoint keeps them."""

    if _dist.is_main_process() and _made_folder(output_dir, record):
        return

    def owner(name: str) -> str | None:
        try:
            with open(os.path.join(output_dir, name, OWNER_FILE), encoding="utf-8") as f:
                return f.read().strip() or None
        except OSError:
            return None

    first = owner(record.name)
    path = os.path.join(output_dir, record.name)
    is_file = os.path.lexists(path) and not os.path.isdir(path)
    foreign = first is None and not is_file and _has_entries(path)  # a folder of the user's: never a trial's
    if is_file or foreign or (first is not None and first != record.trial_id):
        unique = f"{record.name}-{record.trial_id}"
        taken = (
            "of a file in output_dir"
            if is_file
            else "of a folder in output_dir that no trial made"
            if foreign
            else f"of trial {first}"
        )
        logger.warning(
            "hp_name gave trial %s the name %r %s; it is named %r instead (trial names must be unique: "
            "make hp_name return different names).",
            record.trial_id,
            record.name,
            taken,
            unique,
        )
        record.extra["hp_name"] = record.name
        record.name = trial.name = unique
    if _dist.is_main_process():
        folder = os.path.join(output_dir, record.name)
        if fresh and first == record.trial_id:
            _clear_checkpoints(folder, record)
        try:
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, OWNER_FILE), "w", encoding="utf-8") as f:
                f.write(record.trial_id)
        except OSError as error:
            if saves:
                raise OSError(
                    error.errno,
                    f"its folder {folder!r} could not be created ({error.strerror or error}); "
                    "make hp_name return another name, or free that path",
                ) from error
            # Nothing of the trial is saved there (save_strategy='no'): it trains without its folder.


def _made_folder(output_dir: str, record: TrialRecord) -> bool:
    """Make the trial's folder and its owner file when nothing is at its path yet (a new trial's usual case: one
    mkdir instead of the checks of `_claim_folder`); False when something is there or it could not be made (the
    checks then decide)."""
    folder = os.path.join(output_dir, record.name)
    try:
        os.mkdir(folder)
        with open(os.path.join(folder, OWNER_FILE), "w", encoding="utf-8") as f:
            f.write(record.trial_id)
    except OSError:
        return False
    return True


def _clear_checkpoints(folder: str, record: TrialRecord) -> None:
    stale = sorted(glob.glob(os.path.join(glob.escape(folder), "checkpoint-*")))
    if not stale:
        return
    logger.warning(
        "Trial %s starts from scratch in %s, where an earlier attempt of it left %d checkpoint(s) that "
        "no record names; removing them.",
        record.name,
        folder,
        len(stale),
    )
    for path in stale:
        shutil.rmtree(path, ignore_errors=True)


def _note_unread_params(trainer: Trainer, trial: Trial, record: TrialRecord) -> None:
    """Have the trial's ``model_init(trial)`` note in ``record.extra["unread_params"]`` the parameters that are no
    TrainingArguments field and that it did not read: they change nothing (a misspelt name, most often)."""
    user_init = trainer.model_init
    if user_init is None or not trainer.model_init_takes_trial:
        return  # such parameters are refused before the search (check_param_names)
    fields = argument_types(type(trainer.args))

    def model_init(given: Any) -> Any:
        if given is not trial:
            return user_init(given)
        model, unread = trial.unread_while(lambda: user_init(trial))
        unread = [name for name in unread if name not in fields]
        if unread:
            record.extra["unread_params"] = unread
        return model

    trainer.model_init = model_init


def failed_record(settings: TrialSettings, trial: Trial, error: str) -> TrialRecord:
    """The FAIL record of a trial that could not start (its parameters or its name could not be made)."""
    import dataclasses

    record = new_record(dataclasses.replace(settings, hp_name=None), trial)
    record.params = trial.params
    logger.warning("Trial %s failed: %s", record.name, error)
    return finish_record(settings, record, TrialState.FAIL, error)


def finish_record(
    settings: TrialSettings,
    record: TrialRecord,
    state: TrialState,
    error: str | None = None,
    checkpoints: dict[int, str] | None = None,
) -> TrialRecord:
    """Close ``record`` as ``state``: the objective chosen from its evaluations by the settings' scope, its
    checkpoint, and FAIL for a finished trial without a finite objective. Shared by `run_trial` and by engines
    that end a trial from outside (a scheduler that stops a trial's process)."""
    objective, step = settings.choose(record.intermediates)
    record.objective = objective
    if step is not None and checkpoints:
        path = checkpoints.get(step)
        record.checkpoint = path if path is not None and os.path.isdir(path) else None
    record.state = state
    record.error = _bounded(error) if error is not None else None
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


#: The longest error text a record keeps: an exception's message may be megabytes (a dumped tensor, a whole file),
#: and every record is written to search.json, the CSVs (whose readers limit a field to 128 KiB) and the event log.
MAX_ERROR_CHARS = 10_000


def _bounded(error: str) -> str:
    if len(error) <= MAX_ERROR_CHARS:
        return error
    # The kept start leaves room for the note, so a cut text is not cut again.
    return f"{error[: MAX_ERROR_CHARS - 64]}... [cut: {len(error):,} characters in all]"


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
    # The whole trial is measured, whatever its end: a trial that fails before training has a cost too.
    meter = CostMeter(settings.measure_energy)
    meter.start()
    record = _open_record(settings, trial, meter, fresh=resume_from_checkpoint is None)
    if record.state is not TrialState.RUNNING:
        return record  # it failed before it could start: hp_name, or its folder
    _events.trial_started(settings.output_dir, record)
    reporter.start(record)
    run = _TrialRun(settings, trial, record, meter, reporter)
    state, error = TrialState.FAIL, None
    try:
        state = run.train(resume_from_checkpoint, callbacks)
    except BaseException as exc:
        error = run.failure(exc)  # raises again what stops the search
    finally:
        run.close(state, error)
    return finish_record(settings, record, state, error, run.callback.checkpoints)


def _open_record(settings: TrialSettings, trial: Trial, meter: CostMeter, fresh: bool) -> TrialRecord:
    """The trial's RUNNING record, with its folder claimed; or, when it cannot start, its FAIL record (cost
    included): hp_name raised or gave an unusable name, or its folder cannot be made."""
    try:
        record = new_record(settings, trial)
    except Exception as exc:
        # hp_name raised: this trial fails and the search goes on; hp_name returned no usable folder name: a
        # setting no trial can satisfy, so the session stops the search.
        failed = failed_record(settings, trial, f"hp_name(trial) failed: {_error_text(exc)}")
        if isinstance(exc, SearchConfigError):
            _mark_config_error(failed, exc)
        failed.cost = meter.stop(_dist.world_size())
        return failed
    try:
        _claim_folder(
            settings.output_dir,
            record,
            trial,
            fresh=fresh,
            saves=str(settings.trainer.args.save_strategy) != "no",
        )
    except OSError as exc:  # its checkpoints could not be saved: it fails before training, the search goes on
        logger.warning("Trial %s failed: %s", record.name, exc.strerror)
        record.cost = meter.stop(_dist.world_size())
        return finish_record(settings, record, TrialState.FAIL, exc.strerror)
    return record


class _TrialRun:
    """One trial while it trains: its record, cost meter, reporting callback, watchdog and trainer."""

    def __init__(
        self,
        settings: TrialSettings,
        trial: Trial,
        record: TrialRecord,
        meter: CostMeter,
        reporter: TrialReporter,
    ) -> None:
        # Imported here: the callback subclasses the trainer's callback class, and `import hpsearch` stays free
        # of torch.
        from .callback import ReportingCallback, Watchdog

        self.settings, self.trial, self.record, self.meter = settings, trial, record, meter
        self.callback = ReportingCallback(settings, reporter, record, meter)
        self.watchdog = Watchdog(settings.trial_timeout)
        self.trainer: Trainer | None = None

    def train(self, resume_from_checkpoint: str | None, callbacks: Sequence[TrainerCallback]) -> TrialState:
        """Build the trial's trainer and train it (an evaluation added if training made none): COMPLETE or
        PRUNED; raises what the trial raised."""
        settings, trial, record = self.settings, self.trial, self.record
        try:
            self.watchdog.start()
            args = build_trial_args(
                settings.trainer.args, trial, os.path.join(settings.output_dir, record.name), record.name
            )
            record.extra["seed"] = (
                args.seed
            )  # the results' seed column (runs of one configuration differ by it)
            # The watchdog only joins the trainer's callbacks when there is a deadline to check at every step.
            timed = [self.watchdog] if settings.trial_timeout is not None else []
            trainer = self.trainer = settings.trainer.for_trial(
                args, callbacks=[*callbacks, self.callback, *timed]
            )
            self.callback.evaluates(trainer.eval_dataset)
            _note_unread_params(trainer, trial, record)
            trainer.train(resume_from_checkpoint=resume_from_checkpoint, trial=trial)
            record.params = trial.params  # including values suggested inside model_init
            _note_batch_size(trainer, args, record)
            if not record.intermediates:
                trainer.evaluate()
            self.watchdog.check()
            return TrialState.PRUNED if self.callback.pruned else TrialState.COMPLETE
        finally:
            # Before any handler runs: a deadline reached while a failure is logged cannot interrupt it.
            _stop_watchdog(self.watchdog)

    def failure(self, exc: BaseException) -> str:
        """The error text of a trial that raised ``exc`` (logged); raises ``exc`` again when it stops the search:
        Ctrl-C (KeyboardInterrupt in the main thread) or `TooManyFailedTrials`."""
        from .callback import TrialTimeout

        record = self.record
        if isinstance(exc, TooManyFailedTrials) or (
            isinstance(exc, KeyboardInterrupt) and threading.current_thread() is threading.main_thread()
        ):
            record.state, record.error, record.finished = TrialState.FAIL, "interrupted", _now()
            raise exc  # the search stops
        record.params = self.trial.params
        if isinstance(exc, KeyboardInterrupt):
            # Raised by the trial's own code in a worker thread (a real Ctrl-C goes to the main thread): its failure.
            error = "the trial raised KeyboardInterrupt in a worker thread"
        elif isinstance(exc, SystemExit):  # sys.exit() inside a trial fails that trial, not the search
            error = f"the trial called sys.exit({exc.code!r})"
        elif isinstance(exc, Exception | TrialTimeout):  # a failed trial is recorded, the search goes on
            # A timer's TrialTimeout arrives without its message (an exception class raised in the trial's thread).
            error = _error_text(
                TrialTimeout(self.watchdog._message()) if isinstance(exc, TrialTimeout) else exc
            )
            if isinstance(exc, SearchConfigError):
                # A setting no trial can satisfy (an objective no evaluation produces): the session stops the search.
                _mark_config_error(record, exc)
        else:  # GeneratorExit or a custom BaseException from the trial's code: its failure
            error = _error_text(exc)
        logger.warning("Trial %s failed: %s", record.name, error)
        if isinstance(exc, Exception | TrialTimeout):
            logger.debug("Trial %s traceback", record.name, exc_info=exc)
        return error

    def close(self, state: TrialState, error: str | None) -> None:
        """End the trial however it ended: its end time and cost, its last step, its trackers closed, its
        trainer's memory released."""
        record, trainer = self.record, self.trainer
        record.finished = _now()
        record.cost = self.meter.stop(_dist.world_size())
        if trainer is not None:
            # Taken here, not followed at every step by the reporting callback (a step pays for every callback
            # that listens to it): the last step of a finished, pruned or failed trial.
            if trainer.state.global_step > (record.last_step or 0):
                record.last_step = trainer.state.global_step
            _close_trackers(trainer, self.settings, record, state, error)
            trainer.release_memory()
        self.trainer = None


def _note_batch_size(trainer: Trainer, args: Any, record: TrialRecord) -> None:
    used = trainer.args.per_device_train_batch_size
    if used != args.per_device_train_batch_size:  # auto_find_batch_size rescued it from out-of-memory
        record.extra["per_device_train_batch_size"] = used
        logger.info(
            "Trial %s ran out of memory with per_device_train_batch_size=%d and trained with %d.",
            record.name,
            args.per_device_train_batch_size,
            used,
        )


def _stop_watchdog(watchdog: Any) -> None:
    from .callback import TrialTimeout

    while True:
        try:
            watchdog.stop()
            return
        except TrialTimeout:
            continue  # delivered as the trial ended: it has ended anyway


def _close_trackers(
    trainer: Any, settings: TrialSettings, record: TrialRecord, state: TrialState, error: str | None
) -> None:
    """The trainer's experiment trackers end the trial's run with the state and objective the search records (the
    rule of `finish_record`, without closing the record twice); a tracker's failure goes into the record."""
    from trainer.integrations import close_trackers

    objective, _ = settings.choose(record.intermediates)
    final = TrialState.FAIL if state is TrialState.COMPLETE and objective is None else state
    record.extra.update(redact(close_trackers(trainer, final.value, objective)))
