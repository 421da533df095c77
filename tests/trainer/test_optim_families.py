"""The ``optim`` values of LLM fine-tuning scripts (issue 35, item 8): bitsandbytes, schedule-free and GaLore run from
their real libraries (on the CPU here), ``adamw_hf`` maps to torch's AdamW with a warning, and the rest are refused
naming what is missing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import bitsandbytes
import galore_torch
import pytest
import schedulefree
import torch
from torch import nn
from torch.utils.data import Dataset

from trainer import Trainer, TrainingArguments
from trainer._optim_families import BNB, REFUSED


class Data(Dataset):
    def __init__(self, n: int = 16) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 8, generator=g)
        self.y = self.x.sum(-1)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[i], "labels": self.y[i]}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.hidden = nn.Linear(8, 8)
        self.out = nn.Linear(8, 1)

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        preds = self.out(torch.relu(self.hidden(x))).squeeze(-1)
        return {"loss": nn.functional.mse_loss(preds, labels), "preds": preds}


def args(tmp: Path, **kw: Any) -> TrainingArguments:
    base: dict[str, Any] = {
        "output_dir": str(tmp),
        "report_to": "none",
        "disable_tqdm": True,
        "use_cpu": True,
        "max_steps": 3,
        "per_device_train_batch_size": 4,
        "save_strategy": "no",
        "learning_rate": 1e-2,
    }
    return TrainingArguments(**{**base, **kw})


def train(tmp: Path, **kw: Any) -> Trainer:
    trainer = Trainer(model=Model(), args=args(tmp, **kw), train_dataset=Data(), eval_dataset=Data(8))
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()
    assert any(not torch.equal(a, b) for a, b in zip(before, trainer.model.parameters(), strict=True)), (
        "no update"
    )
    return trainer


@pytest.mark.parametrize("optim", BNB)
def test_bitsandbytes_optimizers_train_with_bitsandbytes(tmp_path: Path, optim: str) -> None:
    optimizer = train(tmp_path, optim=optim).optimizer
    expected = (
        bitsandbytes.optim.AdEMAMix
        if "ademamix" in optim
        else bitsandbytes.optim.Lion
        if "lion" in optim
        else bitsandbytes.optim.RMSprop
        if "rmsprop" in optim
        else bitsandbytes.optim.AdamW
    )
    assert isinstance(optimizer, expected)
    assert optimizer.args.optim_bits == (8 if "8bit" in optim else 32)
    assert optimizer.is_paged == ("paged" in optim)


class ModeRecorder(Trainer):
    modes: list[tuple[str, bool]]

    def training_step(self, model, inputs, num_items_in_batch=None):
        self.modes.append(("train", self.optimizer.param_groups[0]["train_mode"]))
        return super().training_step(model, inputs, num_items_in_batch)

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        self.modes.append(("eval", self.optimizer.param_groups[0]["train_mode"]))
        return super().prediction_step(model, inputs, prediction_loss_only, ignore_keys)


@pytest.mark.parametrize(
    ("optim", "cls"),
    [
        ("schedule_free_adamw", schedulefree.AdamWScheduleFree),
        ("schedule_free_sgd", schedulefree.SGDScheduleFree),
        ("schedule_free_radam", schedulefree.RAdamScheduleFree),
    ],
)
def test_schedule_free_optimizers_train_in_train_mode_and_evaluate_in_eval_mode(
    tmp_path: Path, optim: str, cls: type
) -> None:
    trainer = ModeRecorder(
        model=Model(),
        args=args(
            tmp_path,
            optim=optim,
            eval_strategy="steps",
            eval_steps=1,
            warmup_steps=1,
            lr_scheduler_type="constant",
        ),
        train_dataset=Data(),
        eval_dataset=Data(8),
    )
    trainer.modes = []
    trainer.train()
    assert isinstance(trainer.optimizer, cls)
    assert {mode for kind, mode in trainer.modes if kind == "train"} == {True}
    assert {mode for kind, mode in trainer.modes if kind == "eval"} == {False}
    if optim != "schedule_free_radam":
        assert trainer.optimizer.defaults["warmup_steps"] == 1  # transformers passes warmup_steps


@pytest.mark.parametrize(
    ("optim", "cls"),
    [("galore_adamw", galore_torch.GaLoreAdamW), ("galore_adafactor", galore_torch.GaLoreAdafactor)],
)
def test_galore_projects_the_target_modules(tmp_path: Path, optim: str, cls: type) -> None:
    trainer = train(
        tmp_path, optim=optim, optim_target_modules=["hidden"], optim_args="rank=2,update_proj_gap=1"
    )
    optimizer = trainer.optimizer
    assert isinstance(optimizer, cls)
    projected = [group for group in optimizer.param_groups if "rank" in group]
    assert len(projected) == 1 and projected[0]["rank"] == 2 and projected[0]["update_proj_gap"] == 1
    assert projected[0]["params"] == [trainer.model.hidden.weight]


def test_galore_target_modules_by_regex_and_all_linear(tmp_path: Path) -> None:
    regex = Trainer(model=Model(), args=args(tmp_path, optim="galore_adamw", optim_target_modules=r"o.t"))
    assert [g["params"] for g in regex.create_optimizer().param_groups if "rank" in g] == [
        [regex.model.out.weight]
    ]
    every = Trainer(
        model=Model(), args=args(tmp_path, optim="galore_adamw", optim_target_modules="all-linear")
    )
    assert len(next(g for g in every.create_optimizer().param_groups if "rank" in g)["params"]) == 2
    nothing = Trainer(model=Model(), args=args(tmp_path, optim="galore_adamw", optim_target_modules=["attn"]))
    with pytest.raises(ValueError, match=r"optim_target_modules=\['attn'\] matches no nn.Linear"):
        nothing.create_optimizer()


def test_galore_8bit_is_refused_without_a_cuda_gpu(tmp_path: Path) -> None:
    if torch.cuda.is_available():
        train(tmp_path, optim="galore_adamw_8bit", optim_target_modules=["hidden"], optim_args="rank=2")
        return
    with pytest.raises(ValueError, match=r"galore_adamw_8bit.*calls CUDA.*no CUDA GPU is visible"):
        args(tmp_path, optim="galore_adamw_8bit", optim_target_modules=["hidden"])


def test_galore_needs_target_modules(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"galore_adamw.*needs optim_target_modules"):
        args(tmp_path, optim="galore_adamw")


def test_adamw_hf_runs_torch_adamw_with_a_warning(tmp_path: Path) -> None:
    with pytest.warns(FutureWarning, match="adamw_hf.*torch's AdamW"):
        arguments = args(tmp_path, optim="adamw_hf")
    optimizer = Trainer(model=Model(), args=arguments).create_optimizer()
    assert type(optimizer) is torch.optim.AdamW


@pytest.mark.parametrize("optim", sorted(REFUSED))
def test_optimizers_that_cannot_run_here_are_refused_naming_what_is_missing(
    tmp_path: Path, optim: str
) -> None:
    with pytest.raises(
        ValueError, match=rf"optim='{optim}' is not supported: it (needs|layer-wise|LOMO|AdaLomo)"
    ):
        args(tmp_path, optim=optim)
