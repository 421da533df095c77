"""Every benchmark's ``--quick`` mode still runs and prints a readable result (timings are never asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.__main__ import BENCHMARKS, read_rows
from benchmarks._common import JSON_PREFIX

ROOT = Path(__file__).resolve().parents[1]
NAMES = [name for name in BENCHMARKS if (ROOT / "benchmarks" / f"{name}.py").is_file()]

pytestmark = [pytest.mark.slow]


def _run(*args: str, timeout: float = 480) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, "-m", *args], cwd=str(ROOT), env=env, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_quick_mode_runs_and_reports(name):
    proc = _run(f"benchmarks.{name}", "--quick")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    rows = read_rows(name, proc.stdout)
    assert rows, f"{name} printed no readable result:\n{proc.stdout[-2000:]}"
    for row in rows:
        assert {"name", "ours", "baseline", "ratio", "target", "met"} <= set(row), row
    last = proc.stdout.strip().splitlines()[-1]
    if BENCHMARKS[name] is None:  # ours print their JSON line last
        assert last.startswith(JSON_PREFIX), last
        payload = json.loads(last[len(JSON_PREFIX):])
        assert payload["benchmark"] == name and payload["rows"] == rows


def test_suite_runner_collects_a_table():
    # The runner itself on the cheapest benchmark: its row in the table, and the runner's own JSON line last.
    proc = _run("benchmarks", "--quick", "--only", "memory")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "| benchmark" in proc.stdout
    payload = json.loads(proc.stdout.strip().splitlines()[-1][len(JSON_PREFIX):])
    assert [row["benchmark"] for row in payload["rows"]] == ["memory"]
