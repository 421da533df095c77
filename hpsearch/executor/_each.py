"""`run_each`: a stream of trials run ``slots`` at a time, each result handed back in the caller's thread.

The one loop that runs trials side by side: the search loop (`hpsearch._search_loop`, which asks the engine for
each trial as a slot frees) and the re-evaluation of the leaders both run through it. With one slot the trials run
one after the other in the calling thread (what a search under ``accelerate launch`` needs: the trial's
collectives run in the thread that announced it); with more, each runs in a thread of its own that waits on its
worker process, and the results are kept as the trials finish, not in the order they started.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from ..trial import Trial

__all__ = ["run_each"]

logger = logging.getLogger(__name__)

R = TypeVar("R")


def run_each(
    slots: int,
    trials: Iterable[Trial],
    run: Callable[[Trial], R],
    keep: Callable[[R], None],
    stopped: Callable[[], bool] = lambda: False,
    before: Callable[[Trial], None] | None = None,
    interrupt: Callable[[], None] | None = None,
) -> None:
    """``run(trial)`` for each of ``trials``, at most ``slots`` at once; ``keep(result)`` for each result, in the
    calling thread. The next trial is drawn from ``trials`` only when a slot is free. An error (from ``keep``, from
    drawing a trial, a failed ``run``, or Ctrl-C while waiting) starts no more trials: the running ones finish and
    are kept, then the first error is raised. No trial starts once ``stopped()``; ``before(trial)`` is called in the
    caller's thread just before a trial starts. On Ctrl-C, ``interrupt()`` (when given) ends the running trials
    instead: each raises KeyboardInterrupt from its ``run``, so nothing waits for them to finish."""
    if slots == 1:
        for trial in trials:
            if stopped():
                return
            if before is not None:
                before(trial)
            keep(run(trial))
        return
    errors: list[BaseException] = []

    def take(future: concurrent.futures.Future[R]) -> None:
        try:
            keep(future.result())
        except (
            BaseException
        ) as error:  # the trials still running are kept all the same, then the first is raised
            if errors:
                logger.debug("After the first error: %r", error)
            errors.append(error)

    with concurrent.futures.ThreadPoolExecutor(
        max_workers=slots, thread_name_prefix="hpsearch-trial"
    ) as pool:
        running: set[concurrent.futures.Future[R]] = set()
        try:
            for trial in trials:
                if stopped():
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
                    if errors:
                        break
        except BaseException as error:  # drawing the next trial failed, or Ctrl-C while waiting
            errors.append(error)
        if interrupt is not None and any(isinstance(error, KeyboardInterrupt) for error in errors):
            interrupt()
        for future in concurrent.futures.as_completed(running):
            take(future)
    if errors:
        raise errors[0]
