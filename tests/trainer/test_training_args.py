from __future__ import annotations

import copy
import dataclasses
import json
import os
import pickle
import re
import socket

import numpy as np
import pytest
import torch

from trainer._training_args import (
    IntervalStrategy,
    MixedPrecision,
    OptimizerNames,
    SaveStrategy,
    SchedulerType,
    TrainingArguments,
)


def test_enums_compare_equal_to_their_strings():
    assert IntervalStrategy("steps") == "steps"
    assert SaveStrategy.BEST == "best"
    assert SchedulerType("cosine_with_min_lr") is SchedulerType.COSINE_WITH_MIN_LR
    assert MixedPrecision("bf16") == "bf16"
    assert OptimizerNames("sgd") == "sgd"
    assert str(IntervalStrategy.EPOCH) == "epoch"
    assert f"{SaveStrategy.STEPS}" == "steps"
    assert [t.value for t in SchedulerType] == [
        "linear",
        "cosine",
        "cosine_with_restarts",
        "polynomial",
        "constant",
        "constant_with_warmup",
        "inverse_sqrt",
        "reduce_lr_on_plateau",
        "cosine_with_min_lr",
        "warmup_stable_decay",
    ]


def test_defaults_and_derived_values():
    args = TrainingArguments()
    assert args.output_dir == "trainer_output"
    assert args.run_name == "trainer_output"
    assert args.eval_strategy is IntervalStrategy.NO
    assert args.save_strategy is SaveStrategy.STEPS
    assert args.logging_strategy is IntervalStrategy.STEPS
    assert args.lr_scheduler_type is SchedulerType.LINEAR
    assert args.optim is OptimizerNames.ADAMW_TORCH
    assert args.mixed_precision is MixedPrecision.NO
    assert (args.learning_rate, args.adam_beta1, args.adam_beta2, args.adam_epsilon) == (
        5e-5,
        0.9,
        0.999,
        1e-8,
    )
    assert (args.per_device_train_batch_size, args.num_train_epochs, args.max_steps) == (8, 3.0, -1)
    assert (args.logging_steps, args.save_steps, args.seed) == (500, 500, 42)
    assert args.report_to == []
    assert args.disable_tqdm is False
    assert args.eval_steps is None
    assert args.metric_for_best_model is None and args.greater_is_better is None
    assert args.lr_scheduler_kwargs == {} and args.optim_args == {}
    pattern = re.escape(os.path.join("trainer_output", "runs", "")) + r"\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_"
    assert re.match(pattern + re.escape(socket.gethostname()) + "$", args.logging_dir)
    assert args.train_batch_size == 8 and args.eval_batch_size == 8


def test_mutable_defaults_are_not_shared():
    first, second = TrainingArguments(), TrainingArguments()
    first.optim_args["momentum"] = 0.9
    assert second.optim_args == {}
    given = {"num_cycles": 2}
    args = TrainingArguments(lr_scheduler_kwargs=given)
    given["num_cycles"] = 3
    assert args.lr_scheduler_kwargs == {"num_cycles": 2}


def test_normalisation():
    args = TrainingArguments(
        output_dir="out",
        eval_strategy="STEPS",
        save_strategy=IntervalStrategy.STEPS,  # an IntervalStrategy is accepted for save_strategy
        logging_steps=50.0,
        save_steps=100,
        lr_scheduler_type="cosine",
        optim="sgd",
        mixed_precision="bf16",
        log_level="INFO",
        report_to="tensorboard",
        lr_scheduler_kwargs='{"num_cycles": 1}',
        per_device_train_batch_size=np.int64(4),
        learning_rate=np.float32(1e-3),
        use_cpu=np.bool_(True),
    )
    assert args.eval_strategy is IntervalStrategy.STEPS
    assert args.save_strategy is SaveStrategy.STEPS
    assert args.eval_steps == 50 and isinstance(args.eval_steps, int)
    assert args.logging_steps == 50 and isinstance(args.logging_steps, int)
    assert args.lr_scheduler_type is SchedulerType.COSINE
    assert args.optim is OptimizerNames.SGD
    assert args.log_level == "info"
    assert args.report_to == ["tensorboard"]
    assert args.lr_scheduler_kwargs == {"num_cycles": 1}
    assert type(args.per_device_train_batch_size) is int
    assert type(args.learning_rate) is float
    assert args.use_cpu is True
    assert args.run_name == "out"
    assert args.logging_dir.startswith(os.path.join("out", "runs", ""))


