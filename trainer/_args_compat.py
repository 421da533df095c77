"""Validation of the `TrainingArguments` fields that ported Hugging Face scripts set.

These fields are either mapped onto ours (``fp16``/``bf16`` onto ``mixed_precision``, ``evaluation_strategy``
onto ``eval_strategy``), stored for the script (``do_train``, ``resume_from_checkpoint``), applied by the trainer,
or refused with the reason when they ask for something this trainer does not do. `before` runs at the start of
``TrainingArguments.__post_init__`` (aliases must be resolved before the fields they feed are validated),
`after` once every field is well-typed.
"""

from __future__ import annotations

import ast
import json
import os
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import _args_legacy
from ._validation import _as_bool, _as_float, _as_int, _fail, _is_bool

if TYPE_CHECKING:
    from ._training_args import TrainingArguments

LOG_LEVELS = ("debug", "info", "warning", "error", "critical", "passive")
DDP_BACKENDS = ("nccl", "gloo", "mpi", "ccl", "hccl", "cncl", "mccl", "xccl")
DEBUG_OPTIONS = ("underflow_overflow",)
INCLUDE_FOR_METRICS = ("inputs", "loss")
ACCELERATOR_CONFIG_KEYS = (
    "split_batches",
    "dispatch_batches",
    "even_batches",
    "non_blocking",
    "use_seedable_sampler",
)
HALF_PRECISION_BACKENDS = ("auto", "cpu_amp")


def before(args: TrainingArguments, derived: dict[str, Any], previous: dict[str, Any]) -> None:
    """Aliases and derived precision, resolved before the fields they set are validated.

    ``previous`` is what the last validation derived: a ``mixed_precision`` that was derived from ``fp16``/``bf16``
    and has since been replaced by another value was chosen by the caller, and must agree with the flag.
    """
    chosen_precision = args.mixed_precision is not None and "mixed_precision" in previous
    _args_legacy.resolve(args)
    if args.evaluation_strategy is not None:
        warnings.warn(
            "evaluation_strategy is deprecated (transformers renamed it eval_strategy); pass eval_strategy instead.",
            FutureWarning,
            stacklevel=4,
        )
        alias = str(getattr(args.evaluation_strategy, "value", args.evaluation_strategy))
        current = str(getattr(args.eval_strategy, "value", args.eval_strategy))
        if current not in ("no", alias):
            raise ValueError(
                f"evaluation_strategy={alias!r} and eval_strategy={current!r} disagree; pass only eval_strategy."
            )
        args.eval_strategy = alias
        # Consumed: a later replace(eval_strategy=...) must not be overridden by the alias again.
        args.evaluation_strategy = None
    args.fp16 = _as_bool("fp16", args.fp16)
    args.bf16 = _as_bool("bf16", args.bf16)
    if args.mixed_precision is None:
        args.mixed_precision = "no"
    if args.fp16 and args.bf16:
        raise ValueError("fp16=True and bf16=True ask for two precisions; pass only one of them.")
    wanted = "fp16" if args.fp16 else "bf16" if args.bf16 else None
    if wanted is not None:
        current = str(getattr(args.mixed_precision, "value", args.mixed_precision)).strip().lower()
        if current not in ("no", wanted) or (chosen_precision and current != wanted):
            flag = "fp16" if args.fp16 else "bf16"
            raise ValueError(
                f"{flag}=True and mixed_precision={current!r} disagree; pass one of them (mixed_precision={wanted!r})."
            )
        args.mixed_precision = derived["mixed_precision"] = wanted
    if args.dataloader_pin_memory is None:  # derived from use_cpu before, and use_cpu may have changed since
        args.dataloader_pin_memory = True
    if args.report_to is None:
        args.report_to = "none"
    if args.do_eval is None:
        args.do_eval = False


def after(args: TrainingArguments, derived: dict[str, Any], previous: dict[str, Any]) -> None:
    """Every ported field checked, normalised, and refused with the reason where this trainer cannot honour it."""
    _resolve_checkpointing_aliases(args, derived, previous)
    _check_flags(args)
    _check_run_options(args, derived)
    _check_backends(args, derived, previous)
    _check_data_and_processes(args, derived, previous)
    _check_metrics_and_debug(args, derived)
    _check_checkpointing_kwargs(args, derived)
    _resolve_torch_compile(args, derived, previous)
    args.optim_args = _optim_args(args.optim_args)
    args.accelerator_config = _accelerator_config(args.accelerator_config)
    _refusals(args)


def _check_flags(args: TrainingArguments) -> None:
    """Booleans (nullable where transformers allows None) and the replicas' log level."""
    for name in (
        "log_on_each_node",
        "fp16_full_eval",
        "bf16_full_eval",
        "do_train",
        "do_eval",
        "do_predict",
        "include_inputs_for_metrics",
        "eval_do_concat_batches",
        "ignore_data_skip",
        "jit_mode_eval",
        "split_batches",
        "include_tokens_per_second",
        "save_safetensors",
        "push_to_hub",
        "eval_on_start",
        "auto_find_batch_size",
        "group_by_length",
        "eval_use_gather_object",
        "dataloader_in_order",
        "use_cache",
    ):
        setattr(args, name, _as_bool(name, getattr(args, name)))
    for name in (
        "ddp_find_unused_parameters",
        "ddp_broadcast_buffers",
        "dispatch_batches",
        "tf32",
        "ddp_static_graph",
    ):
        setattr(args, name, _as_bool(name, getattr(args, name), allow_none=True))
    level = args.log_level_replica
    if not isinstance(level, str) or level.strip().lower() not in LOG_LEVELS:
        _fail("log_level_replica", level, f"one of {', '.join(map(repr, LOG_LEVELS))}", "pass one of those")
    args.log_level_replica = level.strip().lower()  # type: ignore[assignment]


def _check_run_options(args: TrainingArguments, derived: dict[str, Any]) -> None:
    """do_eval implied by evaluating, the checkpoint to resume from, NEFTune's noise."""
    if str(args.eval_strategy) != "no" and not args.do_eval:
        args.do_eval = derived["do_eval"] = (
            True  # as transformers: evaluating during training implies do_eval
        )
    if args.resume_from_checkpoint is not None:
        if isinstance(args.resume_from_checkpoint, os.PathLike):
            args.resume_from_checkpoint = os.fspath(args.resume_from_checkpoint)
        if not isinstance(args.resume_from_checkpoint, str):
            _fail(
                "resume_from_checkpoint",
                args.resume_from_checkpoint,
                "a path or None",
                "pass the checkpoint folder (the script hands it to trainer.train(resume_from_checkpoint=...))",
            )

    if args.neftune_noise_alpha is not None:
        args.neftune_noise_alpha = _as_float("neftune_noise_alpha", args.neftune_noise_alpha, minimum=0.0)
        if args.neftune_noise_alpha == 0:
            _fail(
                "neftune_noise_alpha", 0, "a positive number or None", "pass e.g. 5.0, or None for no noise"
            )


def _check_backends(args: TrainingArguments, derived: dict[str, Any], previous: dict[str, Any]) -> None:
    """The optimizer family, FSDP and DeepSpeed."""
    from ._optim_families import check_optim

    check_optim(
        args
    )  # optim values run from other libraries, or refused naming what is missing; optim_target_modules
    from . import _fsdp

    _fsdp.validate(args, derived, previous)  # first: it refuses fsdp together with deepspeed
    if args.deepspeed is not None:
        if not isinstance(args.deepspeed, str | dict):
            _fail(
                "deepspeed",
                args.deepspeed,
                "a DeepSpeed config (dict) or the path of its JSON file",
                "pass one",
            )
        import importlib.util

        if importlib.util.find_spec("deepspeed") is None:
            raise ImportError(
                f"deepspeed={args.deepspeed!r} needs the DeepSpeed package, which is not installed => run "
                "`pip install deepspeed` (DeepSpeed needs a GPU build of torch), or remove deepspeed."
            )


def _check_data_and_processes(
    args: TrainingArguments, derived: dict[str, Any], previous: dict[str, Any]
) -> None:
    """Loss and data options, sampling, the loader's workers, the cache emptying and DDP's settings."""
    args.label_smoothing_factor = _as_float(
        "label_smoothing_factor",
        args.label_smoothing_factor,
        minimum=0.0,
        maximum=1.0,
        maximum_inclusive=False,
    )
    args.past_index = _as_int("past_index", args.past_index, minimum=-1)
    args.local_rank = _as_int("local_rank", args.local_rank, minimum=-1)
    _resolve_sampling(args, derived, previous)
    context = args.dataloader_multiprocessing_context
    if context is not None and context not in ("fork", "spawn", "forkserver"):
        _fail(
            "dataloader_multiprocessing_context",
            context,
            "None, 'fork', 'spawn' or 'forkserver'",
            "pass one of those",
        )
    if args.torch_empty_cache_steps is not None and not (
        isinstance(args.torch_empty_cache_steps, int)
        and not _is_bool(args.torch_empty_cache_steps)
        and args.torch_empty_cache_steps > 0
    ):  # transformers refuses 1.0 and "1" too
        _fail(
            "torch_empty_cache_steps",
            args.torch_empty_cache_steps,
            "an integer > 0 or None",
            "pass e.g. 100 (empty the cache every 100 steps) or None",
        )
    args.ddp_timeout = _as_int("ddp_timeout", args.ddp_timeout, minimum=1)
    args.ddp_bucket_cap_mb = _as_int("ddp_bucket_cap_mb", args.ddp_bucket_cap_mb, minimum=1, allow_none=True)
    if args.ddp_backend is not None and args.ddp_backend not in DDP_BACKENDS:
        _fail(
            "ddp_backend",
            args.ddp_backend,
            f"None or one of {', '.join(map(repr, DDP_BACKENDS))}",
            "pass one of those (None lets accelerate choose)",
        )


def _check_metrics_and_debug(args: TrainingArguments, derived: dict[str, Any]) -> None:
    """What metrics see, debug options, pinned memory and the input tokens counted."""
    args.include_for_metrics = _string_list(
        "include_for_metrics", args.include_for_metrics, INCLUDE_FOR_METRICS
    )
    if args.include_inputs_for_metrics:
        warnings.warn(
            "include_inputs_for_metrics is deprecated (transformers replaced it); pass include_for_metrics=['inputs'].",
            FutureWarning,
            stacklevel=5,
        )
        if "inputs" not in args.include_for_metrics:
            args.include_for_metrics = [*args.include_for_metrics, "inputs"]
    args.debug = _string_list(
        "debug",
        args.debug,
        DEBUG_OPTIONS,
        split=True,
        refused={"tpu_metrics_debug": "this trainer does not run on TPUs"},
    )
    if args.use_cpu and args.dataloader_pin_memory:
        args.dataloader_pin_memory = derived["dataloader_pin_memory"] = (
            False  # as transformers: nothing to pin for
        )
    seen = args.include_num_input_tokens_seen
    if _is_bool(seen):
        seen = "all" if seen else "no"  # transformers' coercion: the field holds one of the three names
    elif isinstance(seen, str):
        seen = {"true": "all", "false": "no"}.get(seen.strip().lower(), seen.strip().lower())
    if seen not in ("all", "no", "non_padding"):
        _fail(
            "include_num_input_tokens_seen",
            seen,
            "True, False, 'all', 'no' or 'non_padding'",
            "pass one of those",
        )
    args.include_num_input_tokens_seen = seen


def _check_checkpointing_kwargs(args: TrainingArguments, derived: dict[str, Any]) -> None:
    """Activation checkpointing's kwargs (under both names) and the length column."""
    from ._validation import _as_dict

    kwargs = _as_dict("activation_checkpointing_kwargs", args.activation_checkpointing_kwargs or {})
    args.activation_checkpointing_kwargs = args.gradient_checkpointing_kwargs = kwargs
    derived["_checkpointing_kwargs"] = kwargs
    if kwargs and not args.activation_checkpointing:
        raise ValueError(
            f"activation_checkpointing_kwargs (or gradient_checkpointing_kwargs)={kwargs!r} only applies with "
            "activation_checkpointing=True; pass activation_checkpointing=True or remove the kwargs."
        )
    if not isinstance(args.length_column_name, str) or not args.length_column_name:
        _fail("length_column_name", args.length_column_name, "a non-empty string", 'pass e.g. "length"')


