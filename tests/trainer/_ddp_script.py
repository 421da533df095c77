"""Run by tests/trainer/test_multiprocess.py under ``accelerate launch --multi_gpu --num_processes 2`` on CPU.

Each process trains the digits MLP with data parallelism three times: straight through (``full``), interrupted
at step ``STOP_AT`` by a callback (``part``) and resumed from its checkpoint. It then evaluates the final
weights on an eval set whose size is not a multiple of 2 x the eval batch size, so the last batch is padded
across processes and ``gather_for_metrics`` must drop the padding. Every process writes what it saw to
``<out>/rank-<i>.json``; the main process also exports the final weights to ``<out>/final``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

import torch
from torch.utils.data import Subset

from tests._digits import DigitsMLP, accuracy, digits_datasets
from trainer import Trainer, TrainerCallback, TrainingArguments

N_TRAIN = 192  # 2 processes x 16 per batch: 6 steps per epoch
N_EVAL = 75  # not a multiple of 2 x 8: the last eval batch is padded across processes
STOP_AT = 4  # mid-epoch (second epoch)
EPOCHS = 2


class StopAt(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == STOP_AT:
            control.should_training_stop = True


def digest(model: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def make_trainer(output_dir: str, callbacks=None) -> Trainer:
    train, evaluation = digits_datasets()
    args = TrainingArguments(
        output_dir=output_dir,
        per_device_train_batch_size=16,
        per_device_eval_batch_size=8,
        num_train_epochs=EPOCHS,
        learning_rate=1e-2,
        logging_steps=1,
        save_steps=2,
        save_total_limit=3,
        full_determinism=True,
        use_cpu=True,
        disable_tqdm=True,
        seed=11,
        report_to="jsonl",
    )
    return Trainer(
        model_init=lambda: DigitsMLP(hidden=32, dropout=0.2),
        args=args,
        train_dataset=Subset(train, range(N_TRAIN)),
        eval_dataset=Subset(evaluation, range(N_EVAL)),
        compute_metrics=accuracy,
        callbacks=callbacks,
    )


def main(out: str) -> None:
    full = make_trainer(os.path.join(out, "full"))
    full.train()
    accelerator = full.accelerator
    assert accelerator is not None
    rank = accelerator.process_index

    part_dir = os.path.join(out, "part")
    make_trainer(part_dir, callbacks=[StopAt()]).train()
    checkpoints_after_stop = sorted(n for n in os.listdir(part_dir) if n.startswith("checkpoint-"))
    resumed = make_trainer(part_dir)
    resumed.train(resume_from_checkpoint=True)

    metrics = full.evaluate()
    prediction = full.predict(Subset(digits_datasets()[1], range(N_EVAL)))
    if full.is_world_process_zero():
        full.save_model(os.path.join(out, "final"))
    accelerator.wait_for_everyone()

    # DistributedDataParallel options from TrainingArguments reach the wrapped model; the process properties agree.
    ddp = make_trainer(os.path.join(out, "ddp"))
    ddp.args = ddp.args.replace(
        ddp_find_unused_parameters=True,
        ddp_bucket_cap_mb=1,
        ddp_broadcast_buffers=False,
        max_steps=2,
        save_strategy="no",
        report_to="none",
        include_num_input_tokens_seen=True,
    )
    ddp.train()
    wrapped = ddp.model_wrapped
    ddp_seen = {
        "wrapper": type(wrapped).__name__,
        "find_unused_parameters": getattr(wrapped, "find_unused_parameters", None),
        "bucket_bytes_cap": getattr(wrapped, "bucket_bytes_cap", None),
        "broadcast_buffers": getattr(wrapped, "broadcast_buffers", None),
        "world_size": ddp.args.world_size,
        "process_index": ddp.args.process_index,
        "should_save": ddp.args.should_save,
        "num_input_tokens_seen": ddp.state.num_input_tokens_seen,
    }

    full_dir = os.path.join(out, "full")
    checkpoints = {
        name: sorted(os.listdir(os.path.join(full_dir, name)))
        for name in sorted(os.listdir(full_dir))
        if name.startswith("checkpoint-")
    }
    result = {
        "rank": rank,
        "num_processes": accelerator.num_processes,
        "distributed_type": accelerator.distributed_type.value,
        "backend": torch.distributed.get_backend() if torch.distributed.is_initialized() else None,
        "is_world_process_zero": full.is_world_process_zero(),
        "is_local_process_zero": full.is_local_process_zero(),
        "state_is_world_process_zero": full.state.is_world_process_zero,
        "state_is_local_process_zero": full.state.is_local_process_zero,
        "global_step": full.state.global_step,
        "eval_metrics": metrics,
        "num_predictions": int(prediction.predictions.shape[0]),
        "num_label_ids": int(prediction.label_ids.shape[0]),
        "full_digest": digest(full.model),
        "resumed_digest": digest(resumed.model),
        "resumed_global_step": resumed.state.global_step,
        "full_losses": {e["step"]: e["loss"] for e in full.state.log_history if "loss" in e},
        "resumed_losses": {e["step"]: e["loss"] for e in resumed.state.log_history if "loss" in e},
        "checkpoints_after_stop": checkpoints_after_stop,
        "checkpoints": checkpoints,
        "output_entries": sorted(os.listdir(full_dir)),
        "ddp": ddp_seen,
    }
    with open(os.path.join(out, f"rank-{rank}.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2, default=str)


if __name__ == "__main__":
    main(sys.argv[1])