def test_ratio_steps_are_kept_as_floats():
    args = TrainingArguments(eval_strategy="steps", eval_steps=0.1, save_steps=0.2, logging_steps=0.05)
    assert (args.eval_steps, args.save_steps, args.logging_steps) == (0.1, 0.2, 0.05)


def test_eval_steps_0_falls_back_on_logging_steps_as_none_does():
    # transformers treats eval_steps=0 as unset: evaluate every logging_steps.
    args = TrainingArguments(eval_strategy="steps", eval_steps=0, logging_steps=10)
    assert args.eval_steps == 10
    assert args.replace(logging_steps=20).eval_steps == 20
    assert (
        TrainingArguments(eval_strategy="epoch", eval_steps=0).eval_steps == 0
    )  # unused there, kept as given


def test_best_model_defaults():
    args = TrainingArguments(eval_strategy="epoch", save_strategy="epoch", load_best_model_at_end=True)
    assert args.metric_for_best_model == "loss"
    assert args.greater_is_better is False
    args = TrainingArguments(metric_for_best_model="accuracy")
    assert args.greater_is_better is True
    args = TrainingArguments(metric_for_best_model="eval_loss")
    assert args.metric_for_best_model == "eval_loss"  # kept as given
    assert args.greater_is_better is False
    args = TrainingArguments(metric_for_best_model="loss", greater_is_better=True)
    assert args.greater_is_better is True


