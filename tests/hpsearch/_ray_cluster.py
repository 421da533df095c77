"""A real two-node Ray cluster on 127.0.0.1 for the Ray backend tests, and the picklable pieces trials use.

The cluster is started with the venv's ``ray`` executable (``ray start --head`` plus one worker node, one CPU
each, no dashboard, no usage stats, its own temp dir) and always stopped with ``ray stop --force``. Helpers
that trials need on the workers live here (not in the test module) so Ray pickles them by reference.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from trainer import TrainerCallback

ROOT = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).with_name("ray"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cluster_env() -> dict[str, str]:
    env = dict(os.environ)
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    # One loopback-only test cluster; Ray's token mode would need the same token propagated to every node.
    env["RAY_AUTH_MODE"] = "disabled"
    # Workers import the tests' helpers and the package from the checkout.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


@dataclass
class Cluster:
    address: str
    temp_dir: str

    def stop(self) -> None:
        subprocess.run([RAY, "stop", "--force"], env=cluster_env(), capture_output=True, timeout=120)
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def start_cluster() -> Cluster:
    """A head node and a second node, one CPU each, both bound to 127.0.0.1."""
    port = _free_port()
    # Short: Ray puts unix sockets under the temp dir, and their paths are limited to ~100 characters.
    temp_dir = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    env = cluster_env()
    common = ["--num-cpus", "1", "--node-ip-address", "127.0.0.1", "--disable-usage-stats"]
    cluster = Cluster(address=f"127.0.0.1:{port}", temp_dir=temp_dir)
    try:
        subprocess.run(
            [RAY, "start", "--head", "--port", str(port), "--include-dashboard", "false", "--temp-dir", temp_dir,
             *common],
            env=env, check=True, capture_output=True, timeout=180,
        )
        subprocess.run(
            [RAY, "start", "--address", cluster.address, *common],
            env=env, check=True, capture_output=True, timeout=180,
        )
    except subprocess.CalledProcessError as error:
        cluster.stop()
        raise RuntimeError(f"ray start failed: {error.stderr.decode(errors='replace')[-3000:]}") from error
    except BaseException:
        cluster.stop()
        raise
    return cluster


# ---------------------------------------------------------------------------------------------- trial helpers
def model_init(trial=None):
    from tests._digits import DigitsMLP

    return DigitsMLP(hidden=32)


class DieOnceAtSecondEval(TrainerCallback):
    """Kills the trial's worker process at its 2nd evaluation, the first time only (a marker file remembers)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.evaluations = 0

    def on_evaluate(self, args, state, control, **kwargs):
        self.evaluations += 1
        if self.evaluations == 2 and not os.path.exists(self.marker):
            Path(self.marker).write_text(str(state.global_step))
            os._exit(1)


class KillDriverAt(TrainerCallback):
    """Logs each trial start; when the ``kill_at``-th trial starts, SIGKILLs the driver (``pid``), once."""

    def __init__(self, log: str, kill_at: int, pid: int) -> None:
        self.log = log
        self.kill_at = kill_at
        self.pid = pid

    def on_train_begin(self, args, state, control, **kwargs):
        with open(self.log, "a") as f:
            f.write(args.run_name + "\n")
        names = set(Path(self.log).read_text().split())
        marker = self.log + ".killed"
        if self.pid and len(names) >= self.kill_at and not os.path.exists(marker):
            Path(marker).write_text("1")
            os.kill(self.pid, 9)


def make_trainer(output_dir: str, epochs: int = 3, callbacks=(), **overrides):
    from tests._digits import digits_trainer

    kwargs = dict(
        disable_tqdm=True, report_to="none", eval_strategy="epoch", save_strategy="epoch",
        logging_strategy="no", num_train_epochs=epochs, per_device_train_batch_size=64, learning_rate=1e-2,
        skip_memory_metrics=True,
    )
    kwargs.update(overrides)
    return digits_trainer(output_dir, model_init, callbacks=callbacks, **kwargs)


# ---------------------------------------------------------------------------------------------- node faults
def node_ids() -> tuple[str, list[str]]:
    """The head's node id and the other alive nodes' ids, from the connected driver's view of the cluster."""
    import ray

    head, others = None, []
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        if "node:__internal_head__" in node.get("Resources", {}):
            head = node["NodeID"]
        else:
            others.append(node["NodeID"])
    if head is None:
        raise RuntimeError(f"no alive head node among {ray.nodes()!r}")
    return head, others


def kill_node(node_id: str, timeout: float = 30.0) -> list[int]:
    """SIGKILL one node's raylet and every process under it (its workers and agents): the node is gone, as if
    its machine died. Only that node: both test nodes share this machine, so `ray stop` would stop the head too.
    Returns the killed pids."""
    import psutil

    raylets = [p for p in psutil.process_iter(["name", "cmdline"])
               if p.info["name"] == "raylet" and f"--node_id={node_id}" in (p.info["cmdline"] or [])]
    if len(raylets) != 1:
        raise RuntimeError(f"expected one raylet with --node_id={node_id}, found {[p.pid for p in raylets]}")
    (raylet,) = raylets
    victims = [raylet, *raylet.children(recursive=True)]
    # The raylet first, so it cannot start replacement workers, then everything it had started.
    for process in victims:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    _, alive = psutil.wait_procs(victims, timeout=timeout)
    if alive:
        raise RuntimeError(f"processes of node {node_id} survived SIGKILL: {[p.pid for p in alive]}")
    return [p.pid for p in victims]


class StallOnNodeAtSecondEval(TrainerCallback):
    """On node ``node_id`` only: at a trial's 2nd evaluation, writes ``marker`` (the trial's name) and waits there
    up to ``stall_s`` seconds, long enough for the test to stop the node under it. Elsewhere it does nothing."""

    def __init__(self, node_id: str, marker: str, stall_s: float = 120.0) -> None:
        self.node_id = node_id
        self.marker = marker
        self.stall_s = stall_s
        self.evaluations = 0

    def on_evaluate(self, args, state, control, **kwargs):
        import ray

        self.evaluations += 1
        if self.evaluations != 2 or ray.get_runtime_context().get_node_id() != self.node_id:
            return
        if os.path.exists(self.marker):
            return  # another trial on that node already stalls: one is enough
        # Written then renamed, so the test never reads a half-written name.
        Path(self.marker + ".tmp").write_text(f"{args.run_name}\n{state.global_step}\n")
        os.replace(self.marker + ".tmp", self.marker)
        time.sleep(self.stall_s)


class RaiseInFirstTrial(TrainerCallback):
    """The first trial to evaluate (claimed through ``marker``, created exclusively) raises ``message`` there."""

    def __init__(self, marker: str, message: str) -> None:
        self.marker = marker
        self.message = message

    def on_evaluate(self, args, state, control, **kwargs):
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.write(fd, args.run_name.encode())
        os.close(fd)
        raise RuntimeError(self.message)
