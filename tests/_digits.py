"""The digits task shared by tests, examples and benchmarks: scikit-learn's bundled 8x8 digits, an MLP."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch
from torch import nn


class DigitsDataset(torch.utils.data.Dataset):
    def __init__(self, x: np.ndarray, y: np.ndarray) -> None:
        self.x = torch.as_tensor(x, dtype=torch.float32)
        self.y = torch.as_tensor(y, dtype=torch.long)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[i], "labels": self.y[i]}


@functools.lru_cache(maxsize=1)
def digits_datasets(seed: int = 0) -> tuple[DigitsDataset, DigitsDataset]:
    from sklearn.datasets import load_digits

    data = load_digits()
    x = (data.data / 16.0).astype(np.float32)
    y = data.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(y))
    x, y = x[order], y[order]
    cut = int(0.8 * len(y))
    return DigitsDataset(x[:cut], y[:cut]), DigitsDataset(x[cut:], y[cut:])


class DigitsMLP(nn.Module):
    def __init__(self, hidden: int = 64, dropout: float = 0.0) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, 10))

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        logits = self.net(x)
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = nn.functional.cross_entropy(logits, labels)
        return out


def accuracy(eval_pred: Any) -> dict[str, float]:
    preds, labels = eval_pred
    return {"accuracy": float((np.asarray(preds).argmax(-1) == np.asarray(labels)).mean())}