@pytest.mark.parametrize(
    ("kwargs", "needles"),
    [
        (
            {"per_device_train_batch_size": 0},
            ["per_device_train_batch_size", "positive integer", "got 0", "pass 1"],
        ),
        ({"per_device_eval_batch_size": 2.0}, ["per_device_eval_batch_size", "2.0"]),
        ({"per_device_train_batch_size": True}, ["per_device_train_batch_size", "True"]),
        ({"gradient_accumulation_steps": 0}, ["gradient_accumulation_steps", "got 0"]),
        ({"eval_accumulation_steps": 0}, ["eval_accumulation_steps", "got 0"]),
        ({"learning_rate": "1e-3"}, ["learning_rate", "'1e-3'", "number"]),
        ({"learning_rate": -1}, ["learning_rate", "-1"]),
        ({"learning_rate": float("nan")}, ["learning_rate", "nan"]),
        ({"weight_decay": -0.1}, ["weight_decay", "-0.1"]),
        ({"adam_beta1": 1.0}, ["adam_beta1", "1.0", "< 1.0"]),
        ({"adam_beta2": -0.5}, ["adam_beta2", "-0.5"]),
        ({"adam_epsilon": -1e-8}, ["adam_epsilon"]),
        ({"max_grad_norm": -1}, ["max_grad_norm"]),
        ({"num_train_epochs": -1}, ["num_train_epochs"]),
        ({"max_steps": 0}, ["max_steps", "got 0", "-1"]),
        ({"max_steps": -2}, ["max_steps", "got -2"]),
        ({"max_steps": 10.0}, ["max_steps", "10.0"]),
        ({"warmup_ratio": 1.5}, ["warmup_ratio", "1.5"]),
        ({"warmup_steps": -1}, ["warmup_steps", "-1"]),
        ({"warmup_steps": 2.5}, ["warmup_steps", "2.5", "pass 2 or 3"]),
        ({"logging_steps": 10.5}, ["logging_steps", "10.5"]),
        ({"save_steps": -5}, ["save_steps", "-5"]),
        ({"eval_steps": -1}, ["eval_steps", "got -1"]),
        ({"eval_steps": "10"}, ["eval_steps", "'10'"]),
        ({"eval_delay": -1}, ["eval_delay"]),
        ({"eval_strategy": "sometimes"}, ["eval_strategy", "'sometimes'", "'steps'", "'epoch'"]),
        ({"save_strategy": "always"}, ["save_strategy", "'best'"]),
        ({"logging_strategy": 3}, ["logging_strategy"]),
        ({"lr_scheduler_type": "exp"}, ["lr_scheduler_type", "'exp'", "'warmup_stable_decay'"]),
        ({"optim": "lion"}, ["optim", "'lion'", "'adamw_torch'"]),
        ({"mixed_precision": "fp8"}, ["mixed_precision", "'fp8'", "'bf16'"]),
        ({"log_level": "loud"}, ["log_level", "'loud'", "'passive'"]),
        ({"save_total_limit": 0}, ["save_total_limit", "got 0"]),
        ({"seed": -1}, ["seed", "-1"]),
        ({"data_seed": 2**40}, ["data_seed"]),
        ({"dataloader_num_workers": -1}, ["dataloader_num_workers", "-1"]),
        ({"dataloader_prefetch_factor": 2}, ["dataloader_prefetch_factor", "dataloader_num_workers"]),
        (
            {"dataloader_persistent_workers": True},
            ["dataloader_persistent_workers", "dataloader_num_workers"],
        ),
        ({"lr_scheduler_kwargs": [1, 2]}, ["lr_scheduler_kwargs", "dict"]),
        ({"optim_args": "momentum"}, ["optim_args", "key=value"]),
        ({"optim_args": {1: 2}}, ["optim_args", "string keys"]),
        ({"report_to": "azure_ml"}, ["report_to", "azure_ml", "'tensorboard'"]),
        ({"report_to": ["none", "jsonl"]}, ["report_to"]),
        ({"report_to": 3}, ["report_to"]),
        ({"label_names": "labels"}, ["label_names", "['labels']"]),
        ({"label_names": ["labels", 3]}, ["label_names"]),
        ({"max_checkpoint_shard_size": "5 parsecs"}, ["max_checkpoint_shard_size", "5 parsecs", "5GB"]),
        ({"max_checkpoint_shard_size": 0}, ["max_checkpoint_shard_size", "got 0"]),
        ({"output_dir": 3}, ["output_dir", "3"]),
        ({"overwrite_output_dir": "yes"}, ["overwrite_output_dir", "'yes'", "True or False"]),
        ({"disable_tqdm": 1}, ["disable_tqdm"]),
        ({"greater_is_better": "no"}, ["greater_is_better"]),
        ({"metric_for_best_model": ""}, ["metric_for_best_model"]),
        ({"logging_steps": 0}, ["logging_steps", "logging_strategy='steps'"]),
        ({"save_steps": 0}, ["save_steps", "save_strategy='steps'"]),
        (
            {"eval_strategy": "steps", "logging_steps": 0, "logging_strategy": "no"},
            ["eval_strategy='steps'", "eval_steps"],
        ),
        (
            {"eval_strategy": "steps", "eval_steps": 0, "logging_steps": 0, "logging_strategy": "no"},
            ["eval_strategy='steps'", "eval_steps=0"],
        ),
        (
            {"save_strategy": "best", "metric_for_best_model": "loss"},
            ["save_strategy='best'", "eval_strategy"],
        ),
        (
            {"save_strategy": "best", "eval_strategy": "epoch"},
            ["save_strategy='best'", "metric_for_best_model"],
        ),
        ({"load_best_model_at_end": True}, ["load_best_model_at_end", "eval_strategy='no'"]),
        (
            {"load_best_model_at_end": True, "eval_strategy": "epoch", "save_strategy": "steps"},
            ["save_strategy", "'steps'", "'epoch'"],
        ),
        (
            {"load_best_model_at_end": True, "eval_strategy": "steps", "eval_steps": 30, "save_steps": 100},
            ["save_steps", "multiple", "eval_steps"],
        ),
        (
            {"load_best_model_at_end": True, "eval_strategy": "steps", "eval_steps": 0.1, "save_steps": 100},
            ["both"],
        ),
        (
            {"load_best_model_at_end": True, "eval_strategy": "steps", "eval_steps": 0.3, "save_steps": 0.4},
            ["multiple"],
        ),
        ({"mixed_precision": "fp16", "use_cpu": True}, ["mixed_precision='fp16'", "use_cpu=True", "bf16"]),
    ],
)
def test_invalid_values_raise_a_message_naming_field_value_and_fix(kwargs, needles):
    with pytest.raises(ValueError) as info:
        TrainingArguments(**kwargs)
    message = str(info.value)
    for needle in needles:
        assert needle in message, (needle, message)
    assert "pass" in message or "remove" in message or "use" in message  # every message proposes a fix


