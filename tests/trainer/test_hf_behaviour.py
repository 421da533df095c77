"""Where this trainer used to behave unlike transformers' Trainer, it now behaves the same (issue 15, group 2)."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import Dataset, IterableDataset

from trainer import EarlyStoppingCallback, Trainer, TrainerCallback, TrainerControl, TrainerState


class Data(Dataset):
    def __init__(self, n: int = 32) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 4, generator=g)
        self.y = self.x.sum(-1)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict:
        return {"x": self.x[i], "labels": self.y[i]}


class Stream(IterableDataset):
    """No __len__: an unsized iterable dataset."""

    def __iter__(self):
        data = Data(10)
        return (data[i] for i in range(len(data)))


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 1)

    def forward(self, x, labels=None):
        preds = self.linear(x).squeeze(-1)
        out = {"preds": preds}
        if labels is not None:
            out["loss"] = nn.functional.mse_loss(preds, labels)
        return out


def steps_with(trainer: Trainer, key: str) -> list[int]:
    return [h["step"] for h in trainer.state.log_history if key in h]


def test_evaluates_and_saves_at_the_last_step_off_the_interval(make_args, tmp_path):
    args = make_args(max_steps=5, per_device_train_batch_size=8, eval_strategy="steps", eval_steps=2,
                     save_strategy="steps", save_steps=2)  # fmt: skip
    trainer = Trainer(model=Model(), args=args, train_dataset=Data(), eval_dataset=Data(8))
    trainer.train()
    assert steps_with(trainer, "eval_loss") == [2, 4, 5]
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if p.name.startswith("checkpoint")) == [
        "checkpoint-2",
        "checkpoint-4",
        "checkpoint-5",
    ]
    trainer = Trainer(
        model=Model(), args=args.replace(max_steps=4), train_dataset=Data(), eval_dataset=Data(8)
    )
    trainer.train()
    assert steps_with(trainer, "eval_loss") == [
        2,
        4,
    ]  # no second evaluation when the last step is on the interval


def test_best_checkpoint_found_by_an_epoch_evaluation_after_that_steps_save(make_args, tmp_path):
    # 4 steps an epoch; saved every 2 steps, evaluated every epoch: each evaluation comes after its step's save.
    args = make_args(num_train_epochs=3, per_device_train_batch_size=8, eval_strategy="epoch", save_strategy="steps",
                     save_steps=2, metric_for_best_model="loss", learning_rate=0.05)  # fmt: skip
    trainer = Trainer(model=Model(), args=args, train_dataset=Data(), eval_dataset=Data(8))
    trainer.train()
    best_step = trainer.state.best_global_step
    assert best_step in (4, 8, 12)
    assert trainer.state.best_model_checkpoint == str(tmp_path / "out" / f"checkpoint-{best_step}")


@pytest.mark.parametrize("disable_tqdm", [False, True])
def test_evaluate_and_predict_on_an_unsized_iterable_dataset_with_progress_bars(make_args, disable_tqdm):
    trainer = Trainer(model=Model(), args=make_args(disable_tqdm=disable_tqdm, per_device_eval_batch_size=4))
    assert "eval_loss" in trainer.evaluate(Stream())
    assert trainer.predict(Stream()).predictions.shape == (10,)


def test_predict_with_batch_eval_metrics_returns_predictions_and_labels(make_args):
    calls = []

    def metrics(pred, compute_result=False):
        calls.append(compute_result)
        return {"batches": float(len(calls))}

    args = make_args(batch_eval_metrics=True, per_device_eval_batch_size=4)
    out = Trainer(model=Model(), args=args, compute_metrics=metrics).predict(Data(10))
    assert out.predictions.shape == (10,) and np.allclose(out.label_ids, Data(10).y.numpy())
    assert calls == [False, False, True] and out.metrics["test_batches"] == 3.0


def test_resume_rebuilds_callbacks_with_their_saved_arguments_and_warns(make_args, caplog):
    args = make_args(max_steps=4, per_device_train_batch_size=8, eval_strategy="steps", eval_steps=2,
                     save_strategy="steps", save_steps=2, metric_for_best_model="loss",
                     restore_callback_states_from_checkpoint=True)  # fmt: skip
    first = Trainer(
        model=Model(),
        args=args,
        train_dataset=Data(),
        eval_dataset=Data(8),
        callbacks=[EarlyStoppingCallback(early_stopping_patience=5, early_stopping_threshold=0.01)],
    )
    first.train()
    checkpoint = f"{args.output_dir}/checkpoint-2"

    resumed = Trainer(
        model=Model(),
        args=args.replace(max_steps=6),
        train_dataset=Data(),
        eval_dataset=Data(8),
        callbacks=[EarlyStoppingCallback()],
    )
    resumed.train(resume_from_checkpoint=checkpoint)
    (early,) = [cb for cb in resumed.callback_handler.callbacks if isinstance(cb, EarlyStoppingCallback)]
    assert (early.early_stopping_patience, early.early_stopping_threshold) == (5, 0.01)

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="trainer"):
        other = Trainer(model=Model(), args=args.replace(save_steps=4, eval_steps=4, per_device_train_batch_size=4,
                                                         max_steps=6),
                        train_dataset=Data(), eval_dataset=Data(8))  # fmt: skip
        other.train(resume_from_checkpoint=checkpoint)
    text = caplog.text
    assert (
        "Checkpoint included callbacks not included in current configuration (EarlyStoppingCallback)" in text
    )
    assert "save_steps: 4 (from args) != 2 (from trainer_state.json)" in text
    assert "eval_steps: 4 (from args) != 2 (from trainer_state.json)" in text
    assert "per_device_train_batch_size: 4 (from args) != 8 (from trainer_state.json)" in text


def test_load_callback_state_restores_the_control_switches_of_a_loaded_state(make_args):
    # transformers' tests load a checkpoint's trainer_state.json into trainer.state and call _load_callback_state.
    args = make_args(max_steps=2, per_device_train_batch_size=8, save_strategy="steps", save_steps=2)
    Trainer(model=Model(), args=args, train_dataset=Data()).train()
    trainer = Trainer(
        model=Model(), args=args.replace(restore_callback_states_from_checkpoint=True), train_dataset=Data()
    )
    trainer.state = TrainerState.load_from_json(f"{args.output_dir}/checkpoint-2/trainer_state.json")
    assert not trainer.control.should_training_stop
    trainer._load_callback_state()
    assert trainer.control.should_training_stop  # saved at the last step, when training was stopping


def test_early_stopping_threshold_compares_with_state_best_metric(make_args):
    args = make_args(eval_strategy="steps", eval_steps=1, metric_for_best_model="loss")
    early = EarlyStoppingCallback(early_stopping_patience=3, early_stopping_threshold=0.1)
    state, control = TrainerState(best_metric=1.0), TrainerControl()
    early.on_evaluate(args, state, control, metrics={"eval_loss": 0.95})  # better, but by less than 0.1
    assert early.early_stopping_patience_counter == 1
    state.best_metric = 0.95  # what the trainer records after on_evaluate
    # 0.12 better than the first value, but only 0.07 better than the best so far: still no improvement.
    early.on_evaluate(args, state, control, metrics={"eval_loss": 0.88})
    assert early.early_stopping_patience_counter == 2
    state.best_metric = 0.88
    early.on_evaluate(args, state, control, metrics={"eval_loss": 0.7})
    assert early.early_stopping_patience_counter == 0


def test_early_stopping_in_training_sees_the_best_before_the_evaluation(make_args):
    class Flat(Model):
        def forward(self, x, labels=None):
            out = super().forward(x, labels)
            if labels is not None:
                out["loss"] = out["loss"] * 0 + 1.0  # the same eval loss every time: never an improvement
            return out

    args = make_args(max_steps=20, per_device_train_batch_size=8, eval_strategy="steps", eval_steps=1,
                     metric_for_best_model="loss")  # fmt: skip
    trainer = Trainer(
        model=Flat(),
        args=args,
        train_dataset=Data(),
        eval_dataset=Data(8),
        callbacks=[EarlyStoppingCallback(early_stopping_patience=2)],
    )
    trainer.train()
    assert trainer.state.global_step == 3  # first evaluation sets the best, two more without improvement


class ClassLabelData(Data):
    def __getitem__(self, i: int) -> dict:
        return {"x": self.x[i], "class_label": self.y[i]}


class ClassLabelModel(Model):
    def forward(self, x, class_label=None):
        return super().forward(x, class_label)


class PositionsModel(nn.Module):
    def forward(self, x, start_positions=None, end_positions=None, label_mask=None):
        return {"preds": x}


class TinyQuestionAnswering(PositionsModel):
    pass


class KwargsModel(nn.Module):
    def forward(self, **kwargs):
        return {"preds": kwargs["x"]}


def test_label_names_default_to_forwards_parameters_named_like_labels(make_args):
    def metrics(pred):
        return {"examples": float(len(pred.label_ids))}

    trainer = Trainer(model=ClassLabelModel(), args=make_args(), compute_metrics=metrics)
    assert trainer.label_names == ["class_label"]
    out = trainer.evaluate(ClassLabelData(8))
    assert out["eval_examples"] == 8.0 and np.isfinite(out["eval_loss"])
    # Positions are labels only for a question-answering class, as transformers' find_labels says; forward's order.
    assert Trainer(model=PositionsModel(), args=make_args()).label_names == ["label_mask"]
    assert Trainer(model=TinyQuestionAnswering(), args=make_args()).label_names == [
        "start_positions", "end_positions", "label_mask"
    ]  # fmt: skip
    assert Trainer(model=KwargsModel(), args=make_args()).label_names == ["labels"]  # see README, differences


def test_without_label_names_predictions_keep_the_models_loss(make_args):
    class Unlabelled(Model):
        def forward(self, x):
            preds = self.linear(x).squeeze(-1)
            return {"loss": preds.mean(), "preds": preds}

    trainer = Trainer(model=Unlabelled(), args=make_args(per_device_eval_batch_size=8))
    assert trainer.label_names == []
    out = trainer.predict(Data(8))  # the batch has a "labels" key, which forward does not take: not a label
    loss, preds = out.predictions
    assert out.label_ids is None and "test_loss" not in out.metrics
    assert preds.shape == (8,) and np.isclose(loss, preds.mean(), atol=1e-6)


class EpochFormatter(TrainerCallback):
    """Formats state.epoch as a callback written for transformers may (None would not format)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_train_begin(self, args, state, control, **kwargs):
        self.seen.append(f"train_begin {state.epoch:.1f}")

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.seen.append(f"epoch_begin {state.epoch:.1f}")


