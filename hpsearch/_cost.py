"""What a trial cost: wall, CPU and device seconds, peak memory, and energy and emissions when CodeCarbon is there.

`CostMeter` wraps one trial in `run_trial`, on every backend, from its first line to its return, whatever the trial's
end (COMPLETE, PRUNED, FAIL); every evaluation puts the cost so far into the trial's record (`CostMeter.snapshot`),
so a trial whose process an engine's scheduler stops keeps the cost up to its last report. Device-seconds are the
trial's wall seconds times the processes that trained it, each holding one device (a GPU on CUDA, the CPU otherwise): GPU-seconds where a GPU is
used. A GPU that runs several trials at once (``trial_workers`` packing them by measured memory) is charged by share:
while ``k`` trials run on it, each is charged ``1/k`` of the time (`DeviceShares`), so the device-seconds of the
trials add up to the seconds the device was busy. Peak memory is the trial's peak GPU allocation on CUDA, else the process's resident set size at the trial's
start and end and every `SAMPLE_INTERVAL_S` during it, read by a background thread (`_Sampler`); in a process that ran
earlier trials (``trial_workers``, an engine that reuses its worker processes) that resident set includes what they left allocated. Energy (kWh) and
emissions (kg CO2eq) come from CodeCarbon's offline tracker (the country is ``CODECARBON_COUNTRY_ISO_CODE``, default
"USA" as CodeCarbon's own examples) when the search asks for them: ``max_energy_kwh`` is set, or
``HPSEARCH_CODECARBON=1``. The tracker takes ~2 s to start and ~0.1 s per trial, so it is started once per process
and measures each trial as one of its tasks; otherwise the columns are NaN.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import math
import os
import threading
import time
from datetime import datetime, timezone
from typing import Any

__all__ = ["COST_COLUMNS", "CostMeter", "DeviceShares", "add_costs", "charge_share"]

logger = logging.getLogger(__name__)

#: The cost columns of `SearchResult.trials_dataframe`, the same (float64) on every backend.
COST_COLUMNS = ("cpu_s", "device_s", "peak_memory_mb", "energy_kwh", "emissions_kg")

#: Seconds between two samples of the resident set size during a trial, a value that moves far slower than
#: training steps go.
SAMPLE_INTERVAL_S = 0.5

#: Seconds without a meter after which the sampler's thread ends.
_IDLE_EXIT_S = 5.0


_PROCESS: Any = None
_STATM: tuple[int, int] | None = None  # (pid, descriptor of /proc/self/statm) on Linux


def _rss_mb() -> float:
    """The process's resident set size in MiB (NaN when it cannot be read)."""
    global _PROCESS, _STATM
    pid = os.getpid()
    if _STATM is None or _STATM[0] != pid:  # opened once per process (a fork opens its own)
        if _STATM is not None and _STATM[1] >= 0:
            with contextlib.suppress(OSError):
                os.close(_STATM[1])  # this process's copy of its parent's descriptor
        try:
            _STATM = (pid, os.open("/proc/self/statm", os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)))
        except OSError:
            _STATM = (pid, -1)
    if _STATM[1] >= 0:
        # What psutil reads on Linux, in one pread of a descriptor kept open: psutil opens and parses the file per
        # call, ~30 us in a search, where this takes ~1 us.
        with contextlib.suppress(OSError, ValueError, IndexError):
            return int(os.pread(_STATM[1], 256, 0).split()[1]) * _PAGE_SIZE / 2**20
    try:
        if _PROCESS is None or _PROCESS.pid != pid:  # made once per process (a fork gets its own)
            import psutil

            _PROCESS = psutil.Process()
        return _PROCESS.memory_info().rss / 2**20
    except Exception:
        return math.nan


