"""Distributed Ray trials: ``workers_per_trial=2`` runs each trial as two Ray Train workers (gloo on CPU).

Two workers at the same per-device batch size train on the same global batches as one process with twice that
batch size (accelerate deals each epoch's shuffled batches out in turn, and DDP averages the gradients), so each
trial must reach the accuracy of that single-process run. The last, incomplete batch is dropped on both sides:
otherwise accelerate pads the shorter worker's last batch with examples from the start of the epoch.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

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
LEARNING_RATE = 3e-3  # the trial's; the trainer's own is 1e-2


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory):
    """One local Ray for the module's searches (2 CPUs here: one per worker), started the way a search without an
    address starts it (the adapter's `connect`); each search then uses it and leaves it running, and it stops after
    the module. Neither test checks how the Ray was started (test_ray_connect does): one start, not one per test. Its
    workers import the tests' helpers. Ray's default token authentication, with a token of the module's own (Ray
    would otherwise create ~/.ray/auth_token)."""
    import ray

    from hpsearch.backends.ray._connect import connect

    if ray.is_initialized():
        ray.shutdown()
    with pytest.MonkeyPatch.context() as patch:
        for key, value in rc.cluster_env().items():
            if key in ("PYTHONPATH", "RAY_USAGE_STATS_ENABLED"):
                patch.setenv(key, value)
        patch.delenv("RAY_ADDRESS", raising=False)
        patch.delenv("RAY_AUTH_MODE", raising=False)
        patch.delenv("RAY_AUTH_TOKEN", raising=False)
        patch.setenv("RAY_AUTH_TOKEN_PATH", rc.write_token(str(tmp_path_factory.mktemp("ray-token"))))
        connection = connect(None)
        try:
            assert connection.local  # a private local Ray, as the searches would start
            yield
        finally:
            connection.close()


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
def test_a_two_worker_trial_matches_the_single_process_run(local_ray, tmp_path):
    """One trial is the property: its two workers train on the global batches of one process at twice the batch.
    Its learning rate (0.3x the trainer's) must reach both workers: the checkpoint's arguments say it, and the
    single-process run at that rate is what the accuracy is compared with."""
    from ray import tune

    out = str(tmp_path / "out")
    trainer = rc.make_trainer(
        out, epochs=EPOCHS, per_device_train_batch_size=BATCH, dataloader_drop_last=True
    )
    assert trainer.args.learning_rate != LEARNING_RATE
    best = hyperparameter_search(
        trainer,
        hp_space={"learning_rate": tune.grid_search([LEARNING_RATE])},
        compute_objective="eval_accuracy",
        n_trials=1,
        direction="maximize",
        backend="ray",
        workers_per_trial=2,
        resources_per_trial={"cpu": 1},
    )
    (record,) = best.run_summary.records
    assert record.state is TrialState.COMPLETE, (record.name, record.error)
    assert record.params == {"learning_rate": LEARNING_RATE}
    assert record.extra["workers"] == 2
    assert record.node
    # 1437 training examples: 44 full batches of 32, dealt out to 2 workers -> 22 steps per epoch.
    steps_per_epoch = 22
    assert [e.step for e in record.intermediates] == [steps_per_epoch * (i + 1) for i in range(EPOCHS)]
    assert record.last_step == steps_per_epoch * EPOCHS
    # Rank 0's checkpoint went to Tune with its report, trained at the trial's rate.
    assert record.checkpoint is not None and os.path.isfile(
        os.path.join(record.checkpoint, "model.safetensors")
    )
    saved_args = json.loads(Path(record.checkpoint, "training_args.json").read_text())
    assert saved_args["learning_rate"] == LEARNING_RATE
    assert best.objective == record.objective

    single = _single_process_accuracy(str(tmp_path / "single"), LEARNING_RATE)
    assert abs(record.objective - single) <= 0.01, (record.objective, single)


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