def test_state_epoch_is_0_from_the_start_of_training_and_restored_on_resume(make_args):
    args = make_args(num_train_epochs=2, per_device_train_batch_size=8, save_strategy="steps", save_steps=2)
    assert Trainer(model=Model(), args=args).state.epoch == 0  # TrainerState's default, as in transformers 5
    first = EpochFormatter()
    Trainer(model=Model(), args=args, train_dataset=Data(), callbacks=[first]).train()
    assert first.seen == ["train_begin 0.0", "epoch_begin 0.0", "epoch_begin 1.0"]
    resumed = EpochFormatter()
    trainer = Trainer(model=Model(), args=args, train_dataset=Data(), callbacks=[resumed])
    trainer.train(resume_from_checkpoint=f"{args.output_dir}/checkpoint-6")
    assert resumed.seen == ["train_begin 1.5", "epoch_begin 1.5"]


class LastLogKeys(TrainerCallback):
    def __init__(self) -> None:
        self.keys: set[str] = set()

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.keys = set(logs)


@pytest.mark.parametrize("disable_tqdm", [True, False])
def test_total_flos_is_taken_out_of_the_logs_by_the_printer_callback_only(make_args, disable_tqdm):
    before, after = LastLogKeys(), LastLogKeys()
    args = make_args(max_steps=2, per_device_train_batch_size=8, disable_tqdm=disable_tqdm)
    trainer = Trainer(model=Model(), args=args, train_dataset=Data(), callbacks=[before])
    trainer.add_callback(after)  # after the printer or progress callback
    out = trainer.train()
    # transformers' PrinterCallback pops it from the dict it is given (the returned metrics); ProgressCallback copies.
    assert ("total_flos" in out.metrics) is not disable_tqdm
    assert ("total_flos" in after.keys) is not disable_tqdm
    assert (
        "total_flos" in before.keys
        and trainer.state.log_history[-1]["total_flos"] == trainer.state.total_flos
    )


