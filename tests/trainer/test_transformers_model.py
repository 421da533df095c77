"""A Hugging Face `transformers` model, built from a tiny local config (no download), trains unchanged."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers  # in the `test` extra
from torch.utils.data import Dataset

from trainer import Trainer


class TokenData(Dataset):
    """Random token sequences; the label is whether token 7 occurs, so there is something to learn."""

    def __init__(self, n: int, seq_len: int = 12, vocab: int = 50, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(1, vocab, (n, seq_len), generator=g)
        self.labels = (self.ids == 7).any(-1).long()

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict:
        return {
            "input_ids": self.ids[i],
            "attention_mask": torch.ones_like(self.ids[i]),
            "label": int(self.labels[i]),  # "label" -> "labels" in the default collator
            "idx": i,  # not a forward() argument: dropped by remove_unused_columns
        }


def _tiny_bert():
    config = transformers.BertConfig(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
        num_labels=2,
    )
    return transformers.BertForSequenceClassification(config)


def _accuracy(eval_pred):
    logits, labels = eval_pred
    return {"accuracy": float((np.argmax(logits, -1) == labels).mean())}


@pytest.mark.slow
def test_tiny_bert_trains_and_evaluates(make_args):
    train, val = TokenData(128), TokenData(32, seed=1)
    args = make_args(
        per_device_train_batch_size=16,
        per_device_eval_batch_size=16,
        num_train_epochs=3,
        learning_rate=5e-3,
        logging_steps=4,
        eval_strategy="epoch",
        seed=0,
    )
    trainer = Trainer(
        model_init=_tiny_bert, args=args, train_dataset=train, eval_dataset=val, compute_metrics=_accuracy
    )
    # forward(input_ids, ..., labels, **kwargs): the named parameters decide which keys are kept.
    batch = next(iter(trainer.get_train_dataloader()))
    assert set(batch) == {"input_ids", "attention_mask", "labels"}
    assert trainer.label_names == ["labels"]

    before = trainer.evaluate()
    out = trainer.train()
    after = trainer.evaluate()

    assert out.global_step == 24
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 6 and all(np.isfinite(losses))
    assert np.mean(losses[-2:]) < np.mean(losses[:2])
    assert after["eval_loss"] < before["eval_loss"]
    assert "eval_accuracy" in after

    # ModelOutput is a mapping: the loss is taken from it and the logits become the predictions.
    pred = trainer.predict(val)
    assert pred.predictions.shape == (32, 2)
    assert pred.label_ids.tolist() == val.labels.tolist()
    assert "test_loss" in pred.metrics
