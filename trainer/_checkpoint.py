"""Checkpoints: folders written atomically, weights in safetensors, everything else tensors-only or JSON.

Layout of ``output_dir/checkpoint-<global_step>/``: ``model.safetensors`` (or shards plus
``model.safetensors.index.json``), ``optimizer.pt``, ``scheduler.pt``, ``rng_state.pth`` (``rng_state_<rank>.pth``
with several processes), ``trainer_state.json``, ``training_args.json``. A checkpoint is built in a temporary
folder and renamed into place, so a crash mid-save never leaves a ``checkpoint-*`` folder that resume would take.
Nothing here unpickles arbitrary objects: ``.pt``/``.pth`` files are read with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import shutil
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from . import _fsdp
from ._callbacks import ExportableState, TrainerState
from ._optimization import settle_foreach
from ._training_args import _parse_size

if TYPE_CHECKING:
    from torch import nn

    from ._trainer import Trainer
    from ._training_args import TrainingArguments

__all__ = [
    "CHECKPOINT_PREFIX",
    "TRAINER_STATE_NAME",
    "get_last_checkpoint",
    "load_best_model",
    "load_model_weights",
    "load_optimizer_and_scheduler",
    "load_rng_state",
    "rotate_checkpoints",
    "save_checkpoint",
    "save_model",
    "save_model_weights",
    "sorted_checkpoints",
]

logger = logging.getLogger(__name__)

CHECKPOINT_PREFIX = "checkpoint"
WEIGHTS_NAME = "model.safetensors"
WEIGHTS_INDEX_NAME = "model.safetensors.index.json"
OPTIMIZER_NAME = "optimizer.pt"
SCHEDULER_NAME = "scheduler.pt"
SCALER_NAME = "scaler.pt"
TRAINER_STATE_NAME = "trainer_state.json"
TRAINING_ARGS_NAME = "training_args.json"
#: The arguments pickled with torch.save, as transformers writes them (never read here: a pickle can run code).
TRAINING_ARGS_BIN = "training_args.bin"
_CHECKPOINT_RE = re.compile(rf"^{CHECKPOINT_PREFIX}-(\d+)$")


# ---------------------------------------------------------------------------------------------- discovery
def sorted_checkpoints(output_dir: str) -> list[str]:
    """Complete checkpoint folders in ``output_dir``, oldest (lowest step) first."""
    if not os.path.isdir(output_dir):
        return []
    found = []
    for name in os.listdir(output_dir):
        match = _CHECKPOINT_RE.match(name)
        path = os.path.join(output_dir, name)
        if match and os.path.isdir(path) and os.path.isfile(os.path.join(path, TRAINER_STATE_NAME)):
            found.append((int(match.group(1)), path))
    return [path for _, path in sorted(found)]


def get_last_checkpoint(output_dir: str) -> str | None:
    """The path of the ``checkpoint-<step>`` folder in ``output_dir`` with the highest step, None if it has none
    (as transformers' ``trainer_utils.get_last_checkpoint``; a folder counts once its trainer_state.json is written,
    so a checkpoint a kill left half-written is not picked)."""
    checkpoints = sorted_checkpoints(output_dir)
    return checkpoints[-1] if checkpoints else None


# ---------------------------------------------------------------------------------------------- weights
def saved_train_batch_size(folder: str) -> int | None:
    """The per-process training batch size the checkpoint's run trained with (None when it has no state)."""
    path = os.path.join(folder, TRAINER_STATE_NAME)
    if not os.path.isfile(path):
        return None
    return TrainerState.load_from_json(path).train_batch_size


def _state_dict_for_saving(model: nn.Module) -> dict[str, torch.Tensor]:
    """The model's tensors, contiguous, with tied (shared-storage) duplicates dropped after their first name."""
    return tensors_for_saving(model.state_dict())