def test_evaluations_report_the_model_preparation_of_an_evaluation_before_training(make_args):
    args = make_args(max_steps=2, per_device_train_batch_size=8, eval_strategy="steps", eval_steps=1)
    trained_first = Trainer(model=Model(), args=args, train_dataset=Data(), eval_dataset=Data(8))
    trained_first.train()
    assert not any("eval_model_preparation_time" in h for h in trained_first.state.log_history)
    assert "eval_model_preparation_time" not in trained_first.evaluate()
    assert not hasattr(trained_first, "model_preparation_time")

    # The first prediction prepares the model and records the seconds; every later evaluation reports them.
    trainer = Trainer(model=Model(), args=args, train_dataset=Data(), eval_dataset=Data(8))
    seconds = trainer.predict(Data(8)).metrics["test_model_preparation_time"]
    assert seconds == trainer.model_preparation_time >= 0
    assert trainer.evaluate()["eval_model_preparation_time"] == seconds
    trainer.train()
    logged = [h["eval_model_preparation_time"] for h in trainer.state.log_history if "eval_loss" in h]
    assert logged == [seconds, seconds]


class Seen(Model):
    """Keeps the batches of the current accumulation window."""

    def __init__(self) -> None:
        super().__init__()
        self.window: list[tuple[torch.Tensor, torch.Tensor]] = []

    def forward(self, x, labels=None):
        if self.training:
            self.window.append((x.detach().clone(), labels.detach().clone()))
        return super().forward(x, labels)


