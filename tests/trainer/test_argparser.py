from __future__ import annotations

import argparse
import enum
import json
from dataclasses import dataclass, field
from typing import Literal, Optional

import pytest
import yaml

from trainer._argparser import DataclassArgumentParser
from trainer._training_args import IntervalStrategy, SchedulerType, TrainingArguments


class Color(str, enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass
class ModelArgs:
    model_name: str = field(metadata={"help": "Name of the model to build."})
    hidden_size: int = 16
    dropout: float = 0.1
    color: Color = Color.RED
    mode: Literal["fast", "slow"] = "fast"
    use_bias: bool = True
    freeze: bool = False
    maybe: Optional[bool] = None
    layers: list[int] = field(default_factory=lambda: [4, 4])
    tags: Optional[list[str]] = None
    extra: dict = field(default_factory=dict)
    max_len: int | None = None


@dataclass
class DataArgs:
    dataset: str = "toy"
    num_samples: int = 100


def make_parser(*types):
    return DataclassArgumentParser(list(types) or [ModelArgs])


def test_defaults_come_from_the_dataclass():
    (model,) = make_parser().parse_args_into_dataclasses(["--model_name", "m"])
    assert model == ModelArgs(model_name="m")
    assert model.color is Color.RED
    (other,) = make_parser().parse_args_into_dataclasses(["--model_name", "m"])
    assert other.layers is not model.layers  # default_factory runs per instance


def test_every_kind_of_field():
    parser = make_parser()
    (model,) = parser.parse_args_into_dataclasses(
        [
            "--model_name=m",
            "--hidden-size", "32",
            "--dropout", "0.25",
            "--color", "blue",
            "--mode", "slow",
            "--no_use_bias",
            "--freeze",
            "--maybe", "no",
            "--layers", "1", "2", "3",
            "--tags", "a", "b",
            "--extra", '{"k": [1, 2]}',
            "--max_len", "128",
        ]
    )  # fmt: skip
    assert model == ModelArgs(
        model_name="m",
        hidden_size=32,
        dropout=0.25,
        color=Color.BLUE,
        mode="slow",
        use_bias=False,
        freeze=True,
        maybe=False,
        layers=[1, 2, 3],
        tags=["a", "b"],
        extra={"k": [1, 2]},
        max_len=128,
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("true", True),
        ("True", True),
        ("yes", True),
        ("1", True),
        ("false", False),
        ("no", False),
        ("0", False),
    ],
)
def test_bool_values(text, expected):
    (model,) = make_parser().parse_args_into_dataclasses(
        ["--model_name", "m", "--freeze", text, "--use-bias", text]
    )
    assert model.freeze is expected and model.use_bias is expected


def test_no_flag_with_dashes_and_optional_bool_flag():
    (model,) = make_parser().parse_args_into_dataclasses(["--model_name", "m", "--no-use-bias", "--maybe"])
    assert model.use_bias is False and model.maybe is True


@pytest.mark.parametrize(
    "argv",
    [
        [],  # model_name is required
        ["--model_name", "m", "--freeze", "maybe"],
        ["--model_name", "m", "--color", "green"],
        ["--model_name", "m", "--mode", "medium"],
        ["--model_name", "m", "--hidden_size", "1.5"],
        ["--model_name", "m", "--extra", "[1]"],
        ["--model_name", "m", "--extra", "{not json"],
        ["--model_name", "m", "--layers"],
    ],
)
def test_bad_command_lines_exit_with_usage(argv, capsys):
    with pytest.raises(SystemExit) as info:
        make_parser().parse_args_into_dataclasses(argv)
    assert info.value.code == 2
    assert "usage:" in capsys.readouterr().err


def test_prefixes_are_not_expanded():
    with pytest.raises(ValueError, match="--hidden"):
        make_parser().parse_args_into_dataclasses(["--model_name", "m", "--hidden", "3"])


