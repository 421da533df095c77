"""`SearchSession`: the driver's ledger of one search.

The session alone records trials and writes the results (a line in the results journal after every trial, and
now and then a snapshot: ``search.json`` and its exports, see `SearchResult.record_trial`),
counts consecutive failures (`TooManyFailedTrials` after ``max_failed_trials``) and the budget, and calls its
trial-end hooks. Backends hand it the `TrialRecord` that `run_trial` produced, unchanged; they never write
results themselves. In a multi-process trial only the main process writes.

A store reused by a later run (a resumed search) must hold the same search: `search_identity` and
`identity_differences` are the one comparison every backend makes before it continues an earlier run.
"""

from __future__ import annotations

import difflib
import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from . import _dist, _events
from ._files import json_default
from ._tally import RunningTally
from .errors import SearchConfigError, TooManyFailedTrials
from .trial import TrialRecord, TrialState

if TYPE_CHECKING:
    from .results import SearchResult
    from .settings import TrialSettings

__all__ = ["SearchSession", "TrialEndHook", "identity_differences", "search_identity"]

logger = logging.getLogger(__name__)

#: ``hook(session, record)``: called after each recorded trial is saved (see `SearchSession.trial_end_hooks`).
TrialEndHook = Callable[["SearchSession", TrialRecord], None]


def _progress_line(session: SearchSession, record: TrialRecord) -> None:
    """One progress line per finished trial, on every backend (see `hpsearch._progress.trial_line`)."""
    from ._progress import trial_line

    trial_line(session, record)


def _now() -> datetime:
    return datetime.now(timezone.utc)


def search_identity(settings: TrialSettings) -> dict[str, Any]:
    """What makes two runs the same search: its directions, objective, objective_scope (which evaluation is a
    trial's objective) and portable space (None for a native one), as a JSON store gives them back (tuples become
    lists), so that equal searches compare equal."""
    identity = {
        "directions": list(settings.directions),
        "objective": settings.objective_name,
        "objective_scope": settings.objective_scope,
        "space": settings.space.to_dict() if settings.space is not None else None,
    }
    return json.loads(json.dumps(identity, default=json_default))


def identity_differences(stored: Mapping[str, Any], ours: Mapping[str, Any]) -> list[str]:
    """What differs between an earlier run's identity (only the keys it has) and this search's `search_identity`,
    each as ``"<what> <stored> (this search: <ours>)"``; empty when they are the same search."""
    problems = []
    if "directions" in stored and list(stored["directions"]) != list(ours["directions"]):
        problems.append(f"direction {list(stored['directions'])} (this search: {list(ours['directions'])})")
    if "objective" in stored and stored["objective"] != ours["objective"]:
        problems.append(f"objective {stored['objective']!r} (this search: {ours['objective']!r})")
    scope = stored.get("objective_scope")
    if (
        scope is not None and scope != ours["objective_scope"]
    ):  # runs saved before it was recorded say nothing
        problems.append(f"objective_scope {scope!r} (this search: {ours['objective_scope']!r})")
    if "space" in stored and stored["space"] != ours["space"]:
        before, now = stored["space"], ours["space"]
        if isinstance(before, Mapping) and isinstance(now, Mapping):
            changed = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
            problems.append(f"a different hp_space (parameters {', '.join(changed)} differ)")
        else:
            problems.append("a different hp_space")
    return problems


