"""The training loss as transformers computes it (issue 35, items 4 and 5): label smoothing shifts a causal LM's labels,
and gradient accumulation normalises by the window's label tokens (``num_items_in_batch``), so accumulating 4
micro-batches equals one 4x batch. Checked against transformers' own Trainer on a tiny GPT-2 built from a config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from torch.utils.data import Dataset

from trainer import Trainer, TrainingArguments

VOCAB = 48


class PaddedLM(Dataset):
    """Sequences of different lengths, right-padded to 12 with their padding labelled -100."""

    def __init__(self, n: int = 16, width: int = 12) -> None:
        g = torch.Generator().manual_seed(1)
        self.items = []
        for i in range(n):
            length = 3 + (i * 5) % (width - 2)
            ids = torch.full((width,), 0, dtype=torch.long)
            ids[:length] = torch.randint(1, VOCAB, (length,), generator=g)
            mask = (torch.arange(width) < length).long()
            labels = torch.where(mask.bool(), ids, torch.full_like(ids, -100))
            self.items.append({"input_ids": ids, "attention_mask": mask, "labels": labels})

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return self.items[i]


def tiny_gpt2(loss_type: str | None = "ForCausalLM") -> Any:
    """``loss_type``: transformers' Trainer counts a causal LM's tokens shifted only when the model names its loss
    type; a model built from a config names none (then the model still shifts, and only our count agrees with it)."""
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=VOCAB,
        n_positions=16,
        n_embd=16,
        n_layer=2,
        n_head=2,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=1,
        eos_token_id=1,
    )
    model = transformers.GPT2LMHeadModel(config)
    model.loss_type = loss_type
    return model


# SGD: Adam would turn float rounding in near-zero gradients into lr-sized steps.
COMMON: dict[str, Any] = {
    "learning_rate": 0.5,
    "optim": "sgd",
    "max_steps": 3,
    "train_sampling_strategy": "sequential",
    "save_strategy": "no",
    "report_to": "none",
    "disable_tqdm": True,
    "use_cpu": True,
    "seed": 0,
    "logging_steps": 1,
}


def train_ours(
    tmp: Path, loss_type: str | None = "ForCausalLM", **kw: Any
) -> tuple[dict[str, torch.Tensor], list[dict[str, Any]]]:
    args = TrainingArguments(output_dir=str(tmp / "ours"), **{**COMMON, **kw})
    trainer = Trainer(model=tiny_gpt2(loss_type), args=args, train_dataset=PaddedLM())
    trainer.train()
    return {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}, trainer.state.log_history


def train_hf(tmp: Path, **kw: Any) -> tuple[dict[str, torch.Tensor], list[dict[str, Any]]]:
    args = transformers.TrainingArguments(output_dir=str(tmp / "hf"), **{**COMMON, **kw})
    trainer = transformers.Trainer(model=tiny_gpt2(), args=args, train_dataset=PaddedLM())
    trainer.train()
    return {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}, trainer.state.log_history


def max_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


def losses(history: list[dict[str, Any]]) -> list[float]:
    return [entry["loss"] for entry in history if "loss" in entry]


@pytest.mark.slow
def test_label_smoothing_shifts_a_causal_lms_labels_as_transformers(tmp_path: Path) -> None:
    kw = {"label_smoothing_factor": 0.1, "per_device_train_batch_size": 4}
    ours, ours_log = train_ours(tmp_path, **kw)
    hf, hf_log = train_hf(tmp_path, **kw)
    assert losses(ours_log) == pytest.approx(losses(hf_log), rel=1e-5)
    assert max_difference(ours, hf) < 1e-5


@pytest.mark.slow
def test_gradient_accumulation_equals_the_larger_batch_and_transformers(tmp_path: Path) -> None:
    accumulated, accumulated_log = train_ours(
        tmp_path, per_device_train_batch_size=1, gradient_accumulation_steps=4
    )
    large, large_log = train_ours(tmp_path, per_device_train_batch_size=4, gradient_accumulation_steps=1)
    hf, hf_log = train_hf(tmp_path, per_device_train_batch_size=1, gradient_accumulation_steps=4)
    assert max_difference(accumulated, large) < 1e-6
    assert max_difference(accumulated, hf) < 1e-6
    assert losses(accumulated_log) == pytest.approx(losses(hf_log), rel=1e-5)
    assert losses(accumulated_log) == pytest.approx(losses(large_log), rel=1e-5)


@pytest.mark.slow
def test_gradient_accumulation_counts_shifted_tokens_of_a_model_naming_no_loss_type(tmp_path: Path) -> None:
    accumulated, _ = train_ours(tmp_path, None, per_device_train_batch_size=1, gradient_accumulation_steps=4)
    large, _ = train_ours(tmp_path, None, per_device_train_batch_size=4, gradient_accumulation_steps=1)
    assert max_difference(accumulated, large) < 1e-6


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.parametrize("average", [True, False])
def test_two_processes_count_tokens_across_devices(tmp_path: Path, average: bool) -> None:
    """1 example per process x 2 accumulation steps x 2 processes == a 4-example batch in one process, when the
    window's label tokens are summed over the processes (average_tokens_across_devices, transformers' default)."""
    from tests._launch import accelerate_launch

    out = tmp_path / "ddp"
    out.mkdir()
    accelerate_launch("tests.trainer._ddp_loss_script", str(out), "average" if average else "own")
    two = torch.load(out / "weights.pt", weights_only=True)
    one, _ = train_ours(tmp_path, per_device_train_batch_size=4, gradient_accumulation_steps=1)
    # The processes hold 4 and 14 label tokens of each window: normalised by their own counts, they weigh wrongly.
    assert (max_difference(two, one) < 1e-6) is average


@pytest.mark.slow
def test_gradient_accumulation_with_label_smoothing_matches_transformers(tmp_path: Path) -> None:
    kw = {"label_smoothing_factor": 0.1, "per_device_train_batch_size": 2, "gradient_accumulation_steps": 2}
    ours, ours_log = train_ours(tmp_path, **kw)
    hf, hf_log = train_hf(tmp_path, **kw)
    assert losses(ours_log) == pytest.approx(losses(hf_log), rel=1e-5)
    assert max_difference(ours, hf) < 1e-5
