"""Joining Ray never waits without bound, and a search without an address never joins someone else's Ray.

- ``RAY_ADDRESS`` at a closed port, and ``address=`` / ``RAY_ADDRESS`` at a port that accepts TCP and never
  answers, fail within seconds naming the address and the fix (they waited minutes in ``ray.init``); nothing is
  created in output_dir;
- with no address, a Ray already running on the machine (the last ``ray start`` here) is not joined: the search
  starts a private local Ray and the log says so (in test_ray_cluster_stop.py, whose unrelated Ray it uses).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time

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