class WindowCheck(TrainerCallback):
    """At each optimizer step: the gradient is the mean of the window's micro-batch gradients (transformers'
    division by the window's own size), and the window's mean loss, which the step logs."""

    def __init__(self) -> None:
        self.windows: list[int] = []
        self.mean_losses: list[float] = []

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        weight = model.linear.weight.detach().clone().requires_grad_()
        bias = model.linear.bias.detach().clone()
        losses = [nn.functional.mse_loss((x @ weight.T + bias).squeeze(-1), y) for x, y in model.window]
        mean = torch.stack(losses).mean()
        mean.backward()
        torch.testing.assert_close(model.linear.weight.grad, weight.grad)
        self.windows.append(len(model.window))
        self.mean_losses.append(mean.detach().item())
        model.window.clear()


@pytest.mark.parametrize("through_accelerate", [False, True])
def test_an_epochs_last_short_accumulation_window_is_averaged_over_its_own_batches(
    make_args, monkeypatch, through_accelerate
):
    if through_accelerate:  # accelerate's loader, accumulate() and backward() instead of the loop's own
        from trainer import _data, _loop

        monkeypatch.setattr(_data, "accelerate_only_forwards", lambda accelerator: False)
        monkeypatch.setattr(_loop, "accelerate_only_forwards", lambda accelerator: False)
    check = WindowCheck()
    # 20 examples in batches of 3: 7 batches an epoch, windows of 3, 3 and 1.
    args = make_args(num_train_epochs=2, per_device_train_batch_size=3, gradient_accumulation_steps=3,
                     logging_steps=1, max_grad_norm=0, learning_rate=0.05, optim="sgd")  # fmt: skip
    trainer = Trainer(model=Seen(), args=args, train_dataset=Data(20), callbacks=[check])
    trainer.train()
    assert trainer._plain_backward is not through_accelerate
    assert check.windows == [3, 3, 1, 3, 3, 1]
    assert trainer.current_gradient_accumulation_steps == 1
    logged = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert logged == pytest.approx(check.mean_losses, abs=1e-4)


