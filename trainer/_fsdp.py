"""FSDP for `Trainer`: the ``fsdp``/``fsdp_config`` arguments, accelerate's plugin, and sharded checkpoints.

Three parts:

- `validate` (from ``TrainingArguments.__post_init__``, through ``_args_compat``) normalises ``fsdp`` (transformers' ``FSDPOption`` strings)
  and ``fsdp_config`` (its keys, with or without the ``fsdp_`` prefix) and refuses what cannot take effect here.
  A script started by ``accelerate launch`` with an FSDP configuration (``accelerate config``: the launcher sets
  ``ACCELERATE_USE_FSDP`` and ``FSDP_*``) gets that configuration as derived ``fsdp``/``fsdp_config`` values, so
  one code path builds the plugin and ``training_args.json`` records what ran; setting ``fsdp`` as well is refused.
- `plugin`, `before_build`, `environment_kept` and `after_build` (from ``_precision.build_accelerator``) hand
  accelerate its ``FullyShardedDataParallelPlugin``; `check_processes` and `check_model` (from ``Trainer.train``)
  refuse what would shard nothing before any step. accelerate 1.15 only turns FSDP on for accelerator processes (CUDA, XPU,
  NPU...): launched on CPU it keeps the plugin but trains with DistributedDataParallel. `after_build` switches such
  a CPU process group (gloo) to FSDP the way accelerate does for a GPU one (its state's ``distributed_type`` and
  ``fsdp_plugin``), so the same accelerate code prepares, clips and unwraps the model on CPU and on GPU.
- `save` / `load` / `load_model` (from ``_checkpoint``): model and optimizer state through torch's
  ``torch.distributed.checkpoint.state_dict`` API, written as this package writes every checkpoint: weights in
  safetensors, optimizer state as tensors-only ``.pt`` (read with ``weights_only=True``). ``FULL_STATE_DICT``
  gathers on the main process (``model.safetensors`` and ``optimizer.pt``, the layout of a checkpoint without
  FSDP); ``SHARDED_STATE_DICT`` has every process write its own shard (``fsdp_model_rank<i>.safetensors``,
  ``fsdp_optimizer_rank<i>.pt``), to be resumed by as many processes.

FSDP1 (``version: 1``) needs an accelerator: torch's FSDP1 on CPU fails in accelerate's preparation (device
``cpu`` vs ``cpu:0``) and crashes when its state is saved or loaded, so on CPU it is refused and version 2 (torch's
``fully_shard``, the default) is used.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

from ._validation import _as_bool, _as_int, _fail

if TYPE_CHECKING:
    from accelerate import Accelerator
    from torch import nn

    from ._trainer import Trainer
    from ._training_args import TrainingArguments

__all__ = [
    "OPTIONS",
    "active",
    "after_build",
    "before_build",
    "check_model",
    "check_processes",
    "environment_kept",
    "full_model_state",
    "is_sharded_model",
    "key",
    "load",
    "load_model",
    "model_loading",
    "plugin",
    "save",
    "state_key",
    "validate",
]

#: transformers' FSDPOption values.
STRATEGIES = ("full_shard", "shard_grad_op", "no_shard", "hybrid_shard", "hybrid_shard_zero2")
OPTIONS = (*STRATEGIES, "offload", "auto_wrap")
STATE_DICT_TYPES = ("FULL_STATE_DICT", "SHARDED_STATE_DICT")
BACKWARD_PREFETCH = ("backward_pre", "backward_post")
_BOOLS = (
    "forward_prefetch",
    "limit_all_gathers",
    "use_orig_params",
    "sync_module_states",
    "cpu_ram_efficient_loading",
    "activation_checkpointing",
)
#: Keys of fsdp_config (also accepted with the ``fsdp_`` prefix).
KEYS = (
    "version",
    "min_num_params",
    "transformer_layer_cls_to_wrap",
    "backward_prefetch",
    "state_dict_type",
    *_BOOLS,
    "xla",
    "xla_fsdp_settings",
    "xla_fsdp_grad_ckpt",
)
#: FSDP1 switches FSDP2 has no counterpart for, with the one value that describes FSDP2 (accepted and dropped).
_V1_ONLY = {
    "backward_prefetch": None,
    "forward_prefetch": False,
    "limit_all_gathers": False,
    "use_orig_params": True,
}
_ENV_FLAG = "ACCELERATE_USE_FSDP"
#: What a plugin and an Accelerator given one write into os.environ.
_ENV_WRITTEN = (_ENV_FLAG, "FSDP_CPU_RAM_EFFICIENT_LOADING")
#: PartialState's distributed_type before `after_build` switched a CPU process group to FSDP.
_switched_from: list[Any] = []


# ---------------------------------------------------------------------------------------------- arguments
def on_cpu(args: TrainingArguments) -> bool:
    """Whether the trainer's accelerator runs on the CPU: `_precision.training_device`'s rule (which imports this
    module, so the rule is restated here)."""
    import torch

    mps = getattr(torch.backends, "mps", None)
    return bool(args.use_cpu or not (torch.cuda.is_available() or (mps is not None and mps.is_available())))


def validate(args: TrainingArguments, derived: dict[str, Any], previous: dict[str, Any]) -> None:
    """Normalise ``args.fsdp`` to a list of options and ``args.fsdp_config`` to a dict of the keys that apply."""
    rederive = (
        "fsdp" in previous
        and args.fsdp == previous["fsdp"]
        and args.fsdp_config == previous.get("fsdp_config")
    )
    launched = launcher_config()
    if launched is not None:
        chosen = not rederive and (
            args.fsdp not in ("", None, False, []) or args.fsdp_config not in (None, {})
        )
        if chosen:
            raise ValueError(
                f"fsdp={args.fsdp!r} (fsdp_config={args.fsdp_config!r}) and the FSDP configuration of `accelerate "
                f"launch` ({_ENV_FLAG}=true with FSDP_* variables) both configure FSDP; keep one: remove fsdp and "
                "fsdp_config, or launch without the FSDP configuration."
            )
        args.fsdp, args.fsdp_config = launched
    elif rederive:
        args.fsdp, args.fsdp_config = "", None
    options = _options(args.fsdp)
    config = _config(args.fsdp_config)
    if not options:
        if config:
            _fail(
                "fsdp_config",
                args.fsdp_config,
                "empty while fsdp is off",
                "pass fsdp='full_shard' (or another strategy) to shard, or remove fsdp_config",
            )
        args.fsdp, args.fsdp_config = [], {}
        return
    args.fsdp, args.fsdp_config = options, _checked(args, options, config)
    if launched is not None:
        derived["fsdp"], derived["fsdp_config"] = args.fsdp, args.fsdp_config


def _options(value: Any) -> list[str]:
    fix = f"pass True, a string such as 'full_shard auto_wrap', or a list made of {', '.join(map(repr, OPTIONS))}"
    if value is True:
        return ["full_shard"]
    if isinstance(value, str):
        value = value.split()
    if value is None or value is False or (isinstance(value, list | tuple) and not value):
        return []
    if not isinstance(value, list | tuple):
        _fail("fsdp", value, "a bool, a string or a list of FSDP options", fix)
    out = []
    for item in value:
        item = getattr(item, "value", item)  # an FSDPOption-like enum
        # A command line may hand over ["full_shard auto_wrap"] as well as ["full_shard", "auto_wrap"].
        for option in item.split() if isinstance(item, str) else [item]:
            if not isinstance(option, str) or option.lower() not in OPTIONS:
                _fail("fsdp", value, f"made of {', '.join(map(repr, OPTIONS))}", f"remove {option!r}")
            out.append(option.lower())
    strategies = [o for o in out if o in STRATEGIES]
    if len(set(strategies)) > 1:
        _fail("fsdp", value, "at most one sharding strategy", f"keep one of {sorted(set(strategies))}")
    if not strategies:
        out.insert(0, "full_shard")  # offload/auto_wrap alone: the default strategy, as transformers
    return list(dict.fromkeys(out))


def _config(value: Any) -> dict[str, Any]:
    from ._validation import _as_dict

    if isinstance(value, str | os.PathLike) and os.path.isfile(os.fspath(value)):
        with open(os.fspath(value), encoding="utf-8") as f:
            value = json.load(f)
    config = _as_dict("fsdp_config", {} if value is None else value)
    out: dict[str, Any] = {}
    for key, item in config.items():
        name = key[5:] if key.startswith("fsdp_") and key != "fsdp_version" else key
        name = "version" if name == "fsdp_version" else name
        if name not in KEYS:
            _fail(
                "fsdp_config",
                value,
                f"a dict with keys among {', '.join(KEYS)} (or fsdp_<key>)",
                f"remove {key!r}",
            )
        if name in out:
            _fail(
                "fsdp_config",
                value,
                "a dict naming each key once",
                f"keep {name!r} or 'fsdp_{name}', not both",
            )
        out[name] = item
    return out


def _checked(args: TrainingArguments, options: list[str], config: dict[str, Any]) -> dict[str, Any]:
    """The config with its values checked and the defaults of the version filled in; refusals name the fix."""
    _refuse_other_sharding(args, options, config)
    version = _version(args, config)
    out: dict[str, Any] = {"version": version}
    for name in _BOOLS:
        if name in config:
            config[name] = _as_bool(f"fsdp_config[{name!r}]", config[name])
    out.update(_wrap_policy(options, config))
    _check_strategy(args, options, version)
    out["state_dict_type"] = _state_dict_type(config, version)
    if version == 1:
        out.update(_v1_settings(config))
    else:
        _refuse_v1_only(config)
    out.update(_loading_and_checkpointing(args, options, config, version))
    return out


def _refuse_other_sharding(args: TrainingArguments, options: list[str], config: dict[str, Any]) -> None:
    """DeepSpeed together with FSDP, and the TPU (XLA) keys."""
    if args.deepspeed is not None:
        raise ValueError(
            f"fsdp={options!r} and deepspeed={args.deepspeed!r} ask for two ways of sharding the model; pass one."
        )
    for name in ("xla", "xla_fsdp_grad_ckpt"):
        if _as_bool(f"fsdp_config[{name!r}]", config.pop(name, False)):
            raise ValueError(
                f"fsdp_config[{name!r}]=True is not supported: this trainer does not run on TPUs "
                "(PyTorch/XLA); remove the key."
            )
    if config.pop("xla_fsdp_settings", None):
        raise ValueError(
            "fsdp_config['xla_fsdp_settings'] is not supported: this trainer does not run on TPUs "
            "(PyTorch/XLA); remove the key."
        )


def _version(args: TrainingArguments, config: dict[str, Any]) -> int:
    """FSDP's version: 2 (fully_shard) by default, 1 (FullyShardedDataParallel) on GPUs only."""
    version = config.get("version", 2)
    if isinstance(version, str) and version.strip().isdigit():
        version = int(version)
    if version not in (1, 2) or isinstance(version, bool):
        _fail("fsdp_config['version']", version, "1 (FullyShardedDataParallel) or 2 (fully_shard)", "pass 2")
    if version == 1 and on_cpu(args):
        raise ValueError(
            "fsdp_config['version']=1 is not supported on CPU: torch's FSDP1 fails on a CPU process group in "
            "accelerate (device 'cpu' vs 'cpu:0', then crashes saving or loading its state); pass version 2 "
            "(the default; in an accelerate config file, fsdp_version: 2), or train on GPUs."
        )
    return version


