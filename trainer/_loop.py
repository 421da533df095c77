"""The training loop of `Trainer`: steps, accumulation, clipping, and the log/evaluate/save decisions."""

from __future__ import annotations

import copy
import functools
import inspect
import logging
import math
import os
import time
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import torch
from accelerate.utils.memory import clear_device_cache
from torch import nn
from torch.utils.data import DataLoader

from . import _checkpoint as ckpt
from ._callbacks import ExportableState, TrainerControl, TrainerState
from ._data import (
    accelerate_only_forwards,
    batch_size_of,
    data_seed,
    flag_last,
    release_dataloader,
    send_to_device,
    set_loader_epoch,
)
from ._loss import accepts_loss_kwargs, count_label_tokens, loss_shifts_labels
from ._training_args import SaveStrategy
from ._utils import TrainOutput, speed_metrics

if TYPE_CHECKING:
    from ._trainer import Trainer

logger = logging.getLogger(__name__)


def num_update_steps(trainer: Trainer, train_dataloader: DataLoader) -> tuple[int, int, int | None]:
    """(max_steps, num_train_epochs, update steps per epoch or None for unsized data)."""
    args = trainer.args
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


def training_loop(trainer: Trainer, resume_from_checkpoint: str | None, trial: Any) -> TrainOutput:
    """transformers' ``_inner_training_loop``: set one run up, resume it, train its epochs and report."""
    run = _Run.start(trainer, resume_from_checkpoint, trial)
    run.resume()
    run.begin()
    for epoch in range(run.epochs_trained, run.num_train_epochs):
        run.train_epoch(epoch)
        if trainer.control.should_training_stop:
            break
    return run.finish()


