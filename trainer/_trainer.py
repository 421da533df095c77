"""`Trainer`: the class and its public API, built around `model_init` and run through an `accelerate.Accelerator`.

Each responsibility lives in its own module, called from thin methods here so that a subclass still overrides
them on `Trainer`: the training loop in `_loop`, evaluation and prediction in `_evaluation`, data loading in
`_data`, metrics files in `_saving`, checkpoints in `_checkpoint`, the accelerator and precision in `_precision`.
"""

from __future__ import annotations

import copy
import functools
import inspect
import logging
import os
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, IterableDataset

from . import _checkpoint as ckpt
from . import _data, _evaluation, _fsdp, _loop, _loss, _precision, _saving
from ._callbacks import (
    CallbackHandler,
    DefaultFlowCallback,
    PrinterCallback,
    ProgressCallback,
    TrainerCallback,
    TrainerControl,
    TrainerState,
)
from ._evaluation import EvalLoopOutput
from ._helpers import TrainerHelpers
from ._hooks import PrivateHooks, check_overrides
from ._integrations import get_reporting_integration_callbacks
from ._optimization import create_optimizer, get_scheduler, settle_foreach
from ._training_args import TrainingArguments
from ._utils import (
    MemoryTracker,
    PredictionOutput,
    TrainOutput,
    default_data_collator,
    enable_full_determinism,
    set_seed,
    speed_metrics,
)

if TYPE_CHECKING:
    from accelerate import Accelerator

__all__ = ["Trainer"]

logger = logging.getLogger(__name__)
# Whether a module is in training mode, read without a Python frame per module (see training_step).
_TRAINING = attrgetter("training")

#: The models a run built by ``model_init`` has trained (in this process): one returned again is not fresh.
_TRAINED_MODELS: weakref.WeakSet[nn.Module] = weakref.WeakSet()


class _SetupError(ValueError, RuntimeError):
    """Arguments that cannot build a Trainer: a ValueError, and the RuntimeError transformers raises there."""


