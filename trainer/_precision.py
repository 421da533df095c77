"""Precision and devices for `Trainer`: building the `accelerate.Accelerator` a run needs.

accelerate keeps its configuration in process-wide state (``AcceleratorState``) that refuses a second
``Accelerator`` with another ``mixed_precision`` (and silently keeps the first torch.compile backend). A search
whose trials differ in precision or compilation, or two such trainers in one script, therefore reset that state
(keeping the process group, which ``PartialState`` holds) before building their accelerator. The device is
``PartialState``'s and accelerate keeps the first one silently (a ``use_cpu`` trainer after a GPU one trained on the
GPU, or failed, and a GPU trainer after a CPU one trained on the CPU): a trainer that wants another device resets that
state too, in a process that was not launched as one of a group. What cannot be reset is a state a run in progress
depends on: building an accelerator with another precision or device while another trainer of this process is
training is refused with the fix (run such trials one at a time or in separate processes).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections import Counter
from typing import TYPE_CHECKING, Any, cast

import torch

from . import _fsdp

if TYPE_CHECKING:
    from accelerate import Accelerator

    from ._training_args import TrainingArguments

__all__ = ["build_accelerator", "keep_for_reuse", "mps_available", "reused_accelerator", "training_with"]

logger = logging.getLogger(__name__)

_lock = threading.Lock()
# Precisions of the train() calls running in this process right now (threads of a search, nested trainers).
_running: Counter[Any] = Counter()  # Signature
# Accelerators of trainers that will not train again (`keep_for_reuse`), by `accelerator_key`, for the next trainer
# of that key: a search's next trial. Each is owned by one trainer at a time (taken out under the lock).
_kept: dict[tuple[Any, ...], list[Accelerator]] = {}
_MAX_KEPT = 4  # per key: as many as trials run at once in threads, commonly


def mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


@functools.cache
def cpu_runs_fp16() -> bool:
    """Whether this torch build runs the layers of a usual model in float16 on the CPU (recent builds do; older ones
    raise "not implemented for 'Half'"), so that ``fp16_full_eval`` can evaluate there, as transformers lets it."""
    import torch.nn.functional as F

    half = torch.float16
    try:
        x = torch.randn(2, 3, 4).to(half)
        w = torch.randn(5, 4).to(half)
        y = F.gelu(F.linear(x, w, torch.zeros(5, dtype=half)))
        y = F.layer_norm(y, (5,)) + torch.tanh(y) + F.relu(y)
        F.cross_entropy(
            F.softmax(y @ y.transpose(1, 2), dim=-1).flatten(0, 1), torch.zeros(6, dtype=torch.long)
        )
        F.embedding(torch.tensor([0, 1]), w).sum()
    except (RuntimeError, NotImplementedError):
        return False
    return True


def training_device(args: TrainingArguments) -> str:
    """The type of device `build_accelerator` trains on: the CPU, or torch's accelerator (CUDA or MPS).
    ``accelerate launch --cpu`` (``ACCELERATE_USE_CPU``) means the CPU, as accelerate takes it."""
    from accelerate.utils import parse_flag_from_env

    if (
        args.use_cpu
        or parse_flag_from_env("ACCELERATE_USE_CPU")
        or not (torch.cuda.is_available() or mps_available())
    ):
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "mps"


def precision_of(args: TrainingArguments) -> str:
    return str(getattr(args.mixed_precision, "value", args.mixed_precision))


def accelerator_key(args: TrainingArguments) -> tuple[Any, ...]:
    """What the accelerator depends on: a trainer whose key changed builds a new one."""
    data_seed = args.data_seed if args.data_seed is not None else args.seed
    return (
        args.use_cpu,
        precision_of(args),
        args.gradient_accumulation_steps,
        data_seed,
        args.dispatch_batches,
        args.split_batches,
        repr(sorted(cast(dict, args.accelerator_config).items())),
        args.ddp_backend,
        args.ddp_timeout,
        args.ddp_find_unused_parameters,
        args.ddp_bucket_cap_mb,
        args.ddp_broadcast_buffers,
        args.ddp_static_graph,
        args.tf32,
        args.torch_compile,
        args.torch_compile_backend,
        args.torch_compile_mode,
        _fsdp.key(args),
    )


def compile_backend_of(args: TrainingArguments) -> str:
    return (args.torch_compile_backend or "inductor").upper() if args.torch_compile else "NO"


Signature = tuple[str, str, str | None, str | None, str | None]


def _signature(args: TrainingArguments) -> Signature:
    """What accelerate keeps process-wide and will not change: the precision, the torch.compile backend/mode, the
    FSDP plugin and the type of device."""
    mode = (args.torch_compile_mode or "default") if args.torch_compile else None
    return precision_of(args), compile_backend_of(args), mode, _fsdp.key(args), training_device(args)


def process_device() -> str | None:
    """The type of device accelerate's process state (``PartialState``) holds; None before it is set up."""
    from accelerate.state import PartialState

    device = PartialState._shared_state.get("device")
    return getattr(device, "type", None) if device is not None else None