class SearchSession:
    """Records the trials of one search; see the module docstring."""

    def __init__(
        self,
        settings: TrialSettings,
        result: SearchResult,
        n_trials: int,
        max_failed_trials: int = 3,
        max_device_hours: float | None = None,
        max_energy_kwh: float | None = None,
        trial_end_hooks: Iterable[TrialEndHook] = (),
    ) -> None:
        self.settings = settings
        self.result = result
        self.n_trials = n_trials
        self.max_failed_trials = max_failed_trials
        self.max_device_hours = max_device_hours
        self.max_energy_kwh = max_energy_kwh
        #: Why the search must start no more trials (a compute budget is spent), or None.
        self.stop_reason: str | None = None
        self._consecutive_failures: list[TrialRecord] = []
        self._lock = threading.Lock()
        self._warned_unread = False
        self._index: dict[str, int] = {}  # trial_id -> its position in result.records (see `_position`)
        #: Counts, best so far and compute spent, updated per recorded trial in O(1) (budgets and hooks read it).
        self.tally = RunningTally()
        #: Called as ``hook(self, record)`` once a trial is recorded and saved, in the process that records it: the
        #: progress line, then the caller's (``hyperparameter_search(on_trial_end=...)``, e.g. the CLI's sweep bar).
        #: A hook that raises is logged and ignored: a display must never stop a search.
        self.trial_end_hooks: list[TrialEndHook] = [_progress_line, *trial_end_hooks]
        #: The re-evaluations the search loop runs between its trials (``reevaluate_when="during"``,
        #: `hpsearch._intensify.Intensification`), or None.
        self.intensification: Any = None

    @property
    def output_dir(self) -> str:
        return self.settings.output_dir

    @property
    def records(self) -> list[TrialRecord]:
        return self.result.records

    def record(self, record: TrialRecord) -> None:
        """Keep a finished trial's record (replacing an earlier one of the same trial), save the results, and stop
        the search (`TooManyFailedTrials`) after ``max_failed_trials`` failures in a row."""
        with self._lock:
            self._keep(record)
            self.tally.update(self.result, record)
            self.result.finished = _now()
            if _dist.is_main_process():
                # One journal line per trial, a snapshot now and then (fsynced by the search's last save).
                line = self.result.record_trial(self.output_dir, record)
                # The live dashboard's feed, with the record's JSON as the journal has just stored it.
                _events.trial_finished(self.output_dir, record, line)
                for hook in self.trial_end_hooks:
                    try:
                        hook(self, record)
                    except Exception:
                        logger.warning("Trial-end hook %r failed; ignoring it.", hook, exc_info=True)
            self._check_budgets()
            self._warn_unread(record)
            if record.extra.get("config_error"):
                raise SearchConfigError(
                    f"Trial {record.name} failed on a setting no trial can satisfy; the search stops: {record.error}",
                    about=tuple(record.extra.get("config_error_about", ())),
                )
            self._count_failure(record)

    def _warn_unread(self, record: TrialRecord) -> None:
        """Once per search: parameters the first trial's model_init never read (and no argument takes) do nothing."""
        unread = record.extra.get("unread_params")
        if not unread or self._warned_unread:
            return
        self._warned_unread = True
        from ._params import argument_types

        fields = list(argument_types(type(self.settings.trainer.args)))
        hints = [
            f"{name!r} -> {close[0]!r}?"
            for name in unread
            for close in [difflib.get_close_matches(name, fields, n=1)]
            if close
        ]
        logger.warning(
            "Trial %s: model_init(trial) did not read the parameter(s) %s, and no TrainingArguments field has their "
            "name, so they change nothing in the trials%s. Read them in model_init (trial[name]) or rename them.",
            record.name,
            unread,
            f" (misspelt? {', '.join(hints)})" if hints else "",
        )

    def _check_budgets(self) -> None:
        if self.stop_reason is not None or (self.max_device_hours is None and self.max_energy_kwh is None):
            return
        # The tally's running sums: SearchResult.total_cost() would be a pass over every record after each trial.
        totals = {
            "device_hours": self.tally.spent("device_s") / 3600,
            "energy_kwh": self.tally.spent("energy_kwh"),
        }
        spent = []
        for option, key, limit in (
            ("max_device_hours", "device_hours", self.max_device_hours),
            ("max_energy_kwh", "energy_kwh", self.max_energy_kwh),
        ):
            used = totals[key]
            if limit is not None and used == used and used >= limit:  # used == used: not NaN
                spent.append(f"{option}={limit:g} ({used:.4g} used)")
        if spent:
            self.stop_starting("compute budget spent: " + ", ".join(spent))

    def stop_starting(self, reason: str) -> None:
        """Start no more trials (running ones finish): ``reason`` is logged and kept as ``stop_reason`` in the
        results, and every backend checks `stop_reason` before it starts a trial."""
        if self.stop_reason is not None:
            return
        self.stop_reason = reason
        self.result.settings["stop_reason"] = reason
        logger.warning("The search starts no more trials: %s.", reason)

    def _keep(self, record: TrialRecord) -> None:
        records = self.result.records
        i = self._position(record.trial_id)
        if i is None:
            self._index[record.trial_id] = len(records)
            records.append(record)
        else:
            records[i] = record

    def _position(self, trial_id: str) -> int | None:
        """Where ``trial_id``'s record is in the results, in O(1): the index is checked against the list and rebuilt
        when the list changed under it (``result.records`` is a public list)."""
        records = self.result.records
        i = self._index.get(trial_id)
        if i is not None and i < len(records) and records[i].trial_id == trial_id:
            return i
        if i is not None or len(self._index) != len(records):
            self._index = {r.trial_id: n for n, r in enumerate(records)}
            return self._index.get(trial_id)
        return None

    def _count_failure(self, record: TrialRecord) -> None:
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

    def known(self, trial_id: str) -> TrialRecord | None:
        """The record kept for ``trial_id``, if any."""
        i = self._position(trial_id)
        return None if i is None else self.result.records[i]

    def saved_records(self) -> list[TrialRecord]:
        """The records in the search.json an earlier run of this search left in output_dir (a resume reads them
        back); none where there is none, or where it cannot be read (logged: an unreadable old file must not stop
        a resume)."""
        from .results import SearchResult

        try:
            return SearchResult.load(self.output_dir).records
        except FileNotFoundError:
            return []
        except Exception as error:
            logger.warning("Could not read the previous results in %s: %s", self.output_dir, error)
            return []

    def adopt(self, records: Iterable[TrialRecord]) -> None:
        """Keep records of an earlier run of the same search (a resume) without counting or saving them; a compute
        budget they spent stays spent (`stop_reason` is set before this run starts a trial)."""
        with self._lock:
            for record in records:
                self._keep(record)
            self.tally.recount(self.result)  # the budgets read the tally
            self._check_budgets()

    def replace_all(self, records: Iterable[TrialRecord], save: bool = True) -> None:
        """The engine's final list of trials (in its order), then save (unless the caller saves next): the search's
        last word on disk."""
        with self._lock:
            self.result.records[:] = list(records)
            self.result.finished = _now()
            if save and self.result.records and _dist.is_main_process():
                self.result.save(self.output_dir)

    def save(self) -> None:
        if _dist.is_main_process():
            self.result.save(self.output_dir)