def test_valid_best_model_combinations():
    args = TrainingArguments(
        load_best_model_at_end=True, eval_strategy="steps", eval_steps=50, save_steps=200, logging_steps=10
    )
    assert args.metric_for_best_model == "loss"
    TrainingArguments(load_best_model_at_end=True, eval_strategy="steps", eval_steps=0.1, save_steps=0.3)
    TrainingArguments(load_best_model_at_end=True, eval_strategy="epoch", save_strategy="best")
    TrainingArguments(eval_strategy="epoch", save_strategy="best", metric_for_best_model="accuracy")
    # eval_steps falls back on logging_steps, so save_steps must be a multiple of logging_steps here
    with pytest.raises(ValueError, match="multiple"):
        TrainingArguments(
            load_best_model_at_end=True, eval_strategy="steps", logging_steps=300, save_steps=500
        )


def test_fp16_needs_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="no CUDA GPU is available"):
        TrainingArguments(mixed_precision="fp16")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert TrainingArguments(mixed_precision="fp16").mixed_precision is MixedPrecision.FP16
    with pytest.raises(ValueError, match="use_cpu=True"):
        TrainingArguments(mixed_precision="fp16", use_cpu=True)
    TrainingArguments(mixed_precision="bf16", use_cpu=True)


def test_strategy_off_allows_zero_steps():
    args = TrainingArguments(logging_strategy="no", logging_steps=0, save_strategy="epoch", save_steps=0)
    assert args.logging_steps == 0 and args.save_steps == 0


def test_report_to_normalisation():
    assert TrainingArguments(report_to="none").report_to == []
    assert TrainingArguments(report_to=["none"]).report_to == []
    assert TrainingArguments(report_to=[]).report_to == []
    assert TrainingArguments(report_to="all").report_to == ["all"]
    assert TrainingArguments(report_to=("jsonl", "TensorBoard", "jsonl")).report_to == [
        "jsonl",
        "tensorboard",
    ]


def test_max_checkpoint_shard_size_parsing():
    assert TrainingArguments().max_checkpoint_shard_bytes == 5 * 10**9
    assert TrainingArguments(max_checkpoint_shard_size="500MB").max_checkpoint_shard_bytes == 500 * 10**6
    assert TrainingArguments(max_checkpoint_shard_size="2GiB").max_checkpoint_shard_bytes == 2 * 2**30
    assert TrainingArguments(max_checkpoint_shard_size="1.5 kb").max_checkpoint_shard_bytes == 1500
    assert TrainingArguments(max_checkpoint_shard_size="1000").max_checkpoint_shard_bytes == 1000
    assert TrainingArguments(max_checkpoint_shard_size=1234).max_checkpoint_shard_bytes == 1234


# ---- re-validation and idempotency ------------------------------------------------------------------------


def test_replace_revalidates():
    args = TrainingArguments()
    with pytest.raises(ValueError, match="learning_rate"):
        dataclasses.replace(args, learning_rate=-1)
    with pytest.raises(ValueError, match="per_device_train_batch_size"):
        args.replace(per_device_train_batch_size=0)
    changed = args.replace(learning_rate=1e-3, lr_scheduler_type="cosine")
    assert changed.learning_rate == 1e-3 and changed.lr_scheduler_type is SchedulerType.COSINE
    assert args.learning_rate == 5e-5


def test_post_init_is_idempotent():
    args = TrainingArguments(
        output_dir="o",
        eval_strategy="steps",
        load_best_model_at_end=True,
        save_steps=1000,
        report_to=["jsonl"],
        warmup_steps=0.1,
    )
    snapshot = args.to_dict()
    args.__post_init__()
    assert args.to_dict() == snapshot
    again = dataclasses.replace(args)
    assert again == args
    assert again.to_dict() == snapshot


