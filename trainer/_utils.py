"""Small pieces the loop needs: result tuples, seeding, collation, speed and memory metrics."""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, cast

import numpy as np
import torch

__all__ = [
    "EvalPrediction",
    "MemoryTracker",
    "PredictionOutput",
    "TrainOutput",
    "default_data_collator",
    "enable_full_determinism",
    "nested_concat",
    "set_seed",
    "speed_metrics",
]


class EvalPrediction:
    """What `compute_metrics` receives: ``predictions``, ``label_ids`` and, when kept, ``inputs`` and ``losses``.

    Unpacks like a tuple (``preds, labels = eval_pred``), as in the Hugging Face API.
    """

    def __init__(self, predictions: Any, label_ids: Any, inputs: Any = None, losses: Any = None) -> None:
        self.predictions = predictions
        self.label_ids = label_ids
        self.inputs = inputs
        self.losses = losses
        # As transformers: the optional parts follow the first two only when present.
        self._elements = (predictions, label_ids) + tuple(x for x in (inputs, losses) if x is not None)

    def __iter__(self):
        return iter(self._elements)

    def __getitem__(self, idx: int) -> Any:
        return self._elements[idx]

    def __len__(self) -> int:
        return len(self._elements)

    def __repr__(self) -> str:
        return f"EvalPrediction(predictions={_shape(self.predictions)}, label_ids={_shape(self.label_ids)})"


def _shape(x: Any) -> Any:
    return getattr(x, "shape", type(x).__name__)


class PredictionOutput(NamedTuple):
    predictions: Any
    label_ids: Any
    metrics: dict[str, float] | None


class TrainOutput(NamedTuple):
    global_step: int
    training_loss: float
    metrics: dict[str, float]


