"""Options a Hugging Face Trainer script sets have their effect here (issue 15): precision, logging, token and
flop counts, evaluation accumulation, saving for ``from_pretrained``, and the arguments ported scripts pass."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import transformers
from torch import nn
from torch.utils.data import Dataset

from trainer import (
    DebugUnderflowOverflow,
    HfArgumentParser,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)
from trainer import _evaluation as evaluation_module


class Regression(Dataset):
    def __init__(self, n: int = 32) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 4, generator=g)
        self.y = self.x.sum(-1)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict:
        return {"x": self.x[i], "labels": self.y[i]}


class Linear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 1)
        self.autocast_dtypes: list[torch.dtype | None] = []

    def forward(self, x, labels=None):
        enabled = torch.is_autocast_enabled("cpu")
        self.autocast_dtypes.append(torch.get_autocast_dtype("cpu") if enabled else None)
        preds = self.linear(x).squeeze(-1).float()
        out = {"preds": preds}
        if labels is not None:
            out["loss"] = nn.functional.mse_loss(preds, labels)
        return out


class Tokens(Dataset):
    """Token sequences of length ``seq`` whose last ``pad`` positions are padding (attention_mask 0)."""

    def __init__(self, n: int = 16, seq: int = 6, pad: int = 2, vocab: int = 30) -> None:
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(1, vocab, (n, seq), generator=g)
        self.mask = torch.ones(n, seq, dtype=torch.long)
        self.mask[:, seq - pad :] = 0
        self.labels = (self.ids[:, 0] % 2).long()

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "attention_mask": self.mask[i], "labels": self.labels[i]}


def tiny_bert(vocab: int = 30) -> transformers.BertForSequenceClassification:
    config = transformers.BertConfig(
        vocab_size=vocab, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        max_position_embeddings=32, num_labels=2,
    )  # fmt: skip
    torch.manual_seed(0)
    return transformers.BertForSequenceClassification(config)


# ------------------------------------------------------------------ precision
def test_model_and_model_init_together_warn_that_train_replaces_the_model(make_args):
    """transformers 4 warns (FutureWarning) and 5 refuses; the seed's 4.x behaviour with its warning."""
    given = Linear()
    with pytest.warns(FutureWarning, match="both model and model_init"):
        trainer = Trainer(
            model=given,
            model_init=Linear,
            args=make_args(max_steps=1, use_cpu=True),
            train_dataset=Regression(),
        )
    assert trainer.model is given
    trainer.train()
    assert trainer.model is not given


def test_mixed_precision_may_differ_between_trainers_of_one_process(make_args):
    """A search over mixed_precision: each trial trains in its own precision, in any order."""
    seen = []
    for precision in ("no", "bf16", "no", "bf16"):
        model = Linear()
        trainer = Trainer(
            model=model,
            args=make_args(mixed_precision=precision, max_steps=2, use_cpu=True),
            train_dataset=Regression(),
        )
        trainer.train()
        seen.append(set(model.autocast_dtypes))
    assert seen == [{None}, {torch.bfloat16}, {None}, {torch.bfloat16}]


def test_a_trainer_rebuilds_its_accelerator_when_another_changed_the_precision(make_args):
    first = Trainer(model=Linear(), args=make_args(max_steps=1, use_cpu=True), train_dataset=Regression())
    Trainer(
        model=Linear(), args=make_args(bf16=True, max_steps=1, use_cpu=True), train_dataset=Regression()
    ).train()
    first.model.autocast_dtypes.clear()
    first.train()
    assert set(first.model.autocast_dtypes) == {None}
    assert first.accelerator.mixed_precision == "no"


def test_a_trainer_trains_on_its_own_device_whatever_the_process_state_holds(make_args):
    """accelerate's process state keeps the first device it was set up with, silently: a ``use_cpu`` trainer after
    a GPU one trained on the GPU (or failed), a GPU one after a CPU one on the CPU. A state on another device (here
    ``meta``, which no trainer would choose) is replaced when nothing trains."""
    from accelerate.state import PartialState

    Trainer(model=Linear(), args=make_args(max_steps=1, use_cpu=True), train_dataset=Regression()).train()
    PartialState._shared_state["device"] = torch.device("meta")
    model = Linear()
    trainer = Trainer(model=model, args=make_args(max_steps=2, use_cpu=True), train_dataset=Regression())
    trainer.train()
    assert trainer.accelerator.device.type == "cpu"
    assert {p.device.type for p in model.parameters()} == {"cpu"}
    assert trainer.state.global_step == 2


def test_the_arguments_device_is_the_one_they_train_on_whatever_the_process_state_holds(make_args):
    from accelerate.state import PartialState

    assert make_args(use_cpu=True).device.type == "cpu"
    PartialState._shared_state["device"] = torch.device("meta")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert make_args().device.type == expected


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run by scripts/gpu_checks.sh)")
def test_trainers_of_one_process_may_alternate_between_the_gpu_and_the_cpu(make_args):
    for use_cpu in (False, True, False, True):
        model = Linear()
        args = make_args(max_steps=2, use_cpu=use_cpu)
        assert args.device.type == ("cpu" if use_cpu else "cuda")
        trainer = Trainer(model=model, args=args, train_dataset=Regression())
        trainer.train()
        assert {p.device.type for p in model.parameters()} == {"cpu" if use_cpu else "cuda"}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run by scripts/gpu_checks.sh)")
