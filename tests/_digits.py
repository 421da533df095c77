"""The digits task shared by tests: the demo's own model and data (`examples.digits.model`), under test names.

scikit-learn's bundled 8x8 digits (no download), shuffled with a seed and split 80/20; an MLP whose forward takes
``x`` and ``labels`` and returns ``{"logits", "loss"}``.
"""

from __future__ import annotations

from typing import Any

from examples.digits.model import DigitsDataset, DigitsMLP
from examples.digits.model import compute_metrics as accuracy
from examples.digits.model import datasets as digits_datasets

__all__ = ["DigitsDataset", "DigitsMLP", "accuracy", "digits_datasets", "digits_trainer"]


def digits_trainer(output_dir: str, model_init: Any, callbacks: Any = None, **args: Any) -> Any:
    """A `Trainer` on the digits split with accuracy as its metric; ``args`` are its TrainingArguments."""
    from trainer import Trainer, TrainingArguments

    train, evaluation = digits_datasets()
    return Trainer(
        model_init=model_init,
        args=TrainingArguments(output_dir=output_dir, **args),
        train_dataset=train,
        eval_dataset=evaluation,
        compute_metrics=accuracy,
        callbacks=None if callbacks is None else list(callbacks),
    )
