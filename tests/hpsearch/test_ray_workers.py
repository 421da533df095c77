"""Distributed Ray trials: ``workers_per_trial=2`` runs each trial as two Ray Train workers (gloo on CPU).

Two workers at the same per-device batch size train on the same global batches as one process with twice that
batch size (accelerate deals each epoch's shuffled batches out in turn, and DDP averages the gradients), so each
trial must reach the accuracy of that single-process run. The last, incomplete batch is dropped on both sides:
otherwise accelerate pads the shorter worker's last batch with examples from the start of the epoch.
"""

from __future__ import annotations

import os

import pytest

from hpsearch import hyperparameter_search
from hpsearch.errors import SearchConfigError
from hpsearch.trial import TrialState
from spaces import Float
from tests.hpsearch import _ray_cluster as rc


# The refusal of a bad workers_per_trial starts no Ray: it is in the fast tier; the others start a local Ray.
def _local_ray(test):
    return pytest.mark.slow(pytest.mark.multiprocess(pytest.mark.ray(test)))


EPOCHS = 2
BATCH = 32  # per worker; the single-process reference uses 2 * BATCH


@pytest.fixture
def local_ray(monkeypatch, tmp_path):
    """The backend starts a local Ray (2 CPUs here: one per worker); its workers import the tests' helpers. Ray's
    default token authentication, with a token of the test's own (Ray would otherwise create ~/.ray/auth_token)."""
    import ray

    for key, value in rc.cluster_env().items():
        if key in ("PYTHONPATH", "RAY_USAGE_STATS_ENABLED"):
            monkeypatch.setenv(key, value)
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", rc.write_token(str(tmp_path)))
    if ray.is_initialized():
        ray.shutdown()
    yield
    if ray.is_initialized():
        ray.shutdown()


def _single_process_accuracy(output_dir: str, learning_rate: float) -> float:
    trainer = rc.make_trainer(
        output_dir,
        epochs=EPOCHS,
        per_device_train_batch_size=2 * BATCH,
        learning_rate=learning_rate,
        save_strategy="no",
        dataloader_drop_last=True,
    )
    trainer.train()
    return trainer.evaluate()["eval_accuracy"]


@_local_ray
def test_two_worker_trials_match_single_process_runs(local_ray, tmp_path):
    from ray import tune

    out = str(tmp_path / "out")
    trainer = rc.make_trainer(
        out, epochs=EPOCHS, per_device_train_batch_size=BATCH, dataloader_drop_last=True
    )
    best = hyperparameter_search(
        trainer,
        hp_space={"learning_rate": tune.grid_search([3e-3, 2e-2])},
        compute_objective="eval_accuracy",
        n_trials=1,
        direction="maximize",
        backend="ray",
        workers_per_trial=2,
        resources_per_trial={"cpu": 1},
    )
    records = best.run_summary.records
    assert len(records) == 2
    assert sorted(r.params["learning_rate"] for r in records) == [3e-3, 2e-2]
    # 1437 training examples: 44 full batches of 32, dealt out to 2 workers -> 22 steps per epoch.
    steps_per_epoch = 22
    for record in records:
        assert record.state is TrialState.COMPLETE, (record.name, record.error)
        assert record.extra["workers"] == 2
        assert record.node
        assert [e.step for e in record.intermediates] == [steps_per_epoch * (i + 1) for i in range(EPOCHS)]
        assert record.last_step == steps_per_epoch * EPOCHS
        # Rank 0's checkpoint went to Tune with its report.
        assert record.checkpoint is not None and os.path.isfile(
            os.path.join(record.checkpoint, "model.safetensors")
        )
    assert best.objective == max(r.objective for r in records)

    for record in records:
        single = _single_process_accuracy(
            str(tmp_path / f"single-{record.number}"), record.params["learning_rate"]
        )
        assert abs(record.objective - single) <= 0.01, (record.params, record.objective, single)


def test_bad_workers_per_trial_is_named(tmp_path):
    trainer = rc.make_trainer(str(tmp_path / "out"))
    with pytest.raises(SearchConfigError, match="workers_per_trial"):
        hyperparameter_search(
            trainer,
            hp_space={"learning_rate": Float(1e-3, 1e-1, log=True)},
            backend="ray",
            workers_per_trial=0,
        )


@_local_ray
def test_two_worker_trials_train_sharded_with_fsdp(local_ray, tmp_path):
    from ray import tune

    # Sharded checkpoints: each worker writes its own half, so the trial's checkpoint shows the sharding.
    trainer = rc.make_trainer(
        str(tmp_path / "out"),
        epochs=1,
        per_device_train_batch_size=BATCH,
        dataloader_drop_last=True,
        fsdp="full_shard",
        fsdp_config={"state_dict_type": "SHARDED_STATE_DICT"},
    )
    best = hyperparameter_search(
        trainer,
        hp_space={"learning_rate": tune.grid_search([2e-2])},
        compute_objective="eval_accuracy",
        n_trials=1,
        direction="maximize",
        backend="ray",
        workers_per_trial=2,
        resources_per_trial={"cpu": 1},
    )
    (record,) = best.run_summary.records
    assert record.state is TrialState.COMPLETE, (record.name, record.error)
    assert record.extra["workers"] == 2 and record.last_step == 22
    files = sorted(os.listdir(record.checkpoint))
    assert {
        "fsdp_model_rank0.safetensors",
        "fsdp_model_rank1.safetensors",
        "fsdp_optimizer_rank0.pt",
        "fsdp_optimizer_rank1.pt",
    } <= set(files), files
    assert record.objective > 0.5  # it learned: one epoch at this rate reaches ~0.9 on the digits
