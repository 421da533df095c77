"""The Trainer end to end on small tasks: accuracy, step counts, model_init, model shapes, evaluation, logging."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import Dataset, IterableDataset, Subset

from tests._digits import DigitsMLP, accuracy, digits_datasets
from trainer import (
    EvalPrediction,
    PredictionOutput,
    Trainer,
    TrainerCallback,
    TrainOutput,
    default_data_collator,
    enable_full_determinism,
    set_seed,
)

_ROOT = str(Path(__file__).resolve().parents[2])


# ------------------------------------------------------------------ small tasks
class ToyDataset(Dataset):
    """``n`` examples of y = 2x + 1 (+ an extra key the model does not take, when asked)."""

    def __init__(self, n: int, extra_key: bool = False) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 4, generator=g)
        self.y = self.x.sum(-1) * 2 + 1
        self.extra_key = extra_key

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict:
        item = {"x": self.x[i], "labels": self.y[i]}
        if self.extra_key:
            item["idx"] = i
        return item


class ToyIterable(IterableDataset):
    def __init__(self, n: int) -> None:
        self.data = ToyDataset(n)

    def __iter__(self):
        return (self.data[i] for i in range(len(self.data)))


class DictModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 1)

    def forward(self, x, labels=None):
        preds = self.linear(x).squeeze(-1)
        out = {"preds": preds}
        if labels is not None:
            out["loss"] = nn.functional.mse_loss(preds, labels)
        return out


class TupleModel(DictModel):
    def forward(self, x, labels=None):
        preds = self.linear(x).squeeze(-1)
        if labels is None:
            return (preds,)
        return nn.functional.mse_loss(preds, labels), preds


class TargetModel(DictModel):
    """Labels under a custom name, declared with label_names=["target"]."""

    def forward(self, x, target=None):
        preds = self.linear(x).squeeze(-1)
        return (
            {"loss": nn.functional.mse_loss(preds, target), "preds": preds}
            if target is not None
            else {"preds": preds}
        )


class CountSteps(TrainerCallback):
    def __init__(self) -> None:
        self.optimizer_steps = 0

    def on_optimizer_step(self, args, state, control, **kwargs):
        self.optimizer_steps += 1


def _small_digits(n_train: int, n_eval: int = 16):
    train, val = digits_datasets()
    return Subset(train, range(n_train)), Subset(val, range(n_eval))


# ------------------------------------------------------------------ learning
def test_digits_mlp_reaches_95_percent(make_args):
    train, val = digits_datasets()
    args = make_args(
        per_device_train_batch_size=64,
        per_device_eval_batch_size=128,
        learning_rate=2e-2,
        num_train_epochs=4,
        lr_scheduler_type="linear",
        logging_steps=10,
        eval_strategy="epoch",
        seed=0,
    )
    trainer = Trainer(
        model_init=lambda: DigitsMLP(hidden=64), args=args, train_dataset=train, eval_dataset=val,
        compute_metrics=accuracy,
    )  # fmt: skip
    out = trainer.train()
    assert isinstance(out, TrainOutput)
    metrics = trainer.evaluate()
    assert metrics["eval_accuracy"] >= 0.95, metrics
    accuracies = [h["eval_accuracy"] for h in trainer.state.log_history if "eval_accuracy" in h]
    assert len(accuracies) == 5  # one per epoch plus the final evaluate()
    assert out.training_loss < 1.0


# ------------------------------------------------------------------ step counts
@pytest.mark.parametrize(
    ("n", "bs", "accum", "epochs"),
    [(12, 2, 2, 1), (13, 2, 2, 2), (10, 3, 1, 3), (10, 4, 3, 2), (7, 2, 3, 1), (5, 8, 1, 2), (9, 2, 4, 3)],
)
def test_optimizer_steps_per_epoch(make_args, n, bs, accum, epochs):
    counter = CountSteps()
    args = make_args(
        per_device_train_batch_size=bs, gradient_accumulation_steps=accum, num_train_epochs=epochs
    )
    trainer = Trainer(model=DictModel(), args=args, train_dataset=ToyDataset(n), callbacks=[counter])
    out = trainer.train()
    expected = math.ceil(n / (bs * accum)) * epochs
    assert out.global_step == expected
    assert counter.optimizer_steps == expected
    assert trainer.state.max_steps == expected
    assert trainer.state.epoch == pytest.approx(epochs)


def test_max_steps_overrides_epochs(make_args):
    counter = CountSteps()
    args = make_args(
        per_device_train_batch_size=2, gradient_accumulation_steps=2, num_train_epochs=1, max_steps=7
    )
    trainer = Trainer(model=DictModel(), args=args, train_dataset=ToyDataset(12), callbacks=[counter])
    assert trainer.train().global_step == 7  # 3 steps per epoch: runs into a third epoch
    assert counter.optimizer_steps == 7
    assert trainer.state.epoch == pytest.approx(2 + 1 / 3)


@pytest.mark.parametrize(("epochs", "expected"), [(1.5, 5), (0.5, 2), (2.25, 7)])
def test_fractional_epochs(make_args, epochs, expected):
    counter = CountSteps()
    args = make_args(per_device_train_batch_size=4, num_train_epochs=epochs)  # 3 steps per epoch
    trainer = Trainer(model=DictModel(), args=args, train_dataset=ToyDataset(12), callbacks=[counter])
    assert trainer.train().global_step == expected == math.ceil(epochs * 3)
    assert counter.optimizer_steps == expected


# ------------------------------------------------------------------ model_init & optimizers
def test_model_init_without_and_with_trial(make_args):
    seen = []

    def init_with_trial(trial):
        seen.append(trial)
        return DictModel()

    trainer = Trainer(model_init=init_with_trial, args=make_args(max_steps=2), train_dataset=ToyDataset(8))
    assert seen == [None]  # outside a search
    trial = types.SimpleNamespace(params={"learning_rate": 1e-3}, name="trial-7")
    trainer.train(trial=trial)
    assert seen == [None, trial]
    assert trainer.state.trial_name == "trial-7"
    assert trainer.state.trial_params == {"learning_rate": 1e-3}
    assert trainer.state.is_hyper_param_search

    calls = []
    trainer = Trainer(
        model_init=lambda: calls.append(1) or DictModel(),
        args=make_args(max_steps=2),
        train_dataset=ToyDataset(8),
    )
    trainer.train()
    assert len(calls) == 2


def test_model_init_with_two_required_arguments_is_rejected(make_args):
    with pytest.raises(ValueError, match="model_init"):
        Trainer(model_init=lambda a, b: DictModel(), args=make_args())


def test_model_init_with_a_required_keyword_only_trial_is_rejected(make_args):
    def model_init(*, trial):
        return DictModel()

    with pytest.raises(ValueError, match=r"model_init.*'trial' is keyword-only.*def model_init\(trial\)"):
        Trainer(model_init=model_init, args=make_args())


def test_model_init_set_after_construction_is_called_as_it_is_declared(make_args):
    """transformers reads model_init's parameters at each call: a model_init assigned later is called right."""
    seen = []

    def init_with_trial(trial):
        seen.append(trial)
        return DictModel()

    trainer = Trainer(model_init=DictModel, args=make_args(max_steps=2), train_dataset=ToyDataset(8))
    trainer.model_init = init_with_trial
    assert trainer.model_init is init_with_trial and trainer.model_init_takes_trial
    trial = types.SimpleNamespace(params={}, name="trial-1")
    trainer.train(trial=trial)
    assert seen == [trial]

    trainer.model_init = DictModel  # and back to one that takes nothing
    assert not trainer.model_init_takes_trial
    trainer.train(trial=trial)
    with pytest.raises(ValueError, match="model_init must take zero arguments or one"):
        trainer.model_init = lambda a, b: DictModel()
    with pytest.raises(TypeError, match="model_init must be callable"):
        trainer.model_init = "DictModel"


