"""Fixtures shared by the whole suite: quiet, fast `TrainingArguments` and a clean torch global state."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

# The test models are tiny: one intra-op thread is as fast, and on a shared 2-core CI machine torch's spinning
# thread pool makes a loaded run several times slower. Set before torch is first imported; override from outside.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# `tests._digits` is shared by tests, examples and benchmarks; make it importable however pytest is launched.
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)


@pytest.fixture
def make_args(tmp_path: Path):
    """``make_args(**overrides)`` -> `TrainingArguments` writing to tmp_path, no tqdm, no saving, no reporting."""
    from trainer import TrainingArguments

    def make(**overrides: Any) -> TrainingArguments:
        kwargs: dict[str, Any] = {
            "output_dir": str(tmp_path / "out"),
            "disable_tqdm": True,
            "save_strategy": "no",
            "report_to": "none",
        }
        kwargs.update(overrides)
        return TrainingArguments(**kwargs)

    return make


@pytest.fixture(autouse=True)
def _restore_torch_determinism():
    """`enable_full_determinism` flips process-wide torch switches; do not let one test change the next."""
    torch = sys.modules.get("torch")  # never import torch here: the spaces tests must run without it
    before = torch.are_deterministic_algorithms_enabled() if torch is not None else False
    yield
    torch = sys.modules.get("torch")
    if torch is not None and torch.are_deterministic_algorithms_enabled() != before:
        torch.use_deterministic_algorithms(before)