@dataclass(eq=False)
class _Run:
    """One call of `Trainer.train`: what it prepared (the wrapped model, the optimizer it steps and how, how it
    decides gradient synchronization) and what it counts (epochs and batches to skip on resume, the running loss,
    samples and tokens). The trainer keeps what outlives the run or what its hooks read (state, control, the
    logged loss total, the step last logged, the last gradient norm)."""

    trainer: Trainer
    trial: Any
    resume_from: str | None
    start_time: float
    loader: Any
    max_steps: int
    num_train_epochs: int
    per_epoch: int | None  # update steps per epoch; None for unsized data

    # Set by start(): the prepared objects.
    args: Any = field(init=False)
    accelerator: Any = field(init=False)
    model: nn.Module = field(init=False)  # as accelerate prepared it (trainer.model_wrapped)
    # What the loop steps: the bare optimizer where accelerate's wrapper would only forward.
    step_optimizer: Any = field(init=False)
    clip: Any = field(init=False)
    neftune: Any = field(init=False)
    debug_hook: Any = field(init=False)
    # Set by start(): how a micro-batch is fed and stepped (see _choose_step_variant).
    accum: int = field(init=False)
    plain: bool = field(init=False)
    feed: Any = field(init=False)  # one of the step variants, _feed_plain, _feed_windowed or _feed_accelerate
    counting: bool = field(init=False)
    shift_count: bool = field(init=False)
    flagged: bool = field(init=False)
    move_batches: bool = field(init=False)
    step_takes_items: bool = field(init=False)
    to_train: Any = field(init=False)  # a schedule-free optimizer's train(), else None
    count_tokens: bool = field(init=False)

    # Counters.
    epochs_trained: int = 0
    steps_to_skip: int = 0
    # The step losses summed since the last log (log_save_evaluate resets it in place).
    tr_loss: torch.Tensor = field(init=False)
    loss_sum: float = 0.0  # the finite step losses not yet added to tr_loss (see _add_loss)
    total_batched_samples: int = 0
    tokens_this_run: int = 0
    # This epoch's (set by _begin_epoch).
    epoch: int = 0
    skipped: int = 0  # batches a resume skipped at the epoch's start
    steps_in_epoch: int = 0
    last_window_start: int = 0
    restore_rng_at_first_batch: bool = False
    step_started: bool = False  # a micro-batch of the current optimizer step has run

    @classmethod
    def start(cls, trainer: Trainer, resume_from: str | None, trial: Any) -> _Run:
        start_time = time.perf_counter()
        loader = trainer.get_train_dataloader()
        max_steps, num_train_epochs, per_epoch = num_update_steps(trainer, loader)
        if max_steps <= 0:
            raise ValueError(
                f"num_train_epochs={trainer.args.num_train_epochs} gives 0 training steps; train for more epochs or "
                "set max_steps."
            )
        run = cls(trainer, trial, resume_from, start_time, loader, max_steps, num_train_epochs, per_epoch)
        run.args, run.accelerator = trainer.args, trainer.accelerator
        assert run.accelerator is not None
        run._new_state_and_optimizer()
        run._prepare_model_and_optimizer()
        run._choose_step_variant()
        run._attach_to_trainer()
        return run

    def _new_state_and_optimizer(self) -> None:
        trainer = self.trainer
        # epoch is 0 from here (as transformers' state is): callbacks may format it at on_train_begin; a resume
        # restores it.
        trainer.state = TrainerState(
            epoch=0,
            is_local_process_zero=trainer.is_local_process_zero(),
            is_world_process_zero=trainer.is_world_process_zero(),
        )
        trainer.state.init_training_references(trainer, self.max_steps, self.num_train_epochs, self.trial)
        trainer.state.compute_steps(self.args, self.max_steps)
        trainer.control = TrainerControl()
        if getattr(trainer, "_created_lr_scheduler", False):
            # A schedule we built for a previous train() ended at lr=0 (linear) or elsewhere: start a new one.
            trainer.lr_scheduler = None
            trainer._created_lr_scheduler = False
        trainer.create_optimizer_and_scheduler(num_training_steps=self.max_steps)

    def _prepare_model_and_optimizer(self) -> None:
        trainer, args, accelerator = self.trainer, self.args, self.accelerator
        if args.activation_checkpointing:
            _enable_activation_checkpointing(trainer.model, args.activation_checkpointing_kwargs or None)
        self.neftune = (
            _neftune_hook(trainer.model, args.neftune_noise_alpha) if args.neftune_noise_alpha else None
        )
        built = trainer.optimizer if trainer._created_optimizer else None
        if built is not None and not built.state and wrapper_only_forwards(accelerator):
            # An optimizer we just built, with no state for accelerate to place on the device, and a wrapper that
            # would only forward its calls (see wrapper_only_forwards): accelerate's preparation of it (a package
            # search and a state_dict round trip, ~0.1 ms per trial) is skipped and the loop steps it directly.
            self.model = accelerator.prepare(trainer._wrap_model(trainer.model))
            self.step_optimizer, self.clip = built, torch.nn.utils.clip_grad_norm_
        else:
            # Several processes, FSDP, DeepSpeed, XLA or a gradient scaler: accelerate's wrappers step and clip.
            self.model, optimizer = accelerator.prepare(trainer._wrap_model(trainer.model), trainer.optimizer)
            self.step_optimizer = direct_optimizer(accelerator, optimizer)
            # Where accelerate's wrappers only forward (see direct_optimizer), clip with torch directly too.
            self.clip = (
                torch.nn.utils.clip_grad_norm_
                if self.step_optimizer is not optimizer
                else accelerator.clip_grad_norm_
            )

    def _choose_step_variant(self) -> None:
        trainer, accelerator = self.trainer, self.accelerator
        accum = self.accum = self.args.gradient_accumulation_steps
        # Single process with nothing for accelerate to do (see accelerate_only_forwards): backward without
        # accelerate's wrapper, and, when the train loader is a plain one (ours is, then), the loop decides gradient
        # synchronization itself instead of entering accelerator.accumulate() per micro-batch. Several processes,
        # XLA, DeepSpeed, FSDP or a gradient scaler keep accelerate's prepare/accumulate/backward as they are.
        self.plain = accelerate_only_forwards(accelerator)
        trainer._plain_backward = self.plain
        fast_loop = self.plain and getattr(self.loader, "gradient_state", None) is None
        self.move_batches = fast_loop and accelerator.device.type != "cpu"
        # transformers (4.46+) calls training_step(model, inputs, num_items_in_batch); an override written for it may
        # require the third argument, one written for older versions may not take it.
        self.step_takes_items = _positional_parameters(trainer.training_step) >= 3
        trainer.model_accepts_loss_kwargs = accepts_loss_kwargs(trainer.model)
        # Token-count normalisation (transformers 4.46+): each accumulation window is read ahead and its label tokens
        # counted (see _loss). Where it cannot change the loss (one micro-batch per step in one process, the model's
        # mean being that count's quotient already) the loop does not count, except for compute_loss_func, which
        # transformers always hands the count.
        self.counting = self.step_takes_items and (
            trainer.compute_loss_func is not None
            or (trainer.model_accepts_loss_kwargs and (accum > 1 or accelerator.num_processes > 1))
        )
        self.shift_count = self.counting and loss_shifts_labels(trainer.model)
        # Batches come flagged (batch, is_last) and the loop decides synchronization itself: the fast loop, and a
        # counting one (reading a window ahead would end accelerate's accumulate() windows early).
        self.flagged = fast_loop or self.counting
        if fast_loop:
            self.feed = self._feed_plain
        else:
            self.feed = self._feed_windowed if self.counting else self._feed_accelerate
        # Schedule-free optimizers train and evaluate different weights: train() before each step, as transformers.
        to_train: Any = getattr(trainer.optimizer, "train", None)
        self.to_train = to_train if callable(to_train) else None

    def _attach_to_trainer(self) -> None:
        trainer, args = self.trainer, self.args
        trainer.model_wrapped = self.model
        handler = trainer.callback_handler
        handler.model = trainer.model
        handler.optimizer = trainer.optimizer
        handler.lr_scheduler = trainer.lr_scheduler
        handler.train_dataloader = self.loader
        _log_running_training(trainer, self.loader, self.max_steps, self.num_train_epochs)
        self.debug_hook = None
        if "underflow_overflow" in args.debug:
            from ._debug import DebugUnderflowOverflow

            self.debug_hook = DebugUnderflowOverflow(trainer.model)
        self.count_tokens = args.include_num_input_tokens_seen != "no" or args.include_tokens_per_second
        # The model's own flop count (transformers' floating_point_ops) or 6 x parameters x tokens; see
        # floating_point_ops.
        trainer._flops_of = None  # floating_point_ops looks at this run's model afresh
        trainer._train_modules = None  # and training_step at its modules
        trainer._past = None
        trainer._last_saved_step = -1

    def resume(self) -> None:
        """Take the checkpoint's optimizer, schedule, state and callbacks over, and count what to skip."""
        trainer, checkpoint = self.trainer, self.resume_from
        trainer._resumed_step = 0
        if checkpoint is None:
            return
        ckpt.load_optimizer_and_scheduler(trainer, checkpoint)
        saved = TrainerState.load_from_json(os.path.join(checkpoint, ckpt.TRAINER_STATE_NAME))
        warn_if_arguments_differ(trainer, saved)
        restore_state(trainer, saved, self.max_steps)
        if self.per_epoch is not None:
            self.epochs_trained = trainer.state.global_step // self.per_epoch
            self.steps_to_skip = (
                trainer.state.global_step % self.per_epoch
            ) * self.args.gradient_accumulation_steps
            if self.args.ignore_data_skip:
                self.steps_to_skip = 0  # the resumed epoch sees its data from the start again
        trainer._load_callback_state()  # from the state restore_state took over

    def begin(self) -> None:
        trainer, args = self.trainer, self.args
        trainer.control = trainer.callback_handler.on_train_begin(args, trainer.state, trainer.control)
        if args.eval_on_start and trainer.state.global_step == 0:
            # as transformers' eval_on_start
            trainer._evaluate(self.trial, trainer._ignore_keys_for_eval, skip_scheduler=True)
        self.tr_loss = torch.zeros((), device=self.accelerator.device)
        self.loss_sum = 0.0
        trainer._total_loss_scalar = 0.0
        trainer._globalstep_last_logged = trainer.state.global_step
        trainer._grad_norm = None
        self.total_batched_samples = 0
        self.model.zero_grad(set_to_none=True)

    def train_epoch(self, epoch: int) -> None:
        trainer = self.trainer
        iterator, batches = self._begin_epoch(epoch)
        step = -1
        for step, item in enumerate(batches):
            self._train_micro_batch(step, item)
            if trainer.control.should_epoch_stop or trainer.control.should_training_stop:
                break
        release_dataloader(iterator)
        if step < 0:
            logger.warning("The train dataloader yielded no batches in epoch %d; stopping.", epoch)
            trainer.control.should_training_stop = True
        trainer.control = trainer.callback_handler.on_epoch_end(self.args, trainer.state, trainer.control)
        self._log_save_evaluate()

    def _begin_epoch(self, epoch: int) -> tuple[Any, Any]:
        """Seed and position the epoch's data (skipping what a resumed epoch trained already); return the loader's
        iterator (to release after the epoch) and the batches the epoch trains on."""
        trainer, accelerator, accum = self.trainer, self.accelerator, self.accum
        self.epoch, self.skipped, self.step_started = epoch, 0, False
        set_loader_epoch(self.loader, epoch, data_seed(trainer))
        trainer._past = None  # past_index: memories do not cross epochs
        iterator: Any = self.loader
        if self.steps_to_skip > 0 and epoch == self.epochs_trained:
            iterator = accelerator.skip_first_batches(self.loader, self.steps_to_skip)
            self.skipped, self.steps_to_skip = self.steps_to_skip, 0
        self.restore_rng_at_first_batch = False
        if self.resume_from is not None and epoch == self.epochs_trained:
            if self.skipped:
                # Mid-epoch checkpoint: the original run had already built this epoch's iterator (which draws
                # the loader's base seed from the global RNG) when it saved, so restore once ours exists too.
                self.restore_rng_at_first_batch = True
            else:
                ckpt.load_rng_state(self.resume_from, accelerator.process_index)
        try:
            self.steps_in_epoch = len(self.loader)
        except TypeError:
            self.steps_in_epoch = self.max_steps * accum
        # The epoch's last accumulation window is shorter when accum does not divide its batches; its losses are
        # divided by its own size, as transformers' current_gradient_accumulation_steps. Positions count from the
        # epoch's start, so a resumed epoch (which skips whole windows) has the same windows.
        self.last_window_start = self.steps_in_epoch - self.steps_in_epoch % accum
        trainer.control = trainer.callback_handler.on_epoch_begin(self.args, trainer.state, trainer.control)
        # The loop-decided variants read one batch ahead, as accelerate's loader does (the same order of data loading and
        # training, so the global RNG is drawn in the same sequence), to know the epoch's last batch.
        batches: Any = flag_last(iterator) if self.flagged else iterator
        if self.counting:
            batches = counted_windows(batches, accum, self.shift_count, trainer, self.skipped)
        return iterator, batches

    def _train_micro_batch(self, step: int, item: Any) -> None:
        """Count the batch, run the training step on it, and step the optimizer where its window ends."""
        trainer, handler = self.trainer, self.trainer.callback_handler
        item, num_items = item if self.counting else (item, None)
        if self.restore_rng_at_first_batch:
            assert self.resume_from is not None  # the flag is only set when resuming
            ckpt.load_rng_state(self.resume_from, self.accelerator.process_index)
            self.restore_rng_at_first_batch = False
        self._count_batch(item[0] if self.flagged else item)
        if not self.step_started:
            self._begin_step(step)
        inputs, sync, context = self.feed(step, item)
        if self.to_train is not None:
            self.to_train()  # schedule-free: the training weights (an evaluation switched to eval)
        with context:
            if self.step_takes_items:
                self._add_loss(trainer.training_step(self.model, inputs, num_items))
            else:
                self._add_loss(trainer.training_step(self.model, inputs))
            listening = handler.step_listeners()
            if sync if sync is not None else self.accelerator.sync_gradients:
                self._optimizer_step(step, listening)
            elif "on_substep_end" in listening:
                trainer.control = handler.on_substep_end(self.args, trainer.state, trainer.control)

    def _count_batch(self, inputs: Any) -> None:
        trainer, args = self.trainer, self.args
        self.total_batched_samples += 1
        if self.count_tokens:
            tokens = input_tokens(trainer, inputs, args.include_num_input_tokens_seen)
            self.tokens_this_run += tokens
            if args.include_num_input_tokens_seen != "no":
                trainer.state.num_input_tokens_seen += tokens
        trainer.state.total_flos += trainer.floating_point_ops(inputs) * self.accelerator.num_processes

    def _begin_step(self, step: int) -> None:
        """The first micro-batch of an optimizer step: on_step_begin, and the size of this accumulation window."""
        trainer, handler = self.trainer, self.trainer.callback_handler
        # Step events that no callback overrides are not dispatched (see step_listeners); which those are is asked
        # again after any callback ran and after the training step, which may add callbacks.
        if "on_step_begin" in handler.step_listeners():
            trainer.control = handler.on_step_begin(self.args, trainer.state, trainer.control)
        else:
            trainer.control._new_step()
        self.step_started = True
        position = step + self.skipped
        trainer.current_gradient_accumulation_steps = (
            self.accum if position < self.last_window_start else self.steps_in_epoch - self.last_window_start
        )

    # The step variants: (inputs, whether this micro-batch ends its window, the context its step runs in). The
    # window's end is None where accelerate's accumulate() decides it (read after entering the context).

    def _feed_plain(self, step: int, item: Any) -> tuple[Any, bool | None, Any]:
        """One process and nothing for accelerate to do: the loop decides synchronization and moves the batch."""
        inputs, is_last = item
        sync = self._window_ends(step, is_last)
        self.accelerator.sync_gradients = sync  # kept truthful for code that reads it
        if self.move_batches:
            inputs = send_to_device(inputs, self.accelerator.device)
        return inputs, sync, _NO_CONTEXT

    def _feed_windowed(self, step: int, item: Any) -> tuple[Any, bool | None, Any]:
        """Windows read ahead to count their label tokens, with accelerate's wrappers: what accumulate() does, with
        the window decided here (transformers' way since it reads ahead)."""
        inputs, is_last = item
        sync = self._window_ends(step, is_last)
        self.accelerator.gradient_state._set_sync_gradients(sync)
        return inputs, sync, _NO_CONTEXT if sync else self.accelerator.no_sync(self.model)

    def _feed_accelerate(self, step: int, item: Any) -> tuple[Any, bool | None, Any]:
        """accelerate decides (several processes, FSDP, DeepSpeed, XLA, a gradient scaler, its own loaders)."""
        return item, None, self.accelerator.accumulate(self.model)

    def _window_ends(self, step: int, is_last: bool) -> bool:
        # accelerate's rule: every accum-th micro-batch, and the last one of the epoch. A resume skips whole
        # optimizer steps (a multiple of accum batches), so counting from the epoch's first yielded batch agrees
        # with counting from the epoch's start.
        return is_last or (step + 1) % self.accum == 0

    def _add_loss(self, loss_step: torch.Tensor) -> None:
        if not self.args.logging_nan_inf_filter:
            self.tr_loss = self.tr_loss + loss_step
            return
        # The value is read for the check anyway (math.isfinite: torch.isfinite's test on this scalar, without a
        # kernel), so it is summed as a Python float, without an add kernel per step; tr_loss takes the sum before
        # anything reads it.
        value = loss_step.item()
        if math.isfinite(value):
            self.loss_sum += value
        else:
            # Count a NaN/inf step as the running mean so one bad batch does not poison the log.
            trainer = self.trainer
            self.tr_loss, self.loss_sum = self.tr_loss + self.loss_sum, 0.0
            self.tr_loss = self.tr_loss + self.tr_loss / (
                1 + trainer.state.global_step - trainer._globalstep_last_logged
            )

    def _optimizer_step(self, step: int, listening: frozenset[str]) -> None:
        """The window's last micro-batch: clip, step the optimizer and the schedule, end the step."""
        trainer, args, handler = self.trainer, self.args, self.trainer.callback_handler
        if args.max_grad_norm is not None and args.max_grad_norm > 0:
            trainer._grad_norm = self.clip(self.model.parameters(), args.max_grad_norm)
        if "on_pre_optimizer_step" in listening:
            trainer.control = handler.on_pre_optimizer_step(args, trainer.state, trainer.control)
            listening = handler.step_listeners()
        self.step_optimizer.step()
        if "on_optimizer_step" in listening:
            trainer.control = handler.on_optimizer_step(args, trainer.state, trainer.control)
        # Only a gradient scaler skips steps, and the plain path has none.
        if (self.plain or not self.accelerator.optimizer_step_was_skipped) and not isinstance(
            trainer.lr_scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau
        ):
            trainer.lr_scheduler.step()
        self.step_optimizer.zero_grad(set_to_none=True)
        trainer.state.global_step += 1
        trainer.state.epoch = self.epoch + (step + 1 + self.skipped) / self.steps_in_epoch
        if args.torch_empty_cache_steps and trainer.state.global_step % args.torch_empty_cache_steps == 0:
            clear_device_cache()
        control = trainer.control = handler.on_step_end(args, trainer.state, trainer.control)
        if control.should_log or control.should_evaluate or control.should_save:
            self._log_save_evaluate()
        self.step_started = False

    def _log_save_evaluate(self) -> None:
        trainer = self.trainer
        self.tr_loss, self.loss_sum = self.tr_loss + self.loss_sum, 0.0
        trainer._maybe_log_save_evaluate(
            self.tr_loss,
            trainer._grad_norm,
            self.model,
            self.trial,
            self.epoch,
            trainer._ignore_keys_for_eval,
            self.start_time,
        )

    def finish(self) -> TrainOutput:
        """Load the best model if asked, report the run's metrics, rotate checkpoints, end the callbacks' run."""
        trainer, args = self.trainer, self.args
        trainer._total_loss_scalar += float(gather_mean(trainer, self.tr_loss))
        train_loss = trainer._total_loss_scalar / max(trainer.state.global_step - trainer._resumed_step, 1)
        trainer.store_flos()
        if args.load_best_model_at_end and trainer.state.best_model_checkpoint is not None:
            trainer._load_best_model()
        num_samples = (
            self.total_batched_samples * args.per_device_train_batch_size * self.accelerator.num_processes
        )
        metrics = speed_metrics(
            "train", self.start_time, num_samples=num_samples, num_steps=trainer.state.global_step
        )
        if args.include_tokens_per_second:
            runtime = metrics["train_runtime"]
            metrics["train_tokens_per_second"] = (
                round(self.tokens_this_run / runtime, 3) if runtime > 0 else 0.0
            )
        metrics["total_flos"] = trainer.state.total_flos
        metrics["train_loss"] = train_loss
        trainer._memory_tracker.stop_and_update_metrics("train", metrics)
        if self.neftune is not None:
            self.neftune.remove()
        metrics.update(
            getattr(trainer, "_init_mem_metrics", None) or {}
        )  # the init_ stage, as transformers reports it
        trainer._init_mem_metrics = {}
        trainer.log(metrics)
        if self.debug_hook is not None:
            self.debug_hook.remove()
        trainer._past = None
        if args.save_total_limit is not None and ckpt.writes_checkpoints(trainer):
            ckpt.rotate_checkpoints(trainer, args.output_dir)
        trainer.control = trainer.callback_handler.on_train_end(args, trainer.state, trainer.control)
        trainer.callback_handler.train_dataloader = None
        return TrainOutput(trainer.state.global_step, train_loss, metrics)


