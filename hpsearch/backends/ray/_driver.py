"""The driver side of a Ray search: Tune's trial events -> the records the trials sent -> the session.

Each result a trial reports carries its record so far (``hpsearch_record``); a trial that ends on its own sends
its final record last, and a FAIL record travels in the trial's error. The driver records that record unchanged.
Only a trial whose process Tune stopped (a scheduler's decision, or the budget) cannot send its end: its last
record is closed with the shared rule (`hpsearch.runner.finish_record`) as PRUNED, or COMPLETE when it had run
every planned step (ASHA stops a trial at ``max_t`` before its end marker).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ... import _trust
from ..._cost import add_costs
from ...errors import HPSearchError, SearchConfigError
from ...runner import finish_record, new_record
from ...trial import TrialRecord, TrialState
from ._worker import CONFIG_ERROR_MARKER, MAX_STEPS_KEY, RECORD_KEY, RECORD_MARKER, ray_trial

if TYPE_CHECKING:
    from ...session import SearchSession
    from ...settings import TrialSettings

logger = logging.getLogger(__name__)

_current: Recorder | None = (
    None  # the search running in this driver (Tune pickles callbacks: they look it up)
)


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool | str):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def record_in_error(text: str | None) -> TrialRecord | None:
    """The FAIL record a trial raised (see ``_worker.conclude``), if the error carries one."""
    if not text:
        return None
    for line in reversed(text.splitlines()):
        at = line.find(RECORD_MARKER)
        if at >= 0:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                return TrialRecord.from_dict(json.loads(line[at + len(RECORD_MARKER) :]))
    return None


def config_error_in(text: str | None) -> SearchConfigError | None:
    """The configuration error a worker raised (see ``_worker.trainable``), if the error carries one."""
    for line in reversed((text or "").splitlines()):
        at = line.find(CONFIG_ERROR_MARKER)
        if at >= 0:
            return SearchConfigError(line[at + len(CONFIG_ERROR_MARKER) :])
    return None


def error_line(text: str | None) -> str:
    """The trial's own error message from Tune's error text (Ray wraps it in its traceback)."""
    if not text:
        return "the trial errored"
    lines = [line.strip() for line in text.strip().splitlines() if line.strip() and RECORD_MARKER not in line]
    return lines[-1] if lines else text


class Recorder:
    """Keeps the latest record each trial sent, and records the trial when Tune says it ended."""

    def __init__(self, settings: TrialSettings, session: SearchSession) -> None:
        self.settings = settings
        self.session = session
        self.latest: dict[str, TrialRecord] = {}
        self.earlier: dict[str, list[Any]] = {}  # evaluations of earlier attempts of a restarted trial
        self.restarts: dict[str, dict[str, list[str]]] = {}
        self.max_steps: dict[str, int] = {}
        self.tune_checkpoints: dict[str, dict[int, str]] = {}
        self.started: dict[str, datetime] = {}  # when Tune started each trial (in this driver)
        self.first_started: dict[str, datetime | None] = {}  # a restarted trial's first attempt's start
        self.earlier_cost: dict[
            str, dict[str, float]
        ] = {}  # the cost of a restarted trial's earlier attempts
        self.failure: HPSearchError | None = None
        self.provisional: set[str] = (
            set()
        )  # trials adopted from search.json, kept at the end only if Tune has them
        self._saved: dict[str, TrialRecord] | None = (
            None  # search.json's records, when Tune lost a trial's files
        )
        self.unseen: set[str] = (
            set()
        )  # trials whose earlier attempts this driver did not see (see `_unseen_attempts`)
        self.paths: dict[str, str] = {}  # each trial's folder in Tune's storage
        self.state_dir: str | None = (
            None  # Tune's experiment folder, signed as Tune writes it (see `sign_state`)
        )
        self._signer: _trust.FolderSigner | None = None

    # ------------------------------------------------------------------ state
    def sign_state(self, full: bool = False) -> None:
        """Sign Tune's experiment state (``_trust``) where it changed: called after each step of Tune's loop (which
        saves the state just before) and, with ``full``, when ``fit`` returns, so a later ``resume=True`` restores
        only it. The cost of a step does not grow with the trial folders beside the state (`_trust.FolderSigner`)."""
        folder = self.state_dir
        if folder is None or "://" in folder:
            return
        if self._signer is None or self._signer.root != Path(folder):
            self._signer = _trust.FolderSigner(folder)
        self._signer.update(full=full)

    # ------------------------------------------------------------------ events
    def result(self, trial_id: str, result: Mapping[str, Any], trial_path: str | None) -> None:
        payload = result.get(RECORD_KEY)
        if isinstance(payload, str):
            with contextlib.suppress(ValueError, KeyError, TypeError):
                self._keep(trial_id, TrialRecord.from_dict(json.loads(payload)))
        steps = _number(result.get(MAX_STEPS_KEY))
        if steps is not None:
            self.max_steps[trial_id] = int(steps)
        if trial_path:
            self.paths[trial_id] = trial_path
        folder = result.get("checkpoint_dir_name")
        step = _number(result.get("step"))
        if isinstance(folder, str) and folder and trial_path and step is not None:
            self.tune_checkpoints.setdefault(trial_id, {})[int(step)] = os.path.join(trial_path, folder)

    def _keep(self, trial_id: str, record: TrialRecord) -> None:
        previous = self.latest.get(trial_id)
        if previous is not None and previous.started != record.started:
            # A new attempt (a retry, a restore, PBT): keep the evaluations it does not repeat, the cost of the
            # attempt before it and the start of the first attempt.
            self.earlier.setdefault(trial_id, []).extend(previous.intermediates)
            self.earlier_cost[trial_id] = add_costs(self.earlier_cost.get(trial_id, {}), previous.cost)
            self.first_started.setdefault(trial_id, previous.started)
        for key in ("restored_from", "resumed_from"):
            value = record.extra.get(key)
            seen = self.restarts.setdefault(trial_id, {}).setdefault(key, [])
            if isinstance(value, str) and value not in seen:
                seen.append(value)
        self.latest[trial_id] = record

    def finish(self, trial_id: str, config: Mapping[str, Any], error: str | None) -> None:
        if self.never_ran(trial_id, error):
            return
        config_error = config_error_in(error)
        if config_error is not None:
            self.failure = self.failure or config_error  # raised after Tune stopped every trial
            return
        record = self.final_record(trial_id, config, error)
        try:
            self.session.record(record)
        except HPSearchError as failure:  # too many failures, or a setting no trial can satisfy
            self.failure = failure  # raised after Tune stopped every trial (see the stopper)

    def never_ran(self, trial_id: str, error: str | None) -> bool:
        """A trial Tune removed before it started (the search stopped first): no trial of the search, no record."""
        return error is None and trial_id not in self.started and trial_id not in self.latest

    # ------------------------------------------------------------------ the record
    def final_record(self, trial_id: str, config: Mapping[str, Any], error: str | None) -> TrialRecord:
        sent = self.latest.get(trial_id)
        if error is not None:
            record = record_in_error(error)
            if record is None:
                record = sent if sent is not None else self._unsent(trial_id, config)
                finish_record(self.settings, record, TrialState.FAIL, error_line(error))
        elif sent is not None and sent.state is not TrialState.RUNNING:
            record = sent  # the trial ended on its own and sent its final record
        else:
            # Tune stopped the trial's process: it ran to its end only if it reached its planned steps.
            record = sent if sent is not None else self._unsent(trial_id, config)
            planned = self.max_steps.get(trial_id)
            evaluated = [e.step for e in record.intermediates]
            ran_to_end = planned is not None and bool(evaluated) and evaluated[-1] >= planned
            finish_record(self.settings, record, TrialState.COMPLETE if ran_to_end else TrialState.PRUNED)
        self._merge_attempts(trial_id, record)
        self._visible_checkpoint(trial_id, record)
        record.extra.setdefault("ray_trial_id", trial_id)
        return record

    def _unsent(self, trial_id: str, config: Mapping[str, Any]) -> TrialRecord:
        """A trial that reported nothing (its process died before its first evaluation)."""
        trial = ray_trial(self.settings, trial_id, config)
        try:
            record = new_record(self.settings, trial)
        except Exception:  # hp_name failed on it: the trial failed before it could report anything
            record = new_record(dataclasses.replace(self.settings, hp_name=None), trial)
        record.node = None
        record.started = self.started.get(trial_id, record.started)
        return record

    def _merge_attempts(self, trial_id: str, record: TrialRecord) -> None:
        restart = record.extra.get("resumed_from") or record.extra.get("restored_from")
        if trial_id not in self.earlier and (restart or trial_id in self.unseen):
            self.earlier[trial_id] = self._unseen_attempts(trial_id)
        earlier = self.earlier.get(trial_id)
        if earlier:
            first = record.intermediates[0].step if record.intermediates else None
            kept = [e for e in earlier if first is None or e.step < first]
            record.intermediates[:0] = sorted({e.step: e for e in kept}.values(), key=lambda e: e.step)
        for key, values in self.restarts.get(trial_id, {}).items():
            if values:
                record.extra[key] = list(values)
        if trial_id in self.earlier_cost:  # taken once: a record finished again must not count them twice
            record.cost = add_costs(self.earlier_cost.pop(trial_id), record.cost)
        # The trial started when its (first) process started it, as its cost counts it; Tune's start in this
        # driver (before the trial's process was placed and imported its libraries) only where none reported.
        began = self.first_started.get(trial_id)
        if began is not None and (record.started is None or began < record.started):
            record.started = began
        if record.started is None:
            record.started = self.started.get(trial_id)

    def _visible_checkpoint(self, trial_id: str, record: TrialRecord) -> None:
        """Where the trial's own checkpoint folder is not visible here (another node), Tune's copy of it."""
        if record.checkpoint is not None and os.path.isdir(record.checkpoint):
            return
        _, step = self.settings.choose(record.intermediates)
        copy = self.tune_checkpoints.get(trial_id, {}).get(step) if step is not None else None
        record.checkpoint = copy if copy is not None and os.path.isdir(copy) else None

    # ------------------------------------------------------------------ from Tune's store
    def finished(self, grid: Any) -> list[TrialRecord]:
        """The records of the trials a restored experiment had finished (Tune runs them no more)."""
        records = []
        for trial_id, trial, result in _grid_trials(grid):
            if trial is not None and trial.status == "TERMINATED" and result.error is None:
                self._replay(trial_id, result)
                records.append(self.final_record(trial_id, result.config or {}, None))
        return records

    def restored(self, tuner: Any) -> list[TrialRecord]:
        """The trials a restored experiment had finished: from Tune's results, or, where Tune could not read them
        back, from this search's search.json (its killed driver saved it after each of them).

        Tune leaves a restored tuner without results when its analysis of the experiment's files fails; ``fit``
        then restores the trials from the experiment's state where Tune can read it, and the final translation has
        them, but until then only search.json can list them (those Tune turns out not to have are left out of the
        final results, see `translate`)."""
        try:
            grid = tuner.get_results()
        except RuntimeError as error:
            logger.warning(
                "Ray Tune could not read back the results of the experiment it restores (%s); the trials "
                "it had finished are taken from %s until it reports them.",
                error,
                self.session.output_dir,
            )
            # Failed trials are left out: Tune runs an errored trial again on resume.
            saved = [
                r for r in self.session.saved_records() if r.state in (TrialState.COMPLETE, TrialState.PRUNED)
            ]
            self.provisional = {r.trial_id for r in saved}
            return saved
        return self.finished(grid)

    def _replay(self, trial_id: str, result: Any) -> None:
        """Feed a stored trial's results to `result`: every row of its result files, or, where Tune could not read
        them (a driver killed before they reached storage), the last result Tune's experiment state keeps, whose
        record carries every evaluation of its attempt, and search.json's for the attempts before it."""
        frame = result.metrics_dataframe
        rows = [] if frame is None else frame.to_dict("records")
        if not rows and result.metrics:
            # That record has the evaluations of the trial's last attempt only: those of attempts before a restart
            # from a checkpoint were in the lost files.
            self.unseen.add(trial_id)
        for row in rows or ([result.metrics] if result.metrics else []):
            self.result(trial_id, row, result.path)

    def _unseen_attempts(self, trial_id: str) -> list[Any]:
        """The evaluations of a trial's attempts this driver did not see (an earlier, killed driver ran them, or Tune
        lost their result files): every record in the trial's result file in Tune's storage, and the one in the
        search.json that earlier driver saved, which merged them. `_merge_attempts` keeps those before the last
        attempt's first evaluation, one per step."""
        found: list[Any] = []
        path = self.paths.get(trial_id)
        if path:
            with contextlib.suppress(OSError), open(os.path.join(path, "result.json"), encoding="utf-8") as f:
                for line in f:
                    with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError):
                        payload = json.loads(line).get(RECORD_KEY)
                        found.extend(TrialRecord.from_dict(json.loads(payload)).intermediates)
        saved = self._saved_record(trial_id)
        return found + (list(saved.intermediates) if saved is not None else [])

    def _saved_record(self, trial_id: str) -> TrialRecord | None:
        """This trial's record in the search.json an earlier run of the search left (read once)."""
        if self._saved is None:
            self._saved = {r.trial_id: r for r in self.session.saved_records()}
        return self._saved.get(trial_id)

    def translate(self, grid: Any) -> list[TrialRecord]:
        """Every trial of the ResultGrid as a record (those this run did not see were restored from a previous run)."""
        records: list[TrialRecord] = []
        for trial_id, _, result in _grid_trials(grid):
            record = self.session.known(trial_id)
            if record is None or record.state is TrialState.RUNNING:
                self._replay(trial_id, result)
                error = str(result.error) if result.error is not None else None
                if record is None and self.never_ran(trial_id, error):
                    continue
                record = self.final_record(trial_id, result.config or {}, error)
            records.append(record)
        known = {r.trial_id for r in records}
        # A trial search.json had but Tune's restored experiment does not (its last snapshot predates the trial)
        # was not counted by Tune, which ran another in its place: the results agree with Tune's store.
        records.extend(
            r for r in self.session.records if r.trial_id not in known and r.trial_id not in self.provisional
        )
        return records


