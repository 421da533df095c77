"""A real two-node Ray cluster on 127.0.0.1 for the Ray backend tests, and the picklable pieces trials use.

The cluster runs with Ray's default security: token authentication. `start_cluster` writes a fresh token to a file
in the cluster's own temp dir (never to ``~/.ray``) and hands it to both nodes through ``RAY_AUTH_TOKEN_PATH``;
while the cluster runs, this process has ``RAY_AUTH_TOKEN_PATH`` too, as a user's driver would after
``export RAY_AUTH_TOKEN_PATH=...`` (``RAY_AUTH_MODE`` stays unset: the search turns it on for its connection).

Each node is a ``ray start --block`` child of this process, in a process group of its own (no usage stats, no
dashboard UI, one CPU each). `Cluster.stop` stops exactly what was started: the recorded pids and their
descendants, then each node's process group, SIGTERM first and SIGKILL after a grace period; never
``ray stop``, which would stop every Ray on the machine. Helpers that trials need on the workers live here (not in
the test module) so Ray pickles them by reference.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from trainer import TrainerCallback

ROOT = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).with_name("ray"))
_STARTED = "Ray runtime started."
_START_TIMEOUT_S = 180.0
#: How many times `start_node` tries a ``ray start`` that fails because its raylet gave up on the dashboard agent.
_START_ATTEMPTS = 3
#: What ``ray start`` says when its raylet missed the agent's port files (the raylet's log says why).
_MISSED_STARTUP = "The current node timed out during startup"
_STOP_GRACE_S = 15.0
_AUTH_VARIABLES = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cluster_env() -> dict[str, str]:
    """This process's environment for a Ray process or a driver subprocess: no usage stats, the checkout
    importable (workers import the tests' helpers and the package)."""
    env = dict(os.environ)
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def write_token(directory: str) -> str:
    """A new random token (as ``ray get-auth-token --generate`` makes one) in ``directory/auth_token``, mode 600."""
    path = os.path.join(directory, "auth_token")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))
    return path


def node_env(token_path: str, head: bool = True) -> dict[str, str]:
    """The environment of a node, with the token at ``token_path`` whatever this process's own auth variables say.
    A head gets Ray's default (no RAY_AUTH_MODE: ``ray start --head`` turns token authentication on when it finds
    a token); a node joining by address needs ``RAY_AUTH_MODE=token`` to send it, as Ray's docs say."""
    env = cluster_env()
    for key in _AUTH_VARIABLES:
        env.pop(key, None)
    env["RAY_AUTH_TOKEN_PATH"] = token_path
    # On SIGTERM a node first asks the GCS to drain it, up to Ray's drain timeout; `stop_nodes` signals the GCS at
    # the same time, so every stop waited out its whole grace period. A test node has nothing to drain (no Serve).
    env["RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"] = "0"
    if not head:
        env["RAY_AUTH_MODE"] = "token"
    return env


@dataclass
class Node:
    """One ``ray start --block`` child, leader of its own process group; ``pids``: its processes once started."""

    process: subprocess.Popen
    log: str
    pids: list[int] = field(default_factory=list)


def start_node(
    args: list[str],
    env: dict[str, str],
    log: str,
    timeout: float = _START_TIMEOUT_S,
    attempts: int = _START_ATTEMPTS,
) -> Node:
    """Runs ``ray start --block ARGS`` in a new session and waits for "Ray runtime started." in its output.

    Ray 2.60's raylet waits a fixed time, which no setting changes, for its dashboard agent (a Python process that
    imports much of Ray) to write its port files, then exits, and ``ray start`` fails with "The current node timed
    out during startup". On a loaded 2-core machine, beside another test's training, the agent can miss it. Such a
    start, and only such a start, is tried again, up to ``attempts`` times in all; any other failure is raised at
    once."""
    attempt = 1
    while True:
        try:
            return _start_node_once(args, env, log, timeout)
        except RuntimeError as error:
            if attempt >= attempts or _MISSED_STARTUP not in str(error):
                raise
        attempt += 1


def _start_node_once(args: list[str], env: dict[str, str], log: str, timeout: float) -> Node:
    import psutil

    with open(log, "wb") as out:
        process = subprocess.Popen(
            [RAY, "start", "--block", *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    node = Node(process, log)
    deadline = time.monotonic() + timeout
    while _STARTED not in Path(log).read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            stop_nodes([node])
            tail = Path(log).read_text(errors="replace")[-3000:]
            raise RuntimeError(f"ray start {' '.join(args)} failed (exit {process.returncode}): {tail}")
        time.sleep(0.2)
    with contextlib.suppress(psutil.NoSuchProcess):
        node.pids = [process.pid, *(p.pid for p in psutil.Process(process.pid).children(recursive=True))]
    return node


def stop_nodes(nodes: list[Node], grace: float = _STOP_GRACE_S) -> list[int]:
    """Stops the nodes' processes by pid and process group: SIGTERM, then SIGKILL to what is left after ``grace``
    seconds. Only processes these nodes started are signalled. Returns the pids it found alive."""
    import psutil

    victims: dict[int, psutil.Process] = {}
    for node in nodes:
        for pid in (node.process.pid, *node.pids):
            with contextlib.suppress(psutil.NoSuchProcess):
                root = psutil.Process(pid)
                for process in (root, *root.children(recursive=True)):
                    victims.setdefault(process.pid, process)
    # A process group is signalled only while its leader is unreaped (alive or a zombie): its pid, hence the
    # group id, cannot have been reused by anyone else.
    groups = [node.process.pid for node in nodes if node.process.returncode is None]
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 30.0)):
        for process in victims.values():
            with contextlib.suppress(psutil.NoSuchProcess):
                process.send_signal(sig)  # psutil checks the pid still names the same process
        for group in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, sig)
        _, alive = psutil.wait_procs(list(victims.values()), timeout=wait)
        if not alive:
            break
    else:
        raise RuntimeError(f"Ray processes survived SIGKILL: {[p.pid for p in alive]}")
    for node in nodes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            node.process.wait(timeout=30)
    return sorted(victims)


