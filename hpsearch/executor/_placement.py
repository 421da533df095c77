"""Where each worker trains, and how trials share a GPU: the decisions, apart from the processes (tested without one).

- **A device per worker.** `assign_devices` gives worker ``i`` the ``i % M``-th of the ``M`` visible GPUs (round
  robin: with more workers than GPUs, several workers share one); on a CPU machine no worker gets one.
- **Packing by measured memory.** `DeviceLedger` admits a trial on a GPU that already runs others only when the
  largest peak measured so far (``torch.cuda.max_memory_reserved`` of a trial, sent at each of its evaluations and
  at its end: packing starts after the first trial's first evaluation), times the trials there plus
  this one, with `MARGIN` more, fits the device's memory. Until a peak is known, or without the device's size, a
  GPU runs one trial at a time: nothing is packed on a guess.
- **CUDA out of memory.** A trial that fails with ``torch.cuda.OutOfMemoryError`` is trained again, alone on the
  GPU with the fewest trials running (`DeviceLedger.retry_device`): no new trial starts there until it has the
  device to itself. Where that cannot help (it already ran alone and there is no other GPU: `retry_alone_helps`),
  or it runs out of memory alone too, it is trained once more alone with a smaller micro-batch: the trainer's
  ``auto_find_batch_size`` (`SMALLER_BATCH`) halves ``per_device_train_batch_size`` at each out-of-memory error
  until a step fits (as transformers: the effective batch shrinks with it; the size it trained with is in
  ``extra["per_device_train_batch_size"]``). Its record keeps the earlier errors (``extra["oom_retry"]``,
  ``extra["oom_retry_alone"]``) and says ``extra["oom_smaller_batch"]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..trial import TrialRecord

__all__ = [
    "MARGIN",
    "SMALLER_BATCH",
    "DeviceLedger",
    "assign_devices",
    "is_cuda_oom",
    "retry_alone_helps",
    "visible_devices",
]

#: Head room kept on a GPU beyond the measured peaks of the trials packed on it (a fraction of the peaks).
MARGIN = 0.15

#: The change to a trial's arguments for its retry with a smaller micro-batch.
SMALLER_BATCH = {"auto_find_batch_size": True}


def visible_devices(cuda_visible_devices: str | None, count: int) -> list[str]:
    """The ids of the ``count`` GPUs this process sees, as ``CUDA_VISIBLE_DEVICES`` names them (indexes or UUIDs);
    unset: ``0 .. count - 1``. CUDA stops at the first invalid entry, which ``count`` already reflects."""
    if count <= 0:
        return []
    if not cuda_visible_devices or not cuda_visible_devices.strip():
        return [str(i) for i in range(count)]
    return [d.strip() for d in cuda_visible_devices.split(",") if d.strip()][:count]


def assign_devices(workers: int, devices: Sequence[str]) -> list[str | None]:
    """The device of each of ``workers`` workers: round robin over ``devices``; None for all without a GPU."""
    if not devices:
        return [None] * workers
    return [devices[slot % len(devices)] for slot in range(workers)]


def is_cuda_oom(record: TrialRecord) -> bool:
    """Whether the trial failed because CUDA ran out of memory (not the host's ``MemoryError``)."""
    error = record.error or ""
    return record.state.value == "FAIL" and ("OutOfMemoryError" in error or "CUDA out of memory" in error)


def retry_alone_helps(failed_on: str, retry_on: str, shared: bool) -> bool:
    """Whether training a trial that ran out of memory on ``failed_on`` alone on ``retry_on`` may fit: it
    ``shared`` the GPU with other trials at some time, or ``retry_on`` is another GPU. A trial that ran alone and
    has no other GPU would run out again: its retry goes straight to a smaller micro-batch."""
    return shared or retry_on != failed_on


@dataclass
class _Device:
    total_mb: float | None = None
    running: int = 0
    alone: bool = False  # a retried trial has it to itself
    reserved: int = 0  # retries waiting to have it to themselves: no new trial starts here meanwhile


@dataclass
class DeviceLedger:
    """The trials running on each GPU, the GPUs' sizes, and the largest peak a trial has needed. Not thread-safe:
    the pool calls it under its lock. ``None`` (a CPU worker) is always admitted and never counted."""

    margin: float = MARGIN
    peak_mb: float | None = None
    devices: dict[str, _Device] = field(default_factory=dict)

    def _get(self, device: str) -> _Device:
        return self.devices.setdefault(device, _Device())

    def set_total(self, device: str | None, total_mb: float | None) -> None:
        if device is not None and total_mb:
            self._get(device).total_mb = float(total_mb)

    def admits(self, device: str | None) -> bool:
        """Whether a new trial may start on ``device`` now (see the module)."""
        if device is None:
            return True
        d = self._get(device)
        if d.alone or d.reserved:
            return False
        if d.running == 0:
            return True
        if self.peak_mb is None or d.total_mb is None:
            return False
        return (d.running + 1) * self.peak_mb * (1 + self.margin) <= d.total_mb

    def free_for_alone(self, device: str | None) -> bool:
        """Whether a retry waiting for ``device`` may start: nothing else runs there."""
        return device is None or self._get(device).running == 0

    def enter(self, device: str | None, alone: bool = False) -> int:
        """A trial starts on ``device``; returns how many others run there (its co-tenants)."""
        if device is None:
            return 0
        d = self._get(device)
        others = d.running
        d.running += 1
        if alone:
            d.alone = True
            d.reserved -= 1
        return others

    def leave(self, device: str | None, peak_mb: float | None = None, alone: bool = False) -> None:
        """A trial on ``device`` ended; ``peak_mb``: its measured peak (None when it failed or did not measure)."""
        if device is None:
            return
        d = self._get(device)
        d.running -= 1
        if alone:
            d.alone = False
        if peak_mb is not None:
            self.observe(peak_mb)

    def observe(self, peak_mb: float) -> None:
        """A trial's peak so far (at an evaluation, or at its end): the estimate is the largest seen."""
        if self.peak_mb is None or peak_mb > self.peak_mb:
            self.peak_mb = float(peak_mb)

    def reserve(self, device: str) -> None:
        """A retry waits for ``device``: no new trial starts there until it has run."""
        self._get(device).reserved += 1

    def retry_device(self, failed_on: str, devices: Iterable[str | None]) -> str:
        """Where a trial that ran out of memory on ``failed_on`` trains again: of the workers' GPUs, the one with
        the fewest trials running now (``failed_on`` on a tie, then the first by name)."""
        candidates = sorted({d for d in devices if d is not None} | {failed_on})
        return min(candidates, key=lambda d: (self._get(d).running, d != failed_on, d))
