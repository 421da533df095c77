"""The training loss as transformers (4.46+) normalises it: label smoothing, causal-LM label shifting, and the
token count of an accumulation window (``num_items_in_batch``) that makes gradient accumulation equal a larger batch.

A model's loss is a mean over its micro-batch's label tokens; summed over an accumulation window and divided by the
window's size, padded batches of different lengths weigh wrongly. transformers instead counts the window's label
tokens first and has the model (or the label smoother, or ``compute_loss_func``) divide its summed loss by that count.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

if TYPE_CHECKING:
    from ._trainer import Trainer

IGNORE_INDEX = -100


def _is_transformers_model(model: Any) -> bool:
    return type(model).__module__.startswith("transformers.")


def accepts_loss_kwargs(model: nn.Module) -> bool:
    """Whether ``forward`` takes ``num_items_in_batch`` (transformers' rule: the model's ``accepts_loss_kwargs``,
    else a ``**kwargs`` in its forward)."""
    declared = getattr(model, "accepts_loss_kwargs", None)
    if declared is not None:
        return bool(declared)
    try:
        params = inspect.signature(model.forward).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind is p.VAR_KEYWORD or p.name == "num_items_in_batch" for p in params)


def is_causal_lm(model: nn.Module) -> bool:
    """A transformers causal LM (its class in ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``): its label smoothing shifts the
    labels by one, as transformers' ``LabelSmoother(shift_labels=True)``."""
    if not _is_transformers_model(model):
        return False
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return type(model).__name__ in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values()


def loss_shifts_labels(model: nn.Module) -> bool:
    """Whether the model's own loss shifts the labels (transformers' ``ForCausalLMLoss``, not encoder-decoder): then
    position 0 of each row is no target and the token count leaves it out. Read from the loss the model computes
    (``model.loss_function``); transformers' Trainer reads ``model.loss_type`` and so misses causal LMs whose config
    names none, which then fall back to ``ForCausalLMLoss`` (see README, differences)."""
    if not _is_transformers_model(model) or getattr(
        getattr(model, "config", None), "is_encoder_decoder", False
    ):
        return False
    from transformers.loss.loss_utils import ForCausalLMLoss

    try:
        return getattr(model, "loss_function", None) is ForCausalLMLoss
    except (AttributeError, KeyError):
        return False


def count_label_tokens(batches: Sequence[Any], shift: bool) -> torch.Tensor | None:
    """The label tokens (not ``-100``) of an accumulation window's batches, or None when a batch has no
    ``labels`` tensor (nothing to count: the loss stays a per-batch mean)."""
    total: torch.Tensor | None = None
    for batch in batches:
        labels = batch.get("shift_labels") if isinstance(batch, Mapping) else None
        if labels is None:
            labels = batch.get("labels") if isinstance(batch, Mapping) else None
            if not isinstance(labels, torch.Tensor):
                return None
            labels = labels[..., 1:] if shift else labels
        count = labels.ne(IGNORE_INDEX).sum()
        total = count if total is None else total + count
    return total


def smoothed_cross_entropy(
    outputs: Any, labels: torch.Tensor, epsilon: float, shift: bool = False, num_items_in_batch: Any = None
) -> torch.Tensor:
    """Cross-entropy with label smoothing ``epsilon`` of the model's logits (``outputs["logits"]`` or its first
    output) against ``labels``, positions labelled ``-100`` ignored; ``shift``: logits at i predict label i + 1 (a
    causal LM). Summed and divided by ``num_items_in_batch`` when given (the window's label tokens), else the mean
    over this batch's label tokens: transformers' ``LabelSmoother``."""
    if isinstance(outputs, Mapping):
        logits = outputs["logits"] if "logits" in outputs else next(iter(outputs.values()))
    elif isinstance(outputs, list | tuple):
        logits = outputs[0]
    else:
        logits = getattr(outputs, "logits", outputs)
    if shift:
        logits, labels = logits[..., :-1, :], labels[..., 1:]
    flat_logits = logits.reshape(-1, logits.shape[-1]).float()
    flat_labels = labels.reshape(-1).long()
    if num_items_in_batch is None:
        return nn.functional.cross_entropy(
            flat_logits, flat_labels, ignore_index=IGNORE_INDEX, label_smoothing=epsilon
        )
    total = nn.functional.cross_entropy(
        flat_logits, flat_labels, ignore_index=IGNORE_INDEX, label_smoothing=epsilon, reduction="sum"
    )
    if isinstance(num_items_in_batch, torch.Tensor):
        num_items_in_batch = num_items_in_batch.to(total.device)
    return total / num_items_in_batch


def across_devices(trainer: Trainer, loss: torch.Tensor) -> torch.Tensor:
    """A loss divided by every process's tokens (``average_tokens_across_devices``), times the processes: their
    gradients are averaged, so the sum over processes of each one's summed loss over all tokens comes out."""
    if trainer.args.average_tokens_across_devices and (
        trainer.model_accepts_loss_kwargs or trainer.compute_loss_func is not None
    ):
        assert trainer.accelerator is not None
        return loss * trainer.accelerator.num_processes
    return loss


def scaled_for_accumulation(trainer: Trainer, num_items_in_batch: Any) -> bool:
    """Whether ``compute_loss`` already normalised the loss over the accumulation window (transformers' rule, or
    the trainer's ``loss_is_scaled_for_ga`` when set): then it is not divided by the window's size again."""
    if trainer.loss_is_scaled_for_ga is not None:
        return trainer.loss_is_scaled_for_ga
    return bool(trainer.model_accepts_loss_kwargs and num_items_in_batch is not None) or (
        trainer.compute_loss_func is not None
    )