@dataclass
class Cluster:
    address: str
    temp_dir: str
    token_path: str
    nodes: list[Node] = field(default_factory=list)
    _saved_env: dict[str, str | None] = field(default_factory=dict)

    @property
    def pids(self) -> list[int]:
        return [pid for node in self.nodes for pid in node.pids]

    def export_token(self) -> None:
        """Give this process the token the way a user would (RAY_AUTH_TOKEN_PATH); `stop` restores the variables."""
        for key in _AUTH_VARIABLES:
            self._saved_env.setdefault(key, os.environ.pop(key, None))
        os.environ["RAY_AUTH_TOKEN_PATH"] = self.token_path

    def stop(self) -> None:
        try:
            stop_nodes(self.nodes)
        finally:
            for key, value in self._saved_env.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            self._saved_env.clear()
            shutil.rmtree(self.temp_dir, ignore_errors=True)


#: What every test node is: one CPU, on loopback, no usage stats.
NODE_ARGS = ("--num-cpus", "1", "--node-ip-address", "127.0.0.1", "--disable-usage-stats")


def head_args(port: int, temp_dir: str | None = None) -> list[str]:
    """`ray start` arguments of a one-CPU head on 127.0.0.1:``port`` without dashboard (in ``temp_dir``: else
    Ray's default temp folder)."""
    folder = ["--temp-dir", temp_dir] if temp_dir is not None else []
    return ["--head", "--port", str(port), "--include-dashboard", "false", *folder, *NODE_ARGS]


def start_cluster() -> Cluster:
    """A head node and a second node, one CPU each, both on 127.0.0.1, with token authentication; this process
    gets the token through RAY_AUTH_TOKEN_PATH until `Cluster.stop`."""
    port = _free_port()
    # Short: Ray puts unix sockets under the temp dir, and their paths are limited to ~100 characters.
    temp_dir = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    cluster = Cluster(address=f"127.0.0.1:{port}", temp_dir=temp_dir, token_path=write_token(temp_dir))
    try:
        cluster.nodes.append(
            start_node(
                head_args(port, temp_dir),
                node_env(cluster.token_path),
                os.path.join(temp_dir, "head.log"),
            )
        )
        cluster.nodes.append(
            start_node(
                ["--address", cluster.address, *NODE_ARGS],
                node_env(cluster.token_path, head=False),
                os.path.join(temp_dir, "node.log"),
            )
        )
        cluster.export_token()
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


class TrialMarkers(TrainerCallback):
    """For the kill tests: marks each start of a trial's training in ``marker_dir`` (``started@<run>@<driver
    pid>@<pid>``, also on a restart from a checkpoint) and each training run to its last step
    (``completed@<run>@<driver pid>@<pid>``); ``driver_pid`` is the pid of the driver that built the trainer, the
    pid the test kills. Sleeps ``step_sleep`` seconds after every step, so that kills land mid-trial."""

    def __init__(self, marker_dir: str, driver_pid: int, step_sleep: float = 0.0) -> None:
        self.marker_dir = marker_dir
        self.driver_pid = driver_pid
        self.step_sleep = step_sleep

    def _mark(self, event: str, run_name: str) -> None:
        Path(self.marker_dir, f"{event}@{run_name}@{self.driver_pid}@{os.getpid()}").touch()

    def on_train_begin(self, args, state, control, **kwargs):
        self._mark("started", args.run_name)

    def on_step_end(self, args, state, control, **kwargs):
        if self.step_sleep:
            time.sleep(self.step_sleep)

    def on_train_end(self, args, state, control, **kwargs):
        if state.global_step >= state.max_steps:  # trained to completion (not stopped, not killed)
            self._mark("completed", args.run_name)


def make_trainer(output_dir: str, epochs: int = 3, callbacks=(), **overrides):
    from tests._digits import digits_trainer

    kwargs = dict(
        disable_tqdm=True,
        report_to="none",
        eval_strategy="epoch",
        save_strategy="epoch",
        logging_strategy="no",
        num_train_epochs=epochs,
        per_device_train_batch_size=64,
        learning_rate=1e-2,
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

    raylets = [
        p
        for p in psutil.process_iter(["name", "cmdline"])
        if p.info["name"] == "raylet" and f"--node_id={node_id}" in (p.info["cmdline"] or [])
    ]
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