def test_unknown_arguments():
    parser = make_parser()
    with pytest.raises(ValueError) as info:
        parser.parse_args_into_dataclasses(["--model_name", "m", "--bogus", "1"])
    assert "--bogus" in str(info.value)
    model, remaining = parser.parse_args_into_dataclasses(
        ["--model_name", "m", "--bogus", "1"], return_remaining_strings=True
    )
    assert model.model_name == "m" and remaining == ["--bogus", "1"]


def test_several_dataclasses_and_extra_arguments():
    parser = make_parser(ModelArgs, DataArgs)
    parser.add_argument("--verbose", action="store_true")
    model, data, namespace = parser.parse_args_into_dataclasses(
        ["--model_name", "m", "--dataset", "big", "--num_samples", "5", "--verbose"]
    )
    assert model.model_name == "m" and data == DataArgs("big", 5)
    assert isinstance(namespace, argparse.Namespace) and namespace.verbose is True
    model, data = make_parser(ModelArgs, DataArgs).parse_args_into_dataclasses(["--model_name", "m"])
    assert data == DataArgs()


def test_args_file_is_read_first_and_overridden(tmp_path):
    path = tmp_path / "run.args"
    path.write_text("# defaults for this run\n--model_name from_file\n--hidden_size 64\n--dropout 0.5\n")
    (model,) = make_parser().parse_args_into_dataclasses(["--dropout", "0.3"], args_filename=path)
    assert (model.model_name, model.hidden_size, model.dropout) == ("from_file", 64, 0.3)


def test_sys_argv_is_the_default(monkeypatch):
    monkeypatch.setattr("sys.argv", ["prog", "--model_name", "argv"])
    (model,) = make_parser().parse_args_into_dataclasses()
    assert model.model_name == "argv"


def test_help_shows_metadata_and_defaults():
    text = make_parser().format_help()
    assert "Name of the model to build." in text
    assert "--hidden_size" in text and "--hidden-size" in text
    assert "(default: 16)" in text
    assert "--no_use_bias" in text
    assert "{red,blue}" in text


def test_constructor_errors():
    with pytest.raises(ValueError, match="dataclass"):
        DataclassArgumentParser([int])
    with pytest.raises(ValueError, match="dataclass"):
        DataclassArgumentParser(DataArgs())
    with pytest.raises(ValueError, match="'dataset'"):
        DataclassArgumentParser([DataArgs, DataArgs])
    parser = DataclassArgumentParser(DataArgs, prog="train", description="Train it.")
    assert parser.prog == "train" and parser.dataclass_types == [DataArgs]


# ---- TrainingArguments -------------------------------------------------------------------------------------


def test_training_arguments_from_the_command_line():
    parser = DataclassArgumentParser(TrainingArguments)
    (args,) = parser.parse_args_into_dataclasses(
        [
            "--output_dir", "out",
            "--learning_rate", "1e-4",
            "--eval_strategy", "steps",
            "--eval_steps", "10",
            "--save_steps", "0.5",
            "--lr_scheduler_type", "cosine",
            "--lr_scheduler_kwargs", '{"num_cycles": 2}',
            "--report_to", "tensorboard", "jsonl",
            "--label_names", "labels", "aux",
            "--no_dataloader_pin_memory",
            "--load_best_model_at_end", "false",
            "--greater_is_better",
            "--metric_for_best_model", "accuracy",
            "--max_checkpoint_shard_size", "100MB",
            "--log_level", "info",
        ]
    )  # fmt: skip
    assert args.output_dir == "out" and args.learning_rate == 1e-4
    assert args.eval_strategy is IntervalStrategy.STEPS and args.eval_steps == 10
    assert args.save_steps == 0.5
    assert args.lr_scheduler_type is SchedulerType.COSINE and args.lr_scheduler_kwargs == {"num_cycles": 2}
    assert args.report_to == ["tensorboard", "jsonl"]
    assert args.label_names == ["labels", "aux"]
    assert args.dataloader_pin_memory is False and args.load_best_model_at_end is False
    assert args.greater_is_better is True and args.metric_for_best_model == "accuracy"
    assert args.max_checkpoint_shard_bytes == 100 * 10**6
    assert args == TrainingArguments(
        output_dir="out",
        learning_rate=1e-4,
        eval_strategy="steps",
        eval_steps=10,
        save_steps=0.5,
        lr_scheduler_type="cosine",
        lr_scheduler_kwargs={"num_cycles": 2},
        report_to=["tensorboard", "jsonl"],
        label_names=["labels", "aux"],
        dataloader_pin_memory=False,
        greater_is_better=True,
        metric_for_best_model="accuracy",
        max_checkpoint_shard_size="100MB",
        log_level="info",
        logging_dir=args.logging_dir,
    )