def _wrap_policy(options: list[str], config: dict[str, Any]) -> dict[str, Any]:
    """Auto wrapping's policy: by parameter count or by layer class (None: the model's _no_split_modules)."""
    out: dict[str, Any] = {}
    min_params = _as_int("fsdp_config['min_num_params']", config.get("min_num_params", 0), minimum=0)
    layers = config.get("transformer_layer_cls_to_wrap")
    if isinstance(layers, str):
        layers = [name.strip() for name in layers.split(",") if name.strip()]
    if layers is not None and (
        not isinstance(layers, list | tuple)
        or not layers
        or not all(isinstance(n, str) and n for n in layers)
    ):
        _fail(
            "fsdp_config['transformer_layer_cls_to_wrap']",
            layers,
            "a non-empty list of class names",
            "pass e.g. ['BertLayer']",
        )
    if min_params and layers:
        raise ValueError(
            f"fsdp_config sets both min_num_params={min_params} and transformer_layer_cls_to_wrap={list(layers)}: "
            "they are two wrapping policies; keep one."
        )
    if (min_params or layers) and "auto_wrap" not in options:
        what = (
            f"min_num_params={min_params}"
            if min_params
            else f"transformer_layer_cls_to_wrap={list(layers or [])}"
        )
        raise ValueError(
            f"fsdp_config {what} only applies with fsdp option 'auto_wrap', got fsdp={options!r}; add "
            "'auto_wrap' to fsdp, or remove the key."
        )
    if "auto_wrap" in options:
        if min_params:
            out["min_num_params"] = min_params
        else:
            out["transformer_layer_cls_to_wrap"] = (
                list(layers) if layers else None
            )  # None: model._no_split_modules
    return out