def test_accelerate_launch_cpu_trains_on_the_cpu_of_a_gpu_machine(make_args, monkeypatch):
    monkeypatch.setenv("ACCELERATE_USE_CPU", "true")  # what `accelerate launch --cpu` sets
    model = Linear()
    trainer = Trainer(model=model, args=make_args(max_steps=2), train_dataset=Regression())
    trainer.train()
    assert {p.device.type for p in model.parameters()} == {"cpu"}


def test_bf16_flag_maps_onto_mixed_precision_and_fp16_is_refused_on_cpu(make_args):
    assert make_args(bf16=True, use_cpu=True).mixed_precision == "bf16"
    assert make_args(bf16=True, use_cpu=True).replace(bf16=False).mixed_precision == "no"
    with pytest.raises(
        ValueError, match=r"mixed_precision='fp16' needs a CUDA GPU.*pass mixed_precision='bf16'"
    ):
        make_args(fp16=True, use_cpu=True)
    with pytest.raises(ValueError, match=r"bf16=True and mixed_precision='no' disagree"):
        make_args(bf16=True, use_cpu=True).replace(mixed_precision="no")  # not silently kept as bf16
    assert (
        make_args(bf16=True, use_cpu=True).replace(bf16=False, mixed_precision="no").mixed_precision == "no"
    )
    assert make_args(bf16=True, use_cpu=True).replace(learning_rate=0.5).mixed_precision == "bf16"
    with pytest.raises(ValueError, match="fp16=True and bf16=True"):
        make_args(fp16=True, bf16=True)
    with pytest.raises(ValueError, match="bf16=True and mixed_precision='fp16' disagree"):
        make_args(bf16=True, mixed_precision="fp16")
    # fp16_full_eval on the CPU: where torch runs float16 there (see test_every_field), else refused.
    assert make_args(fp16_full_eval=True, use_cpu=True).fp16_full_eval is True


def test_bf16_full_eval_casts_the_model_for_evaluation_outside_training(make_args):
    trainer = Trainer(
        model=Linear(), args=make_args(bf16_full_eval=True, use_cpu=True), eval_dataset=Regression()
    )
    trainer.evaluate()
    assert trainer.model.linear.weight.dtype == torch.bfloat16
    plain = Trainer(model=Linear(), args=make_args(use_cpu=True), eval_dataset=Regression())
    plain.evaluate()
    assert plain.model.linear.weight.dtype == torch.float32


# ------------------------------------------------------------------ logging
def test_log_level_is_applied_and_training_says_it_is_running(make_args, caplog):
    logger = logging.getLogger("trainer")
    before = logger.level
    try:
        trainer = Trainer(
            model=Linear(), args=make_args(log_level="info", max_steps=1), train_dataset=Regression()
        )
        assert logger.level == logging.INFO
        with caplog.at_level(logging.INFO, logger="trainer"):
            trainer.train()
        text = caplog.text
        assert "***** Running training *****" in text and "Total optimization steps = 1" in text
        Trainer(model=Linear(), args=make_args(log_level="error"))
        assert logger.level == logging.ERROR
        Trainer(model=Linear(), args=make_args(log_level="passive"))
        assert logger.level == logging.ERROR  # passive leaves the level alone
    finally:
        logger.setLevel(before)


def test_replicas_log_at_log_level_replica(make_args, monkeypatch):
    args = make_args(log_level="debug", log_level_replica="error")
    assert args.should_log and args.get_process_log_level() == logging.DEBUG
    monkeypatch.setattr(TrainingArguments, "should_log", property(lambda self: False))
    assert args.get_process_log_level() == logging.ERROR
    with pytest.raises(ValueError, match="log_level_replica"):
        make_args(log_level_replica="loud")


def test_log_on_each_node_chooses_the_local_or_the_global_first_process(make_args, monkeypatch):
    monkeypatch.setattr(TrainingArguments, "local_process_index", property(lambda self: 0))
    monkeypatch.setattr(TrainingArguments, "process_index", property(lambda self: 4))  # first of the 2nd node
    assert make_args(log_on_each_node=True).should_log
    assert not make_args(log_on_each_node=False).should_log


# ------------------------------------------------------------------ tokens and flops
def test_input_tokens_are_counted_all_or_non_padding(make_args):
    for how, per_example in ((True, 6), ("non_padding", 4)):
        trainer = Trainer(
            model=tiny_bert(), args=make_args(include_num_input_tokens_seen=how, max_steps=3, logging_steps=1,
                                              per_device_train_batch_size=4, include_tokens_per_second=True),
            train_dataset=Tokens(),
        )  # fmt: skip
        out = trainer.train()
        assert trainer.state.num_input_tokens_seen == 3 * 4 * per_example
        assert [h["num_input_tokens_seen"] for h in trainer.state.log_history if "loss" in h] == [
            s * 4 * per_example for s in (1, 2, 3)
        ]
        assert out.metrics["train_tokens_per_second"] > 0
    off = Trainer(model=tiny_bert(), args=make_args(max_steps=1), train_dataset=Tokens())
    off.train()
    assert off.state.num_input_tokens_seen == 0