def process_state(args: TrainingArguments, **kwargs: Any) -> Any:
    """accelerate's process state (``PartialState``) on the device ``args`` trains on: one set up on another device
    is set up again, as `build_accelerator` would, where no trainer of this process is training and the process was
    not launched as one of a group (there the first device stays, as accelerate keeps it)."""
    from accelerate.state import AcceleratorState, PartialState

    device = training_device(args)
    current = process_device()
    if current is not None and current != device:
        with _lock:
            if not _launched() and not any(n > 0 for n in _running.values()):
                AcceleratorState._reset_state(reset_partial_state=True)
    return PartialState(cpu=device == "cpu", **kwargs)


def state_signature() -> Signature | None:
    """The precision, compile backend, FSDP set-up and device accelerate's process-wide state holds; None before
    any."""
    from accelerate.state import AcceleratorState

    shared = AcceleratorState._shared_state
    if not shared:
        return None
    if (
        "_mixed_precision" in shared
    ):  # the shared dict is private: read it fast, through the state when it changes
        precision, plugin = shared["_mixed_precision"], shared.get("dynamo_plugin")
    else:
        state = AcceleratorState()  # the same (borg) state, its public properties
        precision, plugin = state.mixed_precision, getattr(state, "dynamo_plugin", None)
    backend = str(getattr(getattr(plugin, "backend", None), "value", "NO")).upper()
    mode = (getattr(plugin, "mode", None) or "default") if backend != "NO" else None
    return str(getattr(precision, "value", precision)), backend, mode, _fsdp.state_key(), process_device()


def state_matches(args: TrainingArguments) -> bool:
    return state_signature() == _signature(args)


def build_accelerator(args: TrainingArguments) -> Accelerator:
    from accelerate.state import AcceleratorState

    wanted = _signature(args)
    data_seed = args.data_seed if args.data_seed is not None else args.seed
    with _lock:
        current = state_signature()
        device = process_device()
        other_device = device is not None and device != wanted[4]
        if other_device or (current is not None and current != wanted):
            busy = sorted((s for s, n in _running.items() if n > 0 and s != wanted), key=repr)
            if busy:
                raise RuntimeError(
                    f"mixed_precision={wanted[0]!r} (torch.compile backend {wanted[1]}, fsdp {wanted[3]}, device "
                    f"{wanted[4]}) cannot be set up while another trainer in this process is training with "
                    f"mixed_precision={busy[0][0]!r} (backend {busy[0][1]}, fsdp {busy[0][3]}, device {busy[0][4]}): "
                    "accelerate holds one of each per process. Run trials that differ in them one at a time "
                    "(n_jobs=1) or in separate processes."
                )
            if other_device and _launched():
                raise RuntimeError(
                    f"use_cpu={args.use_cpu}: this process was launched as one of a process group on {device}, and "
                    f"the group cannot move to {wanted[4]}; launch the script again with the device it should use "
                    "(`accelerate launch --cpu` for the CPU)."
                )
            # The process group (PartialState) stays unless the device changes (a single process has no group).
            AcceleratorState._reset_state(reset_partial_state=other_device)
            _kept.clear()  # built on the state just reset
        config = dict(cast(dict, args.accelerator_config))  # a dict once validated
        _set_tf32(args)
        _fsdp.before_build()
        with _fsdp.environment_kept():
            fsdp_plugin = _fsdp.plugin(args)
            accelerator = _accelerator(args, wanted[0], data_seed, config, fsdp_plugin)
        _fsdp.after_build(accelerator, fsdp_plugin, args)
        return accelerator


