"""The search loop, written once for every backend whose engine can be asked for a trial and told its result.

`run_search` owns what is the same on every such engine: lockstep across launched processes (rank 0 asks the
engine and announces each trial, the other ranks follow it), the budget (at most the number of trials the
adapter's `start` says this run may start), the session's `stop_reason` (checked before every new trial),
running ``executor.run(settings, trial, reporter)`` one or ``slots`` at a time, and recording and saving. The
adapter (`hpsearch.backends.base.SearchBackend`) answers only:

- ``start(session, native_space) -> int``: open the engine (a study, an experiment, a generator), resume or warm
  start it, and say how many trials this run may start;
- ``ask(session) -> Trial | None``: the next trial to train (None: the engine has nothing more to run). An adapter
  whose trial fails before it can train (its ``hp_space`` raised) tells the engine and raises `NotStarted`;
- ``reporter(trial)``: what the trial's evaluations are reported to (pruning), `NullReporter` by default;
- ``tell(trial, record)``: the engine hears the trial's end; the driver then records it in the session;
- ``abandon(trial, error)``: the trial stopped with ``error`` (Ctrl-C) before it was told; ``finish(session,
  completed)``: the loop is over (also after an error), the adapter's last word before the driver saves.

Engines that own their loop run it themselves (their adapter overrides ``run``) and do not come here.

With ``reevaluate_when="during"`` (``session.intensification``, `hpsearch._intensify`), the loop also runs the
re-evaluations of each challenger of the incumbent before the next search trial: they count against the same budget
of runs, are never told to the engine, and are kept after the adapter's `finish` (an engine's final list of trials
does not hold them).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from . import _lockstep
from .executor import run_each

if TYPE_CHECKING:
    from .backends.base import SearchBackend
    from .executor import Executor
    from .session import SearchSession
    from .trial import Trial, TrialRecord

__all__ = ["NotStarted", "run_search"]

logger = logging.getLogger(__name__)


class NotStarted(Exception):
    """Raised by ``ask`` for a trial the engine handed out that cannot train (its ``hp_space`` raised): the engine
    has been told; ``record`` (its FAIL record, or None for one the session does not keep) is recorded, and the
    trial counts against this run's budget."""

    def __init__(self, record: TrialRecord | None) -> None:
        super().__init__(record.error if record is not None else "trial not started")
        self.record = record


def run_search(
    adapter: SearchBackend, session: SearchSession, native_space: object, executor: Executor
) -> None:
    """Run trials until the budget is used, the engine has none left, or the session says stop."""
    if _lockstep.is_follower():
        _lockstep.follow(adapter.settings, session)
        return
    completed = False
    intensify = session.intensification
    try:
        budget = adapter.start(session, native_space)
        if intensify is not None:
            budget = intensify.start(budget)
        slots = adapter.slots(executor)
        _Loop(adapter, session, executor, budget).run_all(slots)
        completed = True
    finally:
        _lockstep.announce_end()
        adapter.finish(session, completed)
        if intensify is not None and intensify.records:
            session.adopt(intensify.records)
        if completed or session.records:
            session.save()


class _Loop:
    def __init__(
        self, adapter: SearchBackend, session: SearchSession, executor: Executor, budget: int
    ) -> None:
        self.adapter = adapter
        self.session = session
        self.executor = executor
        self.left = budget  # trials this run may still start
        self.exhausted = False  # the engine has nothing more to run
        self.intensify = session.intensification

    def next_trial(self) -> Trial | None:
        """The next trial to run, or None when the budget, the engine or a stop reason says no more; a queued
        re-evaluation first (its run was taken from the budget when it was queued)."""
        if self.intensify is not None and self.session.stop_reason is None:
            queued = self.intensify.next()
            if queued is not None:
                return queued  # type: ignore[no-any-return]
        while self.left > 0 and not self.exhausted and self.session.stop_reason is None:
            self.left -= 1
            try:
                trial = self.adapter.ask(self.session)
            except NotStarted as failed:
                if failed.record is not None:
                    self.session.record(failed.record)
                continue
            if trial is None:
                self.exhausted = True
                return None
            return trial
        return None

    def run(self, trial: Trial) -> TrialRecord:
        _lockstep.announce(_lockstep.lead(trial))
        if self.intensify is not None and self.intensify.owns(trial):
            return self.intensify.train(self.adapter.settings, trial, self.executor)  # type: ignore[no-any-return]
        try:
            return self.executor.run(self.adapter.settings, trial, self.adapter.reporter(trial))
        except BaseException as error:
            self.adapter.abandon(trial, error)
            raise

    def tell(self, trial: Trial, record: TrialRecord) -> None:
        # The engine first: an engine that stores the record too never says less than search.json. The
        # session keeps a trained trial even when the engine could not be told (the error is raised after), but
        # Ctrl-C while telling interrupts the trial as during its training: it is abandoned and not recorded.
        if self.intensify is not None and self.intensify.owns(trial):
            self.session.record(record)  # a re-evaluation: the engine never hears of it
            self.left -= self.intensify.recorded(record, self.left)
            return
        try:
            self.adapter.tell(trial, record)
        except KeyboardInterrupt as interrupt:
            self.adapter.abandon(trial, interrupt)
            raise
        except BaseException:
            self.session.record(record)
            raise
        self.session.record(record)
        if self.intensify is not None:
            self.left -= self.intensify.consider(record, self.left)

    def run_all(self, slots: int) -> None:
        """One trial at a time, or ``slots`` at once in threads: a new trial is asked for as soon as one ends. Again
        while re-evaluations were queued after the last trial was drawn (the engine ran out before they were)."""
        while True:
            run_each(
                slots,
                iter(self.next_trial, None),
                lambda trial: (trial, self.run(trial)),
                lambda finished: self.tell(*finished),
                interrupt=self.executor.interrupt,
            )
            if self.intensify is None or not self.intensify.queue or self.session.stop_reason is not None:
                return