@pytest.mark.slow
def test_a_trainer_given_no_arguments_writes_to_tmp_trainer_and_push_to_hub_is_refused_with_the_fix(
    monkeypatch, tmp_path
):
    import transformers

    monkeypatch.chdir(tmp_path)
    ours = Trainer(model=Model())
    theirs = transformers.Trainer(model=Model())
    assert ours.args.output_dir == theirs.args.output_dir == "tmp_trainer"
    with pytest.raises(
        NotImplementedError,
        match=r"does not push to the Hugging Face Hub; save the model with "
        r"trainer\.save_model",
    ):
        ours.push_to_hub("End of training")


def test_compute_loss_func_and_optimizer_cls_and_kwargs_as_transformers_takes_them(make_args):
    seen = []

    def doubled_mse(outputs, labels, num_items_in_batch=None):
        seen.append(num_items_in_batch)
        return 2 * nn.functional.mse_loss(outputs["preds"], labels)

    args = make_args(max_steps=2, per_device_train_batch_size=8, per_device_eval_batch_size=8)
    plain = Trainer(model=Model(), args=args, eval_dataset=Data(8))
    trainer = Trainer(
        model=Model(),
        args=args,
        train_dataset=Data(),
        eval_dataset=Data(8),
        compute_loss_func=doubled_mse,
        optimizer_cls_and_kwargs=(torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}),
    )
    trainer.model.load_state_dict(plain.model.state_dict())
    assert trainer.evaluate()["eval_loss"] == pytest.approx(2 * plain.evaluate()["eval_loss"])
    assert seen == [None]  # one evaluation batch; no token count is passed (README, num_items_in_batch)
    trainer.train()
    assert len(seen) == 3
    optimizer = trainer.optimizer.optimizer if hasattr(trainer.optimizer, "optimizer") else trainer.optimizer
    assert isinstance(optimizer, torch.optim.SGD)
    assert [g["momentum"] for g in optimizer.param_groups] == [
        0.9,
        0.9,
    ]  # both decay groups, the given kwargs
    assert optimizer.param_groups[0]["initial_lr"] == 0.1
    with pytest.raises(RuntimeError, match="incompatible"):
        Trainer(
            model=Model(),
            args=args,
            optimizers=(torch.optim.SGD(Model().parameters(), lr=0.1), None),
            optimizer_cls_and_kwargs=(torch.optim.SGD, {"lr": 0.1}),
        )


