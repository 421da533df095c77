"""Every `TrainingArguments` field has an effect a check shows, or is refused with the reason (issue 15).

``CHECKS`` maps each field to a small check; a field without one fails `test_every_field_has_a_check`, so a
field added later cannot slip in as an option that silently does nothing. Fields a script reads (``do_train``...)
are checked for what transformers does with them: parsed from the command line and kept for the script.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import Dataset

from trainer import (
    ExportableState,
    HfArgumentParser,
    JsonlCallback,
    PrinterCallback,
    ProgressCallback,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)
from trainer import _data as data_module
from trainer import _evaluation as evaluation_module
from trainer import _loop as loop_module


class Data(Dataset):
    def __init__(self, n: int = 32, extra: bool = False) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 4, generator=g)
        self.y = self.x.sum(-1)
        self.extra = extra

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict:
        item = {"x": self.x[i], "labels": self.y[i]}
        if self.extra:
            item["idx"] = i
        return item


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 1)
        self.calls: list[dict[str, Any]] = []

    def forward(self, x, labels=None, mems=None):
        self.calls.append({"batch": x.shape[0], "first": float(x[0, 0]), "mems": mems,
                           "autocast": torch.is_autocast_enabled("cpu")})  # fmt: skip
        preds = self.linear(x).squeeze(-1).float()
        out = {"preds": preds}
        if labels is not None:
            out["loss"] = nn.functional.mse_loss(preds, labels)
        return out


class Env:
    """Builds arguments in a temporary folder and runs small trainers."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp

    def args(self, **kw: Any) -> TrainingArguments:
        base: dict[str, Any] = {
            "output_dir": str(self.tmp / "out"),
            "disable_tqdm": True,
            "save_strategy": "no",
            "report_to": "none",
            "max_steps": 4,
            "per_device_train_batch_size": 8,
        }
        base.update(kw)
        return TrainingArguments(**base)

    def trainer(self, model: nn.Module | None = None, **kw: Any) -> Trainer:
        trainer_kw = {
            k: kw.pop(k) for k in ("callbacks", "compute_metrics", "eval_dataset", "train_dataset") if k in kw
        }
        trainer_kw.setdefault("train_dataset", Data())
        return Trainer(model=model or Model(), args=self.args(**kw), **trainer_kw)

    def train(self, model: nn.Module | None = None, **kw: Any) -> Trainer:
        trainer = self.trainer(model, **kw)
        trainer.train()
        return trainer

    def steps_with(self, key: str, trainer: Trainer) -> list[int]:
        return [h["step"] for h in trainer.state.log_history if key in h]

    def checkpoints(self) -> list[str]:
        out = self.tmp / "out"
        return (
            sorted(p.name for p in out.iterdir() if p.name.startswith("checkpoint-")) if out.exists() else []
        )


def refused(field: str, value: Any, needle: str, **kw: Any) -> Callable[[Env], None]:
    def check(env: Env) -> None:
        with pytest.raises(ValueError, match=needle):
            env.args(**{field: value}, **kw)

    return check


