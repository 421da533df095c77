"""Documented Hugging Face Trainer recipes, ported by changing their imports only (issue 15).

Each recipe below is the code of the transformers documentation (the text-classification tutorial, "customise
the Trainer" with a ``compute_loss`` subclass, and a callback that edits ``control``) with one change, marked
``# ported``: ``Trainer``, ``TrainingArguments`` and ``TrainerCallback`` come from ``trainer`` instead of
``transformers``. Data, model and tokenizer are built locally (a tiny BERT from a config, a tokenizer from a
16-word vocab file): no download.
"""

from __future__ import annotations

import os

import datasets  # in the `test` extra
import numpy as np
import pytest
import torch
import transformers

WORDS = ["good", "bad", "movie", "film", "the", "was", "very", "great", "awful", "fun", "boring"]
POSITIVE = {"good", "great", "fun"}
NEGATIVE = {"bad", "awful", "boring"}


@pytest.fixture
def vocab_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    return str(path)


def reviews(n: int, seed: int) -> datasets.Dataset:
    """Short reviews of varying length; the label says whether the sentiment word is positive."""
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for _ in range(n):
        positive = bool(rng.integers(2))
        word = str(rng.choice(sorted(POSITIVE if positive else NEGATIVE)))
        filler = [
            str(w) for w in rng.choice(["the", "movie", "film", "was", "very"], size=rng.integers(1, 6))
        ]
        filler.insert(int(rng.integers(len(filler) + 1)), word)
        texts.append(" ".join(filler))
        labels.append(int(positive))
    return datasets.Dataset.from_dict({"text": texts, "label": labels})


def tiny_bert(num_labels: int = 2):
    config = transformers.BertConfig(
        vocab_size=len(WORDS) + 5, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=16, num_labels=num_labels,
    )  # fmt: skip
    torch.manual_seed(0)
    return transformers.BertForSequenceClassification(config)


# ------------------------------------------------------------------ recipe 1: text classification
@pytest.mark.slow
def test_text_classification_recipe(tmp_path, vocab_file):
    from transformers import BertTokenizer, DataCollatorWithPadding

    from trainer import Trainer, TrainingArguments  # ported: was `from transformers import ...`

    tokenizer = BertTokenizer(vocab_file)
    imdb = datasets.DatasetDict({"train": reviews(192, seed=0), "test": reviews(64, seed=1)})

    def preprocess_function(examples):
        return tokenizer(examples["text"], truncation=True)

    tokenized_imdb = imdb.map(preprocess_function, batched=True)
    data_collator = DataCollatorWithPadding(tokenizer=tokenizer)

    def compute_metrics(eval_pred):
        predictions, labels = eval_pred
        predictions = np.argmax(predictions, axis=1)
        return {"accuracy": float((predictions == labels).mean())}

    model = tiny_bert()
    training_args = TrainingArguments(
        output_dir=str(tmp_path / "my_awesome_model"),
        learning_rate=2e-3,
        per_device_train_batch_size=16,
        per_device_eval_batch_size=16,
        num_train_epochs=4,
        weight_decay=0.01,
        eval_strategy="epoch",
        save_strategy="epoch",
        load_best_model_at_end=True,
        push_to_hub=False,
        report_to="none",
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=tokenized_imdb["train"],
        eval_dataset=tokenized_imdb["test"],
        processing_class=tokenizer,
        data_collator=data_collator,
        compute_metrics=compute_metrics,
    )
    trainer.train()

    metrics = trainer.evaluate()
    assert metrics["eval_accuracy"] >= 0.9, metrics
    best = trainer.state.best_model_checkpoint
    assert best is not None
    # What the tutorial does next: load the fine-tuned model and tokenizer back for inference.
    tokenizer_again = transformers.AutoTokenizer.from_pretrained(best)
    model_again = transformers.AutoModelForSequenceClassification.from_pretrained(best).eval()
    inputs = tokenizer_again("the film was great", return_tensors="pt")
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(model_again(**inputs).logits, model(**inputs).logits)
    trainer.save_model(str(tmp_path / "final"))
    assert {"config.json", "model.safetensors", "tokenizer_config.json"} <= set(
        os.listdir(tmp_path / "final")
    )