def test_replace_rederives_values_derived_from_changed_fields():
    args = TrainingArguments(
        output_dir="a", eval_strategy="steps", logging_steps=10, metric_for_best_model="loss"
    )
    assert args.eval_steps == 10 and args.greater_is_better is False
    trial = dataclasses.replace(args, output_dir="b", logging_steps=20, metric_for_best_model="accuracy")
    assert trial.run_name == "b"
    assert trial.logging_dir == os.path.join("b", "runs", os.path.basename(args.logging_dir))
    assert trial.eval_steps == 20
    assert trial.greater_is_better is True
    # and back again through a second replace
    back = trial.replace(output_dir="a", logging_steps=10, metric_for_best_model="loss")
    assert back == args


def test_replace_keeps_values_the_caller_chose():
    args = TrainingArguments(
        output_dir="a",
        logging_dir="logs",
        run_name="mine",
        eval_strategy="steps",
        eval_steps=7,
        greater_is_better=True,
        metric_for_best_model="loss",
    )
    trial = args.replace(output_dir="b", logging_steps=20, metric_for_best_model="rmse")
    assert (trial.logging_dir, trial.run_name, trial.eval_steps, trial.greater_is_better) == (
        "logs",
        "mine",
        7,
        True,
    )
    # a replace that sets a derived field explicitly wins over re-derivation
    derived = TrainingArguments(output_dir="a")
    chosen = derived.replace(output_dir="b", logging_dir="explicit", run_name="r")
    assert (chosen.logging_dir, chosen.run_name) == ("explicit", "r")


def _every_field(args: TrainingArguments) -> dict[str, object]:
    return {f.name: getattr(args, f.name) for f in dataclasses.fields(args)}  # _derived included


@pytest.mark.parametrize(
    "base",
    [
        {},
        {"output_dir": "a", "eval_strategy": "steps", "logging_steps": 10, "load_best_model_at_end": True},
        {"output_dir": "a", "logging_dir": "logs", "run_name": "mine", "report_to": ["jsonl"]},
        {"output_dir": "~/a", "warmup_steps": 0.1, "lr_scheduler_kwargs": {"power": 2.0}},
    ],
)
@pytest.mark.parametrize(
    "changes",
    [
        {"learning_rate": 3e-3, "output_dir": "/tmp/b/run-1", "run_name": "run-1"},
        {"weight_decay": 1, "adam_beta1": 0.8, "warmup_ratio": 0.25, "num_train_epochs": 2},
        {"output_dir": "~/c"},
        {"logging_dir": "other", "max_grad_norm": 0.5, "adam_epsilon": 1e-6, "adam_beta2": 0.99},
    ],
)
def test_replace_of_numbers_and_folders_equals_a_whole_validation(base, changes, monkeypatch):
    # A trial's copy re-checks only what it changed: the result must be the whole validation's, field for field.
    # Each new logging folder name differs (the real one has the second it was made in): a copy that made a new name
    # instead of keeping the derived one shows.
    names = iter(range(1000))
    monkeypatch.setattr(
        "trainer._training_args._default_logging_dir",
        lambda output_dir, run_folder=None: os.path.join(
            output_dir, "runs", run_folder or f"made-{next(names)}"
        ),
    )
    args = TrainingArguments(**base)
    quick, whole = args.replace(**changes), dataclasses.replace(args, **changes)
    assert _every_field(quick) == _every_field(whole)
    assert quick.to_dict() == whole.to_dict()
    assert quick.report_to is not args.report_to and quick._derived is not args._derived
    assert _every_field(quick.replace(**base)) == _every_field(dataclasses.replace(whole, **base))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"learning_rate": -1}, "learning_rate"),
        ({"adam_beta1": 1.0}, "adam_beta1"),
        ({"warmup_ratio": float("nan")}, "warmup_ratio"),
        ({"learning_rate": True}, "learning_rate"),
        ({"output_dir": 3}, "output_dir"),
    ],
)
def test_replace_of_numbers_and_folders_refuses_what_a_whole_validation_refuses(changes, message):
    args = TrainingArguments(output_dir="a")
    with pytest.raises((ValueError, TypeError), match=message) as quick:
        args.replace(**changes)
    with pytest.raises((ValueError, TypeError)) as whole:
        dataclasses.replace(args, **changes)
    assert str(quick.value) == str(whole.value) and type(quick.value) is type(whole.value)