def set_seed(seed: int, deterministic: bool = False) -> None:
    """Seed python's `random`, numpy and torch (all devices); ``deterministic`` also makes torch deterministic."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    accelerator = getattr(torch, "accelerator", None)  # torch >= 2.6
    if accelerator is None or accelerator.is_available():
        torch.manual_seed(seed)  # the CPU and every device (CUDA, XPU, MPS, ...)
        if torch.cuda.is_available():
            torch.cuda.manual_seed_all(seed)
    else:
        # No device to seed: only the CPU generator matters. torch.manual_seed would also queue a seed for each
        # device type that is not initialized, formatting the whole call stack for each (a third of a millisecond
        # per trial inside a search), to be applied to devices this process cannot have.
        torch.default_generator.manual_seed(seed)
    if deterministic:
        torch.use_deterministic_algorithms(True)


def enable_full_determinism(seed: int, warn_only: bool = False) -> None:
    """Seed everything and make torch use deterministic algorithms only (slower, but reproducible)."""
    set_seed(seed)
    # cuBLAS needs a fixed workspace to be deterministic; must be set before the first CUDA call.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=warn_only)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def _to_tensor(values: list[Any]) -> Any:
    first = values[0]
    if isinstance(first, torch.Tensor):
        return torch.stack(values)
    if isinstance(first, np.ndarray):
        return torch.from_numpy(np.stack(values))
    if isinstance(first, np.generic):
        return torch.from_numpy(np.asarray(values))
    if isinstance(first, bool | int | float) or (
        isinstance(first, Sequence) and not isinstance(first, str | bytes)
    ):
        return torch.tensor(values)
    return values  # strings and other objects stay a list


def _to_array(values: list[Any]) -> Any:
    first = values[0]
    if isinstance(first, torch.Tensor):
        return torch.stack(values).numpy(force=True)
    if isinstance(first, np.ndarray):
        return np.stack(values)
    if isinstance(first, np.generic | bool | int | float) or (
        isinstance(first, Sequence) and not isinstance(first, str | bytes)
    ):
        return np.asarray(values)
    return values  # strings and other objects stay a list


def default_data_collator(features: Sequence[Any], return_tensors: str = "pt") -> Any:
    """Collate a list of examples into a batch.

    Dict examples become a dict of stacked tensors (tensors, numpy arrays and Python numbers/lists are
    converted; other values stay lists). Keys whose first value is None or a string (raw text, an id) are left
    out. ``label``/``label_ids`` become ``labels`` (long for ints, float otherwise), as in the Hugging Face
    collator. Other examples (tuples, tensors) use torch's default collation. ``return_tensors="np"`` gives numpy
    arrays instead (labels int64 or float32), as transformers' collator does.
    """
    if return_tensors not in ("pt", "np"):
        raise ValueError(f"return_tensors must be 'pt' or 'np', got {return_tensors!r}; pass one of those.")
    if not features:
        raise ValueError(
            "default_data_collator got an empty list of features; the dataloader yielded no items."
        )
    first = features[0]
    numpy = return_tensors == "np"
    if not (
        type(first) is dict or isinstance(first, Mapping)
    ):  # a dict first: Mapping's ABC check is a Python call
        collated = torch.utils.data.default_collate(list(features))
        return _tree_map(collated, lambda t: t.numpy(force=True)) if numpy else collated
    batch: dict[str, Any] = {}
    for key in first:
        values = [f[key] for f in features]
        if values[0] is None:
            continue
        if key in ("label", "label_ids"):
            if numpy:
                array = _to_array(values)
                if isinstance(array, np.ndarray):
                    array = array.astype(np.int64 if np.issubdtype(array.dtype, np.integer) else np.float32)
                batch["labels"] = array
                continue
            tensor = _to_tensor(values)
            if isinstance(tensor, torch.Tensor) and not tensor.is_floating_point():
                tensor = tensor.long()
            batch["labels"] = tensor
        elif not isinstance(values[0], str):  # as transformers' collator, which leaves strings out
            batch[key] = _to_array(values) if numpy else _to_tensor(values)
    return batch


def _tree_map(value: Any, convert: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return convert(value)
    if isinstance(value, Mapping):
        return {k: _tree_map(v, convert) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_tree_map(v, convert) for v in value)
    return value


def speed_metrics(
    split: str, start_time: float, num_samples: int | None = None, num_steps: int | None = None
) -> dict[str, float]:
    runtime = time.perf_counter() - start_time
    result = {f"{split}_runtime": round(runtime, 4)}
    if runtime > 0:
        if num_samples is not None:
            result[f"{split}_samples_per_second"] = round(num_samples / runtime, 3)
        if num_steps is not None:
            result[f"{split}_steps_per_second"] = round(num_steps / runtime, 3)
    return result


def _pad_cat(a: torch.Tensor, b: torch.Tensor, padding_index: int) -> torch.Tensor:
    a, b = a.reshape(1) if a.dim() == 0 else a, b.reshape(1) if b.dim() == 0 else b  # a scalar per batch
    if a.dim() <= 1 or a.shape[1:] == b.shape[1:]:
        return torch.cat((a, b), dim=0)
    # Sequences of different lengths across batches: pad the second dimension.
    shape = (a.shape[0] + b.shape[0], max(a.shape[1], b.shape[1]), *a.shape[2:])
    out = a.new_full(shape, padding_index)
    out[: a.shape[0], : a.shape[1]] = a
    out[a.shape[0] :, : b.shape[1]] = b
    return out


def _same_mapping(like: Mapping[Any, Any], items: dict[Any, Any]) -> Any:
    """A mapping of ``like``'s own class (dict, OrderedDict, a tokenizer's batch...) holding ``items``.

    The ``Mapping`` ABC declares no constructor, so the type checker can't see that these classes take a dict.
    """
    return cast(Any, type(like))(items)


def nested_concat(a: Any, b: Any, padding_index: int = -100) -> Any:
    """Concatenate two (nested tuples/dicts of) tensors along the batch dimension, padding ragged sequences."""
    if a is None:
        return b
    if isinstance(a, list | tuple):
        return type(a)(nested_concat(x, y, padding_index) for x, y in zip(a, b))
    if isinstance(a, Mapping):
        return _same_mapping(a, {k: nested_concat(a[k], b[k], padding_index) for k in a})
    return _pad_cat(a, b, padding_index)


def nested_numpify(x: Any) -> Any:
    if isinstance(x, list | tuple):
        return type(x)(nested_numpify(t) for t in x)
    if isinstance(x, Mapping):
        return _same_mapping(x, {k: nested_numpify(v) for k, v in x.items()})
    if isinstance(x, torch.Tensor):
        t = x.detach().cpu()
        if t.dtype == torch.bfloat16:
            t = t.float()
        return t.numpy()
    return x


def nested_detach(x: Any) -> Any:
    if isinstance(x, list | tuple):
        return type(x)(nested_detach(t) for t in x)
    if isinstance(x, Mapping):
        return _same_mapping(x, {k: nested_detach(v) for k, v in x.items()})
    return x.detach() if isinstance(x, torch.Tensor) else x


class MemoryTracker:
    """Memory used by a stage, as transformers reports it: ``<stage>_mem_cpu_alloc_delta`` and
    ``<stage>_mem_cpu_peaked_delta`` (the process's RSS), and on an accelerator ``<stage>_mem_gpu_alloc_delta`` and
    ``<stage>_mem_gpu_peaked_delta`` (torch's allocator on ``device``; "gpu" in the names whatever its type).

    The device is read through ``torch.accelerator`` (CUDA, XPU, MPS, and the out-of-tree devices accelerate drives,
    such as NPU, that register with it), so no device type has its own branch. A sampling thread catches the CPU
    peak; nothing runs when ``skip`` is set (the default in `TrainingArguments`).
    """

    def __init__(self, skip: bool = True, interval_s: float = 0.005, device: Any = None) -> None:
        self.skip = skip
        self.interval_s = interval_s
        self.device = None if skip else _accelerator_device(device)
        self._stage: str | None = None
        self._thread: threading.Thread | None = None

    def start(self, stage: str) -> None:
        if self.skip or self._stage is not None:
            return  # nested stages (evaluate inside train) are measured by the outer one
        import psutil

        self._process = psutil.Process()
        self._stage = stage
        if self.device is not None:
            self._device_begin = self._device_reading(reset=True)[0]
        self._begin = self._peak = self._process.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._peak = max(self._peak, self._process.memory_info().rss)

    def _device_reading(self, reset: bool = False) -> tuple[int, int]:
        """(allocated, peak allocated since the last reset) on the device, after its queued work has run."""
        device = self.device
        assert device is not None  # only read when there is one
        index = device.index if device.index is not None else torch.accelerator.current_device_index()
        torch.accelerator.synchronize(index)
        if reset:
            torch.accelerator.reset_peak_memory_stats(index)
        return int(torch.accelerator.memory_allocated(index)), int(
            torch.accelerator.max_memory_allocated(index)
        )

    def stop_and_update_metrics(self, stage: str, metrics: dict[str, float]) -> None:
        if self.skip or self._stage != stage:
            return
        self._stop.set()
        assert self._thread is not None
        self._thread.join()
        end = self._process.memory_info().rss
        self._peak = max(self._peak, end)
        metrics[f"{stage}_mem_cpu_alloc_delta"] = end - self._begin
        metrics[f"{stage}_mem_cpu_peaked_delta"] = max(0, self._peak - end)
        if self.device is not None:
            device_end, device_peak = self._device_reading()
            metrics[f"{stage}_mem_gpu_alloc_delta"] = device_end - self._device_begin
            metrics[f"{stage}_mem_gpu_peaked_delta"] = max(0, device_peak - device_end)
        self._stage = None


def _accelerator_device(device: Any) -> torch.device | None:
    """``device`` when it is torch's current accelerator (whose memory ``torch.accelerator`` reports), None for the CPU.

    A device of another type than the accelerator torch has is refused: its memory could not be read.
    """
    if device is None:
        return None
    device = torch.device(device)
    if device.type == "cpu":
        return None
    current = torch.accelerator.current_accelerator()
    if current is None or current.type != device.type:
        raise ValueError(
            f"Memory metrics of {device} need it to be torch's accelerator, but torch.accelerator reports "
            f"{current}; pass skip_memory_metrics=True, or train on {current or 'the CPU'}."
        )
    return device
