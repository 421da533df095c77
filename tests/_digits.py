"""The digits task shared by tests: the demo's own model and data (`examples.digits.model`), under test names.

scikit-learn's bundled 8x8 digits (no download), shuffled with a seed and split 80/20; an MLP whose forward takes
``x`` and ``labels`` and returns ``{"logits", "loss"}``.
"""

from __future__ import annotations

from examples.digits.model import DigitsDataset, DigitsMLP
from examples.digits.model import compute_metrics as accuracy
from examples.digits.model import datasets as digits_datasets

__all__ = ["DigitsDataset", "DigitsMLP", "accuracy", "digits_datasets"]
