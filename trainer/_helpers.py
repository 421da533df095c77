"""Small `Trainer` methods transformers' Trainer offers to scripts, subclasses and tests: the optimizer's class and
options, its groups and learning rates, decay parameter names, the examples of a loader, and the contexts a
``compute_loss`` override may enter. Mixed into `trainer.Trainer`."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._optimization import get_parameter_names_without_decay, optimizer_cls_and_kwargs

if TYPE_CHECKING:
    import torch
    from torch import nn

    from ._training_args import TrainingArguments

__all__ = ["TrainerHelpers"]


class TrainerHelpers:
    """transformers' helper methods, on the attributes of `trainer.Trainer`."""

    args: TrainingArguments
    optimizer: torch.optim.Optimizer | None
    _in_train: bool

    @property
    def is_in_train(self) -> bool:
        """True while `train` runs (evaluations during training see it), as transformers' attribute of this name."""
        return self._in_train

    def get_total_train_batch_size(self, args: TrainingArguments) -> int:
        """Examples per optimizer step: the per-process batch size x ``gradient_accumulation_steps`` x processes."""
        return args.train_batch_size * args.gradient_accumulation_steps * args.world_size

    @staticmethod
    def get_optimizer_cls_and_kwargs(
        args: TrainingArguments, model: nn.Module | None = None
    ) -> tuple[Any, dict]:
        """The optimizer class ``args.optim`` names and its keyword arguments besides the parameters (the learning
        rate, the Adam settings, ``optim_args``): what `create_optimizer` builds."""
        return optimizer_cls_and_kwargs(args)

    def get_decay_parameter_names(self, model: nn.Module) -> list[str]:
        """Names of the parameters that get ``args.weight_decay`` (all but biases and normalisation layers')."""
        no_decay = set(get_parameter_names_without_decay(model))
        return [name for name, _ in model.named_parameters() if name not in no_decay]

    def _require_optimizer(self) -> torch.optim.Optimizer:
        if self.optimizer is None:
            raise ValueError(
                "Trainer optimizer is None, please make sure you have setup the optimizer before: call "
                "create_optimizer() (or train())."
            )
        return self.optimizer

    def get_learning_rates(self) -> list[float]:
        """The current learning rate of each parameter group of the optimizer."""
        return [group["lr"] for group in self._require_optimizer().param_groups]

    def get_optimizer_group(self, param: Any = None) -> Any:
        """The parameter group holding ``param`` (a parameter), or the parameters of every group without one."""
        optimizer = self._require_optimizer()
        if param is not None:
            for group in optimizer.param_groups:
                if any(p is param for p in group["params"]):
                    return group
        return [group["params"] for group in optimizer.param_groups]

    def create_model_card(
        self,
        language: str | None = None,
        license: str | None = None,
        tags: str | list[str] | None = None,
        model_name: str | None = None,
        finetuned_from: str | None = None,
        tasks: str | list[str] | None = None,
        dataset_tags: str | list[str] | None = None,
        dataset: str | list[str] | None = None,
        dataset_args: str | list[str] | None = None,
    ) -> None:
        """Write a draft model card, ``README.md`` in ``output_dir``, as transformers' Trainer does: metadata (the
        caller's, else the model's ``config._name_or_path`` as ``finetuned_from`` and a ``datasets.Dataset``'s
        name), the hyperparameters, the evaluations of ``state.log_history`` and the framework versions. Tags of
        a card already there are kept. Written offline: nothing is looked up on the Hub (see README, differences)."""
        from . import _model_card

        _model_card.write(
            self,  # type: ignore[arg-type]
            language=language,
            license=license,
            tags=tags,
            model_name=model_name,  # type: ignore[arg-type]
            finetuned_from=finetuned_from,
            tasks=tasks,
            dataset_tags=dataset_tags,
            dataset=dataset,
            dataset_args=dataset_args,
        )

    def num_tokens(self, train_dl: Any, max_steps: int | None = None) -> int:
        """Tokens in ``train_dl``: the elements of each batch's main input (``input_ids``, or the model's
        ``main_input_name``), summed over the loader; with ``max_steps``, the first batch's count x ``max_steps``
        (transformers 4's estimate). A batch without that input is refused (transformers logged a warning and
        answered 0)."""
        name = getattr(getattr(self, "model", None), "main_input_name", "input_ids")
        total = 0
        for batch in train_dl:
            if not (isinstance(batch, Mapping) and name in batch):
                keys = list(batch) if isinstance(batch, Mapping) else type(batch).__name__
                raise ValueError(
                    f"num_tokens counts the elements of each batch's {name!r}, but a batch holds {keys}; "
                    "count your own tokens (or set the model's main_input_name)."
                )
            tokens = int(batch[name].numel())
            if max_steps is not None:
                return tokens * max_steps
            total += tokens
        return total

    @property
    def is_model_parallel(self) -> bool:
        """Whether the model is spread over several devices (loaded with a ``device_map``: ``hf_device_map``) or on
        another device than ``args.device``, or switched to transformers' old model parallelism (``model_parallel``);
        accelerate then leaves it where it is."""
        model = getattr(self, "model", None)
        if getattr(model, "is_parallelizable", False) and getattr(model, "model_parallel", False):
            return True
        device_map = getattr(model, "hf_device_map", None)
        if not isinstance(device_map, Mapping):
            return False
        devices = {str(d) for d in device_map.values()} - {"cpu", "disk"}
        if len(devices) > 1:
            return True
        if len(devices) == 1:
            import torch

            device = next(iter(devices))
            return torch.device(int(device) if device.isdigit() else device) != self.args.device
        return False

    @property
    def place_model_on_device(self) -> bool:
        """Whether the model is moved to ``args.device`` when it is prepared, by accelerate's rule: not when a module
        of it holds a ``hf_device_map`` of several entries (loaded with a ``device_map``), nor when FSDP or DeepSpeed
        place its shards. Read-only: the placement follows from the model and the arguments."""
        model = getattr(self, "model", None)
        mapped = model is not None and any(
            len(getattr(m, "hf_device_map", None) or ()) > 1 for m in model.modules()
        )
        return not (mapped or bool(self.args.fsdp) or self.args.deepspeed is not None)

    def _check_placement(self) -> None:
        """A `TrainingArguments` subclass overriding ``place_model_on_device`` (transformers' hook) is refused where
        it disagrees with what accelerate will do, rather than ignored."""
        wanted = self.args.place_model_on_device
        if wanted is not None and bool(wanted) != self.place_model_on_device:
            done = "moves" if self.place_model_on_device else "does not move"
            raise ValueError(
                f"{type(self.args).__name__}.place_model_on_device={wanted!r}, but this trainer {done} the model to "
                "args.device (accelerate's placement: not for a model with a device_map over several entries, nor "
                "under FSDP or DeepSpeed); remove the override (or load the model with a device_map to keep it where "
                "it is)."
            )

    def num_examples(self, dataloader: Any) -> int:
        """The examples ``dataloader`` reads: its dataset's length, else batches x batch size."""
        try:
            return len(dataloader.dataset)
        except (AttributeError, TypeError):
            return len(dataloader) * self.args.per_device_train_batch_size

    def compute_loss_context_manager(self) -> contextlib.AbstractContextManager[Any]:
        """The context a ``compute_loss`` runs in. Mixed precision is accelerate's autocast, which the prepared
        model enters itself, so nothing is entered here (as in transformers without its legacy amp paths)."""
        return self.autocast_smart_context_manager()

    def autocast_smart_context_manager(
        self, cache_enabled: bool | None = True
    ) -> contextlib.AbstractContextManager[Any]:
        """See `compute_loss_context_manager`: a context that changes nothing."""
        return contextlib.nullcontext()
