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
    base: dict[str, Any] = {
        "output_dir": str(tmp / "out"),
        "disable_tqdm": True,
        "report_to": "none",
        "max_steps": 4,
        "per_device_train_batch_size": 8,
        "save_strategy": "no",
    }
    return TrainingArguments(**{**base, **kw})


# --- item 2: Hub tokens are never written ---
def test_hub_tokens_never_reach_files_or_logs(tmp_path):
    secret = "hf_DoNotWriteMe123"
    with pytest.warns(FutureWarning):
        legacy = args(tmp_path, push_to_hub_token=secret + "legacy")
    assert legacy.hub_token == secret + "legacy"
    trainer = Trainer(
        model=Model(),
        args=args(
            tmp_path,
            hub_token=secret,
            save_strategy="steps",
            save_steps=2,
            max_steps=2,
            report_to="jsonl",
            logging_steps=1,
        ),
        train_dataset=Data(),
    )
    trainer.train()
    trainer.save_model()
    written = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert any(p.name == "training_args.bin" for p in written) and any(
        p.name == "training_args.json" for p in written
    )
    for path in written:
        assert secret.encode() not in path.read_bytes(), path
    assert trainer.args.hub_token == secret  # the live arguments keep it for the script
    assert secret not in repr(trainer.args) and secret not in str(trainer.state.log_history)


def test_hub_arguments_from_the_command_line(tmp_path):
    cli = [
        "--output_dir",
        str(tmp_path),
        "--hub_model_id",
        "me/m",
        "--hub_strategy",
        "checkpoint",
        "--hub_private_repo",
        "--hub_always_push",
        "--hub_token",
        "tok",
    ]
    (parsed,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses(cli)
    assert (parsed.hub_model_id, parsed.hub_strategy, parsed.hub_private_repo, parsed.hub_always_push) == (
        "me/m",
        "checkpoint",
        True,
        True,
    )
    assert parsed.to_dict()["hub_token"] == "<HUB_TOKEN>"
    with pytest.raises(ValueError, match="hub_strategy must be one of 'end'"):
        HfArgumentParser(TrainingArguments).parse_args_into_dataclasses(
            ["--output_dir", str(tmp_path), "--hub_strategy", "never"]
        )


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
        trainer = Trainer(
            Model(), args(tmp_path), default_data_collator, Data(), None, tokenizer
        )  # the seed's order
    assert trainer.processing_class is tokenizer and trainer.model_init is None
    trainer.train()  # trains the given model, not tokenizer(trial)
    trainer.save_model()
    assert (tmp_path / "out" / "tokenizer.json").is_file()  # saved beside the model, as a processing_class is


def test_seed_positional_tokenizer_with_later_arguments_says_what_to_do(tmp_path):
    tokenizer = tiny_tokenizer()
    with pytest.raises(
        ValueError,
        match=r"model_init=\w+ is a tokenizer/processor.*"
        r"compute_metrics was given as well.*processing_class=",
    ):
        Trainer(Model(), args(tmp_path), None, Data(), None, tokenizer, lambda p: {})
    with pytest.raises(ValueError, match="processing_class \\(or tokenizer\\) was given too"):
        Trainer(Model(), args(tmp_path), None, Data(), None, tokenizer, processing_class=tokenizer)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a model_init function or class is not mistaken for a processor
        assert Trainer(None, args(tmp_path), None, Data(), None, Model).model_init is Model


# --- item 1: the model card, compared with what transformers' TrainingSummary writes for the same trainer ---
def _sections(card: str) -> tuple[dict[str, Any], dict[str, str]]:
    import yaml

    assert card.startswith("---\n")
    front, body = card[4:].split("\n---\n", 1)
    sections: dict[str, str] = {}
    title = "intro"
    for line in body.splitlines():
        if line.startswith("#"):
            title = line
            sections[title] = ""
        else:
            sections[title] = sections.get(title, "") + line + "\n"
    return yaml.safe_load(front), sections


@pytest.fixture
def bert_trainer(tmp_path):
    import datasets  # a test extra (pyproject), like transformers
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30,
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=16,
        num_labels=2,
    )
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, 30, (16, 6), generator=g)
    data = datasets.Dataset.from_dict({"input_ids": ids.tolist(), "labels": (ids[:, 0] % 2).tolist()})

    def accuracy(p):
        return {"accuracy": float((p.predictions.argmax(-1) == p.label_ids).mean())}

    trainer = Trainer(
        model=BertForSequenceClassification(config),
        train_dataset=data,
        eval_dataset=data,
        compute_metrics=accuracy,
        args=args(
            tmp_path,
            output_dir=str(tmp_path / "tiny-bert"),
            eval_strategy="steps",
            eval_steps=2,
            logging_steps=1,
            gradient_accumulation_steps=2,
            warmup_steps=1,
            optim_args="momentum=0.9",
            optim="sgd",
        ),
    )
    trainer.train()
    return trainer