def test_training_arguments_options_skip_private_fields_and_use_choices(capsys):
    parser = DataclassArgumentParser(TrainingArguments)
    assert "_derived" not in parser.format_help()
    with pytest.raises(SystemExit):
        parser.parse_args_into_dataclasses(["--optim", "lion"])
    assert "invalid choice" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser.parse_args_into_dataclasses(["--log_level", "loud"])


def test_training_arguments_validation_applies():
    parser = DataclassArgumentParser(TrainingArguments)
    with pytest.raises(ValueError, match="per_device_train_batch_size must be a positive integer, got 0"):
        parser.parse_args_into_dataclasses(["--per_device_train_batch_size", "0"])
    with pytest.raises(ValueError, match="load_best_model_at_end"):
        parser.parse_dict({"load_best_model_at_end": True})


# ---- dicts and files ---------------------------------------------------------------------------------------


def test_parse_dict():
    parser = make_parser(ModelArgs, DataArgs)
    model, data = parser.parse_dict({"model_name": "m", "color": Color.BLUE, "num_samples": 3})
    assert model == ModelArgs(model_name="m", color=Color.BLUE) and data == DataArgs(num_samples=3)
    with pytest.raises(ValueError) as info:
        parser.parse_dict({"model_name": "m", "nope": 1, "zzz": 2})
    message = str(info.value)
    assert "['nope', 'zzz']" in message and "allow_extra_keys" in message and "num_samples" in message
    model, data = parser.parse_dict({"model_name": "m", "nope": 1}, allow_extra_keys=True)
    assert model.model_name == "m"
    with pytest.raises(ValueError, match="dict"):
        parser.parse_dict(["model_name"])


def test_parse_json_and_yaml_files(tmp_path):
    config = {
        "output_dir": "out",
        "learning_rate": 0.001,
        "eval_strategy": "epoch",
        "save_strategy": "epoch",
        "load_best_model_at_end": True,
        "optim_args": {"momentum": 0.9},
        "optim": "sgd",
    }
    parser = DataclassArgumentParser([TrainingArguments])
    json_path = tmp_path / "args.json"
    json_path.write_text(json.dumps(config))
    yaml_path = tmp_path / "args.yaml"
    yaml_path.write_text(yaml.safe_dump(config))
    (from_json,) = parser.parse_json_file(json_path)
    (from_yaml,) = parser.parse_yaml_file(str(yaml_path))
    assert from_json.learning_rate == 0.001 and from_json.metric_for_best_model == "loss"
    assert from_json.optim_args == {"momentum": 0.9}
    assert from_yaml.to_dict() == {**from_json.to_dict(), "logging_dir": from_yaml.logging_dir}

    yaml_path.write_text(yaml.safe_dump({**config, "extra_key": 1}))
    with pytest.raises(ValueError, match="extra_key"):
        parser.parse_yaml_file(yaml_path)
    (args,) = parser.parse_yaml_file(yaml_path, allow_extra_keys=True)
    assert args.learning_rate == 0.001

    json_path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="JSON object"):
        parser.parse_json_file(json_path)
    yaml_path.write_text("- 1\n")
    with pytest.raises(ValueError, match="YAML mapping"):
        parser.parse_yaml_file(yaml_path)
    yaml_path.write_text("")
    (empty,) = parser.parse_yaml_file(yaml_path)
    assert empty.learning_rate == 5e-5