def tensors_for_saving(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A state dict's tensors on the CPU, contiguous, tied (shared-storage) duplicates dropped after their first name."""
    seen: dict[tuple[Any, ...], str] = {}
    storages: set[int] = set()
    out: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        ptr = tensor.untyped_storage().data_ptr()
        key = (ptr, tensor.storage_offset(), tuple(tensor.shape))
        if tensor.numel() and key in seen:
            continue
        seen[key] = name
        tensor = tensor.detach()
        # safetensors refuses two tensors on one storage; a distinct view of a shared buffer gets its own copy.
        out[name] = tensor.clone().cpu() if tensor.numel() and ptr in storages else tensor.contiguous().cpu()
        if tensor.numel():
            storages.add(ptr)
    return out


def save_model_weights(model: nn.Module, folder: str, max_shard_size: str | int = "5GB") -> list[str]:
    """Write ``model``'s weights as safetensors (sharded above ``max_shard_size``); returns the files written."""
    return save_state_dict_weights(_state_dict_for_saving(model), folder, max_shard_size)


def save_state_dict_weights(
    tensors: dict[str, torch.Tensor], folder: str, max_shard_size: str | int = "5GB"
) -> list[str]:
    """Write CPU tensors that share no storage as safetensors (sharded above ``max_shard_size``)."""
    from safetensors.torch import save_file

    # The same parser (and units: KB = 1000, KiB = 1024) as TrainingArguments.max_checkpoint_shard_size.
    limit = _parse_size("max_checkpoint_shard_size", max_shard_size)
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for name, tensor in tensors.items():
        nbytes = tensor.numel() * tensor.element_size()
        if shards[-1] and size + nbytes > limit:
            shards.append({})
            size = 0
        shards[-1][name] = tensor
        size += nbytes
    metadata = {"format": "pt"}
    if len(shards) == 1:
        save_file(shards[0], os.path.join(folder, WEIGHTS_NAME), metadata=metadata)
        return [WEIGHTS_NAME]
    files = []
    weight_map = {}
    for i, shard in enumerate(shards, start=1):
        filename = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, os.path.join(folder, filename), metadata=metadata)
        files.append(filename)
        weight_map.update(dict.fromkeys(shard, filename))
    index = {
        "metadata": {"total_size": sum(t.numel() * t.element_size() for t in tensors.values())},
        "weight_map": weight_map,
    }
    _write_json(os.path.join(folder, WEIGHTS_INDEX_NAME), index)
    return [*files, WEIGHTS_INDEX_NAME]


