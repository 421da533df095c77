"""A ported transformers script's last mile (issue 35): model cards, the Hub and 4.x arguments, the seed's positional
``tokenizer``, and the smaller transformers APIs scripts and tests call."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import Dataset

from trainer import HfArgumentParser, Trainer, TrainingArguments, default_data_collator


class Data(Dataset):
    def __init__(self, n: int = 32) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 4, generator=g)
        self.y = self.x.sum(-1)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"x": self.x[i], "labels": self.y[i]}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 1)

    def forward(self, x, labels=None):
        preds = self.linear(x).squeeze(-1)
        return {"loss": nn.functional.mse_loss(preds, labels), "preds": preds}


def args(tmp: Path, **kw: Any) -> TrainingArguments:
    base: dict[str, Any] = {"output_dir": str(tmp / "out"), "disable_tqdm": True, "report_to": "none",
                            "max_steps": 4, "per_device_train_batch_size": 8, "save_strategy": "no"}
    return TrainingArguments(**{**base, **kw})


# --- item 2: Hub tokens are never written ---
def test_hub_tokens_never_reach_files_or_logs(tmp_path):
    secret = "hf_DoNotWriteMe123"
    with pytest.warns(FutureWarning):
        legacy = args(tmp_path, push_to_hub_token=secret + "legacy")
    assert legacy.hub_token == secret + "legacy"
    trainer = Trainer(model=Model(), args=args(tmp_path, hub_token=secret, save_strategy="steps", save_steps=2,
                                               report_to="jsonl", logging_steps=1), train_dataset=Data())
    trainer.train()
    trainer.save_model()
    written = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert any(p.name == "training_args.bin" for p in written) and any(p.name == "training_args.json" for p in written)
    for path in written:
        assert secret.encode() not in path.read_bytes(), path
    assert trainer.args.hub_token == secret  # the live arguments keep it for the script
    assert secret not in repr(trainer.args) and secret not in str(trainer.state.log_history)


def test_hub_arguments_from_the_command_line(tmp_path):
    cli = ["--output_dir", str(tmp_path), "--hub_model_id", "me/m", "--hub_strategy", "checkpoint",
           "--hub_private_repo", "--hub_always_push", "--hub_token", "tok"]
    (parsed,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses(cli)
    assert (parsed.hub_model_id, parsed.hub_strategy, parsed.hub_private_repo, parsed.hub_always_push) == (
        "me/m", "checkpoint", True, True)
    assert parsed.to_dict()["hub_token"] == "<HUB_TOKEN>"
    with pytest.raises(ValueError, match="hub_strategy must be one of 'end'"):
        HfArgumentParser(TrainingArguments).parse_args_into_dataclasses(
            ["--output_dir", str(tmp_path), "--hub_strategy", "never"])


# --- item 6: the seed's positional tokenizer ---
def tiny_tokenizer() -> Any:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast

    vocab = {"[PAD]": 0, "[UNK]": 1, "hello": 2, "world": 3}
    backend = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="[PAD]", unk_token="[UNK]")


def test_seed_positional_tokenizer_becomes_processing_class(tmp_path):
    tokenizer = tiny_tokenizer()
    with pytest.warns(FutureWarning, match="used as processing_class"):
        trainer = Trainer(Model(), args(tmp_path), default_data_collator, Data(), None, tokenizer)  # the seed's order
    assert trainer.processing_class is tokenizer and trainer.model_init is None
    trainer.train()  # trains the given model, not tokenizer(trial)
    trainer.save_model()
    assert (tmp_path / "out" / "tokenizer.json").is_file()  # saved beside the model, as a processing_class is


def test_seed_positional_tokenizer_with_later_arguments_says_what_to_do(tmp_path):
    tokenizer = tiny_tokenizer()
    with pytest.raises(ValueError, match=r"model_init=\w+ is a tokenizer/processor.*"
                                         r"compute_metrics was given as well.*processing_class="):
        Trainer(Model(), args(tmp_path), None, Data(), None, tokenizer, lambda p: {})
    with pytest.raises(ValueError, match="processing_class \\(or tokenizer\\) was given too"):
        Trainer(Model(), args(tmp_path), None, Data(), None, tokenizer, processing_class=tokenizer)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a model_init function or class is not mistaken for a processor
        assert Trainer(None, args(tmp_path), None, Data(), None, Model).model_init is Model
