"""Seq2SeqTrainer on a tiny T5 built from a config (no downloads): generation in evaluate/predict, token ids to
compute_metrics, the sortish sampler, a search over generation settings, and two processes under accelerate."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import hpsearch
import spaces
from tests._launch import accelerate_launch
from trainer import Seq2SeqTrainer, Seq2SeqTrainingArguments

VOCAB = 20
PAD, EOS = 0, 1


class CopyTask(torch.utils.data.Dataset):
    """Copy a random sequence of tokens 2..VOCAB-1 (lengths 3..7), ending with EOS."""

    def __init__(self, n: int, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.rows = []
        for _ in range(n):
            length = int(rng.integers(3, 8))
            tokens = [int(t) for t in rng.integers(2, VOCAB, size=length)] + [EOS]
            self.rows.append(tokens)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.rows[i], "labels": self.rows[i]}


def collate(features: list[dict]) -> dict:
    width = max(len(f["input_ids"]) for f in features)
    ids = torch.full((len(features), width), PAD)
    labels = torch.full((len(features), width), -100)
    mask = torch.zeros((len(features), width), dtype=torch.long)
    for i, f in enumerate(features):
        n = len(f["input_ids"])
        ids[i, :n] = torch.tensor(f["input_ids"])
        labels[i, :n] = torch.tensor(f["labels"])
        mask[i, :n] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def model_init(trial=None):
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    config = T5Config(
        vocab_size=VOCAB,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=1,
        num_decoder_layers=1,
        num_heads=2,
        pad_token_id=PAD,
        eos_token_id=EOS,
        decoder_start_token_id=PAD,
    )
    return T5ForConditionalGeneration(config)


SEEN: list = []


def exact_match(prediction) -> dict:
    preds, labels = prediction.predictions, prediction.label_ids
    if isinstance(
        preds, tuple
    ):  # without generation: (logits, encoder states): take the argmax of the logits
        preds = np.concatenate([np.full((len(preds[0]), 1), PAD), preds[0].argmax(-1)], axis=1)
    SEEN.append((preds.dtype.kind, preds.shape))
    labels = np.where(labels == -100, PAD, labels)
    hits = [list(p[1:][p[1:] != PAD]) == list(lab[lab != PAD]) for p, lab in zip(preds, labels)]
    return {"exact_match": float(np.mean(hits))}


def make_trainer(out: Path, **args) -> Seq2SeqTrainer:
    settings = dict(
        output_dir=str(out),
        predict_with_generate=True,
        generation_max_length=10,
        max_steps=30,
        learning_rate=3e-3,
        per_device_train_batch_size=16,
        per_device_eval_batch_size=8,
        eval_strategy="no",
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        logging_strategy="no",
    )
    settings.update(args)
    return Seq2SeqTrainer(
        model_init=model_init,
        args=Seq2SeqTrainingArguments(**settings),
        train_dataset=CopyTask(64),
        eval_dataset=CopyTask(12, seed=1),
        data_collator=collate,
        compute_metrics=exact_match,
    )


@pytest.mark.slow
def test_evaluate_and_predict_generate_token_ids(tmp_path):
    trainer = make_trainer(tmp_path)
    trainer.train()
    SEEN.clear()
    metrics = trainer.evaluate()
    assert "eval_exact_match" in metrics and "eval_loss" in metrics
    kind, shape = SEEN[-1]
    assert kind in "iu" and shape == (12, 10)  # token ids, padded to generation_max_length across batches
    out = trainer.predict(CopyTask(5, seed=2), max_length=6, num_beams=2)
    assert out.predictions.shape == (5, 6) and out.predictions.dtype.kind in "iu"
    assert out.label_ids.shape[0] == 5


@pytest.mark.slow
def test_without_predict_with_generate_the_logits_are_returned(tmp_path):
    trainer = make_trainer(tmp_path, predict_with_generate=False)
    trainer.train()
    out = trainer.predict(CopyTask(4, seed=3))
    predictions = out.predictions[0] if isinstance(out.predictions, tuple) else out.predictions
    assert predictions.dtype.kind == "f" and predictions.shape[-1] == VOCAB


@pytest.mark.slow
def test_sortish_sampler_batches_similar_lengths(tmp_path):
    from trainer._seq2seq import SortishSampler

    lengths = [int(x) for x in np.random.default_rng(0).integers(1, 100, size=400)]
    order = list(SortishSampler(lengths, batch_size=8, seed=0, chunk_batches=10))
    assert sorted(order) == list(range(400))
    spread = np.mean([np.ptp([lengths[i] for i in order[k : k + 8]]) for k in range(0, 400, 8)])
    assert spread < 20  # random batches of 8 spread ~75
    trainer = make_trainer(tmp_path, sortish_sampler=True, predict_with_generate=False)
    assert isinstance(trainer.get_train_dataloader().sampler, SortishSampler)
    trainer.train()


@pytest.mark.slow
def test_a_search_can_vary_the_generation_settings(tmp_path):
    best = hpsearch.hyperparameter_search(
        make_trainer(tmp_path / "search", eval_strategy="steps", eval_steps=15),
        hp_space={
            "generation_num_beams": spaces.Categorical([1, 2]),
            "generation_max_length": spaces.Int(6, 10),
        },
        compute_objective="eval_exact_match",
        direction="maximize",
        n_trials=3,
        backend="random",
        seed=0,
    )
    records = best.run_summary.records
    assert len(records) == 3 and all(r.state.value == "COMPLETE" for r in records)
    assert {"generation_num_beams", "generation_max_length"} <= set(records[0].params)


def test_bad_generation_arguments_are_refused():
    with pytest.raises(ValueError, match="generation_num_beams must be a positive integer"):
        Seq2SeqTrainingArguments(output_dir="x", generation_num_beams=0)
    with pytest.raises(ValueError, match="generation_config must be"):
        Seq2SeqTrainingArguments(output_dir="x", generation_config=42)


@pytest.mark.multiprocess
def test_two_processes_generate_and_gather(tmp_path):
    result = tmp_path / "result.json"
    accelerate_launch("tests.trainer._seq2seq_script", str(tmp_path / "out"), str(result))
    data = json.loads(result.read_text())
    assert data["world"] == 2
    assert data["shape"] == [13, 10]  # every example once, gathered from both processes, padded alike
    assert "eval_exact_match" in data["metrics"]


def test_a_generation_config_is_written_as_its_dict(tmp_path):
    # transformers' to_dict writes the GenerationConfig's dict; it used to come out as str(config).
    from transformers import GenerationConfig

    args = Seq2SeqTrainingArguments(
        str(tmp_path), generation_config=GenerationConfig(max_length=7, num_beams=2)
    )
    written = args.to_dict()["generation_config"]
    assert isinstance(written, dict) and (written["max_length"], written["num_beams"]) == (7, 2)
    assert json.loads(args.to_json_string())["generation_config"]["max_length"] == 7
    assert Seq2SeqTrainingArguments(str(tmp_path), generation_config="some/folder").to_dict()[
        "generation_config"
    ] == ("some/folder")