def test_replace_drops_derived_best_metric_when_no_longer_needed():
    args = TrainingArguments(eval_strategy="epoch", save_strategy="epoch", load_best_model_at_end=True)
    plain = args.replace(load_best_model_at_end=False)
    assert plain.metric_for_best_model is None and plain.greater_is_better is None
    assert plain == TrainingArguments(eval_strategy="epoch", save_strategy="epoch")


def test_replace_cannot_smuggle_private_state_into_serialisation():
    args = TrainingArguments(eval_strategy="steps")
    assert "_derived" not in args.to_dict()
    assert "_derived" not in repr(args)


# ---- serialisation -----------------------------------------------------------------------------------------


def test_to_dict_is_json_safe_and_round_trips():
    args = TrainingArguments(
        output_dir="out",
        eval_strategy="epoch",
        save_strategy="epoch",
        load_best_model_at_end=True,
        lr_scheduler_type="cosine_with_min_lr",
        lr_scheduler_kwargs={"min_lr_rate": 0.1},
        label_names=["labels"],
        report_to=["jsonl"],
        warmup_steps=0.05,
    )
    data = args.to_dict()
    assert data["eval_strategy"] == "epoch" and type(data["eval_strategy"]) is str
    assert data["lr_scheduler_type"] == "cosine_with_min_lr"
    assert not any(key.startswith("_") for key in data)
    assert set(data) == {f.name for f in dataclasses.fields(TrainingArguments) if not f.name.startswith("_")}
    text = args.to_json_string()
    assert json.loads(text) == data
    assert json.loads(args.to_json_string(indent=None)) == data
    restored = TrainingArguments.from_dict(json.loads(text))
    assert restored == args
    assert restored.to_dict() == data


def test_from_dict_rejects_unknown_keys():
    with pytest.raises(ValueError) as info:
        TrainingArguments.from_dict({"learning_rat": 1e-3, "bogus": 1, "seed": 1})
    message = str(info.value)
    assert "'learning_rat'" in message and "'bogus'" in message and "did you mean 'learning_rate'" in message
    with pytest.raises(ValueError, match="_derived"):
        TrainingArguments.from_dict({"_derived": {}})
    with pytest.raises(ValueError, match="dict"):
        TrainingArguments.from_dict([("seed", 1)])


def test_to_sanitized_dict_has_only_scalars():
    args = TrainingArguments(label_names=["a"], optim_args={"momentum": 0.9})
    sanitized = args.to_sanitized_dict()
    assert all(isinstance(v, (bool, int, float, str)) for v in sanitized.values())
    assert sanitized["label_names"] == "['a']"
    assert sanitized["eval_steps"] == "None"
    assert sanitized["learning_rate"] == 5e-5


def test_repr_and_str_are_readable():
    args = TrainingArguments(output_dir="out")
    text = repr(args)
    assert text.startswith("TrainingArguments(\n")
    assert "    learning_rate=5e-05,\n" in text
    assert "eval_strategy='no'" in text
    assert str(args) == text


def test_pickle_and_deepcopy():
    args = TrainingArguments(eval_strategy="steps", optim_args={"momentum": 0.9}, report_to="jsonl")
    assert pickle.loads(pickle.dumps(args)) == args
    clone = copy.deepcopy(args)
    assert clone == args and clone.optim_args is not args.optim_args


# ---- helpers -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "total", "expected"),
    [
        ({}, 100, 0),
        ({"warmup_steps": 7}, 100, 7),
        ({"warmup_steps": 7, "warmup_ratio": 0.5}, 100, 7),  # warmup_steps wins
        ({"warmup_ratio": 0.1}, 95, 10),  # ceil(9.5)
        ({"warmup_steps": 0.25}, 10, 3),  # ceil(2.5)
        ({"warmup_ratio": 1.0}, 10, 10),
        ({"warmup_ratio": 0.5}, 0, 0),
    ],
)
def test_get_warmup_steps(kwargs, total, expected):
    assert TrainingArguments(**kwargs).get_warmup_steps(total) == expected


