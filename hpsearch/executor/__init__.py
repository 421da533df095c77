"""Where a trial runs: in the driver process, or in a persistent worker process on this machine.

An executor runs ``run_trial(settings, trial, reporter)`` and returns its `TrialRecord`. `InProcess` calls it
directly (what every search did before ``trial_workers``); `WorkerPool` sends the trial to one of
``trial_workers`` worker processes (forked from a forkserver) and drives it over a pipe: every evaluation comes
back to the driver's reporter, which answers prune or go on, so the engine, the session and the pruning decisions
stay in the driver. A worker that crashes, exits or overruns ``trial_timeout`` fails that trial only and is
replaced. Where GPUs exist, each worker gets one and trials share a GPU as far as their measured memory allows
(`_placement`). `run_each` is the loop that runs a stream of trials ``slots`` at a time (the random backend's,
the re-evaluations').
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._checks import check_trial_workers
from ._each import run_each
from ._pool import WorkerPool

if TYPE_CHECKING:
    from ..settings import TrialSettings
    from ..trial import Trial, TrialRecord, TrialReporter

__all__ = ["Executor", "InProcess", "WorkerPool", "check_trial_workers", "make_executor", "run_each"]


class Executor:
    """Runs trials. `run` may be called from several threads at once (``slots`` of them run together)."""

    #: How many trials may run at once.
    slots: int = 1

    def run(self, settings: TrialSettings, trial: Trial, reporter: TrialReporter) -> TrialRecord:
        raise NotImplementedError

    def close(self) -> None:
        """Release what the executor holds (worker processes); called once the search is over."""

    def interrupt(self) -> None:
        """Ctrl-C reached the search: end the trials running elsewhere now, each raising KeyboardInterrupt from its
        `run` (it is abandoned: not recorded, trained again by a resumed search). A trial that runs in a thread of
        this process stops on its own KeyboardInterrupt, or runs to its end."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class InProcess(Executor):
    """``run_trial`` in this process: the trial's thread is the caller's."""

    def run(self, settings: TrialSettings, trial: Trial, reporter: TrialReporter) -> TrialRecord:
        from ..runner import run_trial

        return run_trial(settings, trial, reporter)


class _Workers(Executor):
    def __init__(self, pool: WorkerPool) -> None:
        self.pool = pool
        self.slots = pool.size

    def run(self, settings: TrialSettings, trial: Trial, reporter: TrialReporter) -> TrialRecord:
        return self.pool.run(trial, reporter)

    def close(self) -> None:
        self.pool.close()

    def interrupt(self) -> None:
        self.pool.interrupt()


def make_executor(settings: TrialSettings, trial_workers: int | None, max_trials: int | None) -> Executor:
    """`InProcess` without ``trial_workers``; else a pool of that many started workers."""
    if trial_workers is None:
        return InProcess()
    return _Workers(WorkerPool(settings, trial_workers, max_trials))
