"""The worker's side of the driver's reporter and of ``trial.suggest_*``: each call is one round trip on the pipe."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import TrialFailed
from ..trial import TrialReporter

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from ..trial import Trial, TrialRecord

__all__ = ["ProxyReporter", "peak_reserved_mb", "suggest_hook"]


class DriverError(TrialFailed):
    """The driver could not answer (its engine raised): the trial fails with the driver's error."""


def _ask(conn: Connection, message: tuple) -> Any:
    conn.send(message)
    kind, value = conn.recv()
    if kind == "error":
        raise DriverError(value)
    return value


def peak_reserved_mb() -> float | None:
    """The running trial's peak of CUDA memory reserved so far (the cost meter reset the count when it started),
    which packing trials on a GPU counts on; None where the trial uses no GPU."""
    import torch

    if not torch.cuda.is_initialized():
        return None
    return round(torch.cuda.max_memory_reserved() / 2**20, 1)


class ProxyReporter(TrialReporter):
    """Sends the record and every evaluation to the driver; the driver's reporter decides prune or go on. Each
    evaluation carries the trial's peak GPU memory so far: the driver can pack the next trials after a trial's
    first evaluation rather than after its end."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.record: TrialRecord | None = None

    def start(self, record: TrialRecord) -> None:
        self.record = record
        self.conn.send(("start", record))

    def report(self, objective: Any, step: int, metrics: Mapping[str, float], checkpoint: str | None) -> bool:
        last = (
            self.record.intermediates[-1] if self.record is not None and self.record.intermediates else None
        )
        message = ("report", objective, step, dict(metrics), checkpoint, last, peak_reserved_mb())
        return bool(_ask(self.conn, message))


def suggest_hook(conn: Connection) -> Callable[..., Any]:
    """``trial.suggest_*`` inside model_init, asked of the engine's trial in the driver."""

    def hook(trial: Trial, method: str, name: str, args: tuple, kwargs: dict) -> Any:
        return _ask(conn, ("suggest", method, name, args, kwargs))

    return hook
