"""What ``study.optimize`` did around each trial, kept now that the search loop asks and tells the study itself:
Optuna's own "inside optimize" flag (a sampler or callback may stop the study), the storage heartbeat of a running
trial (and failing the trials of drivers whose heartbeat stopped), and the progress bar."""

from __future__ import annotations

import contextlib
import logging
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["ProgressBar", "as_in_optimize", "fail_stale", "heartbeat"]

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def as_in_optimize(study: Any) -> Iterator[None]:
    """Asking and telling as ``study.optimize`` would, by Optuna's own flag: a sampler or callback may call
    ``study.stop()`` (read back from ``study._stop_flag``), and Optuna does not warn that a heartbeat storage is meant
    for optimize (this loop keeps the heartbeat)."""
    local = study._thread_local
    before = local.in_optimize_loop
    local.in_optimize_loop = True
    try:
        yield
    finally:
        local.in_optimize_loop = before


class ProgressBar:
    """``show_progress_bar=True``: a tqdm bar of this run's trials with the best trial so far, as Optuna draws it."""

    def __init__(self, total: int, single: bool) -> None:
        from tqdm.auto import tqdm

        self.bar = tqdm(total=total)
        self.single = single

    def update(self, study: Any) -> None:
        self.bar.update(1)
        if self.single:
            try:
                best = study.best_trial
            except ValueError:  # no trial completed yet
                return
            self.bar.set_description(f"Best trial: {best.number}. Best value: {best.value:.6g}")

    def close(self) -> None:
        self.bar.close()


def _heartbeat_interval(study: Any) -> int | None:
    interval = getattr(study._storage, "get_heartbeat_interval", None)
    return interval() if interval is not None else None


def fail_stale(study: Any) -> None:
    """Before a trial is asked for, as ``study.optimize`` does on a heartbeat storage: fail (and, through
    ``_requeue_stale``, queue again) the trials of drivers whose heartbeat stopped."""
    import optuna

    if _heartbeat_interval(study):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            optuna.storages.fail_stale_trials(study)


def heartbeat(study: Any, optuna_trial: Any) -> Callable[[], None]:
    """Record ``optuna_trial``'s heartbeat every heartbeat interval while it runs (what ``study.optimize`` does
    around each trial), so that other drivers fail it once this one dies; returns what stops it (a no-op on
    storages without heartbeat)."""
    interval = _heartbeat_interval(study)
    if not interval:
        return lambda: None
    storage, trial_id, stopped = study._storage, optuna_trial._trial_id, threading.Event()

    def beat() -> None:
        while True:
            try:
                storage.record_heartbeat(trial_id)
            except Exception as error:  # a lost database: the trial's tell names it
                logger.debug("Heartbeat of trial %d not recorded: %s", optuna_trial.number, error)
            if stopped.wait(interval):
                return

    thread = threading.Thread(target=beat, name=f"hpsearch-heartbeat-{optuna_trial.number}", daemon=True)
    thread.start()

    def stop() -> None:
        stopped.set()
        thread.join()

    return stop