def keep_for_reuse(key: tuple[Any, ...], accelerator: Accelerator) -> None:
    """Keep the accelerator of a trainer that will not train again (its `release_memory`) for the next trainer whose
    `accelerator_key` is ``key`` (`reused_accelerator`): a search builds one per trial otherwise (~0.1-0.2 ms, and
    garbage for the collector). It is emptied as accelerate's own ``free_memory`` empties one for a new training
    (without its garbage collection): no model, optimizer, scheduler or loader listed, step 0. Only one that keeps
    nothing else of its run is kept: one process, no gradient scaler (its loss scale would carry over), no DeepSpeed
    or FSDP, no LOMO optimizer, trackers, trigger, registered objects or state hooks."""
    from accelerate.utils import DistributedType

    if not (
        accelerator.num_processes == 1
        and accelerator.distributed_type == DistributedType.NO
        and accelerator.scaler is None
        and getattr(accelerator, "deepspeed_engine_wrapped", None) is None
        and accelerator.state.deepspeed_plugin is None
        and getattr(accelerator.state, "fsdp_plugin", None) is None
        and not accelerator.has_lomo_optimizer
        and not accelerator.trackers
        and accelerator.flag_tensor is None
        and not accelerator._custom_objects
        and not accelerator._save_model_state_pre_hook
        and not accelerator._load_model_state_pre_hook
    ):
        return
    accelerator._models, accelerator._optimizers = [], []
    accelerator._schedulers, accelerator._dataloaders = [], []
    accelerator.step = 0
    with _lock:
        kept = _kept.setdefault(key, [])
        if len(kept) < _MAX_KEPT and all(other is not accelerator for other in kept):
            kept.append(accelerator)


def reused_accelerator(args: TrainingArguments) -> Accelerator | None:
    """A kept accelerator (`keep_for_reuse`) of ``args``' `accelerator_key`, when accelerate's process-wide state is
    still the one it was built on; None otherwise (then `build_accelerator` builds one). What its construction set
    process-wide is set again: the gradient accumulation of accelerate's shared state (another trainer may have
    changed it since) and TF32."""
    from accelerate.state import GradientState

    with _lock:
        kept = _kept.get(accelerator_key(args))
        if not kept or state_signature() != _signature(args):
            return None
        accelerator = kept.pop()
    GradientState(gradient_accumulation_plugin=_accumulation_plugin(args.gradient_accumulation_steps))
    _set_tf32(args)
    return accelerator


def _set_tf32(args: TrainingArguments) -> None:
    """``tf32``, where set, is process-wide (torch's matmul and cuDNN switches)."""
    if args.tf32 is not None:
        torch.backends.cuda.matmul.allow_tf32 = args.tf32
        torch.backends.cudnn.allow_tf32 = args.tf32


def _accelerator(
    args: TrainingArguments, precision: str, data_seed: int, config: dict[str, Any], fsdp_plugin: Any
) -> Accelerator:
    from accelerate import Accelerator
    from accelerate.state import PartialState
    from accelerate.utils import DataLoaderConfiguration, InitProcessGroupKwargs

    handlers = ddp_kwargs(args)
    group = next(h for h in handlers if isinstance(h, InitProcessGroupKwargs))
    withheld = PartialState._shared_state != {} or not _launched()
    if withheld:
        # accelerate reads the process-group settings only when it sets up the process state, once per process, and
        # they matter only to a launched group. Passed again they only cost its to_kwargs(), which clears and
        # restores os.environ (~0.4 ms a trial); in a single process a ddp_backend even made accelerate look for a
        # process group that does not exist (ValueError: Default process group has not been initialized).
        handlers = [h for h in handlers if h is not group]
    accelerator = Accelerator(
        # Without an accelerator, say so: accelerate then runs several launched processes as MULTI_CPU (gloo)
        # instead of silently training each one alone.
        cpu=training_device(args) == "cpu",
        mixed_precision=precision,
        gradient_accumulation_plugin=_accumulation_plugin(args.gradient_accumulation_steps),
        # A sampler seeded per epoch from data_seed: the same data order on every run and after a resume.
        dataloader_config=DataLoaderConfiguration(
            use_seedable_sampler=True,
            data_seed=data_seed,
            split_batches=bool(config.pop("split_batches", args.split_batches)),
            dispatch_batches=config.pop("dispatch_batches", args.dispatch_batches),
            even_batches=bool(config.pop("even_batches", True)),
            non_blocking=bool(config.pop("non_blocking", False)),
        ),
        step_scheduler_with_optimizer=False,
        kwargs_handlers=handlers,
        dynamo_plugin=_dynamo_plugin(args),
        deepspeed_plugin=_deepspeed_plugin(args),
        fsdp_plugin=fsdp_plugin,
    )
    if withheld:
        accelerator.init_handler = group  # what these arguments ask of a process group, as when it is passed
    return accelerator


