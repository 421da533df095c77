"""transformers' grouped setters of `TrainingArguments` (``args.set_training(...)``, ``set_evaluate``, ...).

Each takes transformers' parameter names and defaults, sets the fields they stand for, validates the result as the
constructor does (a bad value raises ValueError and leaves the arguments unchanged) and returns the arguments, so
calls chain. Mixed into `trainer.TrainingArguments`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ArgumentSetters"]


class ArgumentSetters:
    """The ``set_*`` methods; `_apply` re-validates through ``replace`` and takes the validated values over."""

    def _apply(self, **changes: Any) -> Any:
        validated = self.replace(**changes)  # type: ignore[attr-defined]
        self.__dict__.update(vars(validated))
        return self

    def set_training(
        self,
        learning_rate: float = 5e-5,
        batch_size: int = 8,
        weight_decay: float = 0,
        num_epochs: float = 3,
        max_steps: int = -1,
        gradient_accumulation_steps: int = 1,
        seed: int = 42,
        activation_checkpointing: bool = False,
        gradient_checkpointing: bool | None = None,
    ) -> Any:
        """Training fields, and ``do_train=True`` (``gradient_checkpointing`` is the older name of the last one)."""
        if gradient_checkpointing is not None:
            activation_checkpointing = gradient_checkpointing
        return self._apply(
            do_train=True,
            learning_rate=learning_rate,
            per_device_train_batch_size=batch_size,
            weight_decay=weight_decay,
            num_train_epochs=num_epochs,
            max_steps=max_steps,
            gradient_accumulation_steps=gradient_accumulation_steps,
            seed=seed,
            activation_checkpointing=activation_checkpointing,
            gradient_checkpointing=activation_checkpointing,
        )

    def set_evaluate(
        self,
        strategy: Any = "no",
        steps: int = 500,
        batch_size: int = 8,
        accumulation_steps: int | None = None,
        delay: float | None = None,
        loss_only: bool = False,
        jit_mode: bool = False,
    ) -> Any:
        """Evaluation fields; ``do_eval`` follows the strategy (``jit_mode``, the seed documentation's, is
        ``jit_mode_eval``: refused when True)."""
        if str(getattr(strategy, "value", strategy)) == "steps" and steps == 0:
            raise ValueError("Setting `strategy` as 'steps' requires a positive value for `steps`.")
        return self._apply(
            eval_strategy=strategy,
            do_eval=str(getattr(strategy, "value", strategy)) != "no",
            eval_steps=steps,
            per_device_eval_batch_size=batch_size,
            eval_accumulation_steps=accumulation_steps,
            eval_delay=0.0 if delay is None else delay,
            prediction_loss_only=loss_only,
            jit_mode_eval=jit_mode,
        )

    def set_testing(self, batch_size: int = 8, loss_only: bool = False, jit_mode: bool = False) -> Any:
        """Prediction fields, and ``do_predict=True``."""
        return self._apply(
            do_predict=True,
            per_device_eval_batch_size=batch_size,
            prediction_loss_only=loss_only,
            jit_mode_eval=jit_mode,
        )

    def set_save(
        self,
        strategy: Any = "steps",
        steps: int = 500,
        total_limit: int | None = None,
        on_each_node: bool = False,
    ) -> Any:
        """Checkpoint fields."""
        if str(getattr(strategy, "value", strategy)) == "steps" and steps == 0:
            raise ValueError("Setting `strategy` as 'steps' requires a positive value for `steps`.")
        return self._apply(
            save_strategy=strategy,
            save_steps=steps,
            save_total_limit=total_limit,
            save_on_each_node=on_each_node,
        )

    def set_logging(
        self,
        strategy: Any = "steps",
        steps: int = 500,
        report_to: str | list[str] = "none",
        level: str = "passive",
        first_step: bool = False,
        nan_inf_filter: bool = False,
        on_each_node: bool = False,
        replica_level: str = "passive",
    ) -> Any:
        """Logging fields."""
        if str(getattr(strategy, "value", strategy)) == "steps" and steps == 0:
            raise ValueError("Setting `strategy` as 'steps' requires a positive value for `steps`.")
        return self._apply(
            logging_strategy=strategy,
            logging_steps=steps,
            report_to=report_to,
            log_level=level,
            logging_first_step=first_step,
            logging_nan_inf_filter=nan_inf_filter,
            log_on_each_node=on_each_node,
            log_level_replica=replica_level,
        )

    def set_push_to_hub(self, model_id: str, *args: Any, **kwargs: Any) -> Any:
        """Refused, as ``push_to_hub=True`` is: this trainer does not push to the Hugging Face Hub."""
        raise ValueError(
            f"set_push_to_hub({model_id!r}) is not supported: this trainer does not push to the Hugging Face Hub; "
            "upload output_dir (save_model writes what from_pretrained reads) with huggingface_hub yourself."
        )

    def set_optimizer(
        self,
        name: Any = "adamw_torch",
        learning_rate: float = 5e-5,
        weight_decay: float = 0,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
        args: str | None = None,
    ) -> Any:
        """Optimizer fields (``args`` is ``optim_args``)."""
        return self._apply(
            optim=name,
            learning_rate=learning_rate,
            weight_decay=weight_decay,
            adam_beta1=beta1,
            adam_beta2=beta2,
            adam_epsilon=epsilon,
            optim_args={} if args is None else args,
        )

    def set_lr_scheduler(
        self,
        name: Any = "linear",
        num_epochs: float = 3.0,
        max_steps: int = -1,
        warmup_steps: float = 0,
        warmup_ratio: float = 0.0,
    ) -> Any:
        """Schedule fields (``warmup_ratio``, the seed documentation's, by keyword: transformers 5 has only
        ``warmup_steps`` there)."""
        return self._apply(
            lr_scheduler_type=name,
            num_train_epochs=num_epochs,
            max_steps=max_steps,
            warmup_steps=warmup_steps,
            warmup_ratio=warmup_ratio,
        )

    def set_dataloader(
        self,
        train_batch_size: int = 8,
        eval_batch_size: int = 8,
        drop_last: bool = False,
        num_workers: int = 0,
        pin_memory: bool = True,
        persistent_workers: bool = False,
        prefetch_factor: int | None = None,
        multiprocessing_context: str | None = None,
        in_order: bool = True,
        auto_find_batch_size: bool = False,
        ignore_data_skip: bool = False,
        sampler_seed: int | None = None,
    ) -> Any:
        """Data-loader fields (``sampler_seed`` is ``data_seed``)."""
        return self._apply(
            per_device_train_batch_size=train_batch_size,
            per_device_eval_batch_size=eval_batch_size,
            dataloader_drop_last=drop_last,
            dataloader_num_workers=num_workers,
            dataloader_pin_memory=pin_memory,
            dataloader_persistent_workers=persistent_workers,
            dataloader_prefetch_factor=prefetch_factor,
            dataloader_multiprocessing_context=multiprocessing_context,
            dataloader_in_order=in_order,
            auto_find_batch_size=auto_find_batch_size,
            ignore_data_skip=ignore_data_skip,
            data_seed=sampler_seed,
        )
