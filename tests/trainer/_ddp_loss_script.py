"""Run by tests/trainer/test_loss_hf.py under ``accelerate launch`` (2 CPU processes): the tiny GPT-2 of that test
trained with one example per process and 2 accumulation steps (a window of 4 examples over both processes), with
``average_tokens_across_devices`` as argv[2] says; the main process saves the final weights to ``<argv[1]>``."""

from __future__ import annotations

import sys

import torch

from tests.trainer.test_loss_hf import COMMON, PaddedLM, tiny_gpt2
from trainer import Trainer, TrainingArguments

if __name__ == "__main__":
    out, average = sys.argv[1], sys.argv[2] == "average"
    args = TrainingArguments(
        output_dir=out,
        per_device_train_batch_size=1,
        gradient_accumulation_steps=2,
        average_tokens_across_devices=average,
        **COMMON,
    )
    trainer = Trainer(model=tiny_gpt2(), args=args, train_dataset=PaddedLM())
    trainer.train()
    if trainer.is_world_process_zero():
        torch.save(trainer.model.state_dict(), f"{out}/weights.pt")