def _accumulation_plugin(steps: int) -> Any:
    """What ``Accelerator(gradient_accumulation_steps=steps)`` builds (``ACCELERATE_GRADIENT_ACCUMULATION_STEPS``
    still wins, as there), with its ``to_kwargs()`` computed once per value.

    accelerate's ``to_kwargs()`` empties ``os.environ`` and restores it to find the defaults, at every
    ``Accelerator()``: ~700 Python calls a trial, and for that moment another thread of the process (a trial of an
    ``n_jobs > 1`` search) saw no environment at all.
    """
    from accelerate.utils.environment import parse_choice_from_env

    return _plugin_class()(
        num_steps=int(parse_choice_from_env("ACCELERATE_GRADIENT_ACCUMULATION_STEPS", steps))
    )


@functools.cache
def _plugin_class() -> type:
    from accelerate.utils import GradientAccumulationPlugin

    computed: dict[Any, dict[str, Any]] = {}

    class AccumulationPlugin(GradientAccumulationPlugin):
        def to_kwargs(self) -> dict[str, Any]:
            try:
                key: Any = tuple(sorted(vars(self).items()))
                hash(key)
            except TypeError:  # a field accelerate added that is not hashable: no memo
                return super().to_kwargs()
            if key not in computed:
                computed[key] = super().to_kwargs()
            return dict(computed[key])

    return AccumulationPlugin


def _launched() -> bool:
    """Whether this process is one of several launched together (accelerate's own signals for it)."""
    from accelerate.utils import get_int_from_env

    return int(os.environ.get("LOCAL_RANK", -1)) != -1 or (
        get_int_from_env(["PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE", "WORLD_SIZE"], 1) > 1
    )


def _deepspeed_plugin(args: TrainingArguments) -> Any:
    deepspeed = getattr(args, "deepspeed", None)
    if deepspeed is None:
        return None
    from accelerate.utils import DeepSpeedPlugin

    return DeepSpeedPlugin(hf_ds_config=deepspeed)


def _dynamo_plugin(args: TrainingArguments) -> Any:
    from accelerate.utils import TorchDynamoPlugin

    if not args.torch_compile:
        return TorchDynamoPlugin(backend="no")
    return TorchDynamoPlugin(backend=compile_backend_of(args), mode=args.torch_compile_mode)


def ddp_kwargs(args: TrainingArguments) -> list[Any]:
    """accelerate's handlers for the process group and DistributedDataParallel; they act when several
    processes were launched, and are inert in a single one (accelerate then starts no process group)."""
    from datetime import timedelta

    from accelerate.utils import DistributedDataParallelKwargs, InitProcessGroupKwargs

    group: dict[str, Any] = {"timeout": timedelta(seconds=args.ddp_timeout)}
    if args.ddp_backend is not None:
        group["backend"] = args.ddp_backend
    ddp = {
        key: value
        for key, value in (
            ("find_unused_parameters", args.ddp_find_unused_parameters),
            ("bucket_cap_mb", args.ddp_bucket_cap_mb),
            ("broadcast_buffers", args.ddp_broadcast_buffers),
            ("static_graph", args.ddp_static_graph),
        )
        if value is not None
    }
    handlers: list[Any] = [InitProcessGroupKwargs(**group)]
    if ddp:
        handlers.append(DistributedDataParallelKwargs(**ddp))
    return handlers


class training_with:
    """Marks a train() in progress with its precision, so another precision is not set up under it."""

    def __init__(self, args: TrainingArguments) -> None:
        self.signature = _signature(args)

    def __enter__(self) -> None:
        with _lock:
            _running[self.signature] += 1

    def __exit__(self, *exc: object) -> None:
        with _lock:
            _running[self.signature] -= 1
