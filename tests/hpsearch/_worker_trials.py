"""Trials for the `trial_workers` tests: importable, so that the worker processes unpickle them by reference.

`faulty_model_init` crashes its worker in a way chosen by the trial's number (see `FAULTS`); the others train the
digits MLP. Everything here runs in a worker process and is keyed on the trial alone.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from typing import Any

from tests.hpsearch._trials import model_init as digits_model_init

#: The process that imported this module (a worker forked from a forkserver that preloaded it: the server).
LOADED_BY = os.getpid()

#: What trial ``number`` does in `faulty_model_init` (any other number trains normally).
FAULTS = {0: "segfault", 1: "os._exit(3)", 2: "SIGKILL", 3: "MemoryError"}


def faulty_model_init(trial: Any) -> Any:
    fault = FAULTS.get(trial.number) if trial is not None else None  # None: the Trainer's own call
    if fault == "segfault":
        ctypes.string_at(0)  # reads address 0: SIGSEGV
    elif fault == "os._exit(3)":
        os._exit(3)
    elif fault == "SIGKILL":  # what the kernel's OOM killer sends
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(10)
    elif fault == "MemoryError":
        bytearray(1 << 60)  # a real allocation that fails
    return digits_model_init(trial)


def stuck_model_init(trial: Any) -> Any:
    """Trial 0 sleeps 60 s with SIGALRM blocked (its own timer cannot stop it: only a kill can); trial 1 sleeps 60 s
    in one call (the timer's signal interrupts it); the others train."""
    if trial is None:
        pass
    elif trial.number == 0:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        time.sleep(60)
    elif trial.number == 1:
        time.sleep(60)
    return digits_model_init(trial)


def suggesting_model_init(trial: Any) -> Any:
    """Asks the engine for one more parameter from inside the worker (answered by the driver's Optuna trial)."""
    if trial is not None:
        trial.suggest_int("extra_width", 1, 4)
    return digits_model_init(trial)


def sleepy_model_init(trial: Any) -> Any:
    """Slow trials: a driver killed while they run leaves them unfinished. Only a trial's call sleeps: the Trainer's
    own call at construction (trial None, in the driver) would hold the driver before it starts any worker."""
    if trial is not None:
        time.sleep(float(os.environ.get("HPSEARCH_TEST_TRIAL_SLEEP", "0")))
    return digits_model_init(trial)


#: The seed a run of `exit_at_seed` dies at (the trainer seeds torch with ``TrainingArguments.seed`` first).
EXIT_SEED = 43


def exit_at_seed(trial: Any) -> Any:
    """Ends its worker (``os._exit(9)``) in every run trained with seed `EXIT_SEED`: a re-evaluation's first seed."""
    import torch

    if trial is not None and torch.initial_seed() == EXIT_SEED:
        os._exit(9)
    return digits_model_init(trial)


class OomOnce:
    """Trial 0's first run raises ``torch.cuda.OutOfMemoryError`` (as CUDA does when a packed GPU is full), leaving
    ``path``; every other run trains. Picklable: a class at module level holding a path."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, trial: Any = None) -> Any:
        import torch

        if trial is not None and trial.number == 0 and not os.path.exists(self.path):
            open(self.path, "w").close()
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return digits_model_init(trial)


def eval_loss(metrics: Any) -> float:
    return float(metrics["eval_loss"])


def warm_model_init(trial: Any = None) -> Any:
    """Fails a trial whose worker has not imported ``torch._dynamo`` yet (its optimizer would import it, 1-2 s, inside
    the trial's time and timeout): a worker pays that in its start-up."""
    import sys

    if trial is not None and "torch._dynamo" not in sys.modules:
        raise RuntimeError("torch._dynamo was not imported before the worker's first trial")
    return digits_model_init(trial)


def probing_model_init(trial: Any = None) -> Any:
    """Writes what its worker sees (``HPSEARCH_TEST_PROBE``, its pid and parent, the processes that imported this
    module and `tests.hpsearch._imported_by`) to ``$HPSEARCH_TEST_PROBE_DIR/<trial number>-<pid>.json``, then
    trains."""
    if trial is not None:
        import json
        import sys

        marker = sys.modules.get("tests.hpsearch._imported_by")
        seen = {
            "probe": os.environ.get("HPSEARCH_TEST_PROBE"),
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "this_module_loaded_by": LOADED_BY,
            "marker_loaded_by": getattr(marker, "PID", None),
        }
        folder = os.environ["HPSEARCH_TEST_PROBE_DIR"]
        with open(os.path.join(folder, f"{trial.number}-{os.getpid()}.json"), "w") as f:
            json.dump(seen, f)
    return digits_model_init(trial)


#: The largest training batch `oom_above_8_model_init`'s model takes before it raises CUDA's out-of-memory error.
OOM_ABOVE = 8


def oom_above_8_model_init(trial: Any = None) -> Any:
    """The digits MLP whose training forward raises ``torch.cuda.OutOfMemoryError`` for a batch over `OOM_ABOVE`
    examples, as a GPU too small for the micro-batch would (evaluation batches are not limited)."""
    import torch

    from tests._digits import DigitsMLP

    class Picky(DigitsMLP):
        def forward(self, x: Any, labels: Any = None) -> Any:
            if self.training and x.shape[0] > OOM_ABOVE:
                raise torch.cuda.OutOfMemoryError(f"CUDA out of memory. Tried a batch of {x.shape[0]}")
            return super().forward(x, labels)

    model = digits_model_init(trial)
    model.__class__ = Picky
    return model