def script_flag(field: str, cli: list[str], expected: Any) -> Callable[[Env], None]:
    """A flag the script reads: parsed from its command line and kept on the arguments, as transformers does."""

    def check(env: Env) -> None:
        (args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses(
            ["--output_dir", str(env.tmp), *cli]
        )
        assert getattr(args, field) == expected and args.to_dict()[field] == expected

    return check


def lr_after(env: Env, **kw: Any) -> list[float]:
    trainer = env.train(logging_steps=1, **kw)
    return [h["learning_rate"] for h in trainer.state.log_history if "learning_rate" in h]


# ------------------------------------------------------------------ one check per field
def c_output_dir(env: Env) -> None:
    env.train(save_strategy="steps", save_steps=4)
    assert env.checkpoints() == ["checkpoint-4"]


def c_eval_strategy(env: Env) -> None:
    assert env.steps_with(
        "eval_loss", env.train(eval_strategy="steps", eval_steps=2, eval_dataset=Data(8))
    ) == [2, 4]
    assert env.steps_with("eval_loss", env.train(eval_strategy="no", eval_dataset=Data(8))) == []


def c_eval_steps(env: Env) -> None:
    assert env.steps_with(
        "eval_loss", env.train(eval_strategy="steps", eval_steps=1, eval_dataset=Data(8))
    ) == [1, 2, 3, 4]


def c_eval_delay(env: Env) -> None:
    trainer = env.train(eval_strategy="steps", eval_steps=1, eval_delay=3, eval_dataset=Data(8))
    assert env.steps_with("eval_loss", trainer) == [3, 4]


def c_train_batch(env: Env) -> None:
    assert {c["batch"] for c in env.train(per_device_train_batch_size=4).model.calls} == {4}


def c_eval_batch(env: Env) -> None:
    assert env.trainer(per_device_eval_batch_size=5).get_eval_dataloader(Data(20)).batch_size == 5


def c_grad_accum(env: Env) -> None:
    assert len(env.train(max_steps=2, gradient_accumulation_steps=3, train_dataset=Data(48)).model.calls) == 6


def c_eval_accum(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    moved = []
    original = evaluation_module.Accumulator.to_host

    def spy(self: Any) -> None:
        if self.on_device is not None:
            moved.append(self.count)
        original(self)

    monkeypatch.setattr(evaluation_module.Accumulator, "to_host", spy)
    env.trainer(eval_accumulation_steps=1, per_device_eval_batch_size=8).predict(Data(16))
    assert moved == [1, 1, 2, 2]


def optimizer_of(env: Env, **kw: Any) -> torch.optim.Optimizer:
    return env.trainer(**kw).create_optimizer()


def c_learning_rate(env: Env) -> None:
    assert optimizer_of(env, learning_rate=0.123).param_groups[0]["lr"] == 0.123


def c_weight_decay(env: Env) -> None:
    assert optimizer_of(env, weight_decay=0.3).param_groups[0]["weight_decay"] == 0.3


def c_beta1(env: Env) -> None:
    assert optimizer_of(env, adam_beta1=0.5).defaults["betas"][0] == 0.5


def c_beta2(env: Env) -> None:
    assert optimizer_of(env, adam_beta2=0.5).defaults["betas"][1] == 0.5


def c_epsilon(env: Env) -> None:
    assert optimizer_of(env, adam_epsilon=0.25).defaults["eps"] == 0.25


def c_max_grad_norm(env: Env) -> None:
    assert "grad_norm" in env.train(max_grad_norm=1.0, logging_steps=1).state.log_history[0]
    assert "grad_norm" not in env.train(max_grad_norm=0.0, logging_steps=1).state.log_history[0]


def c_epochs(env: Env) -> None:
    assert env.train(max_steps=-1, num_train_epochs=2).state.global_step == 8  # 32 examples / 8 per batch x 2


def c_max_steps(env: Env) -> None:
    assert env.train(max_steps=3).state.global_step == 3


def c_scheduler(env: Env) -> None:
    assert lr_after(env, lr_scheduler_type="constant", learning_rate=0.1) == [0.1] * 4
    assert lr_after(env, lr_scheduler_type="linear", learning_rate=0.1)[-1] == 0.0


def c_scheduler_kwargs(env: Env) -> None:
    lrs = lr_after(env, lr_scheduler_type="cosine_with_min_lr", learning_rate=0.1,
                   lr_scheduler_kwargs={"min_lr_rate": 0.5})  # fmt: skip
    assert lrs[-1] == pytest.approx(0.05)


def c_warmup_ratio(env: Env) -> None:
    assert (
        lr_after(env, warmup_ratio=0.5, learning_rate=0.1, lr_scheduler_type="constant_with_warmup")[0]
        == 0.05
    )


def c_warmup_steps(env: Env) -> None:
    assert (
        lr_after(env, warmup_steps=4, learning_rate=0.1, lr_scheduler_type="constant_with_warmup")[0] == 0.025
    )


def c_log_level(env: Env) -> None:
    logger = logging.getLogger("trainer")
    before = logger.level
    try:
        env.trainer(log_level="critical")
        assert logger.level == logging.CRITICAL
    finally:
        logger.setLevel(before)


def c_log_level_replica(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(TrainingArguments, "should_log", property(lambda self: False))
    assert env.args(log_level_replica="error").get_process_log_level() == logging.ERROR


def c_log_on_each_node(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(TrainingArguments, "local_process_index", property(lambda self: 0))
    monkeypatch.setattr(TrainingArguments, "process_index", property(lambda self: 3))
    assert env.args(log_on_each_node=True).should_log and not env.args(log_on_each_node=False).should_log


def c_logging_dir(env: Env) -> None:
    import tensorboard  # noqa: F401 - installed with the tensorboard extra

    env.train(report_to="tensorboard", logging_dir=str(env.tmp / "tb"))
    assert any(name.startswith("events.out.tfevents") for name in os.listdir(env.tmp / "tb"))


def c_logging_strategy(env: Env) -> None:
    assert env.steps_with("loss", env.train(logging_strategy="no")) == []
    assert env.steps_with("loss", env.train(logging_strategy="epoch", max_steps=-1, num_train_epochs=2)) == [
        4,
        8,
    ]


def c_logging_first_step(env: Env) -> None:
    assert env.steps_with("loss", env.train(logging_first_step=True, logging_steps=100)) == [1]


def c_logging_steps(env: Env) -> None:
    assert env.steps_with("loss", env.train(logging_steps=2)) == [2, 4]


def c_nan_filter(env: Env) -> None:
    class NanOnce(Model):
        def forward(self, x, labels=None, mems=None):
            out = super().forward(x, labels)
            if len(self.calls) == 1:
                out["loss"] = out["loss"] + torch.tensor(
                    float("nan")
                )  # the value only: gradients stay finite
            return out

    def first_loss(flag: bool) -> float:
        return env.train(NanOnce(), logging_nan_inf_filter=flag, logging_steps=2).state.log_history[0]["loss"]

    assert first_loss(True) == first_loss(True) and first_loss(False) != first_loss(False)  # NaN != NaN


def c_save_strategy(env: Env) -> None:
    env.train(save_strategy="steps", save_steps=2)
    assert env.checkpoints() == ["checkpoint-2", "checkpoint-4"]


def c_save_steps(env: Env) -> None:
    env.train(save_strategy="steps", save_steps=3)
    assert env.checkpoints() == ["checkpoint-3", "checkpoint-4"]


def c_save_total_limit(env: Env) -> None:
    env.train(save_strategy="steps", save_steps=1, save_total_limit=2)
    assert env.checkpoints() == ["checkpoint-3", "checkpoint-4"]


def c_save_only_model(env: Env) -> None:
    env.train(save_strategy="steps", save_steps=4, save_only_model=True)
    assert not (env.tmp / "out" / "checkpoint-4" / "optimizer.pt").exists()


class Counter(TrainerCallback, ExportableState):
    def __init__(self, start: int = 0) -> None:
        self.count = start

    def on_step_end(self, args, state, control, **kwargs):
        self.count += 1

    def state(self) -> dict:
        return {"args": {}, "attributes": {"count": self.count}}


def c_restore_callbacks(env: Env) -> None:
    env.train(save_strategy="steps", save_steps=2, callbacks=[Counter()])
    checkpoint = str(env.tmp / "out" / "checkpoint-2")
    for flag, expected in ((True, 4), (False, 2)):
        trainer = env.trainer(restore_callback_states_from_checkpoint=flag, callbacks=[Counter()])
        trainer.train(resume_from_checkpoint=checkpoint)
        (counter,) = [cb for cb in trainer.callback_handler.callbacks if isinstance(cb, Counter)]
        assert counter.count == expected


def c_use_cpu(env: Env) -> None:
    assert env.args(use_cpu=True).device.type == "cpu"
    assert env.trainer(use_cpu=True).accelerator.device.type == "cpu"
    with pytest.raises(ValueError, match="use_cpu=True"):
        env.args(use_cpu=True, mixed_precision="fp16")


def c_seed(env: Env) -> None:
    def weights(seed: int) -> torch.Tensor:
        return Trainer(model_init=Model, args=env.args(seed=seed)).model.linear.weight.detach().clone()

    assert torch.equal(weights(1), weights(1)) and not torch.equal(weights(1), weights(2))


def c_data_seed(env: Env) -> None:
    def first(data_seed: int) -> float:
        return env.train(data_seed=data_seed, max_steps=1).model.calls[0]["first"]

    assert first(1) == first(1) and first(1) != first(2)


def c_full_determinism(env: Env) -> None:
    env.trainer(full_determinism=True)
    assert torch.are_deterministic_algorithms_enabled()


def c_mixed_precision(env: Env) -> None:
    assert {c["autocast"] for c in env.train(mixed_precision="bf16", use_cpu=True).model.calls} == {True}
    assert {c["autocast"] for c in env.train(mixed_precision="no").model.calls} == {False}


def c_num_workers(env: Env) -> None:
    assert env.trainer(dataloader_num_workers=2).get_train_dataloader().num_workers == 2


def c_drop_last(env: Env) -> None:
    def steps(drop: bool) -> int:
        return env.train(
            max_steps=-1, num_train_epochs=1, dataloader_drop_last=drop, train_dataset=Data(30)
        ).state.global_step

    assert (steps(True), steps(False)) == (3, 4)


def c_pin_memory(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    # Pinned memory only matters for copies to a GPU; the choice is made where a GPU is present.
    monkeypatch.setattr(data_module.torch.cuda, "is_available", lambda: True)
    trainer = env.trainer()
    for flag in (True, False):
        trainer.args = env.args(dataloader_pin_memory=flag)
        assert data_module.dataloader_kwargs(trainer)["pin_memory"] is flag


def c_persistent_workers(env: Env) -> None:
    loader = env.trainer(dataloader_num_workers=1, dataloader_persistent_workers=True).get_train_dataloader()
    assert loader.persistent_workers is True


def c_prefetch(env: Env) -> None:
    loader = env.trainer(dataloader_num_workers=1, dataloader_prefetch_factor=5).get_train_dataloader()
    assert loader.prefetch_factor == 5


def c_remove_unused(env: Env) -> None:
    env.train(remove_unused_columns=True, train_dataset=Data(extra=True))
    with pytest.raises(TypeError, match="idx"):
        env.train(remove_unused_columns=False, train_dataset=Data(extra=True))


def c_label_names(env: Env) -> None:
    class Target(Model):
        def forward(self, x, target=None):
            return super().forward(x, labels=target)

    class TargetData(Data):
        def __getitem__(self, i):
            return {"x": self.x[i], "target": self.y[i]}

    metrics = Trainer(model=Target(), args=env.args(label_names=["target"])).evaluate(TargetData(8))
    assert "eval_loss" in metrics


def eval_run(env: Env, **kw: Any) -> Trainer:
    return env.train(eval_strategy="steps", eval_steps=1, save_strategy="steps", save_steps=1,
                     eval_dataset=Data(8), learning_rate=0.05, **kw)  # fmt: skip


def c_load_best(env: Env) -> None:
    from trainer._checkpoint import load_model_weights

    trainer = eval_run(env, load_best_model_at_end=True, greater_is_better=True)  # the worst loss is "best"
    best = trainer.state.best_model_checkpoint
    assert best is not None and not best.endswith("checkpoint-4")
    reference = Model()
    load_model_weights(reference, best)
    assert torch.equal(reference.linear.weight, trainer.model.linear.weight.cpu())


def c_metric_for_best(env: Env) -> None:
    trainer = eval_run(env, metric_for_best_model="loss")
    losses = [h["eval_loss"] for h in trainer.state.log_history if "eval_loss" in h]
    assert trainer.state.best_metric == min(losses)


def c_greater_is_better(env: Env) -> None:
    trainer = eval_run(env, metric_for_best_model="loss", greater_is_better=True)
    losses = [h["eval_loss"] for h in trainer.state.log_history if "eval_loss" in h]
    assert trainer.state.best_metric == max(losses)


def c_prediction_loss_only(env: Env) -> None:
    assert env.trainer(prediction_loss_only=True).predict(Data(8)).predictions is None
    assert env.trainer(prediction_loss_only=False).predict(Data(8)).predictions is not None


def c_batch_eval_metrics(env: Env) -> None:
    calls = []

    def metrics(pred, compute_result=None):
        calls.append(compute_result)
        return {"n": 1.0}

    Trainer(
        model=Model(),
        args=env.args(batch_eval_metrics=True, per_device_eval_batch_size=4),
        compute_metrics=metrics,
    ).evaluate(Data(8))
    assert calls == [False, True]


def c_optim(env: Env) -> None:
    assert isinstance(optimizer_of(env, optim="sgd"), torch.optim.SGD)


def c_optim_args(env: Env) -> None:
    assert optimizer_of(env, optim="sgd", optim_args="momentum=0.5").defaults["momentum"] == 0.5


def c_report_to(env: Env) -> None:
    assert any(
        isinstance(cb, JsonlCallback) for cb in env.trainer(report_to="jsonl").callback_handler.callbacks
    )
    env.train(report_to="jsonl")
    assert (env.tmp / "out" / "log_history.jsonl").is_file()


def c_disable_tqdm(env: Env) -> None:
    assert any(
        isinstance(c, PrinterCallback) for c in env.trainer(disable_tqdm=True).callback_handler.callbacks
    )
    assert any(
        isinstance(c, ProgressCallback) for c in env.trainer(disable_tqdm=False).callback_handler.callbacks
    )


def c_run_name(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    import mlflow  # noqa: F401 - installed with the mlflow extra

    from trainer import MLflowCallback

    names = []

    class Client:
        def create_run(self, experiment_id, run_name=None, tags=None):
            names.append(run_name)
            return types.SimpleNamespace(info=types.SimpleNamespace(run_id="r"))

        def get_experiment_by_name(self, name):
            return types.SimpleNamespace(experiment_id="0")

        def __getattr__(self, name):
            return lambda *a, **k: None

    monkeypatch.setattr(MLflowCallback, "_client", lambda self, args: Client())
    env.train(report_to="mlflow", run_name="my-run", max_steps=1)
    assert names == ["my-run"]


def c_skip_memory(env: Env) -> None:
    logged = env.train(skip_memory_metrics=False).state.log_history[-1]
    assert "train_mem_cpu_alloc_delta" in logged
    assert (
        "init_mem_cpu_alloc_delta" in logged and "init_mem_cpu_peaked_delta" in logged
    )  # the init_ stage too
    assert "train_mem_cpu_alloc_delta" not in env.train(skip_memory_metrics=True).state.log_history[-1]


class Tokens(Dataset):
    def __len__(self) -> int:
        return 16

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": torch.arange(5) + i, "labels": torch.tensor(float(i))}


class TokenModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(32, 4)

    def forward(self, input_ids, labels=None):
        preds = self.embed(input_ids).mean((1, 2))
        return {"loss": nn.functional.mse_loss(preds, labels.float()), "preds": preds}


def c_tokens_seen(env: Env) -> None:
    trainer = env.train(TokenModel(), include_num_input_tokens_seen=True, train_dataset=Tokens(), max_steps=2)
    assert trainer.state.num_input_tokens_seen == 2 * 8 * 5


def c_tokens_per_second(env: Env) -> None:
    metrics = env.train(
        TokenModel(), include_tokens_per_second=True, train_dataset=Tokens()
    ).state.log_history[-1]
    assert metrics["train_tokens_per_second"] > 0
    assert (
        "train_tokens_per_second" not in env.train(TokenModel(), train_dataset=Tokens()).state.log_history[-1]
    )


def c_shard_size(env: Env) -> None:
    env.trainer(max_checkpoint_shard_size=8).save_model(str(env.tmp / "sharded"))
    assert (env.tmp / "sharded" / "model.safetensors.index.json").is_file()


def c_save_on_each_node(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    for flag in (False, True):
        trainer = env.trainer(save_on_each_node=flag)
        monkeypatch.setattr(trainer, "is_world_process_zero", lambda: False)
        monkeypatch.setattr(trainer, "is_local_process_zero", lambda: True)
        trainer.save_model(str(env.tmp / f"node-{flag}"))
        assert (env.tmp / f"node-{flag}" / "model.safetensors").is_file() is flag


def c_bf16(env: Env) -> None:
    assert env.args(bf16=True, use_cpu=True).mixed_precision == "bf16"
    assert {c["autocast"] for c in env.train(bf16=True, use_cpu=True).model.calls} == {True}


def c_fp16(env: Env) -> None:
    if torch.cuda.is_available():
        assert env.args(fp16=True).mixed_precision == "fp16"
    else:
        refused("fp16", True, "needs a CUDA GPU")(env)


def c_fp16_full_eval(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    from trainer import _precision

    torch.manual_seed(0)
    full = env.trainer().evaluate(Data(8))["eval_loss"]
    torch.manual_seed(0)
    trainer = env.trainer(fp16_full_eval=True)  # on the CPU too: torch runs float16 there (issue 35, item 10)
    half = trainer.evaluate(Data(8))["eval_loss"]
    assert (
        trainer.model.linear.weight.dtype == torch.float16
        and half != full
        and abs(half - full) < 1e-2 * abs(full)
    )
    if not torch.cuda.is_available():
        monkeypatch.setattr(_precision, "cpu_runs_fp16", lambda: False)  # an older torch build
        refused("fp16_full_eval", True, "needs a CUDA GPU or a torch that runs float16 on the CPU")(env)


def c_bf16_full_eval(env: Env) -> None:
    trainer = env.trainer(bf16_full_eval=True, use_cpu=True)
    trainer.evaluate(Data(8))
    assert trainer.model.linear.weight.dtype == torch.bfloat16


def c_tf32(env: Env) -> None:
    before = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = True
        env.trainer(tf32=False)
        assert torch.backends.cuda.matmul.allow_tf32 is False
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
    if not torch.cuda.is_available():
        refused("tf32", True, "needs an Ampere")(env)


def c_evaluation_strategy(env: Env) -> None:
    with pytest.warns(FutureWarning):
        trainer = env.train(evaluation_strategy="steps", eval_steps=2, eval_dataset=Data(8))
    assert env.steps_with("eval_loss", trainer) == [2, 4]


def c_do_eval(env: Env) -> None:
    script_flag("do_eval", ["--do_eval"], True)(env)
    assert env.args(eval_strategy="steps", eval_steps=2).do_eval is True  # as transformers derives it


def c_label_smoothing(env: Env) -> None:
    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(4, 3)

        def forward(self, x, labels=None):
            logits = self.linear(x)
            out = {"logits": logits}
            if labels is not None:
                out["loss"] = nn.functional.cross_entropy(logits, labels)
            return out

    model = Classifier()
    batch = {"x": torch.randn(6, 4), "labels": torch.tensor([0, 1, 2, 0, 1, 2])}
    plain = env.trainer(model).compute_loss(model, batch)
    smoothed = env.trainer(model, label_smoothing_factor=0.4).compute_loss(model, batch)
    expected = nn.functional.cross_entropy(model.linear(batch["x"]), batch["labels"], label_smoothing=0.4)
    torch.testing.assert_close(smoothed, expected)
    assert not torch.allclose(plain, smoothed)


def c_include_for_metrics(env: Env, flag: dict[str, Any] | None = None) -> None:
    seen = {}

    def metrics(pred):
        seen["inputs"] = pred.inputs
        return {}

    Trainer(
        model=TokenModel(),
        args=env.args(**(flag or {"include_for_metrics": ["inputs"]})),
        compute_metrics=metrics,
    ).evaluate(Tokens())
    assert seen["inputs"].shape == (16, 5)


def c_include_inputs(env: Env) -> None:
    with pytest.warns(FutureWarning):
        c_include_for_metrics(env, {"include_inputs_for_metrics": True})


def c_concat_batches(env: Env) -> None:
    out = env.trainer(eval_do_concat_batches=False, per_device_eval_batch_size=6).predict(Data(10))
    assert [p.shape for p in out.predictions] == [(6,), (4,)]


def c_eval_use_gather_object(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    # One process gathers nothing: the same predictions (as in transformers); several processes refuse it.
    assert env.trainer(eval_use_gather_object=True).predict(Data(10)).predictions.shape == (10,)
    trainer = env.trainer(eval_use_gather_object=True)
    monkeypatch.setattr(type(trainer.accelerator), "num_processes", property(lambda self: 2))
    with pytest.raises(ValueError, match="eval_use_gather_object=True is not supported"):
        trainer.evaluate(Data(10))


def c_torch_empty_cache_steps(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    steps: list[int] = []
    trainer = env.trainer(torch_empty_cache_steps=2, max_steps=5)
    monkeypatch.setattr(loop_module, "clear_device_cache", lambda: steps.append(trainer.state.global_step))
    trainer.train()
    assert steps == [2, 4]
    for value in (0, -1, 1.0, "2"):
        with pytest.raises(ValueError, match="torch_empty_cache_steps"):
            env.args(torch_empty_cache_steps=value)


def c_ignore_data_skip(env: Env) -> None:
    env.train(save_strategy="steps", save_steps=2)
    firsts = {}
    for flag in (False, True):
        trainer = env.trainer(ignore_data_skip=flag)
        trainer.train(resume_from_checkpoint=str(env.tmp / "out" / "checkpoint-2"))
        firsts[flag] = trainer.model.calls[0]["first"]
    # Without the skip, the resumed run's first batch is the epoch's first batch of the original order.
    original = env.train(max_steps=1).model.calls[0]["first"]
    assert firsts[True] == original and firsts[False] != original


def c_past_index(env: Env) -> None:
    class WithMemory(Model):
        def forward(self, x, labels=None, mems=None):
            out = super().forward(x, labels, mems)
            out["memory"] = out["preds"].detach().sum()
            return out

    calls = env.train(WithMemory(), past_index=2).model.calls
    assert calls[0]["mems"] is None and all(c["mems"] is not None for c in calls[1:])


def c_ddp_backend(env: Env) -> None:
    assert env.trainer(ddp_backend="gloo").accelerator.init_handler.backend == "gloo"
    refused("ddp_backend", "smoke", "ddp_backend")(env)


def c_ddp_timeout(env: Env) -> None:
    assert env.trainer(ddp_timeout=42).accelerator.init_handler.timeout.total_seconds() == 42


def c_find_unused(env: Env) -> None:
    assert env.trainer(ddp_find_unused_parameters=True).accelerator.ddp_handler.find_unused_parameters is True


def c_bucket(env: Env) -> None:
    assert env.trainer(ddp_bucket_cap_mb=3).accelerator.ddp_handler.bucket_cap_mb == 3


def c_broadcast(env: Env) -> None:
    assert env.trainer(ddp_broadcast_buffers=False).accelerator.ddp_handler.broadcast_buffers is False


def c_accelerator_config(env: Env) -> None:
    assert (
        env.trainer(accelerator_config={"even_batches": False}).accelerator.dataloader_config.even_batches
        is False
    )
    refused("accelerator_config", {"use_configured_state": True}, "not supported")(env)


def c_dispatch(env: Env) -> None:
    assert env.trainer(dispatch_batches=False).accelerator.dataloader_config.dispatch_batches is False


def c_split(env: Env) -> None:
    assert env.trainer(split_batches=True).accelerator.dataloader_config.split_batches is True


def c_debug(env: Env) -> None:
    class Inf(Model):
        def forward(self, x, labels=None, mems=None):
            return super().forward(x * float("inf"), labels)

    with pytest.raises(FloatingPointError, match="linear"):
        env.train(Inf(), debug="underflow_overflow")


def c_half_precision_backend(env: Env) -> None:
    assert env.args(half_precision_backend="cpu_amp").half_precision_backend == "cpu_amp"
    refused("half_precision_backend", "apex", "apex is not supported")(env)


def tiny_bert() -> nn.Module:
    import transformers

    config = transformers.BertConfig(vocab_size=40, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=16, max_position_embeddings=8, num_labels=1)  # fmt: skip
    return transformers.BertForSequenceClassification(config)


class BertTokens(Tokens):
    def __getitem__(self, i: int) -> dict:
        return {"input_ids": torch.arange(5) + i, "labels": torch.tensor(float(i % 2))}


def _checkpointing(model: Any) -> bool:
    """Whether a transformers model checkpoints its activations, under either release's name."""
    flag = getattr(model, "is_activation_checkpointing", None)
    return bool(model.is_gradient_checkpointing if flag is None else flag)


def c_gradient_checkpointing(env: Env) -> None:
    import transformers  # noqa: F401 - in the test extra

    model = env.train(tiny_bert(), gradient_checkpointing=True, train_dataset=BertTokens(), max_steps=1).model
    assert _checkpointing(model)
    assert not _checkpointing(env.train(tiny_bert(), train_dataset=BertTokens(), max_steps=1).model)
    with pytest.raises(ValueError, match="needs a model with gradient_checkpointing_enable"):
        env.train(gradient_checkpointing=True)


def c_activation_checkpointing(env: Env) -> None:
    # transformers 5's name; gradient_checkpointing is its older alias, mirrored both ways.
    import transformers  # noqa: F401 - in the test extra

    model = env.train(
        tiny_bert(), activation_checkpointing=True, train_dataset=BertTokens(), max_steps=1
    ).model
    assert _checkpointing(model)
    args = env.args(activation_checkpointing=True)
    assert args.gradient_checkpointing is True
    assert args.replace(gradient_checkpointing=False).activation_checkpointing is False
    assert env.args().replace(gradient_checkpointing=True).activation_checkpointing is True
    assert (
        env.args(activation_checkpointing=False, gradient_checkpointing=True).gradient_checkpointing is False
    )


def c_activation_checkpointing_kwargs(env: Env) -> None:
    args = env.args(activation_checkpointing=True, activation_checkpointing_kwargs={"use_reentrant": False})
    assert args.gradient_checkpointing_kwargs == {"use_reentrant": False}
    assert env.args().activation_checkpointing_kwargs == {}
    refused("activation_checkpointing_kwargs", {"use_reentrant": False}, "only applies with")(env)


def c_gradient_checkpointing_kwargs(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    import transformers  # noqa: F401 - in the test extra

    seen = []
    model = tiny_bert()
    # transformers 5's name of gradient_checkpointing_enable, or the older one: whichever this release has.
    name = next(
        n for n in ("activation_checkpointing_enable", "gradient_checkpointing_enable") if hasattr(model, n)
    )
    original = getattr(model, name)

    def enable(*args, **kwargs):
        seen.append(next(iter([*args, *kwargs.values()]), None))
        return original(*args, **kwargs)

    monkeypatch.setattr(model, name, enable)
    env.train(model, gradient_checkpointing=True, gradient_checkpointing_kwargs={"use_reentrant": False},
              train_dataset=BertTokens(), max_steps=1)  # fmt: skip
    assert seen == [{"use_reentrant": False}]
    refused("gradient_checkpointing_kwargs", {"use_reentrant": False}, "only applies with")(env)


def c_eval_on_start(env: Env) -> None:
    assert env.steps_with("eval_loss", env.train(eval_on_start=True, eval_strategy="epoch", max_steps=-1,
                                                 num_train_epochs=1, eval_dataset=Data(8))) == [0, 4]  # fmt: skip
    assert env.steps_with("eval_loss", env.train(eval_on_start=False, eval_strategy="epoch", max_steps=-1,
                                                 num_train_epochs=1, eval_dataset=Data(8))) == [4]  # fmt: skip


def c_torch_compile(env: Env) -> None:
    # The "eager" backend: torch.compile's graph capture without code generation, quick on a CPU.
    compiled = env.train(torch_compile=True, torch_compile_backend="eager", max_steps=2)
    assert type(compiled.model_wrapped).__name__ == "OptimizedModule"
    assert "eval_loss" in compiled.evaluate(Data(8))
    compiled.save_model(str(env.tmp / "compiled"))  # saved without the compile wrapper's "_orig_mod." prefix
    from trainer._checkpoint import load_model_weights

    load_model_weights(Model(), str(env.tmp / "compiled"))
    # A trainer without it in the same process is not compiled (accelerate's process-wide plugin is reset).
    assert type(env.train(max_steps=1).model_wrapped).__name__ != "OptimizedModule"


def c_torch_compile_backend(env: Env) -> None:
    args = env.args(torch_compile_backend="eager")
    assert args.torch_compile is True and args.replace(torch_compile_backend=None).torch_compile is False
    assert args.replace(learning_rate=0.5).torch_compile is True  # re-validating keeps what was derived
    with pytest.raises(ValueError, match="torch_compile=False and torch_compile_backend='eager' disagree"):
        args.replace(torch_compile=False)
    assert env.trainer(torch_compile_backend="eager").accelerator.state.dynamo_plugin.backend.value == "EAGER"
    refused("torch_compile_backend", "warp-drive", "torch_compile_backend")(env)


def c_torch_compile_mode(env: Env) -> None:
    args = env.args(torch_compile_mode="reduce-overhead")
    assert args.torch_compile is True
    plugin = env.trainer(
        torch_compile_backend="eager", torch_compile_mode="max-autotune"
    ).accelerator.state.dynamo_plugin
    assert plugin.mode == "max-autotune"


def c_auto_find_batch_size(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    original = Trainer.training_step

    def step(self, model, inputs):
        if inputs["x"].shape[0] > 2:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1 GiB")
        return original(self, model, inputs)

    monkeypatch.setattr(Trainer, "training_step", step)
    trainer = env.trainer(auto_find_batch_size=True, per_device_train_batch_size=8, max_steps=3)
    trainer.train()
    assert trainer.args.per_device_train_batch_size == 2 and trainer.state.global_step == 3
    assert {c["batch"] for c in trainer.model.calls} == {2}
    with pytest.raises(torch.OutOfMemoryError):
        env.trainer(auto_find_batch_size=False, per_device_train_batch_size=8).train()


class Ragged(Dataset):
    """Token sequences of lengths 1..12."""

    def __init__(self, n: int = 48) -> None:
        self.sizes = [1 + (i * 7) % 12 for i in range(n)]

    def __len__(self) -> int:
        return len(self.sizes)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": list(range(1, self.sizes[i] + 1)), "labels": float(i % 2)}


class PadTokens(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(16, 2)
        self.widths: list[list[int]] = []

    def forward(self, input_ids, attention_mask, labels=None):
        self.widths.append(attention_mask.sum(1).tolist())
        preds = (self.embed(input_ids) * attention_mask[..., None]).mean((1, 2))
        return {"loss": nn.functional.mse_loss(preds, labels.float())}


def pad_collate(features):
    width = max(len(f["input_ids"]) for f in features)
    ids = torch.tensor([f["input_ids"] + [0] * (width - len(f["input_ids"])) for f in features])
    return {
        "input_ids": ids,
        "attention_mask": (ids > 0).long(),
        "labels": torch.tensor([f["labels"] for f in features]),
    }


def padding_of(widths: list[list[int]]) -> int:
    return sum(max(batch) * len(batch) - sum(batch) for batch in widths)


def c_group_by_length(env: Env) -> None:
    def run(group: bool) -> PadTokens:
        model = PadTokens()
        Trainer(model=model, args=env.args(group_by_length=group, max_steps=-1, num_train_epochs=1,
                                           per_device_train_batch_size=4), train_dataset=Ragged(),
                data_collator=pad_collate).train()  # fmt: skip
        return model

    grouped, plain = run(True), run(False)
    assert max(grouped.widths[0]) == 12  # the longest example comes first
    assert padding_of(grouped.widths) < padding_of(plain.widths) / 3
    assert sorted(w for b in grouped.widths for w in b) == sorted(w for b in plain.widths for w in b)
    with pytest.raises(ValueError, match="group_by_length=True needs each example's length"):
        env.train(group_by_length=True)  # Data has neither a length column nor input_ids


def c_train_sampling_strategy(env: Env) -> None:
    # "sequential" trains in the dataset's order; "group_by_length" is group_by_length=True (its older spelling).
    firsts = [c["first"] for c in env.train(train_sampling_strategy="sequential", max_steps=4).model.calls]
    data = Data()
    assert firsts == [float(data.x[i, 0]) for i in (0, 8, 16, 24)]
    assert env.train(max_steps=4).model.calls[0]["first"] != float(data.x[0, 0])  # "random", the default
    assert env.args(train_sampling_strategy="group_by_length").group_by_length is True
    assert env.args(group_by_length=True).train_sampling_strategy == "group_by_length"
    assert env.args(group_by_length=True).replace(train_sampling_strategy="random").group_by_length is False
    assert env.args().replace(group_by_length=True).train_sampling_strategy == "group_by_length"
    refused("train_sampling_strategy", "batch_rebalance", "not supported")(env)
    refused("train_sampling_strategy", "shuffled", "train_sampling_strategy")(env)
    refused("train_sampling_strategy", "sequential", "disagree", group_by_length=True)(env)


class _TwoProcesses:
    """What the window count asks of an accelerator with two processes, the other one holding 5 label tokens."""

    num_processes = 2
    device = torch.device("cpu")

    def gather(self, tensor: torch.Tensor) -> torch.Tensor:
        return torch.cat([tensor, torch.tensor([5])])


def c_average_tokens(env: Env) -> None:
    batch = {"labels": torch.tensor([[1, 2, -100], [3, -100, -100]])}
    for value, expected in ((True, 3 + 5), (False, 3)):
        trainer = types.SimpleNamespace(
            accelerator=_TwoProcesses(), args=env.args(average_tokens_across_devices=value)
        )
        assert int(loop_module._window_count(trainer, [batch], shift=False)) == expected  # type: ignore[arg-type]


def c_multiprocessing_context(env: Env) -> None:
    loader = env.trainer(
        dataloader_num_workers=1, dataloader_multiprocessing_context="spawn"
    ).get_train_dataloader()
    assert loader.multiprocessing_context.get_start_method() == "spawn"
    refused("dataloader_multiprocessing_context", "thread", "dataloader_multiprocessing_context")(env)


def c_in_order(env: Env) -> None:
    assert (
        env.trainer(dataloader_num_workers=1, dataloader_in_order=False).get_train_dataloader().in_order
        is False
    )
    assert env.trainer(dataloader_num_workers=1).get_train_dataloader().in_order is True


def c_static_graph(env: Env) -> None:
    assert env.trainer(ddp_static_graph=True).accelerator.ddp_handler.static_graph is True


def c_use_cache(env: Env) -> None:
    import transformers  # noqa: F401 - in the test extra

    assert tiny_bert().config.use_cache is True  # the model's own default ...
    assert (
        Trainer(model=tiny_bert(), args=env.args()).model.config.use_cache is False
    )  # ... the Trainer's default
    assert Trainer(model=tiny_bert(), args=env.args(use_cache=True)).model.config.use_cache is True
    built = Trainer(model_init=tiny_bert, args=env.args(), train_dataset=BertTokens())
    assert built.model.config.use_cache is False


def c_length_column_name(env: Env) -> None:
    class Sized(Ragged):
        """With a "size" column, answered the way datasets.Dataset answers dataset["size"]."""

        column_names = ["input_ids", "labels", "size"]

        def __getitem__(self, i):
            if isinstance(i, str):  # a column, as datasets.Dataset answers
                return list(reversed(self.sizes)) if i == "size" else super().__getitem__(i)
            return super().__getitem__(i)

    from trainer._data import example_lengths

    trainer = env.trainer(group_by_length=True, length_column_name="size")
    assert example_lengths(trainer, Sized()) == list(reversed(Ragged().sizes))  # read from the column
    assert example_lengths(env.trainer(group_by_length=True), Sized()) == Ragged().sizes  # measured


class _Embedded(nn.Module):
    """A token model with input embeddings; keeps how far each training forward's embeddings are from the table's."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(12, 8)
        self.head = nn.Linear(8, 2)
        self.noise: list[float] = []

    def get_input_embeddings(self) -> nn.Module:
        return self.embed

    def forward(self, input_ids, labels=None):
        x = self.embed(input_ids)
        self.noise.append(float((x - self.embed.weight[input_ids]).abs().max().detach()))
        logits = self.head(x.mean(1))
        return {"loss": nn.functional.cross_entropy(logits, labels), "logits": logits}


class _Tokens(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 16

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": torch.arange(6) % 12, "labels": torch.tensor(i % 2)}


def c_neftune_noise_alpha(env: Env) -> None:
    def noise(alpha):
        model = _Embedded()
        Trainer(model=model, args=env.args(neftune_noise_alpha=alpha), train_dataset=_Tokens()).train()
        return model.noise

    assert max(noise(5.0)) > 0 and max(noise(None)) == 0  # 5 / sqrt(6 x 8) at most: noisy embeddings
    assert max(noise(5.0)) <= 5.0 / (6 * 8) ** 0.5 + 1e-6
    with pytest.raises(ValueError, match=r"neftune_noise_alpha=5\.0 needs a model with get_input_embeddings"):
        env.train(neftune_noise_alpha=5.0)
    with pytest.raises(ValueError, match="neftune_noise_alpha must be a positive number"):
        env.args(neftune_noise_alpha=0)


def c_optim_target_modules(env: Env) -> None:
    with pytest.raises(ValueError, match=r"optim_target_modules.*only read by the GaLore.*remove it"):
        env.args(optim_target_modules=["attn"])
    optimizer = optimizer_of(env, optim="galore_adamw", optim_target_modules=["linear"], optim_args="rank=1")
    assert [group.get("rank") for group in optimizer.param_groups] == [
        None,
        1,
    ]  # the linear weight is projected


def c_deepspeed(env: Env) -> None:
    import importlib.util

    assert importlib.util.find_spec("deepspeed") is None  # not installable here (no GPU build of torch)
    with pytest.raises(ImportError, match="pip install deepspeed"):
        env.args(deepspeed={"train_batch_size": 8})


def c_fsdp(env: Env) -> None:
    # Its effect (parameters sharded over 2 processes, exact resume) is shown by tests/trainer/test_fsdp.py, which
    # launches them; a process of its own has nothing to shard, and is refused before training.
    assert env.args(fsdp="shard_grad_op").fsdp == ["shard_grad_op"]
    with pytest.raises(ValueError, match="needs processes started by a launcher"):
        env.train(fsdp=True)


def c_fsdp_config(env: Env) -> None:
    # min_num_params, activation_checkpointing, sync_module_states, cpu_ram_efficient_loading and state_dict_type
    # act in tests/trainer/test_fsdp.py; FSDP1 switches and keys without fsdp are refused.
    assert (
        env.args(fsdp=True, fsdp_config={"fsdp_state_dict_type": "FULL_STATE_DICT"}).fsdp_config[
            "state_dict_type"
        ]
        == "FULL_STATE_DICT"
    )
    with pytest.raises(ValueError, match="fsdp_config must be empty while fsdp is off"):
        env.args(fsdp_config={"min_num_params": 10})
    with pytest.raises(ValueError, match="FSDP1 setting"):
        env.args(fsdp=True, fsdp_config={"forward_prefetch": True})


# --- transformers 4.x names: mapped onto their replacements with a FutureWarning (issue 35, item 7) ---
def parsed(env: Env, *cli: str) -> TrainingArguments:
    (args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses(
        ["--output_dir", str(env.tmp), *cli]
    )
    return args


def c_no_cuda(env: Env) -> None:
    with pytest.warns(FutureWarning, match="pass use_cpu=True"):
        trainer = env.trainer(no_cuda=True)
    assert trainer.args.use_cpu is True and trainer.accelerator.device.type == "cpu"
    assert trainer.args.no_cuda is False and trainer.args.replace(use_cpu=False).use_cpu is False  # consumed
    with pytest.warns(FutureWarning):
        assert parsed(env, "--no_cuda").use_cpu is True


def c_use_mps_device(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(
        ValueError, match=r"use_mps_device=True asks for Apple's MPS device.*remove use_mps_device"
    ):
        env.args(use_mps_device=True)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)  # a Mac: the default device already
    with pytest.warns(FutureWarning, match="use_mps_device=True is deprecated"):
        assert env.args(use_mps_device=True).use_mps_device is False


def c_per_gpu_train_batch_size(env: Env) -> None:
    with pytest.warns(FutureWarning, match="per_device_train_batch_size=4"):
        trainer = env.train(per_gpu_train_batch_size=4, max_steps=2)
    assert [c["batch"] for c in trainer.model.calls] == [4, 4]
    with pytest.warns(FutureWarning):
        assert parsed(env, "--per_gpu_train_batch_size", "2").per_device_train_batch_size == 2
    with pytest.raises(ValueError, match="per_gpu_train_batch_size"):
        env.args(per_gpu_train_batch_size=0)
    with pytest.warns(
        FutureWarning, match=r"it replaces per_device_train_batch_size=16"
    ):  # 4.x: the old name wins
        assert (
            env.args(per_gpu_train_batch_size=2, per_device_train_batch_size=16).per_device_train_batch_size
            == 2
        )


def c_per_gpu_eval_batch_size(env: Env) -> None:
    with pytest.warns(FutureWarning, match="per_device_eval_batch_size=5"):
        trainer = env.trainer(per_gpu_eval_batch_size=5)
    trainer.evaluate(Data(10))
    assert [c["batch"] for c in trainer.model.calls] == [5, 5]


def c_adafactor(env: Env) -> None:
    with pytest.warns(FutureWarning, match="pass optim='adafactor'"):
        args = env.args(adafactor=True)
    assert args.optim == "adafactor" and args.adafactor is False
    assert type(optimizer_of(env, optim=args.optim)).__name__ == "Adafactor"


def c_fsdp_min_num_params(env: Env) -> None:
    with pytest.warns(FutureWarning, match=r"fsdp_config=\{'min_num_params': 100\}"):
        args = env.args(fsdp="full_shard auto_wrap", fsdp_min_num_params=100)
    assert args.fsdp_config["min_num_params"] == 100 and args.fsdp_min_num_params == 0
    with (
        pytest.raises(ValueError, match="only applies with fsdp option 'auto_wrap'"),
        pytest.warns(FutureWarning),
    ):
        env.args(fsdp="full_shard", fsdp_min_num_params=100)
    with pytest.raises(ValueError, match="disagree"), pytest.warns(FutureWarning):
        env.args(fsdp="full_shard auto_wrap", fsdp_min_num_params=100, fsdp_config={"min_num_params": 5})


def c_fsdp_transformer_layer_cls_to_wrap(env: Env) -> None:
    with pytest.warns(FutureWarning, match="transformer_layer_cls_to_wrap"):
        args = parsed(
            env, "--fsdp", "full_shard auto_wrap", "--fsdp_transformer_layer_cls_to_wrap", "BertLayer,Block"
        )
    assert args.fsdp_config["transformer_layer_cls_to_wrap"] == ["BertLayer", "Block"]
    assert args.fsdp_transformer_layer_cls_to_wrap is None


def c_torchdynamo(env: Env) -> None:
    with pytest.warns(FutureWarning, match="pass torch_compile_backend='eager'"):
        trainer = env.trainer(torchdynamo="eager")
    assert trainer.args.torch_compile is True and trainer.args.torchdynamo is None
    assert trainer.accelerator.state.dynamo_plugin.backend.value == "EAGER"


# --- the Hub options (issue 35, item 2): inert without push_to_hub (refused), as transformers leaves them ---
def hub_option(field: str, value: Any, bad: Any) -> Callable[[Env], None]:
    def check(env: Env) -> None:
        args = env.args(**{field: value})
        shown = "<HUB_TOKEN>" if field == "hub_token" else value
        assert args.to_dict()[field] == shown and getattr(args, field) == value
        # Inert: the same run with and without it trains the same weights and writes the same files.
        torch.manual_seed(0)
        plain = env.train()
        torch.manual_seed(0)
        hub = Env(env.tmp / "hub").train(**{field: value})
        assert torch.equal(plain.model.linear.weight, hub.model.linear.weight)
        with pytest.raises(ValueError, match=field):
            env.args(**{field: bad})
        with pytest.raises(
            ValueError, match=r"push_to_hub=True is not supported.*hub_\* arguments are accepted"
        ):
            env.args(**{field: value}, push_to_hub=True)

    return check


def c_push_to_hub_token(env: Env) -> None:
    with pytest.warns(FutureWarning, match="pass hub_token"):
        args = env.args(push_to_hub_token="hf_secret")
    assert args.hub_token == "hf_secret" and args.push_to_hub_token is None
    assert "hf_secret" not in args.to_json_string() and "hf_secret" not in repr(args)


def c_push_to_hub_organization(env: Env) -> None:
    with pytest.warns(FutureWarning, match="pass hub_model_id"):
        assert env.args(push_to_hub_organization="org").hub_model_id == "org/out"


def c_push_to_hub_model_id(env: Env) -> None:
    with pytest.warns(FutureWarning):
        assert env.args(push_to_hub_model_id="m", push_to_hub_organization="org").hub_model_id == "org/m"
    with pytest.raises(ValueError, match=r"asks the Hub for your user name.*pass hub_model_id='<user>/m'"):
        env.args(push_to_hub_model_id="m")


CHECKS: dict[str, Callable[..., None]] = {
    "output_dir": c_output_dir,
    "overwrite_output_dir": script_flag("overwrite_output_dir", ["--overwrite_output_dir"], True),
    "eval_strategy": c_eval_strategy,
    "eval_steps": c_eval_steps,
    "eval_delay": c_eval_delay,
    "per_device_train_batch_size": c_train_batch,
    "per_device_eval_batch_size": c_eval_batch,
    "gradient_accumulation_steps": c_grad_accum,
    "eval_accumulation_steps": c_eval_accum,
    "learning_rate": c_learning_rate,
    "weight_decay": c_weight_decay,
    "adam_beta1": c_beta1,
    "adam_beta2": c_beta2,
    "adam_epsilon": c_epsilon,
    "max_grad_norm": c_max_grad_norm,
    "num_train_epochs": c_epochs,
    "max_steps": c_max_steps,
    "lr_scheduler_type": c_scheduler,
    "lr_scheduler_kwargs": c_scheduler_kwargs,
    "warmup_ratio": c_warmup_ratio,
    "warmup_steps": c_warmup_steps,
    "log_level": c_log_level,
    "logging_dir": c_logging_dir,
    "logging_strategy": c_logging_strategy,
    "logging_first_step": c_logging_first_step,
    "logging_steps": c_logging_steps,
    "logging_nan_inf_filter": c_nan_filter,
    "save_strategy": c_save_strategy,
    "save_steps": c_save_steps,
    "save_total_limit": c_save_total_limit,
    "save_only_model": c_save_only_model,
    "restore_callback_states_from_checkpoint": c_restore_callbacks,
    "use_cpu": c_use_cpu,
    "seed": c_seed,
    "data_seed": c_data_seed,
    "full_determinism": c_full_determinism,
    "mixed_precision": c_mixed_precision,
    "dataloader_num_workers": c_num_workers,
    "dataloader_drop_last": c_drop_last,
    "dataloader_pin_memory": c_pin_memory,
    "dataloader_persistent_workers": c_persistent_workers,
    "dataloader_prefetch_factor": c_prefetch,
    "remove_unused_columns": c_remove_unused,
    "label_names": c_label_names,
    "load_best_model_at_end": c_load_best,
    "metric_for_best_model": c_metric_for_best,
    "greater_is_better": c_greater_is_better,
    "prediction_loss_only": c_prediction_loss_only,
    "batch_eval_metrics": c_batch_eval_metrics,
    "optim": c_optim,
    "optim_args": c_optim_args,
    "report_to": c_report_to,
    "disable_tqdm": c_disable_tqdm,
    "run_name": c_run_name,
    "skip_memory_metrics": c_skip_memory,
    "include_num_input_tokens_seen": c_tokens_seen,
    "average_tokens_across_devices": c_average_tokens,
    "max_checkpoint_shard_size": c_shard_size,
    "save_on_each_node": c_save_on_each_node,
    "log_level_replica": c_log_level_replica,
    "log_on_each_node": c_log_on_each_node,
    "fp16": c_fp16,
    "bf16": c_bf16,
    "fp16_full_eval": c_fp16_full_eval,
    "bf16_full_eval": c_bf16_full_eval,
    "tf32": c_tf32,
    "half_precision_backend": c_half_precision_backend,
    "do_train": script_flag("do_train", ["--do_train"], True),
    "do_eval": c_do_eval,
    "do_predict": script_flag("do_predict", ["--do_predict", "true"], True),
    "resume_from_checkpoint": script_flag("resume_from_checkpoint", ["--resume_from_checkpoint", "ck"], "ck"),
    "evaluation_strategy": c_evaluation_strategy,
    "label_smoothing_factor": c_label_smoothing,
    "include_for_metrics": c_include_for_metrics,
    "include_inputs_for_metrics": c_include_inputs,
    "eval_do_concat_batches": c_concat_batches,
    "eval_use_gather_object": c_eval_use_gather_object,
    "torch_empty_cache_steps": c_torch_empty_cache_steps,
    "ignore_data_skip": c_ignore_data_skip,
    "past_index": c_past_index,
    "jit_mode_eval": refused("jit_mode_eval", True, "torch.jit"),
    "ddp_backend": c_ddp_backend,
    "ddp_timeout": c_ddp_timeout,
    "ddp_find_unused_parameters": c_find_unused,
    "ddp_bucket_cap_mb": c_bucket,
    "ddp_broadcast_buffers": c_broadcast,
    "accelerator_config": c_accelerator_config,
    "dispatch_batches": c_dispatch,
    "split_batches": c_split,
    "debug": c_debug,
    "include_tokens_per_second": c_tokens_per_second,
    "save_safetensors": refused("save_safetensors", False, "safetensors"),
    "push_to_hub": refused("push_to_hub", True, "does not push"),
    "gradient_checkpointing": c_gradient_checkpointing,
    "gradient_checkpointing_kwargs": c_gradient_checkpointing_kwargs,
    "activation_checkpointing": c_activation_checkpointing,
    "activation_checkpointing_kwargs": c_activation_checkpointing_kwargs,
    "eval_on_start": c_eval_on_start,
    "torch_compile": c_torch_compile,
    "auto_find_batch_size": c_auto_find_batch_size,
    "group_by_length": c_group_by_length,
    "train_sampling_strategy": c_train_sampling_strategy,
    "dataloader_multiprocessing_context": c_multiprocessing_context,
    "dataloader_in_order": c_in_order,
    "ddp_static_graph": c_static_graph,
    "use_cache": c_use_cache,
    "local_rank": script_flag("local_rank", ["--local_rank", "2"], 2),
    "length_column_name": c_length_column_name,
    "torch_compile_backend": c_torch_compile_backend,
    "torch_compile_mode": c_torch_compile_mode,
    "neftune_noise_alpha": c_neftune_noise_alpha,
    "optim_target_modules": c_optim_target_modules,
    "deepspeed": c_deepspeed,
    "fsdp": c_fsdp,
    "fsdp_config": c_fsdp_config,
    "no_cuda": c_no_cuda,
    "use_mps_device": c_use_mps_device,
    "per_gpu_train_batch_size": c_per_gpu_train_batch_size,
    "per_gpu_eval_batch_size": c_per_gpu_eval_batch_size,
    "adafactor": c_adafactor,
    "fsdp_min_num_params": c_fsdp_min_num_params,
    "fsdp_transformer_layer_cls_to_wrap": c_fsdp_transformer_layer_cls_to_wrap,
    "torchdynamo": c_torchdynamo,
    "push_to_hub_model_id": c_push_to_hub_model_id,
    "push_to_hub_organization": c_push_to_hub_organization,
    "push_to_hub_token": c_push_to_hub_token,
    "hub_model_id": hub_option("hub_model_id", "me/model", ""),
    "hub_strategy": hub_option("hub_strategy", "end", "sometimes"),
    "hub_token": hub_option("hub_token", "hf_secret", 3),
    "hub_private_repo": hub_option("hub_private_repo", True, "maybe"),
    "hub_always_push": hub_option("hub_always_push", True, "maybe"),
    "hub_revision": hub_option("hub_revision", "main", ""),
}

FIELDS = [f.name for f in dataclasses.fields(TrainingArguments) if f.init and not f.name.startswith("_")]


def test_every_field_has_a_check():
    assert sorted(set(FIELDS) - set(CHECKS)) == [], "a TrainingArguments field without a check in CHECKS"
    assert sorted(set(CHECKS) - set(FIELDS)) == []


# Slow, not multiprocess: all of it runs in this process (importing mlflow runs `uname -p`, a GPU said present
# `nvidia-smi`, helper commands that need no test of their own).
@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.slow
def test_field_has_an_effect_or_is_refused(field, tmp_path, monkeypatch):
    check = CHECKS[field]
    env = Env(tmp_path)
    if "monkeypatch" in check.__code__.co_varnames[: check.__code__.co_argcount]:
        check(env, monkeypatch)
    else:
        check(env)
