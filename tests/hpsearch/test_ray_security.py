"""Ray's default security: a cluster with token authentication, joined by address (that a test cluster stops
only what it started: test_ray_cluster_stop.py).

The cluster (`_ray_cluster`) uses Ray's default token authentication, with a token of its own handed to this
process through ``RAY_AUTH_TOKEN_PATH`` and ``RAY_AUTH_MODE`` unset, as a user's shell would after
``export RAY_AUTH_TOKEN_PATH=...``. Before the fix, ``address="host:port"`` could not connect to such a cluster.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from hpsearch import hyperparameter_search
from hpsearch.backends.ray import _connect
from hpsearch.errors import SearchConfigError
from hpsearch.trial import TrialState
from spaces import Float
from tests.hpsearch import _ray_cluster as rc

pytestmark = [pytest.mark.slow, pytest.mark.multiprocess, pytest.mark.ray]

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

_SPACE = {"learning_rate": Float(1e-2, 5e-2, log=True)}
_AUTH = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


@pytest.fixture
def cluster(ray_cluster):
    """The session's shared cluster: Ray's default token authentication, its token handed to this process through
    RAY_AUTH_TOKEN_PATH with RAY_AUTH_MODE unset (`_ray_cluster.start_cluster`). Stopping a test cluster is
    checked in test_ray_cluster_stop.py, which starts clusters of its own."""
    return ray_cluster


@pytest.fixture
def fresh_driver():
    """Each test joins the cluster itself: no connection left over from another test."""
    import ray

    if ray.is_initialized():
        ray.shutdown()
    yield
    if ray.is_initialized():
        ray.shutdown()


def _files_containing(folder: str, secret: bytes, skip: tuple[str, ...] = ()) -> list[str]:
    found = []
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            if path in skip or os.path.islink(path):
                continue
            try:
                if secret in Path(path).read_bytes():
                    found.append(path)
            except OSError:
                pass  # a socket or a file Ray removed meanwhile
    return found


def test_cluster_uses_token_authentication(cluster, fresh_driver):
    assert "RAY_AUTH_MODE" not in os.environ  # the driver's side is left to the search
    assert _connect.gcs_auth(cluster.address, offer_token=False) == _connect.REQUIRED
    assert _connect.gcs_auth(cluster.address, offer_token=True) == _connect.ACCEPTED
    home_token = Path.home() / ".ray" / "auth_token"
    if home_token.exists():  # the test's token never goes to ~/.ray
        assert home_token.read_text().strip() != Path(cluster.token_path).read_text().strip()


def test_search_by_address_with_the_token_runs_on_the_cluster(cluster, fresh_driver, tmp_path, caplog, capfd):
    import ray

    caplog.set_level(logging.DEBUG)
    out = str(tmp_path / "out")
    best = hyperparameter_search(
        rc.make_trainer(out, epochs=1),
        hp_space=_SPACE,
        compute_objective="eval_accuracy",
        n_trials=2,
        direction="maximize",
        backend="ray",
        address=cluster.address,
    )
    records = best.run_summary.records
    assert [r.state for r in records] == [TrialState.COMPLETE] * 2, [(r.name, r.error) for r in records]
    assert all(r.node for r in records)
    # The search closed the connection it opened and left RAY_AUTH_MODE as it found it (unset).
    assert not ray.is_initialized()
    assert "RAY_AUTH_MODE" not in os.environ

    token = Path(cluster.token_path).read_text().strip().encode()
    assert len(token) >= 32
    assert _files_containing(out, token) == []
    # Nor in what Ray wrote for this driver and the trials (the token file itself aside).
    assert _files_containing(cluster.temp_dir, token, skip=(cluster.token_path,)) == []
    captured = capfd.readouterr()
    assert token.decode() not in caplog.text
    assert token.decode() not in captured.out + captured.err


def _no_token(monkeypatch, tmp_path):
    for key in _AUTH:
        monkeypatch.delenv(key, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))  # no ~/.ray/auth_token either


def test_search_by_address_without_a_token_is_refused_before_any_trial(
    cluster, fresh_driver, tmp_path, monkeypatch
):
    import ray

    _no_token(monkeypatch, tmp_path)
    out, log = tmp_path / "out", tmp_path / "trials.log"
    trainer = rc.make_trainer(str(out), epochs=1, callbacks=[rc.KillDriverAt(str(log), 99, 0)])
    with pytest.raises(SearchConfigError) as info:
        hyperparameter_search(
            trainer,
            hp_space=_SPACE,
            compute_objective="eval_accuracy",
            n_trials=2,
            direction="maximize",
            backend="ray",
            address=cluster.address,
        )
    message = str(info.value)
    assert "token authentication" in message and "no token was found" in message, message
    for fix in ("ray get-auth-token", "export RAY_AUTH_TOKEN_PATH=", "export RAY_AUTH_TOKEN="):
        assert fix in message, message
    assert not log.exists()  # no trial started
    assert not out.exists()  # and no output folder is left behind
    assert not ray.is_initialized() and "RAY_AUTH_MODE" not in os.environ


def test_a_token_that_is_not_the_clusters_is_named(cluster, fresh_driver, tmp_path, monkeypatch):
    _no_token(monkeypatch, tmp_path)
    wrong = rc.write_token(str(tmp_path))
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", wrong)
    out = tmp_path / "out"
    with pytest.raises(SearchConfigError, match="refused the token from RAY_AUTH_TOKEN_PATH=") as info:
        hyperparameter_search(
            rc.make_trainer(str(out), epochs=1),
            hp_space=_SPACE,
            compute_objective="eval_accuracy",
            n_trials=1,
            direction="maximize",
            backend="ray",
            address=cluster.address,
        )
    assert wrong in str(info.value) and Path(wrong).read_text() not in str(info.value)
    assert not out.exists()


def test_auth_mode_disabled_in_the_driver_is_named(cluster, fresh_driver, tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    out = tmp_path / "out"
    with pytest.raises(SearchConfigError, match="RAY_AUTH_MODE=disabled"):
        hyperparameter_search(
            rc.make_trainer(str(out), epochs=1),
            hp_space=_SPACE,
            compute_objective="eval_accuracy",
            n_trials=1,
            direction="maximize",
            backend="ray",
            address=cluster.address,
        )
    assert os.environ["RAY_AUTH_MODE"] == "disabled" and not out.exists()


def test_address_auto_still_connects(cluster, fresh_driver, tmp_path, monkeypatch):
    """``"auto"`` finds the cluster through RAY_ADDRESS; Ray itself turns the token mode on there."""
    import ray

    monkeypatch.setenv("RAY_ADDRESS", cluster.address)
    best = hyperparameter_search(
        rc.make_trainer(str(tmp_path / "out"), epochs=1),
        hp_space=_SPACE,
        compute_objective="eval_accuracy",
        n_trials=1,
        direction="maximize",
        backend="ray",
        address="auto",
    )
    assert [r.state for r in best.run_summary.records] == [TrialState.COMPLETE]
    assert not ray.is_initialized() and "RAY_AUTH_MODE" not in os.environ