def _grid_trials(grid: Any) -> list[tuple[str, Any, Any]]:
    """(trial id, Tune's trial or None, its `Result`) of every trial of a ResultGrid that has an id."""
    analysis = getattr(grid, "_experiment_analysis", None)
    trials = list(getattr(analysis, "trials", None) or [])
    found = []
    for i in range(len(grid)):
        result = grid[i]
        trial = trials[i] if i < len(trials) else None
        trial_id = trial.trial_id if trial is not None else (result.metrics or {}).get("trial_id")
        if trial_id is not None:
            found.append((trial_id, trial, result))
    return found


def trial_error(trial: Any) -> str:
    """The error text Tune keeps for an errored trial."""
    error = None
    # Tune writes the error to the driver's staging folder just before on_trial_error and copies it to storage
    # (where `get_error` reads) only at its next sync, so the staging file is the one that exists by now.
    with contextlib.suppress(Exception), open(trial.error_file) as f:
        error = f.read() or None
    if error is None:
        with contextlib.suppress(Exception):
            error = trial.get_error()
    return str(error) if error is not None else "the trial errored"


def result_loggers(all_of_tune: bool) -> list[Any]:
    """The result loggers of a search's run: Tune's JSON logger always (``result.json`` in each trial's folder: a
    resume reads it, see `Recorder._unseen_attempts`, and so does Tune's `ResultGrid`), and its CSV and TensorBoard
    loggers only when ``tune_loggers`` asks (each writes every result again, in the driver, between a trial's report
    and its going on). Tune adds each of the three to a run that names none of its kind, so in their place the run
    names loggers of those kinds that write nothing (`_build_silent_logger`)."""
    from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback

    if not all_of_tune:
        return [JsonLoggerCallback(), _lazy("_SilentCSVLogger")(), _lazy("_SilentTBXLogger")()]
    loggers: list[Any] = [JsonLoggerCallback(), CSVLoggerCallback()]
    try:
        from ray.tune.logger import TBXLoggerCallback

        loggers.append(TBXLoggerCallback())
    except ImportError:  # Tune's own behaviour without tensorboardX: no events files, and a warning
        logger.warning(
            "tune_loggers=True: tensorboardX is not installed, so Tune writes no TensorBoard files."
        )
    return loggers


