"""Joining Ray never waits without bound, and a search without an address never joins someone else's Ray.

- ``RAY_ADDRESS`` at a closed port, and ``address=`` / ``RAY_ADDRESS`` at a port that accepts TCP and never
  answers, fail within seconds naming the address and the fix (they waited minutes in ``ray.init``); nothing is
  created in output_dir;
- with no address, a Ray already running on the machine (the last ``ray start`` here) is not joined: the search
  starts a private local Ray and the log says so.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

from hpsearch import hyperparameter_search
from hpsearch.backends.ray import _connect
from hpsearch.errors import SearchConfigError
from spaces import Float
from tests.hpsearch import _ray_cluster as rc

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
_SPACE = {"learning_rate": Float(1e-3, 1e-1, log=True)}


@contextlib.contextmanager
def _silent_server():
    """A TCP server on 127.0.0.1 that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                accepted.append(server.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        server.close()


def _search_fails(tmp_path, match: str, **kw) -> float:
    out = tmp_path / "out"
    started = time.monotonic()
    with pytest.raises(SearchConfigError, match=match) as caught:
        hyperparameter_search(
            rc.make_trainer(str(out)),
            hp_space=_SPACE,
            compute_objective="eval_accuracy",
            n_trials=1,
            direction="maximize",
            backend="ray",
            **kw,
        )
    assert not out.exists()
    assert "leave address unset" in str(caught.value) or "unset RAY_ADDRESS" in str(caught.value)
    return time.monotonic() - started


def test_ray_address_at_a_closed_port_fails_within_seconds(tmp_path, monkeypatch):
    address = f"127.0.0.1:{rc._free_port()}"
    monkeypatch.setenv("RAY_ADDRESS", address)
    took = _search_fails(tmp_path, rf"RAY_ADDRESS='{address}'.*no Ray cluster answers")
    assert took < 30


@pytest.mark.parametrize("how", ["address", "RAY_ADDRESS"])
def test_an_address_that_accepts_tcp_and_never_answers_fails_within_seconds(tmp_path, monkeypatch, how):
    monkeypatch.setattr(_connect, "CONNECT_TIMEOUT_S", 2.0)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with _silent_server() as address:
        if how == "RAY_ADDRESS":
            monkeypatch.setenv("RAY_ADDRESS", address)
            took = _search_fails(tmp_path, rf"RAY_ADDRESS='{address}'.*no Ray cluster answered within 2 s")
        else:
            took = _search_fails(
                tmp_path, rf"address='{address}'.*no Ray cluster answered within 2 s", address=address
            )
    assert took < 30


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.ray
def test_without_an_address_a_running_ray_on_the_machine_is_not_joined(tmp_path):
    """A `ray start --head` ran here (its address file in Ray's temp folder, as another user's or job's would be);
    a search with no address and no RAY_ADDRESS starts its own Ray instead of joining it."""
    # Ray's default temp folder for both sides, so the search would find that cluster (short: Ray's socket paths)
    tmp = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))
    env = {**rc.cluster_env(), "RAY_TMPDIR": str(tmp)}
    env.pop("RAY_ADDRESS", None)
    port = rc._free_port()
    head = rc.start_node(
        rc.head_args(port),
        env,
        str(tmp_path / "head.log"),
    )
    try:
        out = str(tmp_path / "out")
        script = textwrap.dedent(f"""
            import logging, sys
            sys.path.insert(0, {str(rc.ROOT)!r})
            logging.basicConfig(level=logging.INFO)
            import ray
            from hpsearch import hyperparameter_search
            from spaces import Float
            from tests.hpsearch import _ray_cluster as rc
            from ray._private.services import find_bootstrap_address
            from trainer import TrainerCallback
            print("found", find_bootstrap_address(None))

            class WhichRay(TrainerCallback):  # runs in the trial's Ray worker: which cluster it belongs to
                def on_train_begin(self, args, state, control, **kwargs):
                    with open({str(tmp_path / "gcs")!r}, "w") as f:
                        f.write(ray.get_runtime_context().gcs_address)

            trainer = rc.make_trainer({out!r}, epochs=1, callbacks=[WhichRay()])
            hyperparameter_search(trainer, hp_space={{"learning_rate": Float(1e-3, 1e-1)}},
                                  compute_objective="eval_accuracy", n_trials=1, direction="maximize", backend="ray")
        """)
        proc = subprocess.run(
            [sys.executable, "-c", script],
            env=env,
            cwd=str(rc.ROOT),
            capture_output=True,
            text=True,
            timeout=400,
        )
    finally:
        rc.stop_nodes([head])
        shutil.rmtree(tmp, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"found 127.0.0.1:{port}" in proc.stdout  # the running Ray was there to be joined
    assert (
        tmp_path / "gcs"
    ).read_text() != f"127.0.0.1:{port}"  # the trial ran on another Ray: the search's own
    assert "started a private local Ray" in proc.stderr
    assert "joined the cluster" not in proc.stderr
