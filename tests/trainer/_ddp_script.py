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
    }
    with open(os.path.join(out, f"rank-{rank}.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2, default=str)


if __name__ == "__main__":
    main(sys.argv[1])
