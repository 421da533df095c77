"""A search under `accelerate launch` with 2 CPU processes: rank 0 samples, every rank trains, pruning is shared."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.multiprocess
def test_two_process_search_with_pruning_completes(tmp_path):
    result = tmp_path / "result.json"
    env = {**os.environ, "PYTHONPATH": ROOT, "MASTER_ADDR": "127.0.0.1", "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2", "--multi_gpu",
        "--main_process_ip", "127.0.0.1", "--main_process_port", str(_free_port()), "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no",
        "-m", "tests.hpsearch._ddp_search", str(tmp_path / "out"), str(result),
    ]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    ranks = [json.loads((tmp_path / f"result.json.{r}").read_text()) for r in (0, 1)]
    assert [r["world"] for r in ranks] == [2, 2]
    main, other = ranks
    assert len(main["records"]) == 6
    # Rank 1 trained the same trials with the same values, including those suggested inside model_init...
    assert [r["params"] for r in other["records"]] == [r["params"] for r in main["records"]]
    assert all("hidden" in r["params"] for r in main["records"])
    # ...and stopped at the same step when rank 0's pruner said so.
    assert [r["last_step"] for r in other["records"]] == [r["last_step"] for r in main["records"]]
    states = {r["state"] for r in main["records"]}
    assert states <= {"COMPLETE", "PRUNED"}
    assert "PRUNED" in states, main["records"]
