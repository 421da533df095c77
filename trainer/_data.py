"""Data loading for `Trainer`: column filtering, the train and evaluation loaders, and batch helpers.

A single process with nothing for accelerate to do gets plain PyTorch loaders (the same sampler accelerate would
install), since accelerate's wrappers would only add a per-batch cost there; everything else goes through
``accelerator.prepare``.
"""

from __future__ import annotations

import inspect
import logging
import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sized
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset, RandomSampler, Sampler, SequentialSampler

if TYPE_CHECKING:
    from ._trainer import Trainer

logger = logging.getLogger(__name__)

_LABEL_ALIASES = ("label", "label_ids")
_QUESTION_ANSWERING_LABELS = ("start_positions", "end_positions")


class _RemoveColumnsCollator:
    """Drops example keys that the model's ``forward`` does not accept, then collates."""

    def __init__(self, collator: Callable[[list[Any]], Any], keep: frozenset[str]) -> None:
        self.collator = collator
        self.keep = keep
        self._warned: set[str] = set()

    def __call__(self, features: list[Any]) -> Any:
        if features and (type(features[0]) is dict or isinstance(features[0], Mapping)):
            keep = self.keep
            first = features[0]
            if not keep.issuperset(first):
                dropped = {k for k in first if k not in keep} - self._warned
                if dropped:
                    logger.info(
                        "Dropping example keys the model's forward does not accept: %s", sorted(dropped)
                    )
                    self._warned |= dropped
                features = [{k: v for k, v in f.items() if k in keep} for f in features]
        return self.collator(features)


class PaddingCollator:
    """The collator a `Trainer` given a ``processing_class`` that can ``pad`` (a tokenizer) uses by default.

    Pads the batch to its longest example with ``processing_class.pad(..., return_tensors="pt")`` and names the
    label ``labels`` (from ``label`` or ``label_ids``), like transformers' ``DataCollatorWithPadding``.
    """

    def __init__(self, processing_class: Any) -> None:
        self.processing_class = processing_class

    def __call__(self, features: list[Any]) -> Any:
        batch = dict(self.processing_class.pad(list(features), padding=True, return_tensors="pt"))
        for alias in _LABEL_ALIASES:
            if alias in batch:
                batch["labels"] = batch.pop(alias)
        return batch


def is_processor(obj: Any) -> bool:
    """Whether ``obj`` is a tokenizer, processor, feature extractor or image processor (what transformers saves with
    ``save_pretrained`` and loads with ``from_pretrained``), not a function or class that builds a model."""
    if obj is None or isinstance(obj, type | nn.Module):
        return False
    return callable(getattr(obj, "save_pretrained", None)) and callable(getattr(obj, "from_pretrained", None))


def processor_given_as_model_init(
    model_init: Any, processing_class: Any, later_given: list[str]
) -> tuple[Any, Any]:
    """The seed's signature had ``tokenizer`` 6th (``Trainer(model, args, collator, train, eval, tokenizer)``), where
    this trainer takes ``model_init``: a processor found there is taken as ``processing_class``, as transformers did,
    when nothing after it was given (else the later positions are shifted too, and which were positional is unknown).
    Returns ``(model_init, processing_class)``."""
    if not is_processor(model_init):
        return model_init, processing_class
    kind = type(model_init).__name__
    if processing_class is not None or later_given:
        also = (
            "processing_class (or tokenizer) was given too"
            if processing_class is not None
            else (
                f"{', '.join(later_given)} {'was' if len(later_given) == 1 else 'were'} given as well, which would then "
                "be shifted by one position"
            )
        )
        raise ValueError(
            f"model_init={kind} is a tokenizer/processor, not a function building the model: transformers 4's "
            f"signature had tokenizer as the 6th positional argument, where this Trainer takes model_init; and "
            f"{also}. Pass it as processing_class={kind}(...) and the arguments after it by keyword."
        )
    warnings.warn(
        f"The 6th positional argument of Trainer is model_init here, and got a {kind} (transformers 4's tokenizer "
        "position): it is used as processing_class; pass processing_class=... by keyword.",
        FutureWarning,
        stacklevel=3,
    )
    return None, model_init


def label_names(trainer: Trainer) -> list[str]:
    """``args.label_names``, else transformers' rule: each parameter of ``forward`` whose name holds "label" (and, for
    a class named ``...QuestionAnswering...``, ``start_positions`` and ``end_positions``), in ``forward``'s order.

    A ``forward`` that names no parameter but takes ``**kwargs`` could take any key; its labels are ``["labels"]``.
    """
    if trainer.args.label_names is not None:
        return list(trainer.args.label_names)
    signature = _forward_signature(trainer)
    if signature is None:
        return ["labels"]
    question_answering = "QuestionAnswering" in type(trainer.model).__name__
    return [
        name for name in signature[1]
        if "label" in name or (question_answering and name in _QUESTION_ANSWERING_LABELS)
    ]  # fmt: skip


def forward_parameters(trainer: Trainer) -> frozenset[str] | None:
    """Names ``forward`` declares, or None when it declares none but takes ``**kwargs`` (anything goes).

    A ``forward(input_ids, ..., labels, **kwargs)`` (every transformers model) counts as its named
    parameters only, as in the Hugging Face Trainer: its ``**kwargs`` are for model internals, not for
    dataset columns such as an example id or raw text.
    """
    signature = _forward_signature(trainer)
    return None if signature is None else signature[0]


def _forward_signature(trainer: Trainer) -> tuple[frozenset[str], tuple[str, ...]] | None:
    """The names ``forward`` declares, as a set and in order; None as in `forward_parameters`."""
    forward = trainer.model.forward
    # Read once per forward function (every evaluation asks, and inspect.signature is slow); a forward that is
    # not a method of the model's class (a wrapper, a per-instance function) is read each time.
    function = getattr(forward, "__func__", None)
    if function is not None and function in _FORWARD_PARAMETERS:
        return _FORWARD_PARAMETERS[function]
    try:
        params = inspect.signature(forward).parameters
    except (TypeError, ValueError):
        return None
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ordered = tuple(name for name, p in params.items() if p.kind not in variadic)
    named: tuple[frozenset[str], tuple[str, ...]] | None = (frozenset(ordered), ordered)
    if not ordered and any(p.kind is p.VAR_KEYWORD for p in params.values()):
        named = None
    if function is not None:
        _FORWARD_PARAMETERS[function] = named
    return named


_FORWARD_PARAMETERS: dict[Any, tuple[frozenset[str], tuple[str, ...]] | None] = {}


def get_collator(trainer: Trainer) -> Callable[[list[Any]], Any]:
    if not trainer.args.remove_unused_columns:
        return trainer.data_collator
    params = forward_parameters(trainer)
    if params is None:
        return trainer.data_collator
    keep = frozenset(params | set(trainer.label_names) | set(_LABEL_ALIASES))
    return _RemoveColumnsCollator(trainer.data_collator, keep)


def dataloader_kwargs(trainer: Trainer) -> dict[str, Any]:
    args = trainer.args
    kwargs: dict[str, Any] = {
        "collate_fn": get_collator(trainer),
        "num_workers": args.dataloader_num_workers,
        "pin_memory": args.dataloader_pin_memory and torch.cuda.is_available() and not args.use_cpu,
    }
    if args.dataloader_num_workers > 0:
        kwargs["persistent_workers"] = args.dataloader_persistent_workers
        kwargs["in_order"] = args.dataloader_in_order
        if args.dataloader_multiprocessing_context is not None:
            kwargs["multiprocessing_context"] = args.dataloader_multiprocessing_context
        if args.dataloader_prefetch_factor is not None:
            kwargs["prefetch_factor"] = args.dataloader_prefetch_factor
    return kwargs


def train_dataloader(trainer: Trainer) -> DataLoader:
    if trainer.train_dataset is None:
        raise ValueError("Trainer.train needs a train_dataset; pass train_dataset=... to Trainer.")
    dataset = trainer.train_dataset
    if trainer.args.remove_unused_columns:
        dataset = trainer._remove_unused_columns(dataset, description="training")
    kwargs = dataloader_kwargs(trainer)
    kwargs["batch_size"] = trainer.args.per_device_train_batch_size
    assert trainer.accelerator is not None
    if not isinstance(dataset, IterableDataset):
        kwargs["drop_last"] = trainer.args.dataloader_drop_last
        kwargs["sampler"] = trainer._get_train_sampler(dataset)
        if accelerate_only_forwards(trainer.accelerator):
            # One process and nothing for accelerate to shard, place or scale: a plain loader (see train_sampler).
            # Accelerate's wrapper costs a look-ahead, a device copy and its gradient-state bookkeeping per batch;
            # the loop does the little of that it needs itself (see _inner_training_loop).
            return _one_process_loader(dataset, kwargs)
    return trainer.accelerator.prepare(DataLoader(dataset, **kwargs))


def train_sampler(trainer: Trainer, dataset: Any) -> Sampler[int] | None:
    """The default of transformers' ``_get_train_sampler``: None for a dataset without a length, else by
    ``train_sampling_strategy``. In one process with nothing for accelerate to do, "random" is the order of the
    sampler accelerate's prepare would install (seeded with data_seed + epoch, see set_loader_epoch), so the data
    order is the same batch for batch and a resume still finds its place."""
    if dataset is None or isinstance(dataset, IterableDataset):
        return None
    args = trainer.args
    if args.group_by_length:
        return LengthGroupedSampler(
            example_lengths(trainer, dataset),
            args.per_device_train_batch_size * args.gradient_accumulation_steps,
            seed=data_seed(trainer),
        )
    if args.train_sampling_strategy == "sequential":
        return SequentialSampler(cast(Sized, dataset))
    if trainer.accelerator is not None and accelerate_only_forwards(trainer.accelerator):
        return SeededRandomSampler(cast(Sized, dataset), data_seed(trainer))
    return RandomSampler(cast(Sized, dataset))  # accelerate's prepare replaces it with its seeded one


def _one_process_loader(dataset: Any, kwargs: dict[str, Any]) -> DataLoader:
    """A plain loader where accelerate would only forward; like accelerate's, it says its ``total_batch_size``
    (the batch of all processes: here the one process's)."""
    loader = DataLoader(dataset, **kwargs)
    loader.total_batch_size = kwargs["batch_size"]  # type: ignore[attr-defined]
    return loader


class SeededRandomSampler(RandomSampler):
    """The order of accelerate's ``SeedableRandomSampler``, the one its prepared loaders use: each epoch a permutation
    drawn by a generator seeded with ``seed + epoch``, and the epoch moves on when an iteration runs to its end.
    A `RandomSampler`, as accelerate's is.

    accelerate's sampler hands out each index through two generator frames (its ``__iter__`` delegating to
    ``RandomSampler.__iter__``), and a loader pulls indices one by one; this one uses a single frame.
    """

    def __init__(self, data_source: Sized, seed: int) -> None:
        super().__init__(data_source)
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        device = torch.get_default_device() if hasattr(torch, "get_default_device") else "cpu"
        generator = torch.Generator(device=device).manual_seed(self.seed + self.epoch)
        yield from torch.randperm(len(self.data_source), generator=generator).tolist()
        self.epoch += 1


