"""A 2-process CPU run under ``accelerate launch`` (gloo): data parallelism, gathered metrics, one set of checkpoints."""

from __future__ import annotations

import json

import pytest
from torch.utils.data import Subset

from tests._digits import DigitsMLP, accuracy, digits_datasets
from tests._launch import accelerate_launch
from trainer import Trainer, TrainingArguments
from trainer import _checkpoint as ckpt

pytestmark = [pytest.mark.multiprocess, pytest.mark.slow]


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    accelerate_launch("tests.trainer._ddp_script", str(out))
    results = [json.loads((out / f"rank-{i}.json").read_text()) for i in range(2)]
    return out, results


def test_two_processes_train_with_data_parallelism(ddp_run):
    _, (r0, r1) = ddp_run
    assert r0["num_processes"] == r1["num_processes"] == 2
    assert r0["distributed_type"] == "MULTI_CPU" and r0["backend"] == "gloo"
    # 192 examples, 16 per process and step: 6 steps per epoch, 2 epochs (one process would need 24).
    assert r0["global_step"] == r1["global_step"] == 12
    # Gradients are averaged across processes, so both hold the same weights.
    assert r0["full_digest"] == r1["full_digest"]
    assert r0["full_losses"] == r1["full_losses"]


def test_process_zero_flags(ddp_run):
    _, (r0, r1) = ddp_run
    assert (r0["rank"], r1["rank"]) == (0, 1)
    for key in (
        "is_world_process_zero",
        "is_local_process_zero",
        "state_is_world_process_zero",
        "state_is_local_process_zero",
    ):
        assert (r0[key], r1[key]) == (True, False), key


def test_one_set_of_checkpoints_written_by_the_main_process(ddp_run):
    out, (r0, r1) = ddp_run
    assert r0["checkpoints"] == r1["checkpoints"]  # both processes see the one shared set
    # save_steps=2 over 12 steps with save_total_limit=3.
    assert list(r0["checkpoints"]) == ["checkpoint-10", "checkpoint-12", "checkpoint-8"]
    for files in r0["checkpoints"].values():
        # One RNG file per process, the rest once.
        assert files == sorted(
            [
                "model.safetensors",
                "optimizer.pt",
                "scheduler.pt",
                "rng_state_0.pth",
                "rng_state_1.pth",
                "trainer_state.json",
                "training_args.bin",
                "training_args.json",
            ]
        )
    assert not [n for n in r0["output_entries"] if n.startswith(".")]  # no temporary folders left
    # The log is written once (by the main process), one line per log call.
    lines = (out / "full" / "log_history.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines if '"loss"' in line] == list(range(1, 13))


def test_resume_under_two_processes_equals_the_uninterrupted_run(ddp_run):
    _, (r0, r1) = ddp_run
    assert r0["checkpoints_after_stop"] == ["checkpoint-2", "checkpoint-4"]
    assert r0["resumed_global_step"] == 12
    for r in (r0, r1):
        assert r["resumed_digest"] == r["full_digest"]
        assert r["resumed_losses"] == r["full_losses"]


def test_eval_metrics_match_a_single_process_evaluation_of_the_same_weights(ddp_run, tmp_path):
    out, (r0, r1) = ddp_run
    assert r0["eval_metrics"]["eval_accuracy"] == r1["eval_metrics"]["eval_accuracy"]
    model = DigitsMLP(hidden=32, dropout=0.2)
    ckpt.load_model_weights(model, str(out / "final"))
    _, evaluation = digits_datasets()
    single = Trainer(
        model=model,
        args=TrainingArguments(
            output_dir=str(tmp_path),
            per_device_eval_batch_size=8,
            use_cpu=True,
            disable_tqdm=True,
            report_to="none",
        ),
        eval_dataset=Subset(evaluation, range(75)),
        compute_metrics=accuracy,
    )
    metrics = single.evaluate()
    # 75 predictions: the padding of the last cross-process batch was dropped, no duplicate was counted.
    assert r0["num_predictions"] == r0["num_label_ids"] == r1["num_predictions"] == 75
    assert r0["eval_metrics"]["eval_accuracy"] == metrics["eval_accuracy"]
    # The loss is only close: a model returns one mean loss per batch, and the padded last batch of the second
    # process averages 3 real examples with 5 repeated ones before its per-example copies are trimmed.
    assert r0["eval_metrics"]["eval_loss"] == pytest.approx(metrics["eval_loss"], rel=2e-2)


def test_ddp_arguments_reach_distributed_data_parallel(ddp_run):
    _, results = ddp_run
    for rank, r in enumerate(results):
        ddp = r["ddp"]
        assert ddp["wrapper"] == "DistributedDataParallel"
        assert ddp["find_unused_parameters"] is True and ddp["broadcast_buffers"] is False
        assert ddp["bucket_bytes_cap"] == 1024 * 1024
        assert (ddp["world_size"], ddp["process_index"], ddp["should_save"]) == (2, rank, rank == 0)
        # The digits batches have no input_ids: examples are counted, over both processes (2 steps x 2 x 16).
        assert ddp["num_input_tokens_seen"] == 64
