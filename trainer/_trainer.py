"""`Trainer`: the training loop, built around `model_init` and run through an `accelerate.Accelerator`."""

from __future__ import annotations

import copy
import inspect
import json
import logging
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence, Sized
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, IterableDataset, RandomSampler, SequentialSampler

from . import _checkpoint as ckpt
from ._callbacks import (
    CallbackHandler,
    DefaultFlowCallback,
    ExportableState,
    PrinterCallback,
    ProgressCallback,
    TrainerCallback,
    TrainerControl,
    TrainerState,
)
from ._integrations import get_reporting_integration_callbacks
from ._optimization import create_optimizer, get_scheduler
from ._training_args import SaveStrategy, TrainingArguments
from ._utils import (
    EvalPrediction,
    MemoryTracker,
    PredictionOutput,
    TrainOutput,
    default_data_collator,
    enable_full_determinism,
    nested_concat,
    nested_detach,
    nested_numpify,
    set_seed,
    speed_metrics,
)

if TYPE_CHECKING:
    from accelerate import Accelerator

__all__ = ["Trainer"]

logger = logging.getLogger(__name__)

_LABEL_ALIASES = ("label", "label_ids")
_DEFAULT_LABEL_NAMES = ("labels", "start_positions", "end_positions")


def _model_init_arity(model_init: Callable[..., Any] | None) -> int:
    if model_init is None:
        return 0
    if not callable(model_init):
        raise TypeError(f"model_init must be callable, got {model_init!r}; pass a function returning a torch.nn.Module.")
    try:
        params = inspect.signature(model_init).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature
        return 0
    required = [
        p for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    takes_any = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    if len(required) > 1:
        raise ValueError(
            f"model_init must take zero arguments or one (the trial), but {getattr(model_init, '__name__', model_init)} "
            f"requires {len(required)}; give the extra parameters defaults."
        )
    return 1 if takes_any else 0


class _RemoveColumnsCollator:
    """Drops example keys that the model's ``forward`` does not accept, then collates."""

    def __init__(self, collator: Callable[[list[Any]], Any], keep: frozenset[str]) -> None:
        self.collator = collator
        self.keep = keep
        self._warned: set[str] = set()

    def __call__(self, features: list[Any]) -> Any:
        if features and isinstance(features[0], Mapping):
            keep = self.keep
            first = features[0]
            if any(k not in keep for k in first):
                dropped = {k for k in first if k not in keep} - self._warned
                if dropped:
                    logger.info("Dropping example keys the model's forward does not accept: %s", sorted(dropped))
                    self._warned |= dropped
                features = [{k: v for k, v in f.items() if k in keep} for f in features]
        return self.collator(features)


class Trainer:
    """Trains, evaluates and predicts with a PyTorch model, Hugging Face `Trainer`-style.

    The model is ``model`` or, preferably for searches, built by ``model_init`` (zero arguments, or one: the
    trial, None outside a search); with ``model_init`` every `train()` starts from a fresh model and optimizer.
    A model's ``forward`` takes the batch's keys and returns the loss first in a tuple or under ``"loss"`` in a
    mapping. Subclass and override the ``get_*_dataloader``, ``create_*``, ``compute_loss``, ``training_step``,
    ``prediction_step``, ``evaluation_loop`` or ``log`` methods to change one part of the loop.
    """

    def __init__(
        self,
        model: nn.Module | None = None,
        args: TrainingArguments | None = None,
        data_collator: Callable[[list[Any]], Any] | None = None,
        train_dataset: Dataset | IterableDataset | None = None,
        eval_dataset: Dataset | IterableDataset | dict[str, Any] | None = None,
        model_init: Callable[..., nn.Module] | None = None,
        compute_metrics: Callable[..., dict[str, float]] | None = None,
        callbacks: list[TrainerCallback | type[TrainerCallback]] | None = None,
        optimizers: tuple[torch.optim.Optimizer | None, Any] = (None, None),
        preprocess_logits_for_metrics: Callable[[Any, Any], Any] | None = None,
    ) -> None:
        if args is None:
            args = TrainingArguments(output_dir="trainer_output")
        if not isinstance(args, TrainingArguments):
            raise TypeError(f"args must be a trainer.TrainingArguments, got {type(args).__name__}.")
        self.args = args
        if model is None and model_init is None:
            raise ValueError("Trainer needs a model or a model_init; pass one of them.")
        if model is not None and not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}.")
        if model_init is not None and (optimizers[0] is not None or optimizers[1] is not None):
            raise ValueError(
                "Passing optimizers together with model_init is not supported: every train() builds a fresh model, so "
                "an optimizer made beforehand would hold the wrong parameters. Override create_optimizer/"
                "create_scheduler (or set optim/lr_scheduler_type in TrainingArguments) instead."
            )
        if optimizers[1] is not None and optimizers[0] is None:
            raise ValueError("optimizers=(None, scheduler): a scheduler needs its optimizer; pass both.")
        self._model_init_arity = _model_init_arity(model_init)
        self.model_init = model_init
        self.compute_metrics = compute_metrics
        self.preprocess_logits_for_metrics = preprocess_logits_for_metrics
        self.data_collator = data_collator if data_collator is not None else default_data_collator
        self.train_dataset = train_dataset
        self.eval_dataset = eval_dataset
        self.optimizer, self.lr_scheduler = optimizers
        self.accelerator: Accelerator | None = None
        self._accelerator_key: tuple[Any, ...] | None = None
        self._create_accelerator()
        self._set_seed()
        if model is None:
            model = self.call_model_init()
        self.model: nn.Module = model
        self.model_wrapped: nn.Module = model
        self.hp_search_backend: Any = None

        default_callbacks: list[Any] = [DefaultFlowCallback, *get_reporting_integration_callbacks(args.report_to)]
        self.callback_handler = CallbackHandler(
            default_callbacks + list(callbacks or []), self.model, self.optimizer, self.lr_scheduler
        )
        self.add_callback(PrinterCallback if args.disable_tqdm else ProgressCallback)
        self.state = TrainerState(
            is_local_process_zero=self.is_local_process_zero(), is_world_process_zero=self.is_world_process_zero()
        )
        self.control = TrainerControl()
        self._memory_tracker = MemoryTracker(skip=args.skip_memory_metrics)
        self.control = self.callback_handler.on_init_end(self.args, self.state, self.control)

    # ------------------------------------------------------------------ setup helpers
    def _create_accelerator(self) -> None:
        """(Re)build the Accelerator when the arguments it depends on changed (e.g. a trial's accumulation steps)."""
        from accelerate import Accelerator
        from accelerate.utils import DataLoaderConfiguration

        args = self.args
        data_seed = args.data_seed if args.data_seed is not None else args.seed
        key = (args.use_cpu, str(args.mixed_precision), args.gradient_accumulation_steps, data_seed)
        if self.accelerator is not None and key == self._accelerator_key:
            return
        self.accelerator = Accelerator(
            # Without an accelerator, say so: accelerate then runs several launched processes as MULTI_CPU (gloo)
            # instead of silently training each one alone.
            cpu=args.use_cpu or not (torch.cuda.is_available() or _mps_available()),
            mixed_precision=str(getattr(args.mixed_precision, "value", args.mixed_precision)),
            gradient_accumulation_steps=args.gradient_accumulation_steps,
            # A sampler seeded per epoch from data_seed: the same data order on every run and after a resume.
            dataloader_config=DataLoaderConfiguration(use_seedable_sampler=True, data_seed=data_seed),
            step_scheduler_with_optimizer=False,
        )
        self._accelerator_key = key

    def _set_seed(self) -> None:
        if self.args.full_determinism:
            enable_full_determinism(self.args.seed)
        else:
            set_seed(self.args.seed)

    def call_model_init(self, trial: Any = None) -> nn.Module:
        if self.model_init is None:
            raise RuntimeError("call_model_init needs a model_init; this Trainer was given a model instead.")
        model = self.model_init(trial) if self._model_init_arity == 1 else self.model_init()
        if not isinstance(model, nn.Module):
            raise TypeError(f"model_init must return a torch.nn.Module, got {type(model).__name__}.")
        return model

    def is_world_process_zero(self) -> bool:
        return self.accelerator is None or self.accelerator.is_main_process

    def is_local_process_zero(self) -> bool:
        return self.accelerator is None or self.accelerator.is_local_main_process

    # ------------------------------------------------------------------ callbacks
    def add_callback(self, callback: TrainerCallback | type[TrainerCallback]) -> None:
        self.callback_handler.add_callback(callback)

    def pop_callback(self, callback: TrainerCallback | type[TrainerCallback]) -> TrainerCallback | None:
        return self.callback_handler.pop_callback(callback)

    def remove_callback(self, callback: TrainerCallback | type[TrainerCallback]) -> None:
        self.callback_handler.remove_callback(callback)

    # ------------------------------------------------------------------ data
    @property
    def label_names(self) -> list[str]:
        if self.args.label_names is not None:
            return list(self.args.label_names)
        params = self._forward_parameters()
        found = [name for name in _DEFAULT_LABEL_NAMES if params is not None and name in params]
        return found or ["labels"]

    def _forward_parameters(self) -> set[str] | None:
        """Names ``forward`` declares, or None when it declares none but takes ``**kwargs`` (anything goes).

        A ``forward(input_ids, ..., labels, **kwargs)`` (every transformers model) counts as its named
        parameters only, as in the Hugging Face Trainer: its ``**kwargs`` are for model internals, not for
        dataset columns such as an example id or raw text.
        """
        model = self.model
        try:
            params = inspect.signature(model.forward).parameters
        except (TypeError, ValueError):
            return None
        variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        named = {name for name, p in params.items() if p.kind not in variadic}
        if not named and any(p.kind is p.VAR_KEYWORD for p in params.values()):
            return None
        return named

    def _get_collator(self) -> Callable[[list[Any]], Any]:
        if not self.args.remove_unused_columns:
            return self.data_collator
        params = self._forward_parameters()
        if params is None:
            return self.data_collator
        keep = frozenset(params | set(self.label_names) | set(_LABEL_ALIASES))
        return _RemoveColumnsCollator(self.data_collator, keep)

    def _dataloader_kwargs(self) -> dict[str, Any]:
        args = self.args
        kwargs: dict[str, Any] = {
            "collate_fn": self._get_collator(),
            "num_workers": args.dataloader_num_workers,
            "pin_memory": args.dataloader_pin_memory and torch.cuda.is_available() and not args.use_cpu,
        }
        if args.dataloader_num_workers > 0:
            kwargs["persistent_workers"] = args.dataloader_persistent_workers
            if args.dataloader_prefetch_factor is not None:
                kwargs["prefetch_factor"] = args.dataloader_prefetch_factor
        return kwargs

    def get_train_dataloader(self) -> DataLoader:
        if self.train_dataset is None:
            raise ValueError("Trainer.train needs a train_dataset; pass train_dataset=... to Trainer.")
        dataset = self.train_dataset
        kwargs = self._dataloader_kwargs()
        kwargs["batch_size"] = self.args.per_device_train_batch_size
        assert self.accelerator is not None
        if not isinstance(dataset, IterableDataset):
            kwargs["drop_last"] = self.args.dataloader_drop_last
            if _accelerate_only_forwards(self.accelerator):
                # One process and nothing for accelerate to shard, place or scale: a plain loader with the sampler
                # accelerate's prepare would install (seeded with data_seed + epoch, see _set_loader_epoch), so the
                # data order is the same batch for batch and a resume still finds its place. Accelerate's wrapper
                # costs a look-ahead, a device copy and its gradient-state bookkeeping per batch; the loop does
                # the little of that it needs itself (see _inner_training_loop).
                from accelerate.data_loader import SeedableRandomSampler

                kwargs["sampler"] = SeedableRandomSampler(dataset, data_seed=self._data_seed())
                return DataLoader(dataset, **kwargs)
            kwargs["sampler"] = RandomSampler(cast(Sized, dataset))  # map-style datasets have a length
        return self.accelerator.prepare(DataLoader(dataset, **kwargs))

    def _data_seed(self) -> int:
        return self.args.data_seed if self.args.data_seed is not None else self.args.seed

    def _eval_dataloader_for(self, dataset: Any) -> DataLoader:
        assert self.accelerator is not None
        plain = not isinstance(dataset, IterableDataset) and _accelerate_only_forwards(self.accelerator)
        # Within a train() the evaluations of one dataset share a loader (see _inner_training_loop): building one
        # means a collator with an inspect.signature of forward, and accelerate's prepare, at every evaluation.
        cache = getattr(self, "_eval_loader_cache", None) if plain else None
        if cache is not None:
            cached = cache.get(id(dataset))
            if cached is not None and cached[0] is dataset:
                return cached[1]
        kwargs = self._dataloader_kwargs()
        kwargs["batch_size"] = self.args.per_device_eval_batch_size
        if not isinstance(dataset, IterableDataset):
            kwargs["sampler"] = SequentialSampler(dataset)
        if plain:
            # Sequential, one process: accelerate's wrapper would only place batches on the device, which
            # evaluation_loop does for a plain loader.
            loader = DataLoader(dataset, **kwargs)
            if cache is not None:
                cache[id(dataset)] = (dataset, loader)  # the dataset is kept too: its id is never reused meanwhile
            return loader
        return self.accelerator.prepare(DataLoader(dataset, **kwargs))

    def get_eval_dataloader(self, eval_dataset: Any = None) -> DataLoader:
        dataset = eval_dataset if eval_dataset is not None else self.eval_dataset
        if dataset is None:
            raise ValueError("Trainer.evaluate needs an eval_dataset; pass one to Trainer or to evaluate().")
        return self._eval_dataloader_for(dataset)

    def get_test_dataloader(self, test_dataset: Any) -> DataLoader:
        if test_dataset is None:
            raise ValueError("Trainer.predict needs a test_dataset.")
        return self._eval_dataloader_for(test_dataset)

    # ------------------------------------------------------------------ optimizer & scheduler
    def create_optimizer(self) -> torch.optim.Optimizer:
        if self.optimizer is None:
            self.optimizer = create_optimizer(self.model, self.args)
        return self.optimizer

    def create_scheduler(self, num_training_steps: int, optimizer: torch.optim.Optimizer | None = None) -> Any:
        if self.lr_scheduler is None:
            # Remember that we built it: the next train() builds a fresh one instead of resuming a finished
            # schedule (a user-given scheduler is kept as is).
            self._created_lr_scheduler = True
            optimizer = optimizer if optimizer is not None else self.optimizer
            if optimizer is None:
                raise RuntimeError("create_scheduler needs an optimizer; call create_optimizer() first.")
            self.lr_scheduler = get_scheduler(
                self.args.lr_scheduler_type,
                optimizer=optimizer,
                num_warmup_steps=self.args.get_warmup_steps(num_training_steps),
                num_training_steps=num_training_steps,
                scheduler_specific_kwargs=self.args.lr_scheduler_kwargs,
            )
        return self.lr_scheduler

    def create_optimizer_and_scheduler(self, num_training_steps: int) -> None:
        self.create_optimizer()
        self.create_scheduler(num_training_steps=num_training_steps, optimizer=self.optimizer)

    # ------------------------------------------------------------------ training
    def train(
        self,
        resume_from_checkpoint: str | bool | None = None,
        trial: Any = None,
        **kwargs: Any,
    ) -> TrainOutput:
        """Train, from scratch or from a checkpoint (``True`` = the latest in ``output_dir``).

        ``trial`` is the search trial (its ``params`` and ``name`` go to `TrainerState`; ``model_init`` receives it).
        """
        if kwargs:
            raise TypeError(f"train() got unexpected keyword arguments {sorted(kwargs)}.")
        args = self.args
        self._memory_tracker = MemoryTracker(skip=args.skip_memory_metrics)
        self._memory_tracker.start("train")
        self._create_accelerator()
        self._set_seed()
        if self.model_init is not None:
            # A fresh model, optimizer and scheduler for every run: nothing leaks from a previous trial.
            self.model = self.call_model_init(trial)
            self.model_wrapped = self.model
            self.optimizer, self.lr_scheduler = None, None
        checkpoint = self._resolve_checkpoint(resume_from_checkpoint)
        if checkpoint is not None:
            ckpt.load_model_weights(self.model, checkpoint)
        return self._inner_training_loop(resume_from_checkpoint=checkpoint, trial=trial)

    def _resolve_checkpoint(self, resume_from_checkpoint: str | bool | None) -> str | None:
        if resume_from_checkpoint is None or resume_from_checkpoint is False:
            return None
        if resume_from_checkpoint is True:
            found = ckpt.get_last_checkpoint(self.args.output_dir)
            if found is None:
                raise ValueError(
                    f"resume_from_checkpoint=True but no checkpoint-* folder was found in output_dir="
                    f"{self.args.output_dir!r}; pass a checkpoint path or train without resuming."
                )
            return found
        path = os.fspath(resume_from_checkpoint)
        if not os.path.isdir(path):
            raise ValueError(f"resume_from_checkpoint={path!r} is not a directory; pass a checkpoint folder or True.")
        return path

    def _num_update_steps(self, train_dataloader: DataLoader) -> tuple[int, int, int | None]:
        """(max_steps, num_train_epochs, update steps per epoch or None for unsized data)."""
        args = self.args
        accum = args.gradient_accumulation_steps
        try:
            len_dataloader: int | None = len(train_dataloader)
        except TypeError:
            len_dataloader = None
        if len_dataloader is not None:
            per_epoch = max(math.ceil(len_dataloader / accum), 1)
            if args.max_steps > 0:
                return args.max_steps, math.ceil(args.max_steps / per_epoch), per_epoch
            return math.ceil(args.num_train_epochs * per_epoch), math.ceil(args.num_train_epochs), per_epoch
        if args.max_steps > 0:
            return args.max_steps, 1 << 31, None
        raise ValueError(
            "The train_dataset has no length (an IterableDataset), so num_train_epochs cannot be turned into a "
            "number of steps; set TrainingArguments.max_steps."
        )

    def _inner_training_loop(self, resume_from_checkpoint: str | None, trial: Any) -> TrainOutput:
        self._eval_loader_cache: dict[int, tuple[Any, DataLoader]] | None = {}
        try:
            return self._training_loop(resume_from_checkpoint, trial)
        finally:
            # Loaders (and through them the datasets) are not kept past the run, nor shared with copies of the trainer.
            self._eval_loader_cache = None

    def _training_loop(self, resume_from_checkpoint: str | None, trial: Any) -> TrainOutput:
        args = self.args
        accelerator = self.accelerator
        assert accelerator is not None
        start_time = time.perf_counter()
        train_dataloader = self.get_train_dataloader()
        max_steps, num_train_epochs, per_epoch = self._num_update_steps(train_dataloader)
        if max_steps <= 0:
            raise ValueError(
                f"num_train_epochs={args.num_train_epochs} gives 0 training steps; train for more epochs or set max_steps."
            )

        self.state = TrainerState(
            is_local_process_zero=self.is_local_process_zero(),
            is_world_process_zero=self.is_world_process_zero(),
        )
        self.state.init_training_references(self, max_steps, num_train_epochs, trial)
        self.state.compute_steps(args, max_steps)
        self.control = TrainerControl()

        if getattr(self, "_created_lr_scheduler", False):
            # A schedule we built for a previous train() ended at lr=0 (linear) or elsewhere: start a new one.
            self.lr_scheduler = None
            self._created_lr_scheduler = False
        self.create_optimizer_and_scheduler(num_training_steps=max_steps)
        model, optimizer = accelerator.prepare(self.model, self.optimizer)
        step_optimizer = _direct_optimizer(accelerator, optimizer)
        # Single process with nothing for accelerate to do (see _accelerate_only_forwards): backward without
        # accelerate's wrapper, and, when the train loader is a plain one (ours is, then), the loop decides gradient
        # synchronization itself instead of entering accelerator.accumulate() per micro-batch. Several processes,
        # XLA, DeepSpeed, FSDP or a gradient scaler keep accelerate's prepare/accumulate/backward as they are.
        plain = _accelerate_only_forwards(accelerator)
        self._plain_backward = plain
        fast_loop = plain and getattr(train_dataloader, "gradient_state", None) is None
        accum = args.gradient_accumulation_steps
        move_batches = fast_loop and accelerator.device.type != "cpu"
        no_accumulate_context = nullcontext()
        # Where accelerate's wrappers only forward (see _direct_optimizer), clip with torch directly too.
        clip = torch.nn.utils.clip_grad_norm_ if step_optimizer is not optimizer else accelerator.clip_grad_norm_
        self.model_wrapped = model
        self.callback_handler.model = self.model
        self.callback_handler.optimizer = self.optimizer
        self.callback_handler.lr_scheduler = self.lr_scheduler
        self.callback_handler.train_dataloader = train_dataloader

        epochs_trained, steps_to_skip = 0, 0
        self._resumed_step = 0
        if resume_from_checkpoint is not None:
            ckpt.load_optimizer_and_scheduler(self, resume_from_checkpoint)
            saved = TrainerState.load_from_json(os.path.join(resume_from_checkpoint, ckpt.TRAINER_STATE_NAME))
            self._restore_state(saved, max_steps)
            if per_epoch is not None:
                epochs_trained = self.state.global_step // per_epoch
                steps_to_skip = (self.state.global_step % per_epoch) * args.gradient_accumulation_steps
            if args.restore_callback_states_from_checkpoint:
                self._restore_callback_states(saved.stateful_callbacks)

        self.control = self.callback_handler.on_train_begin(args, self.state, self.control)
        tr_loss = torch.zeros((), device=accelerator.device)
        self._total_loss_scalar = 0.0
        self._globalstep_last_logged = self.state.global_step
        self._grad_norm: torch.Tensor | float | None = None
        total_batched_samples = 0
        model.zero_grad(set_to_none=True)

        for epoch in range(epochs_trained, num_train_epochs):
            _set_loader_epoch(train_dataloader, epoch)
            epoch_iterator: Any = train_dataloader
            skipped = 0
            if steps_to_skip > 0 and epoch == epochs_trained:
                epoch_iterator = accelerator.skip_first_batches(train_dataloader, steps_to_skip)
                skipped = steps_to_skip
                steps_to_skip = 0
            restore_rng_at_first_batch = False
            if resume_from_checkpoint is not None and epoch == epochs_trained:
                if skipped:
                    # Mid-epoch checkpoint: the original run had already built this epoch's iterator (which draws
                    # the loader's base seed from the global RNG) when it saved, so restore once ours exists too.
                    restore_rng_at_first_batch = True
                else:
                    ckpt.load_rng_state(resume_from_checkpoint, accelerator.process_index)
            try:
                steps_in_epoch = len(train_dataloader)
            except TypeError:
                steps_in_epoch = max_steps * args.gradient_accumulation_steps
            self.control = self.callback_handler.on_epoch_begin(args, self.state, self.control)
            step_started = False
            step = -1
            # The fast loop reads one batch ahead, as accelerate's loader does (the same order of data loading and
            # training, so the global RNG is drawn in the same sequence), to know the epoch's last batch.
            batches = _flag_last(epoch_iterator) if fast_loop else epoch_iterator
            for step, inputs in enumerate(batches):
                if restore_rng_at_first_batch:
                    assert resume_from_checkpoint is not None  # the flag is only set when resuming
                    ckpt.load_rng_state(resume_from_checkpoint, accelerator.process_index)
                    restore_rng_at_first_batch = False
                total_batched_samples += 1
                if not step_started:
                    self.control = self.callback_handler.on_step_begin(args, self.state, self.control)
                    step_started = True
                if fast_loop:
                    inputs, is_last = inputs
                    # accelerate's rule: every accum-th micro-batch, and the last one of the epoch. A resume skips
                    # whole optimizer steps (a multiple of accum batches), so counting from the epoch's first
                    # yielded batch agrees with counting from the epoch's start.
                    sync = is_last or (step + 1) % accum == 0
                    accelerator.sync_gradients = sync  # kept truthful for code that reads it
                    if move_batches:
                        inputs = _send_to_device(inputs, accelerator.device)
                    context: Any = no_accumulate_context
                else:
                    context = accelerator.accumulate(model)
                with context:
                    loss_step = self.training_step(model, inputs)
                    # math.isfinite of the value: the same test as torch.isfinite on this scalar, without a kernel.
                    if args.logging_nan_inf_filter and not math.isfinite(loss_step.item()):
                        # Count a NaN/inf step as the running mean so one bad batch does not poison the log.
                        tr_loss = tr_loss + tr_loss / (1 + self.state.global_step - self._globalstep_last_logged)
                    else:
                        tr_loss = tr_loss + loss_step
                    if sync if fast_loop else accelerator.sync_gradients:
                        if args.max_grad_norm is not None and args.max_grad_norm > 0:
                            self._grad_norm = clip(model.parameters(), args.max_grad_norm)
                        self.control = self.callback_handler.on_pre_optimizer_step(args, self.state, self.control)
                        step_optimizer.step()
                        self.control = self.callback_handler.on_optimizer_step(args, self.state, self.control)
                        # Only a gradient scaler skips steps, and the plain path has none.
                        if (plain or not accelerator.optimizer_step_was_skipped) and not isinstance(
                            self.lr_scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau
                        ):
                            self.lr_scheduler.step()
                        step_optimizer.zero_grad(set_to_none=True)
                        self.state.global_step += 1
                        self.state.epoch = epoch + (step + 1 + skipped) / steps_in_epoch
                        self.control = self.callback_handler.on_step_end(args, self.state, self.control)
                        tr_loss = self._maybe_log_save_evaluate(tr_loss, model, trial, epoch)
                        step_started = False
                    else:
                        self.control = self.callback_handler.on_substep_end(args, self.state, self.control)
                if self.control.should_epoch_stop or self.control.should_training_stop:
                    break
            _release_dataloader(epoch_iterator)
            if step < 0:
                logger.warning("The train dataloader yielded no batches in epoch %d; stopping.", epoch)
                self.control.should_training_stop = True
            self.control = self.callback_handler.on_epoch_end(args, self.state, self.control)
            tr_loss = self._maybe_log_save_evaluate(tr_loss, model, trial, epoch)
            if self.control.should_training_stop:
                break

        self._total_loss_scalar += float(self._gather_mean(tr_loss))
        train_loss = self._total_loss_scalar / max(self.state.global_step - self._resumed_step, 1)
        if args.load_best_model_at_end and self.state.best_model_checkpoint is not None:
            ckpt.load_best_model(self)
        num_samples = total_batched_samples * args.per_device_train_batch_size * accelerator.num_processes
        metrics = speed_metrics("train", start_time, num_samples=num_samples, num_steps=self.state.global_step)
        metrics["total_flos"] = self.state.total_flos
        metrics["train_loss"] = train_loss
        self._memory_tracker.stop_and_update_metrics("train", metrics)
        self.log(metrics)
        if args.save_total_limit is not None and self.is_world_process_zero():
            ckpt.rotate_checkpoints(self, args.output_dir)
        self.control = self.callback_handler.on_train_end(args, self.state, self.control)
        self.callback_handler.train_dataloader = None
        return TrainOutput(self.state.global_step, train_loss, metrics)

    def _restore_state(self, saved: TrainerState, max_steps: int) -> None:
        keep = {"max_steps", "num_train_epochs", "train_batch_size", "is_hyper_param_search", "trial_name", "trial_params",
                "is_local_process_zero", "is_world_process_zero", "logging_steps", "eval_steps", "save_steps"}
        for field_name in (
            "epoch", "global_step", "num_input_tokens_seen", "total_flos", "log_history", "best_metric",
            "best_global_step", "best_model_checkpoint", "stateful_callbacks",
        ):
            if field_name not in keep:
                setattr(self.state, field_name, copy.deepcopy(getattr(saved, field_name)))
        self._resumed_step = saved.global_step
        if saved.global_step > max_steps:
            logger.warning(
                "The checkpoint is at step %d, past max_steps=%d; training will stop at once.", saved.global_step, max_steps
            )

    def _restore_callback_states(self, states: Mapping[str, Any]) -> None:
        for cb in self.callback_handler.callbacks:
            if isinstance(cb, ExportableState) and type(cb).__name__ in states:
                saved = states[type(cb).__name__]
                saved_list = saved if isinstance(saved, list) else [saved]
                same_type = [c for c in self.callback_handler.callbacks if type(c) is type(cb)]
                index = same_type.index(cb)
                if index < len(saved_list):
                    for key, value in saved_list[index].get("attributes", {}).items():
                        setattr(cb, key, value)
        if "TrainerControl" in states:
            for key, value in states["TrainerControl"].get("args", {}).items():
                setattr(self.control, key, value)

    def _maybe_log_save_evaluate(self, tr_loss: torch.Tensor, model: nn.Module, trial: Any, epoch: int) -> torch.Tensor:
        control = self.control
        if control.should_log and self.state.global_step > self._globalstep_last_logged:
            logs: dict[str, float] = {}
            tr_loss_scalar = float(self._gather_mean(tr_loss))
            steps = self.state.global_step - self._globalstep_last_logged
            logs["loss"] = round(tr_loss_scalar / steps, 4)
            if self._grad_norm is not None:
                logs["grad_norm"] = float(self._grad_norm)
            logs["learning_rate"] = self._get_learning_rate()
            self._total_loss_scalar += tr_loss_scalar
            tr_loss = torch.zeros_like(tr_loss)
            self._globalstep_last_logged = self.state.global_step
            self.log(logs)
        metrics = None
        if control.should_evaluate:
            metrics = self._evaluate_during_training()
            if isinstance(self.lr_scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
                name = self.args.metric_for_best_model or "loss"
                key = name if name.startswith("eval_") else f"eval_{name}"
                if key in metrics:
                    self.lr_scheduler.step(metrics[key])
        if self.control.should_save:
            ckpt.save_checkpoint(self, model, metrics)
            self.control = self.callback_handler.on_save(self.args, self.state, self.control)
        return tr_loss

    def _evaluate_during_training(self) -> dict[str, float]:
        if isinstance(self.eval_dataset, Mapping):
            metrics: dict[str, float] = {}
            for name, dataset in self.eval_dataset.items():
                metrics.update(self.evaluate(eval_dataset=dataset, metric_key_prefix=f"eval_{name}"))
            self._track_best(metrics)
        else:
            # The best metric is updated before on_evaluate, so callbacks see whether this evaluation will be saved.
            self._eval_in_training = True
            try:
                metrics = self.evaluate()
            finally:
                self._eval_in_training = False
        return metrics

    def _track_best(self, metrics: Mapping[str, float]) -> None:
        if self.args.metric_for_best_model:
            is_new_best = self._update_best_metric(metrics)
            if is_new_best and self.args.save_strategy == SaveStrategy.BEST:
                self.control.should_save = True

    def _update_best_metric(self, metrics: Mapping[str, float]) -> bool:
        name = self.args.metric_for_best_model
        assert name is not None
        key = name if name.startswith("eval_") else f"eval_{name}"
        if key not in metrics:
            raise KeyError(
                f"metric_for_best_model={name!r} is not among the evaluation metrics {sorted(metrics)}; "
                "set metric_for_best_model to one of them."
            )
        value = float(metrics[key])
        if math.isnan(value):
            return False
        best = self.state.best_metric
        greater = bool(self.args.greater_is_better)
        if best is None or (value > best if greater else value < best):
            self.state.best_metric = value
            self.state.best_global_step = self.state.global_step
            return True
        return False

    def _get_learning_rate(self) -> float:
        if self.optimizer is None:
            return 0.0
        return float(self.optimizer.param_groups[0]["lr"])

    def _gather_mean(self, tensor: torch.Tensor) -> torch.Tensor:
        assert self.accelerator is not None
        if self.accelerator.num_processes > 1:
            return self.accelerator.gather(tensor.detach().reshape(1)).mean()
        return tensor.detach()

    def _prepare_inputs(self, inputs: Any) -> Any:
        """Move a batch to the device (accelerate's prepared dataloaders already do; custom loaders may not)."""
        assert self.accelerator is not None
        device = self.accelerator.device
        if isinstance(inputs, Mapping):
            moved = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
            return cast(Any, type(inputs))(moved)
        return inputs

    def compute_loss(self, model: nn.Module, inputs: Any, return_outputs: bool = False) -> Any:
        """Forward the batch and take the loss the model returned (first in a tuple, or ``outputs['loss']``)."""
        if isinstance(inputs, Mapping):
            outputs = model(**inputs)
        elif isinstance(inputs, list | tuple):
            outputs = model(*inputs)
        else:
            outputs = model(inputs)
        loss = _extract_loss(outputs)
        if loss is None:
            keys = list(outputs.keys()) if isinstance(outputs, Mapping) else type(outputs).__name__
            raise ValueError(
                f"The model did not return a loss (it returned {keys}); pass the labels in the batch "
                f"(label_names={self.label_names}) so forward computes one, or override Trainer.compute_loss."
            )
        return (loss, outputs) if return_outputs else loss

    def training_step(self, model: nn.Module, inputs: Any) -> torch.Tensor:
        """One micro-batch: forward, loss, backward. Returns the loss scaled for gradient accumulation, detached."""
        assert self.accelerator is not None
        if not all(m.training for m in model.modules()):
            # Checked rather than set: model.train() walks every module with nn.Module.__setattr__, as long as
            # a small model's step. Anything that left a module in eval mode (evaluation, a callback) is undone.
            model.train()
        inputs = self._prepare_inputs(inputs)
        loss = self.compute_loss(model, inputs)
        if self.accelerator.num_processes > 1 and loss.dim() > 0:
            loss = loss.mean()
        accum = self.args.gradient_accumulation_steps
        if getattr(self, "_plain_backward", False):
            # What accelerator.backward does here (no scaler, one process), minus its call overhead; dividing by
            # 1 changes no gradient bit, so it is skipped.
            (loss / accum if accum > 1 else loss).backward()
        else:
            self.accelerator.backward(loss)  # divides by gradient_accumulation_steps
        return loss.detach() / accum

    # ------------------------------------------------------------------ evaluation & prediction
    def evaluate(
        self,
        eval_dataset: Any = None,
        ignore_keys: list[str] | None = None,
        metric_key_prefix: str = "eval",
    ) -> dict[str, float]:
        """Evaluate on ``eval_dataset`` (default: the trainer's); metrics are prefixed with ``metric_key_prefix``.

        With a dict of datasets, each is evaluated and its metrics prefixed with ``<prefix>_<name>``.
        """
        dataset = eval_dataset if eval_dataset is not None else self.eval_dataset
        if isinstance(dataset, Mapping):
            metrics: dict[str, float] = {}
            for name, ds in dataset.items():
                metrics.update(
                    self.evaluate(eval_dataset=ds, ignore_keys=ignore_keys, metric_key_prefix=f"{metric_key_prefix}_{name}")
                )
            return metrics
        self._memory_tracker.start("eval")
        dataloader = self.get_eval_dataloader(dataset)
        start = time.perf_counter()
        output = self.evaluation_loop(
            dataloader,
            description="Evaluation",
            prediction_loss_only=True if self.compute_metrics is None else None,
            ignore_keys=ignore_keys,
            metric_key_prefix=metric_key_prefix,
        )
        metrics = output.metrics or {}
        num_samples = output.num_samples
        metrics.update(speed_metrics(metric_key_prefix, start, num_samples=num_samples, num_steps=output.num_steps))
        self.log(metrics)
        if getattr(self, "_eval_in_training", False):
            self._track_best(metrics)
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics=metrics)
        self._memory_tracker.stop_and_update_metrics("eval", metrics)
        return metrics

    def predict(
        self, test_dataset: Any, ignore_keys: list[str] | None = None, metric_key_prefix: str = "test"
    ) -> PredictionOutput:
        self._memory_tracker.start("test")
        dataloader = self.get_test_dataloader(test_dataset)
        start = time.perf_counter()
        output = self.evaluation_loop(
            dataloader, description="Prediction", ignore_keys=ignore_keys, metric_key_prefix=metric_key_prefix
        )
        metrics = output.metrics or {}
        metrics.update(speed_metrics(metric_key_prefix, start, num_samples=output.num_samples, num_steps=output.num_steps))
        self.control = self.callback_handler.on_predict(self.args, self.state, self.control, metrics=metrics)
        self._memory_tracker.stop_and_update_metrics("test", metrics)
        return PredictionOutput(predictions=output.predictions, label_ids=output.label_ids, metrics=metrics)

    def evaluation_loop(
        self,
        dataloader: DataLoader,
        description: str,
        prediction_loss_only: bool | None = None,
        ignore_keys: list[str] | None = None,
        metric_key_prefix: str = "eval",
    ) -> _EvalLoopOutput:
        """Run the model over ``dataloader`` and compute metrics; predictions are gathered across processes."""
        args = self.args
        accelerator = self.accelerator
        assert accelerator is not None
        prediction_loss_only = prediction_loss_only if prediction_loss_only is not None else args.prediction_loss_only
        model = self.model_wrapped if self.model_wrapped is not None else self.model
        if model is self.model and next(iter(self.model.parameters()), None) is not None:
            model = accelerator.prepare_model(self.model, evaluation_mode=True)
        model.eval()
        self.callback_handler.eval_dataloader = dataloader
        distributed = accelerator.num_processes > 1
        losses: list[torch.Tensor] = []
        all_preds: Any = None
        all_labels: Any = None
        metrics: dict[str, Any] | None = None
        num_samples = 0
        num_steps = 0
        batch_metrics = args.batch_eval_metrics and self.compute_metrics is not None and not prediction_loss_only
        # accelerate's loaders place batches on the device; a plain one (ours in a single process) is placed here.
        move_batches = accelerator.device.type != "cpu" and getattr(dataloader, "gradient_state", None) is None
        for inputs, is_last in _flag_last(dataloader):
            num_steps += 1
            if move_batches:
                inputs = _send_to_device(inputs, accelerator.device)
            loss, logits, labels = self.prediction_step(model, inputs, prediction_loss_only, ignore_keys=ignore_keys)
            batch_size = _batch_size(inputs)
            if loss is not None:
                batch_loss = loss.reshape(1).repeat(batch_size)
                losses.append(accelerator.gather_for_metrics(batch_loss) if distributed else batch_loss)
            if logits is not None and self.preprocess_logits_for_metrics is not None:
                logits = self.preprocess_logits_for_metrics(logits, labels)
            if distributed:
                if logits is not None:
                    logits = accelerator.gather_for_metrics(accelerator.pad_across_processes(logits, dim=1, pad_index=-100))
                if labels is not None:
                    labels = accelerator.gather_for_metrics(accelerator.pad_across_processes(labels, dim=1, pad_index=-100))
            num_samples += _batch_size(labels) if labels is not None else (
                _batch_size(logits) if logits is not None else batch_size
            )
            if batch_metrics:
                assert self.compute_metrics is not None  # batch_metrics requires it
                metrics = self.compute_metrics(
                    EvalPrediction(predictions=logits, label_ids=labels), compute_result=is_last
                )
            elif not prediction_loss_only:
                if logits is not None:
                    all_preds = nested_concat(all_preds, nested_detach(logits))
                if labels is not None:
                    all_labels = nested_concat(all_labels, nested_detach(labels))
            self.control = self.callback_handler.on_prediction_step(args, self.state, self.control)
        self.callback_handler.eval_dataloader = None

        predictions = nested_numpify(all_preds) if all_preds is not None else None
        label_ids = nested_numpify(all_labels) if all_labels is not None else None
        if not batch_metrics and self.compute_metrics is not None and predictions is not None and label_ids is not None:
            metrics = self.compute_metrics(EvalPrediction(predictions=predictions, label_ids=label_ids))
        elif metrics is None:
            metrics = {}
        metrics = {k: (v.item() if hasattr(v, "item") else v) for k, v in dict(metrics).items()}
        if losses:
            metrics[f"{metric_key_prefix}_loss"] = float(torch.cat(losses).float().mean())
        metrics = {
            (k if k.startswith(f"{metric_key_prefix}_") else f"{metric_key_prefix}_{k}"): v for k, v in metrics.items()
        }
        return _EvalLoopOutput(predictions, label_ids, metrics, num_samples, num_steps)

    def prediction_step(
        self,
        model: nn.Module,
        inputs: Any,
        prediction_loss_only: bool,
        ignore_keys: list[str] | None = None,
    ) -> tuple[torch.Tensor | None, Any, Any]:
        """One evaluation batch: (loss or None, logits or None, labels or None)."""
        inputs = self._prepare_inputs(inputs)
        label_names = self.label_names
        if isinstance(inputs, Mapping):
            has_labels = all(inputs.get(k) is not None for k in label_names)
            labels = None
            if has_labels:
                found = tuple(inputs[k] for k in label_names)
                labels = found[0] if len(found) == 1 else found
        else:
            has_labels, labels = False, None
        ignore = set(ignore_keys or ())
        with torch.no_grad():
            if has_labels:
                loss, outputs = self.compute_loss(model, inputs, return_outputs=True)
                loss = loss.mean().detach()
            else:
                loss = None
                outputs = model(**inputs) if isinstance(inputs, Mapping) else model(inputs)
        if prediction_loss_only:
            return loss, None, None
        if isinstance(outputs, Mapping):
            logits_list = [v for k, v in outputs.items() if k != "loss" and k not in ignore]
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

    # ------------------------------------------------------------------ logging & metrics
    def log(self, logs: dict[str, float]) -> None:
        """Record ``logs`` in ``state.log_history`` (with epoch and step) and send them to the callbacks."""
        if self.state.epoch is not None:
            logs["epoch"] = self.state.epoch
        self.state.log_history.append({**logs, "step": self.state.global_step})
        self.control = self.callback_handler.on_log(self.args, self.state, self.control, logs=logs)

    @staticmethod
    def metrics_format(metrics: Mapping[str, float]) -> dict[str, Any]:
        """Metrics made readable: runtimes as h:mm:ss, memory in MB, floats rounded."""
        out: dict[str, Any] = {}
        for key, value in metrics.items():
            if "_mem_" in key:
                out[key] = f"{int(value) >> 20}MB"
            elif key.endswith("_runtime"):
                out[key] = _format_runtime(value)
            elif key == "total_flos":
                out[key] = f"{int(value) >> 30}GF"
            elif isinstance(value, float):
                out[key] = round(value, 4)
            else:
                out[key] = value
        return out

    def log_metrics(self, split: str, metrics: Mapping[str, float]) -> None:
        """Print ``metrics`` of ``split`` as an aligned table (main process only)."""
        if not self.is_world_process_zero():
            return
        print(f"***** {split} metrics *****")
        formatted = self.metrics_format(metrics)
        width = max((len(k) for k in formatted), default=0)
        for key in sorted(formatted):
            print(f"  {key:<{width}} = {formatted[key]:>9}")

    def save_metrics(self, split: str, metrics: Mapping[str, float], combined: bool = True) -> None:
        """Write ``<split>_results.json`` in output_dir (and merge into ``all_results.json``)."""
        if not self.is_world_process_zero():
            return
        os.makedirs(self.args.output_dir, exist_ok=True)
        path = os.path.join(self.args.output_dir, f"{split}_results.json")
        _write_json(path, dict(metrics))
        if combined:
            all_path = os.path.join(self.args.output_dir, "all_results.json")
            merged: dict[str, Any] = {}
            if os.path.exists(all_path):
                with open(all_path, encoding="utf-8") as f:
                    merged = json.load(f)
            merged.update(metrics)
            _write_json(all_path, merged)

    # ------------------------------------------------------------------ saving
    def save_model(self, output_dir: str | None = None) -> None:
        """Write the model's weights (safetensors) and the training arguments to ``output_dir``."""
        ckpt.save_model(self, output_dir if output_dir is not None else self.args.output_dir)

    def save_state(self) -> None:
        """Write ``trainer_state.json`` to output_dir."""
        if self.is_world_process_zero():
            os.makedirs(self.args.output_dir, exist_ok=True)
            self.state.save_to_json(os.path.join(self.args.output_dir, ckpt.TRAINER_STATE_NAME))

    # ------------------------------------------------------------------ seams for a search
    @property
    def model_init_takes_trial(self) -> bool:
        """True when ``model_init`` takes the trial (one argument), False when it takes none."""
        return self._model_init_arity == 1

    def recipe(self) -> Trainer:
        """A picklable copy of this trainer without its model, optimizer, scheduler or accelerator.

        What a remote worker needs to build a trial's trainer with `for_trial`: data, collator, ``model_init``,
        metrics and callbacks travel; the model is never shipped (each trial calls ``model_init``).
        """
        recipe = copy.copy(self)
        recipe.model = None  # type: ignore[assignment]  # rebuilt by model_init in train()
        recipe.model_wrapped = None  # type: ignore[assignment]
        recipe.optimizer = None
        recipe.lr_scheduler = None
        recipe.accelerator = None
        recipe._accelerator_key = None
        recipe.callback_handler = CallbackHandler(list(self.callback_handler.callbacks), None, None, None)
        return recipe

    def for_trial(self, args: TrainingArguments, callbacks: Sequence[TrainerCallback] = ()) -> Trainer:
        """A copy for one trial: the same data and functions, ``args`` instead of this trainer's arguments.

        The copy has its own accelerator, state, control and memory tracker; this trainer's callbacks are
        deep-copied (a stateful one such as early stopping starts fresh, and concurrent trials share nothing),
        and ``callbacks`` are appended as they are (not copied). The model comes from ``model_init`` in `train`.
        """
        clone = copy.copy(self)
        clone.args = args
        clone.accelerator = None
        clone._accelerator_key = None
        clone._create_accelerator()
        clone.optimizer = None
        clone.lr_scheduler = None
        own = [copy.deepcopy(cb) for cb in self.callback_handler.callbacks]
        clone.callback_handler = CallbackHandler([*own, *callbacks], clone.model, None, None)
        clone.state = TrainerState(
            is_local_process_zero=clone.is_local_process_zero(), is_world_process_zero=clone.is_world_process_zero()
        )
        clone.control = TrainerControl()
        clone._memory_tracker = MemoryTracker(skip=args.skip_memory_metrics)
        return clone

    def release_memory(self) -> None:
        """Drop the model, optimizer, scheduler, accelerator and loaders so their memory can be freed.

        For a trainer that will not train again (a finished trial); data and arguments stay.
        """
        self.model = None  # type: ignore[assignment]
        self.model_wrapped = None  # type: ignore[assignment]
        self.optimizer = None
        self.lr_scheduler = None
        self.accelerator = None
        self._accelerator_key = None
        handler = self.callback_handler
        handler.model = handler.optimizer = handler.lr_scheduler = None
        handler.train_dataloader = handler.eval_dataloader = None

    # ------------------------------------------------------------------ search
    def hyperparameter_search(
        self,
        hp_space: Any = None,
        compute_objective: Callable[[dict[str, float]], Any] | str | None = None,
        n_trials: int = 20,
        direction: str | list[str] = "minimize",
        backend: Any = None,
        hp_name: Callable[[Any], str] | None = None,
        **kwargs: Any,
    ) -> Any:
        """Search hyperparameters with Optuna, Ray Tune or SigOpt; see `hpsearch.hyperparameter_search`."""
        from hpsearch import hyperparameter_search

        return hyperparameter_search(
            self,
            hp_space=hp_space,
            compute_objective=compute_objective,
            n_trials=n_trials,
            direction=direction,
            backend=backend,
            hp_name=hp_name,
            **kwargs,
        )


