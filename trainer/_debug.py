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
    """Watches ``model``'s forward passes; raises ``FloatingPointError`` at the first module producing inf/nan."""

    def __init__(self, model: nn.Module, max_frames_to_save: int = 21) -> None:
        self.model = model
        self.frames: collections.deque[str] = collections.deque(maxlen=max_frames_to_save)
        self.names = {module: name or type(model).__name__ for name, module in model.named_modules()}
        self.handles = [m.register_forward_hook(self._hook) for m in model.modules()]
        self.report: str | None = None

    def _hook(self, module: nn.Module, inputs: Any, output: Any) -> None:
        name = self.names.get(module, type(module).__name__)
        for where, tensor in _tensors(output):
            if tensor.is_floating_point() and not torch.isfinite(tensor).all():
                kind = "nan" if torch.isnan(tensor).any() else "inf"
                lines = [
                    f"DebugUnderflowOverflow: {kind} in the output{where} of module {name!r} "
                    f"({type(module).__name__}), the first module to produce one.",
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
        self.frames.append(f"{name} ({type(module).__name__}): out {_summary(output)}")

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []
