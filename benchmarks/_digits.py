"""The digits task of the benchmarks: scikit-learn's bundled 8x8 digits, a small MLP, and helpers for both sides.

The data and model are the demo's (`examples.digits.model`); benchmarks never import from ``tests/``.
Everything a benchmark compares is
built here once so that "our" side and the baseline side see exactly the same data, model and settings:

- `digits_datasets`: the same 80/20 split (1,437 train / 360 eval examples) as dict examples.
- `DigitsMLP`: 64 -> hidden -> 10 with optional dropout; ``forward(x, labels)`` returns ``{"logits", "loss"}``.
- `make_trainer`: our `Trainer` on it with ``model_init(trial)`` reading ``hidden``/``dropout`` from the trial;
  `make_transformers_trainer`: transformers' on the same data, model and arguments (`trainer_settings`).
- `handwritten_run`: the same training written by hand in plain PyTorch (AdamW, linear decay, clipping at 1.0,
  evaluation with loss and accuracy), what a user would otherwise put inside an Optuna objective.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, RandomSampler, SequentialSampler

# The demo's own model and data, so the benchmarks measure what users run (same 80/20 split and MLP).
from examples.digits.model import DigitsDataset, DigitsMLP
from examples.digits.model import compute_metrics as accuracy
from examples.digits.model import datasets as digits_datasets

__all__ = [
    "EVAL_BATCH",
    "DigitsDataset",
    "DigitsMLP",
    "accuracy",
    "digits_datasets",
    "handwritten_run",
    "limit_threads",
    "make_trainer",
    "make_transformers_trainer",
    "model_init",
    "trainer_settings",
]

EVAL_BATCH = 256


def limit_threads(n: int = 1) -> None:
    """One intra-op thread: on a shared 2-core machine, spinning thread pools only add noise (set on both sides)."""
    os.environ.setdefault("OMP_NUM_THREADS", str(n))
    torch.set_num_threads(n)


def _param(trial: Any, name: str, default: Any) -> Any:
    if trial is None:
        return default
    params = trial.params if hasattr(trial, "params") else trial
    return params.get(name, default)


def model_init(trial: Any = None) -> DigitsMLP:
    """The model of a trial: ``hidden`` and ``dropout`` come from the trial when it has them."""
    return DigitsMLP(hidden=int(_param(trial, "hidden", 64)), dropout=float(_param(trial, "dropout", 0.0)))


def trainer_settings(output_dir: str, **overrides: Any) -> dict[str, Any]:
    """The training arguments of the digits trainers, ours and transformers' alike: eval per epoch, no checkpoints,
    no logging, no progress bars (overridable)."""
    settings: dict[str, Any] = dict(
        output_dir=output_dir,
        eval_strategy="epoch",
        save_strategy="no",
        logging_strategy="no",
        num_train_epochs=3,
        learning_rate=3e-3,
        per_device_train_batch_size=32,
        per_device_eval_batch_size=EVAL_BATCH,
        disable_tqdm=True,
        report_to="none",
        use_cpu=True,
        seed=0,
    )
    settings.update(overrides)
    return settings


def make_trainer(output_dir: str, **overrides: Any) -> Any:
    """Our Trainer on digits (`trainer_settings`) with ``model_init(trial)`` reading ``hidden``/``dropout``."""
    from trainer import Trainer, TrainingArguments

    train, evaluation = digits_datasets()
    return Trainer(
        model_init=model_init,
        args=TrainingArguments(**trainer_settings(output_dir, **overrides)),
        train_dataset=train,
        eval_dataset=evaluation,
        compute_metrics=accuracy,
    )


def make_transformers_trainer(output_dir: str, **overrides: Any) -> Any:
    """``transformers.Trainer`` on the same data, model and arguments as `make_trainer` (its forward already returns
    the loss): the peer side of the benchmarks."""
    import transformers

    train, evaluation = digits_datasets()
    return transformers.Trainer(
        model_init=model_init,
        args=transformers.TrainingArguments(**trainer_settings(output_dir, **overrides)),
        train_dataset=train,
        eval_dataset=evaluation,
        compute_metrics=accuracy,
    )


def _collate(examples: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    return {key: torch.stack([e[key] for e in examples]) for key in examples[0]}


def handwritten_run(
    learning_rate: float,
    batch_size: int,
    epochs: int,
    hidden: int = 64,
    dropout: float = 0.0,
    seed: int = 0,
    max_steps: int | None = None,
    on_epoch: Callable[[int, int, float], bool] | None = None,
) -> dict[str, float]:
    """Train and evaluate (once per epoch) by hand; the last evaluation's ``eval_loss``/``eval_accuracy``.

    ``on_epoch(epoch, step, accuracy)`` is called after each evaluation; returning True stops training (an
    Optuna objective uses it to report and prune). ``max_steps`` stops after that many optimizer steps (with
    one final evaluation), as ``TrainingArguments.max_steps`` does.
    """
    torch.manual_seed(seed)
    train, evaluation = digits_datasets()
    model = DigitsMLP(hidden=hidden, dropout=dropout)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.0)
    steps_per_epoch = math.ceil(len(train) / batch_size)
    total = max_steps if max_steps is not None else steps_per_epoch * epochs
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: max(0.0, (total - s) / max(1, total)))
    generator = torch.Generator().manual_seed(seed)
    loader = DataLoader(
        train, batch_size=batch_size, sampler=RandomSampler(train, generator=generator), collate_fn=_collate
    )
    eval_loader = DataLoader(
        evaluation, batch_size=EVAL_BATCH, sampler=SequentialSampler(evaluation), collate_fn=_collate
    )
    metrics: dict[str, float] = {}
    step = 0
    n_epochs = epochs if max_steps is None else math.ceil(max_steps / steps_per_epoch)
    for epoch in range(n_epochs):
        model.train()
        for batch in loader:
            loss = model(**batch)["loss"]
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if step >= total:
                break
        model.eval()
        losses, correct, seen = 0.0, 0, 0
        with torch.no_grad():
            for batch in eval_loader:
                out = model(**batch)
                n = len(batch["labels"])
                losses += float(out["loss"]) * n
                correct += int((out["logits"].argmax(-1) == batch["labels"]).sum())
                seen += n
        metrics = {"eval_loss": losses / seen, "eval_accuracy": correct / seen, "step": step}
        if (on_epoch is not None and on_epoch(epoch, step, metrics["eval_accuracy"])) or step >= total:
            break
    return metrics
