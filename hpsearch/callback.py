"""The reporting callback: the objective at every evaluation goes to the backend, which may stop the trial."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from trainer import TrainerCallback

from . import _dist, _events
from .trial import Evaluation

if TYPE_CHECKING:
    from ._cost import CostMeter
    from .settings import TrialSettings
    from .trial import TrialRecord, TrialReporter

__all__ = ["ReportingCallback", "TrialTimeout", "Watchdog"]


def _plain_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    out = {}
    for key, value in metrics.items():
        try:
            out[key] = float(value)
        except (TypeError, ValueError):
            continue
    return out


class ReportingCallback(TrainerCallback):
    """Computes the objective at each evaluation, records it and hands it to the backend's reporter.

    When the reporter says prune, training stops (``on_train_end`` still runs) and the trial is marked pruned.
    If a checkpoint is saved at the same step as an evaluation, the report waits for ``on_save`` so that it can
    carry the checkpoint (schedulers that restart trials from checkpoints need it). Under several processes only rank 0 talks to
    the backend; its decision is broadcast so every rank stops together.
    """

    def __init__(
        self,
        settings: TrialSettings,
        reporter: TrialReporter,
        record: TrialRecord,
        meter: CostMeter | None = None,
    ) -> None:
        self.settings = settings
        self.reporter = reporter
        self.record = record
        self.meter = meter  # the trial's cost so far goes into the record at every evaluation
        self.pruned = False
        self.training = False
        self.checkpoints: dict[int, str] = {}
        self._pending: Evaluation | None = None
        self.datasets_per_evaluation = 1
        self._parts: dict[str, Any] = {}
        self._parts_seen = 0

    def evaluates(self, eval_dataset: Any) -> None:
        """Read the trial's ``eval_dataset``: a dict of N datasets is evaluated one dataset at a time (N
        ``on_evaluate`` events, each with that dataset's metrics, as transformers fires them), and the N make one
        evaluation whose objective is computed over all their metrics (as transformers hands them to its search)."""
        self.datasets_per_evaluation = (
            len(eval_dataset) if isinstance(eval_dataset, Mapping) and eval_dataset else 1
        )

    def on_train_begin(self, args, state, control, **kwargs):
        self.training = True

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        metrics = self._whole_evaluation(metrics or {})
        if metrics is None:
            return  # more datasets of this evaluation to come
        evaluation = Evaluation(
            step=state.global_step,
            epoch=state.epoch,
            objective=self.settings.objective_of(metrics),
            metrics=_plain_metrics(metrics),
        )
        self.record.intermediates.append(evaluation)
        _events.evaluated(self.settings.output_dir, self.record.trial_id, evaluation)
        self.record.last_step = state.global_step
        if self.meter is not None:
            self.record.cost = self.meter.snapshot(_dist.world_size())
        if not self.training:
            return
        if control.should_save:
            self._pending = evaluation
            return
        self._report(evaluation, None, control)

    def on_save(self, args, state, control, **kwargs):
        path = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
        self.checkpoints[state.global_step] = path
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self._report(pending, path, control)

    def on_train_end(self, args, state, control, **kwargs):
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self._report(pending, None, control)
        self.training = False

    def _whole_evaluation(self, metrics: Mapping[str, Any]) -> dict[str, Any] | None:
        """The metrics of one whole evaluation, once its last dataset's arrive; None before."""
        if self.datasets_per_evaluation == 1:
            return dict(metrics)
        self._parts.update(metrics)
        self._parts_seen += 1
        if self._parts_seen < self.datasets_per_evaluation:
            return None
        whole, self._parts, self._parts_seen = self._parts, {}, 0
        return whole

    def _report(self, evaluation: Evaluation, checkpoint: str | None, control) -> None:
        prune = False
        if _dist.is_main_process():
            prune = bool(
                self.reporter.report(evaluation.objective, evaluation.step, evaluation.metrics, checkpoint)
            )
        if _dist.broadcast_object(prune):
            self.pruned = True
            control.should_training_stop = True


class TrialTimeout(BaseException):
    """A trial ran past ``trial_timeout``.

    A `BaseException`, like KeyboardInterrupt: a user's ``except Exception`` retry loop inside the trial must not
    swallow it. `run_trial` catches it and records the trial FAIL.
    """


class Watchdog(TrainerCallback):
    """Enforces ``trial_timeout``.

    In the main thread a SIGALRM interrupts whatever the trial is doing (a hung data loader, a model_init that
    never returns). In other threads (trials an engine runs in threads) a timer raises `TrialTimeout` in the
    trial's thread at the deadline (it lands at the next Python instruction: a trial stuck before its first step
    is stopped too), and the deadline is also checked at every step and evaluation.
    """

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self.deadline: float | None = None
        self._previous_handler: Any = None
        self._armed = False
        self._timer: threading.Timer | None = None
        self._thread_id: int | None = None
        self._lock = threading.Lock()
        self._fired = False

    def _message(self) -> str:
        return f"trial_timeout: the trial ran longer than {self.timeout:g} s and was stopped"

    def start(self) -> None:
        if self.timeout is None:
            return
        self.deadline = time.monotonic() + self.timeout
        if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):

            def on_alarm(signum: int, frame: Any) -> None:
                raise TrialTimeout(self._message())

            self._previous_handler = signal.signal(signal.SIGALRM, on_alarm)
            signal.setitimer(signal.ITIMER_REAL, self.timeout)
            self._armed = True
            return
        self._thread_id = threading.get_ident()
        self._timer = threading.Timer(self.timeout, self._interrupt)
        self._timer.daemon = True
        self._timer.start()

    def _interrupt(self) -> None:
        with self._lock:
            if self._thread_id is None:
                return  # the trial already ended
            self._fired = True
            _async_raise(self._thread_id, TrialTimeout)

    def stop(self) -> None:
        if self._armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._previous_handler or signal.SIG_DFL)
            self._armed = False
        if self._timer is not None:
            self._timer.cancel()
            with self._lock:
                if self._fired and self._thread_id is not None:
                    _async_raise(self._thread_id, None)  # withdraw one not delivered yet
                self._thread_id = None
            self._timer = None

    @property
    def fired(self) -> bool:
        return self._fired or self.expired()

    def expired(self) -> bool:
        return self.deadline is not None and time.monotonic() > self.deadline

    def check(self) -> None:
        if self.expired():
            raise TrialTimeout(self._message())

    def on_step_end(self, args, state, control, **kwargs):
        if self.expired():
            control.should_training_stop = True

    def on_evaluate(self, args, state, control, **kwargs):
        if self.expired():
            control.should_training_stop = True


def _async_raise(thread_id: int, exception: type[BaseException] | None) -> None:
    """Raise ``exception`` in the thread ``thread_id`` at its next Python instruction (None withdraws a pending one)."""
    import ctypes

    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exception) if exception is not None else None
    )