def _check_strategy(args: TrainingArguments, options: list[str], version: int) -> None:
    """CPU offload and the sharding strategy, against the device and FSDP's version."""
    cpu = on_cpu(args)
    strategy = next(o for o in options if o in STRATEGIES)
    if "offload" in options:
        if cpu:
            raise ValueError(
                f"fsdp option 'offload' moves parameters and gradients to CPU memory, but this run trains on the CPU "
                f"(fsdp={options!r}); remove 'offload'."
            )
        if strategy not in ("full_shard", "shard_grad_op"):
            _fail(
                "fsdp",
                options,
                "'offload' together with 'full_shard' or 'shard_grad_op'",
                "pick one of those",
            )
    if version == 2 and strategy not in ("full_shard", "shard_grad_op"):
        raise ValueError(
            f"fsdp={options!r} with FSDP2 (fsdp_config version 2, the default): FSDP2 has no {strategy!r} strategy "
            "(no_shard is plain data parallelism; hybrid sharding needs a 2-D device mesh); pass 'full_shard' or "
            "'shard_grad_op', or fsdp_config={'version': 1} on GPUs."
        )


def _state_dict_type(config: dict[str, Any], version: int) -> str:
    state_dict_type = str(
        config.get("state_dict_type", "FULL_STATE_DICT" if version == 1 else "SHARDED_STATE_DICT")
    )
    if state_dict_type.upper() not in STATE_DICT_TYPES:
        _fail(
            "fsdp_config['state_dict_type']",
            config.get("state_dict_type"),
            f"one of {', '.join(STATE_DICT_TYPES)}",
            "pass one of those (LOCAL_STATE_DICT checkpoints are not supported)",
        )
    return state_dict_type.upper()


