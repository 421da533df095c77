"""What a search starts, it stops; what it waits for, it waits for with a bound.

- ``dashboard=True`` serves while the search runs and stops when it returns (it kept serving, so the next
  search's dashboard could not take the port);
- a PostgreSQL server frozen mid-search (SIGSTOP): every statement and the heartbeat are bounded on the client
  side, and the search fails naming the cause instead of waiting (minutes) for a server that does not answer.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from pathlib import Path

import pytest

import hpsearch
import spaces
from tests._digits import DigitsMLP, digits_trainer

SPACE = {"learning_rate": spaces.Float(1e-3, 1e-2)}


def _trainer(out: Path):
    return digits_trainer(
        str(out),
        lambda trial: DigitsMLP(hidden=16),
        num_train_epochs=1,
        eval_strategy="epoch",
        save_strategy="no",
        per_device_train_batch_size=64,
        logging_strategy="no",
        disable_tqdm=True,
        report_to="none",
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serving(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_the_dashboard_of_a_search_stops_when_the_search_returns(tmp_path, capsys):
    port = _free_port()
    seen_serving: list[bool] = []

    def model_init(trial):
        seen_serving.append(_serving(port))
        return DigitsMLP(hidden=16)

    trainer = digits_trainer(
        str(tmp_path / "a"),
        model_init,
        num_train_epochs=1,
        eval_strategy="epoch",
        save_strategy="no",
        per_device_train_batch_size=64,
        logging_strategy="no",
        disable_tqdm=True,
        report_to="none",
    )
    hpsearch.hyperparameter_search(
        trainer,
        hp_space=SPACE,
        n_trials=1,
        backend="random",
        compute_objective="eval_loss",
        dashboard=True,
        dashboard_port=port,
    )
    assert True in seen_serving  # it served while the search ran
    assert not _serving(port), "the dashboard still serves after the search returned"
    assert "stops when the search returns" in capsys.readouterr().out
    # The next search's dashboard takes the same port.
    hpsearch.hyperparameter_search(
        _trainer(tmp_path / "b"),
        hp_space=SPACE,
        n_trials=1,
        backend="random",
        compute_objective="eval_loss",
        dashboard=True,
        dashboard_port=port,
    )
    assert not _serving(port)


def _cluster_pids(cluster) -> list[int]:
    import psutil

    with open(os.path.join(cluster.data_dir, "postmaster.pid")) as f:
        postmaster = int(f.readline())
    return [postmaster, *(p.pid for p in psutil.Process(postmaster).children(recursive=True))]


@pytest.mark.slow
@pytest.mark.multiprocess
def test_a_postgres_server_frozen_mid_search_fails_the_search_with_the_cause(tmp_path, monkeypatch):
    from hpsearch.backends.optuna import _storage
    from tests.hpsearch._postgres import postgres_cluster

    monkeypatch.setattr(_storage, "STATEMENT_TIMEOUT_S", 3)
    monkeypatch.setattr(_storage, "CONNECT_TIMEOUT_S", 3)
    frozen: list[int] = []

    with postgres_cluster() as cluster:  # its own server: freezing the shared one would stall other tests

        def model_init(trial):
            if trial is not None and trial.number == 1 and not frozen:
                frozen.extend(_cluster_pids(cluster))
                for pid in frozen:
                    os.kill(pid, signal.SIGSTOP)
            return DigitsMLP(hidden=16)

        trainer = digits_trainer(
            str(tmp_path / "out"),
            model_init,
            num_train_epochs=2,
            eval_strategy="epoch",
            save_strategy="no",
            per_device_train_batch_size=64,
            logging_strategy="no",
            disable_tqdm=True,
            report_to="none",
        )
        started = time.monotonic()
        try:
            with pytest.raises(
                Exception, match=r"storage=.*failed during the search.*did not answer within"
            ) as caught:
                hpsearch.hyperparameter_search(
                    trainer,
                    hp_space=SPACE,
                    n_trials=3,
                    backend="optuna",
                    compute_objective="eval_loss",
                    storage=cluster.url,
                    study_name="frozen",
                )
        finally:
            for pid in frozen:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
        took = time.monotonic() - started
    assert frozen, "the server was never frozen"
    assert took < 90, f"the search waited {took:.0f} s for a frozen server"
    assert cluster.password not in str(caught.value)
