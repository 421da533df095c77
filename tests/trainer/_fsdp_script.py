"""Run by tests/trainer/test_fsdp.py as 2 CPU processes (gloo) under ``accelerate launch``: FSDP2 through accelerate.

``args`` mode (a plain 2-process launch, FSDP set by TrainingArguments): each strategy trains the digits MLP
straight through (``full``), then interrupted at step ``STOP_AT`` and resumed from that checkpoint; a DDP run of
the same data is the reference; short runs show ``sync_module_states`` and ``activation_checkpointing`` at work.
``config`` mode (launched with an ``accelerate config`` file whose distributed type is FSDP): arguments that name no
FSDP option take the launcher's configuration. Every process writes what it saw to ``<out>/<mode>-rank-<i>.json``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from typing import Any

import torch
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.utils.data import Subset

from tests._digits import DigitsMLP, accuracy, digits_datasets
from trainer import Trainer, TrainerCallback, TrainingArguments

N_TRAIN = 192  # 2 processes x 16 per batch: 6 steps per epoch
N_EVAL = 64
STOP_AT = 4  # mid-epoch


class StopAt(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == STOP_AT:
            control.should_training_stop = True


def full_state(trainer: Trainer) -> dict[str, torch.Tensor]:
    """The whole model on every process (each gathers the shards)."""
    options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=False)
    return {
        k: v.detach().cpu() for k, v in get_model_state_dict(trainer.model_wrapped, options=options).items()
    }


def digest(tensors: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha256()
    for name, tensor in sorted(tensors.items()):
        h.update(name.encode())
        h.update(tensor.contiguous().numpy().tobytes())
    return h.hexdigest()


def make_trainer(output_dir: str, callbacks: Any = None, model_init: Any = None, **overrides: Any) -> Trainer:
    train, evaluation = digits_datasets()
    kwargs: dict[str, Any] = {
        "output_dir": output_dir, "per_device_train_batch_size": 16, "per_device_eval_batch_size": 16,
        "num_train_epochs": 2, "learning_rate": 1e-2, "logging_steps": 1, "save_steps": 2, "save_total_limit": 2,
        "use_cpu": True, "disable_tqdm": True, "seed": 11, "report_to": "none", "full_determinism": True,
    }  # fmt: skip
    kwargs.update(overrides)
    return Trainer(
        model_init=model_init or (lambda: DigitsMLP(hidden=32, dropout=0.2)),
        args=TrainingArguments(**kwargs),
        train_dataset=Subset(train, range(N_TRAIN)),
        eval_dataset=Subset(evaluation, range(N_EVAL)),
        compute_metrics=accuracy,
        callbacks=callbacks,
    )


def losses(trainer: Trainer) -> dict[int, float]:
    return {e["step"]: e["loss"] for e in trainer.state.log_history if "loss" in e}


def listing(folder: str) -> dict[str, list[str]]:
    return {
        name: sorted(os.listdir(os.path.join(folder, name)))
        for name in sorted(os.listdir(folder))
        if name.startswith("checkpoint-")
    }


def interrupted_and_resumed(out: str, name: str, **overrides: Any) -> dict[str, Any]:
    """The run straight through, and the same run stopped at STOP_AT then resumed from its checkpoint."""
    full = make_trainer(os.path.join(out, name, "full"), **overrides)
    full.train()
    part_dir = os.path.join(out, name, "part")
    make_trainer(part_dir, callbacks=[StopAt()], **overrides).train()
    after_stop = sorted(listing(part_dir))
    resumed = make_trainer(part_dir, **overrides)
    resumed.train(resume_from_checkpoint=os.path.join(part_dir, f"checkpoint-{STOP_AT}"))
    model = full.model_wrapped
    first = next(model.parameters())
    result = {
        "model_class": type(model).__name__,
        "param_class": type(first).__name__,
        "local_numel": first.to_local().numel() if hasattr(first, "to_local") else first.numel(),
        "global_numel": first.numel(),
        "full_digest": digest(full_state(full)),
        "resumed_digest": digest(full_state(resumed)),
        "full_losses": losses(full),
        "resumed_losses": losses(resumed),
        "resumed_step": resumed.state.global_step,
        "checkpoints_after_stop": after_stop,
        "checkpoints": listing(os.path.join(out, name, "full")),
        "eval": full.evaluate(),
        "best": full.state.best_model_checkpoint,
        "fsdp_args": [full.args.fsdp, full.args.fsdp_config],
    }
    final = os.path.join(out, name, "final")
    full.save_model(final)  # every process: the shards are gathered into one file
    full.accelerator.wait_for_everyone()
    if full.args.load_best_model_at_end:
        result["final_equals_best"] = digest(full_state(full)) == digest(
            _read(full.state.best_model_checkpoint)
        )
    result["final_file_equals_model"] = digest(_read(final)) == result["full_digest"]
    return result


def _read(folder: str) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(os.path.join(folder, "model.safetensors"))


def rank_dependent_model(rank: int | None = None) -> DigitsMLP:
    """Each process builds other weights: only a broadcast from the main process makes them agree."""
    model = DigitsMLP(hidden=32)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(float(os.environ["RANK"] if rank is None else rank))
    return model


def args_mode(out: str) -> dict[str, Any]:
    result: dict[str, Any] = {}
    # FSDP2, every unit of >= 100 parameters its own shard group, sharded checkpoints (the FSDP2 default).
    result["sharded"] = interrupted_and_resumed(
        out, "sharded", fsdp="full_shard auto_wrap", fsdp_config={"min_num_params": 100}
    )
    # ZeRO-2-like (parameters kept gathered after forward), full checkpoints, the best model loaded at the end.
    result["full"] = interrupted_and_resumed(
        out,
        "full",
        fsdp=["shard_grad_op"],
        fsdp_config={"fsdp_state_dict_type": "FULL_STATE_DICT"},
        eval_strategy="steps",
        eval_steps=2,
        load_best_model_at_end=True,
        metric_for_best_model="eval_accuracy",
    )
    ddp = make_trainer(os.path.join(out, "ddp"), save_strategy="no")
    ddp.train()
    result["ddp_losses"] = losses(ddp)

    def initial(sync: bool, ram_efficient: bool = False) -> str:
        # learning rate 0: the weights after one step are the ones FSDP started from.
        config = {"sync_module_states": sync, "cpu_ram_efficient_loading": ram_efficient}
        trainer = make_trainer(
            os.path.join(out, f"sync-{sync}-{ram_efficient}"),
            model_init=rank_dependent_model,
            save_strategy="no",
            learning_rate=0.0,
            max_steps=1,
            fsdp=True,
            fsdp_config=config,
        )
        trainer.train()
        return digest(full_state(trainer))

    torch.manual_seed(11)
    result["rank0_initial"] = digest(rank_dependent_model(rank=0).state_dict())
    result["synced_initial"], result["unsynced_initial"] = initial(True), initial(False)
    result["ram_efficient_initial"] = initial(False, ram_efficient=True)

    def checkpointed(on: bool) -> tuple[list[str], dict[int, float]]:
        trainer = make_trainer(
            os.path.join(out, f"ac-{on}"),
            model_init=lambda: DigitsMLP(hidden=32),
            max_steps=3,
            save_strategy="no",
            fsdp="full_shard auto_wrap",
            fsdp_config={"transformer_layer_cls_to_wrap": ["Linear"], "activation_checkpointing": on},
        )
        trainer.train()
        wrappers = sorted(
            {type(m).__name__ for m in trainer.model_wrapped.modules() if "Checkpoint" in type(m).__name__}
        )
        return wrappers, losses(trainer)

    (result["ac_wrappers"], result["ac_losses"]), (result["no_ac_wrappers"], result["no_ac_losses"]) = (
        checkpointed(True),
        checkpointed(False),
    )
    # bf16 under FSDP2: accelerate's mixed-precision policy computes in bf16 over fp32 parameters.
    bf16 = make_trainer(os.path.join(out, "bf16"), max_steps=3, save_strategy="no", bf16=True, fsdp=True)
    bf16.train()
    policy = bf16.accelerator.state.fsdp_plugin.mixed_precision_policy
    result["bf16"] = {
        "param_dtype": str(policy.param_dtype),
        "master_dtype": str(next(bf16.model_wrapped.parameters()).dtype),
        "losses": losses(bf16),
    }
    fp32 = make_trainer(os.path.join(out, "fp32"), max_steps=3, save_strategy="no", fsdp=True)
    fp32.train()
    result["fp32_losses"] = losses(fp32)
    try:
        make_trainer(
            os.path.join(out, "bad-wrap"),
            save_strategy="no",
            fsdp="full_shard auto_wrap",
            fsdp_config={"transformer_layer_cls_to_wrap": ["BertLayer"]},
        ).train()
        result["bad_wrap"] = None
    except ValueError as error:
        result["bad_wrap"] = str(error)
    return result


def config_mode(out: str) -> dict[str, Any]:
    trainer = make_trainer(os.path.join(out, "config"), max_steps=4)
    trainer.train()
    result: dict[str, Any] = {
        "fsdp": trainer.args.fsdp,
        "fsdp_config": trainer.args.fsdp_config,
        "distributed_type": trainer.accelerator.distributed_type.value,
        "model_class": type(trainer.model_wrapped).__name__,
        "checkpoints": listing(os.path.join(out, "config")),
    }
    with open(os.path.join(out, "config", "checkpoint-4", "training_args.json"), encoding="utf-8") as f:
        result["saved_args"] = json.load(f)["fsdp"]
    try:
        make_trainer(os.path.join(out, "twice"), fsdp="full_shard")
        result["twice"] = None
    except ValueError as error:
        result["twice"] = str(error)
    return result


def main(mode: str, out: str) -> None:
    result = args_mode(out) if mode == "args" else config_mode(out)
    rank = int(os.environ["RANK"])
    result["rank"] = rank
    result["world_size"] = int(os.environ["WORLD_SIZE"])
    with open(os.path.join(out, f"{mode}-rank-{rank}.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2, default=str)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
