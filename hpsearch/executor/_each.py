"""`run_each`: a stream of trials run ``slots`` at a time, each finished record handed back in the caller's thread.

The loop that a backend without an engine of its own (random) and the re-evaluation of the leaders share: with one
slot the trials run one after the other in the calling thread (what a search under ``accelerate launch`` needs:
the trial's collectives run in the thread that announced it); with more, each runs in a thread of its own that
waits on its worker process, and the records are kept as the trials finish, not in the order they started.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..trial import Trial, TrialRecord

__all__ = ["run_each"]


def run_each(
    slots: int,
    trials: Iterable[Trial],
    run: Callable[[Trial], TrialRecord],
    keep: Callable[[TrialRecord], None],
    stopped: Callable[[], bool],
    before: Callable[[Trial], None] | None = None,
) -> None:
    """``run(trial)`` for each of ``trials``, at most ``slots`` at once; ``keep(record)`` for each record. An error
    from either (`TooManyFailedTrials` from the session) starts no more trials: the running ones finish and are
    kept, then the first error is raised. No trial starts once ``stopped()``; ``before(trial)`` is called in the
    caller's thread just before a trial starts."""
    if slots == 1:
        for trial in trials:
            if stopped():
                return
            if before is not None:
                before(trial)
            keep(run(trial))
        return
    errors: list[BaseException] = []

    def take(future: concurrent.futures.Future[TrialRecord]) -> None:
        try:
            keep(future.result())
        except BaseException as error:  # the trials still running are kept all the same, then it is raised
            errors.append(error)

    with concurrent.futures.ThreadPoolExecutor(
        max_workers=slots, thread_name_prefix="hpsearch-trial"
    ) as pool:
        running: set[concurrent.futures.Future[TrialRecord]] = set()
        for trial in trials:
            if errors or stopped():
                break
            if before is not None:
                before(trial)
            running.add(pool.submit(run, trial))
            if len(running) >= slots:
                done, running = concurrent.futures.wait(
                    running, return_when=concurrent.futures.FIRST_COMPLETED
                )
                for future in done:
                    take(future)
        for future in concurrent.futures.as_completed(running):
            take(future)
    if errors:
        raise errors[0]