def _v1_settings(config: dict[str, Any]) -> dict[str, Any]:
    """FSDP1's prefetching and parameter switches, with their defaults."""
    out: dict[str, Any] = {}
    prefetch = config.get("backward_prefetch")
    if isinstance(prefetch, str) and prefetch.strip().lower() == "no_prefetch":
        prefetch = None
    if prefetch is not None and (
        not isinstance(prefetch, str) or prefetch.strip().lower() not in BACKWARD_PREFETCH
    ):
        _fail(
            "fsdp_config['backward_prefetch']",
            prefetch,
            f"None or one of {', '.join(BACKWARD_PREFETCH)}",
            "pass one of those",
        )
    out["backward_prefetch"] = prefetch.strip().lower() if prefetch else None
    for name, default in (
        ("forward_prefetch", False),
        ("limit_all_gathers", False),
        ("use_orig_params", True),
    ):
        out[name] = config.get(name, default)
    return out


def _refuse_v1_only(config: dict[str, Any]) -> None:
    """FSDP1 settings that FSDP2 has no switch for, unless set to what FSDP2 does."""
    for name, fsdp2 in _V1_ONLY.items():
        value = config.get(name, fsdp2)
        if name == "backward_prefetch" and isinstance(value, str) and value.strip().lower() == "no_prefetch":
            value = None
        if value != fsdp2:
            raise ValueError(
                f"fsdp_config[{name!r}]={value!r} is an FSDP1 setting that FSDP2 (version 2, the default) has "
                f"no switch for (FSDP2 behaves as {name}={fsdp2!r}); remove the key, or pass "
                "fsdp_config={'version': 1} on GPUs."
            )


def _loading_and_checkpointing(
    args: TrainingArguments, options: list[str], config: dict[str, Any], version: int
) -> dict[str, Any]:
    """Module state syncing, CPU-RAM-efficient loading and FSDP's activation checkpointing."""
    out: dict[str, Any] = {}
    out["sync_module_states"] = config.get("sync_module_states", True)
    out["cpu_ram_efficient_loading"] = config.get("cpu_ram_efficient_loading", False)
    if version == 1 and out["cpu_ram_efficient_loading"] and not out["sync_module_states"]:
        raise ValueError(
            "fsdp_config cpu_ram_efficient_loading=True needs sync_module_states=True (the other "
            "processes start from empty weights); pass sync_module_states=True."
        )
    out["activation_checkpointing"] = config.get("activation_checkpointing", False)
    if out["activation_checkpointing"] and "auto_wrap" not in options:
        raise ValueError(
            f"fsdp_config activation_checkpointing=True checkpoints the layers that auto wrapping picks, but fsdp="
            f"{options!r} has no 'auto_wrap'; add 'auto_wrap' (with min_num_params or transformer_layer_cls_to_wrap)."
        )
    if out["activation_checkpointing"] and args.gradient_checkpointing:
        raise ValueError(
            "fsdp_config activation_checkpointing=True and gradient_checkpointing=True both recompute activations; "
            "keep activation_checkpointing (FSDP's own) and pass gradient_checkpointing=False."
        )
    return out


