"""`Seq2SeqTrainer` and `Seq2SeqTrainingArguments`: evaluation and prediction that generate, as transformers has them.

With ``predict_with_generate=True``, `Seq2SeqTrainer.evaluate` / `predict` call the model's ``generate`` on every
batch (``generation_max_length``, ``generation_num_beams`` and ``generation_config`` from the arguments, overridden
by keyword arguments such as ``max_length=``/``num_beams=``), pad the generated sequences to one length within the
batch and, through the shared evaluation loop, across batches (``-100``) and processes, and hand ``compute_metrics``
token ids (replace ``-100`` by the pad token before decoding, as with transformers). The loss is still the model's
loss on the labels. ``sortish_sampler=True`` trains on batches of similar lengths: the examples are shuffled, cut
into chunks of 50 batches, each chunk sorted by length, and the batches of a chunk shuffled again (seeded with
``data_seed`` and the epoch, so a resume sees the same order). The generation settings are ordinary arguments, so a
search can vary them (``hp_space={"generation_num_beams": spaces.Categorical([1, 2, 4])}``).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator, Mapping, Sized
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset, Sampler

from ._trainer import Trainer
from ._training_args import TrainingArguments
from ._utils import PredictionOutput
from ._validation import _fail

__all__ = ["Seq2SeqTrainer", "Seq2SeqTrainingArguments", "SortishSampler"]

_GENERATION_IGNORED = ("labels", "decoder_input_ids", "decoder_attention_mask")


@dataclasses.dataclass
class Seq2SeqTrainingArguments(TrainingArguments):
    """`TrainingArguments` plus what sequence-to-sequence evaluation needs (transformers' fields and meanings).

    Args:
        sortish_sampler: train on batches of examples of similar lengths (see the module docstring).
        predict_with_generate: evaluate and predict with ``generate`` (token ids) instead of the forward's logits.
        generation_max_length: ``max_length`` of ``generate`` (default: the model's generation config).
        generation_num_beams: ``num_beams`` of ``generate`` (default: the model's generation config).
        generation_config: a ``transformers.GenerationConfig``, or a local folder / file it is read from.
    """

    sortish_sampler: bool = False
    predict_with_generate: bool = False
    generation_max_length: int | None = None
    generation_num_beams: int | None = None
    generation_config: Any = None

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("sortish_sampler", "predict_with_generate"):
            if not isinstance(getattr(self, name), bool):
                _fail(name, getattr(self, name), "True or False", f"pass {name}=True")
        for name in ("generation_max_length", "generation_num_beams"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                _fail(name, value, "a positive integer or None", f"pass e.g. {name}=4")
        config = self.generation_config
        if config is not None and not isinstance(config, str) and type(config).__name__ != "GenerationConfig":
            _fail(
                "generation_config",
                config,
                "a transformers.GenerationConfig or a path to one",
                "pass GenerationConfig(...) or a local folder holding generation_config.json",
            )

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        # A GenerationConfig as its dict, as transformers writes it (the base class would write str(config)).
        if self.generation_config is not None and not isinstance(self.generation_config, str):
            out["generation_config"] = self.generation_config.to_dict()
        return out


class SortishSampler(Sampler[int]):
    """Indices in batches of similar lengths, shuffled by chunks (seeded: ``seed`` + the epoch set by `set_epoch`)."""

    def __init__(self, lengths: list[int], batch_size: int, seed: int = 0, chunk_batches: int = 50) -> None:
        self.lengths = lengths
        self.batch_size = batch_size
        self.seed = seed
        self.chunk = max(batch_size * chunk_batches, batch_size)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.lengths)

    def __iter__(self) -> Iterator[int]:
        rng = random.Random(self.seed + self.epoch)
        order = list(range(len(self.lengths)))
        rng.shuffle(order)
        batches: list[list[int]] = []
        for start in range(0, len(order), self.chunk):
            chunk = sorted(order[start : start + self.chunk], key=lambda i: self.lengths[i], reverse=True)
            batches.extend(chunk[i : i + self.batch_size] for i in range(0, len(chunk), self.batch_size))
        rng.shuffle(batches)
        return iter([i for batch in batches for i in batch])


def _length(example: Any) -> int:
    value = example.get("input_ids") if isinstance(example, Mapping) else example
    if value is None and isinstance(example, Mapping):
        value = next(iter(example.values()), None)
    try:
        return len(value)  # type: ignore[arg-type]
    except TypeError:
        return 1


class Seq2SeqTrainer(Trainer):
    """A `Trainer` whose evaluation and prediction generate when ``args.predict_with_generate`` is set."""

    _gen_kwargs: dict[str, Any] = {}

    # ------------------------------------------------------------------ data
    def get_train_dataloader(self) -> DataLoader:
        args = self.args
        dataset = self.train_dataset
        if (
            not getattr(args, "sortish_sampler", False)
            or dataset is None
            or isinstance(dataset, IterableDataset)
        ):
            return super().get_train_dataloader()
        if not isinstance(dataset, Sized):
            raise ValueError(
                "sortish_sampler=True needs a train_dataset with a length; use sortish_sampler=False."
            )
        from ._data import data_seed, dataloader_kwargs

        lengths = [_length(dataset[i]) for i in range(len(dataset))]  # type: ignore[index]
        kwargs = dataloader_kwargs(self)
        kwargs["batch_size"] = args.per_device_train_batch_size
        kwargs["drop_last"] = args.dataloader_drop_last
        kwargs["sampler"] = SortishSampler(lengths, args.per_device_train_batch_size, seed=data_seed(self))
        assert self.accelerator is not None
        loader = DataLoader(dataset, **kwargs)
        return loader if self.accelerator.num_processes == 1 else self.accelerator.prepare(loader)

    # ------------------------------------------------------------------ generation
    def _generation_kwargs(self, overrides: Mapping[str, Any]) -> dict[str, Any]:
        args = self.args
        kwargs: dict[str, Any] = {}
        config = getattr(args, "generation_config", None)
        if config is not None:
            if isinstance(config, str):
                from transformers import GenerationConfig

                config = GenerationConfig.from_pretrained(config)
            kwargs["generation_config"] = config
        for option, name in (("generation_max_length", "max_length"), ("generation_num_beams", "num_beams")):
            if getattr(args, option, None) is not None:
                kwargs[name] = getattr(args, option)
        kwargs.update(overrides)
        return kwargs

    def evaluate(
        self,
        eval_dataset: Any = None,
        ignore_keys: list[str] | None = None,
        metric_key_prefix: str = "eval",
        **gen_kwargs: Any,
    ) -> dict[str, float]:
        """`Trainer.evaluate`, generating with ``gen_kwargs`` (e.g. ``max_length``, ``num_beams``) when asked."""
        self._gen_kwargs = self._generation_kwargs(gen_kwargs)
        return super().evaluate(eval_dataset, ignore_keys, metric_key_prefix)

    def predict(
        self,
        test_dataset: Any,
        ignore_keys: list[str] | None = None,
        metric_key_prefix: str = "test",
        **gen_kwargs: Any,
    ) -> PredictionOutput:
        """`Trainer.predict`, generating with ``gen_kwargs`` when ``predict_with_generate`` is set."""
        self._gen_kwargs = self._generation_kwargs(gen_kwargs)
        return super().predict(test_dataset, ignore_keys, metric_key_prefix)

    def prediction_step(
        self,
        model: nn.Module,
        inputs: Any,
        prediction_loss_only: bool,
        ignore_keys: list[str] | None = None,
        **gen_kwargs: Any,
    ) -> tuple[Any, Any, Any]:
        """(loss, generated token ids, labels) with ``predict_with_generate``; the plain step otherwise."""
        if not getattr(self.args, "predict_with_generate", False) or prediction_loss_only:
            return super().prediction_step(model, inputs, prediction_loss_only, ignore_keys)
        inputs = self._prepare_inputs(inputs)
        kwargs = {**(self._gen_kwargs or self._generation_kwargs({})), **gen_kwargs}
        generation_inputs = {k: v for k, v in inputs.items() if k not in _GENERATION_IGNORED}
        assert self.accelerator is not None
        generator: Any = self.accelerator.unwrap_model(model)
        with torch.no_grad():
            generated = generator.generate(**generation_inputs, **kwargs)
        labels = inputs.get("labels")
        loss = None
        if labels is not None:
            with torch.no_grad():
                loss = self.compute_loss(model, inputs).mean().detach()
        max_length = kwargs.get("max_length")
        if max_length is None:
            config = kwargs.get("generation_config") or getattr(generator, "generation_config", None)
            max_length = getattr(config, "max_length", None)
        pad = _pad_id(generator)
        if max_length is not None and generated.shape[-1] < max_length:
            generated = _pad_to(generated, max_length, pad)
        if labels is not None and max_length is not None and labels.shape[-1] < max_length:
            labels = _pad_to(labels, max_length, -100)
        return loss, generated, labels


def _pad_id(model: Any) -> int:
    for source in (getattr(model, "generation_config", None), getattr(model, "config", None)):
        for name in ("pad_token_id", "eos_token_id"):
            value = getattr(source, name, None)
            if isinstance(value, int):
                return value
    return 0


def _pad_to(tensor: torch.Tensor, length: int, value: int) -> torch.Tensor:
    padded = tensor.new_full((tensor.shape[0], length), value)
    padded[:, : tensor.shape[-1]] = tensor
    return padded
