"""The driver's side of one trial in a worker: send it, answer the worker's questions, and get its record back.

The worker's evaluations reach the driver's reporter here (its prune decision goes back), as do its
``trial.suggest_*`` calls. When the worker dies (a segfault, ``os._exit``, the OOM killer) or overruns
``trial_timeout`` by more than `GRACE_S` (it did not stop when its own timer asked), the trial is recorded FAIL
here, with the cause, from what the driver saw of it; the worker is then replaced.
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable
from multiprocessing.connection import wait
from typing import TYPE_CHECKING, Any

from ..errors import TooManyFailedTrials
from ..runner import failed_record, finish_record, new_record
from ..trial import Trial, TrialRecord, TrialState

if TYPE_CHECKING:
    from ..settings import TrialSettings
    from ..trial import TrialReporter
    from ._pool import Worker

__all__ = ["GRACE_S", "drive"]

logger = logging.getLogger(__name__)

#: Seconds a worker has, after ``trial_timeout``, to stop its trial itself before it is killed.
GRACE_S = 2.0


class _Trial:
    """What the driver knows of a trial running in a worker (enough to record it if the worker dies)."""

    def __init__(
        self,
        settings: TrialSettings,
        trial: Trial,
        reporter: TrialReporter,
        on_peak: Callable[[float], None] | None,
    ) -> None:
        self.settings, self.trial, self.reporter, self.on_peak = settings, trial, reporter, on_peak
        self.record: TrialRecord | None = None
        self.sent = time.monotonic()

    def answer(self, message: tuple) -> tuple[str, Any] | None:
        """The reply to a worker's message (None for one that needs none)."""
        kind = message[0]
        if kind == "start":
            self.record = message[1]
            self.reporter.start(message[1])
            return None
        try:
            if kind == "report":
                _, objective, step, metrics, checkpoint, evaluation, peak = message
                if peak is not None and self.on_peak is not None:
                    self.on_peak(peak)
                if self.record is not None and evaluation is not None:
                    self.record.intermediates.append(evaluation)
                    self.record.last_step = evaluation.step
                return "ok", bool(self.reporter.report(objective, step, metrics, checkpoint))
            _, method, name, args, kwargs = message  # suggest
            value = getattr(self.trial.native, method)(name, *args, **kwargs)
            self.trial._params[name] = value
            return "ok", value
        except (KeyboardInterrupt, TooManyFailedTrials):
            raise
        except BaseException as error:  # the engine's error fails the trial, in the worker
            return "error", f"{type(error).__name__}: {error}"

    def failed(self, error: str) -> TrialRecord:
        record = self.record
        if record is None:
            try:
                record = new_record(self.settings, self.trial)
            except Exception:  # hp_name failed: the unnamed record
                return failed_record(self.settings, self.trial, error)
        logger.warning("Trial %s failed: %s", record.name, error)
        # Its worker could not measure it: the wall time the driver saw it hold its device counts (budgets too).
        record.cost.setdefault("device_s", round(time.monotonic() - self.sent, 6))
        return finish_record(self.settings, record, TrialState.FAIL, error)


def drive(
    worker: Worker,
    settings: TrialSettings,
    trial: Trial,
    reporter: TrialReporter,
    on_peak: Callable[[float], None] | None = None,
    args: dict[str, Any] | None = None,
) -> tuple[TrialRecord, bool]:
    """Run ``trial`` on ``worker``: (its record, whether the worker may run another trial); ``on_peak(mb)`` hears the
    trial's peak GPU memory so far at each of its evaluations; ``args``: changes to the trainer's arguments for
    this trial (the smaller micro-batch of a retry), applied under the trial's own parameters."""
    state = _Trial(settings, trial, reporter, on_peak)
    try:
        worker.conn.send(
            (
                "trial",
                {
                    "id": trial.id,
                    "number": trial.number,
                    "params": trial.params,
                    "backend": trial.backend,
                    "name": trial.name,
                    "suggests": trial.native is not None,
                    "args": args or {},
                },
            )
        )
    except OSError:  # it died while idle (the OOM killer picks the largest process, busy or not)
        return state.failed(f"its worker process died before the trial started: {worker.death()}"), False
    timeout = settings.trial_timeout
    deadline = None if timeout is None else time.monotonic() + timeout + GRACE_S
    while True:
        left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        ready = wait([worker.conn, worker.process.sentinel], timeout=left)
        if not ready:
            worker.kill()
            return state.failed(
                f"trial_timeout: the trial ran longer than {timeout:g} s and did not stop when asked; "
                f"its worker process was killed after {GRACE_S:g} s more"
            ), False
        try:
            message = worker.conn.recv() if worker.conn.poll() else None
        except (EOFError, OSError):
            message = None
        if message is None:
            return state.failed(f"its worker process died: {worker.death()}"), False
        if message[0] == "done":
            record = message[1]
            return record, record.state is not TrialState.FAIL
        if message[0] == "raised":
            return state.failed(f"the trial raised {message[1]}: {message[2]}"), False
        reply = state.answer(message)
        if reply is not None:
            try:
                worker.conn.send(reply)
            except OSError:  # it died while the driver answered (a closed pipe: BrokenPipeError, reset)
                return state.failed(f"its worker process died: {worker.death()}"), False


def signal_name(exitcode: int | None) -> str:
    """How a process ended, in words: 'killed by SIGSEGV (signal 11)' or 'exited with code 3'."""
    if exitcode is None:
        return "still running"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = "an unknown signal"
        return f"killed by {name} (signal {-exitcode})"
    return f"exited with code {exitcode}"