def launcher_config() -> tuple[list[str], dict[str, Any]] | None:
    """``(fsdp, fsdp_config)`` from the variables ``accelerate launch`` sets for an FSDP configuration, or None.

    Only the variables accelerate's plugin reads for the configured version are read (the launcher writes every
    ``FSDP_*`` variable, whether it applies or not).
    """
    env = os.environ
    if env.get(_ENV_FLAG, "false").strip().lower() not in ("true", "1", "yes"):
        return None

    def flag(name: str, default: bool = False) -> bool:
        return env.get(f"FSDP_{name}", str(default)).strip().lower() in ("true", "1", "yes")

    version = int(env.get("FSDP_VERSION", "1"))
    options: list[str] = []
    config: dict[str, Any] = {"version": version}
    if version == 1:
        strategy = env.get("FSDP_SHARDING_STRATEGY", "FULL_SHARD").strip()
        if strategy.isdigit():
            strategy = ("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2")[
                int(strategy) - 1
            ]
        options.append(strategy.lower())
        prefetch = env.get("FSDP_BACKWARD_PREFETCH")
        if prefetch:
            config["backward_prefetch"] = prefetch.lower()
        config["forward_prefetch"] = flag("FORWARD_PREFETCH")
        config["use_orig_params"] = flag("USE_ORIG_PARAMS")
        config["sync_module_states"] = flag("SYNC_MODULE_STATES")
    else:
        reshard = env.get("FSDP_RESHARD_AFTER_FORWARD", "true").strip().lower()
        options.append("full_shard" if reshard in ("true", "1", "yes", "full_shard") else "shard_grad_op")
        config["sync_module_states"] = (
            False  # accelerate's FSDP2 broadcasts only with cpu_ram_efficient_loading
        )
    if flag("OFFLOAD_PARAMS"):
        options.append("offload")
    policy = env.get("FSDP_AUTO_WRAP_POLICY", "NO_WRAP").strip().upper()
    if policy == "SIZE_BASED_WRAP":
        options.append("auto_wrap")
        config["min_num_params"] = int(env.get("FSDP_MIN_NUM_PARAMS", "0"))
    elif policy == "TRANSFORMER_BASED_WRAP":
        options.append("auto_wrap")
        layers = env.get("FSDP_TRANSFORMER_CLS_TO_WRAP")
        if layers:
            config["transformer_layer_cls_to_wrap"] = layers.split(",")
    if env.get("FSDP_STATE_DICT_TYPE"):
        config["state_dict_type"] = env["FSDP_STATE_DICT_TYPE"]
    config["cpu_ram_efficient_loading"] = flag("CPU_RAM_EFFICIENT_LOADING")
    config["activation_checkpointing"] = flag("ACTIVATION_CHECKPOINTING")
    return options, config


def key(args: TrainingArguments) -> str | None:
    """What the FSDP set-up depends on (None without FSDP): a change means another accelerator."""
    if not args.fsdp:
        return None
    return json.dumps([args.fsdp, args.fsdp_config], sort_keys=True)