class LengthGroupedSampler(torch.utils.data.Sampler[int]):
    """``group_by_length``: a random order in which neighbouring examples have similar lengths (less padding).

    Each epoch shuffles the indices (seeded with ``seed + epoch``, so a resume sees the same order), cuts them into
    mega-batches of 50 batches, sorts each mega-batch by length, longest first, and puts the mega-batch holding
    the longest example first, so that running out of memory shows at the first step.
    """

    def __init__(self, lengths: list[int], batch_size: int, seed: int, mega_batches: int = 50) -> None:
        self.lengths = lengths
        self.size = batch_size * mega_batches
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.lengths)

    def __iter__(self):
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.randperm(len(self.lengths), generator=generator).tolist()
        groups = [
            sorted(order[i : i + self.size], key=lambda j: self.lengths[j], reverse=True)
            for i in range(0, len(order), self.size)
        ]
        if groups:
            longest = max(range(len(groups)), key=lambda g: self.lengths[groups[g][0]])
            groups[0], groups[longest] = groups[longest], groups[0]
        return iter([i for group in groups for i in group])


def example_lengths(trainer: Trainer, dataset: Any) -> list[int]:
    """Each example's length: the dataset's ``length_column_name`` column, else the size of its main input."""
    column = trainer.args.length_column_name
    if column in (getattr(dataset, "column_names", None) or ()):
        return [int(n) for n in dataset[column]]
    name = getattr(trainer.model, "main_input_name", "input_ids")
    lengths = []
    for i in range(len(dataset)):
        example = dataset[i]
        value = example.get(name) if isinstance(example, Mapping) else None
        if value is None:
            raise ValueError(
                f"group_by_length=True needs each example's length: a {column!r} column (length_column_name) or "
                f"the model's main input {name!r}, and example {i} has neither; add one or pass group_by_length=False."
            )
        lengths.append(len(value))
    return lengths


def data_seed(trainer: Trainer) -> int:
    return trainer.args.data_seed if trainer.args.data_seed is not None else trainer.args.seed


def eval_dataloader_for(trainer: Trainer, dataset: Any) -> DataLoader:
    assert trainer.accelerator is not None
    plain = not isinstance(dataset, IterableDataset) and accelerate_only_forwards(trainer.accelerator)
    # Within a train() the evaluations of one dataset share a loader (see _inner_training_loop): building one
    # means a collator with an inspect.signature of forward, and accelerate's prepare, at every evaluation.
    cache = getattr(trainer, "_eval_loader_cache", None) if plain else None
    # With persistent workers a loader is built once per dataset and kept (as transformers keeps it): a new loader
    # per evaluation would start a new set of worker processes each time.
    persistent = trainer.args.dataloader_persistent_workers and trainer.args.dataloader_num_workers > 0
    if persistent:
        if trainer._persistent_eval_loaders is None:
            trainer._persistent_eval_loaders = {}
        cache = trainer._persistent_eval_loaders
    if cache is not None:
        cached = cache.get(id(dataset))
        if cached is not None and cached[0] is dataset:
            return cached[1]
    kwargs = dataloader_kwargs(trainer)
    kwargs["batch_size"] = trainer.args.per_device_eval_batch_size
    if not isinstance(dataset, IterableDataset):
        kwargs["sampler"] = SequentialSampler(dataset)
    if plain:
        # Sequential, one process: accelerate's wrapper would only place batches on the device, which
        # evaluation_loop does for a plain loader.
        loader = _one_process_loader(dataset, kwargs)
    else:
        loader = trainer.accelerator.prepare(DataLoader(dataset, **kwargs))
    if cache is not None:
        cache[id(dataset)] = (dataset, loader)  # the dataset is kept too: its id is never reused meanwhile
    return loader


def accelerate_only_forwards(accelerator: Any) -> bool:
    """True when accelerate's data loader, accumulate() and backward() would add nothing but their cost.

    That is one process (``DistributedType.NO``: not XLA, DeepSpeed, Megatron or several processes), not FSDP
    and no gradient scaler (fp16 on a GPU): accelerate then neither shards, dispatches nor scales anything, its
    loaders only place batches on the device and its backward only divides the loss by the accumulation steps.
    """
    from accelerate.utils import DistributedType

    return (
        accelerator.num_processes == 1
        and accelerator.distributed_type == DistributedType.NO
        and getattr(accelerator, "scaler", None) is None
        and os.environ.get("ACCELERATE_USE_FSDP", "false").lower() != "true"
    )