def test_total_flos_come_from_the_model_or_the_6_n_tokens_estimate(make_args):
    bert = tiny_bert()
    trainer = Trainer(
        model=bert, args=make_args(max_steps=2, per_device_train_batch_size=4), train_dataset=Tokens()
    )
    out = trainer.train()
    # transformers models (v5 has no floating_point_ops): parameters without the embeddings x 4 x 6 tokens.
    assert trainer.state.total_flos == 2 * 6 * bert.num_parameters(exclude_embeddings=True) * 24 > 0
    # The printer callback (disable_tqdm) took total_flos out of the logged metrics, as transformers' does.
    assert (
        "total_flos" not in out.metrics
        and trainer.state.log_history[-1]["total_flos"] == trainer.state.total_flos
    )

    class OwnCount(Linear):
        def floating_point_ops(self, inputs):
            return 1000.0

    trainer = Trainer(model=OwnCount(), args=make_args(max_steps=3), train_dataset=Regression())
    trainer.train()
    assert trainer.state.total_flos == 3000.0
    linear = Linear()
    trainer = Trainer(
        model=linear, args=make_args(max_steps=3, per_device_train_batch_size=8), train_dataset=Regression()
    )
    trainer.train()
    assert trainer.state.total_flos == 6 * 5 * 8 * 3  # 5 parameters, 8 examples (no input_ids) per step


# ------------------------------------------------------------------ evaluation
def test_eval_accumulation_steps_moves_predictions_to_the_host_every_n_batches(make_args, monkeypatch):
    calls = []
    original = evaluation_module.Accumulator.to_host

    def spy(self):
        if self.on_device is not None:
            calls.append(self.count)
        original(self)

    monkeypatch.setattr(evaluation_module.Accumulator, "to_host", spy)
    args = make_args(eval_accumulation_steps=2, per_device_eval_batch_size=4)
    out = Trainer(model=Linear(), args=args).predict(Regression(24))  # 6 batches
    assert out.predictions.shape == (24,)
    assert sorted(c for c in calls if c in (2, 4, 6)) == [2, 2, 4, 4, 6, 6]  # predictions and labels
    calls.clear()
    Trainer(model=Linear(), args=make_args(per_device_eval_batch_size=4)).predict(Regression(24))
    assert calls == [6, 6]  # only at the end


def test_eval_do_concat_batches_false_keeps_one_array_per_batch(make_args):
    out = Trainer(
        model=Linear(), args=make_args(eval_do_concat_batches=False, per_device_eval_batch_size=10)
    ).predict(Regression(25))
    assert [p.shape for p in out.predictions] == [(10,), (10,), (5,)]
    assert [len(labels) for labels in out.label_ids] == [10, 10, 5]


def test_include_for_metrics_hands_inputs_and_losses_to_compute_metrics(make_args):
    seen = {}

    def metrics(pred):
        seen["inputs"], seen["losses"] = pred.inputs, pred.losses
        return {"n": float(len(pred.predictions))}

    model = tiny_bert()
    args = make_args(include_for_metrics=["inputs", "loss"], per_device_eval_batch_size=8)
    Trainer(model=model, args=args, compute_metrics=metrics).evaluate(Tokens())
    assert seen["inputs"].shape == (16, 6) and seen["losses"].shape == (16,)
    with pytest.warns(FutureWarning, match="include_for_metrics"):
        assert make_args(include_inputs_for_metrics=True).include_for_metrics == ["inputs"]


# ------------------------------------------------------------------ saving
def test_save_model_of_a_transformers_model_reloads_with_from_pretrained(make_args, tmp_path):
    model = tiny_bert()
    trainer = Trainer(
        model=model, args=make_args(max_steps=2, save_strategy="steps", save_steps=2), train_dataset=Tokens()
    )
    trainer.train()
    trainer.save_model(str(tmp_path / "final"))
    batch = {"input_ids": Tokens().ids[:3]}
    model.cpu().eval()  # trained on the GPU where there is one; reloaded on the CPU
    expected = model(**batch).logits
    for folder in (tmp_path / "final", tmp_path / "out" / "checkpoint-2"):
        assert (folder / "config.json").is_file() and (folder / "model.safetensors").is_file()
        reloaded = transformers.BertForSequenceClassification.from_pretrained(str(folder)).eval()
        torch.testing.assert_close(reloaded(**batch).logits, expected)


def test_save_on_each_node_lets_each_nodes_first_process_write(make_args, tmp_path, monkeypatch):
    for on_each_node, written in ((False, False), (True, True)):
        trainer = Trainer(model=Linear(), args=make_args(save_on_each_node=on_each_node))
        monkeypatch.setattr(trainer, "is_world_process_zero", lambda: False)  # first process of another node
        monkeypatch.setattr(trainer, "is_local_process_zero", lambda: True)
        target = tmp_path / f"node-{on_each_node}"
        trainer.save_model(str(target))
        assert (target / "model.safetensors").is_file() is written