def _resolve_torch_compile(
    args: TrainingArguments, derived: dict[str, Any], previous: dict[str, Any]
) -> None:
    """torch_compile, implied by a backend or mode (as transformers), and the backend checked against accelerate's."""
    rederive = args.torch_compile is None  # derived before and untouched since: derive it again
    args.torch_compile = _as_bool("torch_compile", False if rederive else args.torch_compile)
    for name in ("torch_compile_backend", "torch_compile_mode"):
        value = getattr(args, name)
        if value is not None and (not isinstance(value, str) or not value):
            _fail(
                name,
                value,
                "a non-empty string or None",
                "pass e.g. 'inductor' (backend) or 'reduce-overhead' (mode)",
            )
        if value is not None and not args.torch_compile:
            if not rederive and previous.get("torch_compile") is True:  # derived before, set to False since
                raise ValueError(
                    f"torch_compile=False and {name}={value!r} disagree (a compile {name[14:]} implies compiling); "
                    f"pass {name}=None too, or torch_compile=True."
                )
            args.torch_compile = derived["torch_compile"] = (
                True  # as transformers: either one implies compiling
            )
    if args.torch_compile and args.torch_compile_backend is None:
        args.torch_compile_backend = derived["torch_compile_backend"] = "inductor"  # transformers' default
    if args.torch_compile_backend is not None:
        from accelerate.utils import DynamoBackend

        accepted = [b.value.lower() for b in DynamoBackend if b.value != "NO"]
        if args.torch_compile_backend.lower() not in accepted:
            _fail(
                "torch_compile_backend",
                args.torch_compile_backend,
                f"one of {', '.join(accepted)}",
                "pass one of those (or None for 'inductor')",
            )


def _resolve_checkpointing_aliases(
    args: TrainingArguments, derived: dict[str, Any], previous: dict[str, Any]
) -> None:
    """``gradient_checkpointing(_kwargs)`` are transformers 5's older names of ``activation_checkpointing(_kwargs)``:
    taken when the new name is unset (the new name wins when both are set, as in transformers), then mirrored. On
    re-validation (``replace``) the name that changed since the
    last one wins, so ``replace(gradient_checkpointing=True)`` works as well as the new name."""
    for old, new, key in (
        ("gradient_checkpointing", "activation_checkpointing", "_checkpointing"),
        ("gradient_checkpointing_kwargs", "activation_checkpointing_kwargs", "_checkpointing_kwargs"),
    ):
        old_value, new_value = getattr(args, old), getattr(args, new)
        if key in previous:
            if new_value == previous[key] and old_value != previous[key]:
                new_value = old_value  # only the old name was changed since: it is the one chosen
        elif new_value is None:
            new_value = old_value
        setattr(args, new, new_value)
    args.activation_checkpointing = _as_bool(
        "activation_checkpointing", args.activation_checkpointing or False
    )
    args.gradient_checkpointing = derived["_checkpointing"] = args.activation_checkpointing


def _resolve_sampling(args: TrainingArguments, derived: dict[str, Any], previous: dict[str, Any]) -> None:
    """``train_sampling_strategy`` (transformers 5) and ``group_by_length`` (its transformers 4 flag) say the same
    thing: ``group_by_length=True`` with the default "random" means "group_by_length", and the flag follows the
    strategy. On re-validation (``replace``) the one that changed wins."""
    strategy, grouped = args.train_sampling_strategy, args.group_by_length
    if "_sampling" in previous:
        if strategy == previous["_sampling"][0] and grouped != previous["_sampling"][1]:
            strategy = "group_by_length" if grouped else "random"
    elif grouped and strategy == "random":
        strategy = "group_by_length"
    if strategy == "batch_rebalance":
        raise ValueError(
            "train_sampling_strategy='batch_rebalance' is not supported: this trainer does not rebalance batches "
            "across processes; pass 'random', 'sequential' or 'group_by_length'."
        )
    if strategy not in ("random", "sequential", "group_by_length"):
        _fail(
            "train_sampling_strategy",
            strategy,
            "'random', 'sequential' or 'group_by_length'",
            "pass one of those",
        )
    if grouped and strategy != "group_by_length" and "_sampling" not in previous:
        raise ValueError(
            f"group_by_length=True and train_sampling_strategy={strategy!r} disagree; pass only "
            "train_sampling_strategy ('group_by_length' groups by length)."
        )
    args.train_sampling_strategy = strategy
    args.group_by_length = strategy == "group_by_length"
    derived["_sampling"] = (strategy, args.group_by_length)


