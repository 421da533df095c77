"""Evaluation and prediction for `Trainer`: the evaluation loop and one prediction step."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

from . import _fsdp
from ._data import batch_size_of, flag_last, send_to_device
from ._loop import track_best
from ._utils import (
    EvalPrediction,
    PredictionOutput,
    nested_concat,
    nested_detach,
    nested_numpify,
    speed_metrics,
)

if TYPE_CHECKING:
    from ._trainer import Trainer

# What a model with a config but no keys_to_ignore_at_inference leaves out of its outputs by default: its cache,
# under the name of either transformers generation.
_CACHE_KEYS = ("past_key_values", "cache")


class EvalLoopOutput:
    __slots__ = ("label_ids", "metrics", "num_samples", "num_steps", "predictions")

    def __init__(
        self, predictions: Any, label_ids: Any, metrics: dict[str, Any], num_samples: int, num_steps: int
    ):
        self.predictions = predictions
        self.label_ids = label_ids
        self.metrics = metrics
        self.num_samples = num_samples
        self.num_steps = num_steps


def _gatherable(value: Any) -> bool:
    """Whether an output can join the predictions: tensors, arrays, numbers and None, alone or nested in lists,
    tuples and dicts. Without ``ignore_keys``, what is not (a cache object, whatever a transformers version names
    it) is left out of the predictions, which could not concatenate it across batches anyway."""
    if value is None or isinstance(value, torch.Tensor | np.ndarray | np.generic | int | float):
        return True
    if isinstance(value, list | tuple):
        return all(_gatherable(v) for v in value)
    if isinstance(value, Mapping):
        return all(_gatherable(v) for v in value.values())
    return False


def named_eval_dataset(trainer: Trainer, dataset: Any) -> Any:
    """``dataset`` itself, or the trainer's eval dataset of that name when it is a string (transformers' rule)."""
    if not isinstance(dataset, str):
        return dataset
    named = trainer.eval_dataset
    if not isinstance(named, Mapping) or dataset not in named:
        names = sorted(named) if isinstance(named, Mapping) else []
        raise ValueError(
            f"eval_dataset={dataset!r} names no evaluation dataset of this trainer (its eval_dataset is "
            f"{'a dict of ' + str(names) if names else 'not a dict'}); pass one of those names or a dataset."
        )
    return named[dataset]


def evaluate(
    trainer: Trainer,
    eval_dataset: Any = None,
    ignore_keys: list[str] | None = None,
    metric_key_prefix: str = "eval",
) -> dict[str, float]:
    """Evaluate on ``eval_dataset`` (default: the trainer's); metrics are prefixed with ``metric_key_prefix``.

    With a dict of datasets, each is evaluated and its metrics prefixed with ``<prefix>_<name>``; a name of the
    trainer's dict (``eval_dataset="validation"``) evaluates that one.
    """
    dataset = named_eval_dataset(trainer, eval_dataset) if eval_dataset is not None else trainer.eval_dataset
    if isinstance(dataset, Mapping):
        metrics: dict[str, float] = {}
        for name, ds in dataset.items():
            metrics.update(
                trainer.evaluate(
                    eval_dataset=ds, ignore_keys=ignore_keys, metric_key_prefix=f"{metric_key_prefix}_{name}"
                )
            )
        return metrics
    trainer._memory_tracker.start("eval")
    dataloader = trainer.get_eval_dataloader(dataset)
    start = time.perf_counter()
    output = trainer.evaluation_loop(
        dataloader,
        description="Evaluation",
        prediction_loss_only=True if trainer.compute_metrics is None else None,
        ignore_keys=ignore_keys,
        metric_key_prefix=metric_key_prefix,
    )
    metrics = output.metrics or {}
    num_samples = output.num_samples
    start += metrics.get(
        f"{metric_key_prefix}_model_preparation_time", 0.0
    )  # as transformers, not in the runtime
    metrics.update(
        speed_metrics(metric_key_prefix, start, num_samples=num_samples, num_steps=output.num_steps)
    )
    trainer.log(metrics)
    trainer.control = trainer.callback_handler.on_evaluate(
        trainer.args, trainer.state, trainer.control, metrics=metrics
    )
    if getattr(trainer, "_eval_in_training", False):
        # After on_evaluate, as in transformers: callbacks (early stopping) see the best before this evaluation.
        track_best(trainer, metrics)
    trainer._memory_tracker.stop_and_update_metrics("eval", metrics)
    return metrics


def predict(
    trainer: Trainer, test_dataset: Any, ignore_keys: list[str] | None = None, metric_key_prefix: str = "test"
) -> PredictionOutput:
    trainer._memory_tracker.start("test")
    dataloader = trainer.get_test_dataloader(test_dataset)
    start = time.perf_counter()
    output = trainer.evaluation_loop(
        dataloader, description="Prediction", ignore_keys=ignore_keys, metric_key_prefix=metric_key_prefix
    )
    metrics = output.metrics or {}
    start += metrics.get(
        f"{metric_key_prefix}_model_preparation_time", 0.0
    )  # as transformers, not in the runtime
    metrics.update(
        speed_metrics(metric_key_prefix, start, num_samples=output.num_samples, num_steps=output.num_steps)
    )
    trainer.control = trainer.callback_handler.on_predict(
        trainer.args, trainer.state, trainer.control, metrics=metrics
    )
    trainer._memory_tracker.stop_and_update_metrics("test", metrics)
    return PredictionOutput(predictions=output.predictions, label_ids=output.label_ids, metrics=metrics)


class Accumulator:
    """One kind of per-batch output (predictions, labels, inputs, losses) collected over an evaluation.

    Batches are concatenated on the device and moved to the host every ``eval_accumulation_steps`` batches
    (``to_host``), or all at the end when that is None; with ``eval_do_concat_batches=False`` each batch is kept
    as its own array and the result is their list.
    """

    def __init__(self, concat: bool, every: int | None) -> None:
        self.concat = concat
        self.every = every
        self.on_device: Any = None
        self.on_host: Any = None
        self.batches: list[Any] = []
        self.count = 0

    def add(self, value: Any) -> None:
        if not self.concat:
            self.batches.append(nested_numpify(value))
            return
        self.on_device = nested_concat(self.on_device, nested_detach(value))
        self.count += 1
        if self.every is not None and self.count % self.every == 0:
            self.to_host()

    def to_host(self) -> None:
        if self.on_device is not None:
            self.on_host = nested_concat(self.on_host, to_cpu(self.on_device))
            self.on_device = None

    def result(self) -> Any:
        if not self.concat:
            return self.batches or None
        self.to_host()
        return nested_numpify(self.on_host) if self.on_host is not None else None


def to_cpu(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.cpu()
    if isinstance(value, list | tuple):
        return type(value)(to_cpu(v) for v in value)
    if isinstance(value, Mapping):
        return type(value)({k: to_cpu(v) for k, v in value.items()})  # type: ignore[call-arg]
    return value


def _full_eval_dtype(trainer: Trainer) -> torch.dtype | None:
    if trainer._in_train:
        return None  # as transformers: evaluations during training keep the training precision
    if trainer.args.bf16_full_eval:
        return torch.bfloat16
    if trainer.args.fp16_full_eval:
        return torch.float16
    return None


def _cast_floats(batch: Any, dtype: torch.dtype) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.to(dtype) if batch.is_floating_point() else batch
    if isinstance(batch, Mapping):
        return type(batch)({k: _cast_floats(v, dtype) for k, v in batch.items()})  # type: ignore[call-arg]
    if isinstance(batch, list | tuple):
        return type(batch)(_cast_floats(v, dtype) for v in batch)
    return batch


def evaluation_loop(
    trainer: Trainer,
    dataloader: DataLoader,
    description: str,
    prediction_loss_only: bool | None = None,
    ignore_keys: list[str] | None = None,
    metric_key_prefix: str = "eval",
) -> EvalLoopOutput:
    """Run the model over ``dataloader`` and compute metrics; predictions are gathered across processes."""
    args = trainer.args
    accelerator = trainer.accelerator
    assert accelerator is not None
    prediction_loss_only = (
        prediction_loss_only if prediction_loss_only is not None else args.prediction_loss_only
    )
    full_eval_dtype = _full_eval_dtype(trainer)
    model = _model_to_evaluate(trainer, full_eval_dtype)
    trainer._past = None
    trainer.callback_handler.eval_dataloader = dataloader
    if accelerator.num_processes > 1 and args.eval_use_gather_object:
        raise ValueError(
            "eval_use_gather_object=True is not supported when evaluating on several processes: predictions are "
            "gathered as padded tensors; pass False (outputs that are not tensors are left out of predictions)."
        )
    collected = _Collected(trainer, prediction_loss_only, description)
    # accelerate's loaders place batches on the device; a plain one (ours in a single process) is placed here.
    move_batches = accelerator.device.type != "cpu" and getattr(dataloader, "gradient_state", None) is None
    for inputs, is_last in flag_last(dataloader):
        collected.num_steps += 1
        if move_batches:
            inputs = send_to_device(inputs, accelerator.device)
        if full_eval_dtype is not None:
            inputs = _cast_floats(inputs, full_eval_dtype)
        loss, logits, labels = trainer.prediction_step(
            model, inputs, prediction_loss_only, ignore_keys=ignore_keys
        )
        collected.add(inputs, loss, logits, labels, is_last)
        trainer.control = trainer.callback_handler.on_prediction_step(args, trainer.state, trainer.control)
    # The loader stays the handler's eval_dataloader (until the next evaluation or release_memory): on_evaluate,
    # on_predict and the events after them get it, as in transformers.
    return collected.output(metric_key_prefix)


def _model_to_evaluate(trainer: Trainer, full_eval_dtype: torch.dtype | None) -> nn.Module:
    """The model to evaluate, in eval mode: cast for fp16/bf16_full_eval, prepared by accelerate outside train()."""
    accelerator = trainer.accelerator
    assert accelerator is not None
    if full_eval_dtype is not None:
        # fp16_full_eval/bf16_full_eval: the model itself is cast (as transformers does outside training).
        trainer.model = trainer.model.to(dtype=full_eval_dtype)
        trainer.model_wrapped = trainer.model
    model = trainer.model_wrapped if trainer.model_wrapped is not None else trainer.model
    # Under FSDP the model is sharded by train() (FSDP2 shards it in place), or evaluated whole before training.
    # During train() the model is the one training prepared (preparing it again would only return it).
    if (
        not trainer._in_train
        and model is trainer.model
        and next(iter(trainer.model.parameters()), None) is not None
        and not _fsdp.active(accelerator)
    ):
        first = not accelerator._models  # as transformers: the accelerator has not prepared a model yet
        started = time.perf_counter()
        model = accelerator.prepare_model(trainer.model, evaluation_mode=True)
        if first:
            trainer.model_preparation_time = round(time.perf_counter() - started, 4)
    model.eval()
    to_eval = getattr(trainer.optimizer, "eval", None)
    if callable(to_eval):
        to_eval()  # schedule-free: evaluate its averaged weights, as transformers
    return model


class _Collected:
    """What one evaluation pass gathers batch by batch (across processes): losses, the outputs to return or to
    compute metrics on, the metrics of ``batch_eval_metrics``, and the sample and step counts."""

    def __init__(self, trainer: Trainer, prediction_loss_only: bool, description: str) -> None:
        args = trainer.args
        assert trainer.accelerator is not None
        self.trainer, self.accelerator = trainer, trainer.accelerator
        self.distributed = self.accelerator.num_processes > 1
        self.losses: list[torch.Tensor] = []
        concat, every = args.eval_do_concat_batches, args.eval_accumulation_steps
        self.preds, self.labels = Accumulator(concat, every), Accumulator(concat, every)
        self.inputs, self.input_losses = Accumulator(concat, every), Accumulator(concat, every)
        self.keep_inputs = "inputs" in args.include_for_metrics
        self.keep_losses = "loss" in args.include_for_metrics
        self.main_input = getattr(trainer.model, "main_input_name", "input_ids") if self.keep_inputs else None
        self.metrics: dict[str, Any] | None = None
        self.num_samples = 0
        self.num_steps = 0
        self.batch_metrics = (
            args.batch_eval_metrics and trainer.compute_metrics is not None and not prediction_loss_only
        )
        # predict() returns predictions and labels also when metrics are computed batch by batch.
        self.keep_outputs = not prediction_loss_only and (
            not self.batch_metrics or description == "Prediction"
        )

    def add(self, inputs: Any, loss: torch.Tensor | None, logits: Any, labels: Any, is_last: bool) -> None:
        trainer, accelerator, distributed = self.trainer, self.accelerator, self.distributed
        batch_size = batch_size_of(inputs)
        batch_loss = None
        if loss is not None:
            batch_loss = loss.reshape(1).repeat(batch_size)
            batch_loss = accelerator.gather_for_metrics(batch_loss) if distributed else batch_loss
            self.losses.append(batch_loss)
        batch_inputs = None
        if self.keep_inputs:
            batch_inputs = inputs.get(self.main_input) if isinstance(inputs, Mapping) else inputs
            if distributed and batch_inputs is not None:
                batch_inputs = self._gather_padded(batch_inputs)
        if logits is not None and trainer.preprocess_logits_for_metrics is not None:
            logits = trainer.preprocess_logits_for_metrics(logits, labels)
        if distributed:
            if logits is not None:
                logits = self._gather_padded(logits)
            if labels is not None:
                labels = self._gather_padded(labels)
        self.num_samples += (
            batch_size_of(labels)
            if labels is not None
            else (batch_size_of(logits) if logits is not None else batch_size)
        )
        if self.batch_metrics:
            assert trainer.compute_metrics is not None  # batch_metrics requires it
            losses = batch_loss if self.keep_losses else None
            prediction = EvalPrediction(
                predictions=logits, label_ids=labels, inputs=batch_inputs, losses=losses
            )
            self.metrics = trainer.compute_metrics(prediction, compute_result=is_last)
        if self.keep_outputs:
            self._keep(logits, labels, batch_inputs, batch_loss)

    def _gather_padded(self, value: Any) -> Any:
        return self.accelerator.gather_for_metrics(
            self.accelerator.pad_across_processes(value, dim=1, pad_index=-100)
        )

    def _keep(self, logits: Any, labels: Any, batch_inputs: Any, batch_loss: torch.Tensor | None) -> None:
        if logits is not None:
            self.preds.add(logits)
        if labels is not None:
            self.labels.add(labels)
        if batch_inputs is not None:
            self.inputs.add(batch_inputs)
        if self.keep_losses and batch_loss is not None:
            self.input_losses.add(batch_loss)

    def output(self, metric_key_prefix: str) -> EvalLoopOutput:
        """The predictions, labels and metrics (named ``<metric_key_prefix>_<name>``) of the pass."""
        trainer = self.trainer
        predictions = self.preds.result()
        label_ids = self.labels.result()
        metrics = self.metrics
        if (
            not self.batch_metrics
            and trainer.compute_metrics is not None
            and predictions is not None
            and label_ids is not None
        ):
            metrics = trainer.compute_metrics(
                EvalPrediction(
                    predictions=predictions,
                    label_ids=label_ids,
                    inputs=self.inputs.result() if self.keep_inputs else None,
                    losses=self.input_losses.result() if self.keep_losses else None,
                )
            )
        elif metrics is None:
            metrics = {}
        return EvalLoopOutput(
            predictions,
            label_ids,
            _named_metrics(trainer, metrics, self.losses, metric_key_prefix),
            self.num_samples,
            self.num_steps,
        )


def _named_metrics(
    trainer: Trainer, metrics: Any, losses: list[torch.Tensor], metric_key_prefix: str
) -> dict[str, Any]:
    if not isinstance(metrics, Mapping):
        raise TypeError(
            f"compute_metrics must return a dict of metric name -> value, got {type(metrics).__name__} "
            f"{metrics!r:.200}; return e.g. {{'accuracy': 0.9}}."
        )
    metrics = {k: _plain_scalar(v) for k, v in metrics.items()}
    if losses:
        metrics[f"{metric_key_prefix}_loss"] = float(torch.cat(losses).float().mean())
    if hasattr(trainer, "model_preparation_time"):
        metrics[f"{metric_key_prefix}_model_preparation_time"] = trainer.model_preparation_time
    return {
        (k if k.startswith(f"{metric_key_prefix}_") else f"{metric_key_prefix}_{k}"): v
        for k, v in metrics.items()
    }


def prediction_step(
    trainer: Trainer,
    model: nn.Module,
    inputs: Any,
    prediction_loss_only: bool,
    ignore_keys: list[str] | None = None,
) -> tuple[torch.Tensor | None, Any, Any]:
    """One evaluation batch: (loss or None, logits or None, labels or None)."""
    inputs = trainer._prepare_inputs(inputs)
    label_names = trainer.label_names
    if isinstance(inputs, Mapping):
        # No label names: no labels (all() of nothing would say there are).
        has_labels = bool(label_names) and all(inputs.get(k) is not None for k in label_names)
        labels = None
        if has_labels:
            found = tuple(inputs[k] for k in label_names)
            labels = found[0] if len(found) == 1 else found
    else:
        has_labels, labels = False, None
    by_default = ignore_keys is None
    if by_default:
        # transformers' rule: a model with a config drops what it declares (e.g. a language model's cache, which
        # cannot be concatenated across batches), by default its cache: named past_key_values up to transformers
        # 5.23 and cache from 5.24, which also stopped declaring it in the configs.
        config = getattr(trainer.model, "config", None)
        ignore_keys = (
            [] if config is None else getattr(config, "keys_to_ignore_at_inference", list(_CACHE_KEYS))
        )
    ignore = set(ignore_keys or ())
    with torch.no_grad():
        if has_labels:
            loss, outputs = trainer.compute_loss(model, inputs, return_outputs=True)
            loss = (loss if loss.dim() == 0 else loss.mean()).detach()  # a 0-dim loss is its own mean
        else:
            loss = None
            outputs = model(**inputs) if isinstance(inputs, Mapping) else model(inputs)
    if prediction_loss_only:
        return loss, None, None
    if isinstance(outputs, Mapping):
        # A loss the model returned without labels is a prediction like any other output (as in transformers).
        logits_list = [
            v
            for k, v in outputs.items()
            if (k != "loss" or not has_labels) and k not in ignore and (not by_default or _gatherable(v))
        ]
    elif isinstance(outputs, list | tuple):
        logits_list = list(outputs[1:] if has_labels else outputs)
    else:
        logits_list = [outputs]
    logits = nested_detach(tuple(logits_list))
    if len(logits) == 1:
        logits = logits[0]
    elif len(logits) == 0:
        logits = None
    return loss, logits, nested_detach(labels)


def _plain_scalar(value: Any) -> Any:
    """A one-element array or tensor (or a numpy scalar) as a Python number; anything else as it is (a confusion
    matrix stays an array, as transformers' denumpify_detensorize keeps it)."""
    if isinstance(value, torch.Tensor):
        return value.item() if value.numel() == 1 else value
    if isinstance(value, np.ndarray):
        return value.item() if value.size == 1 else value
    return value.item() if isinstance(value, np.generic) else value
