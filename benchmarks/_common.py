"""Timing helpers shared by the benchmarks: a monotonic clock, robust summaries and a plain-text table."""

from __future__ import annotations

import contextlib
import json
import logging
import statistics
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

__all__ = [
    "JSON_PREFIX",
    "Timer",
    "emit_json",
    "median",
    "print_table",
    "quiet_logs",
    "result_row",
    "time_call",
]

#: The last line a benchmark prints starts with this, then one JSON object (``python -m benchmarks`` reads it).
JSON_PREFIX = "BENCHMARK_JSON "


class Timer:
    """``with Timer() as t: ...`` then ``t.seconds``."""

    def __enter__(self) -> Timer:
        self.start = time.perf_counter()
        self.seconds = 0.0
        return self

    def __exit__(self, *exc: Any) -> None:
        self.seconds = time.perf_counter() - self.start


@contextlib.contextmanager
def quiet_logs(*names: str, ignore_warnings: bool = False) -> Iterator[None]:
    """The loggers ``names`` at ERROR (and, with ``ignore_warnings``, warnings ignored) for the run only, as they
    were after it. A decorator on a benchmark's ``main``: a test that calls it in-process leaves the later tests'
    logging as it found it (setting a level for the whole process left ``hpsearch`` quiet for every test after)."""
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    try:
        with warnings.catch_warnings():
            if ignore_warnings:
                warnings.simplefilter("ignore")
            for logger in loggers:
                logger.setLevel(logging.ERROR)
            yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def time_call(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print ``rows`` under ``header`` as an aligned, Markdown-compatible table."""
    cells = [[str(h) for h in header]] + [[_fmt(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    print(f"\n{title}")
    for n, row in enumerate(cells):
        # First column (names) left-aligned, numbers right-aligned.
        print(
            "| "
            + " | ".join(c.rjust(w) if n and i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))
            + " |"
        )
        if n == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 100 else f"{value:.1f}"
    return str(value)


def result_row(
    name: str,
    ours: float | None,
    baseline: float | None,
    ratio: float | None,
    target: str,
    met: bool | None,
    unit: str = "",
    note: str = "",
) -> dict[str, Any]:
    """One line of the summary table: our figure, the baseline's, their ratio and whether the target is met."""
    return {
        "name": name,
        "ours": ours,
        "baseline": baseline,
        "ratio": ratio,
        "target": target,
        "met": met,
        "unit": unit,
        "note": note,
    }


def emit_json(benchmark: str, rows: Sequence[dict[str, Any]], **extra: Any) -> None:
    """Print the machine-readable result as the very last line (``JSON_PREFIX`` + one JSON object)."""
    print(
        JSON_PREFIX + json.dumps({"benchmark": benchmark, "rows": list(rows), **extra}, default=str),
        flush=True,
    )


def start_ray(num_cpus: int) -> Any:
    """A local Ray instance with ``num_cpus`` CPUs whose workers can import this checkout (``benchmarks._digits``).

    Returns the ``ray`` module. Raises whatever Ray raises when it cannot start (the caller reports it).
    """
    import os
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import ray

    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
             configure_logging=False)  # fmt: skip
    return ray


def run_isolated(module: str, args: Sequence[str], timeout: float | None = None) -> Any:
    """Run ``python -m <module> <args>`` and return the JSON object it prints last (after `JSON_PREFIX`).

    Ray runs go through this: when Ray's processes die under it (another job on the machine running
    ``ray stop``), Ray aborts the whole driver process, which must not take the benchmark down with it.
    Raises RuntimeError with the tail of the child's output when it fails.
    """
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, "-m", module, *args], cwd=root, env=env, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(JSON_PREFIX) and proc.returncode == 0:
            return json.loads(line[len(JSON_PREFIX) :])
    tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
    raise RuntimeError(f"{module} exited with {proc.returncode}: {tail[-400:]}")
