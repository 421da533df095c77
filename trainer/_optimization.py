"""Optimizer and learning-rate schedule construction.

Schedules are torch's own scheduler classes: ``LambdaLR`` driven by module-level functions bound with
``functools.partial`` (so schedulers pickle and their ``state_dict`` round-trips on checkpoint resume), and
``ReduceLROnPlateau``. Each function returns the factor applied to the optimizer's initial learning rate at
a given optimizer step, with Hugging Face transformers' semantics.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import torch
from torch.optim.lr_scheduler import LambdaLR, LRScheduler, ReduceLROnPlateau

from . import _optim_families as _families
from ._training_args import OptimizerNames, SchedulerType

if TYPE_CHECKING:
    from ._training_args import TrainingArguments

__all__ = [
    "create_optimizer",
    "get_parameter_names_without_decay",
    "get_scheduler",
    "optimizer_cls_and_kwargs",
    "settle_foreach",
]


# ----------------------------------------------------------------------------------------------------------
# Learning-rate factors. Warmup is linear from 0 (at step 0) to 1 (at step num_warmup_steps) in all of them.
# ----------------------------------------------------------------------------------------------------------


def _warmup(step: int, num_warmup_steps: int) -> float:
    return step / max(1, num_warmup_steps)


def _constant_factor(step: int) -> float:
    return 1.0


def _constant_with_warmup_factor(step: int, *, num_warmup_steps: int) -> float:
    if step < num_warmup_steps:
        return _warmup(step, num_warmup_steps)
    return 1.0


def _linear_factor(step: int, *, num_warmup_steps: int, num_training_steps: int) -> float:
    if step < num_warmup_steps:
        return _warmup(step, num_warmup_steps)
    return max(0.0, (num_training_steps - step) / max(1, num_training_steps - num_warmup_steps))


def _cosine_factor(
    step: int, *, num_warmup_steps: int, num_training_steps: int, num_cycles: float, min_lr_rate: float = 0.0
) -> float:
    if step < num_warmup_steps:
        return _warmup(step, num_warmup_steps)
    progress = (step - num_warmup_steps) / max(1, num_training_steps - num_warmup_steps)
    factor = 0.5 * (1.0 + math.cos(math.pi * num_cycles * 2.0 * progress))
    return max(0.0, factor * (1.0 - min_lr_rate) + min_lr_rate)


def _cosine_hard_restarts_factor(
    step: int, *, num_warmup_steps: int, num_training_steps: int, num_cycles: int
) -> float:
    if step < num_warmup_steps:
        return _warmup(step, num_warmup_steps)
    progress = (step - num_warmup_steps) / max(1, num_training_steps - num_warmup_steps)
    if progress >= 1.0:
        return 0.0
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * ((num_cycles * progress) % 1.0))))


def _polynomial_factor(
    step: int, *, num_warmup_steps: int, num_training_steps: int, lr_init: float, lr_end: float, power: float
) -> float:
    if step < num_warmup_steps:
        return _warmup(step, num_warmup_steps)
    if step > num_training_steps:
        return lr_end / lr_init
    decay_steps = max(1, num_training_steps - num_warmup_steps)
    remaining = 1.0 - (step - num_warmup_steps) / decay_steps
    return ((lr_init - lr_end) * remaining**power + lr_end) / lr_init


def _inverse_sqrt_factor(step: int, *, num_warmup_steps: int, timescale: int) -> float:
    if step < num_warmup_steps:
        return _warmup(step, num_warmup_steps)
    shift = timescale - num_warmup_steps
    return 1.0 / math.sqrt((step + shift) / timescale)


def _wsd_factor(
    step: int,
    *,
    num_warmup_steps: int,
    num_stable_steps: int,
    num_decay_steps: int,
    warmup_type: str,
    decay_type: str,
    min_lr_ratio: float,
    num_cycles: float,
) -> float:
    if step < num_warmup_steps:
        progress = step / max(1, num_warmup_steps)
        if warmup_type == "linear":
            value = progress
        elif warmup_type == "cosine":
            value = 0.5 * (1.0 - math.cos(math.pi * progress))
        else:  # "1-sqrt"
            value = 1.0 - math.sqrt(1.0 - progress)
        return max(0.0, value * (1.0 - min_lr_ratio) + min_lr_ratio)
    if step < num_warmup_steps + num_stable_steps:
        return 1.0
    if step < num_warmup_steps + num_stable_steps + num_decay_steps:
        progress = (step - num_warmup_steps - num_stable_steps) / max(1, num_decay_steps)
        if decay_type == "linear":
            value = 1.0 - progress
        elif decay_type == "cosine":
            value = 0.5 * (1.0 + math.cos(math.pi * num_cycles * 2.0 * progress))
        else:  # "1-sqrt"
            value = 1.0 - math.sqrt(progress)
        return max(0.0, value * (1.0 - min_lr_ratio) + min_lr_ratio)
    return min_lr_ratio


# ----------------------------------------------------------------------------------------------------------
# get_scheduler: one builder per schedule, in a table with the options each accepts
# ----------------------------------------------------------------------------------------------------------

_WSD_SHAPES = ("linear", "cosine", "1-sqrt")


def _check_step_count(name: str, value: Any, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{name} must be {kind}, got {value!r}; pass {minimum} or more.")
    return value


def _check_number(name: str, value: Any, *, minimum: float, maximum: float | None = None) -> float:
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and value >= minimum
    if ok and maximum is not None:
        ok = value <= maximum
    if not ok:
        bounds = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise ValueError(f"{name} must be a number {bounds}, got {value!r}; pass a value {bounds}.")
    return float(value)


class _Request(NamedTuple):
    """What a schedule builder reads: the checked arguments of `get_scheduler`."""

    optimizer: torch.optim.Optimizer
    warmup: int  # num_warmup_steps, checked (0 for the schedules without warmup)
    total: Any  # num_training_steps: checked where the schedule needs it, else as passed
    options: dict[str, Any]  # scheduler_specific_kwargs, all of them accepted by the schedule

    def lambda_lr(self, factor: Any, **bound: Any) -> LRScheduler:
        return LambdaLR(self.optimizer, functools.partial(factor, **bound))

    def num_cycles(self, default: float) -> float:
        return _check_number("num_cycles", self.options.get("num_cycles", default), minimum=0)


def _reduce_on_plateau(r: _Request) -> LRScheduler:
    return ReduceLROnPlateau(r.optimizer, **r.options)


def _constant(r: _Request) -> LRScheduler:
    return LambdaLR(r.optimizer, _constant_factor)


def _constant_with_warmup(r: _Request) -> LRScheduler:
    return r.lambda_lr(_constant_with_warmup_factor, num_warmup_steps=r.warmup)


def _linear(r: _Request) -> LRScheduler:
    return r.lambda_lr(_linear_factor, num_warmup_steps=r.warmup, num_training_steps=r.total)


def _cosine(r: _Request) -> LRScheduler:
    return r.lambda_lr(
        _cosine_factor, num_warmup_steps=r.warmup, num_training_steps=r.total, num_cycles=r.num_cycles(0.5)
    )


def _cosine_with_restarts(r: _Request) -> LRScheduler:
    cycles = _check_step_count("num_cycles", r.options.get("num_cycles", 1), minimum=1)
    return r.lambda_lr(
        _cosine_hard_restarts_factor, num_warmup_steps=r.warmup, num_training_steps=r.total, num_cycles=cycles
    )


def _polynomial(r: _Request) -> LRScheduler:
    lr_init = r.optimizer.defaults["lr"]
    lr_end = _check_number("lr_end", r.options.get("lr_end", 1e-7), minimum=0)
    if not lr_end < lr_init:
        raise ValueError(
            f"lr_end must be smaller than the optimizer's initial lr ({lr_init}), got {lr_end}; pass a "
            "smaller lr_end in scheduler_specific_kwargs."
        )
    return r.lambda_lr(
        _polynomial_factor,
        num_warmup_steps=r.warmup,
        num_training_steps=r.total,
        lr_init=lr_init,
        lr_end=lr_end,
        power=_check_number("power", r.options.get("power", 1.0), minimum=0),
    )


def _inverse_sqrt(r: _Request) -> LRScheduler:
    timescale = r.options.get("timescale")
    if timescale is None:
        timescale = r.warmup or 10_000
    timescale = _check_step_count("timescale", timescale, minimum=1)
    return r.lambda_lr(_inverse_sqrt_factor, num_warmup_steps=r.warmup, timescale=timescale)


def _cosine_with_min_lr(r: _Request) -> LRScheduler:
    options = r.options
    has_min_lr, has_rate = options.get("min_lr") is not None, options.get("min_lr_rate") is not None
    if has_min_lr == has_rate:
        raise ValueError(
            "The 'cosine_with_min_lr' schedule needs exactly one of min_lr and min_lr_rate in "
            f"scheduler_specific_kwargs, got {options}; pass e.g. {{'min_lr_rate': 0.1}} or {{'min_lr': 1e-6}}."
        )
    if has_min_lr:
        min_lr = _check_number("min_lr", options["min_lr"], minimum=0)
        lr = r.optimizer.defaults["lr"]
        rate = min_lr / lr if lr else 0.0
    else:
        rate = _check_number("min_lr_rate", options["min_lr_rate"], minimum=0, maximum=1)
    return r.lambda_lr(
        _cosine_factor,
        num_warmup_steps=r.warmup,
        num_training_steps=r.total,
        num_cycles=r.num_cycles(0.5),
        min_lr_rate=rate,
    )


def _warmup_stable_decay(r: _Request) -> LRScheduler:
    options = r.options
    if "num_decay_steps" not in options:
        raise ValueError(
            "The 'warmup_stable_decay' schedule needs num_decay_steps in scheduler_specific_kwargs, got "
            f"{options}; pass e.g. {{'num_decay_steps': 100}}."
        )
    decay = _check_step_count("num_decay_steps", options["num_decay_steps"], minimum=0)
    stable = options.get("num_stable_steps")
    if stable is None:
        stable = _wsd_stable_steps(r.warmup, decay, r.total)
    stable = _check_step_count("num_stable_steps", stable, minimum=0)
    shapes = {}
    for key, default in (("warmup_type", "linear"), ("decay_type", "cosine")):
        shapes[key] = options.get(key, default)
        if shapes[key] not in _WSD_SHAPES:
            raise ValueError(f"{key} must be one of {_WSD_SHAPES}, got {shapes[key]!r}; pass one of those.")
    return r.lambda_lr(
        _wsd_factor,
        num_warmup_steps=r.warmup,
        num_stable_steps=stable,
        num_decay_steps=decay,
        warmup_type=shapes["warmup_type"],
        decay_type=shapes["decay_type"],
        min_lr_ratio=_check_number("min_lr_ratio", options.get("min_lr_ratio", 0.0), minimum=0, maximum=1),
        num_cycles=r.num_cycles(0.5),
    )


def _wsd_stable_steps(warmup: int, decay: int, num_training_steps: Any) -> int:
    """The stable phase of warmup_stable_decay when not given: the steps left after warmup and decay."""
    if num_training_steps is None:
        raise ValueError(
            "The 'warmup_stable_decay' schedule needs num_training_steps or num_stable_steps, got "
            "neither; pass num_training_steps (stable steps = total - warmup - decay)."
        )
    total = _check_step_count("num_training_steps", num_training_steps, minimum=1)
    stable = total - warmup - decay
    if stable < 0:
        raise ValueError(
            f"num_warmup_steps + num_decay_steps ({warmup} + {decay}) must not exceed "
            f"num_training_steps ({total}); pass fewer warmup or decay steps."
        )
    return stable


class _Schedule(NamedTuple):
    build: Callable[[_Request], LRScheduler]
    options: tuple[str, ...] = ()  # the scheduler_specific_kwargs it accepts
    needs_total: bool = False  # num_training_steps is required
    warms_up: bool = True  # num_warmup_steps is read (and checked)


_SCHEDULES: dict[SchedulerType, _Schedule] = {
    SchedulerType.LINEAR: _Schedule(_linear, needs_total=True),
    SchedulerType.CONSTANT: _Schedule(_constant, warms_up=False),
    SchedulerType.CONSTANT_WITH_WARMUP: _Schedule(_constant_with_warmup),
    SchedulerType.COSINE: _Schedule(_cosine, ("num_cycles",), needs_total=True),
    SchedulerType.COSINE_WITH_RESTARTS: _Schedule(_cosine_with_restarts, ("num_cycles",), needs_total=True),
    SchedulerType.POLYNOMIAL: _Schedule(_polynomial, ("lr_end", "power"), needs_total=True),
    SchedulerType.INVERSE_SQRT: _Schedule(_inverse_sqrt, ("timescale",)),
    SchedulerType.COSINE_WITH_MIN_LR: _Schedule(
        _cosine_with_min_lr, ("num_cycles", "min_lr", "min_lr_rate"), needs_total=True
    ),
    SchedulerType.WARMUP_STABLE_DECAY: _Schedule(
        _warmup_stable_decay,
        ("num_decay_steps", "num_stable_steps", "warmup_type", "decay_type", "min_lr_ratio", "num_cycles"),
    ),
    # reduce_lr_on_plateau: the keyword arguments of torch's class.
    SchedulerType.REDUCE_ON_PLATEAU: _Schedule(
        _reduce_on_plateau,
        tuple(
            name
            for name in inspect.signature(ReduceLROnPlateau.__init__).parameters
            if name not in ("self", "optimizer")
        ),
        warms_up=False,
    ),
}


def get_scheduler(
    name: SchedulerType | str,
    optimizer: torch.optim.Optimizer,
    num_warmup_steps: int = 0,
    num_training_steps: int | None = None,
    scheduler_specific_kwargs: dict[str, Any] | None = None,
) -> LRScheduler:
    """The learning-rate scheduler ``name`` for ``optimizer``, stepped once per optimizer step.

    Args:
        name: A :class:`SchedulerType` or its string value.
        optimizer: The optimizer whose learning rates are scheduled (its initial ``lr`` is the peak).
        num_warmup_steps: Steps of linear warmup from 0 to the peak (ignored by ``constant`` and
            ``reduce_lr_on_plateau``).
        num_training_steps: Total optimizer steps; needed by the decaying schedules (linear, cosine,
            cosine_with_restarts, polynomial, cosine_with_min_lr) and by warmup_stable_decay without
            ``num_stable_steps``.
        scheduler_specific_kwargs: Extra options of the schedule:

            - cosine: ``num_cycles`` (0.5: one half-cosine down to 0).
            - cosine_with_restarts: ``num_cycles`` (1: number of hard restarts).
            - polynomial: ``lr_end`` (1e-7, the final lr), ``power`` (1.0).
            - inverse_sqrt: ``timescale`` (``num_warmup_steps``, or 10000 when that is 0).
            - cosine_with_min_lr: ``min_lr`` (absolute) or ``min_lr_rate`` (fraction of the peak), one of them;
              ``num_cycles`` (0.5).
            - warmup_stable_decay: ``num_decay_steps`` (required), ``num_stable_steps`` (default: the steps
              left after warmup and decay), ``min_lr_ratio`` (0), ``warmup_type``/``decay_type``
              ("linear", "cosine" or "1-sqrt"; default "linear"/"cosine"), ``num_cycles`` (0.5).
            - reduce_lr_on_plateau: keyword arguments of ``torch.optim.lr_scheduler.ReduceLROnPlateau``.

    Raises:
        ValueError: for an unknown name, a missing or invalid step count, or an unknown or invalid option.
    """
    try:
        kind = SchedulerType(name.value if isinstance(name, SchedulerType) else str(name).strip().lower())
    except ValueError:
        accepted = ", ".join(repr(t.value) for t in SchedulerType)
        raise ValueError(f"name must be one of {accepted}, got {name!r}; pass one of those.") from None
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ValueError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}.")
    schedule = _SCHEDULES[kind]
    options = dict(scheduler_specific_kwargs or {})
    unknown = sorted(set(options) - set(schedule.options))
    if unknown:
        accepted = ", ".join(schedule.options) or "none"
        raise ValueError(
            f"scheduler_specific_kwargs has option(s) {unknown} that the {kind.value!r} schedule does not "
            f"accept; remove them. Accepted: {accepted}."
        )
    warmup = _check_step_count("num_warmup_steps", num_warmup_steps, minimum=0) if schedule.warms_up else 0
    if schedule.needs_total:
        if num_training_steps is None:
            raise ValueError(
                f"The {kind.value!r} schedule needs num_training_steps, got None; pass the total number of "
                "optimizer steps."
            )
        _check_step_count("num_training_steps", num_training_steps, minimum=1)
    return schedule.build(_Request(optimizer, warmup, num_training_steps, options))


# ----------------------------------------------------------------------------------------------------------
# Optimizer
# ----------------------------------------------------------------------------------------------------------

# torch's public norm classes; their private bases (_BatchNorm, _InstanceNorm) also catch subclasses of them, and
# are read with a fallback so that a torch which renames them still imports this module.
_NORM_TYPES: tuple[type[torch.nn.Module], ...] = tuple(
    cls
    for cls in (
        torch.nn.LayerNorm,
        torch.nn.GroupNorm,
        torch.nn.LocalResponseNorm,
        getattr(torch.nn, "RMSNorm", None),
        torch.nn.BatchNorm1d,
        torch.nn.BatchNorm2d,
        torch.nn.BatchNorm3d,
        torch.nn.SyncBatchNorm,
        torch.nn.InstanceNorm1d,
        torch.nn.InstanceNorm2d,
        torch.nn.InstanceNorm3d,
        getattr(torch.nn.modules.batchnorm, "_BatchNorm", None),
        getattr(torch.nn.modules.instancenorm, "_InstanceNorm", None),
    )
    if isinstance(cls, type)
)


def _is_norm(module: torch.nn.Module) -> bool:
    # Custom norms (e.g. a model's own `LlamaRMSNorm`) are recognised by name, as transformers does.
    return isinstance(module, _NORM_TYPES) or "Norm" in type(module).__name__


def get_parameter_names_without_decay(model: torch.nn.Module) -> list[str]:
    """Names (as in ``model.named_parameters()``) of the parameters that should get no weight decay.

    These are biases (any parameter registered under the name ``bias``) and every parameter of a
    normalisation layer: ``nn.LayerNorm``, ``BatchNorm*``, ``InstanceNorm*``, ``GroupNorm``, ``RMSNorm``
    and any module whose class name contains "Norm". Decaying them towards 0 only hurts: a norm's scale
    is meant to sit around 1 and biases do not contribute to overfitting the way weights do.
    """
    no_decay: set[int] = set()
    for module in model.modules():
        norm = _is_norm(module)
        for local_name, param in module.named_parameters(recurse=False):
            if norm or local_name == "bias" or local_name.endswith("_bias"):
                no_decay.add(id(param))
    return [name for name, param in model.named_parameters() if id(param) in no_decay]


_OPTIMIZERS: dict[OptimizerNames, tuple[type[torch.optim.Optimizer], bool]] = {
    # name -> (class, takes adam_beta1/adam_beta2/adam_epsilon)
    OptimizerNames.ADAMW_TORCH: (torch.optim.AdamW, True),
    OptimizerNames.ADAMW_HF: (
        torch.optim.AdamW,
        True,
    ),  # transformers 4's name; see _optim_families.check_optim
    OptimizerNames.ADAMW_TORCH_FUSED: (torch.optim.AdamW, True),
    OptimizerNames.ADAM: (torch.optim.Adam, True),
    OptimizerNames.SGD: (torch.optim.SGD, False),
    OptimizerNames.ADAGRAD: (torch.optim.Adagrad, False),
    OptimizerNames.RMSPROP: (torch.optim.RMSprop, False),
}


def _adafactor() -> type[torch.optim.Optimizer]:
    try:
        from transformers.optimization import Adafactor
    except ImportError as err:
        raise ImportError(
            "optim='adafactor' uses transformers' Adafactor, and transformers is not installed; run "
            "`pip install transformers` or pass another optim (e.g. 'adamw_torch')."
        ) from err
    return cast("type[torch.optim.Optimizer]", Adafactor)


# Set through TrainingArguments fields, so optim_args may not set them a second time.
_RESERVED_OPTIM_ARGS = {"params": None, "lr": "learning_rate", "weight_decay": "weight_decay"}


@functools.cache
def _constructor_options(cls: Any) -> tuple[str, ...]:
    """The keyword options of an optimizer class (read once per class: inspect.signature is slow, and a search
    creates an optimizer per trial)."""
    return tuple(
        n for n in inspect.signature(cls.__init__).parameters if n not in ("self", *_RESERVED_OPTIM_ARGS)
    )


def optimizer_cls_and_kwargs(args: TrainingArguments) -> tuple[type[torch.optim.Optimizer], dict[str, Any]]:
    """The optimizer class ``args.optim`` names and the keyword arguments `create_optimizer` builds it with (the
    learning rate, the Adam settings, ``optim_args``; not the parameters), as transformers'
    ``Trainer.get_optimizer_cls_and_kwargs`` returns them."""
    optim = OptimizerNames(args.optim)
    options: dict[str, Any] = {"lr": args.learning_rate}
    own_options: tuple[str, ...] = ()
    if optim == OptimizerNames.ADAFACTOR:
        cls, adam_like = _adafactor(), False
    elif optim.value in _families.FAMILIES:
        adam = {"betas": (args.adam_beta1, args.adam_beta2), "eps": args.adam_epsilon}
        cls, family_options = _families.family_cls_and_kwargs(optim.value, args, adam)
        options.update(family_options)
        adam_like = False
        own_options = _families.own_options(optim.value)
    else:
        cls, adam_like = _OPTIMIZERS[optim]
    if optim == OptimizerNames.ADAFACTOR:
        # transformers' Trainer settings: the schedule comes from lr_scheduler_type, not from Adafactor itself.
        options.update(scale_parameter=False, relative_step=False)
    if adam_like:
        options.update(betas=(args.adam_beta1, args.adam_beta2), eps=args.adam_epsilon)
    if optim == OptimizerNames.ADAMW_TORCH_FUSED:
        options["fused"] = True
    extra = dict(cast(dict, args.optim_args) or {})
    for key, field_name in _RESERVED_OPTIM_ARGS.items():
        if key in extra:
            fix = f"set TrainingArguments.{field_name} instead" if field_name else "remove it"
            raise ValueError(f"optim_args must not contain {key!r} (got {extra[key]!r}); {fix}.")
    accepted = _constructor_options(cast(Any, cls)) + own_options
    unknown = sorted(set(extra) - set(accepted))
    if unknown:
        raise ValueError(
            f"optim_args has option(s) {unknown} that {cls.__name__} (optim={optim.value!r}) does not accept; "
            f"remove them. Accepted: {', '.join(accepted)}."
        )
    options.update(extra)
    return cast(Any, cls), options


def create_optimizer(
    model: torch.nn.Module,
    args: TrainingArguments,
    cls_and_kwargs: tuple[type[torch.optim.Optimizer], Mapping[str, Any]] | None = None,
) -> torch.optim.Optimizer:
    """The optimizer named by ``args.optim`` over the trainable parameters of ``model``.

    ``cls_and_kwargs`` (the Trainer's ``optimizer_cls_and_kwargs``) replaces ``args.optim`` and its settings: the
    class is built over the same two parameter groups with exactly those keyword arguments.

    It always has two parameter groups, in this order: the parameters that get ``args.weight_decay`` and
    those that get none (see :func:`get_parameter_names_without_decay`); either may be empty. The learning
    rate is ``args.learning_rate``; the Adam variants take ``betas=(adam_beta1, adam_beta2)`` and
    ``eps=adam_epsilon``; ``args.optim_args`` is passed to the optimizer class (e.g. ``{"momentum": 0.9}``
    for sgd) and overrides those Adam settings.
    """
    if cls_and_kwargs is None:
        cls, options = optimizer_cls_and_kwargs(args)
    else:
        cls, options = cls_and_kwargs[0], dict(cls_and_kwargs[1])
    no_decay = set(get_parameter_names_without_decay(model))
    trainable = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    if not trainable:
        raise ValueError(
            "model has no trainable parameters (all have requires_grad=False); unfreeze some before training."
        )
    groups = [
        {"params": [p for n, p in trainable if n not in no_decay], "weight_decay": args.weight_decay},
        {"params": [p for n, p in trainable if n in no_decay], "weight_decay": 0.0},
    ]
    if cls_and_kwargs is None and getattr(args.optim, "value", args.optim) in _families.GALORE:
        groups = _families.galore_groups(
            model, args, options
        )  # the targeted layers' group carries GaLore's options
    return cls(groups, **options)


def settle_foreach(
    optimizer: torch.optim.Optimizer,
    args: TrainingArguments,
    device: torch.device | None,
    chosen: Mapping[str, Any] | None = None,
) -> None:
    """Decide torch's ``foreach`` for an optimizer `create_optimizer` built, where ``optim_args`` leaves it unset.

    Left unset (None), torch decides at every step by looking at the device of every parameter: the per-tensor
    loop on the CPU, the multi-tensor kernels on accelerators. On a small model that check is a tenth of the
    optimizer step, paid once per parameter group. Training on the CPU, this sets what torch would pick,
    ``foreach=False``; elsewhere it puts back None, so a checkpoint saved on the CPU (its parameter groups carry
    the value) resumes on a GPU with torch's own choice. Fused optimizers are left as they are, and so is a
    ``foreach`` among ``chosen``, the options the user gave (``args.optim_args`` when None).
    """
    if device is None or "foreach" not in optimizer.defaults or optimizer.defaults.get("fused"):
        return
    if "foreach" in (chosen if chosen is not None else cast(dict, args.optim_args) or {}):
        return  # the user's choice, kept everywhere
    value = False if device.type == "cpu" else None
    optimizer.defaults["foreach"] = value
    for group in optimizer.param_groups:
        if "foreach" in group:
            group["foreach"] = value
