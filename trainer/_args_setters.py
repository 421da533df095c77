"""`TrainingArguments`' grouped setters (``args.set_training(...)``, ``args.set_evaluate(...)``, ...).

As in transformers, each sets a group of related fields under shorter names, changes the arguments in place and
returns them, so that calls chain: ``TrainingArguments("out").set_training(learning_rate=1e-4).set_save("epoch")``.
Unlike a plain attribute assignment, the new values are validated (and the fields derived from them derived
again) exactly as the constructor does; a refused value leaves the arguments as they were.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["GroupedSetters"]


def _check_steps(group: str, strategy: Any, steps: Any) -> None:
    # transformers refuses this in the setters, where the constructor would fall back on other fields.
    if str(getattr(strategy, "value", strategy)) == "steps" and steps == 0:
        raise ValueError(f"{group}(strategy='steps') needs a positive steps, got steps=0; pass e.g. steps=500.")


class GroupedSetters:
    """The ``set_*`` methods of `TrainingArguments` (see the module docstring)."""

    def _set(self, **changes: Any) -> Self:
        updated = self.replace(**changes)  # type: ignore[attr-defined]  # TrainingArguments.replace: validated
        self.__dict__.update(updated.__dict__)
        return self

    def set_training(self, learning_rate: float = 5e-5, batch_size: int = 8, weight_decay: float = 0.0,
                     num_epochs: float = 3, max_steps: int = -1, gradient_accumulation_steps: int = 1,
                     seed: int = 42, gradient_checkpointing: bool = False,
                     activation_checkpointing: bool | None = None) -> Self:
        """Training: learning rate, per-device batch size, weight decay, epochs or steps, accumulation, seed and
        gradient checkpointing (``activation_checkpointing``, transformers 5's name, wins when given). Sets
        ``do_train``."""
        if activation_checkpointing is not None:
            gradient_checkpointing = activation_checkpointing
        return self._set(do_train=True, learning_rate=learning_rate, per_device_train_batch_size=batch_size,
                         weight_decay=weight_decay, num_train_epochs=num_epochs, max_steps=max_steps,
                         gradient_accumulation_steps=gradient_accumulation_steps, seed=seed,
                         gradient_checkpointing=gradient_checkpointing)

    def set_evaluate(self, strategy: Any = "no", steps: int = 500, batch_size: int = 8,
                     accumulation_steps: int | None = None, delay: float | None = None, loss_only: bool = False,
                     jit_mode: bool = False) -> Self:
        """Evaluation during training: strategy, interval, per-device batch size, accumulation, delay, loss only.
        ``do_eval`` follows the strategy."""
        _check_steps("set_evaluate", strategy, steps)
        return self._set(eval_strategy=strategy, eval_steps=steps, per_device_eval_batch_size=batch_size,
                         eval_accumulation_steps=accumulation_steps, eval_delay=0 if delay is None else delay,
                         prediction_loss_only=loss_only, jit_mode_eval=jit_mode,
                         do_eval=str(getattr(strategy, "value", strategy)) != "no")

    def set_testing(self, batch_size: int = 8, loss_only: bool = False, jit_mode: bool = False) -> Self:
        """Prediction: per-device batch size and loss only. Sets ``do_predict``."""
        return self._set(do_predict=True, per_device_eval_batch_size=batch_size, prediction_loss_only=loss_only,
                         jit_mode_eval=jit_mode)

    def set_save(self, strategy: Any = "steps", steps: int = 500, total_limit: int | None = None,
                 on_each_node: bool = False) -> Self:
        """Checkpoints: strategy, interval, how many are kept, and whether each node saves."""
        _check_steps("set_save", strategy, steps)
        return self._set(save_strategy=strategy, save_steps=steps, save_total_limit=total_limit,
                         save_on_each_node=on_each_node)

    def set_logging(self, strategy: Any = "steps", steps: int = 500, report_to: Any = "none",
                    level: str = "passive", first_step: bool = False, nan_inf_filter: bool = False,
                    on_each_node: bool = False, replica_level: str = "passive") -> Self:
        """Logging: strategy, interval, integrations, log levels, the first step, the NaN/inf filter. As in
        transformers, the filter is off unless asked for here (the constructor's default is on)."""
        _check_steps("set_logging", strategy, steps)
        return self._set(logging_strategy=strategy, logging_steps=steps, report_to=report_to, log_level=level,
                         logging_first_step=first_step, logging_nan_inf_filter=nan_inf_filter,
                         log_on_each_node=on_each_node, log_level_replica=replica_level)

    def set_push_to_hub(self, model_id: str, *args: Any, **kwargs: Any) -> Self:
        """Refused: this trainer does not push to the Hugging Face Hub (``push_to_hub`` must stay False)."""
        raise NotImplementedError(
            f"set_push_to_hub({model_id!r}) is not supported: this trainer does not push to the Hugging Face Hub. "
            "Save with trainer.save_model(...) and upload the folder with huggingface_hub's upload_folder."
        )

    def set_optimizer(self, name: Any = "adamw_torch", learning_rate: float = 5e-5, weight_decay: float = 0.0,
                      beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-8, args: str | None = None) -> Self:
        """The optimizer: its name (an `OptimizerNames` value), learning rate, weight decay, Adam's betas and
        epsilon, and ``optim_args``."""
        return self._set(optim=name, learning_rate=learning_rate, weight_decay=weight_decay, adam_beta1=beta1,
                         adam_beta2=beta2, adam_epsilon=epsilon, optim_args={} if args is None else args)

    def set_lr_scheduler(self, name: Any = "linear", num_epochs: float = 3.0, max_steps: int = -1,
                         warmup_ratio: float = 0.0, warmup_steps: float = 0) -> Self:
        """The learning-rate schedule: its type, the training length it spans, and the warm-up."""
        return self._set(lr_scheduler_type=name, num_train_epochs=num_epochs, max_steps=max_steps,
                         warmup_ratio=warmup_ratio, warmup_steps=warmup_steps)

    def set_dataloader(self, train_batch_size: int = 8, eval_batch_size: int = 8, drop_last: bool = False,
                       num_workers: int = 0, pin_memory: bool = True, persistent_workers: bool = False,
                       prefetch_factor: int | None = None, auto_find_batch_size: bool = False,
                       ignore_data_skip: bool = False, sampler_seed: int | None = None) -> Self:
        """Data loading: per-device batch sizes, the last batch, workers, pinning, prefetching, resume skipping
        and the sampler's seed (``data_seed``)."""
        return self._set(per_device_train_batch_size=train_batch_size, per_device_eval_batch_size=eval_batch_size,
                         dataloader_drop_last=drop_last, dataloader_num_workers=num_workers,
                         dataloader_pin_memory=pin_memory, dataloader_persistent_workers=persistent_workers,
                         dataloader_prefetch_factor=prefetch_factor, auto_find_batch_size=auto_find_batch_size,
                         ignore_data_skip=ignore_data_skip, data_seed=sampler_seed)