def test_a_model_init_returning_a_model_an_earlier_run_trained_is_named(make_args, recwarn):
    """Outside a search, train() again with a model_init that returns the same object continues from the weights the
    earlier run trained, as in transformers, and says so (a search refuses it: test_search_faults); resuming from a
    checkpoint, whose weights replace them, says nothing."""
    shared = DictModel()
    trainer = Trainer(model_init=lambda: shared, args=make_args(max_steps=2, save_strategy="steps", save_steps=2),
                      train_dataset=ToyDataset(8))  # fmt: skip
    trainer.train()  # the object built at construction has not trained yet: the first run takes it
    assert not [w for w in recwarn if "earlier run trained" in str(w.message)]
    with pytest.warns(
        UserWarning, match=r"model_init returned the model object an earlier run trained.*inside"
    ):
        trainer.train()
    recwarn.clear()
    trainer.train(resume_from_checkpoint=True)
    assert not [w for w in recwarn if "earlier run trained" in str(w.message)]


def test_model_init_and_optimizers_is_an_error(make_args):
    model = DictModel()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="model_init"):
        Trainer(model_init=DictModel, args=make_args(), optimizers=(opt, None))


def test_each_train_with_model_init_starts_from_a_fresh_model(make_args):
    args = make_args(per_device_train_batch_size=4, num_train_epochs=2, learning_rate=0.05)
    trainer = Trainer(model_init=DictModel, args=args, train_dataset=ToyDataset(32))
    first = trainer.train()
    first_model = trainer.model
    first_weights = [p.detach().clone() for p in first_model.parameters()]
    second = trainer.train()
    assert trainer.model is not first_model
    # Same seed, fresh model: the second run repeats the first exactly instead of continuing it.
    assert second.training_loss == first.training_loss
    assert all(torch.equal(a, b) for a, b in zip(first_weights, trainer.model.parameters()))


