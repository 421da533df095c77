"""An unrelated Ray on the machine (another user's or job's ``ray start --head``): a test cluster stops only what it
started, and a search without an address does not join it.

In a module of its own: it starts a Ray head and a cluster of its own, so it neither joins nor stops the session's
shared cluster (it runs before that cluster starts: see tests/hpsearch/conftest.py), and at most three Ray nodes
share the machine. Both tests use one unrelated head (a start and a stop of a Ray node cost several seconds on 2
cores): the first leaves it running, as it must, and the module stops it by pid at the end.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass

import pytest

from hpsearch.backends.ray import _connect
from tests.hpsearch import _ray_cluster as rc

pytestmark = [pytest.mark.slow, pytest.mark.multiprocess, pytest.mark.ray]

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

_AUTH = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


def _processes(pids):
    import psutil

    out = []
    for pid in pids:
        try:
            out.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            pass
    return out


def _running(processes):
    import psutil

    alive = []
    for process in processes:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process.pid)
        except psutil.NoSuchProcess:
            pass
    return alive


@dataclass
class OtherRay:
    """A Ray head that is none of the tests' clusters: its port, its processes, and Ray's temp folder (RAY_TMPDIR)
    where its address file is, as ``ray start`` leaves it for a later ``address='auto'`` on the machine."""

    port: int
    tmpdir: str
    processes: list


@pytest.fixture(scope="module")
def other_ray():
    """An unrelated Ray head (its own port and Ray temp folder, authentication disabled), running through the
    module; stopped by pid at the end, which must leave none of its processes."""
    # Short: Ray's socket paths under the temp folder are limited to ~100 characters.
    tmpdir = tempfile.mkdtemp(prefix="ru", dir="/tmp")
    port = rc._free_port()
    env = rc.node_env(rc.write_token(tmpdir))
    env["RAY_AUTH_MODE"] = "disabled"
    env["RAY_TMPDIR"] = tmpdir
    env.pop("RAY_ADDRESS", None)
    head = rc.start_node(rc.head_args(port), env, os.path.join(tmpdir, "head.log"))
    processes = _processes(head.pids)
    try:
        yield OtherRay(port, tmpdir, processes)
    finally:
        rc.stop_nodes([head])
        shutil.rmtree(tmpdir, ignore_errors=True)
    assert _running(processes) == []


def test_stopping_the_test_cluster_leaves_other_ray_processes_alive(other_ray, tmp_path, monkeypatch):
    """The fixture stops its cluster by pid and process group, not with a machine-wide ``ray stop --force``: an
    unrelated Ray head (its own port and temp dir, authentication disabled) outlives it. On the way: a driver that
    has a token does not turn token mode on for a cluster without authentication."""
    others = other_ray.processes
    address = f"127.0.0.1:{other_ray.port}"
    assert len(_running(others)) >= 3, [p.pid for p in others]  # ray start, gcs_server, raylet, ...
    with monkeypatch.context() as patch:
        patch.delenv("RAY_AUTH_MODE", raising=False)
        patch.setenv("RAY_AUTH_TOKEN_PATH", rc.write_token(str(tmp_path)))
        assert _connect.gcs_auth(address, offer_token=True) == _connect.OPEN
        _connect._prepare_token_auth(address)
        assert "RAY_AUTH_MODE" not in os.environ
    env_before = {key: os.environ.get(key) for key in _AUTH}
    cluster = rc.start_cluster()
    try:
        assert os.environ["RAY_AUTH_TOKEN_PATH"] == cluster.token_path
        mine = _processes(cluster.pids)
        assert len(mine) >= 6 and not {p.pid for p in mine} & {p.pid for p in others}
    finally:
        cluster.stop()
    assert _running(mine) == []
    assert not os.path.exists(cluster.temp_dir)
    assert {key: os.environ.get(key) for key in _AUTH} == env_before
    assert sorted(_running(others)) == sorted(p.pid for p in others), "the unrelated Ray was stopped too"


def test_without_an_address_a_running_ray_on_the_machine_is_not_joined(other_ray, tmp_path):
    """A `ray start --head` ran here (its address file in Ray's temp folder, as another user's or job's would be);
    a search with no address and no RAY_ADDRESS starts its own Ray instead of joining it."""
    port = other_ray.port
    # Ray's temp folder of that head, so the search would find that cluster
    env = {**rc.cluster_env(), "RAY_TMPDIR": other_ray.tmpdir}
    env.pop("RAY_ADDRESS", None)
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
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"found 127.0.0.1:{port}" in proc.stdout  # the running Ray was there to be joined
    assert (
        tmp_path / "gcs"
    ).read_text() != f"127.0.0.1:{port}"  # the trial ran on another Ray: the search's own
    assert "started a private local Ray" in proc.stderr
    assert "joined the cluster" not in proc.stderr
