"""The smallest trainer a test can run: a linear model learning the sum of 4 features, on the CPU, no logging,
saving or evaluation during training (for tests of what the machinery does around a trial, not of training)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from trainer import Trainer, TrainingArguments


class SumData(torch.utils.data.Dataset):
    """``n`` rows of 4 features (seeded by ``n``) labelled with their sum."""

    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(n)
        self.x = torch.randn(n, 4, generator=g)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[i], "labels": self.x[i].sum(-1, keepdim=True)}


class Linear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 1)

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        out = {"logits": self.linear(x)}
        if labels is not None:
            out["loss"] = nn.functional.mse_loss(out["logits"], labels)
        return out


def linear_trainer(output_dir: Any, **overrides: Any) -> Trainer:
    """A `Trainer` of `Linear` on 16 training and 8 evaluation rows, 4 steps unless ``overrides`` say otherwise."""
    settings: dict[str, Any] = dict(
        output_dir=str(output_dir), max_steps=4, per_device_train_batch_size=4, per_device_eval_batch_size=8,
        eval_strategy="no", save_strategy="no", logging_strategy="no", disable_tqdm=True, report_to="none",
        use_cpu=True,
    )  # fmt: skip
    settings.update(overrides)
    args = TrainingArguments(**settings)
    return Trainer(model_init=Linear, args=args, train_dataset=SumData(16), eval_dataset=SumData(8))
