"""transformers' private Trainer hooks (issue 35, item 3): a subclass overriding one sees its override run, with
transformers' signature, where transformers calls it; overriding one this trainer never calls is refused."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from torch import nn
from torch.utils.data import Dataset, SequentialSampler

from trainer import Trainer, TrainingArguments
from trainer._hooks import HONOURED, NOT_CALLED, SEED_ONLY


class Data(Dataset):
    def __init__(self, n: int = 16) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 4, generator=g)
        self.y = self.x.sum(-1)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[i], "labels": self.y[i]}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 1)

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        preds = self.linear(x).squeeze(-1)
        return {"loss": nn.functional.mse_loss(preds, labels), "preds": preds}


class Recording(Trainer):
    """Overrides every honoured hook with transformers' signature, records the call, then calls ours."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        super().__init__(*args, **kwargs)

    def _maybe_log_save_evaluate(
        self, tr_loss, grad_norm, model, trial, epoch, ignore_keys_for_eval, start_time, learning_rate=None
    ):
        self.calls.append(("_maybe_log_save_evaluate", (epoch, ignore_keys_for_eval)))
        return super()._maybe_log_save_evaluate(
            tr_loss, grad_norm, model, trial, epoch, ignore_keys_for_eval, start_time, learning_rate
        )

    def _evaluate(self, trial, ignore_keys_for_eval, skip_scheduler=False):
        self.calls.append(("_evaluate", (skip_scheduler,)))
        return super()._evaluate(trial, ignore_keys_for_eval, skip_scheduler)

    def _save_checkpoint(self, model, trial):
        self.calls.append(("_save_checkpoint", (self.state.global_step,)))
        super()._save_checkpoint(model, trial)

    def _load_best_model(self):
        self.calls.append(("_load_best_model", ()))
        super()._load_best_model()

    def _get_train_sampler(self, train_dataset=None):
        self.calls.append(("_get_train_sampler", (train_dataset is self.train_dataset,)))
        return SequentialSampler(train_dataset)

    def _wrap_model(self, model, training=True, dataloader=None):
        self.calls.append(("_wrap_model", (training,)))
        return super()._wrap_model(model, training, dataloader)

    def _remove_unused_columns(self, dataset, description=None):
        self.calls.append(("_remove_unused_columns", (description,)))
        return super()._remove_unused_columns(dataset, description)

    def _load_from_checkpoint(self, resume_from_checkpoint, model=None):
        self.calls.append(("_load_from_checkpoint", (Path(resume_from_checkpoint).name,)))
        super()._load_from_checkpoint(resume_from_checkpoint, model)

    def _save(self, output_dir=None, state_dict=None):
        self.calls.append(("_save", (Path(output_dir).name,)))
        super()._save(output_dir, state_dict)

    def store_flos(self):
        self.calls.append(("store_flos", ()))
        super().store_flos()


def names(trainer: Recording) -> list[str]:
    return [name for name, _ in trainer.calls]


def make(tmp: Path, **kw: Any) -> Recording:
    base: dict[str, Any] = {
        "output_dir": str(tmp / "out"),
        "report_to": "none",
        "disable_tqdm": True,
        "max_steps": 4,
        "per_device_train_batch_size": 4,
        "logging_steps": 2,
        "eval_strategy": "steps",
        "eval_steps": 2,
        "save_steps": 2,
        "metric_for_best_model": "loss",
        "load_best_model_at_end": True,
        "use_cpu": True,
    }
    return Recording(
        model=Model(), args=TrainingArguments(**{**base, **kw}), train_dataset=Data(), eval_dataset=Data(8)
    )


def test_every_honoured_hook_is_a_transformers_hook_with_its_signature() -> None:
    for name in HONOURED:
        ours = inspect.signature(getattr(Trainer, name))
        theirs = inspect.signature(getattr(transformers.Trainer, name))
        assert list(ours.parameters) == list(theirs.parameters), name
    for name in NOT_CALLED:
        assert hasattr(transformers.Trainer, name) or name in SEED_ONLY, name
        assert not hasattr(Trainer, name), name  # never one we call


def test_overrides_of_the_private_hooks_run_where_transformers_calls_them(tmp_path: Path) -> None:
    trainer = make(tmp_path)
    trainer.train()
    called = names(trainer)
    for hook in (
        "_get_train_sampler",
        "_remove_unused_columns",
        "_wrap_model",
        "_maybe_log_save_evaluate",
        "_evaluate",
        "_save_checkpoint",
        "_save",
        "store_flos",
        "_load_best_model",
    ):
        assert hook in called, hook
    assert ("_get_train_sampler", (True,)) in trainer.calls
    assert ("_remove_unused_columns", ("training",)) in trainer.calls
    assert ("_wrap_model", (True,)) in trainer.calls
    assert [c for c in trainer.calls if c[0] == "_save_checkpoint"] == [
        ("_save_checkpoint", (2,)),
        ("_save_checkpoint", (4,)),
    ]
    assert (
        "_save",
        (".tmp-checkpoint-2",),
    ) in trainer.calls  # the checkpoint's model files (written, then renamed)
    # The checkpoint is saved after the step's evaluation, inside _maybe_log_save_evaluate, as transformers.
    first = called.index("_maybe_log_save_evaluate")
    assert called[first : first + 5] == [
        "_maybe_log_save_evaluate",
        "store_flos",
        "_evaluate",
        "_save_checkpoint",
        "store_flos",
    ]
    assert called[-2:] == ["store_flos", "_load_best_model"]
    trainer.calls.clear()
    trainer.save_model(str(tmp_path / "final"))
    assert trainer.calls == [("_save", ("final",))]


def test_a_resume_loads_through_load_from_checkpoint(tmp_path: Path) -> None:
    make(tmp_path, load_best_model_at_end=False).train()
    trainer = make(tmp_path, load_best_model_at_end=False, max_steps=6)
    trainer.train(resume_from_checkpoint=True)
    assert ("_load_from_checkpoint", ("checkpoint-4",)) in trainer.calls


def test_an_overridden_sampler_decides_the_order(tmp_path: Path) -> None:
    class Reversed(Trainer):
        def _get_train_sampler(self, train_dataset=None):
            return list(reversed(range(len(train_dataset))))

    trainer = Reversed(
        model=Model(),
        args=TrainingArguments(
            output_dir=str(tmp_path), report_to="none", per_device_train_batch_size=4, use_cpu=True
        ),
        train_dataset=Data(),
    )
    first = next(iter(trainer.get_train_dataloader()))
    assert torch.equal(first["x"], Data().x[[15, 14, 13, 12]])


@pytest.mark.parametrize(
    "hook", ["_get_eval_sampler", "_save_rng_state", "_get_learning_rate", "_rotate_checkpoints"]
)
def test_an_override_of_a_hook_never_called_is_refused_at_construction(tmp_path: Path, hook: str) -> None:
    subclass = type("Custom", (Trainer,), {hook: lambda self, *a, **k: None})
    with pytest.raises(TypeError, match=rf"Custom overrides \['{hook}'\].*never calls"):
        subclass(
            model=Model(), args=TrainingArguments(output_dir=str(tmp_path), report_to="none", use_cpu=True)
        )