class _EvalLoopOutput:
    __slots__ = ("label_ids", "metrics", "num_samples", "num_steps", "predictions")

    def __init__(self, predictions: Any, label_ids: Any, metrics: dict[str, Any], num_samples: int, num_steps: int):
        self.predictions = predictions
        self.label_ids = label_ids
        self.metrics = metrics
        self.num_samples = num_samples
        self.num_steps = num_steps


def _direct_optimizer(accelerator: Any, optimizer: Any) -> Any:
    """The optimizer to step: the bare torch one when accelerate's wrapper would only forward the call.

    Without a gradient scaler and outside XLA/DeepSpeed/FSDP, ``AcceleratedOptimizer.step`` and ``zero_grad``
    only forward to the wrapped optimizer (the loop calls them when gradients are synchronized), yet each call
    pays for a package lookup (``is_lomo_available``: two ``importlib`` searches of sys.path) or an
    ``inspect.signature``. On a small model that was over a millisecond per step, as much as the step itself.
    In the same setting (and without FSDP) ``Accelerator.clip_grad_norm_`` is ``torch.nn.utils.clip_grad_norm_``
    after a torch version parse per call; the loop then clips with torch directly.
    """
    from accelerate.optimizer import AcceleratedOptimizer
    from accelerate.utils import DistributedType

    plain_types = (DistributedType.NO, DistributedType.MULTI_CPU, DistributedType.MULTI_GPU)
    if (
        type(optimizer) is AcceleratedOptimizer  # a subclass may do more in step()
        and optimizer.scaler is None
        and accelerator.distributed_type in plain_types
        and os.environ.get("ACCELERATE_USE_FSDP", "false").lower() != "true"
    ):
        return optimizer.optimizer
    return optimizer