class _OutOfMemoryFrom16(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.train_batch_size >= 16:
            raise RuntimeError("CUDA out of memory.")


@pytest.mark.slow
def test_a_resumed_auto_find_batch_size_run_goes_on_with_the_batch_size_it_found(make_args):
    args = make_args(
        max_steps=2,
        save_strategy="steps",
        save_steps=1,
        per_device_train_batch_size=16,
        auto_find_batch_size=True,
    )
    first = Trainer(model=Model(), args=args, train_dataset=Data(), callbacks=[_OutOfMemoryFrom16()])
    first.train()
    assert first._train_batch_size == 8  # transformers' attribute, lowered by the search
    resumed = Trainer(model=Model(), args=args, train_dataset=Data())
    assert resumed._train_batch_size == 16
    resumed.train(resume_from_checkpoint=True)
    assert resumed._train_batch_size == resumed.args.per_device_train_batch_size == 8
    # Without auto_find_batch_size the arguments' batch size is kept, as in transformers.
    plain = Trainer(
        model=Model(),
        args=args.replace(auto_find_batch_size=False, per_device_train_batch_size=4, max_steps=3),
        train_dataset=Data(),
    )
    plain.train(resume_from_checkpoint=f"{args.output_dir}/checkpoint-1")
    assert plain._train_batch_size == 4


class _SeesInTrain(TrainerCallback):
    def __init__(self) -> None:
        self.seen: list[bool] = []

    def on_step_end(self, args, state, control, model=None, **kwargs):
        self.seen.append(self.trainer.is_in_train)


def test_is_in_train_and_get_total_train_batch_size_as_transformers(make_args):
    args = make_args(max_steps=2, per_device_train_batch_size=4, gradient_accumulation_steps=3)
    watcher = _SeesInTrain()
    trainer = Trainer(model=Model(), args=args, train_dataset=Data(), callbacks=[watcher])
    watcher.trainer = trainer
    assert trainer.get_total_train_batch_size(args) == 4 * 3 * args.world_size
    assert trainer.is_in_train is False
    trainer.train()
    assert watcher.seen == [True, True] and trainer.is_in_train is False


def test_save_model_takes_transformers_internal_call_flag(make_args, tmp_path):
    trainer = Trainer(model=Model(), args=make_args())
    trainer.save_model(str(tmp_path / "a"), _internal_call=True)  # as TRL's trainers call it
    assert (tmp_path / "a" / "model.safetensors").is_file()


@pytest.mark.multiprocess
def test_with_persistent_workers_an_eval_loader_is_built_once_per_dataset(make_args):
    # As transformers: each new loader would start another set of worker processes.
    first, second = Data(8), Data(8)
    args = make_args(dataloader_num_workers=1, dataloader_persistent_workers=True)
    trainer = Trainer(model=Model(), args=args, eval_dataset={"first": first, "second": second})
    loader = trainer.get_eval_dataloader("first")
    assert trainer.get_eval_dataloader("first") is loader and trainer.get_eval_dataloader(first) is loader
    assert trainer.get_eval_dataloader("second") is not loader
    trainer.evaluate("first")
    assert trainer.get_eval_dataloader("first") is loader
    plain = Trainer(model=Model(), args=args.replace(dataloader_persistent_workers=False), eval_dataset=first)
    assert plain.get_eval_dataloader() is not plain.get_eval_dataloader()
    trainer.release_memory()
    assert trainer._persistent_eval_loaders is None


def test_label_smoothing_is_off_for_a_multi_label_classifier_with_transformers_warning(make_args):
    class MultiLabel(Model):
        def __init__(self) -> None:
            super().__init__()
            self.config = type("Config", (), {"problem_type": "multi_label_classification"})()

    args = make_args(label_smoothing_factor=0.1)
    with pytest.warns(UserWarning, match="Label smoothing is not compatible with multi-label classification"):
        trainer = Trainer(model=MultiLabel(), args=args)
    assert trainer.label_smoother is None  # the model's own loss is used
    assert Trainer(model=Model(), args=args).label_smoother is not None
    assert Trainer(model=Model(), args=make_args()).label_smoother is None


def test_a_trainer_that_cannot_be_built_raises_what_transformers_raises_too(tmp_path):
    # transformers raises RuntimeError for no model at all and for optimizers beside a model_init; ours is a
    # ValueError (as before) that is also a RuntimeError, so tests written against either see it.
    from trainer import TrainingArguments

    args = TrainingArguments(str(tmp_path), report_to="none")
    with pytest.raises(RuntimeError, match="model or a model_init"):
        Trainer(args=args)
    model = nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(RuntimeError, match="optimizers together with model_init"):
        Trainer(model_init=lambda: nn.Linear(2, 2), args=args, optimizers=(optimizer, None))
    with pytest.raises(ValueError, match="optimizers together with model_init"):
        Trainer(model_init=lambda: nn.Linear(2, 2), args=args, optimizers=(optimizer, None))
