"""FSDP through accelerate (issue 16): arguments, refusals, and 2 CPU processes (gloo) training sharded.

The in-process tests check how ``fsdp``/``fsdp_config`` are read and what is refused before any work starts. The
multi-process ones run ``tests/trainer/_fsdp_script.py`` under ``accelerate launch``: FSDP2 with two strategies and
both checkpoint formats, interrupted and resumed bit for bit; and an ``accelerate config`` file with FSDP.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from safetensors.torch import load_file

from tests._launch import accelerate_launch
from trainer import HfArgumentParser, Trainer, TrainingArguments
from trainer import _fsdp as fsdp

SCRIPT = "tests.trainer._fsdp_script"


# ------------------------------------------------------------------ arguments, in one process
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, ["full_shard"]),
        (False, []),
        ("", []),
        ("shard_grad_op auto_wrap", ["shard_grad_op", "auto_wrap"]),
        (["FULL_SHARD", "auto_wrap"], ["full_shard", "auto_wrap"]),
        ("auto_wrap", ["full_shard", "auto_wrap"]),  # no strategy named: transformers' default one
    ],
)
def test_fsdp_takes_transformers_forms(make_args, value, expected):
    config = {"min_num_params": 10} if "auto_wrap" in str(value) else None
    assert make_args(fsdp=value, fsdp_config=config).fsdp == expected


def test_fsdp_config_keys_with_or_without_prefix_from_a_dict_or_a_json_file(make_args, tmp_path):
    path = tmp_path / "fsdp.json"
    path.write_text(json.dumps({"fsdp_min_num_params": 100, "fsdp_state_dict_type": "full_state_dict"}))
    from_file = make_args(fsdp="full_shard auto_wrap", fsdp_config=str(path))
    from_dict = make_args(
        fsdp="full_shard auto_wrap", fsdp_config={"min_num_params": 100, "state_dict_type": "FULL_STATE_DICT"}
    )
    assert from_file.fsdp_config == from_dict.fsdp_config == {
        "version": 2, "min_num_params": 100, "state_dict_type": "FULL_STATE_DICT", "sync_module_states": True,
        "cpu_ram_efficient_loading": False, "activation_checkpointing": False,
    }  # fmt: skip
    # Normalised values validate again unchanged (a trial's replace), and round-trip through to_dict.
    assert from_dict.replace(learning_rate=1e-3).fsdp_config == from_dict.fsdp_config
    assert TrainingArguments.from_dict(from_dict.to_dict()).fsdp == ["full_shard", "auto_wrap"]
    assert make_args().fsdp == [] and make_args().fsdp_config == {}
    assert TrainingArguments.from_dict(make_args().to_dict()).fsdp == []


def test_fsdp_from_the_command_line(tmp_path):
    (args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses(
        ["--output_dir", str(tmp_path), "--fsdp", "shard_grad_op auto_wrap", "--fsdp_config",
         '{"transformer_layer_cls_to_wrap": "Linear"}']
    )  # fmt: skip
    assert args.fsdp == ["shard_grad_op", "auto_wrap"]
    assert args.fsdp_config["transformer_layer_cls_to_wrap"] == ["Linear"]


def test_the_plugin_carries_the_arguments(make_args):
    before = dict(os.environ)
    with fsdp.environment_kept():  # accelerate's plugin writes FSDP_CPU_RAM_EFFICIENT_LOADING into os.environ
        plugin = fsdp.plugin(
            make_args(
                fsdp="shard_grad_op auto_wrap",
                fsdp_config={"min_num_params": 100, "activation_checkpointing": True},
            )
        )
    assert dict(os.environ) == before
    assert plugin.fsdp_version == 2 and plugin.reshard_after_forward is False
    assert plugin.min_num_params == 100 and plugin.activation_checkpointing is True
    assert plugin.state_dict_type.name == "SHARDED_STATE_DICT"
    assert plugin.cpu_ram_efficient_loading is True  # how FSDP2 honours sync_module_states (the default)
    assert fsdp.plugin(make_args()) is None


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"fsdp": "sideways"}, r"fsdp must be made of .*remove 'sideways'"),
        ({"fsdp": "full_shard shard_grad_op"}, "at most one sharding strategy"),
        ({"fsdp": 3}, "fsdp must be a bool, a string or a list"),
        ({"fsdp": "full_shard offload"}, "'offload' moves parameters .* trains on the CPU"),
        ({"fsdp": "no_shard"}, "FSDP2 has no 'no_shard' strategy"),
        ({"fsdp": "hybrid_shard"}, "FSDP2 has no 'hybrid_shard' strategy"),
        ({"fsdp": "full_shard", "fsdp_config": {"version": 1}}, r"version'\]=1 is not supported on CPU"),
        ({"fsdp": "full_shard", "fsdp_config": {"version": 3}}, r"version'\] must be 1 .* or 2"),
        ({"fsdp_config": {"min_num_params": 10}}, "fsdp_config must be empty while fsdp is off"),
        (
            {"fsdp": "full_shard", "fsdp_config": {"min_num_params": 10}},
            "only applies with fsdp option 'auto_wrap'",
        ),
        (
            {
                "fsdp": "full_shard auto_wrap",
                "fsdp_config": {"min_num_params": 10, "transformer_layer_cls_to_wrap": ["Linear"]},
            },
            "two wrapping policies",
        ),
        ({"fsdp": "full_shard", "fsdp_config": {"activation_checkpointing": True}}, "has no 'auto_wrap'"),
        ({"fsdp": "full_shard", "fsdp_config": {"forward_prefetch": True}}, "FSDP1 setting that FSDP2"),
        (
            {"fsdp": "full_shard", "fsdp_config": {"backward_prefetch": "backward_pre"}},
            "FSDP1 setting that FSDP2",
        ),
        ({"fsdp": "full_shard", "fsdp_config": {"limit_all_gathers": True}}, "FSDP1 setting that FSDP2"),
        ({"fsdp": "full_shard", "fsdp_config": {"use_orig_params": False}}, "FSDP1 setting that FSDP2"),
        ({"fsdp": "full_shard", "fsdp_config": {"state_dict_type": "LOCAL_STATE_DICT"}}, "LOCAL_STATE_DICT"),
        ({"fsdp": "full_shard", "fsdp_config": {"xla": True}}, "TPUs"),
        ({"fsdp": "full_shard", "fsdp_config": {"colour": "blue"}}, "remove 'colour'"),
        ({"fsdp": "full_shard", "fsdp_config": {"min_num_params": 1, "fsdp_min_num_params": 2}}, "not both"),
        ({"fsdp": "full_shard", "fsdp_config": {"sync_module_states": "yes"}}, "must be a bool"),
        (
            {
                "fsdp": "full_shard auto_wrap",
                "gradient_checkpointing": True,
                "fsdp_config": {"min_num_params": 1, "activation_checkpointing": True},
            },
            "both recompute activations",
        ),
    ],
)
def test_bad_fsdp_arguments_are_refused_with_the_fix(make_args, kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        make_args(**{"use_cpu": True, **kwargs})  # the CPU's refusals also on a machine with a GPU


def test_fsdp_and_deepspeed_together_are_refused(make_args):
    with pytest.raises(ValueError, match="two ways of sharding the model"):
        make_args(fsdp="full_shard", deepspeed={"train_batch_size": 8})


def test_training_with_fsdp_in_a_single_process_is_refused_before_any_step(make_args, tmp_path):
    from tests._digits import DigitsMLP, digits_datasets

    train, _ = digits_datasets()
    trainer = Trainer(
        model_init=lambda: DigitsMLP(hidden=8),
        args=make_args(fsdp=True, save_strategy="steps", save_steps=1, max_steps=2),
        train_dataset=train,
    )
    with pytest.raises(ValueError, match="needs processes started by a launcher"):
        trainer.train()
    assert trainer.state.global_step == 0 and not (tmp_path / "out").exists()


def test_an_accelerate_launch_fsdp_configuration_becomes_the_arguments(make_args, monkeypatch):
    for key, value in {
        "ACCELERATE_USE_FSDP": "true",
        "FSDP_VERSION": "2",
        "FSDP_RESHARD_AFTER_FORWARD": "false",
        "FSDP_AUTO_WRAP_POLICY": "TRANSFORMER_BASED_WRAP",
        "FSDP_TRANSFORMER_CLS_TO_WRAP": "Linear",
        "FSDP_STATE_DICT_TYPE": "FULL_STATE_DICT",
        "FSDP_SHARDING_STRATEGY": "NO_SHARD",
        "FSDP_USE_ORIG_PARAMS": "false",
        "FSDP_ACTIVATION_CHECKPOINTING": "true",
    }.items():
        monkeypatch.setenv(key, value)
    args = make_args()
    # FSDP_SHARDING_STRATEGY and FSDP_USE_ORIG_PARAMS are FSDP1 variables, which accelerate ignores for version 2.
    assert args.fsdp == ["shard_grad_op", "auto_wrap"]
    assert args.fsdp_config == {
        "version": 2,
        "transformer_layer_cls_to_wrap": ["Linear"],
        "state_dict_type": "FULL_STATE_DICT",
        "sync_module_states": False,
        "cpu_ram_efficient_loading": False,
        "activation_checkpointing": True,
    }
    assert (
        args.replace(learning_rate=1e-3).fsdp == args.fsdp
    )  # derived again, not taken as the caller's choice
    with pytest.raises(ValueError, match="both configure FSDP"):
        make_args(fsdp="full_shard")


# ------------------------------------------------------------------ 2 processes on CPU
@pytest.fixture(scope="module")
def fsdp_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("fsdp")
    accelerate_launch(SCRIPT, "args", str(out))
    return out, [json.loads((out / f"args-rank-{i}.json").read_text()) for i in range(2)]


@pytest.mark.multiprocess
@pytest.mark.slow
@pytest.mark.parametrize("case", ["sharded", "full"])
def test_parameters_are_sharded_across_the_two_processes(fsdp_run, case):
    _, results = fsdp_run
    for r in results:
        seen = r[case]
        assert seen["model_class"] == "FSDPDigitsMLP" and seen["param_class"] == "DTensor"
        assert seen["local_numel"] * 2 == seen["global_numel"]  # each process holds half of every parameter
    assert results[0][case]["eval"]["eval_accuracy"] == results[1][case]["eval"]["eval_accuracy"]


@pytest.mark.multiprocess
@pytest.mark.slow
@pytest.mark.parametrize("case", ["sharded", "full"])
def test_resuming_a_sharded_run_continues_it_exactly(fsdp_run, case):
    _, results = fsdp_run
    for r in results:
        seen = r[case]
        assert seen["checkpoints_after_stop"] == ["checkpoint-2", "checkpoint-4"]
        assert seen["resumed_step"] == 12
        assert seen["resumed_digest"] == seen["full_digest"]  # bit for bit
        assert seen["resumed_losses"] == seen["full_losses"]


@pytest.mark.multiprocess
@pytest.mark.slow
def test_checkpoint_layout_follows_state_dict_type(fsdp_run):
    out, (r0, _) = fsdp_run
    common = [
        "rng_state_0.pth",
        "rng_state_1.pth",
        "scheduler.pt",
        "trainer_state.json",
        "training_args.bin",
        "training_args.json",
    ]
    # save_total_limit=2 keeps the last two; with load_best_model_at_end the best one is kept too.
    assert r0["sharded"]["checkpoints"] == {
        name: sorted([*common, "fsdp_model_rank0.safetensors", "fsdp_model_rank1.safetensors",
                      "fsdp_optimizer_rank0.pt", "fsdp_optimizer_rank1.pt"])
        for name in ("checkpoint-10", "checkpoint-12")
    }  # fmt: skip
    full = r0["full"]["checkpoints"]
    assert all(files == sorted([*common, "model.safetensors", "optimizer.pt"]) for files in full.values())
    assert Path(r0["full"]["best"]).name in full and len(full) <= 3
    # A full checkpoint's weights are the whole model, a sharded one's each process's half of it.
    whole = load_file(str(out / "full" / "full" / "checkpoint-12" / "model.safetensors"))
    half = load_file(str(out / "sharded" / "full" / "checkpoint-12" / "fsdp_model_rank0.safetensors"))
    assert whole["net.0.weight"].shape == (32, 64) and half["net.0.weight"].shape == (16, 64)
    assert r0["sharded"]["fsdp_args"][1]["state_dict_type"] == "SHARDED_STATE_DICT"


@pytest.mark.multiprocess
@pytest.mark.slow
def test_best_model_and_final_save_under_fsdp(fsdp_run):
    _, results = fsdp_run
    for r in results:
        assert r["full"]["final_equals_best"] is True  # load_best_model_at_end loaded the best shards
        for case in ("sharded", "full"):
            assert r[case]["final_file_equals_model"] is True  # save_model gathered one model.safetensors


@pytest.mark.multiprocess
@pytest.mark.slow
def test_fsdp_trains_what_data_parallelism_trains(fsdp_run):
    _, (r0, _) = fsdp_run
    fsdp_losses, ddp_losses = r0["sharded"]["full_losses"], r0["ddp_losses"]
    assert fsdp_losses.keys() == ddp_losses.keys()
    assert all(abs(fsdp_losses[k] - ddp_losses[k]) <= 1e-3 for k in ddp_losses)


@pytest.mark.multiprocess
@pytest.mark.slow
def test_sync_module_states_and_ram_efficient_loading_start_from_the_main_processs_weights(fsdp_run):
    _, (r0, r1) = fsdp_run
    assert r0["synced_initial"] == r1["synced_initial"] == r0["rank0_initial"]
    assert r0["ram_efficient_initial"] == r1["ram_efficient_initial"] == r0["rank0_initial"]
    assert r0["unsynced_initial"] != r0["rank0_initial"]  # each process kept its own half


@pytest.mark.multiprocess
@pytest.mark.slow
def test_activation_checkpointing_wraps_the_auto_wrapped_layers(fsdp_run):
    _, (r0, _) = fsdp_run
    assert r0["ac_wrappers"] and not r0["no_ac_wrappers"]
    assert r0["ac_losses"] == r0["no_ac_losses"]  # recomputed, not changed (no dropout in this model)


@pytest.mark.multiprocess
@pytest.mark.slow
def test_bf16_under_fsdp_computes_in_bf16_over_fp32_parameters(fsdp_run):
    _, (r0, _) = fsdp_run
    seen = r0["bf16"]
    assert seen["param_dtype"] == "torch.bfloat16" and seen["master_dtype"] == "torch.float32"
    exact = r0["fp32_losses"]
    assert seen["losses"] != exact and all(abs(seen["losses"][k] - exact[k]) < 0.05 for k in exact)


@pytest.mark.multiprocess
@pytest.mark.slow
def test_auto_wrap_naming_absent_layers_is_refused(fsdp_run):
    _, results = fsdp_run
    for r in results:
        assert "names ['BertLayer'], which are not among the model's modules" in r["bad_wrap"]


ACCELERATE_CONFIG = """\
compute_environment: LOCAL_MACHINE
distributed_type: FSDP
fsdp_config:
  fsdp_version: 2
  fsdp_auto_wrap_policy: SIZE_BASED_WRAP
  fsdp_min_num_params: 100
  fsdp_reshard_after_forward: false
  fsdp_state_dict_type: FULL_STATE_DICT
  fsdp_offload_params: false
  fsdp_cpu_ram_efficient_loading: false
  fsdp_activation_checkpointing: false
machine_rank: 0
mixed_precision: 'no'
num_machines: 1
num_processes: 2
rdzv_backend: static
same_network: true
use_cpu: false
"""


@pytest.mark.multiprocess
@pytest.mark.slow
def test_an_accelerate_config_file_with_fsdp_configures_the_trainer(tmp_path):
    config = tmp_path / "accelerate.yaml"
    config.write_text(ACCELERATE_CONFIG)
    accelerate_launch(SCRIPT, "config", str(tmp_path), config_file=str(config))
    for rank in (0, 1):
        seen = json.loads((tmp_path / f"config-rank-{rank}.json").read_text())
        assert seen["distributed_type"] == "FSDP" and seen["model_class"] == "FSDPDigitsMLP"
        assert seen["fsdp"] == seen["saved_args"] == ["shard_grad_op", "auto_wrap"]
        assert seen["fsdp_config"]["min_num_params"] == 100
        assert seen["fsdp_config"]["state_dict_type"] == "FULL_STATE_DICT"
        assert "model.safetensors" in seen["checkpoints"]["checkpoint-4"]
        assert "both configure FSDP" in seen["twice"]