# ---------------------------------------------------------------------------------------------- accelerator
def plugin(args: TrainingArguments) -> Any:
    """accelerate's ``FullyShardedDataParallelPlugin`` for validated arguments, or None without FSDP."""
    if not args.fsdp:
        return None
    from accelerate.utils import FullyShardedDataParallelPlugin

    config, options = cast(dict, args.fsdp_config), cast(list, args.fsdp)  # validated
    version = config["version"]
    strategy = next(o for o in options if o in STRATEGIES)
    kwargs: dict[str, Any] = {
        "fsdp_version": version,
        "cpu_offload": "offload" in options,
        "state_dict_type": config["state_dict_type"],
        "activation_checkpointing": config["activation_checkpointing"],
    }
    if version == 1:
        kwargs.update(
            sharding_strategy=strategy.upper(),
            backward_prefetch=config["backward_prefetch"] or "NO_PREFETCH",
            forward_prefetch=config["forward_prefetch"],
            limit_all_gathers=config["limit_all_gathers"],
            use_orig_params=config["use_orig_params"],
            sync_module_states=config["sync_module_states"],
            cpu_ram_efficient_loading=config["cpu_ram_efficient_loading"],
        )
    else:
        kwargs["reshard_after_forward"] = strategy == "full_shard"
        # FSDP2 has no sync_module_states: accelerate broadcasts the main process's weights when preparing the
        # model only with cpu_ram_efficient_loading, so that is how either setting takes effect.
        kwargs["cpu_ram_efficient_loading"] = (
            config["sync_module_states"] or config["cpu_ram_efficient_loading"]
        )
    if "auto_wrap" in options:
        if "min_num_params" in config:
            kwargs.update(auto_wrap_policy="size_based_wrap", min_num_params=config["min_num_params"])
        else:
            kwargs.update(
                auto_wrap_policy="transformer_based_wrap",
                transformer_cls_names_to_wrap=config["transformer_layer_cls_to_wrap"],
            )
    else:
        kwargs["auto_wrap_policy"] = "no_wrap"
    made = FullyShardedDataParallelPlugin(**kwargs)
    made.hpsearch_key = key(args)  # what `state_key` reads back from accelerate's state
    return made


def state_key() -> str | None:
    """The `key` of the FSDP set-up accelerate's process-wide state holds (None when it holds none)."""
    from accelerate.state import AcceleratorState
    from accelerate.utils import DistributedType

    shared = AcceleratorState._shared_state
    if not shared or shared.get("distributed_type") != DistributedType.FSDP:
        return None
    return getattr(shared.get("fsdp_plugin"), "hpsearch_key", "accelerate")


@contextmanager
def environment_kept() -> Iterator[None]:
    """Keep os.environ as it was around building a plugin and an Accelerator, which write FSDP variables there.

    A launcher's FSDP configuration lives in those variables, so what an accelerator of this process writes must
    not read as one for the next arguments. accelerate decides by its state's distributed type once built (its
    later reads of ``ACCELERATE_USE_FSDP`` are on XLA); `model_loading` sets the variables transformers reads.
    """
    saved = {name: os.environ.get(name) for name in _ENV_WRITTEN}
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def model_loading(args: TrainingArguments) -> Iterator[None]:
    """While ``model_init`` runs: with cpu_ram_efficient_loading, the variables that make transformers'
    ``from_pretrained`` load the weights on the main process only (the others get them from it when prepared)."""
    if not args.fsdp or not cast(dict, args.fsdp_config).get("cpu_ram_efficient_loading"):
        yield
        return
    with environment_kept():
        os.environ.update({_ENV_FLAG: "true", "FSDP_CPU_RAM_EFFICIENT_LOADING": "true"})
        yield


def before_build() -> None:
    """Undo what the last FSDP accelerator left in accelerate's process state (the next one must not inherit it)."""
    from accelerate.state import PartialState

    if _switched_from:
        PartialState._shared_state["distributed_type"] = _switched_from.pop()


def after_build(accelerator: Accelerator, made: Any, args: TrainingArguments) -> None:
    """Make an accelerator built with an FSDP plugin train with FSDP (see the module docstring)."""
    if made is None:
        return
    from accelerate.state import PartialState
    from accelerate.utils import DistributedType

    state = accelerator.state
    if state.distributed_type == DistributedType.MULTI_CPU:
        # What accelerate's AcceleratorState does for a GPU process group given a plugin.
        _switched_from.append(PartialState._shared_state["distributed_type"])
        state.distributed_type = DistributedType.FSDP
        PartialState._shared_state["distributed_type"] = DistributedType.FSDP
        precision = str(state.mixed_precision)
        if precision != "no":
            made.set_mixed_precision(precision)
    if state.distributed_type == DistributedType.FSDP:
        state.fsdp_plugin = made
    elif state.distributed_type != DistributedType.NO:  # NO: refused when training starts (`check_processes`)
        raise RuntimeError(
            f"fsdp={args.fsdp!r}: accelerate set up {state.distributed_type.value} instead of FSDP; FSDP needs CPU "
            "(gloo) or accelerator processes started by `accelerate launch` or torchrun. Remove fsdp."
        )