def test_resolve_steps():
    args = TrainingArguments()
    assert args.resolve_steps(50, 1000) == 50
    assert args.resolve_steps(0.1, 1000) == 100
    assert args.resolve_steps(0.15, 10) == 2  # ceil(1.5)
    assert args.resolve_steps(0.01, 10) == 1  # at least one step
    with pytest.raises(ValueError, match="value"):
        args.resolve_steps(0, 10)
    with pytest.raises(ValueError, match="num_training_steps"):
        args.resolve_steps(0.5, -1)
    with pytest.raises(ValueError, match="num_training_steps"):
        args.get_warmup_steps(None)


# ---------------------------------------------------------------------------------------------- grouped setters
def test_grouped_setters_set_their_fields_in_place_and_chain(tmp_path):
    args = TrainingArguments(str(tmp_path))
    same = (
        args.set_training(
            learning_rate=1e-3,
            batch_size=16,
            weight_decay=0.1,
            num_epochs=2,
            max_steps=50,
            gradient_accumulation_steps=2,
            seed=7,
        )
        .set_evaluate(strategy="steps", steps=10, batch_size=4, accumulation_steps=2, delay=3, loss_only=True)
        .set_save(strategy="epoch", total_limit=2)
        .set_logging(strategy="steps", steps=5, first_step=True, level="info")
        .set_optimizer(name="sgd", learning_rate=0.1, beta1=0.8, beta2=0.9, epsilon=1e-6, args="momentum=0.5")
        .set_lr_scheduler(name="cosine", num_epochs=4, warmup_steps=3)
        .set_dataloader(train_batch_size=3, eval_batch_size=6, drop_last=True, sampler_seed=5)
    )
    assert same is args
    # set_lr_scheduler sets the training length again (max_steps back to its default -1), as in transformers.
    assert (args.do_train, args.gradient_accumulation_steps, args.seed, args.max_steps) == (True, 2, 7, -1)
    assert (args.eval_strategy, args.eval_steps, args.eval_accumulation_steps, args.eval_delay) == (
        "steps",
        10,
        2,
        3,
    )
    assert args.do_eval and args.prediction_loss_only
    assert (args.save_strategy, args.save_total_limit) == ("epoch", 2)
    assert (args.logging_strategy, args.logging_steps, args.logging_first_step, args.log_level) == (
        "steps",
        5,
        True,
        "info",
    )
    assert args.logging_nan_inf_filter is False  # transformers' setter default, unlike the constructor's
    assert (args.optim, args.learning_rate, args.adam_beta1, args.adam_beta2, args.adam_epsilon) == (
        "sgd",
        0.1,
        0.8,
        0.9,
        1e-6,
    )
    assert args.optim_args == {"momentum": 0.5}
    assert (args.lr_scheduler_type, args.num_train_epochs, args.warmup_steps) == ("cosine", 4, 3)
    assert (args.per_device_train_batch_size, args.per_device_eval_batch_size) == (3, 6)
    assert (args.dataloader_drop_last, args.data_seed) == (True, 5)
    assert args.set_testing(batch_size=9).do_predict and args.per_device_eval_batch_size == 9
    assert args.set_evaluate("no").do_eval is False
    assert (
        args.set_training(activation_checkpointing=True).gradient_checkpointing is True
    )  # transformers 5's name


def test_grouped_setters_validate_like_the_constructor_and_leave_refused_values_out(tmp_path):
    args = TrainingArguments(str(tmp_path), eval_strategy="epoch")
    before = args.to_dict()
    with pytest.raises(ValueError, match="learning_rate"):
        args.set_training(learning_rate=-1.0)
    with pytest.raises(ValueError, match="save_strategy"):
        args.set_save("sometimes")
    with pytest.raises(ValueError, match="requires a positive value for `steps`"):
        args.set_evaluate("steps", steps=0)
    with pytest.raises(ValueError, match="requires a positive value for `steps`"):
        args.set_logging(IntervalStrategy.STEPS, steps=0)
    with pytest.raises(ValueError, match="does not push to the Hugging Face Hub"):
        args.set_push_to_hub("me/model")
    assert args.to_dict() == before
    # Fields derived from others are derived again: eval_steps falls back on the new logging_steps.
    args.set_logging(steps=7).set_evaluate("steps", steps=None)  # type: ignore[arg-type]
    assert args.eval_steps == 7
    # The seed documentation's parameters: jit_mode (refused when True, as jit_mode_eval) and warmup_ratio.
    with pytest.raises(ValueError, match="jit_mode_eval"):
        args.set_testing(jit_mode=True)
    assert args.set_lr_scheduler(warmup_ratio=0.1).warmup_ratio == 0.1


