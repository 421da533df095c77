"""A Hugging Face-style text setup's pieces, named by a sweep file in `test_sweep_file_reference`: a tokenizer
factory, a collator class built with the tokenizer, a collate function and a trainer factory. Each leaves a mark
in the folder ``HPSEARCH_TEST_MARKS`` names, so the test sees which of them the trials used."""

from __future__ import annotations

import os
from typing import Any

from trainer import Trainer, default_data_collator


def _mark(name: str, text: str = "") -> None:
    folder = os.environ.get("HPSEARCH_TEST_MARKS")
    if folder:
        with open(os.path.join(folder, name), "a", encoding="utf-8") as f:
            f.write(text + "\n")


class Tokenizer:
    """Stands for a tokenizer: callable, as tokenizers are (so it cannot be mistaken for a factory)."""

    name = "test-tokenizer"

    def __call__(self, text: str) -> list[int]:
        return [ord(c) for c in text]


def tokenizer() -> Tokenizer:
    """The processing_class factory (called once, with no arguments)."""
    _mark("tokenizer")
    return Tokenizer()


class PaddingCollator:
    """Built with the processing class, as transformers' DataCollatorWithPadding(tokenizer) is."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def __call__(self, features: list[Any]) -> Any:
        _mark("collator", getattr(self.tokenizer, "name", "none"))
        return default_data_collator(features)


def collate(features: list[Any]) -> Any:
    """A collate function, used as it is."""
    _mark("collate")
    return default_data_collator(features)


class MarkedTrainer(Trainer):
    """A Trainer subclass, as a custom loss or evaluation needs."""


def make_trainer(**kwargs: Any) -> Trainer:
    """The trainer factory: Trainer's keyword arguments in, a Trainer out."""
    _mark("factory", ",".join(sorted(kwargs)))
    return MarkedTrainer(**kwargs)


def not_a_trainer(**kwargs: Any) -> Any:
    return object()