_NO_CONTEXT = nullcontext()


def _enable_activation_checkpointing(model: Any, kwargs: Any) -> None:
    # transformers 5 renamed it activation_checkpointing_enable (the old name warns); older models have only
    # gradient_checkpointing_enable.
    enable = getattr(model, "activation_checkpointing_enable", None)
    if enable is not None:
        enable(activation_checkpointing_kwargs=kwargs)
        return
    enable = getattr(model, "gradient_checkpointing_enable", None)
    if enable is None:
        raise ValueError(
            f"activation_checkpointing=True (gradient_checkpointing) needs a model with "
            f"gradient_checkpointing_enable() (a transformers model), but {type(model).__name__} has "
            "none; use torch.utils.checkpoint in its forward and pass activation_checkpointing=False."
        )
    enable(gradient_checkpointing_kwargs=kwargs)


def restore_state(trainer: Trainer, saved: TrainerState, max_steps: int) -> None:
    keep = {
        "max_steps",
        "num_train_epochs",
        "train_batch_size",
        "is_hyper_param_search",
        "trial_name",
        "trial_params",
        "is_local_process_zero",
        "is_world_process_zero",
        "logging_steps",
        "eval_steps",
        "save_steps",
    }
    for field_name in (
        "epoch",
        "global_step",
        "num_input_tokens_seen",
        "total_flos",
        "log_history",
        "best_metric",
        "best_global_step",
        "best_model_checkpoint",
        "stateful_callbacks",
    ):
        if field_name not in keep:
            setattr(trainer.state, field_name, copy.deepcopy(getattr(saved, field_name)))
    trainer._resumed_step = saved.global_step
    if saved.global_step > max_steps:
        logger.warning(
            "The checkpoint is at step %d, past max_steps=%d; training will stop at once.",
            saved.global_step,
            max_steps,
        )


def restore_callback_states(trainer: Trainer, states: Mapping[str, Any]) -> list[str]:
    """Rebuild the stateful callbacks from the checkpoint, as transformers does: each callback of a saved class is
    replaced (in place, keeping the order) by ``from_state`` of its saved state, so its constructor arguments
    (an early-stopping patience) come back with its counters, and ``trainer.control`` takes its saved switches.
    Returns the saved callback classes this trainer lacks (left out; the trainer warns about them)."""
    callbacks = trainer.callback_handler.callbacks
    missing = []
    for name, saved in states.items():
        if name == "TrainerControl":
            continue
        saved_list = saved if isinstance(saved, list) else [saved]
        same = [
            i
            for i, cb in enumerate(callbacks)
            if isinstance(cb, ExportableState) and type(cb).__name__ == name
        ]
        if not same:
            missing.append(name)
            continue
        for position, state in zip(same, saved_list):
            callbacks[position] = cast(Any, type(callbacks[position])).from_state(state)
    if "TrainerControl" in states:
        for key, value in states["TrainerControl"].get("args", {}).items():
            setattr(trainer.control, key, value)
    return sorted(missing)


def warn_if_arguments_differ(trainer: Trainer, saved: TrainerState) -> None:
    """Name the intervals and batch size that differ from the checkpoint's (as transformers warns on resume)."""
    state = trainer.state
    differ = [
        f"{label}: {getattr(state, name)} (from args) != {getattr(saved, name)} (from trainer_state.json)"
        for name, label in (
            ("logging_steps", "logging_steps"),
            ("eval_steps", "eval_steps"),
            ("save_steps", "save_steps"),
            ("train_batch_size", "per_device_train_batch_size"),
        )
        if getattr(saved, name) is not None and getattr(state, name) != getattr(saved, name)
    ]
    if differ:  # transformers' wording, which its tests read
        logger.warning(
            "Warning: The following arguments do not match the ones in the `trainer_state.json` within the checkpoint "
            "directory: " + "".join(f"\n\t{d}" for d in differ)
        )


