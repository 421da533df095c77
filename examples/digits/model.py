"""The digits sweep's model, data and metrics: an MLP on scikit-learn's bundled 8x8 digits (no download).

The sweep config names these functions by import path (``examples.digits.model:model_init``), which is all
`hpsearch run` needs to know about them. ``model_init`` takes the trial so that the parameters of the space
that are not `TrainingArguments` fields (``hidden``, ``layers``, ``dropout``) can shape the model.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = ["DigitsDataset", "DigitsMLP", "compute_metrics", "datasets", "model_init"]


class DigitsDataset(torch.utils.data.Dataset):
    """Digits as ``{"x": 64 floats in [0, 1], "labels": int}``, the keys `DigitsMLP.forward` takes."""

    def __init__(self, x: np.ndarray, y: np.ndarray) -> None:
        self.x = torch.as_tensor(x, dtype=torch.float32)
        self.y = torch.as_tensor(y, dtype=torch.long)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[i], "labels": self.y[i]}


class DigitsMLP(nn.Module):
    """``layers`` hidden layers of ``hidden`` units (ReLU, dropout), then 10 logits; returns the loss with labels."""

    def __init__(self, hidden: int = 64, layers: int = 1, dropout: float = 0.0) -> None:
        super().__init__()
        blocks: list[nn.Module] = []
        width = 64
        for _ in range(layers):
            blocks += [nn.Linear(width, hidden), nn.ReLU(), nn.Dropout(dropout)]
            width = hidden
        blocks.append(nn.Linear(width, 10))
        self.net = nn.Sequential(*blocks)

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        logits = self.net(x)
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = nn.functional.cross_entropy(logits, labels)
        return out


def model_init(trial: Any = None) -> DigitsMLP:
    """A fresh MLP shaped by the trial's ``hidden``, ``layers`` and ``dropout`` (defaults outside a search)."""
    params = trial.params if trial is not None else {}
    return DigitsMLP(
        hidden=int(params.get("hidden", 64)),
        layers=int(params.get("layers", 1)),
        dropout=float(params.get("dropout", 0.0)),
    )


@functools.lru_cache(maxsize=4)
def datasets(seed: int = 0, eval_fraction: float = 0.2) -> tuple[DigitsDataset, DigitsDataset]:
    """(train, eval): the 1,797 digits shuffled with ``seed`` and split; pixels scaled to [0, 1].

    Cached because every trial of a sweep (and every test) asks for the same split.
    """
    from sklearn.datasets import load_digits

    data = load_digits()
    x = (data.data / 16.0).astype(np.float32)
    y = data.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(y))
    x, y = x[order], y[order]
    cut = int((1.0 - eval_fraction) * len(y))
    return DigitsDataset(x[:cut], y[:cut]), DigitsDataset(x[cut:], y[cut:])


def compute_metrics(eval_pred: Any) -> dict[str, float]:
    """Accuracy of the argmax of the logits (the sweep's objective, ``eval_accuracy``)."""
    predictions, labels = eval_pred
    predictions = predictions[0] if isinstance(predictions, tuple) else predictions
    return {"accuracy": float((np.asarray(predictions).argmax(-1) == np.asarray(labels)).mean())}
