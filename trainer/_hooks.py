"""transformers' private `Trainer` hooks that subclasses override, honoured: each is a method with transformers'
signature, called where transformers calls it, so an override runs. ``HONOURED`` is the one table of them; any
other known private hook of transformers' Trainer that this trainer never calls is refused when a subclass
overrides it (`check_overrides`, at construction), so no override is ignored silently. Mixed into `trainer.Trainer`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from . import _checkpoint as ckpt
from . import _data

if TYPE_CHECKING:
    from torch import nn
    from torch.utils.data import DataLoader, Dataset

    from ._trainer import Trainer

__all__ = ["HONOURED", "NOT_CALLED", "SEED_ONLY", "PrivateHooks", "check_overrides"]

# Hook -> where this trainer calls it (where transformers does).
HONOURED: dict[str, str] = {
    "_maybe_log_save_evaluate": "after every optimizer step that logs, evaluates or saves, and at each epoch's end",
    "_evaluate": "by _maybe_log_save_evaluate when the step evaluates (then ReduceLROnPlateau steps)",
    "_save_checkpoint": "by _maybe_log_save_evaluate when the step saves",
    "_load_best_model": "at the end of train() with load_best_model_at_end and a best checkpoint",
    "_get_train_sampler": "by get_train_dataloader, for a dataset with a length",
    "_wrap_model": "before train() prepares the model with accelerate (training=True)",
    "_remove_unused_columns": "by get_train_dataloader with remove_unused_columns, for the train dataset",
    "_load_from_checkpoint": "by train() when it resumes from a checkpoint (not under FSDP)",
    "_save": "by save_model and for each checkpoint's model files (not under FSDP)",
    "store_flos": "when a step logs, before each checkpoint and at the end of train()",
    "_prepare_inputs": "by training_step and prediction_step",
    "_load_callback_state": "by train() when it resumes",
}

# transformers' private Trainer hooks this trainer never calls: an override of one is refused at construction.
# Those of transformers 4 (the seed documentation's) that transformers 5 dropped:
SEED_ONLY: tuple[str, ...] = (
    "_activate_neftune",
    "_deactivate_neftune",
    "_gather_and_numpify",
    "_nested_gather",
    "_pad_across_processes",
    "_rotate_checkpoints",
    "_save_tpu",
    "_sorted_checkpoints",
)
NOT_CALLED: tuple[str, ...] = SEED_ONLY + (
    "_clip_grad_norm",
    "_determine_best_metric",
    "_finalize_training",
    "_finish_current_push",
    "_get_collator_with_removed_columns",
    "_get_dataloader",
    "_get_eval_sampler",
    "_get_grad_norm",
    "_get_learning_rate",
    "_get_num_items_in_batch",
    "_get_output_dir",
    "_hp_search_setup",
    "_init_training_state",
    "_issue_warnings_after_load",
    "_load_optimizer_and_scheduler",
    "_load_rng_state",
    "_move_model_to_device",
    "_prepare_for_training",
    "_prepare_input",
    "_push_from_checkpoint",
    "_report_to_hp_search",
    "_run_epoch",
    "_save_optimizer_and_scheduler",
    "_save_rng_state",
    "_set_signature_columns_if_needed",
    "_track_num_input_tokens",
    "_tune_save_checkpoint",
    "get_batch_samples",
)


def check_overrides(trainer: Trainer, base: type) -> None:
    """Refuse a subclass (of ``base``, our `Trainer`) that overrides a transformers private hook this trainer does
    not call."""
    ignored = []
    for cls in type(trainer).__mro__:
        if cls is base:
            break
        ignored += [name for name in NOT_CALLED if name in vars(cls)]
    if ignored:
        raise TypeError(
            f"{type(trainer).__name__} overrides {sorted(set(ignored))}, transformers Trainer hook(s) this trainer never "
            f"calls, so the override would be ignored; the hooks it calls are {sorted(HONOURED)}. Move the "
            "behaviour into one of those (or a callback)."
        )


class PrivateHooks:
    """transformers' private hooks, on the attributes of `trainer.Trainer` (see ``HONOURED``)."""

    def _maybe_log_save_evaluate(
        self: Any,
        tr_loss: torch.Tensor,
        grad_norm: torch.Tensor | float | None,
        model: nn.Module,
        trial: Any,
        epoch: float,
        ignore_keys_for_eval: list[str] | None,
        start_time: float,
        learning_rate: float | None = None,
    ) -> None:
        """Log (resetting ``tr_loss`` in place), evaluate and save as `control` asks (transformers' hook).
        ``start_time`` adds the speed metrics to the log with ``include_num_input_tokens_seen``, as transformers."""
        from . import _loop

        _loop.log_save_evaluate(
            self, tr_loss, grad_norm, model, trial, ignore_keys_for_eval, start_time, learning_rate
        )

    def _evaluate(
        self: Any, trial: Any, ignore_keys_for_eval: list[str] | None, skip_scheduler: bool = False
    ) -> dict[str, float]:
        """Evaluate during training; a ReduceLROnPlateau schedule steps on the result unless ``skip_scheduler``."""
        from . import _loop

        return _loop.evaluate_and_step_plateau(self, ignore_keys_for_eval, skip_scheduler)

    def _save_checkpoint(self: Any, model: nn.Module, trial: Any) -> None:
        """Write ``output_dir/checkpoint-<step>`` (atomically)."""
        self.store_flos()
        ckpt.save_checkpoint(self, model, self._step_metrics)
        self._last_saved_step = self.state.global_step

    def _load_best_model(self: Any) -> None:
        """Load the weights of ``state.best_model_checkpoint`` into the model."""
        ckpt.load_best_model(self)

    def _get_train_sampler(
        self: Any, train_dataset: Dataset | None = None
    ) -> torch.utils.data.Sampler | None:
        """The training sampler for ``train_dataset`` (default: the trainer's), from ``train_sampling_strategy``."""
        return _data.train_sampler(self, train_dataset if train_dataset is not None else self.train_dataset)

    def _wrap_model(
        self: Any, model: nn.Module, training: bool = True, dataloader: DataLoader | None = None
    ) -> nn.Module:
        """The model training runs; accelerate's ``prepare`` then wraps it for the processes (here it is unchanged)."""
        return model

    def _remove_unused_columns(self: Any, dataset: Any, description: str | None = None) -> Any:
        """The dataset the loader reads; the keys ``forward`` does not take are dropped per batch by the collator,
        so the dataset itself is returned unchanged."""
        return dataset

    def _load_from_checkpoint(self: Any, resume_from_checkpoint: str, model: nn.Module | None = None) -> None:
        """Load a checkpoint's weights into ``model`` (default: the trainer's)."""
        ckpt.load_model_weights(model if model is not None else self.model, resume_from_checkpoint)

    def _save(
        self: Any, output_dir: str | None = None, state_dict: dict[str, torch.Tensor] | None = None
    ) -> None:
        """Write the model's files to ``output_dir``: its weights, or ``state_dict`` when given, and its config,
        processing class and training arguments."""
        folder = output_dir if output_dir is not None else self.args.output_dir
        model = self.model if self.accelerator is None else self.accelerator.unwrap_model(self.model)
        ckpt.save_pretrained_files(self, model, folder, weights=state_dict is None)
        if state_dict is not None:
            ckpt.save_state_dict_weights(
                ckpt.tensors_for_saving(state_dict), folder, self.args.max_checkpoint_shard_size
            )
        ckpt.save_training_args(self.args, folder)

    def store_flos(self: Any) -> None:
        """transformers moves its per-process flop count into ``state.total_flos`` here; this trainer adds every
        micro-batch's flops (of all processes) to ``state.total_flos`` as it trains, so there is nothing to move."""