_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class _Sampler:
    """Samples the resident set size every `SAMPLE_INTERVAL_S` for the meters measuring a trial on the CPU.

    One daemon thread per process, started by the first meter; it ticks every `SAMPLE_INTERVAL_S` and ends after
    `_IDLE_EXIT_S` without a meter (a search's trials keep it, a process that searched once does not). A training step
    pays nothing for it (a per-step check cost a few microseconds in every step), and the memory of an evaluation
    or of one long step is sampled as well as the steps'.
    """

    def __init__(self) -> None:
        self._reset()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(
                after_in_child=self._reset
            )  # a forked child has no thread, and maybe a held lock

    def _reset(self) -> None:
        self._cond = threading.Condition()
        self._meters: list[CostMeter] = []
        self._started = False

    def add(self, meter: CostMeter) -> None:
        # No notify: waking the thread at every trial's start made it take the lock and the GIL just as the trial
        # began (about a millisecond per trial on a busy machine); it finds the meter at its next tick instead (the
        # meter reads the resident set size itself at its start and stop).
        with self._cond:
            self._meters.append(meter)
            if not self._started:
                self._started = True
                threading.Thread(target=self._run, name="hpsearch-memory-sampler", daemon=True).start()

    def remove(self, meter: CostMeter) -> None:
        with self._cond:
            if meter in self._meters:
                self._meters.remove(meter)

    def _run(self) -> None:
        cond = self._cond
        idle_since = time.monotonic()
        while True:
            with cond:
                cond.wait(SAMPLE_INTERVAL_S)
                if not self._meters:
                    if time.monotonic() - idle_since >= _IDLE_EXIT_S:
                        self._started = False  # the next meter starts a new thread
                        return
                    continue
                idle_since = time.monotonic()
                # Read under the lock: once `remove` returns, the meter's peak no longer changes.
                rss = _rss_mb()
                for meter in self._meters:
                    meter.observe(rss)


_SAMPLER = _Sampler()


class CostMeter:
    """Measures one trial: `start` before it, `stop` after it -> the cost dict (the resident set size is sampled
    between them by `_Sampler`)."""

    def __init__(self, energy: bool = False) -> None:
        self._energy = energy
        self._wall = 0.0
        self._cpu = 0.0
        self._threaded = threading.current_thread() is not threading.main_thread()
        self._peak_rss = math.nan
        self._cuda = False
        self._tracker: Any = None

    def _cpu_now(self) -> float:
        # A trial in a worker thread shares its process with other trials: count its own thread only.
        return time.thread_time() if self._threaded else time.process_time()

    def start(self) -> None:
        # CodeCarbon first: its start-up (seconds, once per process) is not the trial's cost (see `start_energy`).
        self._tracker = _start_task() if self._energy else None
        self._wall = time.perf_counter()
        self._cpu = self._cpu_now()
        self._peak_rss = _rss_mb()  # read here first: the sampler thread then finds /proc/self/statm open
        with contextlib.suppress(Exception):
            import torch

            self._cuda = torch.cuda.is_available()
            if self._cuda:
                torch.cuda.reset_peak_memory_stats()
        if not self._cuda:  # on CUDA the peak is the device's own count
            _SAMPLER.add(self)

    def observe(self, rss: float) -> None:
        """Take a reading of the resident set size (MiB) into the peak."""
        if not math.isnan(rss) and (math.isnan(self._peak_rss) or rss > self._peak_rss):
            self._peak_rss = rss

    def snapshot(self, world_size: int = 1) -> dict[str, float]:
        """The cost so far of a trial still running (energy is measured at `stop` only): the record a trial sends
        at each evaluation carries it, so a trial whose process an engine's scheduler stops keeps its cost."""
        self.observe(_rss_mb())
        return self._cost(time.perf_counter() - self._wall, world_size, math.nan, math.nan)

    def stop(self, world_size: int = 1) -> dict[str, float]:
        wall = time.perf_counter() - self._wall
        _SAMPLER.remove(self)
        self.observe(_rss_mb())
        energy, emissions = math.nan, math.nan
        if self._tracker is not None:
            energy, emissions = _stop_task(self._tracker)
        return self._cost(wall, world_size, energy, emissions)

    def _cost(self, wall: float, world_size: int, energy: float, emissions: float) -> dict[str, float]:
        peak = self._peak_rss
        if self._cuda:
            with contextlib.suppress(Exception):
                import torch

                peak = torch.cuda.max_memory_allocated() / 2**20
        cost = {
            "cpu_s": round(self._cpu_now() - self._cpu, 6),
            "device_s": round(wall * max(world_size, 1), 6),
            "peak_memory_mb": round(peak, 3),
            "energy_kwh": energy,
            "emissions_kg": emissions,
        }
        # What was not measured is left out (NaN in the results' columns), so a record equals its reloaded copy.
        return {k: v for k, v in cost.items() if v == v}


def add_costs(first: dict[str, float], second: dict[str, float]) -> dict[str, float]:
    """The cost of two attempts of one trial (a restart from a checkpoint): seconds, energy and emissions add up,
    the peak memory is the larger; a column either measured is kept."""
    total = dict(first)
    for key, value in second.items():
        if key not in total:
            total[key] = value
        elif key == "peak_memory_mb":
            total[key] = max(total[key], value)
        else:
            total[key] = round(total[key] + value, 6)
    return total


class DeviceShares:
    """Each trial's share of a device that several trials use at once: while ``k`` trials run on a device, each of
    them accrues ``1/k`` of every second (seconds of the device, not of the trial). Trials are told by `enter` and
    `leave` with the time (any clock, the same for all); devices are apart. Not thread-safe: the caller holds a lock.
    """

    def __init__(self) -> None:
        # device -> (time of its last change, {trial: [entered at, share seconds so far]})
        self._devices: dict[str, tuple[float, dict[Any, list[float]]]] = {}

    def _advance(self, device: str, now: float) -> dict[Any, list[float]]:
        last, running = self._devices.get(device, (now, {}))
        if running:
            each = max(now - last, 0.0) / len(running)
            for held in running.values():
                held[1] += each
        self._devices[device] = (now, running)
        return running

    def enter(self, device: str, trial: Any, now: float) -> None:
        """``trial`` starts on ``device`` at ``now``."""
        running = self._advance(device, now)
        if trial in running:
            raise ValueError(f"trial {trial!r} is already running on device {device!r}: it must leave first.")
        running[trial] = [now, 0.0]

    def leave(self, device: str, trial: Any, now: float) -> tuple[float, float]:
        """``trial`` ends at ``now``: (the seconds it held the device, its share of them in device-seconds)."""
        running = self._advance(device, now)
        if trial not in running:
            raise ValueError(f"trial {trial!r} is not running on device {device!r}: it must enter first.")
        entered, share = running.pop(trial)
        return now - entered, share


def charge_share(cost: dict[str, float], held_s: float, share_s: float) -> dict[str, float]:
    """``cost`` with its ``device_s`` charged by share: times ``share_s / held_s``, the fraction of the device the
    trial had on average while it held it (see `DeviceShares`); unchanged for a trial that had it alone."""
    if "device_s" not in cost or held_s <= 0 or share_s >= held_s:
        return cost
    return {**cost, "device_s": round(cost["device_s"] * share_s / held_s, 6)}


_TRACKER: Any = None
#: When this process's CodeCarbon tracker started (None: not yet).
TRACKER_STARTED: datetime | None = None
_TRACKER_LOCK = threading.Lock()
_TASK_BUSY = threading.Lock()


def wants_energy(asked: bool) -> bool:
    """Whether trials measure energy: asked for (a budget in kWh, or HPSEARCH_CODECARBON=1) and CodeCarbon there."""
    asked = asked or os.environ.get("HPSEARCH_CODECARBON") == "1"
    return asked and importlib.util.find_spec("codecarbon") is not None


def _tracker() -> Any:
    global _TRACKER, TRACKER_STARTED
    with _TRACKER_LOCK:
        if _TRACKER is None:
            from codecarbon import OfflineEmissionsTracker

            _TRACKER = OfflineEmissionsTracker(
                country_iso_code=os.environ.get("CODECARBON_COUNTRY_ISO_CODE", "USA"),
                log_level="error",
                save_to_file=False,
                measure_power_secs=1,
            )
            _TRACKER.start()
            TRACKER_STARTED = datetime.now(timezone.utc)
        return _TRACKER


def start_energy() -> float | None:
    """Start this process's CodeCarbon tracker now, before any trial, so that its start-up is charged to the search
    (returned in seconds; None when it could not start): it cost the first trial seconds of ``device_s`` before."""
    began = time.perf_counter()
    try:
        _tracker()
    except Exception as error:
        logger.debug("CodeCarbon could not start: %s", error)
        return None
    return time.perf_counter() - began


def _start_task() -> Any:
    """The process's tracker with a task started for this trial, or None (energy is a bonus: never fail a trial,
    and trials running at once in threads share one process's energy, so only one of them is measured)."""
    if not _TASK_BUSY.acquire(blocking=False):
        return None
    try:
        tracker = _tracker()
        tracker.start_task("trial")
        return tracker
    except Exception as error:
        _TASK_BUSY.release()
        logger.debug("CodeCarbon could not start: %s", error)
        return None


def _stop_task(tracker: Any) -> tuple[float, float]:
    try:
        data = tracker.stop_task()
        return float(data.energy_consumed), float(data.emissions)
    except Exception as error:
        logger.debug("CodeCarbon could not measure: %s", error)
        return math.nan, math.nan
    finally:
        _TASK_BUSY.release()