SCRIPT_KWARGS = {
    "language": "en",
    "license": "apache-2.0",
    "tags": ["demo"],
    "tasks": "text-classification",
    "finetuned_from": "google-bert/bert-base-uncased",
    "dataset_tags": "glue",
    "dataset": "GLUE MRPC",
    "dataset_args": "mrpc",
}  # what transformers' run_glue.py passes (plus tags)
# Few arguments: the task is inferred from the model's class, the dataset only named.
FEW_KWARGS = {
    "license": "mit",
    "finetuned_from": "prajjwal1/bert-tiny",
    "dataset": ["my data", "more data"],
    "dataset_tags": "imdb",
}


@pytest.mark.parametrize("kwargs", [SCRIPT_KWARGS, FEW_KWARGS], ids=["script", "few"])
def test_model_card_has_transformers_sections(bert_trainer, kwargs):
    from transformers import modelcard

    class Proxy:  # what TrainingSummary reads of a trainer; our arguments have no parallel_mode
        def __init__(self, trainer):
            self.model, self.state = trainer.model, trainer.state
            self.train_dataset, self.eval_dataset = trainer.train_dataset, trainer.eval_dataset
            self.args = type(
                "Args",
                (),
                {
                    "__getattr__": lambda _, name: getattr(trainer.args, name),
                    "parallel_mode": modelcard.ParallelMode.NOT_DISTRIBUTED,
                },
            )()

    bert_trainer.create_model_card(**{k: list(v) if isinstance(v, list) else v for k, v in kwargs.items()})
    ours = (Path(bert_trainer.args.output_dir) / "README.md").read_text()
    theirs = modelcard.TrainingSummary.from_trainer(
        Proxy(bert_trainer), **{k: list(v) if isinstance(v, list) else v for k, v in kwargs.items()}
    ).to_model_card()
    (our_meta, our_sections), (their_meta, their_sections) = _sections(ours), _sections(theirs)
    # On purpose (README, differences): an in-memory dataset (no builder) gets no {"config": None, "split": "None"}.
    for result in their_meta["model-index"][0]["results"]:
        assert (result["dataset"].pop("config"), result["dataset"].pop("split")) == (None, "None")
    assert our_meta == their_meta
    result = our_meta["model-index"][0]["results"][0]
    assert result["metrics"][0]["type"] == "accuracy" and result["task"]["type"] == "text-classification"
    assert list(our_sections) == list(their_sections)
    versions = "### Framework versions"
    for title in our_sections:
        if title != versions:
            assert our_sections[title] == their_sections[title], title
    import sys

    imported = [
        line
        for line in their_sections[versions].splitlines()
        if line and line.split()[1].lower().replace("pytorch", "torch") in sys.modules
    ]
    assert set(imported) <= set(our_sections[versions].splitlines())
    assert "- Accelerate" in our_sections[versions] and "- hpsearch trainer" in our_sections[versions]
    # The numbers are the run's: the last evaluation and a table row per evaluation.
    last_eval = [h for h in bert_trainer.state.log_history if "eval_loss" in h][-1]
    assert f"- Loss: {last_eval['eval_loss']:.4f}" in our_sections["# tiny-bert"]
    rows = [line for line in our_sections["### Training results"].splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + 2  # the header and the 2 evaluations


def test_model_card_from_scratch_and_existing_tags(bert_trainer):
    out = Path(bert_trainer.args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "README.md").write_text("---\ntags:\n- kept\n---\nold card\n")
    bert_trainer.create_model_card(tags=["new"])
    meta, sections = _sections((out / "README.md").read_text())
    assert meta["tags"] == ["new", "kept", "generated_from_trainer"] and "base_model" not in meta
    # A model built from a config (``_name_or_path`` == "") was trained from scratch, not fine-tuned from "".
    assert "This model was trained from scratch on an unknown dataset." in sections["# tiny-bert"]


# --- item 10: DebugUnderflowOverflow's batch tracing and abort ---
def test_debug_underflow_overflow_traces_batches_and_aborts(caplog):
    from trainer import DebugUnderflowOverflow

    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    debug = DebugUnderflowOverflow(model, trace_batch_nums=[1], abort_after_batch_num=2)
    x = torch.ones(4, 2)
    with caplog.at_level("WARNING", logger="trainer._debug"):
        model(x)
        model(x * 1000)
        with pytest.raises(ValueError, match=r"stopping after batch 2 .*abort_after_batch_num=2"):
            model(x)
    assert list(debug.traces) == [1] and [line.split(" ")[0] for line in debug.traces[1]] == [
        "0",
        "1",
        "2",
        "Sequential",
    ]
    assert "abs min 1.000e+03 max 1.000e+03" in debug.traces[1][0]  # the traced batch's own inputs
    assert "batch 1, every module in call order" in caplog.text and debug.handles == []
    model(x)  # the hooks are gone after the abort
    with pytest.raises(ValueError, match="trace_batch_nums must be a list of batch numbers"):
        DebugUnderflowOverflow(model, trace_batch_nums=[-1])
    with pytest.raises(ValueError, match="abort_after_batch_num must be a batch number"):
        DebugUnderflowOverflow(model, abort_after_batch_num="3")


# --- item 10: HfArgumentParser's argument groups and argument files ---
def test_argparser_group_name_and_argument_files(tmp_path, monkeypatch):
    import dataclasses

    @dataclasses.dataclass
    class ModelArguments:
        _argument_group_name = "Model options"
        model_name: str = "tiny"
        dropout: float = 0.1

    parser = HfArgumentParser(ModelArguments)
    assert "Model options:" in parser.format_help()
    script = tmp_path / "train.py"
    (tmp_path / "train.args").write_text("--model_name from_script_file --dropout 0.2\n")
    (tmp_path / "a.args").write_text("--dropout 0.3")
    (tmp_path / "b.args").write_text("--dropout 0.4 --model_name from_b")
    monkeypatch.setattr("sys.argv", [str(script)])
    (found,) = parser.parse_args_into_dataclasses([])
    assert (found.model_name, found.dropout) == (
        "from_script_file",
        0.2,
    )  # <script>.args, as transformers reads it
    (found,) = parser.parse_args_into_dataclasses(["--dropout", "0.5"])
    assert found.dropout == 0.5  # the command line overrides the file
    (found,) = parser.parse_args_into_dataclasses([], look_for_args_file=False)
    assert (found.model_name, found.dropout) == ("tiny", 0.1)
    (found,) = parser.parse_args_into_dataclasses(
        ["--cfg", str(tmp_path / "a.args"), "--cfg", str(tmp_path / "b.args")], args_file_flag="--cfg"
    )
    assert (found.model_name, found.dropout) == ("from_b", 0.4)  # after <script>.args; the last file wins
    with pytest.raises(
        ValueError, match=r"--cfg names the argument file .*missing.args', which does not exist"
    ):
        parser.parse_args_into_dataclasses(["--cfg", str(tmp_path / "missing.args")], args_file_flag="--cfg")


# --- item 10: an IterableDataset's own generator is reseeded every epoch ---
class RandomStream(torch.utils.data.IterableDataset):
    """Draws its examples from its own generator (as transformers' test datasets do)."""

    def __init__(self, start_seed: int, n: int = 4) -> None:
        self.generator = torch.Generator().manual_seed(start_seed)
        self.n = n

    def __iter__(self):
        for _ in range(self.n):
            x = torch.randn(4, generator=self.generator)
            yield {"x": x, "labels": x.sum()}


class Recording(Model):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[torch.Tensor] = []

    def forward(self, x, labels=None):
        self.seen.append(x.detach().clone())
        return super().forward(x, labels)


def stream_epochs(tmp: Path, start_seed: int, seed: int = 42) -> list[torch.Tensor]:
    model = Recording()
    Trainer(
        model=model,
        args=args(tmp, max_steps=4, per_device_train_batch_size=2, seed=seed),
        train_dataset=RandomStream(start_seed),
    ).train()
    return model.seen  # 2 epochs of 2 batches


def test_iterable_dataset_generator_reseeded_per_epoch(tmp_path):
    first, other_start = stream_epochs(tmp_path, start_seed=0), stream_epochs(tmp_path, start_seed=123)
    assert all(torch.equal(a, b) for a, b in zip(first, other_start))  # each epoch from data_seed + epoch
    assert not torch.equal(first[0], first[2])  # epoch 1 is not epoch 0 again
    assert not torch.equal(stream_epochs(tmp_path, start_seed=0, seed=7)[0], first[0])


# --- item 10: num_tokens, is_model_parallel, place_model_on_device ---
class TokenBatches(Dataset):
    def __len__(self) -> int:
        return 10

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"input_ids": torch.arange(6) + i, "labels": torch.tensor(float(i))}