def log_save_evaluate(
    trainer: Trainer,
    tr_loss: torch.Tensor,
    grad_norm: Any,
    model: nn.Module,
    trial: Any,
    ignore_keys: list[str] | None,
    start_time: float | None,
    learning_rate: float | None,
) -> None:
    """transformers' ``_maybe_log_save_evaluate``: log the mean loss since the last log (``tr_loss`` is reset in
    place), evaluate, save, as `control` asks."""
    control = trainer.control
    if control.should_log and trainer.state.global_step > trainer._globalstep_last_logged:
        logs: dict[str, float] = {}
        tr_loss_scalar = float(gather_mean(trainer, tr_loss))
        steps = trainer.state.global_step - trainer._globalstep_last_logged
        logs["loss"] = tr_loss_scalar / steps  # unrounded, as transformers 5 logs it
        if grad_norm is not None:
            logs["grad_norm"] = float(grad_norm)
        logs["learning_rate"] = learning_rate if learning_rate is not None else get_learning_rate(trainer)
        trainer._total_loss_scalar += tr_loss_scalar
        tr_loss.zero_()
        trainer._globalstep_last_logged = trainer.state.global_step
        trainer.store_flos()
        # transformers adds the speed metrics to a step's log only when it counts input tokens.
        trainer.log(logs, start_time if trainer.args.include_num_input_tokens_seen != "no" else None)
    trainer._step_metrics = None
    if control.should_evaluate:
        trainer._step_metrics = trainer._evaluate(trial, ignore_keys)
    if trainer.control.should_save:
        trainer._save_checkpoint(model, trial)
        trainer.control = trainer.callback_handler.on_save(trainer.args, trainer.state, trainer.control)
    trainer._step_metrics = None


