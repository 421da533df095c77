"""`WorkerPool`: ``trial_workers`` persistent worker processes, each running one trial at a time.

Written here rather than taken from pebble or loky: their pools run a function per task and return its result,
with no way for the task to ask its caller something while it runs (the prune decision at every evaluation, a
``trial.suggest_*`` inside model_init) and, for loky, no way to kill one task's process. This pool is one pipe
per worker and a list of idle workers; which idle worker takes the next trial is `DeviceLedger`'s decision (a GPU
packed only as far as measured memory allows; a trial out of CUDA memory trained again alone: see `_placement`).

Workers are forked from multiprocessing's forkserver (``spawn`` where there is none), which imports torch, the
trial's code and the search's own modules once (`_preload`): a worker starts in milliseconds instead of importing
them afresh (seconds; more when several start at once on few cores), so a replaced worker costs nothing and a second
search in the same process starts at once. The server is a fresh interpreter, not a fork of the driver (whose
threads and CUDA state a fork would copy); a worker takes the driver's environment as it is when the worker starts
(`_child.main`). Workers are started by one thread that lives as long as the pool: Linux sends the parent-death
signal when the thread that started a process ends, so a worker started by a trial's thread would die with that
thread.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
import queue
import threading
import time
from typing import TYPE_CHECKING, Any

from .._cost import DeviceShares, charge_share
from ..errors import HPSearchError, SearchConfigError
from . import _child
from ._checks import usable_cores
from ._drive import drive, signal_name
from ._placement import (
    SMALLER_BATCH,
    DeviceLedger,
    assign_devices,
    is_cuda_oom,
    retry_alone_helps,
    visible_devices,
)
from ._preload import PRELOAD, start_server

if TYPE_CHECKING:
    from ..settings import TrialSettings
    from ..trial import Trial, TrialRecord, TrialReporter

__all__ = ["Worker", "WorkerPool"]

logger = logging.getLogger(__name__)

#: Seconds a new worker has to import torch and load the settings before the search gives up on it.
STARTUP_TIMEOUT_S = 300.0


class Worker:
    """One worker process, its pipe, and where it runs (slot, threads, device)."""

    def __init__(self, slot: int, process: Any, conn: Any, device: str | None = None) -> None:
        self.slot, self.process, self.conn, self.device = slot, process, conn, device
        self.where: dict[str, Any] | None = None
        self.trials = 0
        self.co_tenants = 0  # trials running on its GPU when its current one started

    def wait_ready(self) -> None:
        if self.where is not None:
            return
        if not self.conn.poll(STARTUP_TIMEOUT_S):
            self.kill()
            raise HPSearchError(f"worker process {self.slot} did not start within {STARTUP_TIMEOUT_S:g} s.")
        try:
            kind, value = self.conn.recv()
        except (EOFError, OSError):
            raise HPSearchError(
                f"worker process {self.slot} died while starting: {self.death()}; its error is in the output above "
                '(a script that runs its search outside `if __name__ == "__main__":` starts it again in each '
                "worker, which spawn refuses)."
            ) from None
        if kind == "startup_error":
            self.kill()
            raise SearchConfigError(
                f"a trial worker process could not load the search's settings: {value}; the trainer, model_init and "
                "compute_objective must be importable from a file (a script run as `python file.py`, or a module), "
                "or leave trial_workers unset to run the trials in this process."
            )
        self.where = value

    def death(self) -> str:
        self.process.join(5)
        return signal_name(self.process.exitcode)

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(0.5)
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send(("stop",))
        except OSError:
            pass
        self.process.join(2)
        self.kill()


class WorkerPool:
    """``size`` workers; `run` sends a trial to an idle one (waiting for one), from any number of threads.

    ``devices``: the GPU of each worker (`CUDA_VISIBLE_DEVICES` in it; default: `assign_devices` over the GPUs this
    process sees, none on a CPU machine)."""

    def __init__(
        self,
        settings: TrialSettings,
        size: int,
        max_trials: int | None = None,
        devices: list[str | None] | None = None,
    ) -> None:
        self.settings, self.size, self.max_trials = settings, size, max_trials
        self._blob = pickle.dumps(settings)
        self._threads = _threads(size)
        self._devices = devices if devices is not None else _devices(size)
        self._context = start_context()
        start_server(self._context, self._blob)
        self._idle: list[Worker] = []
        self._live: set[Worker] = set()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # a worker became idle, or a device freer
        self._ledger = DeviceLedger()
        self._shares = DeviceShares()  # what each trial on a shared GPU is charged (cost.device_s)
        self._closed = False
        self._interrupted: set[Worker] = set()  # busy workers Ctrl-C stopped: their trials are abandoned
        self._failed: BaseException | None = None  # why the spawner could not start a worker
        self._requests: queue.Queue[int | None] = queue.Queue()
        self._spawner = threading.Thread(target=self._spawn_loop, name="hpsearch-spawner", daemon=True)
        self._spawner.start()
        for slot in range(size):
            self._requests.put(slot)

    def _spawn_loop(self) -> None:
        for slot in iter(self._requests.get, None):
            parent_end, child_end = self._context.Pipe(duplex=True)
            device = self._devices[slot]
            process = self._context.Process(
                target=_child.main,
                name=f"hpsearch-worker-{slot}",
                args=(child_end, os.getpid(), slot, self._threads, device, dict(os.environ)),
            )
            try:
                process.start()
            except BaseException as error:  # spawn refuses while the main module is still being imported
                parent_end.close()
                child_end.close()
                with self._lock:
                    self._failed = error  # the trials waiting for a worker raise it: none would ever come
                    self._changed.notify_all()
                return
            child_end.close()
            worker = Worker(slot, process, parent_end, device)
            # The settings (the datasets too) go over the pipe, which blocks until the worker has imported what it
            # needs and reads them: a thread of their own, so that the workers start side by side.
            threading.Thread(target=_send_quietly, args=(parent_end, self._blob), daemon=True).start()
            with self._lock:
                if self._closed:
                    worker.kill()
                    continue
                self._live.add(worker)
                self._idle.append(worker)
                self._changed.notify_all()

    def run(self, trial: Trial, reporter: TrialReporter) -> TrialRecord:
        """Run ``trial`` on an idle worker the ledger admits; a trial out of CUDA memory is trained again (see
        `_placement`): alone on the least busy GPU when that can help, then with a smaller micro-batch."""
        record = self._attempt(trial, reporter)
        failed_on = record.extra.get("device_id")
        if failed_on is None or not is_cuda_oom(record):
            return record
        tries: list[dict[str, Any]] = [_attempt_info(record)]
        with self._lock:
            device = self._ledger.retry_device(failed_on, self._devices)
            shared = (
                record.extra.get("co_tenants", 0) > 0 or "device_share" in record.extra
            )  # at start, or after
            again_alone = retry_alone_helps(failed_on, device, shared)
            self._ledger.reserve(device)
        if again_alone:
            logger.warning(
                "Trial %s ran out of CUDA memory on device %s; training it again alone on device %s.",
                record.name,
                failed_on,
                device,
            )
            record = self._attempt(trial, reporter, alone=device)
            if not is_cuda_oom(record):
                record.extra["oom_retry"] = tries[0]
                return record
            tries.append(_attempt_info(record))
            with self._lock:
                self._ledger.reserve(device)
        logger.warning(
            "Trial %s ran out of CUDA memory alone on device %s; training it again there with a smaller "
            "micro-batch (auto_find_batch_size halves per_device_train_batch_size until it fits).",
            record.name,
            device,
        )
        record = self._attempt(trial, reporter, alone=device, args=SMALLER_BATCH)
        record.extra["oom_retry"] = tries[0]
        if len(tries) > 1:
            record.extra["oom_retry_alone"] = tries[1]
        record.extra["oom_smaller_batch"] = True
        return record

    def _take(self, alone: str | None) -> Worker:
        """An idle worker the ledger lets start a trial (``alone``: the retry's device, once nothing runs there)."""
        with self._changed:
            while True:
                for worker in self._idle:
                    if (alone is None and self._ledger.admits(worker.device)) or (
                        alone is not None and worker.device == alone and self._ledger.free_for_alone(alone)
                    ):
                        self._idle.remove(worker)
                        worker.co_tenants = self._ledger.enter(worker.device, alone is not None)
                        return worker
                if self._failed is not None:
                    raise HPSearchError(
                        f"a trial worker process could not be started: {_first_line(self._failed)}. Where it speaks of "
                        "the bootstrapping phase, run the search under `if __name__ == "
                        '"__main__":` (each worker process imports the main module again).'
                    ) from self._failed
                self._changed.wait()

    def _attempt(
        self,
        trial: Trial,
        reporter: TrialReporter,
        alone: str | None = None,
        args: dict[str, Any] | None = None,
    ) -> TrialRecord:
        """``trial`` on one worker (``alone``: on that GPU, once it has nothing else running; ``args``: changes to
        the trainer's arguments for this attempt)."""
        worker = self._take(alone)
        peak = None
        try:
            worker.wait_ready()
        except BaseException:
            self._release(worker, peak, alone is not None)
            self._retire(worker, replace=False)
            raise
        healthy = False
        record: TrialRecord | None = None
        with self._lock:
            self._ledger.set_total(worker.device, (worker.where or {}).get("memory_mb"))
            if worker.device is not None:
                self._shares.enter(worker.device, worker, time.monotonic())
        try:
            record, healthy = drive(worker, self.settings, trial, reporter, self._measured, args)
            with self._lock:
                interrupted = worker in self._interrupted
            if interrupted:  # Ctrl-C stopped its worker: not a failed trial, one that trains again
                record = None
                raise KeyboardInterrupt
            worker.trials += 1
            record.extra.update(worker.where or {})
            if worker.device is not None:
                record.extra.update(device_id=worker.device, co_tenants=worker.co_tenants)
            if healthy:
                peak = record.extra.get("peak_reserved_mb")
            return record
        finally:
            held = self._release(worker, peak, alone is not None)
            if record is not None and held is not None:
                _charge(record, *held)
            recycle = self.max_trials is not None and worker.trials >= self.max_trials
            if healthy and not recycle:
                with self._lock:
                    self._idle.append(worker)
                    self._changed.notify_all()
            else:
                self._retire(worker, replace=True)

    def _measured(self, peak_mb: float) -> None:
        """A running trial's peak so far (at one of its evaluations): the ledger may pack more trials now."""
        with self._lock:
            self._ledger.observe(peak_mb)
            self._changed.notify_all()

    def _release(self, worker: Worker, peak: float | None, alone: bool) -> tuple[float, float] | None:
        """The trial on ``worker`` ended: its device is freer; (seconds it held its GPU, its share of them) when its
        share was counted (a trial that started)."""
        with self._lock:
            self._ledger.leave(worker.device, peak, alone)
            held = None
            if worker.device is not None and worker.where is not None:  # not one whose worker failed to start
                held = self._shares.leave(worker.device, worker, time.monotonic())
            self._changed.notify_all()
            return held

    def _retire(self, worker: Worker, replace: bool) -> None:
        with self._lock:
            self._live.discard(worker)
            closed = self._closed
        worker.stop() if worker.process.is_alive() else worker.kill()
        if replace and not closed:
            self._requests.put(worker.slot)

    def interrupt(self) -> None:
        """Ctrl-C: end the trials running now (their workers ignore SIGINT, so that a trial is never cut in two by
        it): each busy worker is terminated, and its trial raises KeyboardInterrupt where it waits (`_attempt`)."""
        with self._lock:
            self._closed = True  # no worker is started in the place of these
            busy = [worker for worker in self._live if worker not in self._idle]
            self._interrupted.update(busy)
        for worker in busy:
            if worker.process.is_alive():
                worker.process.terminate()

    def close(self) -> None:
        """Stop every worker (killing those that do not stop) and the spawner."""
        with self._lock:
            self._closed = True
            workers = list(self._live)
            self._live.clear()
        self._requests.put(None)
        self._spawner.join(STARTUP_TIMEOUT_S)
        for worker in workers:
            worker.stop()


def start_context() -> Any:
    """multiprocessing's forkserver context, preloading `PRELOAD` (a server already started by someone else keeps
    its own preload: its workers then import these themselves); ``spawn`` where there is no forkserver (Windows)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(PRELOAD))
    return context


def _attempt_info(record: TrialRecord) -> dict[str, Any]:
    """What the record of a retried trial keeps of an attempt that ran out of memory (its cost kept apart)."""
    info = {k: record.extra.get(k) for k in ("device_id", "co_tenants", "worker_pid")}
    info.update(error=record.error, cost=dict(record.cost))
    return info


def _charge(record: TrialRecord, held_s: float, share_s: float) -> None:
    """A trial that shared its GPU is charged its share of it (``cost.device_s``); ``extra["device_share"]``: the
    fraction of the GPU it had on average."""
    if held_s > 0 and share_s < held_s:
        record.cost = charge_share(record.cost, held_s, share_s)
        record.extra["device_share"] = round(share_s / held_s, 4)


def _threads(size: int) -> int:
    """Each worker's torch threads: its share of the cores, and no more than this process is set to use (a user's
    ``torch.set_num_threads(1)`` or ``torch_threads: 1`` holds in the workers too)."""
    import torch

    return max(1, min(usable_cores() // size, torch.get_num_threads()))


def _first_line(error: BaseException) -> str:
    """``error``'s type and first sentence, on one line (multiprocessing's messages span several indented lines)."""
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text.split('. ')[0].rstrip('.')}" if text else type(error).__name__


def _send_quietly(conn: Any, blob: bytes) -> None:
    try:
        conn.send_bytes(blob)
    except (OSError, TypeError, ValueError):
        pass  # the worker died or was stopped first (its pipe closed): the thread that waits for it says why


def _devices(size: int) -> list[str | None]:
    """One GPU per worker where GPUs exist (round robin when workers outnumber them); none on a CPU machine."""
    import torch

    return assign_devices(
        size, visible_devices(os.environ.get("CUDA_VISIBLE_DEVICES"), torch.cuda.device_count())
    )