def test_custom_optimizer_and_scheduler(make_args):
    model = DictModel()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    trainer = Trainer(
        model=model, args=make_args(max_steps=3), train_dataset=ToyDataset(16), optimizers=(opt, sched)
    )
    trainer.train()
    assert trainer.optimizer is opt and trainer.lr_scheduler is sched
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1 * 0.5**3)


def test_train_twice_with_a_model_restarts_the_schedule(make_args):
    lrs = []

    class RecordLR(TrainerCallback):
        def on_step_begin(self, args, state, control, optimizer=None, **kwargs):
            lrs.append(optimizer.param_groups[0]["lr"])

    args = make_args(max_steps=3, learning_rate=1e-3)
    trainer = Trainer(model=DictModel(), args=args, train_dataset=ToyDataset(16), callbacks=[RecordLR])
    trainer.train()
    trainer.train()  # a linear schedule we built ended at 0: the second run must not train at lr=0
    assert lrs[:3] == lrs[3:] == pytest.approx([1e-3, 2e-3 / 3, 1e-3 / 3])


def test_default_optimizer_skips_decay_on_biases_and_norms(make_args):
    model = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4), nn.Linear(4, 1))
    trainer = Trainer(model=model, args=make_args(weight_decay=0.1))
    opt = trainer.create_optimizer()
    assert isinstance(opt, torch.optim.AdamW)
    decayed = {id(p) for g in opt.param_groups if g["weight_decay"] > 0 for p in g["params"]}
    assert decayed == {id(model[0].weight), id(model[2].weight)}


# ------------------------------------------------------------------ models and data
@pytest.mark.parametrize("model_cls", [DictModel, TupleModel])
def test_dict_and_tuple_models(make_args, model_cls):
    data = ToyDataset(32)
    args = make_args(per_device_train_batch_size=8, num_train_epochs=10, learning_rate=0.05)
    trainer = Trainer(model=model_cls(), args=args, train_dataset=data, eval_dataset=data)
    before = trainer.evaluate()["eval_loss"]
    trainer.train()
    after = trainer.evaluate()["eval_loss"]
    assert after < before / 2
    pred = trainer.predict(data)
    assert pred.predictions.shape == (32,)
    np.testing.assert_allclose(pred.label_ids, data.y.numpy())


def test_custom_label_names(make_args):
    class TargetData(ToyDataset):
        def __getitem__(self, i):
            return {"x": self.x[i], "target": self.y[i]}

    data = TargetData(16)
    trainer = Trainer(
        model=TargetModel(),
        args=make_args(max_steps=2, label_names=["target"]),
        train_dataset=data,
        eval_dataset=data,
    )
    trainer.train()
    assert trainer.label_names == ["target"]
    pred = trainer.predict(data)
    np.testing.assert_allclose(pred.label_ids, data.y.numpy())
    assert pred.predictions.shape == (16,)
    assert "test_loss" in pred.metrics


def test_remove_unused_columns_drops_keys_forward_does_not_take(make_args):
    data = ToyDataset(8, extra_key=True)
    trainer = Trainer(model=DictModel(), args=make_args(max_steps=2), train_dataset=data, eval_dataset=data)
    assert trainer.train().global_step == 2
    assert "eval_loss" in trainer.evaluate()

    keep_all = Trainer(
        model=DictModel(), args=make_args(max_steps=2, remove_unused_columns=False), train_dataset=data
    )
    with pytest.raises(TypeError, match="idx"):
        keep_all.train()


def test_remove_unused_columns_with_var_keyword_forward(make_args):
    class NamedAndKwargs(DictModel):
        def forward(self, x, labels=None, **kwargs):
            assert not kwargs, kwargs  # like a transformers model: **kwargs is not for dataset columns
            return super().forward(x, labels)

    class OnlyKwargs(DictModel):
        def forward(self, **batch):
            assert set(batch) == {"x", "labels", "idx"}  # nothing to go by: every key is passed
            return super().forward(batch["x"], batch["labels"])

    data = ToyDataset(8, extra_key=True)
    for model in (NamedAndKwargs(), OnlyKwargs()):
        trainer = Trainer(model=model, args=make_args(max_steps=2), train_dataset=data)
        assert trainer.train().global_step == 2


def test_iterable_dataset_needs_max_steps(make_args):
    trainer = Trainer(model=DictModel(), args=make_args(num_train_epochs=1), train_dataset=ToyIterable(8))
    with pytest.raises(ValueError, match="max_steps"):
        trainer.train()
    trainer = Trainer(
        model=DictModel(),
        args=make_args(max_steps=5, per_device_train_batch_size=2),
        train_dataset=ToyIterable(6),
    )
    counter = CountSteps()
    trainer.add_callback(counter)
    # 6 examples / batch 2 = 3 batches per pass: the iterable is re-iterated until max_steps.
    assert trainer.train().global_step == 5
    assert counter.optimizer_steps == 5
    pred = trainer.predict(ToyIterable(6))
    assert pred.predictions.shape == (6,)


