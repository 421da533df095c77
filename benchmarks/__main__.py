"""Run every benchmark, each in its own process, and print one table: figure, ours, baseline, ratio, target, met?

    python -m benchmarks                   # full modes (tens of minutes on a 2-core machine)
    python -m benchmarks --quick           # smoke: every benchmark's --quick mode
    python -m benchmarks --only scale,memory --out bench-logs

Each benchmark prints its own report and, on its last line, ``BENCHMARK_JSON {...}`` with its rows; a
benchmark that does not (yet) print that line is read from its text report where a reader is known. A
benchmark that crashes, times out or prints nothing readable is a row saying so, and the exit status is 1.
Targets that are missed are reported, not failed: the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from benchmarks._common import JSON_PREFIX, print_table, result_row

ROOT = Path(__file__).resolve().parents[1]


def _float(pattern: str, text: str) -> float | None:
    match = re.search(pattern, text)
    return float(match.group(1)) if match else None


def _read_trainer_overhead(text: str) -> list[dict[str, Any]]:
    """Rows from trainer_overhead's text report (it prints no JSON line)."""
    rows = []
    cpu = _float(r"ratio Trainer / hand-written \(median\): wall [\d.]+, CPU ([\d.]+)", text)
    wall = _float(r"ratio Trainer / hand-written \(median\): wall ([\d.]+)", text)
    if wall is not None:
        rows.append(result_row("throughput, Trainer vs hand-written accelerate loop", None, None, wall, ">= 0.95",
                               wall >= 0.95, unit="ratio", note=f"CPU ratio {cpu:.2f}" if cpu else ""))  # fmt: skip
    setup = _float(r"\| Trainer\(\.\.\.\) \+ train\(\), minus the step \|\s*([\d.]+)", text)
    if setup is not None:
        rows.append(result_row("fixed cost of Trainer(...) + train()", setup, None, None, "< 50 ms", setup < 50,
                               unit="ms"))  # fmt: skip
    return rows


def _read_ray_overhead(text: str) -> list[dict[str, Any]]:
    """Rows from ray_overhead's text table: search wall per trial, ours vs the plain Tune trainable with
    ``reuse_actors=True`` (the fair baseline: our backend reuses actors by default; issue 32's target)."""
    number = r"\s*\|\s*([\d.]+)"
    match = re.search(r"\| search wall / trial \(s\)" + number * 5, text)
    if not match:
        return []
    _, ours, _, reused, ratio = (float(g) for g in match.groups())
    return [result_row("per-trial wall, Ray backend vs plain Tune trainable (reuse_actors)", ours * 1e3,
                       reused * 1e3, ratio, "<= 1.10", ratio <= 1.10, unit="ms/trial")]  # fmt: skip


# name -> reader of its text output when it prints no JSON line (None: JSON only).
BENCHMARKS: dict[str, Callable[[str], list[dict[str, Any]]] | None] = {
    "trainer_overhead": _read_trainer_overhead,
    "trial_overhead": None,
    "ray_overhead": _read_ray_overhead,
    "peer": None,
    "pruning_savings": None,
    "parallel_scaling": None,
    "memory": None,
    "scale": None,
    "warm_start": None,
    "reevaluation": None,
    "reevaluation_hpobench": None,
    "memory_features": None,
    "dashboard": None,
    "trial_workers": None,
    "time_to_target": None,
    "state_signing": None,
}


def read_rows(name: str, stdout: str) -> list[dict[str, Any]] | None:
    """The benchmark's rows: from its JSON line, else from its text; None when neither can be read."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(JSON_PREFIX):
            return list(json.loads(line[len(JSON_PREFIX) :])["rows"])
    reader = BENCHMARKS.get(name)
    rows = reader(stdout) if reader is not None else []
    return rows or None


def run_one(
    name: str, quick: bool, timeout: float | None, out: Path | None
) -> tuple[list[dict[str, Any]], bool, float]:
    """Run ``python -m benchmarks.<name>``; (rows, ok, seconds)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    command = [sys.executable, "-m", f"benchmarks.{name}", *(["--quick"] if quick else [])]
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            command, cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=timeout
        )
        stdout, stderr, code = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as expired:
        stdout = expired.stdout.decode() if isinstance(expired.stdout, bytes) else (expired.stdout or "")
        stderr = f"timed out after {timeout} s"
        code = None
    seconds = time.perf_counter() - start
    if out is not None:
        (out / f"{name}.txt").write_text(stdout + ("\n--- stderr ---\n" + stderr if stderr else ""))
    if code != 0:
        tail = (stderr or stdout).strip().splitlines()[-1:] or ["no output"]
        why = "timed out" if code is None else f"exit {code}"
        return (
            [result_row(name, None, None, None, "-", False, note=f"{why}: {tail[0][:120]}")],
            False,
            seconds,
        )
    rows = read_rows(name, stdout)
    if rows is None:
        return [result_row(name, None, None, None, "-", False, note="no readable result")], False, seconds
    return rows, True, seconds


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every benchmark's --quick mode")
    parser.add_argument(
        "--only", default=None, help=f"comma-separated benchmark names, of: {', '.join(BENCHMARKS)}"
    )
    parser.add_argument("--timeout", type=float, default=None, help="seconds per benchmark (default: none)")
    parser.add_argument("--out", default=None, help="folder for each benchmark's full output")
    opts = parser.parse_args(argv)
    names = [n for n in BENCHMARKS if (ROOT / "benchmarks" / f"{n}.py").is_file()]
    if opts.only:
        wanted = [n.strip() for n in opts.only.split(",") if n.strip()]
        unknown = sorted(set(wanted) - set(BENCHMARKS))
        if unknown:
            parser.error(f"--only: unknown benchmark(s) {unknown}; choose from {list(BENCHMARKS)}")
        names = [n for n in names if n in wanted]
    out = Path(opts.out) if opts.out else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)

    import torch

    started = datetime.now(timezone.utc)
    print(f"benchmarks ({'quick' if opts.quick else 'full'}): {platform.platform()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}, torch {torch.__version__}, started {started:%Y-%m-%d %H:%M} UTC, "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    table: list[list[Any]] = []
    summary: list[dict[str, Any]] = []
    all_ok = True
    for name in names:
        print(f"  running {name} ...", end="", flush=True)
        rows, ok, seconds = run_one(name, opts.quick, opts.timeout, out)
        print(f" {'done' if ok else 'FAILED'} in {seconds:.0f} s", flush=True)
        all_ok &= ok
        for row in rows:
            met = {True: "yes", False: "no", None: "-"}[row.get("met")]
            unit = f" {row['unit']}" if row.get("unit") and row.get("ours") is not None else ""
            table.append([name, row["name"], _fmt(row.get("ours")) + unit, _fmt(row.get("baseline")),
                          _fmt(row.get("ratio")), row.get("target", "-"), met, row.get("note", "")])  # fmt: skip
            summary.append({"benchmark": name, **row})
    print_table(
        "Summary", ["benchmark", "figure", "ours", "baseline", "ratio", "target", "met?", "note"], table
    )
    print(JSON_PREFIX + json.dumps({"benchmark": "all", "quick": opts.quick, "rows": summary}, default=str))
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