# ------------------------------------------------------------------ refused, with the reason
@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"save_safetensors": False}, "only written as safetensors"),
        ({"jit_mode_eval": True}, "torch.jit"),
        ({"half_precision_backend": "apex"}, "apex is not supported"),
        ({"debug": "tpu_metrics_debug"}, "TPUs"),
        ({"tf32": True, "use_cpu": True}, "tf32=True needs"),
        ({"accelerator_config": {"use_seedable_sampler": False}}, "seeded"),
        ({"accelerator_config": {"gradient_accumulation_kwargs": {}}}, "not supported"),
        ({"ddp_backend": "smoke-signals"}, "ddp_backend"),
    ],
)
def test_unsupported_options_are_refused_with_the_reason(make_args, kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        make_args(**kwargs)


# ------------------------------------------------------------------ ported arguments
def test_script_flags_are_stored_and_evaluation_implies_do_eval(make_args):
    args = make_args(do_train=True, do_predict=True, resume_from_checkpoint="ckpt", eval_strategy="epoch")
    assert (args.do_train, args.do_eval, args.do_predict, args.resume_from_checkpoint) == (
        True,
        True,
        True,
        "ckpt",
    )
    assert args.replace(eval_strategy="no").do_eval is False  # derived, so re-derived
    with pytest.warns(FutureWarning, match="eval_strategy"):
        old = make_args(evaluation_strategy="steps", eval_steps=5)
    assert old.eval_strategy == "steps" and old.replace(eval_strategy="no").eval_strategy == "no"
    assert make_args(report_to=None).report_to == []


def test_hf_argument_parser_and_process_properties(tmp_path):
    (args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses(
        ["--output_dir", str(tmp_path), "--bf16", "true", "--use_cpu", "true", "--do_train", "true",
         "--optim_args", "momentum=0.9,nesterov=True", "--optim", "sgd"]
    )  # fmt: skip
    assert (
        args.mixed_precision == "bf16"
        and args.do_train
        and args.optim_args == {"momentum": 0.9, "nesterov": True}
    )
    assert (args.device.type, args.n_gpu, args.world_size, args.process_index) == ("cpu", 0, 1, 0)
    assert args.get_warmup_steps(100) == 0 and json.loads(args.to_json_string())["bf16"] is True
    order = []
    with args.main_process_first(desc="map"):
        order.append("main")
    assert order == ["main"]


def test_label_smoothing_replaces_the_models_loss(make_args):
    model = tiny_bert()
    data = Tokens(8)
    batch = {"input_ids": data.ids, "attention_mask": data.mask, "labels": data.labels}
    model.eval()
    plain = Trainer(model=model, args=make_args()).compute_loss(model, batch)
    smoothed = Trainer(model=model, args=make_args(label_smoothing_factor=0.3)).compute_loss(model, batch)
    logits = model(input_ids=data.ids, attention_mask=data.mask).logits
    expected = nn.functional.cross_entropy(logits, data.labels, label_smoothing=0.3)
    torch.testing.assert_close(smoothed, expected)
    assert not torch.allclose(plain, smoothed)


class EpochAtSteps(TrainerCallback):
    def __init__(self) -> None:
        self.epochs: list[float] = []

    def on_step_end(self, args, state, control, **kwargs):
        self.epochs.append(state.epoch)


def test_ignore_data_skip_restarts_the_resumed_epoch_from_its_first_batch(make_args):
    args = make_args(max_steps=4, per_device_train_batch_size=8, save_strategy="steps", save_steps=2)
    Trainer(model=Linear(), args=args, train_dataset=Regression()).train()
    checkpoint = os.path.join(args.output_dir, "checkpoint-2")
    first_epoch = {}
    for ignore in (False, True):
        record = EpochAtSteps()
        trainer = Trainer(
            model=Linear(),
            args=args.replace(ignore_data_skip=ignore),
            train_dataset=Regression(),
            callbacks=[record],
        )
        trainer.train(resume_from_checkpoint=checkpoint)
        first_epoch[ignore] = record.epochs[0]
    # 4 batches per epoch; resuming at step 2 skips 2 batches (epoch 0.75 next) unless the skip is ignored.
    assert first_epoch == {False: pytest.approx(0.75), True: pytest.approx(0.25)}


def test_past_index_feeds_the_output_back_as_mems(make_args):
    class WithMems(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(4, 1)
            self.mems_seen = []

        def forward(self, x, labels=None, mems=None):
            self.mems_seen.append(None if mems is None else float(mems))
            preds = self.linear(x).squeeze(-1)
            return {
                "loss": nn.functional.mse_loss(preds, labels),
                "preds": preds,
                "memory": preds.sum().detach(),
            }

    model = WithMems()
    Trainer(model=model, args=make_args(max_steps=3, past_index=2), train_dataset=Regression()).train()
    assert model.mems_seen[0] is None and all(m is not None for m in model.mems_seen[1:])
    model = WithMems()
    Trainer(model=model, args=make_args(max_steps=3), train_dataset=Regression()).train()
    assert model.mems_seen == [None, None, None]


def test_debug_underflow_overflow_names_the_first_module_producing_inf(make_args):
    class Blows(nn.Module):
        def __init__(self):
            super().__init__()
            self.first = nn.Linear(4, 4)
            self.second = nn.Linear(4, 1)

        def forward(self, x, labels=None):
            h = self.first(x) * 1e39  # overflows float32 here
            preds = self.second(h).squeeze(-1)
            return {"loss": nn.functional.mse_loss(preds, labels)}

    model = Blows()
    model.first.register_forward_hook(lambda m, i, o: o * torch.tensor(float("inf")))
    with pytest.raises(FloatingPointError, match=r"inf in the output of module 'first' \(Linear\)"):
        Trainer(
            model=model, args=make_args(max_steps=2, debug="underflow_overflow"), train_dataset=Regression()
        ).train()
    assert not model.first._forward_hooks or len(model.first._forward_hooks) == 1  # ours were removed
    DebugUnderflowOverflow(nn.Linear(1, 1)).remove()


def test_more_optimizers_and_optim_args_in_the_k_v_form(make_args):
    args = make_args(optim="sgd", optim_args="momentum=0.9,nesterov=True")
    optimizer = Trainer(model=Linear(), args=args).create_optimizer()
    assert isinstance(optimizer, torch.optim.SGD) and optimizer.defaults["nesterov"] is True
    optimizer = Trainer(model=Linear(), args=make_args(optim="adafactor")).create_optimizer()
    assert type(optimizer).__name__ == "Adafactor"
    for name, cls in (("adagrad", torch.optim.Adagrad), ("rmsprop", torch.optim.RMSprop)):
        assert isinstance(Trainer(model=Linear(), args=make_args(optim=name)).create_optimizer(), cls)


def test_ddp_options_reach_accelerates_handlers(make_args):
    args = make_args(
        ddp_find_unused_parameters=True,
        ddp_bucket_cap_mb=7,
        ddp_broadcast_buffers=False,
        ddp_timeout=60,
        ddp_backend="gloo",
    )
    accelerator = Trainer(model=Linear(), args=args).accelerator
    assert accelerator.ddp_handler.find_unused_parameters is True
    assert accelerator.ddp_handler.bucket_cap_mb == 7 and accelerator.ddp_handler.broadcast_buffers is False
    assert (
        accelerator.init_handler.timeout.total_seconds() == 60 and accelerator.init_handler.backend == "gloo"
    )


@pytest.mark.multiprocess
def test_ddp_backend_in_a_fresh_single_process_trains(tmp_path):
    # The first accelerator of a process sets up accelerate's process state. Given a backend there, accelerate took a
    # single process for a launched group and failed ("Default process group has not been initialized"); the
    # process-group settings now reach accelerate only in a launched run, and init_handler still shows them.
    script = (
        "import torch, trainer\n"
        "from torch.utils.data import TensorDataset\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self):\n        super().__init__(); self.l = torch.nn.Linear(2, 1)\n"
        "    def forward(self, x, labels):\n        return {'loss': torch.nn.functional.mse_loss(self.l(x), labels)}\n"
        "class D(torch.utils.data.Dataset):\n"
        "    def __len__(self):\n        return 8\n"
        "    def __getitem__(self, i):\n        return {'x': torch.ones(2) * i, 'labels': torch.ones(1)}\n"
        f"args = trainer.TrainingArguments(output_dir={str(tmp_path)!r}, use_cpu=True, ddp_backend='gloo', "
        "ddp_timeout=77, max_steps=2, report_to='none', save_strategy='no', disable_tqdm=True)\n"
        "t = trainer.Trainer(model=M(), args=args, train_dataset=D())\n"
        "print(t.train().global_step, t.accelerator.num_processes, t.accelerator.init_handler.backend,"
        " int(t.accelerator.init_handler.timeout.total_seconds()))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("LOCAL_RANK", "WORLD_SIZE", "RANK")}
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split()[-4:] == ["2", "1", "gloo", "77"]


def test_a_trial_accelerator_leaves_the_environment_alone(make_args, monkeypatch):
    # accelerate's to_kwargs() empties os.environ and restores it; building an accelerator per trial did that twice,
    # and a trial running in another thread could read an empty environment meanwhile. After the first accelerator of
    # the process, building one no longer touches os.environ; accumulation steps and accelerate's environment
    # override of them are unchanged.
    import contextlib

    import accelerate.utils.environment as accelerate_environment

    cleared: list[int] = []
    original = accelerate_environment.clear_environment

    @contextlib.contextmanager
    def counted():
        cleared.append(1)
        with original():
            yield

    monkeypatch.setattr(accelerate_environment, "clear_environment", counted)
    Trainer(
        model=Linear(), args=make_args(gradient_accumulation_steps=4)
    )  # the process's first, at the latest
    cleared.clear()
    trainer = Trainer(model=Linear(), args=make_args(gradient_accumulation_steps=4))
    assert cleared == [] and trainer.accelerator.gradient_accumulation_steps == 4
    monkeypatch.setenv("ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "2")
    assert (
        Trainer(
            model=Linear(), args=make_args(gradient_accumulation_steps=3)
        ).accelerator.gradient_accumulation_steps
        == 2
    )


def test_accelerator_config_and_batch_options_reach_the_data_loader_config(make_args):
    trainer = Trainer(
        model=Linear(), args=make_args(accelerator_config={"even_batches": False}, split_batches=True)
    )
    config = trainer.accelerator.dataloader_config
    assert config.even_batches is False and config.split_batches is True


def test_trainer_helpers_ported_scripts_call(make_args):
    model = Linear()
    model.linear.bias.requires_grad_(False)
    trainer = Trainer(model=model, args=make_args())
    assert trainer.get_num_trainable_parameters() == 4
    assert np.isclose(trainer.floating_point_ops({"x": torch.zeros(2, 4)}), 6 * 5 * 2)


@pytest.mark.parametrize(
    "batch",
    [
        {
            "input_ids": torch.zeros(3, 7, dtype=torch.long),
            "labels": torch.zeros(3),
        },  # the main input's elements
        {"x": torch.zeros(5, 4), "labels": torch.zeros(5)},  # no main input: the examples
        {"x": torch.tensor(1.0)},  # a 0-d value: one example
        {"x": [[1, 2], [3, 4]], "labels": torch.zeros(2)},  # a list first
        {"x": {"a": torch.zeros(6, 2)}},  # nested
        {"input_ids": None, "x": torch.zeros(4, 2)},
        {"input_ids": [1, 2, 3]},
        {},
        (torch.zeros(9, 4), torch.zeros(9)),
    ],
)
def test_the_flop_count_of_a_dict_batch_is_the_general_count(make_args, batch):
    # floating_point_ops counts a dict batch without input_tokens' generality; it must agree with it on every shape.
    from trainer import _loop

    trainer = Trainer(model=Linear(), args=make_args())
    n = sum(p.numel() for p in trainer.model.parameters())
    expected = 6.0 * n * _loop.input_tokens(trainer, batch, True, gather=False, warn=False, name="input_ids")
    assert trainer.floating_point_ops(batch) == expected


def test_trials_may_differ_in_precision(make_args, tmp_path):
    """for_trial (the search seam) and a whole Optuna search whose trials alternate precision."""
    base = Trainer(
        model_init=Linear,
        args=make_args(max_steps=2, use_cpu=True),
        train_dataset=Regression(),
        eval_dataset=Regression(8),
    )
    for precision in ("bf16", "no", "bf16"):
        trial = base.for_trial(base.args.replace(mixed_precision=precision))
        trial.train()
        assert trial.accelerator.mixed_precision == precision
    import optuna

    from spaces import Categorical

    best = base.hyperparameter_search(
        hp_space={"mixed_precision": Categorical(["no", "bf16"])}, n_trials=4, backend="optuna",
        sampler=optuna.samplers.BruteForceSampler(seed=0),
    )  # fmt: skip
    assert best is not None and best.hyperparameters["mixed_precision"] in ("no", "bf16")


def test_train_passes_ignore_keys_for_eval_to_the_evaluations(make_args):
    class TwoOutputs(Linear):
        def forward(self, x, labels=None):
            out = super().forward(x, labels)
            out["extra"] = out["preds"] * 2
            return out

    seen = []

    def metrics(pred):
        seen.append(type(pred.predictions).__name__)
        return {}

    args = make_args(max_steps=2, eval_strategy="steps", eval_steps=1)
    trainer = Trainer(
        model=TwoOutputs(),
        args=args,
        train_dataset=Regression(),
        eval_dataset=Regression(8),
        compute_metrics=metrics,
    )
    trainer.train(ignore_keys_for_eval=["extra"])
    assert seen == ["ndarray", "ndarray"]  # only "preds" left: one array, not a tuple
    seen.clear()
    trainer.train()
    assert seen == ["tuple", "tuple"]
    with pytest.raises(TypeError, match="unexpected keyword"):
        trainer.train(model_path="x")


def test_on_push_begin_is_an_event_callbacks_may_define():
    from trainer import CallbackHandler, DefaultFlowCallback, TrainerControl, TrainerState

    class Push(TrainerCallback):
        def on_push_begin(self, args, state, control, **kwargs):
            control.should_save = True

    handler = CallbackHandler([DefaultFlowCallback(), Push()])
    control = handler.on_push_begin(None, TrainerState(), TrainerControl())
    assert control.should_save


def test_another_precision_is_refused_while_a_trainer_of_the_process_trains(make_args):
    errors = []

    class BuildAnother(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            try:
                Trainer(model=Linear(), args=make_args(mixed_precision="no"))
            except RuntimeError as error:
                errors.append(str(error))
            # The same precision is fine: nothing to reset.
            Trainer(model=Linear(), args=make_args(mixed_precision="bf16", use_cpu=True))

    trainer = Trainer(
        model=Linear(),
        args=make_args(bf16=True, use_cpu=True, max_steps=1),
        train_dataset=Regression(),
        callbacks=[BuildAnother()],
    )
    trainer.train()
    assert len(errors) == 1 and "mixed_precision='bf16'" in errors[0] and "n_jobs=1" in errors[0]
    Trainer(
        model=Linear(), args=make_args(mixed_precision="no")
    )  # once it finished, the precision may change


def test_tokens_are_only_warned_about_when_counting_them_was_asked_for(make_args, caplog):
    with caplog.at_level(logging.WARNING, logger="trainer"):
        Trainer(model=Linear(), args=make_args(max_steps=2), train_dataset=Regression()).train()
    assert "Counting input tokens" not in caplog.text
    with caplog.at_level(logging.WARNING, logger="trainer"):
        trainer = Trainer(
            model=Linear(),
            args=make_args(max_steps=2, include_num_input_tokens_seen=True),
            train_dataset=Regression(),
        )
        trainer.train()
    assert caplog.text.count("Counting input tokens") == 1  # once, not per batch
    assert trainer.state.num_input_tokens_seen == 2 * 8  # examples counted instead


@pytest.mark.parametrize("n", [1, 7, 1437])
@pytest.mark.parametrize("seed", [0, 42, 2**31 + 3])
def test_the_single_process_train_sampler_draws_accelerates_order(n, seed):
    # One process trains from a plain loader with our sampler; several processes (and a resume through accelerate)
    # from accelerate's SeedableRandomSampler. Both must give the same indices every epoch, the epoch moving on
    # after a full pass as accelerate's does, or runs would not be comparable across process counts.
    from accelerate.data_loader import SeedableRandomSampler

    from trainer._data import SeededRandomSampler

    theirs, ours = SeedableRandomSampler(range(n), data_seed=seed), SeededRandomSampler(range(n), seed)
    assert isinstance(ours, torch.utils.data.RandomSampler) and ours.num_samples == n
    for _ in range(3):
        assert list(ours) == list(theirs)
    theirs.set_epoch(11)
    ours.set_epoch(11)
    assert list(ours) == list(theirs) and ours.epoch == theirs.epoch == 12
    assert len(ours) == n


def test_group_by_length_order_is_reproduced_on_resume(make_args, tmp_path):
    from tests.trainer.test_every_field import PadTokens, Ragged, pad_collate

    def run(**kw):
        model = PadTokens()
        args = make_args(group_by_length=True, num_train_epochs=2, per_device_train_batch_size=4,
                         save_strategy="steps", save_steps=5, **kw)  # fmt: skip
        trainer = Trainer(model=model, args=args, train_dataset=Ragged(), data_collator=pad_collate)
        return trainer, model

    trainer, full = run()
    trainer.train()
    _, resumed = run()
    Trainer(model=resumed, args=trainer.args, train_dataset=Ragged(), data_collator=pad_collate).train(
        resume_from_checkpoint=str(tmp_path / "out" / "checkpoint-5")
    )
    assert len(full.widths) == 24
    assert resumed.widths == full.widths[5:]  # the same batches, in the same order, after the resume point


def test_a_language_models_cache_is_left_out_of_predictions(make_args):
    """transformers drops ``config.keys_to_ignore_at_inference`` (a causal LM's cache object, which cannot be
    concatenated across batches) from the outputs unless ignore_keys is given. Up to transformers 5.23 the output is
    ``past_key_values``, declared in the config; from 5.24 it is ``cache``, dropped by default."""

    class Sequences(Dataset):
        def __init__(self) -> None:
            self.ids = torch.randint(0, 50, (6, 8), generator=torch.Generator().manual_seed(0))

        def __len__(self) -> int:
            return len(self.ids)

        def __getitem__(self, i: int) -> dict:
            return {"input_ids": self.ids[i], "labels": self.ids[i]}

    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(vocab_size=50, n_embd=16, n_layer=1, n_head=2, n_positions=16)
    )
    outputs = model(input_ids=Sequences().ids[:2])
    cache_keys = [key for key, value in outputs.items() if not isinstance(value, torch.Tensor)]
    assert cache_keys, "the model returns a cache: what the test is about"
    trainer = Trainer(
        model=model,
        args=make_args(per_device_eval_batch_size=4),
        compute_metrics=lambda p: {"width": float(p.predictions.shape[-1])},
    )
    output = trainer.predict(Sequences())
    assert isinstance(output.predictions, np.ndarray) and output.predictions.shape == (6, 8, 50)
    assert output.metrics["test_width"] == 50.0
    # A config's own list is left out, whatever it names; and without ignore_keys, an output that cannot be
    # concatenated (the cache, whatever its name) is left out too, where transformers would fail on it.
    model.config.keys_to_ignore_at_inference = ["logits"]
    assert trainer.predict(Sequences()).predictions is None
    model.config.keys_to_ignore_at_inference = []
    assert trainer.predict(Sequences()).predictions.shape == (6, 8, 50)
    # ignore_keys given: exactly those are left out (the cache, named, included).
    assert trainer.predict(Sequences(), ignore_keys=[*cache_keys, "logits"]).predictions is None


def test_transformers_helper_methods(make_args):
    trainer = Trainer(
        model=Linear(),
        args=make_args(learning_rate=0.1, weight_decay=0.01, adam_beta1=0.8),
        train_dataset=Regression(),
    )
    cls, kwargs = Trainer.get_optimizer_cls_and_kwargs(trainer.args)
    assert cls is torch.optim.AdamW and kwargs == {"lr": 0.1, "betas": (0.8, 0.999), "eps": 1e-8}
    assert trainer.get_decay_parameter_names(trainer.model) == ["linear.weight"]
    with pytest.raises(ValueError, match="optimizer is None"):
        trainer.get_learning_rates()
    trainer.create_optimizer()
    assert trainer.get_learning_rates() == [0.1, 0.1]
    weight, bias = trainer.model.linear.weight, trainer.model.linear.bias
    assert trainer.get_optimizer_group(bias)["weight_decay"] == 0.0
    assert trainer.get_optimizer_group(weight)["weight_decay"] == 0.01
    assert trainer.get_optimizer_group() == [[weight], [bias]]
    assert trainer.num_examples(trainer.get_train_dataloader()) == 32
    with trainer.compute_loss_context_manager():
        pass


def test_training_step_overrides_of_either_transformers_signature(make_args):
    seen: list[tuple] = []

    class Modern(Trainer):  # transformers >= 4.46: the loop passes num_items_in_batch, required here
        def training_step(self, model, inputs, num_items_in_batch):
            seen.append(("modern", num_items_in_batch))
            return super().training_step(model, inputs, num_items_in_batch)

    class Older(Trainer):
        def training_step(self, model, inputs):
            seen.append(("older",))
            return super().training_step(model, inputs)

    for cls in (Modern, Older):
        cls(model=Linear(), args=make_args(max_steps=2), train_dataset=Regression()).train()
    assert seen == [("modern", None), ("modern", None), ("older",), ("older",)]


def test_evaluate_takes_the_name_of_one_of_several_eval_datasets(make_args):
    trainer = Trainer(
        model=Linear(), args=make_args(), eval_dataset={"small": Regression(8), "big": Regression(32)}
    )
    assert set(trainer.evaluate()) >= {"eval_small_loss", "eval_big_loss"}
    assert trainer.evaluate(eval_dataset="big")["eval_loss"] == trainer.evaluate()["eval_big_loss"]
    assert len(trainer.get_eval_dataloader("small").dataset) == 8
    with pytest.raises(
        ValueError, match=r"eval_dataset='medium' names no evaluation dataset .*\['big', 'small'\]"
    ):
        trainer.evaluate(eval_dataset="medium")


def test_arguments_and_callbacks_refuse_what_transformers_refuses(make_args):
    from trainer import EarlyStoppingCallback

    with pytest.raises(
        ValueError, match=r"^lr_scheduler_type reduce_lr_on_plateau requires an eval strategy"
    ):
        make_args(lr_scheduler_type="reduce_lr_on_plateau")
    # transformers asserts the early-stopping requirements: an AssertionError, here also a ValueError.
    trainer = Trainer(
        model=Linear(),
        args=make_args(max_steps=2),
        train_dataset=Regression(),
        callbacks=[EarlyStoppingCallback()],
    )
    with pytest.raises(AssertionError, match="requires metric_for_best_model to be defined"):
        trainer.train()


def test_paths_and_compile_backend_as_transformers_fills_them(make_args):
    args = make_args(output_dir="~/runs/a", logging_dir="~/logs")
    assert args.output_dir == os.path.expanduser("~/runs/a") and args.logging_dir == os.path.expanduser(
        "~/logs"
    )
    assert args.run_name == args.output_dir
    compiled = make_args(torch_compile=True)
    assert compiled.torch_compile_backend == "inductor"
    assert compiled.replace(torch_compile=False).torch_compile_backend is None  # derived, so derived again


def test_loaders_say_their_total_batch_size(make_args):
    """transformers' loaders are accelerate's, which have ``total_batch_size``; a one-process loader here too."""
    trainer = Trainer(
        model=Linear(),
        args=make_args(per_device_train_batch_size=4, per_device_eval_batch_size=8),
        train_dataset=Regression(),
        eval_dataset=Regression(),
    )
    assert trainer.get_train_dataloader().total_batch_size == 4
    assert trainer.get_eval_dataloader().total_batch_size == 8


def test_outputs_that_cannot_join_predictions_are_recognised():
    from trainer._evaluation import _gatherable

    class Cache:  # stands for a transformers cache object, under whatever name a release gives it
        pass

    assert _gatherable(torch.ones(2)) and _gatherable(np.float32(1.5)) and _gatherable(None)
    assert _gatherable((torch.ones(1), {"hidden": [torch.ones(1), 2, 3.0]}))
    assert not _gatherable(Cache()) and not _gatherable([torch.ones(1), Cache()]) and not _gatherable("text")
