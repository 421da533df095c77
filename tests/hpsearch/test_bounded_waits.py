"""What a search starts, it stops; what it waits for, it waits for with a bound.

- ``dashboard=True`` serves while the search runs and stops when it returns (it kept serving, so the next
  search's dashboard could not take the port);
- a PostgreSQL server frozen mid-search (SIGSTOP): every statement and the heartbeat are bounded on the client
  side, and the search fails naming the cause instead of waiting (minutes) for a server that does not answer.
"""

from __future__ import annotations

import socket
from pathlib import Path

import hpsearch
import spaces
from tests._digits import DigitsMLP, digits_trainer

SPACE = {"learning_rate": spaces.Float(1e-3, 1e-2)}


def _trainer(out: Path):
    return digits_trainer(str(out), lambda trial: DigitsMLP(hidden=16), num_train_epochs=1, eval_strategy="epoch",
                          save_strategy="no", per_device_train_batch_size=64, logging_strategy="no",
                          disable_tqdm=True, report_to="none")


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

    trainer = digits_trainer(str(tmp_path / "a"), model_init, num_train_epochs=1, eval_strategy="epoch",
                             save_strategy="no", per_device_train_batch_size=64, logging_strategy="no",
                             disable_tqdm=True, report_to="none")
    hpsearch.hyperparameter_search(trainer, hp_space=SPACE, n_trials=1, backend="random",
                                   compute_objective="eval_loss", dashboard=True, dashboard_port=port)
    assert True in seen_serving  # it served while the search ran
    assert not _serving(port), "the dashboard still serves after the search returned"
    assert "stops when the search returns" in capsys.readouterr().out
    # The next search's dashboard takes the same port.
    hpsearch.hyperparameter_search(_trainer(tmp_path / "b"), hp_space=SPACE, n_trials=1, backend="random",
                                   compute_objective="eval_loss", dashboard=True, dashboard_port=port)
    assert not _serving(port)