def _refusals(args: TrainingArguments) -> None:
    if not args.save_safetensors:
        raise ValueError(
            "save_safetensors=False is not supported: weights are only written as safetensors (no pickles); "
            "pass True (the default)."
        )
    if args.push_to_hub:
        raise ValueError(
            "push_to_hub=True is not supported: this trainer does not push to the Hugging Face Hub (the hub_* "
            "arguments are accepted but inert); pass False and upload output_dir (save_model writes what "
            "from_pretrained reads) with huggingface_hub yourself."
        )
    if args.jit_mode_eval:
        raise ValueError(
            "jit_mode_eval=True is not supported: this trainer does not trace models with torch.jit; pass False."
        )
    if args.half_precision_backend not in HALF_PRECISION_BACKENDS:
        _fail(
            "half_precision_backend",
            args.half_precision_backend,
            f"one of {', '.join(map(repr, HALF_PRECISION_BACKENDS))}",
            "pass 'auto' (torch's native amp through accelerate; apex is not supported)",
        )
    if args.fp16_full_eval and args.bf16_full_eval:
        raise ValueError("fp16_full_eval=True and bf16_full_eval=True ask for two precisions; pass only one.")
    import torch  # lazy: only these checks need torch

    cuda = torch.cuda.is_available() and not args.use_cpu
    if args.fp16_full_eval and not cuda:
        from ._precision import cpu_runs_fp16

        if not cpu_runs_fp16():  # recent torch builds run float16 on the CPU, as transformers' own tests do
            where = "use_cpu=True" if args.use_cpu else "no CUDA GPU is available"
            raise ValueError(
                f"fp16_full_eval=True needs a CUDA GPU or a torch that runs float16 on the CPU, but {where} and torch "
                f"{torch.__version__} does not; pass bf16_full_eval=True (supported on CPU) or False."
            )
    if args.tf32 and not cuda:
        where = "use_cpu=True" if args.use_cpu else "no CUDA GPU is available"
        raise ValueError(
            f"tf32=True needs an Ampere or newer CUDA GPU, but {where}; pass tf32=None or False."
        )


def _string_list(
    name: str,
    value: Any,
    accepted: tuple[str, ...],
    *,
    split: bool = False,
    refused: Mapping[str, str] | None = None,
) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = value.split() if split else ([value] if value else [])
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        _fail(name, value, "a list of strings", f"pass a list made of {', '.join(map(repr, accepted))}")
    out = [str(getattr(v, "value", v)).strip().lower() for v in value]
    for v in out:
        if refused and v in refused:
            raise ValueError(f"{name}={value!r} is not supported: {refused[v]}; remove {v!r}.")
        if v not in accepted:
            _fail(name, value, f"made of {', '.join(map(repr, accepted))}", f"remove {v!r}")
    return list(dict.fromkeys(out))


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        lowered = text.lower()
        return {"true": True, "false": False, "none": None}.get(lowered, text)


def _optim_args(value: Any) -> dict[str, Any]:
    """A dict, a JSON object string, or transformers' ``"k=v,k=v"`` form (values read as Python literals)."""
    if isinstance(value, str) and value.strip() and not value.strip().startswith("{"):
        out: dict[str, Any] = {}
        for part in value.split(","):
            key, sep, text = part.partition("=")
            if not sep or not key.strip():
                _fail(
                    "optim_args",
                    value,
                    'a dict, a JSON object or "key=value,key=value"',
                    'pass e.g. "momentum=0.9,nesterov=True"',
                )
            out[key.strip()] = _literal(text.strip())
        return out
    from ._validation import _as_dict

    return _as_dict("optim_args", value)


def _accelerator_config(value: Any) -> dict[str, Any]:
    """A dict, a JSON object string, or a path to a JSON file, with the keys accelerate's data loaders take."""
    from ._validation import _as_dict

    if isinstance(value, str | os.PathLike) and os.path.isfile(os.fspath(value)):
        with open(os.fspath(value), encoding="utf-8") as f:
            value = json.load(f)
    if value is None:
        value = {}
    if hasattr(value, "to_dict") and not isinstance(value, Mapping):
        value = value.to_dict()
    config = _as_dict("accelerator_config", value)
    unknown = sorted(set(config) - set(ACCELERATOR_CONFIG_KEYS))
    if unknown:
        _fail(
            "accelerator_config",
            value,
            f"a dict with keys among {', '.join(ACCELERATOR_CONFIG_KEYS)}",
            f"remove {unknown} (gradient_accumulation_kwargs and use_configured_state are not supported)",
        )
    if config.get("use_seedable_sampler", True) is not True:
        raise ValueError(
            "accelerator_config={'use_seedable_sampler': False} is not supported: resuming relies on the seeded "
            "sampler to find its place in the data; remove the key."
        )
    for key in ("split_batches", "even_batches", "non_blocking", "use_seedable_sampler"):
        if key in config:
            config[key] = _as_bool(f"accelerator_config[{key!r}]", config[key])
    if "dispatch_batches" in config:
        config["dispatch_batches"] = _as_bool(
            "accelerator_config['dispatch_batches']", config["dispatch_batches"], allow_none=True
        )
    return config
