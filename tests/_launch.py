"""Starting a test module under ``accelerate launch`` with 2 CPU processes (gloo), as the multi-process tests do."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def accelerate_launch(
    module: str,
    *script_args: str,
    config_file: str | None = None,
    timeout: int = 300,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m module script_args`` as 2 processes on this machine; raises with the output on failure.

    Without ``config_file`` the launch is ``--multi_gpu --num_processes 2``: accelerate's torchrun launcher, which
    on a machine without GPUs starts CPU processes that talk over gloo (``--cpu`` alone would start one process).
    With it, the processes, precision and distributed type (FSDP, say) come from that ``accelerate config`` file.
    """
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join([str(ROOT), full_env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    full_env["OMP_NUM_THREADS"] = "1"  # two processes on a small machine: no thread oversubscription
    full_env["MASTER_ADDR"] = "127.0.0.1"
    # CPU processes on any machine: on one GPU, two processes would each ask for a GPU of their own (rank 1 found
    # "invalid device ordinal"), and NCCL refuses two ranks on one GPU.
    full_env["CUDA_VISIBLE_DEVICES"] = (env or {}).get("CUDA_VISIBLE_DEVICES", "")
    full_env.pop("MLFLOW_TRACKING_URI", None)
    where = ["--config_file", config_file] if config_file else [
        "--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
        "--dynamo_backend", "no",
    ]  # fmt: skip
    cmd = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        *where,
        "--main_process_ip",
        "127.0.0.1",
        "--main_process_port",
        str(free_port()),
        "-m",
        module,
        *script_args,
    ]
    proc = subprocess.run(cmd, cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(
            f"accelerate launch {module} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}"
        )
    return proc
