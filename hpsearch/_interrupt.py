"""Ctrl-C in `hpsearch run`: exit code 130, no traceback, and one line saying what finished, what runs again, and
the exact command that continues.

`Interrupt` is a context manager around the search: its SIGINT handler notes the interrupt, silences logging (an
engine's "trial failed" warning with the KeyboardInterrupt's traceback, the search's own warnings) and raises
KeyboardInterrupt as Python's own handler does, so every backend unwinds as it does for a Ctrl-C. `summary` then
reads the counts back from the search.json the search saved as it stopped, so the line agrees with the file.
"""

from __future__ import annotations

import contextlib
import logging
import shlex
import signal
import threading
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["Interrupt", "continue_command", "held", "summary"]


class Interrupt:
    """Notes a Ctrl-C (``interrupted``) during the ``with`` block; restores the handler and logging after it."""

    def __init__(self) -> None:
        self.interrupted = False
        self._previous: Any = None
        self._installed = False

    def _handle(self, signum: int, frame: Any) -> None:
        self.interrupted = True
        logging.disable(logging.CRITICAL)  # what unwinds now is no news to the user: the summary line says it
        raise KeyboardInterrupt

    def __enter__(self) -> Interrupt:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
        if self.interrupted:
            logging.disable(logging.NOTSET)

    def summary(self, config: Any, argv: Sequence[str]) -> str:
        """The line for an interrupted sweep (a `SweepConfig`), its counts read back from its search.json."""
        from .backends import get_backend
        from .results import SearchResult

        can_resume = get_backend(config.backend).can_resume
        try:
            result = SearchResult.load(config.output_dir)
        except (OSError, ValueError):
            result = None
        return summary(
            result, config.n_trials, config.output_dir, continue_command(argv, can_resume), can_resume
        )


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Ctrl-C during the block is held and delivered (to the handler it found) when the block ends: for a step that
    must not be cut in two, such as an engine creating a trial and the adapter taking charge of it. Only the main
    thread receives signals; elsewhere the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[Any] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught:
            if callable(previous):
                previous(signal.SIGINT, caught[0])
            elif previous == signal.SIG_DFL:
                raise KeyboardInterrupt


def continue_command(argv: Sequence[str], can_resume: bool) -> str:
    """The command that continues the interrupted run: the same one with --resume (without --fresh), or, for a
    backend that cannot resume, the same one with --fresh (it starts over)."""
    kept = [a for a in argv if a not in ("--resume", "--fresh")]
    return shlex.join(["hpsearch", *kept, "--resume" if can_resume else "--fresh"])


def summary(result: Any, n_trials: int, output_dir: str, command: str, can_resume: bool) -> str:
    """The one line printed after Ctrl-C, from the saved results (``result`` is None when nothing was saved)."""
    counts = result.counts() if result is not None else {"COMPLETE": 0, "PRUNED": 0, "FAIL": 0}
    finished = counts["COMPLETE"] + counts["PRUNED"] + counts["FAIL"]
    left = max(n_trials - finished, 0)
    head = (
        f"Interrupted: {finished} of {n_trials} trials finished ({counts['COMPLETE']} complete, "
        f"{counts['PRUNED']} pruned, {counts['FAIL']} failed), saved in {output_dir}"
    )
    if not can_resume:
        return f"{head}; this backend cannot resume, so any trial that was running is lost; start over with: {command}"
    return (
        f"{head}; any trial that was running (with trial_workers, several) is not counted and trains again, with the "
        f"{left} trial(s) still to run, when you continue with: {command}"
    )
