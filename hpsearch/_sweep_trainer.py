"""The Trainer of a sweep file: its trainer factory (or `trainer.Trainer`) given the model factory, the training
arguments, the datasets, compute_metrics, the data collator and the processing class the file names."""

from __future__ import annotations

import inspect
import sys
import traceback
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .sweep import SweepConfig

__all__ = ["build_trainer"]


def _made(value: Any) -> Any:
    """A function or class the file names is called to make the object; any other object is the object."""
    return (
        value() if inspect.isfunction(value) or inspect.isclass(value) or inspect.ismethod(value) else value
    )


def build_trainer(config: SweepConfig, training_args: Any, train_dataset: Any, eval_dataset: Any) -> Any:
    """The Trainer of the sweep (the file's trainer factory, or trainer.Trainer) with its processing_class and data
    collator; None after printing the user's traceback and what to fix where their code failed."""
    from trainer import Trainer

    step = "processing_class"
    try:
        processing = _made(config.processing_class) if config.processing_class is not None else None
        step = "data_collator"
        collator: Any = config.data_collator
        if inspect.isclass(collator):  # e.g. DataCollatorWithPadding(tokenizer)
            make: Any = collator
            collator = make(processing) if processing is not None else make()
        step = "trainer" if config.trainer is not None else "model"
        kwargs: dict[str, Any] = {
            "model_init": config.model,
            "args": training_args,
            "train_dataset": train_dataset,
            "eval_dataset": eval_dataset,
            "compute_metrics": config.metrics,
        }
        if collator is not None:
            kwargs["data_collator"] = collator
        if processing is not None:
            kwargs["processing_class"] = processing
        factory: Any = config.trainer or Trainer
        trainer = factory(**kwargs)
    except Exception:  # the user's code: its traceback is the useful part
        traceback.print_exc()
        line = config.lines.line(step)
        hint = (
            "The Trainer builds one model with model_init(trial=None) before the search, as transformers' does: "
            "make model_init work without a trial too (e.g. `trial['hidden'] if trial else 64`)."
            if step == "model"
            else ""
        )
        print(
            f"hpsearch: {config.lines.path}{f':{line}' if line else ''}: {step}: building the Trainer failed "
            f"(traceback above). {hint}".rstrip(),
            file=sys.stderr,
        )
        return None
    if not isinstance(trainer, Trainer):
        raise config.error(
            f"the trainer factory returned {type(trainer).__name__}, not a trainer.Trainer; return "
            "a Trainer (or a subclass) built from the keyword arguments it is given.",
            "trainer",
        )
    return trainer