def _accelerate_only_forwards(accelerator: Any) -> bool:
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


def _set_loader_epoch(dataloader: Any, epoch: int) -> None:
    """Seed the epoch's data order: accelerate's loaders have set_epoch; a plain one has its sampler set the same way
    (``SeedableRandomSampler`` draws its permutation from data_seed + epoch), and its dataset when it has set_epoch."""
    if hasattr(dataloader, "set_epoch"):
        dataloader.set_epoch(epoch)
        return
    sampler: Any = getattr(getattr(dataloader, "batch_sampler", None), "sampler", None)
    if hasattr(sampler, "set_epoch"):
        sampler.set_epoch(epoch)
    dataset: Any = getattr(dataloader, "dataset", None)
    if hasattr(dataset, "set_epoch"):
        dataset.set_epoch(epoch)


def _send_to_device(batch: Any, device: torch.device) -> Any:
    from accelerate.utils import send_to_device

    return send_to_device(batch, device)


def _mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def _release_dataloader(dataloader: Any) -> None:
    """Unregister a prepared dataloader left mid-iteration (early stop, prune) from accelerate's global state.

    accelerate registers a dataloader when its iteration starts and unregisters it only when the iteration runs
    to the end; a loop that breaks early would leave it (and its dataset) referenced by the process-wide
    ``GradientState`` forever, a leak across the trials of a search.
    """
    state = getattr(dataloader, "gradient_state", None)
    refs = getattr(state, "dataloader_references", None)
    if refs is not None and dataloader in refs and hasattr(dataloader, "end"):
        dataloader.end()


def _extract_loss(outputs: Any) -> torch.Tensor | None:
    if isinstance(outputs, Mapping):
        return outputs.get("loss")
    if isinstance(outputs, list | tuple):
        return outputs[0] if outputs and isinstance(outputs[0], torch.Tensor) else None
    if isinstance(outputs, torch.Tensor) and outputs.dim() == 0:
        return outputs
    return getattr(outputs, "loss", None)


def _flag_last(iterable: Any) -> Any:
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


def _batch_size(x: Any) -> int:
    if isinstance(x, torch.Tensor):
        return x.shape[0] if x.dim() > 0 else 1
    if isinstance(x, Mapping):
        for v in x.values():
            return _batch_size(v)
    if isinstance(x, list | tuple) and x:
        return _batch_size(x[0])
    return 1


def _format_runtime(seconds: float) -> str:
    seconds = float(seconds)
    hours, rem = divmod(seconds, 3600)
    minutes, secs = divmod(rem, 60)
    return f"{int(hours)}:{int(minutes):02d}:{secs:05.2f}"


def _write_json(path: str, data: Any) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=True, default=str)
        f.write("\n")
    os.replace(tmp, path)

