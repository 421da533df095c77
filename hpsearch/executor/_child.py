"""The worker process: started by `WorkerPool` (from a forkserver, or with ``spawn``), it runs the trials the driver
sends until told to stop.

It dies with its driver: the kernel sends it SIGKILL when its parent ends (``PR_SET_PDEATHSIG``, Linux), its parent
being the driver (spawn) or multiprocessing's forkserver, which ends with the driver once its workers let go of its
"alive" pipe (`_release_forkserver`); and a thread watches the driver itself (other systems, or a parent that died in
the instant before the ``prctl``). Ctrl-C goes to the driver alone: the driver stops its workers.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import sys
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from ..settings import TrialSettings

__all__ = ["main"]

_PR_SET_PDEATHSIG = 1


def _die_with(driver: int) -> None:
    _release_forkserver()
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    try:
        handle: int | None = os.pidfd_open(driver)  # Linux 5.3+: readable once the driver has ended
    except ProcessLookupError:
        os._exit(1)
    except (AttributeError, OSError):  # other systems: polled
        handle = None
    threading.Thread(target=_watch, args=(driver, handle), name="hpsearch-driver-watch", daemon=True).start()


def _watch(driver: int, handle: int | None) -> None:
    """Exit this process once ``driver`` has ended (``handle``: a pidfd of it, else its pid and this process's parent
    are polled)."""
    if handle is not None:
        select.select([handle], [], [])
    else:
        parent = os.getppid()
        while os.getppid() == parent and _running(driver):
            time.sleep(0.5)
    os._exit(1)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _release_forkserver() -> None:
    """A child of multiprocessing's forkserver holds the write end of the pipe whose closing ends the server (so that
    the server outlives none of its clients); this worker lets go of it, so that the server ends with its driver and
    the kernel then ends this worker. A worker that later starts a forkserver of its own gets a fresh one."""
    from multiprocessing import forkserver

    server = forkserver._forkserver
    if server.get_inherited_fds() is None:  # not started by a forkserver (spawn)
        return
    alive = getattr(server, "_forkserver_alive_fd", None)
    if alive is not None:
        os.close(alive)
        setattr(server, "_forkserver_alive_fd", None)  # noqa: B010 (a private attribute, read above by getattr)


def main(
    conn: Connection,
    driver: int,
    slot: int,
    threads: int,
    device: str | None,
    environ: dict[str, str] | None = None,
) -> None:
    """Set up (environment, threads, device, settings), say ready, then run every trial the driver sends.

    ``environ``: the driver's environment now (a forkserver's child starts with the server's, from its start)."""
    if environ is not None:
        os.environ.clear()
        os.environ.update(environ)
    _die_with(driver)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if device is not None:  # before CUDA starts: this worker sees one GPU, as cuda:0
        os.environ["CUDA_VISIBLE_DEVICES"] = device
    try:
        import torch

        torch.set_num_threads(threads)
        # Imported once per worker, not in its first trial (whose time, cost and timeout would include them).
        from .. import callback, runner  # noqa: F401

        _import_dynamo()

        settings: TrialSettings = pickle.loads(conn.recv_bytes())
    except BaseException as error:  # anything here stops the search, with its text
        conn.send(("startup_error", "".join(traceback.format_exception_only(type(error), error)).strip()))
        return
    where = {
        "worker": slot,
        "worker_pid": os.getpid(),
        "threads": torch.get_num_threads(),
        "device": f"cuda (CUDA_VISIBLE_DEVICES={device})" if device is not None else _device(torch),
    }
    if device is not None and torch.cuda.is_available():  # its GPU's size, for packing trials on it
        where["memory_mb"] = round(torch.cuda.get_device_properties(0).total_memory / 2**20, 1)
    conn.send(("ready", where))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return  # the driver is gone
        if message[0] == "stop":
            return
        _run_one(conn, settings, message[1])


def _import_dynamo() -> None:
    """Import ``torch._dynamo`` now: torch's optimizers import it at their first construction (1-2 s, more than the
    rest of a worker's start-up after torch), which would otherwise land in the worker's first trial."""
    try:
        import torch._dynamo  # noqa: F401
    except ImportError:  # a torch without it: its optimizers do not import it either
        pass


def _with_args(settings: TrialSettings, changes: dict[str, Any]) -> TrialSettings:
    """``settings`` whose trainer recipe has ``changes`` in its arguments (a trial's parameters still apply on top)."""
    import dataclasses

    trainer = settings.trainer.recipe()
    trainer.args = trainer.args.replace(**changes)
    return dataclasses.replace(settings, trainer=trainer)


def _device(torch: Any) -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def _run_one(conn: Connection, settings: TrialSettings, task: dict[str, Any]) -> None:
    from ..runner import run_trial
    from ..trial import Trial
    from ._proxy import ProxyReporter, peak_reserved_mb, suggest_hook

    trial = Trial(task["id"], task["number"], task["params"], task["backend"], name=task["name"])
    if task["suggests"]:
        trial._suggest_hook = suggest_hook(conn)
    if task["args"]:  # this attempt's changes to the trainer's arguments (a smaller micro-batch)
        settings = _with_args(settings, task["args"])
    try:
        record = run_trial(settings, trial, ProxyReporter(conn))
    except BaseException as error:  # KeyboardInterrupt or TooManyFailedTrials from the trial's code
        conn.send(("raised", type(error).__name__, str(error)))
        return
    peak = peak_reserved_mb()
    if peak is not None:
        record.extra["peak_reserved_mb"] = peak
    conn.send(("done", record))