def test_num_tokens(tmp_path):
    trainer = Trainer(
        model=Model(),
        args=args(tmp_path, per_device_train_batch_size=4, remove_unused_columns=False),
        train_dataset=TokenBatches(),
    )
    loader = trainer.get_train_dataloader()
    assert trainer.num_tokens(loader) == 10 * 6  # batches of 4, 4 and 2 examples of 6 tokens
    assert trainer.num_tokens(loader, max_steps=5) == 4 * 6 * 5
    with pytest.raises(
        ValueError, match=r"num_tokens counts the elements of each batch's 'input_ids'.*\['x', 'labels'\]"
    ):
        trainer.num_tokens(
            Trainer(model=Model(), args=args(tmp_path), train_dataset=Data()).get_train_dataloader()
        )


def test_is_model_parallel_and_place_model_on_device(tmp_path):
    trainer = Trainer(model=Model(), args=args(tmp_path, use_cpu=True), train_dataset=Data())
    assert trainer.is_model_parallel is False and trainer.place_model_on_device is True
    trainer.model.hf_device_map = {"linear": "cpu"}  # one device, the trainer's: placed as usual
    assert trainer.is_model_parallel is False and trainer.place_model_on_device is True
    trainer.model.hf_device_map = {"linear": 0, "head": 1}  # spread over two GPUs by a device_map
    assert trainer.is_model_parallel is True and trainer.place_model_on_device is False
    trainer.model.hf_device_map = {"linear": "cpu", "head": "disk"}  # offloaded: accelerate leaves it too
    assert trainer.is_model_parallel is False and trainer.place_model_on_device is False
    with pytest.raises(AttributeError):
        trainer.place_model_on_device = True  # type: ignore[misc]  # follows from the model, not settable


