"""A test cluster stops only what it started: an unrelated Ray on the machine outlives it.

In a module of its own: it starts and stops clusters of its own, so it neither joins nor stops the session's shared
cluster (it runs before that cluster starts: see tests/hpsearch/conftest.py), and at most three Ray nodes share the
machine.
"""

from __future__ import annotations

import os
import shutil
import tempfile

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


def test_stopping_the_test_cluster_leaves_other_ray_processes_alive(tmp_path, monkeypatch):
    """The fixture stops its cluster by pid and process group, not with a machine-wide ``ray stop --force``: an
    unrelated Ray head (its own port and temp dir, authentication disabled) outlives it, and is then stopped by pid
    too. On the way: a driver that has a token does not turn token mode on for a cluster without authentication."""
    other_dir = tempfile.mkdtemp(prefix="ru", dir="/tmp")
    port = rc._free_port()
    env = rc.node_env(rc.write_token(other_dir))
    env["RAY_AUTH_MODE"] = "disabled"
    other = rc.start_node(
        rc.head_args(port, other_dir),
        env,
        os.path.join(other_dir, "head.log"),
    )
    others = _processes(other.pids)
    try:
        assert len(_running(others)) >= 3, other.pids  # ray start, gcs_server, raylet, ...
        with monkeypatch.context() as patch:
            patch.delenv("RAY_AUTH_MODE", raising=False)
            patch.setenv("RAY_AUTH_TOKEN_PATH", rc.write_token(str(tmp_path)))
            assert _connect.gcs_auth(f"127.0.0.1:{port}", offer_token=True) == _connect.OPEN
            _connect._prepare_token_auth(f"127.0.0.1:{port}")
            assert "RAY_AUTH_MODE" not in os.environ
        env_before = {key: os.environ.get(key) for key in _AUTH}
        cluster = rc.start_cluster()
        try:
            assert os.environ["RAY_AUTH_TOKEN_PATH"] == cluster.token_path
            mine = _processes(cluster.pids)
            assert len(mine) >= 6 and not {p.pid for p in mine} & set(other.pids)
        finally:
            cluster.stop()
        assert _running(mine) == []
        assert not os.path.exists(cluster.temp_dir)
        assert {key: os.environ.get(key) for key in _AUTH} == env_before
        assert sorted(_running(others)) == sorted(p.pid for p in others), "the unrelated Ray was stopped too"
    finally:
        rc.stop_nodes([other])
        shutil.rmtree(other_dir, ignore_errors=True)
    assert _running(others) == []