def _model_init_arity(model_init: Callable[..., Any] | None) -> int:
    if model_init is None:
        return 0
    if not callable(model_init):
        raise TypeError(
            f"model_init must be callable, got {model_init!r}; pass a function returning a torch.nn.Module."
        )
    try:
        params = inspect.signature(model_init).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature
        return 0
    required = [
        p for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    takes_any = [
        p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
    ]
    name = getattr(model_init, "__name__", model_init)
    if len(required) > 1:
        raise ValueError(
            f"model_init must take zero arguments or one (the trial), but {name} "
            f"requires {len(required)}; give the extra parameters defaults."
        )
    keyword_only = [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    if keyword_only:  # the trial is passed by position, as transformers passes it
        raise ValueError(
            f"model_init's parameter {keyword_only[0]!r} is keyword-only and has no default, but the trial is passed "
            f"by position; declare it positional (def model_init({keyword_only[0]}): ...) or give it a default."
        )
    return 1 if takes_any else 0


class Trainer(TrainerHelpers, PrivateHooks):
    """Trains, evaluates and predicts with a PyTorch model, Hugging Face `Trainer`-style.

    The model is ``model`` or, preferably for searches, built by ``model_init`` (zero arguments, or one: the
    trial, None outside a search); with ``model_init`` every `train()` starts from a fresh model and optimizer.
    A model's ``forward`` takes the batch's keys and returns the loss first in a tuple or under ``"loss"`` in a
    mapping. Subclass and override the ``get_*_dataloader``, ``create_*``, ``compute_loss``, ``training_step``,
    ``prediction_step``, ``evaluation_loop`` or ``log`` methods to change one part of the loop.

    transformers' private hooks (``_maybe_log_save_evaluate``, ``_get_train_sampler``, ``_save_checkpoint``...) are
    called where transformers calls them (see `_hooks.HONOURED`); overriding one this trainer never calls is refused.

    ``processing_class`` (keyword-only; ``tokenizer`` is its older name; a processor given 6th, where transformers 4
    took it, is taken as one: see `_data.processor_given_as_model_init`) is saved beside the model and handed to
    callbacks; when it can ``pad`` (a tokenizer) and no ``data_collator`` is given, batches are padded with it.
    """

    # Bookkeeping of a running train(), set by the training loop (`_loop`) and read by evaluation.
    _resumed_step: int = 0
    _total_loss_scalar: float = 0.0
    _globalstep_last_logged: int = 0
    _grad_norm: torch.Tensor | float | None = None
    _eval_in_training: bool = False
    _plain_backward: bool = False
    _created_lr_scheduler: bool = False
    _created_optimizer: bool = False
    _eval_loader_cache: dict[int, tuple[Any, DataLoader]] | None = None
    _persistent_eval_loaders: dict[int, tuple[Any, DataLoader]] | None = None  # see _data.eval_dataloader_for
    _num_parameters: int | None = None
    _flops_of: Any = None
    _last_saved_step: int = -1
    _model_flops: Any = None
    _main_input: str = "input_ids"
    _train_modules: tuple[Any, list[nn.Module]] | None = None
    _past: Any = None
    _warned_no_tokens: bool = False
    _in_train: bool = False
    # Seconds the first evaluation or prediction before training took to prepare the model; unset until then (as
    # transformers', whose evaluations report it as <prefix>_model_preparation_time once it is set).
    model_preparation_time: float
    # The run's state and the loop's switches: fresh ones from __init__, for_trial and every train().
    state: TrainerState
    control: TrainerControl
    # Micro-batches in the current accumulation window (transformers' name); None: gradient_accumulation_steps.
    current_gradient_accumulation_steps: int | None = None
    _ignore_keys_for_eval: list[str] | None = None
    _step_metrics: dict[str, float] | None = None  # the evaluation of the step being saved, if it evaluated
    # transformers' switch: whether compute_loss's loss is already normalised over the accumulation window (True),
    # or a per-batch mean training_step divides by the window's size (False); None decides as transformers does.
    loss_is_scaled_for_ga: bool | None = None
    # Whether the model's forward takes num_items_in_batch (transformers' attribute; set per model).
    model_accepts_loss_kwargs: bool = False

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
        *,
        processing_class: Any = None,
        tokenizer: Any = None,
        compute_loss_func: Callable[..., torch.Tensor] | None = None,
        optimizer_cls_and_kwargs: tuple[type[torch.optim.Optimizer], dict[str, Any]] | None = None,
    ) -> None:
        args = _checked_training_arguments(args)
        check_overrides(self, Trainer)
        self.args = args
        # The init_ stage of the memory metrics, on the device the accelerator will use.
        init_tracker = MemoryTracker(skip=args.skip_memory_metrics, device=_precision.training_device(args))
        init_tracker.start("init")
        try:
            model_init, processing_class = _checked_arguments(
                model,
                model_init,
                processing_class,
                tokenizer,
                {
                    "compute_metrics": compute_metrics,
                    "callbacks": callbacks,
                    "preprocess_logits_for_metrics": preprocess_logits_for_metrics,
                    "optimizers": None if optimizers == (None, None) else optimizers,
                },
                optimizers,
                optimizer_cls_and_kwargs,
            )
            self._keep_functions(
                model_init,
                processing_class,
                compute_metrics,
                preprocess_logits_for_metrics,
                compute_loss_func,
            )
            self.optimizer_cls_and_kwargs = optimizer_cls_and_kwargs
            self._keep_data(data_collator, train_dataset, eval_dataset)
            self.optimizer, self.lr_scheduler = optimizers
            self._set_up_run(model, callbacks)
        finally:  # also when building the trainer fails: the sampling thread must not outlive it
            self._init_mem_metrics: dict[str, float] = {}
            init_tracker.stop_and_update_metrics("init", self._init_mem_metrics)
        self.control = self.callback_handler.on_init_end(self.args, self.state, self.control)

    def _keep_functions(
        self,
        model_init: Callable[..., nn.Module] | None,
        processing_class: Any,
        compute_metrics: Callable[..., dict[str, float]] | None,
        preprocess_logits_for_metrics: Callable[[Any, Any], Any] | None,
        compute_loss_func: Callable[..., torch.Tensor] | None,
    ) -> None:
        """The caller's functions and processor (already checked against each other by `_checked_arguments`)."""
        self.processing_class = processing_class
        self.compute_loss_func = compute_loss_func
        self.model_init = model_init
        self.compute_metrics = compute_metrics
        self.preprocess_logits_for_metrics = preprocess_logits_for_metrics

    def _keep_data(
        self,
        data_collator: Callable[[list[Any]], Any] | None,
        train_dataset: Dataset | IterableDataset | None,
        eval_dataset: Dataset | IterableDataset | dict[str, Any] | None,
    ) -> None:
        """The datasets and the collator: the one given, else padding with a processor that can ``pad`` (a
        tokenizer), else the default collator."""
        if data_collator is None:
            data_collator = (
                _data.PaddingCollator(self.processing_class)
                if callable(getattr(self.processing_class, "pad", None))
                else default_data_collator
            )
        self.data_collator = data_collator
        self.train_dataset = train_dataset
        self.eval_dataset = eval_dataset

    def _set_up_run(self, model: nn.Module | None, callbacks: list[Any] | None) -> None:
        """What a run needs beyond the arguments: the accelerator, log level and seed, the model, the callbacks,
        a fresh state and control, the memory tracker."""
        args = self.args
        self.accelerator: Accelerator | None = None
        self._accelerator_key: tuple[Any, ...] | None = None
        self._create_accelerator()
        _apply_log_level(args)  # after the accelerator: it sets up the process group with the ddp_* arguments
        self._set_seed()
        self._set_up_model(model)
        self.hp_search_backend: Any = None
        self._set_up_callbacks(callbacks)
        self.state = TrainerState(
            is_local_process_zero=self.is_local_process_zero(),
            is_world_process_zero=self.is_world_process_zero(),
        )
        self.control = TrainerControl()
        device = getattr(self.accelerator, "device", None)  # built by _create_accelerator above
        self._memory_tracker = MemoryTracker(skip=args.skip_memory_metrics, device=device)

    def _set_up_model(self, model: nn.Module | None) -> None:
        """The model given, or model_init's; checked for its placement and read for its loss and cache options."""
        args = self.args
        if model is None:
            model = self.call_model_init()
        self.model: nn.Module = model
        self._check_placement()
        self.model_accepts_loss_kwargs = _loss.accepts_loss_kwargs(model)
        _set_use_cache(model, args)
        if args.label_smoothing_factor and _is_multi_label(model):
            warnings.warn(
                "Label smoothing is not compatible with multi-label classification. Disabling label "
                "smoothing for this training run.",
                UserWarning,
                stacklevel=3,
            )  # transformers' words
        self.model_wrapped: nn.Module = model

    def _set_up_callbacks(self, callbacks: list[TrainerCallback | type[TrainerCallback]] | None) -> None:
        """The flow callback, the report_to integrations, the caller's callbacks, then progress or printing."""
        default_callbacks: list[Any] = [
            DefaultFlowCallback,
            *get_reporting_integration_callbacks(self.args.report_to),
        ]
        self.callback_handler = CallbackHandler(
            default_callbacks + list(callbacks or []),
            self.model,
            self.processing_class,
            self.optimizer,
            self.lr_scheduler,
        )
        self.add_callback(PrinterCallback if self.args.disable_tqdm else ProgressCallback)

    @property
    def tokenizer(self) -> Any:
        """transformers' older name of `processing_class`."""
        return self.processing_class

    # ------------------------------------------------------------------ setup helpers
    def _create_accelerator(self) -> None:
        """(Re)build the Accelerator when what it depends on changed (a trial's accumulation steps or precision).

        Another trainer of this process may have set up another precision since (see `_precision`): then too.
        """
        key = _precision.accelerator_key(self.args)
        if (
            self.accelerator is not None
            and key == self._accelerator_key
            and _precision.state_matches(self.args)
        ):
            return
        # A search's trial takes the accelerator an earlier trial left (see `release_memory`), else builds one.
        self.accelerator = _precision.reused_accelerator(self.args) or _precision.build_accelerator(self.args)
        self._accelerator_key = key

    def _set_seed(self) -> None:
        if self.args.full_determinism:
            enable_full_determinism(self.args.seed)
        else:
            set_seed(self.args.seed)

    @property
    def model_init(self) -> Callable[..., nn.Module] | None:
        """The function that builds each run's model (zero arguments, or one: the trial); None with ``model``.
        Assigning one checks its parameters again, so a model_init set after construction is called as declared."""
        return self._model_init

    @model_init.setter
    def model_init(self, model_init: Callable[..., nn.Module] | None) -> None:
        self._model_init_arity = _model_init_arity(model_init)
        self._model_init = model_init

    def call_model_init(self, trial: Any = None) -> nn.Module:
        if self.model_init is None:
            raise RuntimeError("call_model_init needs a model_init; this Trainer was given a model instead.")
        model = self.model_init(trial) if self._model_init_arity == 1 else self.model_init()
        if not isinstance(model, nn.Module):
            raise TypeError(f"model_init must return a torch.nn.Module, got {type(model).__name__}.")
        _set_use_cache(model, self.args)
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
        """Keys of a batch that hold the labels: ``args.label_names``, else ``forward``'s parameters named like labels."""
        return _data.label_names(self)

    def get_train_dataloader(self) -> DataLoader:
        return _data.train_dataloader(self)

    def get_eval_dataloader(self, eval_dataset: Any = None) -> DataLoader:
        dataset = (
            _evaluation.named_eval_dataset(self, eval_dataset)
            if eval_dataset is not None
            else self.eval_dataset
        )
        if dataset is None:
            raise ValueError("Trainer.evaluate needs an eval_dataset; pass one to Trainer or to evaluate().")
        return _data.eval_dataloader_for(self, dataset)

    def get_test_dataloader(self, test_dataset: Any) -> DataLoader:
        if test_dataset is None:
            raise ValueError("Trainer.predict needs a test_dataset.")
        return _data.eval_dataloader_for(self, test_dataset)

    # ------------------------------------------------------------------ optimizer & scheduler
    def create_optimizer(self) -> torch.optim.Optimizer:
        if self.optimizer is None:
            chosen = self.optimizer_cls_and_kwargs
            self.optimizer = create_optimizer(self.model, self.args, chosen)
            self._created_optimizer = True
            settle_foreach(
                self.optimizer,
                self.args,
                self.accelerator.device if self.accelerator else None,
                None if chosen is None else chosen[1],
            )
        return self.optimizer

    def create_scheduler(
        self, num_training_steps: int, optimizer: torch.optim.Optimizer | None = None
    ) -> Any:
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

    @property
    def _train_batch_size(self) -> int:
        """transformers' name for the batch size training uses per process (``auto_find_batch_size`` lowers it)."""
        return self.args.train_batch_size

    @_train_batch_size.setter
    def _train_batch_size(self, value: int) -> None:
        self.args = self.args.replace(per_device_train_batch_size=value)

    @property
    def label_smoother(self) -> Callable[[Any, torch.Tensor], torch.Tensor] | None:
        """The label-smoothed loss ``compute_loss`` uses (``label_smoothing_factor`` > 0), else None; None for a
        multi-label classifier too (``config.problem_type``), which label smoothing does not fit (transformers)."""
        factor = self.args.label_smoothing_factor
        if not factor or _is_multi_label(self.model):
            return None
        # A causal LM's logits at i predict label i + 1: shifted as transformers' LabelSmoother(shift_labels=True).
        return functools.partial(
            _loss.smoothed_cross_entropy, epsilon=factor, shift=_loss.is_causal_lm(self.model)
        )

    # ------------------------------------------------------------------ training
    def train(
        self,
        resume_from_checkpoint: str | bool | None = None,
        trial: Any = None,
        **kwargs: Any,
    ) -> TrainOutput:
        """Train, from scratch or from a checkpoint (``True`` = the latest in ``output_dir``).

        ``trial`` is the search trial (its ``params`` and ``name`` go to `TrainerState`; ``model_init`` receives it).
        ``ignore_keys_for_eval``: output keys the evaluations during training leave out of the predictions.
        """
        ignore_keys_for_eval = kwargs.pop("ignore_keys_for_eval", None)
        if kwargs:
            raise TypeError(f"train() got unexpected keyword arguments {sorted(kwargs)}.")
        self._ignore_keys_for_eval = ignore_keys_for_eval
        if self.args.auto_find_batch_size:
            # As transformers: a resumed run goes on with the batch size the checkpoint's run had found.
            checkpoint = self._resolve_checkpoint(resume_from_checkpoint)
            saved = None if checkpoint is None else ckpt.saved_train_batch_size(checkpoint)
            if saved is not None and saved != self._train_batch_size:
                self._train_batch_size = saved
        while True:
            try:
                return self._train_once(resume_from_checkpoint, trial)
            except RuntimeError as error:
                batch = self.args.per_device_train_batch_size
                if not (self.args.auto_find_batch_size and _is_out_of_memory(error) and batch > 1):
                    raise
                # auto_find_batch_size, as transformers: halve the batch and start the run again.
                logger.warning(
                    "Out of memory with per_device_train_batch_size=%d; retrying with %d.", batch, batch // 2
                )
                self.args = self.args.replace(per_device_train_batch_size=batch // 2)
                # Optimizer and schedule start afresh (those the caller passed in are kept).
                if self._created_optimizer:
                    self.optimizer = None
                if self._created_lr_scheduler:
                    self.lr_scheduler = None
                    self._created_lr_scheduler = False
                _release_cached_memory()

    def _train_once(self, resume_from_checkpoint: str | bool | None, trial: Any) -> TrainOutput:
        args = self.args
        _apply_log_level(args)
        self._create_accelerator()
        assert self.accelerator is not None
        self._memory_tracker = MemoryTracker(skip=args.skip_memory_metrics, device=self.accelerator.device)
        self._memory_tracker.start("train")
        _fsdp.check_processes(self)
        self._set_seed()
        if self.model_init is not None:
            # A fresh model, optimizer and scheduler for every run: nothing leaks from a previous trial.
            with _fsdp.model_loading(self.args):
                self.model = self.call_model_init(trial)
            if self.model in _TRAINED_MODELS and not resume_from_checkpoint:
                reused = (
                    f"model_init returned the model object an earlier run trained ({type(self.model).__name__} at "
                    f"{id(self.model):#x}), so this run starts from its trained weights, not from a fresh model; "
                    "build the model inside model_init (e.g. `def model_init(trial): return MyModel()`, or "
                    "copy.deepcopy a template there)."
                )
                if trial is not None:  # a search: the trial's objective would not be its own
                    raise ValueError(reused)
                warnings.warn(
                    reused, UserWarning, stacklevel=3
                )  # train() again: transformers continues, as here
            _TRAINED_MODELS.add(self.model)
            self.model_wrapped = self.model
            self.optimizer, self.lr_scheduler = None, None
        if self.args.fsdp:
            _fsdp.check_model(self)
        checkpoint = self._resolve_checkpoint(resume_from_checkpoint)
        if checkpoint is not None and not _fsdp.active(
            self.accelerator
        ):  # FSDP: into the sharded model, in the loop
            self._load_from_checkpoint(checkpoint)
        return self._inner_training_loop(resume_from_checkpoint=checkpoint, trial=trial)

    def _resolve_checkpoint(self, resume_from_checkpoint: str | bool | None) -> str | None:
        if resume_from_checkpoint is None or resume_from_checkpoint is False:
            return None
        if resume_from_checkpoint is True:
            found = ckpt.get_last_checkpoint(self.args.output_dir)
            if found is None:
                raise ValueError(
                    f"No valid checkpoint found in output directory ({self.args.output_dir}): resume_from_checkpoint="
                    "True but no checkpoint-* folder is there; pass a checkpoint path or train without resuming."
                )
            return found
        path = os.fspath(resume_from_checkpoint)
        if not os.path.isdir(path):
            raise ValueError(
                f"Can't find a valid checkpoint at {path}: resume_from_checkpoint={path!r} is not a directory; pass a "
                "checkpoint folder or True."
            )
        return path

    def _inner_training_loop(self, resume_from_checkpoint: str | None, trial: Any) -> TrainOutput:
        self._eval_loader_cache = {}
        self._in_train = True
        try:
            with _precision.training_with(self.args):
                return _loop.training_loop(self, resume_from_checkpoint, trial)
        finally:
            self._in_train = False
            # Loaders (and through them the datasets) are not kept past the run, nor shared with copies of the trainer.
            self._eval_loader_cache = None

    def _load_callback_state(self) -> None:
        """With ``restore_callback_states_from_checkpoint``, rebuild the stateful callbacks and the control switches
        from ``state.stateful_callbacks`` (a resumed checkpoint's), as transformers' method of this name does;
        saved callbacks this trainer lacks are named in a warning. Called by `train` when it resumes."""
        if not self.args.restore_callback_states_from_checkpoint:
            return
        missing = _loop.restore_callback_states(self, self.state.stateful_callbacks)
        if missing:
            logger.warning(
                f"Checkpoint included callbacks not included in current configuration ({', '.join(missing)}); "
                "their state is ignored. Pass those callbacks to the Trainer to restore them."
            )

    def _prepare_inputs(self, inputs: Any) -> Any:
        """Move a batch to the device (accelerate's prepared dataloaders already do; custom loaders may not)."""
        assert self.accelerator is not None
        device = self.accelerator.device
        if type(inputs) is dict or isinstance(
            inputs, Mapping
        ):  # a dict first: Mapping's ABC check is a Python call
            on_cpu = (
                device.type == "cpu"
            )  # then only what is elsewhere moves (is_cpu: a fifth of a no-op .to(cpu))
            moved = {
                k: v.to(device) if isinstance(v, torch.Tensor) and not (on_cpu and v.is_cpu) else v
                for k, v in inputs.items()
            }
            if self.args.past_index >= 0 and self._past is not None:
                moved["mems"] = self._past
            kind: Any = type(inputs)
            return moved if kind is dict else kind(moved)  # a dict is new already: not copied again
        return inputs

    def compute_loss(
        self, model: nn.Module, inputs: Any, return_outputs: bool = False, num_items_in_batch: Any = None
    ) -> Any:
        """Forward the batch and take the loss the model returned (first in a tuple, or ``outputs['loss']``).

        With ``compute_loss_func`` (a Trainer argument) or ``label_smoothing_factor`` > 0 the labels are kept from the
        model and the loss is ``compute_loss_func(outputs, labels, num_items_in_batch=...)``, else the label-smoothed
        cross-entropy of its logits (``-100`` labels ignored; shifted by one for a causal LM). ``num_items_in_batch``
        (the label tokens of the accumulation window, as transformers counts them) goes to the model when its
        forward takes it, to ``compute_loss_func`` and to the label smoother, which divide their summed loss by it.
        """
        smoother = self.label_smoother
        loss_func = self.compute_loss_func
        loss: torch.Tensor | None
        if num_items_in_batch is not None and self.model_accepts_loss_kwargs and isinstance(inputs, Mapping):
            inputs = {
                **inputs,
                "num_items_in_batch": num_items_in_batch,
            }  # the model divides its summed loss by it
        if (
            (smoother is not None or loss_func is not None)
            and isinstance(inputs, Mapping)
            and "labels" in inputs
        ):
            inputs = dict(inputs)
            labels = inputs.pop("labels")
            outputs = model(**inputs)
            if loss_func is not None:
                loss = loss_func(outputs, labels, num_items_in_batch=num_items_in_batch)
            else:
                loss = cast(Any, smoother)(outputs, labels, num_items_in_batch=num_items_in_batch)
            if isinstance(outputs, list | tuple):
                outputs = (loss, *outputs)  # loss first, as a model given labels returns it
        elif type(inputs) is dict or isinstance(inputs, Mapping):
            outputs = model(**inputs)
            loss = _loop.extract_loss(outputs)
        elif isinstance(inputs, list | tuple):
            outputs = model(*inputs)
            loss = _loop.extract_loss(outputs)
        else:
            outputs = model(inputs)
            loss = _loop.extract_loss(outputs)
        if loss is not None and num_items_in_batch is not None:
            loss = _loss.across_devices(self, loss)
        if self.args.past_index >= 0:
            self._past = _loop.output_at(outputs, self.args.past_index)
        if loss is None:
            keys = list(outputs.keys()) if isinstance(outputs, Mapping) else type(outputs).__name__
            raise ValueError(
                f"The model did not return a loss (it returned {keys}); pass the labels in the batch "
                f"(label_names={self.label_names}) so forward computes one, or override Trainer.compute_loss."
            )
        return (loss, outputs) if return_outputs else loss

    def training_step(self, model: nn.Module, inputs: Any, num_items_in_batch: Any = None) -> torch.Tensor:
        """One micro-batch: forward, loss, backward. Returns the loss scaled for gradient accumulation, detached.

        ``num_items_in_batch``: the label tokens of the accumulation window (the loop counts them where transformers
        does); a loss normalised by it is not divided by the window's size again (see `loss_is_scaled_for_ga`)."""
        assert self.accelerator is not None
        cached = self._train_modules
        if cached is None or cached[0] is not model:
            # The module list is taken once per model: walking model.modules() costs as much as the check.
            cached = self._train_modules = (model, list(model.modules()))
        if not all(map(_TRAINING, cached[1])):
            # Checked rather than set: model.train() walks every module with nn.Module.__setattr__, as long as
            # a small model's step. Anything that left a module in eval mode (evaluation, a callback) is undone.
            model.train()
        inputs = self._prepare_inputs(inputs)
        if num_items_in_batch is None:
            loss = self.compute_loss(model, inputs)
        else:
            loss = self.compute_loss(model, inputs, num_items_in_batch=num_items_in_batch)
        if loss.dim() > 0 and self.accelerator.num_processes > 1:
            loss = loss.mean()
        scaled = _loss.scaled_for_accumulation(self, num_items_in_batch)
        # The micro-batches of this accumulation window: gradient_accumulation_steps but in an epoch's last, shorter
        # window (the training loop sets it, as transformers' does). A loss normalised over the window is not divided.
        window = (
            1 if scaled else self.current_gradient_accumulation_steps or self.args.gradient_accumulation_steps
        )
        if getattr(self, "_plain_backward", False):
            # What accelerator.backward does here (no scaler, one process), minus its call overhead; dividing by
            # 1 changes no gradient bit, so it is skipped.
            (loss / window if window > 1 else loss).backward()
        else:
            # accelerate divides by its own accumulation steps: a shorter window is scaled to come out as loss / window.
            divisor = self.accelerator.gradient_accumulation_steps
            self.accelerator.backward(loss if window == divisor else loss * (divisor / window))
        return loss.detach() / window if window > 1 else loss.detach()

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
        return _evaluation.evaluate(self, eval_dataset, ignore_keys, metric_key_prefix)

    def predict(
        self, test_dataset: Any, ignore_keys: list[str] | None = None, metric_key_prefix: str = "test"
    ) -> PredictionOutput:
        """Predictions (and label ids and metrics when the dataset has labels) on ``test_dataset``."""
        return _evaluation.predict(self, test_dataset, ignore_keys, metric_key_prefix)

    def evaluation_loop(
        self,
        dataloader: DataLoader,
        description: str,
        prediction_loss_only: bool | None = None,
        ignore_keys: list[str] | None = None,
        metric_key_prefix: str = "eval",
    ) -> EvalLoopOutput:
        """Run the model over ``dataloader`` and compute metrics; predictions are gathered across processes."""
        return _evaluation.evaluation_loop(
            self, dataloader, description, prediction_loss_only, ignore_keys, metric_key_prefix
        )

    def prediction_step(
        self,
        model: nn.Module,
        inputs: Any,
        prediction_loss_only: bool,
        ignore_keys: list[str] | None = None,
    ) -> tuple[torch.Tensor | None, Any, Any]:
        """One evaluation batch: (loss or None, logits or None, labels or None)."""
        return _evaluation.prediction_step(self, model, inputs, prediction_loss_only, ignore_keys)

    def floating_point_ops(self, inputs: Any) -> float:
        """Floating-point operations of one training micro-batch, added to ``state.total_flos``.

        The model's own ``floating_point_ops(inputs)`` when it has one (transformers models had one before
        transformers 5), else the usual estimate for a forward and backward pass: 6 x parameters x tokens, where
        tokens are the elements of the model's main input (``input_ids``) or, in a batch without one, its
        examples, and parameters leave out the embeddings when the model can say which they are (transformers'
        ``num_parameters(exclude_embeddings=True)``, as its own estimate did).
        """
        model: Any = self.model
        if (
            self._flops_of is not model
        ):  # looked up once per model: nn.Module's __getattr__ is slow to say "no"
            self._flops_of = model
            self._model_flops = getattr(model, "floating_point_ops", None)
            self._main_input = getattr(model, "main_input_name", "input_ids")
            counter = getattr(model, "num_parameters", None)
            self._num_parameters = (
                int(counter(exclude_embeddings=True))
                if callable(counter)
                else sum(p.numel() for p in model.parameters())
            )
        if self._model_flops is not None:
            return float(self._model_flops(inputs))
        assert self._num_parameters is not None
        return (
            6.0
            * self._num_parameters
            * _loop.input_tokens(self, inputs, True, gather=False, warn=False, name=self._main_input)
        )

    def get_num_trainable_parameters(self) -> int:
        """Parameters of the model that require gradients."""
        return sum(p.numel() for p in self.model.parameters() if p.requires_grad)

    # ------------------------------------------------------------------ logging & metrics
    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """Record ``logs`` in ``state.log_history`` (with epoch and step) and send them to the callbacks.

        ``start_time`` (a ``time.perf_counter()`` value) adds the training speed metrics since then.
        """
        if self.args.include_num_input_tokens_seen != "no":
            logs["num_input_tokens_seen"] = self.state.num_input_tokens_seen
        if start_time is not None:
            logs.update(speed_metrics("train", start_time))
        if self.state.epoch is not None:
            logs["epoch"] = self.state.epoch
        self.state.log_history.append({**logs, "step": self.state.global_step})
        self.control = self.callback_handler.on_log(self.args, self.state, self.control, logs=logs)

    @staticmethod
    def metrics_format(metrics: Mapping[str, float]) -> dict[str, Any]:
        """Metrics made readable: runtimes as h:mm:ss, memory in MB, floats rounded."""
        return _saving.metrics_format(metrics)

    def log_metrics(self, split: str, metrics: Mapping[str, float]) -> None:
        """Print ``metrics`` of ``split`` as an aligned table (main process only)."""
        _saving.log_metrics(self, split, metrics)

    def save_metrics(self, split: str, metrics: Mapping[str, float], combined: bool = True) -> None:
        """Write ``<split>_results.json`` in output_dir (and merge into ``all_results.json``)."""
        _saving.save_metrics(self, split, metrics, combined)

    # ------------------------------------------------------------------ saving
    def push_to_hub(self, *args: Any, **kwargs: Any) -> Any:
        """Refused: this trainer does not push to the Hugging Face Hub (see README, differences)."""
        raise NotImplementedError(
            "Trainer.push_to_hub: this trainer does not push to the Hugging Face Hub; save the model with "
            "trainer.save_model(folder) and upload that folder with huggingface_hub (HfApi().upload_folder)."
        )

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """Write the model's weights (safetensors) and the training arguments to ``output_dir``.

        ``_internal_call`` is transformers' flag (its Trainer pushes to the Hub when it is False); accepted for code
        that passes it, it changes nothing here (no Hub pushes)."""
        ckpt.save_model(self, output_dir if output_dir is not None else self.args.output_dir)

    def save_state(self) -> None:
        """Write ``trainer_state.json`` to output_dir."""
        _saving.save_state(self)

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
        recipe._persistent_eval_loaders = None
        recipe.callback_handler = CallbackHandler(
            list(self.callback_handler.callbacks), None, self.processing_class
        )
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
        clone._persistent_eval_loaders = None  # its own loaders (and worker processes)
        own = [copy.deepcopy(cb) for cb in self.callback_handler.callbacks]
        clone.callback_handler = CallbackHandler([*own, *callbacks], clone.model, self.processing_class)
        clone.state = TrainerState(
            is_local_process_zero=clone.is_local_process_zero(),
            is_world_process_zero=clone.is_world_process_zero(),
        )
        clone.control = TrainerControl()
        assert clone.accelerator is not None
        clone._memory_tracker = MemoryTracker(skip=args.skip_memory_metrics, device=clone.accelerator.device)
        return clone

    def release_memory(self) -> None:
        """Drop the model, optimizer, scheduler, accelerator and loaders so their memory can be freed.

        For a trainer that will not train again (a finished trial); data and arguments stay. Its accelerator, emptied,
        goes to the next trainer of this process built with the same accelerator settings (the next trial).
        """
        self.model = None  # type: ignore[assignment]
        self.model_wrapped = None  # type: ignore[assignment]
        self.optimizer = None
        self.lr_scheduler = None
        if self.accelerator is not None and self._accelerator_key is not None:
            _precision.keep_for_reuse(self._accelerator_key, self.accelerator)
        self.accelerator = None
        self._accelerator_key = None
        handler = self.callback_handler
        handler.model = handler.optimizer = handler.lr_scheduler = None
        handler.train_dataloader = handler.eval_dataloader = None
        self._persistent_eval_loaders = None

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


def _checked_training_arguments(args: Any) -> TrainingArguments:
    """``args``, or transformers' default for a Trainer given none (output in ``tmp_trainer``)."""
    if args is None:
        return TrainingArguments(output_dir="tmp_trainer")
    if not isinstance(args, TrainingArguments):
        raise TypeError(f"args must be a trainer.TrainingArguments, got {type(args).__name__}.")
    return args


def _checked_arguments(
    model: Any,
    model_init: Callable[..., nn.Module] | None,
    processing_class: Any,
    tokenizer: Any,
    later: dict[str, Any],
    optimizers: tuple[Any, Any],
    optimizer_cls_and_kwargs: Any,
) -> tuple[Callable[..., nn.Module] | None, Any]:
    """`Trainer`'s arguments checked against each other; returns (model_init, processing_class), a processor given
    as model_init (transformers' older positional order) moved to its place. ``later``: the arguments after
    model_init in that order, by name."""
    if tokenizer is not None:
        if processing_class is not None and processing_class is not tokenizer:
            raise ValueError("tokenizer= and processing_class= were both given; pass only processing_class.")
        processing_class = tokenizer  # transformers' older name for the same argument
    model_init, processing_class = _data.processor_given_as_model_init(
        model_init, processing_class, [name for name, value in later.items() if value is not None]
    )
    if model is None and model_init is None:
        raise _SetupError("Trainer needs a model or a model_init; pass one of them.")
    if model is not None and not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}.")
    if model is not None and model_init is not None:
        warnings.warn(
            "Trainer got both model and model_init: train() replaces the model with a fresh one "
            "from model_init (transformers 5 refuses the pair); pass only one of them.",
            FutureWarning,
            stacklevel=3,
        )
    if model_init is not None and (optimizers[0] is not None or optimizers[1] is not None):
        raise _SetupError(
            "Passing optimizers together with model_init is not supported: every train() builds a fresh model, so "
            "an optimizer made beforehand would hold the wrong parameters. Override create_optimizer/"
            "create_scheduler (or set optim/lr_scheduler_type in TrainingArguments) instead."
        )
    if optimizers[1] is not None and optimizers[0] is None:
        raise ValueError("optimizers=(None, scheduler): a scheduler needs its optimizer; pass both.")
    if optimizer_cls_and_kwargs is not None:
        if optimizers[0] is not None:
            raise RuntimeError(
                "Passing both `optimizers` and `optimizer_cls_and_kwargs` arguments is incompatible: the "
                "first is a built optimizer, the second says how to build one; pass only one of them."
            )
        cls, kwargs = optimizer_cls_and_kwargs
        if not (
            isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer) and isinstance(kwargs, Mapping)
        ):
            raise TypeError(
                f"optimizer_cls_and_kwargs must be (a torch.optim.Optimizer subclass, a dict of its keyword "
                f"arguments), got {optimizer_cls_and_kwargs!r}; pass e.g. (torch.optim.SGD, {{'lr': 0.1}})."
            )
    return model_init, processing_class


def _is_multi_label(model: nn.Module | None) -> bool:
    return getattr(getattr(model, "config", None), "problem_type", None) == "multi_label_classification"


def _set_use_cache(model: nn.Module, args: TrainingArguments) -> None:
    """``args.use_cache`` onto a transformers model's config, as transformers' Trainer sets it (off by default:
    training does not need the key/value cache)."""
    config = getattr(model, "config", None)
    if config is not None and not isinstance(config, dict):
        config.use_cache = args.use_cache


def _apply_log_level(args: TrainingArguments) -> None:
    """Set the "trainer" loggers' level from ``log_level``/``log_level_replica`` ("passive" leaves it)."""
    name = args.log_level if args.should_log else args.log_level_replica
    if name != "passive":
        log = logging.getLogger("trainer")
        level = args.get_process_log_level()
        if log.level != level:  # setLevel clears the level cache of every logger in the process, each trial
            log.setLevel(level)


def _is_out_of_memory(error: BaseException) -> bool:
    from accelerate.utils.memory import should_reduce_batch_size

    return isinstance(error, torch.OutOfMemoryError) or should_reduce_batch_size(error)  # type: ignore[arg-type]


def _release_cached_memory() -> None:
    import gc

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