def set_current(recorder: Recorder | None) -> None:
    global _current
    _current = recorder


def tune_callback_class() -> type:
    return _lazy("_HPSearchCallback")


def stopper_class() -> type:
    return _lazy("_StopAll")


def __getattr__(name: str) -> Any:
    # Tune pickles the callback, the silent loggers and the stopper with the experiment (and unpickles them on
    # restore); they subclass Ray's classes, which this module may not import eagerly, so they are built on first
    # access and pickled by reference to this module.
    if name in _BUILDERS:
        return _lazy(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _lazy(name: str) -> type:
    cls = globals().get(name)
    if cls is None:
        cls = _BUILDERS[name](name)
        cls.__module__ = __name__
        cls.__qualname__ = name
        globals()[name] = cls
    return cls


def _build_callback(name: str) -> type:
    from ray import tune

    class _HPSearchCallback(tune.Callback):
        """Forwards Tune's trial events to the running search (stateless, so Tune may pickle it)."""

        def on_trial_start(self, iteration, trials, trial, **info):
            if _current is not None:
                _current.started.setdefault(trial.trial_id, _now())

        def on_trial_result(self, iteration, trials, trial, result, **info):
            if _current is not None:
                _current.result(trial.trial_id, result, getattr(trial, "path", None))

        def on_trial_complete(self, iteration, trials, trial, **info):
            if _current is not None:
                _current.finish(trial.trial_id, trial.config, None)

        def on_step_end(self, iteration, trials, **info):
            if _current is not None:
                _current.sign_state()  # Tune saved its experiment state just before this call

        def on_trial_error(self, iteration, trials, trial, **info):
            if _current is not None:
                _current.finish(trial.trial_id, trial.config, trial_error(trial))

    return _HPSearchCallback


def _build_stopper(name: str) -> type:
    from ray import tune

    class _StopAll(tune.stopper.Stopper):
        """The user's ``stop`` plus stopping everything after too many failed trials in a row."""

        def __init__(self, user: Any) -> None:
            self.user = user

        def __call__(self, trial_id, result):
            user = self.user
            if user is None:
                return False
            if isinstance(user, Mapping):
                return any(k in result and result[k] >= v for k, v in user.items())
            return bool(user(trial_id, result))

        def stop_all(self):
            if _current is not None and (
                _current.failure is not None or _current.session.stop_reason is not None
            ):
                return True
            return bool(getattr(self.user, "stop_all", lambda: False)())

    return _StopAll


def _build_silent_logger(name: str) -> type:
    """A result logger that Tune takes for its CSV (or TensorBoard) one, so it adds none of its own, and that writes
    nothing: every hook of Tune's `LoggerCallback` is a no-op, and the base's set-up (which for TensorBoard imports
    tensorboardX) is skipped. Stateless, so Tune may pickle it with the run config."""
    from ray.tune.logger import CSVLoggerCallback, TBXLoggerCallback

    def __init__(self: Any) -> None:
        pass

    def nothing(self: Any, *args: Any, **kwargs: Any) -> None:
        return None

    hooks = ("start", "restore", "save", "result", "complete", "error")
    namespace: dict[str, Any] = {"__init__": __init__, **{f"on_trial_{hook}": nothing for hook in hooks}}
    base = CSVLoggerCallback if name == "_SilentCSVLogger" else TBXLoggerCallback
    return type(name, (base,), namespace)


_BUILDERS = {
    "_HPSearchCallback": _build_callback,
    "_StopAll": _build_stopper,
    "_SilentCSVLogger": _build_silent_logger,
    "_SilentTBXLogger": _build_silent_logger,
}