def test_fields_normalised_as_transformers_does(tmp_path):
    # include_num_input_tokens_seen holds one of three names; use_cpu turns pinned memory off (until use_cpu is
    # replaced by False); a torch.dtype field of a subclass is written as "float32", not "torch.float32".
    make = TrainingArguments
    assert make(str(tmp_path)).include_num_input_tokens_seen == "no"
    assert make(str(tmp_path), include_num_input_tokens_seen=True).include_num_input_tokens_seen == "all"
    assert make(str(tmp_path), include_num_input_tokens_seen=False).include_num_input_tokens_seen == "no"
    assert (
        make(str(tmp_path), include_num_input_tokens_seen="non_padding").include_num_input_tokens_seen
        == "non_padding"
    )
    with pytest.raises(ValueError, match="include_num_input_tokens_seen"):
        make(str(tmp_path), include_num_input_tokens_seen="some")
    on_cpu = make(str(tmp_path), use_cpu=True)
    assert on_cpu.dataloader_pin_memory is False
    assert on_cpu.replace(use_cpu=False).dataloader_pin_memory is True
    assert (
        make(str(tmp_path), use_cpu=True, dataloader_pin_memory=False)
        .replace(use_cpu=False)
        .dataloader_pin_memory
        is False
    )

    @dataclasses.dataclass
    class WithDtype(TrainingArguments):
        dtype: torch.dtype = torch.float32

    args = WithDtype(str(tmp_path), dtype=torch.bfloat16)
    assert args.to_dict()["dtype"] == "bfloat16"
    assert '"dtype": "bfloat16"' in args.to_json_string()


def test_grouped_setters_as_transformers_names_them(tmp_path):
    # transformers' set_training/set_evaluate/...: set the fields, validate, return the arguments (calls chain).
    args = TrainingArguments(str(tmp_path))
    same = (
        args.set_training(learning_rate=1e-4, batch_size=16, gradient_checkpointing=True)
        .set_evaluate(strategy="steps", steps=100, delay=None)
        .set_save(strategy="steps", steps=200, total_limit=2)
        .set_logging(strategy="steps", steps=10, first_step=True)
        .set_optimizer(name="sgd", learning_rate=0.1, args="momentum=0.9")
        .set_lr_scheduler(name="cosine", warmup_steps=0.05)
        .set_dataloader(train_batch_size=4, sampler_seed=3)
        .set_testing(batch_size=2)
    )  # after set_dataloader, which sets the evaluation batch size too
    assert same is args
    assert (
        args.do_train,
        args.activation_checkpointing,
        args.eval_strategy,
        args.do_eval,
        args.eval_steps,
    ) == (True, True, IntervalStrategy.STEPS, True, 100)
    assert (args.do_predict, args.per_device_eval_batch_size, args.save_steps, args.save_total_limit) == (
        True,
        2,
        200,
        2,
    )
    assert (args.logging_steps, args.logging_first_step, args.optim, args.learning_rate) == (
        10,
        True,
        "sgd",
        0.1,
    )
    assert args.optim_args == {"momentum": 0.9}
    assert (args.lr_scheduler_type, args.warmup_steps, args.per_device_train_batch_size, args.data_seed) == (
        SchedulerType.COSINE,
        0.05,
        4,
        3,
    )
    with pytest.raises(ValueError, match="requires a positive value for `steps`"):
        args.set_save(strategy="steps", steps=0)
    with pytest.raises(ValueError, match="learning_rate"):
        args.set_optimizer(learning_rate=-1.0)
    assert args.learning_rate == 0.1  # a refused call changes nothing
    with pytest.raises(ValueError, match="Hub"):
        args.set_push_to_hub("me/model")