def active(accelerator: Any) -> bool:
    from accelerate.utils import DistributedType

    return accelerator is not None and accelerator.distributed_type == DistributedType.FSDP


def check_processes(trainer: Trainer) -> None:
    """Refuse to train with ``fsdp`` in a process that no launcher started: there would be nothing to shard."""
    if trainer.args.fsdp and not active(trainer.accelerator):
        raise ValueError(
            f"fsdp={trainer.args.fsdp!r} needs processes started by a launcher (`accelerate launch --num_processes "
            "N`, torchrun, or a search's workers_per_trial), but this process runs alone; launch it that way, or "
            "remove fsdp to train in one process."
        )


def check_model(trainer: Trainer) -> None:
    """Refuse a transformer-based auto wrap that would wrap nothing in this model (before it is prepared)."""
    config = cast(dict, trainer.args.fsdp_config)
    if "auto_wrap" not in cast(list, trainer.args.fsdp) or "min_num_params" in config:
        return
    model = trainer.model
    names = config.get("transformer_layer_cls_to_wrap") or list(
        getattr(model, "_no_split_modules", None) or []
    )
    present = {type(m).__name__ for m in model.modules()}
    missing = [name for name in names if name not in present]
    if not names or missing:
        what = (
            f"names {missing}, which are not"
            if missing
            else "no layer classes and the model has no _no_split_modules"
        )
        raise ValueError(
            f"fsdp option 'auto_wrap' wraps the layer classes of fsdp_config['transformer_layer_cls_to_wrap'], which "
            f"{what} among the model's modules ({', '.join(sorted(present))}); pass class names from that list, or "
            "fsdp_config={'min_num_params': N} to wrap by size."
        )


# ---------------------------------------------------------------------------------------------- checkpoints
MODEL_SHARD = "fsdp_model_rank{rank}.safetensors"
OPTIMIZER_SHARD = "fsdp_optimizer_rank{rank}.pt"


def sharded(trainer: Trainer) -> bool:
    return cast(dict, trainer.args.fsdp_config).get("state_dict_type") == "SHARDED_STATE_DICT"


def _options_of(full: bool, **kwargs: Any) -> Any:
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=full, cpu_offload=True, **kwargs)


def resharded(model: nn.Module) -> nn.Module:
    """``model`` with every FSDP2 unit back in its sharded state.

    A forward without backward (an evaluation) leaves units that do not reshard after forward (the root, and all
    of them with shard_grad_op) holding gathered parameters, which are not the ones the optimizer steps.
    """
    from torch.distributed.fsdp import FSDPModule

    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.reshard()
    return model


def full_model_state(model: nn.Module) -> dict[str, Any]:
    """The whole model's tensors on the main process ({} on the others); every process must call it."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    return get_model_state_dict(resharded(model), options=_options_of(True))


def _local(state: Mapping[str, Any]) -> dict[str, Any]:
    """A (nested) state dict with each DTensor replaced by this process's shard of it."""
    from torch.distributed.tensor import DTensor

    return {
        k: _local(v) if isinstance(v, Mapping) else v.to_local() if isinstance(v, DTensor) else v
        for k, v in state.items()
    }


