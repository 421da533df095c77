"""What a trial cost: wall, CPU and device seconds, peak memory, and energy and emissions when CodeCarbon is there.

`CostMeter` wraps one trial in `run_trial`, on every backend. Device-seconds are the trial's wall seconds times the
processes that trained it, each holding one device (a GPU on CUDA, the CPU otherwise): GPU-seconds where a GPU is
used. Peak memory is the trial's peak GPU allocation on CUDA, else the process's resident set size sampled
at every step. Energy (kWh) and emissions (kg CO2eq) come from CodeCarbon's offline tracker when the package is
installed (``HPSEARCH_CODECARBON=0`` turns it off; the country is ``CODECARBON_COUNTRY_ISO_CODE``, default "USA"
as CodeCarbon's own examples); otherwise they are NaN.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import math
import os
import threading
import time
from typing import Any

__all__ = ["COST_COLUMNS", "CostMeter"]

logger = logging.getLogger(__name__)

#: The cost columns of `SearchResult.trials_dataframe`, the same (float64) on every backend.
COST_COLUMNS = ("cpu_s", "device_s", "peak_memory_mb", "energy_kwh", "emissions_kg")


def _rss_mb() -> float:
    try:
        import psutil

        return psutil.Process().memory_info().rss / 2**20
    except Exception:
        return math.nan


class CostMeter:
    """Measures one trial: `start` before it, `sample` during it (cheap), `stop` after it -> the cost dict."""

    def __init__(self) -> None:
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
        self._wall = time.perf_counter()
        self._cpu = self._cpu_now()
        self._peak_rss = _rss_mb()
        with contextlib.suppress(Exception):
            import torch

            self._cuda = torch.cuda.is_available()
            if self._cuda:
                torch.cuda.reset_peak_memory_stats()
        self._tracker = _codecarbon_tracker()

    def sample(self) -> None:
        rss = _rss_mb()
        if not math.isnan(rss) and (math.isnan(self._peak_rss) or rss > self._peak_rss):
            self._peak_rss = rss

    def stop(self, world_size: int = 1) -> dict[str, float]:
        wall = time.perf_counter() - self._wall
        self.sample()
        peak = self._peak_rss
        if self._cuda:
            with contextlib.suppress(Exception):
                import torch

                peak = torch.cuda.max_memory_allocated() / 2**20
        energy, emissions = math.nan, math.nan
        if self._tracker is not None:
            with contextlib.suppress(Exception):
                emissions = float(self._tracker.stop() or 0.0)
                data = getattr(self._tracker, "final_emissions_data", None)
                energy = float(getattr(data, "energy_consumed", math.nan))
        return {
            "cpu_s": round(self._cpu_now() - self._cpu, 6),
            "device_s": round(wall * max(world_size, 1), 6),
            "peak_memory_mb": round(peak, 3),
            "energy_kwh": energy,
            "emissions_kg": emissions,
        }


def _codecarbon_tracker() -> Any:
    if os.environ.get("HPSEARCH_CODECARBON", "1") == "0" or importlib.util.find_spec("codecarbon") is None:
        return None
    try:
        from codecarbon import OfflineEmissionsTracker

        tracker = OfflineEmissionsTracker(
            country_iso_code=os.environ.get("CODECARBON_COUNTRY_ISO_CODE", "USA"),
            save_to_file=False, log_level="error", measure_power_secs=1,
        )
        tracker.start()
        return tracker
    except Exception as error:  # energy is a bonus: never fail a trial over it
        logger.debug("CodeCarbon could not start: %s", error)
        return None