def test_default_data_collator_returns_numpy_arrays_with_return_tensors_np():
    # transformers' signature: default_data_collator(features, return_tensors="pt"), "np" giving numpy arrays.
    features = [{"x": [0, 1, 2], "f": 0.5, "label": i, "s": "text", "t": torch.ones(2)} for i in range(4)]
    batch = default_data_collator(features, "np")
    assert set(batch) == {"x", "f", "labels", "t"}
    assert all(isinstance(v, np.ndarray) for v in batch.values())
    assert batch["x"].shape == (4, 3) and batch["x"].dtype == np.int64
    assert batch["labels"].dtype == np.int64 and batch["labels"].tolist() == [0, 1, 2, 3]
    assert (
        default_data_collator([{"label": 0.5}, {"label": 1.0}], return_tensors="np")["labels"].dtype
        == np.float32
    )
    assert isinstance(default_data_collator(features, return_tensors="pt")["x"], torch.Tensor)
    tuples = default_data_collator([(torch.zeros(2), 1), (torch.ones(2), 0)], return_tensors="np")
    assert isinstance(tuples[0], np.ndarray) and tuples[1].tolist() == [1, 0]
    with pytest.raises(ValueError, match="return_tensors"):
        default_data_collator(features, return_tensors="tf")


def test_default_data_collator():
    features = [
        {
            "t": torch.tensor([1.0, 2.0]),
            "a": np.array([1, 2]),
            "i": 3,
            "f": 0.5,
            "label": 1,
            "s": "x",
            "n": None,
        },
        {
            "t": torch.tensor([3.0, 4.0]),
            "a": np.array([3, 4]),
            "i": 4,
            "f": 1.5,
            "label": 0,
            "s": "y",
            "n": None,
        },
    ]
    batch = default_data_collator(features)
    assert set(batch) == {"t", "a", "i", "f", "labels"}  # strings and None are left out, as transformers does
    assert torch.equal(batch["t"], torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    assert torch.equal(batch["a"], torch.tensor([[1, 2], [3, 4]]))
    assert batch["i"].dtype == torch.long and batch["i"].tolist() == [3, 4]
    assert batch["f"].dtype.is_floating_point and batch["f"].tolist() == [0.5, 1.5]
    assert batch["labels"].dtype == torch.long and batch["labels"].tolist() == [1, 0]

    floats = default_data_collator([{"label_ids": 0.5}, {"label_ids": 1.0}])
    assert floats["labels"].dtype.is_floating_point
    # The first example's value decides; a string-valued key is dropped whatever the others hold.
    assert set(default_data_collator([{"id": "a", "x": 1}, {"id": "b", "x": 2}])) == {"x"}
    scalars = default_data_collator([{"y": np.float32(1.0)}, {"y": np.float32(2.0)}])
    assert scalars["y"].tolist() == [1.0, 2.0]
    tuples = default_data_collator([(torch.zeros(2), 1), (torch.ones(2), 0)])
    assert tuples[0].shape == (2, 2) and tuples[1].tolist() == [1, 0]
    with pytest.raises(ValueError, match="empty"):
        default_data_collator([])


# ------------------------------------------------------------------ evaluate & predict
@pytest.fixture
def trained_digits(make_args):
    train, val = _small_digits(256, 40)
    args = make_args(
        per_device_train_batch_size=32, per_device_eval_batch_size=16, num_train_epochs=2, learning_rate=1e-2
    )
    trainer = Trainer(
        model=DigitsMLP(), args=args, train_dataset=train, eval_dataset=val, compute_metrics=accuracy
    )
    trainer.train()
    return trainer, val


def test_evaluate_prefixes_and_compute_metrics(trained_digits):
    trainer, _ = trained_digits
    metrics = trainer.evaluate()
    assert {"eval_loss", "eval_accuracy", "eval_runtime", "eval_samples_per_second"} <= set(metrics)
    test = trainer.evaluate(metric_key_prefix="test")
    assert {"test_loss", "test_accuracy"} <= set(test)
    assert not any(k.startswith("eval_") for k in test)
    assert test["test_loss"] == pytest.approx(metrics["eval_loss"])
    assert trainer.state.log_history[-1]["test_accuracy"] == test["test_accuracy"]


def test_compute_metrics_may_return_arrays(trained_digits, make_args):
    # A confusion matrix (or a per-class tensor) beside the scalars failed evaluate() with "can only convert an array of
    # size 1 to a Python scalar"; transformers keeps such values as they are and turns one-element ones into numbers.
    trainer, _ = trained_digits
    trainer.compute_metrics = lambda p: {
        "confusion": np.array([[1, 2], [3, 4]]),
        "per_class": torch.tensor([0.5, 0.25]),
        "acc": np.float32(0.5),
        "one": np.array([0.75]),
        "scalar_tensor": torch.tensor(0.125),
    }
    metrics = trainer.evaluate()
    assert isinstance(metrics["eval_confusion"], np.ndarray) and metrics["eval_confusion"].shape == (2, 2)
    assert isinstance(metrics["eval_per_class"], torch.Tensor)
    assert [type(metrics[k]) for k in ("eval_acc", "eval_one", "eval_scalar_tensor")] == [float, float, float]
    assert (metrics["eval_acc"], metrics["eval_one"], metrics["eval_scalar_tensor"]) == (0.5, 0.75, 0.125)

    trainer.compute_metrics = lambda p: [
        0.5,
        0.25,
    ]  # was "cannot convert dictionary update sequence element #0"
    with pytest.raises(
        TypeError, match=r"compute_metrics must return a dict of metric name -> value, got list \[0\.5"
    ):
        trainer.evaluate()
    trainer.compute_metrics = t_metrics = lambda p: {"confusion": np.array([[1, 2], [3, 4]])}

    # Logged and saved too: checkpoints' trainer_state.json and the jsonl log hold the array as nested lists.
    train, val = _small_digits(64)
    args = make_args(
        max_steps=2,
        eval_strategy="steps",
        eval_steps=1,
        save_strategy="steps",
        save_steps=1,
        report_to="jsonl",
        per_device_train_batch_size=32,
    )
    t = Trainer(
        model=DigitsMLP(), args=args, train_dataset=train, eval_dataset=val, compute_metrics=t_metrics
    )
    t.train()
    saved = json.loads((Path(args.output_dir) / "checkpoint-2" / "trainer_state.json").read_text())
    assert [e["eval_confusion"] for e in saved["log_history"] if "eval_confusion" in e][-1] == [
        [1, 2],
        [3, 4],
    ]


def test_evaluate_a_dict_of_datasets(trained_digits, make_args):
    trainer, val = trained_digits
    metrics = trainer.evaluate({"a": Subset(val, range(20)), "b": Subset(val, range(20, 40))})
    assert {"eval_a_loss", "eval_b_loss", "eval_a_accuracy", "eval_b_accuracy"} <= set(metrics)

    # During training, a dict eval_dataset is evaluated per name too.
    train, _ = _small_digits(32)
    args = make_args(max_steps=2, eval_strategy="steps", eval_steps=2)
    t = Trainer(model=DigitsMLP(), args=args, train_dataset=train, eval_dataset={"a": val, "b": val})
    t.train()
    keys = set().union(*t.state.log_history)
    assert {"eval_a_loss", "eval_b_loss"} <= keys


def test_preprocess_logits_for_metrics(trained_digits):
    trainer, _ = trained_digits
    seen = {}

    def argmax(logits, labels):
        seen.setdefault("shapes", []).append(tuple(logits.shape))
        return logits.argmax(-1)

    def acc_from_ids(eval_pred):
        preds, labels = eval_pred
        seen["preds_shape"] = preds.shape
        return {"accuracy": float((preds == labels).mean())}

    reference = trainer.evaluate()["eval_accuracy"]
    trainer.preprocess_logits_for_metrics = argmax
    trainer.compute_metrics = acc_from_ids
    metrics = trainer.evaluate()
    assert seen["shapes"] == [(16, 10), (16, 10), (8, 10)]  # per batch, before gathering
    assert seen["preds_shape"] == (40,)
    assert metrics["eval_accuracy"] == pytest.approx(reference)


def test_batch_eval_metrics(trained_digits):
    trainer, _ = trained_digits
    reference = trainer.evaluate()
    calls = []

    def batched(eval_pred, compute_result):
        preds, labels = eval_pred
        calls.append((compute_result, len(labels)))
        correct = int((preds.argmax(-1) == labels).sum())
        batched.correct = getattr(batched, "correct", 0) + correct
        batched.total = getattr(batched, "total", 0) + len(labels)
        if compute_result:
            return {"accuracy": batched.correct / batched.total, "calls": len(calls)}
        return {"accuracy": -1.0}

    trainer.args = dataclasses.replace(trainer.args, batch_eval_metrics=True)
    trainer.compute_metrics = batched
    metrics = trainer.evaluate()
    assert calls == [(False, 16), (False, 16), (True, 8)]  # 40 examples, batch 16
    assert metrics["eval_calls"] == 3  # the metrics of the last call
    assert metrics["eval_accuracy"] == pytest.approx(reference["eval_accuracy"])


def test_batch_eval_metrics_on_an_unsized_eval_dataset(make_args):
    calls = []

    def batched(eval_pred, compute_result):
        calls.append(compute_result)
        return {"n": len(calls)}

    args = make_args(batch_eval_metrics=True, per_device_eval_batch_size=4)
    trainer = Trainer(model=DictModel(), args=args, compute_metrics=batched)
    metrics = trainer.evaluate(ToyIterable(10))  # no len(): the last batch is found by looking ahead
    assert calls == [False, False, True]
    assert metrics["eval_n"] == 3


def test_predict(trained_digits):
    trainer, val = trained_digits
    called = []

    class OnPredict(TrainerCallback):
        def on_predict(self, args, state, control, metrics=None, **kwargs):
            called.append(metrics)

    trainer.add_callback(OnPredict)
    out = trainer.predict(val)
    assert isinstance(out, PredictionOutput)
    assert out.predictions.shape == (40, 10)
    assert out.label_ids.shape == (40,)
    assert {"test_loss", "test_accuracy", "test_runtime"} <= set(out.metrics)
    assert called == [out.metrics]
    expected = [val[i]["labels"].item() for i in range(40)]
    assert out.label_ids.tolist() == expected  # sequential order, no shuffling
    custom = trainer.predict(val, metric_key_prefix="holdout")
    assert "holdout_loss" in custom.metrics


def test_prediction_loss_only(make_args):
    _, val = _small_digits(32)
    trainer = Trainer(
        model=DigitsMLP(),
        args=make_args(prediction_loss_only=True),
        eval_dataset=val,
        compute_metrics=accuracy,
    )
    out = trainer.predict(val)
    assert out.predictions is None and "test_loss" in out.metrics


def test_eval_prediction_unpacks():
    ep = EvalPrediction(predictions=np.zeros(2), label_ids=np.ones(2))
    preds, labels = ep
    assert preds.shape == labels.shape == (2,)


# ------------------------------------------------------------------ logging
class RecordingTrainer(Trainer):
    """Remembers the loss of every micro-batch, to check what is logged."""

    def compute_loss(self, model, inputs, return_outputs=False):
        result = super().compute_loss(model, inputs, return_outputs)
        if model.training:
            loss = result[0] if return_outputs else result
            self.step_losses.append(loss.item())
        return result


def test_logged_loss_is_the_mean_since_the_last_log(make_args):
    args = make_args(per_device_train_batch_size=2, max_steps=9, logging_steps=4, learning_rate=0.01)
    trainer = RecordingTrainer(model=DictModel(), args=args, train_dataset=ToyDataset(40))
    trainer.step_losses = []
    out = trainer.train()
    losses = trainer.step_losses
    logged = [h for h in trainer.state.log_history if "loss" in h]
    assert [h["step"] for h in logged] == [4, 8]
    # Not rounded (transformers 5 logs the mean as it is; up to 4.x it rounded to 4 decimals).
    assert logged[0]["loss"] == pytest.approx(np.mean(losses[0:4]), rel=1e-6)
    assert logged[1]["loss"] == pytest.approx(np.mean(losses[4:8]), rel=1e-6)
    assert out.training_loss == pytest.approx(np.mean(losses), rel=1e-5)
    assert all("epoch" in h and "step" in h for h in trainer.state.log_history)
    assert "learning_rate" in logged[0] and "grad_norm" in logged[0]


def test_logged_loss_with_gradient_accumulation(make_args):
    args = make_args(
        per_device_train_batch_size=2, gradient_accumulation_steps=2, max_steps=4, logging_steps=2
    )
    trainer = RecordingTrainer(model=DictModel(), args=args, train_dataset=ToyDataset(40))
    trainer.step_losses = []
    trainer.train()
    logged = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    # The loss of an optimizer step is the mean of its micro-batches; the log is the mean of those steps.
    assert logged[0] == pytest.approx(np.mean(trainer.step_losses[0:4]), abs=1e-4)
    assert logged[1] == pytest.approx(np.mean(trainer.step_losses[4:8]), abs=1e-4)


class NaNOnFlag(nn.Module):
    """Returns a NaN loss for batches holding a flagged example; the gradients stay finite."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 1)

    def forward(self, x, labels, bad):
        loss = nn.functional.mse_loss(self.linear(x).squeeze(-1), labels)
        return {"loss": loss + torch.where(bad.any(), torch.tensor(float("nan")), torch.tensor(0.0))}


class FlaggedData(ToyDataset):
    def __getitem__(self, i):
        return {"x": self.x[i], "labels": self.y[i], "bad": i == 2}


@pytest.mark.parametrize("nan_filter", [True, False])
def test_logging_nan_inf_filter(make_args, nan_filter):
    args = make_args(
        per_device_train_batch_size=1, max_steps=4, logging_steps=4, logging_nan_inf_filter=nan_filter
    )
    trainer = Trainer(model=NaNOnFlag(), args=args, train_dataset=FlaggedData(4))
    trainer.train()
    (loss,) = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert math.isfinite(loss) is nan_filter
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())


def test_logged_losses_are_the_means_of_the_step_losses_with_a_nan_step_as_transformers_counts_it(make_args):
    args = make_args(per_device_train_batch_size=1, max_steps=6, logging_steps=2)
    losses: list[float] = []

    class Recording(Trainer):
        def training_step(self, model, inputs, num_items_in_batch=None):
            loss = super().training_step(model, inputs, num_items_in_batch)
            losses.append(loss.item())
            return loss

    class FourthBad(FlaggedData):
        def __getitem__(self, i):
            return {**super().__getitem__(i), "bad": i == 3}

    trainer = Recording(model=NaNOnFlag(), args=args, train_dataset=FourthBad(6))
    trainer.get_train_dataloader = lambda: torch.utils.data.DataLoader(FourthBad(6), batch_size=1)  # in order
    output = trainer.train()
    assert math.isnan(losses[3]) and all(math.isfinite(v) for i, v in enumerate(losses) if i != 3)
    # transformers: a non-finite step adds tr_loss / (1 + global_step - last logged step) to the running sum.
    sums = [losses[0] + losses[1], losses[2] + losses[2] / 2, losses[4] + losses[5]]
    logged = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert logged == pytest.approx([s / 2 for s in sums], abs=1e-4)
    assert output.training_loss == pytest.approx(sum(sums) / 6, rel=1e-6)


def test_logging_first_step(make_args):
    args = make_args(max_steps=3, logging_steps=10, logging_first_step=True)
    trainer = Trainer(model=DictModel(), args=args, train_dataset=ToyDataset(32))
    trainer.train()
    assert [h["step"] for h in trainer.state.log_history if "loss" in h] == [1]
    args = make_args(max_steps=3, logging_steps=10)
    trainer = Trainer(model=DictModel(), args=args, train_dataset=ToyDataset(32))
    trainer.train()
    assert [h for h in trainer.state.log_history if "loss" in h] == []


def test_logging_steps_as_a_ratio(make_args):
    args = make_args(max_steps=10, logging_steps=0.2)
    trainer = Trainer(model=DictModel(), args=args, train_dataset=ToyDataset(100))
    trainer.train()
    assert [h["step"] for h in trainer.state.log_history if "loss" in h] == [2, 4, 6, 8, 10]


def test_memory_metrics(make_args):
    data = ToyDataset(16)
    trainer = Trainer(
        model=DictModel(), args=make_args(max_steps=2, skip_memory_metrics=False), train_dataset=data
    )
    out = trainer.train()
    assert "train_mem_cpu_alloc_delta" in out.metrics and "train_mem_cpu_peaked_delta" in out.metrics
    assert "eval_mem_cpu_alloc_delta" in trainer.evaluate(data)
    quiet = Trainer(model=DictModel(), args=make_args(max_steps=2), train_dataset=data)
    assert not any("_mem_" in k for k in quiet.train().metrics)


def test_device_memory_metrics_follow_the_accelerator_torch_reports(make_args):
    """On CPU only the process's memory is reported; on torch's accelerator (CUDA, XPU, MPS, NPU...) its allocator's
    too, through torch.accelerator. The accelerator half runs where torch has one (no GPU on the CI machine)."""
    from trainer._utils import MemoryTracker

    accelerator = torch.accelerator.current_accelerator()
    assert MemoryTracker(skip=False, device="cpu").device is None
    other = "mps" if accelerator is not None and accelerator.type != "mps" else "cuda"
    if accelerator is None or accelerator.type != other:
        with pytest.raises(ValueError, match=f"Memory metrics of {other} need it to be torch's accelerator"):
            MemoryTracker(skip=False, device=other)
    data = ToyDataset(16)
    on_cpu = (
        Trainer(
            model=DictModel(),
            args=make_args(max_steps=2, skip_memory_metrics=False, use_cpu=True),
            train_dataset=data,
        )
        .train()
        .metrics
    )
    assert "train_mem_cpu_alloc_delta" in on_cpu and "init_mem_cpu_alloc_delta" in on_cpu
    assert not any("_mem_gpu_" in k for k in on_cpu)
    if accelerator is None:
        return
    tracker = MemoryTracker(skip=False, device=accelerator)
    metrics: dict[str, float] = {}
    tracker.start("probe")
    kept = torch.empty(2**20, dtype=torch.float32, device=accelerator)  # 4 MiB kept
    assert (
        float(torch.ones(2**22, dtype=torch.float32, device=accelerator).sum()) == 2**22
    )  # 16 MiB, then freed
    tracker.stop_and_update_metrics("probe", metrics)
    assert metrics["probe_mem_gpu_alloc_delta"] >= kept.numel() * 4
    assert metrics["probe_mem_gpu_peaked_delta"] >= 2**24 - 2**22
    on_device = (
        Trainer(model=DictModel(), args=make_args(max_steps=2, skip_memory_metrics=False), train_dataset=data)
        .train()
        .metrics
    )
    assert {"train_mem_gpu_alloc_delta", "train_mem_gpu_peaked_delta", "init_mem_gpu_alloc_delta"} <= set(
        on_device
    )


def test_log_metrics_save_metrics_and_metrics_format(make_args, capsys, tmp_path):
    trainer = Trainer(model=DictModel(), args=make_args(output_dir=str(tmp_path / "m")))
    metrics = {
        "train_runtime": 3725.5,
        "train_mem_cpu_alloc_delta": 5 * 2**20,
        "train_loss": 0.123456789,
        "epoch": 3,
    }
    formatted = trainer.metrics_format(metrics)
    assert formatted == {
        "train_runtime": "1:02:05.50",
        "train_mem_cpu_alloc_delta": "5MB",
        "train_loss": 0.1235,
        "epoch": 3,
    }
    trainer.log_metrics("train", metrics)
    out = capsys.readouterr().out
    assert "***** train metrics *****" in out and "1:02:05.50" in out and "0.1235" in out

    trainer.save_metrics("train", {"train_loss": 0.5})
    trainer.save_metrics("eval", {"eval_loss": 0.25})
    with open(tmp_path / "m" / "train_results.json") as f:
        assert json.load(f) == {"train_loss": 0.5}
    with open(tmp_path / "m" / "all_results.json") as f:
        assert json.load(f) == {"train_loss": 0.5, "eval_loss": 0.25}


# ------------------------------------------------------------------ reproducibility
def _weights_after_training(make_args, seed: int, **overrides):
    train, _ = _small_digits(64)
    args = make_args(max_steps=6, per_device_train_batch_size=8, seed=seed, **overrides)
    trainer = Trainer(model_init=lambda: DigitsMLP(dropout=0.2), args=args, train_dataset=train)
    trainer.train()
    return [p.detach().clone() for p in trainer.model.parameters()]


def test_same_seed_same_weights(make_args):
    a = _weights_after_training(make_args, seed=3)
    b = _weights_after_training(make_args, seed=3)
    c = _weights_after_training(make_args, seed=4)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not all(torch.equal(x, y) for x, y in zip(a, c))


def test_full_determinism_same_weights(make_args):
    a = _weights_after_training(make_args, seed=5, full_determinism=True)
    b = _weights_after_training(make_args, seed=5, full_determinism=True)
    assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_set_seed_and_enable_full_determinism():
    set_seed(11)
    a = (torch.rand(3), np.random.rand(3))
    set_seed(11)
    b = (torch.rand(3), np.random.rand(3))
    assert torch.equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    enable_full_determinism(11)
    assert torch.are_deterministic_algorithms_enabled()
    assert torch.equal(torch.rand(3), a[0])


@pytest.mark.parametrize("seed", [0, 11, 2**32 + 5, 2**63 - 1])
def test_set_seed_seeds_torch_exactly_as_torch_manual_seed(seed):
    # Without a device set_seed seeds the CPU generator directly (torch.manual_seed formats the call stack for
    # every device type it queues a seed for); the stream must be the one torch.manual_seed gives.
    torch.manual_seed(seed)
    expected = (torch.rand(4), torch.randint(0, 1000, (4,)), torch.initial_seed())
    torch.manual_seed(seed + 1)
    set_seed(seed)
    assert torch.equal(torch.rand(4), expected[0])
    assert torch.equal(torch.randint(0, 1000, (4,)), expected[1])
    assert torch.initial_seed() == expected[2]


def test_set_seed_seeds_every_device_where_torch_has_one(monkeypatch):
    # With a device (or a torch without torch.accelerator) set_seed goes through torch.manual_seed, which also seeds
    # CUDA, XPU, MPS and the out-of-tree devices; only a process without any seeds the CPU generator alone.
    seeded: list[int] = []
    real = torch.manual_seed
    monkeypatch.setattr(torch, "manual_seed", lambda seed: seeded.append(seed) or real(seed))
    set_seed(3)
    assert seeded == ([3] if torch.accelerator.is_available() else [])
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    set_seed(4)
    monkeypatch.delattr(torch, "accelerator")
    set_seed(5)
    assert seeded[-2:] == [4, 5]


# ------------------------------------------------------------------ import weight
@pytest.mark.multiprocess
def test_import_trainer_is_light():
    code = (
        "import sys, trainer\n"
        "heavy = ['optuna', 'ray', 'sigopt', 'mlflow', 'tensorboard', 'torch.utils.tensorboard', 'transformers',"
        " 'hpsearch', 'sklearn', 'pandas', 'plotly']\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120, cwd=_ROOT
    )
    assert result.stdout.strip() == ""