def set_loader_epoch(dataloader: Any, epoch: int, seed: int | None = None) -> None:
    """Seed the epoch's data order: accelerate's loaders have set_epoch; a plain one has its sampler set the same way
    (``SeedableRandomSampler`` draws its permutation from data_seed + epoch), and its dataset when it has set_epoch.
    With ``seed`` (the data seed), a stream's own generator is reseeded too (see `_reseed_stream`)."""
    if hasattr(dataloader, "set_epoch"):
        dataloader.set_epoch(epoch)
    else:
        sampler: Any = getattr(getattr(dataloader, "batch_sampler", None), "sampler", None)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)
        dataset: Any = getattr(dataloader, "dataset", None)
        if hasattr(dataset, "set_epoch"):
            dataset.set_epoch(epoch)
    if seed is not None:
        _reseed_stream(dataloader, seed + epoch)


def _reseed_stream(dataloader: Any, seed: int) -> None:
    """An ``IterableDataset`` with no ``set_epoch`` but a ``torch.Generator`` in ``generator`` draws each epoch from
    ``manual_seed(data_seed + epoch)``, as transformers' ``IterableDatasetShard`` seeds it: an epoch's stream is then
    the same whatever came before it (a resumed run sees the data an uninterrupted one did)."""
    dataset: Any = getattr(dataloader, "dataset", None)
    for _ in range(3):  # the user's dataset, under accelerate's shard wrapper if there is one
        inner = getattr(dataset, "dataset", None)
        if not isinstance(inner, IterableDataset):
            break
        dataset = inner
    generator = getattr(dataset, "generator", None)
    if (
        isinstance(dataset, IterableDataset)
        and not hasattr(dataset, "set_epoch")
        and isinstance(generator, torch.Generator)
    ):
        generator.manual_seed(seed)


def send_to_device(batch: Any, device: torch.device) -> Any:
    from accelerate.utils import send_to_device

    return send_to_device(batch, device)


def release_dataloader(dataloader: Any) -> None:
    """Unregister a prepared dataloader left mid-iteration (early stop, prune) from accelerate's global state.

    accelerate registers a dataloader when its iteration starts and unregisters it only when the iteration runs
    to the end; a loop that breaks early would leave it (and its dataset) referenced by the process-wide
    ``GradientState`` forever, a leak across the trials of a search.
    """
    state = getattr(dataloader, "gradient_state", None)
    refs = getattr(state, "dataloader_references", None)
    if refs is not None and dataloader in refs and hasattr(dataloader, "end"):
        dataloader.end()


def flag_last(iterable: Any) -> Any:
    """Yield ``(item, is_last)``, looking one item ahead: unsized loaders (iterable datasets) have no len()
    to tell which batch is the last, and batch_eval_metrics must finish its result on it."""
    if hasattr(iterable, "end_of_dataloader"):
        # Accelerate's loaders already read one batch ahead and flag the last one. Looking ahead again would end
        # them a batch early, and gather_for_metrics would then trim the cross-process padding off the wrong batch.
        for item in iterable:
            yield item, bool(iterable.end_of_dataloader)
        return
    iterator = iter(iterable)
    try:
        current = next(iterator)
    except StopIteration:
        return
    for following in iterator:
        yield current, False
        current = following
    yield current, True


def batch_size_of(x: Any) -> int:
    """Examples in a batch: the first dimension of its first tensor (the first value of a dict, the first item of a
    list or tuple), 1 where there is none. Walked in a loop: this runs at every training step (the flop count)."""
    while not isinstance(x, torch.Tensor):
        if type(x) is dict or isinstance(x, Mapping):  # a dict first: Mapping's ABC check is a Python call
            x = next(iter(x.values()), None)
        elif isinstance(x, list | tuple) and x:
            x = x[0]
        else:
            return 1
    return x.shape[0] if x.dim() > 0 else 1