def _shard_files(folder: str, index_path: str) -> list[str]:
    """The shard files a sharded checkpoint's index names; each must be a file inside ``folder``."""
    try:
        with open(index_path, encoding="utf-8") as f:
            weight_map = json.load(f)["weight_map"]
        names = sorted(set(weight_map.values()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(
            f"{index_path!r} is not a readable shard index ({type(error).__name__}: {error}); the checkpoint is "
            "corrupt: resume from another checkpoint or save it again."
        ) from None
    root = os.path.realpath(folder)
    for name in names:
        path = os.path.realpath(os.path.join(folder, name)) if isinstance(name, str) else ""
        if not isinstance(name, str) or os.path.dirname(path) != root:
            raise ValueError(
                f"{index_path!r} names the shard {name!r}, which is not a file in the checkpoint folder {folder!r}; "
                "refusing to read outside it. The index is corrupt or was tampered with: save the checkpoint again."
            )
    return names


def read_weights(folder: str) -> dict[str, torch.Tensor]:
    """The safetensors weights (single file or sharded) in ``folder``."""
    from safetensors.torch import load_file

    single = os.path.join(folder, WEIGHTS_NAME)
    index_path = os.path.join(folder, WEIGHTS_INDEX_NAME)
    if os.path.isfile(single):
        state = load_file(single)
    elif os.path.isfile(index_path):
        state = {}
        for filename in _shard_files(folder, index_path):
            state.update(load_file(os.path.join(folder, filename)))
    else:
        raise FileNotFoundError(
            f"No {WEIGHTS_NAME} or {WEIGHTS_INDEX_NAME} in {folder!r}; weights are only read from safetensors files."
        )
    return state


def load_model_weights(model: nn.Module, folder: str, strict: bool = True) -> None:
    """Load safetensors weights (single file or sharded) from ``folder`` into ``model``; tied weights are re-tied."""
    state = read_weights(folder)
    expected = model.state_dict()
    missing = [k for k in expected if k not in state]
    # Names missing because they were tied to an earlier tensor when saved are fine.
    tied_ok = {
        k
        for k in missing
        if any(
            expected[k].untyped_storage().data_ptr() == expected[o].untyped_storage().data_ptr()
            for o in state
            if o in expected
        )
    }
    unexpected = [k for k in state if k not in expected]
    if strict and (set(missing) - tied_ok or unexpected):
        raise RuntimeError(
            f"Checkpoint {folder!r} does not match the model: missing {sorted(set(missing) - tied_ok)}, "
            f"unexpected {sorted(unexpected)}. Was it saved from a different model_init?"
        )
    model.load_state_dict(state, strict=False)


# ---------------------------------------------------------------------------------------------- rng
def _rng_state() -> dict[str, Any]:
    # Stored as plain tensors and numbers, so it loads with torch.load(weights_only=True).
    version, py_state, gauss = random.getstate()
    np_name, np_keys, np_pos, np_has_gauss, np_gauss = np.random.get_state(legacy=True)
    state: dict[str, Any] = {
        "python": {"version": version, "state": torch.tensor(py_state, dtype=torch.int64), "gauss": gauss},
        "numpy": {
            "name": str(np_name),
            "keys": torch.from_numpy(np.asarray(np_keys, dtype=np.int64)),
            "pos": int(np_pos),
            "has_gauss": int(np_has_gauss),
            "gauss": float(np_gauss),
        },
        "cpu": torch.random.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.random.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    py = state["python"]
    random.setstate((py["version"], tuple(int(x) for x in py["state"].tolist()), py["gauss"]))
    npy = state["numpy"]
    np.random.set_state(
        (npy["name"], npy["keys"].numpy().astype(np.uint32), npy["pos"], npy["has_gauss"], npy["gauss"])
    )
    torch.random.set_rng_state(state["cpu"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.random.set_rng_state_all(state["cuda"])


def _rng_file(process_index: int, num_processes: int) -> str:
    return "rng_state.pth" if num_processes <= 1 else f"rng_state_{process_index}.pth"


def load_rng_state(folder: str, process_index: int = 0) -> None:
    candidates = [f"rng_state_{process_index}.pth", "rng_state.pth"]
    for name in candidates:
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            _set_rng_state(torch.load(path, weights_only=True))
            return
    logger.warning(
        "No RNG state in %s; the resumed run will not reproduce the random draws of the original.", folder
    )


# ---------------------------------------------------------------------------------------------- save
def _write_json(path: str, data: Any) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=True, default=str)
        f.write("\n")


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _collect_callback_states(trainer: Trainer) -> dict[str, Any]:
    states: dict[str, Any] = {}
    for cb in trainer.callback_handler.callbacks:
        if isinstance(cb, ExportableState):
            name = type(cb).__name__
            states.setdefault(name, []).append(cb.state())
    states = {k: (v[0] if len(v) == 1 else v) for k, v in states.items()}
    states["TrainerControl"] = trainer.control.state()
    return states


def save_checkpoint(trainer: Trainer, model: nn.Module, metrics: dict[str, float] | None) -> str:
    """Save ``output_dir/checkpoint-<global_step>`` atomically and return its path."""
    args = trainer.args
    state = trainer.state
    accelerator = trainer.accelerator
    assert accelerator is not None
    name = f"{CHECKPOINT_PREFIX}-{state.global_step}"
    final = os.path.join(args.output_dir, name)
    tmp = os.path.join(args.output_dir, f".tmp-{name}")
    if metrics is not None and args.metric_for_best_model and state.best_global_step == state.global_step:
        state.best_model_checkpoint = final
    main = writes_checkpoints(trainer)
    if main:
        os.makedirs(args.output_dir, exist_ok=True)
        if os.path.exists(tmp):  # left by a crashed save of the same step
            shutil.rmtree(tmp)
        os.makedirs(tmp)
    accelerator.wait_for_everyone()
    if not args.save_only_model:
        # Every process has its own RNG streams (dropout, augmentation), so each writes its own file.
        torch.save(
            _rng_state(), os.path.join(tmp, _rng_file(accelerator.process_index, accelerator.num_processes))
        )
    fsdp = _fsdp.active(accelerator)
    # Under FSDP every process takes part in gathering the state, or writes its own shard of it.
    gathered = _fsdp.save(trainer, model, tmp) if fsdp else None
    if gathered is not None and main:
        weights, optimizer = gathered
        save_state_dict_weights(tensors_for_saving(weights), tmp, args.max_checkpoint_shard_size)
        if optimizer is not None:
            torch.save(optimizer, os.path.join(tmp, OPTIMIZER_NAME))
    # The main process publishes the folder, so every other process must be done writing into it first.
    accelerator.wait_for_everyone()
    if main:
        try:
            _write_checkpoint_files(trainer, model, tmp, model_and_optimizer=not fsdp)
            _before_checkpoint_rename(tmp)
            _publish(tmp, final)
        except BaseException:
            # Nothing half-written may stay behind; a crash that skips this (kill -9) leaves only a ``.tmp-``
            # folder, which sorted_checkpoints ignores and the next save of that step replaces.
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        _fsync_dir(args.output_dir)
        if args.save_total_limit is not None:
            rotate_checkpoints(trainer, args.output_dir)
    accelerator.wait_for_everyone()
    return final


def _write_checkpoint_files(
    trainer: Trainer, model: nn.Module, folder: str, model_and_optimizer: bool = True
) -> None:
    args = trainer.args
    accelerator = trainer.accelerator
    assert accelerator is not None
    if model_and_optimizer:
        trainer._save(folder)  # transformers' hook: the model's files (and the training arguments)
    else:
        save_pretrained_files(trainer, accelerator.unwrap_model(model), folder, weights=False)
    if not args.save_only_model:
        # Checkpoints are saved from inside train(), after create_optimizer_and_scheduler has run.
        assert trainer.optimizer is not None
        if model_and_optimizer:
            torch.save(trainer.optimizer.state_dict(), os.path.join(folder, OPTIMIZER_NAME))
        if trainer.lr_scheduler is not None:
            torch.save(trainer.lr_scheduler.state_dict(), os.path.join(folder, SCHEDULER_NAME))
        scaler = getattr(accelerator, "scaler", None)
        if scaler is not None:
            torch.save(scaler.state_dict(), os.path.join(folder, SCALER_NAME))
    trainer.state.stateful_callbacks = _collect_callback_states(trainer)
    # trainer_state.json is what marks a folder as a complete checkpoint, so it goes last.
    if not model_and_optimizer:
        save_training_args(args, folder)
    trainer.state.save_to_json(os.path.join(folder, TRAINER_STATE_NAME))


def _publish(tmp: str, final: str) -> None:
    """Rename ``tmp`` to ``final``; an existing ``final`` (the same step saved twice) is swapped out, not merged."""
    if not os.path.exists(final):
        os.replace(tmp, final)
        return
    old = f"{os.path.dirname(final)}{os.sep}.old-{os.path.basename(final)}"
    shutil.rmtree(old, ignore_errors=True)
    os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)


def _before_checkpoint_rename(tmp_folder: str) -> None:
    """Hook between writing a checkpoint's files and publishing the folder (tests inject faults here)."""


def load_optimizer_and_scheduler(trainer: Trainer, folder: str) -> None:
    """Resume the optimizer, schedule and gradient scaler (under FSDP the sharded model too) from ``folder``."""
    # Called by train() when resuming, after create_optimizer_and_scheduler and accelerator.prepare have run.
    assert trainer.optimizer is not None
    if _fsdp.active(trainer.accelerator):
        found = _fsdp.load(trainer, trainer.model_wrapped, folder, read_weights, OPTIMIZER_NAME)
    else:
        opt_path = os.path.join(folder, OPTIMIZER_NAME)
        found = os.path.isfile(opt_path)
        if found:
            trainer.optimizer.load_state_dict(torch.load(opt_path, weights_only=True, map_location="cpu"))
    if not found:
        logger.warning(
            "No optimizer state in %s (saved with save_only_model?); the optimizer starts fresh.", folder
        )
        return
    if trainer._created_optimizer and trainer.accelerator is not None:
        # Either way, the loaded groups carry the foreach chosen for the device they were saved on.
        chosen = trainer.optimizer_cls_and_kwargs
        settle_foreach(
            trainer.optimizer, trainer.args, trainer.accelerator.device, None if chosen is None else chosen[1]
        )
    sched_path = os.path.join(folder, SCHEDULER_NAME)
    if trainer.lr_scheduler is not None and os.path.isfile(sched_path):
        trainer.lr_scheduler.load_state_dict(torch.load(sched_path, weights_only=True))
    scaler_path = os.path.join(folder, SCALER_NAME)
    scaler = getattr(trainer.accelerator, "scaler", None)
    if scaler is not None and os.path.isfile(scaler_path):
        scaler.load_state_dict(torch.load(scaler_path, weights_only=True))


def load_best_model(trainer: Trainer) -> None:
    best = trainer.state.best_model_checkpoint
    if best is None or not os.path.isdir(best):
        logger.warning(
            "load_best_model_at_end: the best checkpoint %r is gone; keeping the last weights.", best
        )
        return
    if _fsdp.active(trainer.accelerator):
        _fsdp.load_model(trainer, trainer.model_wrapped, best, read_weights)
    else:
        load_model_weights(trainer.model, best)
    logger.info(
        "Loaded the best model from %s (%s=%s).",
        best,
        trainer.args.metric_for_best_model,
        trainer.state.best_metric,
    )


def rotate_checkpoints(trainer: Trainer, output_dir: str) -> None:
    """Delete the oldest checkpoints beyond ``save_total_limit``, never the best one."""
    limit = trainer.args.save_total_limit
    if limit is None or limit <= 0:
        return
    checkpoints = sorted_checkpoints(output_dir)
    best = trainer.state.best_model_checkpoint
    best_abs = os.path.abspath(best) if best else None
    if best_abs is not None and limit == 1 and checkpoints and os.path.abspath(checkpoints[-1]) != best_abs:
        limit = 2  # keep the best and the newest (to resume from)
    deletable = [c for c in checkpoints if os.path.abspath(c) != best_abs]
    excess = len(checkpoints) - limit
    for path in deletable[: max(excess, 0)]:
        logger.info("Deleting older checkpoint %s (save_total_limit=%d).", path, limit)
        shutil.rmtree(path, ignore_errors=True)


def writes_checkpoints(trainer: Trainer) -> bool:
    """Whether this process writes: the main process, or the first of each node with ``save_on_each_node``."""
    if trainer.args.save_on_each_node:
        return trainer.is_local_process_zero()
    return trainer.is_world_process_zero()


def save_pretrained_files(trainer: Trainer, model: nn.Module, folder: str, weights: bool = True) -> None:
    """The weights (safetensors), plus what ``from_pretrained`` needs beside them for a transformers model (its
    ``config.json`` and generation config) and the ``processing_class`` (e.g. the tokenizer's files)."""
    if weights:
        save_model_weights(model, folder, trainer.args.max_checkpoint_shard_size)
    config: Any = getattr(model, "config", None)
    if hasattr(model, "save_pretrained") and hasattr(config, "save_pretrained"):
        config.save_pretrained(folder)
        generation = getattr(model, "generation_config", None)
        can_generate = getattr(model, "can_generate", None)
        if generation is not None and callable(can_generate) and can_generate():
            generation.save_pretrained(folder)
    processor = getattr(trainer, "processing_class", None)
    if processor is not None and hasattr(processor, "save_pretrained"):
        processor.save_pretrained(folder)


def save_training_args(args: TrainingArguments, folder: str) -> None:
    """``training_args.json`` (readable anywhere) and ``training_args.bin`` (the object, as transformers saves it).
    Arguments holding something pickle cannot store keep the JSON only, with a warning. Hub tokens are written as
    placeholders in both."""
    from ._args_legacy import without_secrets

    _write_json(os.path.join(folder, TRAINING_ARGS_NAME), args.to_dict())
    path = os.path.join(folder, TRAINING_ARGS_BIN)
    try:
        torch.save(without_secrets(args), path)
    except Exception as error:  # e.g. a callable in optim_args
        if os.path.exists(path):
            os.remove(path)
        logger.warning(
            "training_args.bin not written (%s: %s); training_args.json holds the arguments.",
            type(error).__name__,
            error,
        )


def save_model(trainer: Trainer, output_dir: str) -> None:
    """The model's weights (safetensors) and what ``from_pretrained`` reads; under FSDP every process must call it
    (the shards are gathered into one ``model.safetensors``)."""
    fsdp = _fsdp.active(trainer.accelerator) and _fsdp.is_sharded_model(trainer.model_wrapped)
    weights = _fsdp.full_model_state(trainer.model_wrapped) if fsdp else None
    if not writes_checkpoints(trainer):
        return
    os.makedirs(output_dir, exist_ok=True)
    trainer._save(output_dir, state_dict=weights)  # transformers' hook: the model's files