def evaluate_and_step_plateau(
    trainer: Trainer, ignore_keys: list[str] | None, skip_scheduler: bool
) -> dict[str, float]:
    metrics = evaluate_during_training(trainer, ignore_keys)
    if not skip_scheduler and isinstance(trainer.lr_scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
        name = trainer.args.metric_for_best_model or "loss"
        key = name if name.startswith("eval_") else f"eval_{name}"
        if key in metrics:
            trainer.lr_scheduler.step(metrics[key])
    return metrics


def evaluate_during_training(trainer: Trainer, ignore: list[str] | None) -> dict[str, float]:
    if isinstance(trainer.eval_dataset, Mapping):
        metrics: dict[str, float] = {}
        for name, dataset in trainer.eval_dataset.items():
            metrics.update(
                trainer.evaluate(eval_dataset=dataset, ignore_keys=ignore, metric_key_prefix=f"eval_{name}")
            )
        track_best(trainer, metrics)
    else:
        trainer._eval_in_training = True
        try:
            metrics = trainer.evaluate(ignore_keys=ignore)
        finally:
            trainer._eval_in_training = False
    return metrics


def track_best(trainer: Trainer, metrics: Mapping[str, float]) -> None:
    if trainer.args.metric_for_best_model:
        is_new_best = update_best_metric(trainer, metrics)
        if is_new_best and trainer.args.save_strategy == SaveStrategy.BEST:
            trainer.control.should_save = True
        elif (
            is_new_best
            and trainer._last_saved_step == trainer.state.global_step
            and not trainer.control.should_save
        ):
            # This step was saved before this evaluation (saving by steps, evaluating by epoch): that checkpoint
            # holds these weights, so it is the best one (as transformers points at it).
            trainer.state.best_model_checkpoint = os.path.join(
                trainer.args.output_dir, f"{ckpt.CHECKPOINT_PREFIX}-{trainer.state.global_step}"
            )


def update_best_metric(trainer: Trainer, metrics: Mapping[str, float]) -> bool:
    name = trainer.args.metric_for_best_model
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
    best = trainer.state.best_metric
    greater = bool(trainer.args.greater_is_better)
    if best is None or (value > best if greater else value < best):
        trainer.state.best_metric = value
        trainer.state.best_global_step = trainer.state.global_step
        return True
    return False


def get_learning_rate(trainer: Trainer) -> float:
    if trainer.optimizer is None:
        return 0.0
    return float(trainer.optimizer.param_groups[0]["lr"])


def gather_mean(trainer: Trainer, tensor: torch.Tensor) -> torch.Tensor:
    assert trainer.accelerator is not None
    if trainer.accelerator.num_processes > 1:
        return trainer.accelerator.gather(tensor.detach().reshape(1)).mean()
    return tensor.detach()


def direct_optimizer(accelerator: Any, optimizer: Any) -> Any:
    """The optimizer to step: the bare torch one when accelerate's wrapper would only forward the call.

    Without a gradient scaler and outside XLA/DeepSpeed/FSDP, ``AcceleratedOptimizer.step`` and ``zero_grad``
    only forward to the wrapped optimizer (the loop calls them when gradients are synchronized), yet each call
    pays for a package lookup (``is_lomo_available``: two ``importlib`` searches of sys.path) or an
    ``inspect.signature``. On a small model that was over a millisecond per step, as much as the step itself.
    In the same setting (and without FSDP) ``Accelerator.clip_grad_norm_`` is ``torch.nn.utils.clip_grad_norm_``
    after a torch version parse per call; the loop then clips with torch directly.
    """
    from accelerate.optimizer import AcceleratedOptimizer

    if (
        type(optimizer) is AcceleratedOptimizer  # a subclass may do more in step()
        and optimizer.scaler is None
        and wrapper_only_forwards(accelerator)
    ):
        return optimizer.optimizer
    return optimizer


def wrapper_only_forwards(accelerator: Any) -> bool:
    """True where accelerate's optimizer wrapper would only forward ``step``/``zero_grad`` (called when gradients are
    synchronized) and its ``clip_grad_norm_`` is torch's: no gradient scaler, not XLA, DeepSpeed, Megatron or FSDP."""
    from accelerate.utils import DistributedType

    plain_types = (DistributedType.NO, DistributedType.MULTI_CPU, DistributedType.MULTI_GPU)
    return (
        getattr(accelerator, "scaler", None) is None
        and accelerator.distributed_type in plain_types
        and os.environ.get("ACCELERATE_USE_FSDP", "false").lower() != "true"
    )


def extract_loss(outputs: Any) -> torch.Tensor | None:
    if type(outputs) is dict or isinstance(
        outputs, Mapping
    ):  # a dict first: Mapping's ABC check is a Python call
        return outputs.get("loss")
    if isinstance(outputs, list | tuple):
        return outputs[0] if outputs and isinstance(outputs[0], torch.Tensor) else None
    if isinstance(outputs, torch.Tensor) and outputs.dim() == 0:
        return outputs
    return getattr(outputs, "loss", None)


def input_tokens(
    trainer: Trainer,
    inputs: Any,
    how: bool | str,
    gather: bool = True,
    warn: bool = True,
    name: str | None = None,
) -> int:
    """Tokens in a batch, summed over the processes: the elements of the model's main input (``input_ids``
    unless the model names another ``main_input_name``; ``name`` when the caller looked it up already); with
    ``how="non_padding"`` the ones of its ``attention_mask`` when there is one. A batch without that input
    counts its examples, with a warning once."""
    if name is None:
        name = getattr(trainer.model, "main_input_name", "input_ids")
    value = inputs.get(name) if type(inputs) is dict or isinstance(inputs, Mapping) else None
    if isinstance(value, torch.Tensor):
        mask = inputs.get("attention_mask") if how == "non_padding" else None
        count = int(mask.sum()) if isinstance(mask, torch.Tensor) else value.numel()
    else:
        if warn and not trainer._warned_no_tokens:
            logger.warning(
                "Counting input tokens needs the model's main input %r in the batch, which has none; counting "
                "examples instead (set the model's main_input_name to the batch key that holds the tokens).",
                name,
            )
            trainer._warned_no_tokens = True
        count = batch_size_of(inputs)
    accelerator = trainer.accelerator
    if gather and accelerator is not None and accelerator.num_processes > 1:
        total = accelerator.gather(torch.tensor([count], device=accelerator.device)).sum()
        return int(total)
    return count


def _log_running_training(trainer: Trainer, loader: Any, max_steps: int, num_train_epochs: int) -> None:
    args = trainer.args
    if not logger.isEnabledFor(logging.INFO):
        return
    world = trainer.accelerator.num_processes if trainer.accelerator is not None else 1
    try:
        examples: Any = len(loader.dataset)
    except (TypeError, AttributeError):
        examples = "unknown (iterable dataset)"
    logger.info("***** Running training *****")
    logger.info("  Num examples = %s", examples)
    logger.info("  Num Epochs = %s", num_train_epochs)
    logger.info("  Instantaneous batch size per device = %d", args.per_device_train_batch_size)
    logger.info(
        "  Total train batch size (w. parallel, distributed & accumulation) = %d",
        args.per_device_train_batch_size * args.gradient_accumulation_steps * world,
    )
    logger.info("  Gradient Accumulation steps = %d", args.gradient_accumulation_steps)
    logger.info("  Total optimization steps = %d", max_steps)
    logger.info("  Number of trainable parameters = %d", trainer.get_num_trainable_parameters())


def output_at(outputs: Any, index: int) -> Any:
    """``outputs[index]`` of a tuple, or of a mapping's values (transformers' ModelOutput indexes the same way)."""
    if isinstance(outputs, Mapping):
        return list(outputs.values())[index]
    return outputs[index]


def counted_windows(batches: Any, accum: int, shift: bool, trainer: Trainer, skipped: int) -> Any:
    """Yield ``((batch, is_last), num_items_in_batch)``, reading each accumulation window ahead to count its label
    tokens (transformers' ``get_batch_samples``); summed over the processes with ``average_tokens_across_devices``.
    Windows start every ``accum`` batches from the epoch's start; ``skipped`` (a resume) is a multiple of it."""
    assert skipped % accum == 0
    window: list[Any] = []
    for item in batches:
        window.append(item)
        if len(window) == accum or item[1]:
            yield from _with_count(window, _window_count(trainer, [e[0] for e in window], shift))
            window = []
    if window:
        yield from _with_count(window, _window_count(trainer, [e[0] for e in window], shift))


def _with_count(window: list[Any], count: Any) -> Any:
    for entry in window:
        yield entry, count


def _window_count(trainer: Trainer, batches: list[Any], shift: bool) -> Any:
    count = count_label_tokens(batches, shift)
    accelerator = trainer.accelerator
    if count is None or accelerator is None:
        return count
    count = count.to(accelerator.device)
    if trainer.args.average_tokens_across_devices and accelerator.num_processes > 1:
        count = accelerator.gather(count.reshape(1)).sum()
    return count


def _neftune_hook(model: Any, alpha: float) -> Any:
    """NEFTune: noise on the input embeddings while training (uniform, scale alpha / sqrt(length x hidden))."""
    get = getattr(model, "get_input_embeddings", None)
    embeddings = get() if get is not None else None
    if embeddings is None:
        raise ValueError(
            f"neftune_noise_alpha={alpha} needs a model with get_input_embeddings() (a transformers model), but "
            f"{type(model).__name__} has none; pass neftune_noise_alpha=None."
        )

    def add_noise(module: Any, inputs: Any, output: torch.Tensor) -> torch.Tensor:
        if not module.training or output.dim() < 3:
            return output
        scale = alpha / math.sqrt(output.size(1) * output.size(2))
        return output + torch.zeros_like(output).uniform_(-scale, scale)

    return embeddings.register_forward_hook(add_noise)


def _positional_parameters(method: Any) -> int:
    """How many positional arguments a bound method takes besides its instance (a large number for ``*args``);
    read once per function (a search trains every trial with the same ``training_step``)."""
    function = getattr(method, "__func__", None)
    return _function_positionals(function) - 1 if function is not None else _function_positionals(method)


@functools.lru_cache(maxsize=64)
def _function_positionals(function: Any) -> int:
    try:
        params = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):  # no signature to read: the two arguments every training_step takes
        return 2
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return 1 << 10
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
