"""Ray node faults against a real two-node Ray cluster on 127.0.0.1: a worker node stopped during a sweep.

The cluster is this module's own: its second node is killed, so it cannot be shared with other modules. A trial that
fails on a cluster, recorded with the error it raised (read where Tune's driver stages it), is the contract suite's
(test_contract.py, failed trials [ray], on the shared cluster).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from hpsearch import hyperparameter_search
from hpsearch.backends.ray._connect import connect
from hpsearch.results import SearchResult
from hpsearch.trial import TrialState
from spaces import Float
from tests.hpsearch import _ray_cluster as rc

pytestmark = [pytest.mark.slow, pytest.mark.multiprocess, pytest.mark.ray]

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

# The GCS declares a node dead after `threshold` failed health checks `period` apart; Ray's defaults (5 x 3 s) would
# spend ~15 s of the test waiting, so the head's GCS checks every second. The timeout and threshold stay generous:
# a killed raylet refuses at once, while a live one on a busy 2-core machine may answer late.
_FAST_NODE_DEATH = {
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "5000",
    "RAY_health_check_failure_threshold": "5",
}
_MARKER_WAIT_S = 180.0


@pytest.fixture(scope="module")
def cluster():
    import ray

    with pytest.MonkeyPatch.context() as patch:
        for key, value in _FAST_NODE_DEATH.items():
            patch.setenv(key, value)  # read by the head's GCS when `ray start` launches it
        started = rc.start_cluster()
    connection = None
    try:
        # Connected here, not by the search, so the test can look up node ids; the search then reuses the
        # connection. Ray connects a driver to the head when several nodes share the host. The adapter's own way
        # in, which turns Ray's token mode on for this connection (the cluster uses token authentication).
        connection = connect(started.address)
        yield started
    finally:
        if connection is not None:
            connection.close()
        if ray.is_initialized():
            ray.shutdown()
        started.stop()


class _NodeKiller(threading.Thread):
    """Waits for the marker of a trial stalled on ``node_id``, then kills that node (raylet, workers, agents)."""

    def __init__(self, node_id: str, marker: str) -> None:
        super().__init__(daemon=True)
        self.node_id = node_id
        self.marker = marker
        self.stop = threading.Event()
        self.killed: list[int] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            deadline = time.monotonic() + _MARKER_WAIT_S
            while not os.path.exists(self.marker):
                if self.stop.is_set() or time.monotonic() > deadline:
                    return
                time.sleep(0.2)
            self.killed = rc.kill_node(self.node_id)
        except BaseException as error:  # reported by the test, not lost in the thread
            self.error = error


def _wait_dead(node_id: str, timeout: float = 60.0) -> bool:
    import ray

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(n["NodeID"] == node_id and not n["Alive"] for n in ray.nodes()):
            return True
        time.sleep(0.5)
    return False


def test_stopped_worker_node_trials_are_retried_elsewhere_and_the_sweep_completes(cluster, tmp_path):
    import ray

    head, others = rc.node_ids()
    assert len(others) == 1, others
    (second,) = others
    assert ray.get_runtime_context().get_node_id() == head  # the driver survives the node it kills

    out = str(tmp_path / "out")
    marker = str(tmp_path / "stalled")
    killer = _NodeKiller(second, marker)
    killer.start()
    try:
        # Two epochs: the stall is at the last evaluation, after the epoch-1 checkpoint the retry starts from.
        trainer = rc.make_trainer(out, epochs=2, callbacks=[rc.StallOnNodeAtSecondEval(second, marker)])
        best = hyperparameter_search(
            trainer,
            hp_space={"learning_rate": Float(1e-2, 2e-2)},
            compute_objective="eval_accuracy",
            # One trial a node: both start at once, so one runs on the second node and stalls there.
            n_trials=2,
            direction="maximize",
            backend="ray",
            address=cluster.address,
            max_failures=1,
            # A process per trial: with reused actors the head's warm process can run every trial before the
            # second node's first process has started, and then no trial stalls there for the kill.
            reuse_actors=False,
        )
    finally:
        killer.stop.set()
        killer.join(timeout=60)
    assert killer.error is None, repr(killer.error)
    assert os.path.exists(marker), "no trial reached its 2nd evaluation on the second node"
    assert killer.killed, "the second node was not stopped"
    stalled_name, stalled_step = Path(marker).read_text().split()
    assert int(stalled_step) == 46  # stopped during its 2nd epoch's evaluation, after the epoch-1 checkpoint
    assert _wait_dead(second), "the GCS never declared the stopped node dead"

    records = best.run_summary.records
    assert len(records) == 2
    assert all(r.state is TrialState.COMPLETE for r in records), [(r.name, r.state, r.error) for r in records]
    (retried,) = [r for r in records if r.name == stalled_name]
    # Retried once, from the checkpoint it had saved on the lost node, and finished on the survivor.
    assert retried.extra.get("resumed_from") == [f"{stalled_name}@23"], retried.extra
    assert retried.node == head
    assert [e.step for e in retried.intermediates] == [23, 46]  # step 46 evaluated once, after the restart
    assert retried.last_step == 46
    # Nothing else needed a retry, and with the second node gone every trial ended on the head.
    assert [r.name for r in records if r.extra.get("resumed_from")] == [stalled_name]
    assert {r.node for r in records} == {head}
    loaded = SearchResult.load(out)
    assert {r.trial_id: r.state for r in loaded.records} == {r.trial_id: r.state for r in records}
