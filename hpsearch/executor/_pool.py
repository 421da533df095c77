"""`WorkerPool`: ``trial_workers`` persistent worker processes, each running one trial at a time.

Written here rather than taken from pebble or loky: their pools run a function per task and return its result,
with no way for the task to ask its caller something while it runs (the prune decision at every evaluation, a
``trial.suggest_*`` inside model_init) and, for loky, no way to kill one task's process. This pool is one pipe
per worker and a queue of idle workers.

Workers are spawned by one thread that lives as long as the pool: Linux sends the parent-death signal when the
thread that started a process ends, so a worker started by a trial's thread would die with that thread.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
import queue
import threading
from typing import TYPE_CHECKING, Any

from ..errors import HPSearchError, SearchConfigError
from . import _child
from ._checks import usable_cores
from ._drive import drive, signal_name

if TYPE_CHECKING:
    from ..settings import TrialSettings
    from ..trial import Trial, TrialRecord, TrialReporter

__all__ = ["Worker", "WorkerPool"]

logger = logging.getLogger(__name__)

#: Seconds a new worker has to import torch and load the settings before the search gives up on it.
STARTUP_TIMEOUT_S = 300.0


class Worker:
    """One worker process, its pipe, and where it runs (slot, threads, device)."""

    def __init__(self, slot: int, process: Any, conn: Any) -> None:
        self.slot, self.process, self.conn = slot, process, conn
        self.where: dict[str, Any] | None = None
        self.trials = 0

    def wait_ready(self) -> None:
        if self.where is not None:
            return
        if not self.conn.poll(STARTUP_TIMEOUT_S):
            self.kill()
            raise HPSearchError(f"worker process {self.slot} did not start within {STARTUP_TIMEOUT_S:g} s.")
        try:
            kind, value = self.conn.recv()
        except (EOFError, OSError):
            raise HPSearchError(f"worker process {self.slot} died while starting: {self.death()}.") from None
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
    """``size`` workers; `run` sends a trial to an idle one (waiting for one), from any number of threads."""

    def __init__(self, settings: TrialSettings, size: int, max_trials: int | None = None) -> None:
        self.settings, self.size, self.max_trials = settings, size, max_trials
        self._blob = pickle.dumps(settings)
        self._threads = _threads(size)
        self._devices = _devices(size)
        self._context = multiprocessing.get_context("spawn")
        self._idle: queue.Queue[Worker] = queue.Queue()
        self._live: set[Worker] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._requests: queue.Queue[int | None] = queue.Queue()
        self._spawner = threading.Thread(target=self._spawn_loop, name="hpsearch-spawner", daemon=True)
        self._spawner.start()
        for slot in range(size):
            self._requests.put(slot)

    def _spawn_loop(self) -> None:
        for slot in iter(self._requests.get, None):
            parent_end, child_end = self._context.Pipe(duplex=True)
            device = self._devices[slot] if self._devices else None
            process = self._context.Process(
                target=_child.main,
                name=f"hpsearch-worker-{slot}",
                args=(child_end, os.getpid(), slot, self._threads, device),
            )
            process.start()
            child_end.close()
            worker = Worker(slot, process, parent_end)
            # The settings (the datasets too) go over the pipe, which blocks until the worker has imported what it
            # needs and reads them: a thread of their own, so that the workers start side by side.
            threading.Thread(target=_send_quietly, args=(parent_end, self._blob), daemon=True).start()
            with self._lock:
                if self._closed:
                    worker.kill()
                    continue
                self._live.add(worker)
            self._idle.put(worker)

    def run(self, trial: Trial, reporter: TrialReporter) -> TrialRecord:
        worker = self._idle.get()
        try:
            worker.wait_ready()
        except BaseException:
            self._retire(worker, replace=False)
            raise
        healthy = False
        try:
            record, healthy = drive(worker, self.settings, trial, reporter)
            worker.trials += 1
            record.extra.update(worker.where or {})
            return record
        finally:
            recycle = self.max_trials is not None and worker.trials >= self.max_trials
            if healthy and not recycle:
                self._idle.put(worker)
            else:
                self._retire(worker, replace=True)

    def _retire(self, worker: Worker, replace: bool) -> None:
        with self._lock:
            self._live.discard(worker)
            closed = self._closed
        worker.stop() if worker.process.is_alive() else worker.kill()
        if replace and not closed:
            self._requests.put(worker.slot)

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


def _threads(size: int) -> int:
    """Each worker's torch threads: its share of the cores, and no more than this process is set to use (a user's
    ``torch.set_num_threads(1)`` or ``torch_threads: 1`` holds in the workers too)."""
    import torch

    return max(1, min(usable_cores() // size, torch.get_num_threads()))


def _send_quietly(conn: Any, blob: bytes) -> None:
    try:
        conn.send_bytes(blob)
    except (OSError, TypeError, ValueError):
        pass  # the worker died or was stopped first (its pipe closed): the thread that waits for it says why


def _devices(size: int) -> list[str]:
    """One GPU per worker where GPUs exist (round robin when workers outnumber them); none on a CPU machine."""
    import torch

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    count = torch.cuda.device_count()
    if count == 0:
        return []
    ids = [d.strip() for d in visible.split(",")][:count] if visible else [str(i) for i in range(count)]
    return [ids[slot % len(ids)] for slot in range(size)]