def test_place_model_on_device_override_is_checked(tmp_path):
    class KeepOnHost(TrainingArguments):
        @property
        def place_model_on_device(
            self,
        ):  # transformers' hook for integrations that place the model themselves
            return False

    with pytest.raises(
        ValueError, match=r"KeepOnHost.place_model_on_device=False, but this trainer moves the model"
    ):
        Trainer(
            model=Model(), args=KeepOnHost(output_dir=str(tmp_path), report_to="none"), train_dataset=Data()
        )
    model = Model()
    model.hf_device_map = {"linear": "cpu", "head": "disk"}  # where accelerate does not move it: they agree
    assert (
        Trainer(
            model=model, args=KeepOnHost(output_dir=str(tmp_path), report_to="none")
        ).place_model_on_device
        is False
    )


def test_search_with_full_fp16_evaluation_on_the_cpu(tmp_path):
    """transformers' own search test with fp16_full_eval runs on a CPU; so does this one (real Optuna)."""
    import math

    import optuna

    from spaces import Float

    trainer = Trainer(
        model_init=Model,
        args=args(
            tmp_path,
            fp16_full_eval=True,
            use_cpu=True,
            eval_strategy="steps",
            eval_steps=2,
            num_train_epochs=1,
            max_steps=-1,
        ),
        train_dataset=Data(),
        eval_dataset=Data(8),
    )
    best = trainer.hyperparameter_search(
        hp_space={"learning_rate": Float(1e-3, 1e-1, log=True)},
        n_trials=2,
        backend="optuna",
        sampler=optuna.samplers.RandomSampler(seed=0),
    )
    assert best is not None and math.isfinite(best.objective)
    half = trainer.evaluate()  # outside training: the model itself evaluates in float16
    assert trainer.model.linear.weight.dtype == torch.float16 and math.isfinite(half["eval_loss"])