def _like(template: Mapping[str, Any], local: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``local`` (a process's saved shards) made into DTensors placed as ``template``'s (the live state)."""
    from torch.distributed.tensor import DTensor

    out: dict[str, Any] = {}
    for k, v in template.items():
        if k not in local:
            raise RuntimeError(f"{where} has no entry {k!r}: was it saved from a different model_init?")
        if isinstance(v, Mapping):
            out[k] = _like(v, local[k], where)
        elif isinstance(v, DTensor):
            out[k] = DTensor.from_local(
                local[k].to(v.device),
                v.device_mesh,
                v.placements,
                run_check=False,
                shape=v.shape,
                stride=v.stride(),
            )
        else:
            out[k] = local[k]
    return out


def is_sharded_model(model: Any) -> bool:
    """Whether ``model`` was prepared for FSDP (torch's FSDP2 ``FSDPModule`` or FSDP1 wrapper)."""
    from torch.distributed.fsdp import FSDPModule, FullyShardedDataParallel

    return isinstance(model, FSDPModule | FullyShardedDataParallel)


def save(
    trainer: Trainer, model: nn.Module, folder: str
) -> tuple[dict[str, Any], dict[str, Any] | None] | None:
    """Every process: write this process's shards into ``folder`` (SHARDED_STATE_DICT) and return None, or return
    the gathered model and optimizer state (FULL_STATE_DICT; empty except on the main process) for it to write."""
    import torch
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict

    accelerator = trainer.accelerator
    assert accelerator is not None and trainer.optimizer is not None
    resharded(model)
    with_optimizer = not trainer.args.save_only_model
    if not sharded(trainer):
        optimizer = (
            get_optimizer_state_dict(model, trainer.optimizer, options=_options_of(True))
            if with_optimizer
            else None
        )
        return full_model_state(model), optimizer
    from safetensors.torch import save_file

    rank = accelerator.process_index
    weights = _local(get_model_state_dict(model, options=_options_of(False)))
    save_file(
        {k: v.contiguous() for k, v in weights.items()},
        os.path.join(folder, MODEL_SHARD.format(rank=rank)),
        metadata={"format": "pt", "world_size": str(accelerator.num_processes)},
    )
    if with_optimizer:
        state = _local(get_optimizer_state_dict(model, trainer.optimizer, options=_options_of(False)))
        torch.save(state, os.path.join(folder, OPTIMIZER_SHARD.format(rank=rank)))
    return None


def load_model(
    trainer: Trainer, model: nn.Module, folder: str, read_full: Callable[[str], dict[str, Any]]
) -> None:
    """Every process: load a checkpoint's model state into the prepared (sharded) ``model``; ``read_full`` reads
    a FULL_STATE_DICT checkpoint's weights (on the main process, which sends them to the others)."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict

    accelerator = trainer.accelerator
    assert accelerator is not None
    resharded(model)
    if sharded(trainer):
        from safetensors.torch import load_file

        path = _shard_path(folder, MODEL_SHARD, accelerator)
        template = get_model_state_dict(model, options=_options_of(False))
        set_model_state_dict(model, _like(template, load_file(path), path), options=_options_of(False))
        return
    weights = read_full(folder) if accelerator.is_main_process else {}
    set_model_state_dict(model, weights, options=_options_of(True, broadcast_from_rank0=True))


def load(
    trainer: Trainer,
    model: nn.Module,
    folder: str,
    read_full: Callable[[str], dict[str, Any]],
    optimizer_file: str,
) -> bool:
    """Every process: resume ``model`` and the optimizer from ``folder`` (FULL_STATE_DICT: the main process reads
    ``optimizer_file`` there); False when the checkpoint holds no optimizer state."""
    import torch
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict, set_optimizer_state_dict

    accelerator = trainer.accelerator
    assert accelerator is not None and trainer.optimizer is not None
    load_model(trainer, model, folder, read_full)
    if sharded(trainer):
        if not os.path.isfile(os.path.join(folder, OPTIMIZER_SHARD.format(rank=accelerator.process_index))):
            return False
        path = _shard_path(folder, OPTIMIZER_SHARD, accelerator)
        template = get_optimizer_state_dict(model, trainer.optimizer, options=_options_of(False))
        state = _like(template, torch.load(path, weights_only=True, map_location="cpu"), path)
        set_optimizer_state_dict(model, trainer.optimizer, state, options=_options_of(False))
        return True
    path = os.path.join(folder, optimizer_file)
    if not os.path.isfile(path):
        return False
    state = torch.load(path, weights_only=True, map_location="cpu") if accelerator.is_main_process else {}
    set_optimizer_state_dict(
        model, trainer.optimizer, state, options=_options_of(True, broadcast_from_rank0=True)
    )
    return True


def _shard_path(folder: str, pattern: str, accelerator: Any) -> str:
    path = os.path.join(folder, pattern.format(rank=accelerator.process_index))
    beyond = os.path.join(folder, pattern.format(rank=accelerator.num_processes))
    if not os.path.isfile(path) or os.path.isfile(beyond):
        saved = sum(os.path.isfile(os.path.join(folder, pattern.format(rank=r))) for r in range(1024))
        raise ValueError(
            f"{folder!r} holds an FSDP checkpoint sharded over {saved} processes (state_dict_type "
            f"SHARDED_STATE_DICT), but {accelerator.num_processes} are resuming it; resume with {saved} processes, "
            "or save with fsdp_config={'state_dict_type': 'FULL_STATE_DICT'} to resume on any number."
        )
    return path