def test_processing_class_alone_gives_a_padding_collator_and_reaches_callbacks(tmp_path, vocab_file):
    from transformers import BertTokenizer

    from trainer import Trainer, TrainerCallback, TrainingArguments

    seen = {}

    class Peek(TrainerCallback):
        def on_train_begin(self, args, state, control, processing_class=None, tokenizer=None, **kwargs):
            seen["processing_class"], seen["tokenizer"] = processing_class, tokenizer

    tokenizer = BertTokenizer(vocab_file)
    data = reviews(32, seed=2).map(lambda b: tokenizer(b["text"]), batched=True)
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=8,
                             report_to=None, disable_tqdm=True, save_strategy="no")  # fmt: skip
    trainer = Trainer(
        model=tiny_bert(), args=args, train_dataset=data, tokenizer=tokenizer, callbacks=[Peek()]
    )
    assert trainer.processing_class is tokenizer and trainer.tokenizer is tokenizer
    trainer.train()  # sequences of different lengths: the default collator pads with the tokenizer
    assert seen == {"processing_class": tokenizer, "tokenizer": tokenizer}
    batch = trainer.data_collator(
        [{k: data[i][k] for k in ("input_ids", "attention_mask", "label")} for i in (0, 1)]
    )
    assert batch["input_ids"].shape[1] == max(len(data[0]["input_ids"]), len(data[1]["input_ids"]))
    assert batch["labels"].tolist() == [data[0]["label"], data[1]["label"]]


# ------------------------------------------------------------------ recipe 2: a compute_loss subclass
def test_custom_compute_loss_recipe(tmp_path):
    from torch import nn

    from trainer import Trainer, TrainingArguments  # ported: was `from transformers import Trainer`

    class CustomTrainer(Trainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            labels = inputs.pop("labels")
            # forward pass
            outputs = model(**inputs)
            logits = outputs.get("logits")
            # compute custom loss for 3 labels with different weights
            loss_fct = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 3.0], device=model.device))
            loss = loss_fct(logits.view(-1, self.model.config.num_labels), labels.view(-1))
            return (loss, outputs) if return_outputs else loss

    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 16, (48, 8), generator=g)
    labels = ids[:, 0] % 3
    train = datasets.Dataset.from_dict({"input_ids": ids.tolist(), "labels": labels.tolist()}).with_format(
        "torch"
    )
    model = tiny_bert(num_labels=3)
    args = TrainingArguments(output_dir=str(tmp_path), num_train_epochs=1, per_device_train_batch_size=8,
                             report_to="none", disable_tqdm=True, save_strategy="no")  # fmt: skip
    trainer = CustomTrainer(model=model, args=args, train_dataset=train, eval_dataset=train)
    trainer.train()

    batch = {"input_ids": ids[:8], "labels": labels[:8]}
    model.eval()
    with torch.no_grad():
        expected = nn.functional.cross_entropy(
            model(input_ids=ids[:8]).logits, labels[:8], weight=torch.tensor([1.0, 2.0, 3.0])
        )
        torch.testing.assert_close(trainer.compute_loss(model, dict(batch)), expected)
    # Evaluation goes through the same compute_loss (the labels are read before it pops them).
    eval_loss = trainer.evaluate()["eval_loss"]
    plain = Trainer(model=model, args=args).evaluate(train)["eval_loss"]
    assert eval_loss != pytest.approx(plain)


# ------------------------------------------------------------------ recipe 3: a callback that edits control
def test_callback_that_edits_control_recipe(tmp_path):
    # ported: was `from transformers import Trainer, TrainerCallback, TrainingArguments`
    from trainer import Trainer, TrainerCallback, TrainingArguments

    class EarlyStoppingCallback(TrainerCallback):
        "A callback that stops training after a number of steps"

        def __init__(self, num_steps=10):
            self.num_steps = num_steps

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step >= self.num_steps:
                return {"should_training_stop": True}
            else:
                return {}

    class PrinterCallback(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            print("Starting training")

    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 16, (64, 6), generator=g)
    train = datasets.Dataset.from_dict({"input_ids": ids.tolist(), "labels": (ids[:, 0] % 2).tolist()})
    args = TrainingArguments(output_dir=str(tmp_path), num_train_epochs=3, per_device_train_batch_size=8,
                             report_to="none", disable_tqdm=True, save_strategy="no")  # fmt: skip
    trainer = Trainer(model=tiny_bert(), args=args, train_dataset=train, callbacks=[PrinterCallback])
    trainer.add_callback(EarlyStoppingCallback(num_steps=5))
    trainer.train()
    assert trainer.state.global_step == 5  # 24 steps were planned

    # The same callback editing control in place instead of returning a dict.
    class StopAtEpochEnd(TrainerCallback):
        def on_epoch_end(self, args, state, control, **kwargs):
            control.should_training_stop = True

    trainer = Trainer(model=tiny_bert(), args=args, train_dataset=train, callbacks=[StopAtEpochEnd()])
    trainer.train()
    assert trainer.state.global_step == 8 and trainer.state.epoch == 1.0
