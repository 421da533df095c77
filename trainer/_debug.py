"""`DebugUnderflowOverflow`: finds the first module whose output holds inf or nan (``debug="underflow_overflow"``).

Forward hooks on every module check each output tensor. The first non-finite one stops the run with a report:
that module's qualified name and class, which output, and the absolute min/max of the inputs and outputs of the
last ``max_frames_to_save`` modules that ran before it (where values started growing or vanishing).
"""

from __future__ import annotations

import collections
import logging
from typing import Any

import torch
from torch import nn

__all__ = ["DebugUnderflowOverflow"]

logger = logging.getLogger(__name__)


def _tensors(value: Any) -> list[tuple[str, torch.Tensor]]:
    if isinstance(value, torch.Tensor):
        return [("", value)]
    if isinstance(value, dict):
        return [(f"[{k!r}]{n}", t) for k, v in value.items() for n, t in _tensors(v)]
    if isinstance(value, list | tuple):
        return [(f"[{i}]{n}", t) for i, v in enumerate(value) for n, t in _tensors(v)]
    return []


def _summary(value: Any) -> str:
    parts = []
    for name, t in _tensors(value):
        if t.is_floating_point() and t.numel():
            a = t.detach().abs()
            parts.append(f"{name or 'tensor'} abs min {a.min().item():.3e} max {a.max().item():.3e}")
    return "; ".join(parts) or "no floating-point tensors"


class DebugUnderflowOverflow:
    """Watches ``model``'s forward passes; raises ``FloatingPointError`` at the first module producing inf/nan.

    Batches are counted from 0, one per forward pass of ``model`` itself. ``trace_batch_nums`` lists batches whose
    every module (its inputs' and outputs' absolute min/max, in call order) is logged and kept in ``traces``
    (batch number -> lines), to compare a healthy batch with a failing one. ``abort_after_batch_num`` stops the run
    with a ``ValueError`` once that batch has finished (as transformers, where tracing a few batches is the point).
    """

    def __init__(
        self,
        model: nn.Module,
        max_frames_to_save: int = 21,
        trace_batch_nums: list[int] | None = None,
        abort_after_batch_num: int | None = None,
    ) -> None:
        traced = list(trace_batch_nums or [])
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in traced):
            raise ValueError(
                f"trace_batch_nums must be a list of batch numbers >= 0 (counted from 0), got "
                f"{trace_batch_nums!r}; pass e.g. [1, 3]."
            )
        if abort_after_batch_num is not None and (
            not isinstance(abort_after_batch_num, int)
            or isinstance(abort_after_batch_num, bool)
            or abort_after_batch_num < 0
        ):
            raise ValueError(
                f"abort_after_batch_num must be a batch number >= 0 or None, got "
                f"{abort_after_batch_num!r}; pass e.g. 3 (stop once batch 3 finished)."
            )
        self.model = model
        self.frames: collections.deque[str] = collections.deque(maxlen=max_frames_to_save)
        self.names = {module: name or type(model).__name__ for name, module in model.named_modules()}
        self.handles = [m.register_forward_hook(self._hook) for m in model.modules()]
        self.report: str | None = None
        self.trace_batch_nums = frozenset(traced)
        self.abort_after_batch_num = abort_after_batch_num
        self.batch_number = 0
        self.traces: dict[int, list[str]] = {}

    def _hook(self, module: nn.Module, inputs: Any, output: Any) -> None:
        name = self.names.get(module, type(module).__name__)
        for where, tensor in _tensors(output):
            if tensor.is_floating_point() and not torch.isfinite(tensor).all():
                self._overflow(module, name, where, tensor, inputs, output)
        frame = f"{name} ({type(module).__name__}): out {_summary(output)}"
        self.frames.append(frame)
        if self.batch_number in self.trace_batch_nums:
            self.traces.setdefault(self.batch_number, []).append(f"{frame}; in {_summary(inputs)}")
        if module is self.model:  # the model's own forward ends last: the batch is done
            self._batch_done()

    def _batch_done(self) -> None:
        done = self.batch_number
        if done in self.traces:
            logger.warning(
                "DebugUnderflowOverflow: batch %d, every module in call order:\n  %s",
                done,
                "\n  ".join(self.traces[done]),
            )
        self.batch_number += 1
        if self.abort_after_batch_num is not None and done >= self.abort_after_batch_num:
            self.remove()
            raise ValueError(
                f"DebugUnderflowOverflow: stopping after batch {done} (batches are counted from 0), as "
                f"abort_after_batch_num={self.abort_after_batch_num} asks."
            )

    def _overflow(
        self, module: nn.Module, name: str, where: str, tensor: torch.Tensor, inputs: Any, output: Any
    ) -> None:
        kind = "nan" if torch.isnan(tensor).any() else "inf"
        lines = [
            f"DebugUnderflowOverflow: {kind} in the output{where} of module {name!r} "
            f"({type(module).__name__}) during batch {self.batch_number}, the first module to produce one.",
            f"  its inputs: {_summary(inputs)}",
            f"  its outputs: {_summary(output)}",
            f"  the {len(self.frames)} modules before it, oldest first:",
            *(f"    {frame}" for frame in self.frames),
        ]
        self.report = "\n".join(lines)
        logger.error(self.report)
        self.remove()
        raise FloatingPointError(
            self.report + "\nLower the learning rate, check the inputs, or train in higher precision."
        )

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []
