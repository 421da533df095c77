"""Checkpoints: folder contents, sharding, tied weights, atomic saves, safe loading, exact resume, best model."""

from __future__ import annotations

import json
import os
import pathlib
import pickle
from typing import Any

import pytest
import torch
from safetensors.torch import load_file
from torch import nn
from torch.utils.data import Subset

from tests._digits import DigitsMLP, digits_datasets
from trainer import ExportableState, Trainer, TrainerCallback, TrainingArguments
from trainer import _checkpoint as ckpt
from trainer._optimization import create_optimizer, settle_foreach

# 200 examples in batches of 16: 13 batches per epoch, the last one short (8 examples).
N_TRAIN = 200


@pytest.fixture(scope="module")
def data():
    train, evaluation = digits_datasets()
    return Subset(train, range(N_TRAIN)), Subset(evaluation, range(60))


def make_args(output_dir: Any, **overrides: Any) -> TrainingArguments:
    base: dict[str, Any] = dict(
        output_dir=str(output_dir),
        per_device_train_batch_size=16,
        per_device_eval_batch_size=32,
        num_train_epochs=3,
        learning_rate=1e-2,
        logging_steps=1,
        save_steps=5,
        use_cpu=True,
        disable_tqdm=True,
        seed=7,
        report_to="none",
    )
    base.update(overrides)
    return TrainingArguments(**base)


def make_trainer(
    data, output_dir, dropout: float = 0.0, callbacks=None, compute_metrics=None, **overrides
) -> Trainer:
    train, evaluation = data
    return Trainer(
        model_init=lambda: DigitsMLP(hidden=32, dropout=dropout),
        args=make_args(output_dir, **overrides),
        train_dataset=train,
        eval_dataset=evaluation,
        callbacks=callbacks,
        compute_metrics=compute_metrics,
    )


def weights(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def assert_weights_equal(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), f"{key} differs"


def checkpoint_names(output_dir) -> list[str]:
    return sorted(
        (n for n in os.listdir(output_dir) if n.startswith("checkpoint-")), key=lambda n: int(n.split("-")[1])
    )


class StopAt(TrainerCallback):
    """Interrupts training after optimizer step ``step``, as a crash or a preemption would."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            control.should_training_stop = True


# ---------------------------------------------------------------------------------------------- contents
def test_checkpoint_folder_contents(data, tmp_path):
    trainer = make_trainer(data, tmp_path, max_steps=10)
    trainer.train()
    assert checkpoint_names(tmp_path) == ["checkpoint-5", "checkpoint-10"]
    folder = tmp_path / "checkpoint-10"
    assert sorted(os.listdir(folder)) == sorted(
        [
            "model.safetensors",
            "optimizer.pt",
            "scheduler.pt",
            "rng_state.pth",
            "trainer_state.json",
            "training_args.json",
            "training_args.bin",
        ]
    )
    # training_args.bin is the arguments object, as transformers saves it (its tests look for the file).
    assert torch.load(folder / "training_args.bin", weights_only=False) == trainer.args
    state = json.loads((folder / "trainer_state.json").read_text())
    assert state["global_step"] == 10
    assert [e["step"] for e in state["log_history"] if "loss" in e] == list(range(1, 11))
    saved_args = json.loads((folder / "training_args.json").read_text())
    assert saved_args["learning_rate"] == 1e-2 and saved_args["output_dir"] == str(tmp_path)
    # The weights file holds the final weights under the model's own names.
    assert_weights_equal(load_file(str(folder / "model.safetensors")), weights(trainer.model))
    # The RNG state is tensors and numbers only: it loads with the safe unpickler.
    rng = torch.load(folder / "rng_state.pth", weights_only=True)
    assert set(rng) >= {"python", "numpy", "cpu"}
    # No temporary folders are left behind.
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]


def test_save_only_model_writes_weights_and_state_only(data, tmp_path):
    trainer = make_trainer(data, tmp_path, max_steps=5, save_only_model=True)
    trainer.train()
    assert sorted(os.listdir(tmp_path / "checkpoint-5")) == [
        "model.safetensors",
        "trainer_state.json",
        "training_args.bin",
        "training_args.json",
    ]


def test_shards_above_the_size_limit_with_an_index(data, tmp_path):
    # The MLP's tensors are 8 KB, 128 B, 1.3 KB and 40 B: a 2 KB limit needs several shards.
    trainer = make_trainer(data, tmp_path, max_steps=5, max_checkpoint_shard_size="2KB")
    trainer.train()
    folder = tmp_path / "checkpoint-5"
    shards = sorted(n for n in os.listdir(folder) if n.endswith(".safetensors"))
    assert len(shards) >= 2 and "model.safetensors" not in shards
    assert all(n.startswith("model-") and n.endswith(f"-of-{len(shards):05d}.safetensors") for n in shards)
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"]) == set(trainer.model.state_dict())
    assert set(index["weight_map"].values()) == set(shards)
    assert index["metadata"]["total_size"] == sum(
        t.numel() * t.element_size() for t in trainer.model.state_dict().values()
    )
    for shard in shards:  # every shard but one-tensor shards stays under the limit
        tensors = load_file(str(folder / shard))
        assert len(tensors) == 1 or sum(t.numel() * t.element_size() for t in tensors.values()) <= 2000
    fresh = DigitsMLP(hidden=32)
    ckpt.load_model_weights(fresh, str(folder))
    assert_weights_equal(weights(fresh), weights(trainer.model))


class TiedModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(12, 8)
        self.head = nn.Linear(8, 12, bias=False)
        self.head.weight = self.embed.weight  # tied, as in language models


def test_tied_weights_are_saved_once_and_stay_tied(tmp_path):
    model = TiedModel()
    files = ckpt.save_model_weights(model, str(tmp_path))
    assert files == ["model.safetensors"]
    stored = load_file(str(tmp_path / "model.safetensors"))
    assert list(stored) == ["embed.weight"]  # the duplicate name is dropped
    fresh = TiedModel()
    ckpt.load_model_weights(fresh, str(tmp_path))
    assert torch.equal(fresh.embed.weight, model.embed.weight)
    assert fresh.head.weight.data_ptr() == fresh.embed.weight.data_ptr()


def test_loading_weights_of_another_model_says_so(tmp_path):
    ckpt.save_model_weights(DigitsMLP(hidden=32), str(tmp_path))
    with pytest.raises(RuntimeError, match="does not match the model"):
        ckpt.load_model_weights(TiedModel(), str(tmp_path))
    with pytest.raises(FileNotFoundError, match="safetensors"):
        ckpt.load_model_weights(TiedModel(), str(tmp_path / "missing"))


def test_save_model_and_save_state(data, tmp_path):
    trainer = make_trainer(data, tmp_path / "run", max_steps=3, save_strategy="no")
    trainer.train()
    trainer.save_model(str(tmp_path / "export"))
    assert sorted(os.listdir(tmp_path / "export")) == [
        "model.safetensors",
        "training_args.bin",
        "training_args.json",
    ]
    fresh = DigitsMLP(hidden=32)
    ckpt.load_model_weights(fresh, str(tmp_path / "export"))
    assert_weights_equal(weights(fresh), weights(trainer.model))
    trainer.save_state()
    state = json.loads((tmp_path / "run" / "trainer_state.json").read_text())
    assert state["global_step"] == 3
    assert not [n for n in os.listdir(tmp_path / "run") if n.startswith("checkpoint-")]


# ---------------------------------------------------------------------------------------------- atomicity
def test_a_save_interrupted_after_the_weights_leaves_nothing_resume_would_take(data, tmp_path, monkeypatch):
    reference = make_trainer(data, tmp_path / "reference", max_steps=20, full_determinism=True)
    reference.train()

    seen: list[str] = []

    def crash_on_second_save(tmp_folder: str) -> None:
        seen.append(tmp_folder)
        assert os.path.isfile(os.path.join(tmp_folder, "model.safetensors"))  # the weights were written
        if len(seen) == 2:
            raise OSError("disk full (injected)")

    monkeypatch.setattr(ckpt, "_before_checkpoint_rename", crash_on_second_save)
    out = tmp_path / "crashed"
    with pytest.raises(OSError, match="injected"):
        make_trainer(data, out, max_steps=20, full_determinism=True).train()
    assert checkpoint_names(out) == ["checkpoint-5"]
    assert not os.path.exists(seen[1])  # the half-published temporary folder was removed
    assert ckpt.get_last_checkpoint(str(out)) == str(out / "checkpoint-5")
    monkeypatch.undo()

    resumed = make_trainer(data, out, max_steps=20, full_determinism=True)
    resumed.train(resume_from_checkpoint=True)
    assert resumed.state.global_step == 20
    assert_weights_equal(weights(resumed.model), weights(reference.model))


def test_incomplete_folders_are_never_resumed_from(data, tmp_path):
    make_trainer(data, tmp_path, max_steps=5).train()
    # What a hard kill (no cleanup) may leave: a temporary folder, and a checkpoint folder with no state file.
    (tmp_path / ".tmp-checkpoint-10").mkdir()
    (tmp_path / ".tmp-checkpoint-10" / "model.safetensors").write_bytes(b"partial")
    (tmp_path / "checkpoint-15").mkdir()
    (tmp_path / "checkpoint-15" / "model.safetensors").write_bytes(b"partial")
    assert ckpt.get_last_checkpoint(str(tmp_path)) == str(tmp_path / "checkpoint-5")
    trainer = make_trainer(data, tmp_path, max_steps=10)
    trainer.train(resume_from_checkpoint=True)
    assert trainer.state.global_step == 10
    assert trainer.state.log_history[0]["step"] == 1


# ---------------------------------------------------------------------------------------------- safe loading
class _Payload:
    """Pickles to a call of ``Path.touch(marker)``: unpickling it runs code."""

    def __init__(self, marker: pathlib.Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (self.marker,))


@pytest.mark.parametrize("victim", ["optimizer.pt", "rng_state.pth", "scheduler.pt"])
def test_loading_refuses_a_planted_pickle_without_running_it(data, tmp_path, victim):
    out = tmp_path / "run"
    make_trainer(data, out, max_steps=5).train()
    marker = tmp_path / "pwned"
    # Sanity check that the payload really executes under an unrestricted unpickler.
    torch.save(_Payload(marker), tmp_path / "probe.pt")
    torch.load(tmp_path / "probe.pt", weights_only=False)
    assert marker.exists()
    marker.unlink()

    torch.save(_Payload(marker), out / "checkpoint-5" / victim)
    trainer = make_trainer(data, out, max_steps=10)
    with pytest.raises(pickle.UnpicklingError):
        trainer.train(resume_from_checkpoint=str(out / "checkpoint-5"))
    assert not marker.exists()


# ---------------------------------------------------------------------------------------------- stateful callbacks
class CountingCallback(TrainerCallback, ExportableState):
    def __init__(self, label: str = "counter") -> None:
        self.label = label
        self.steps_seen = 0

    def on_step_end(self, args, state, control, **kwargs):
        self.steps_seen += 1

    def state(self) -> dict[str, Any]:
        return {"args": {"label": self.label}, "attributes": {"steps_seen": self.steps_seen}}


@pytest.mark.parametrize("restore", [True, False])
def test_stateful_callbacks_are_saved_and_restored_only_when_asked(data, tmp_path, restore):
    first = CountingCallback("a")
    make_trainer(data, tmp_path, max_steps=5, callbacks=[first]).train()
    saved = json.loads((tmp_path / "checkpoint-5" / "trainer_state.json").read_text())["stateful_callbacks"]
    assert saved["CountingCallback"] == {"args": {"label": "a"}, "attributes": {"steps_seen": 5}}
    assert "TrainerControl" in saved
    rebuilt = CountingCallback.from_state(saved["CountingCallback"])
    assert (rebuilt.label, rebuilt.steps_seen) == ("a", 5)

    second = CountingCallback("b")
    trainer = make_trainer(
        data, tmp_path, max_steps=8, callbacks=[second], restore_callback_states_from_checkpoint=restore
    )
    trainer.train(resume_from_checkpoint=True)
    # As transformers: the callback is rebuilt from the checkpoint, constructor arguments included.
    (restored,) = [cb for cb in trainer.callback_handler.callbacks if isinstance(cb, CountingCallback)]
    assert (restored.label, restored.steps_seen) == (("a", 5 + 3) if restore else ("b", 3))


# ---------------------------------------------------------------------------------------------- exact resume
RESUME_CASES = {
    # name: (gradient_accumulation_steps, dropout, interrupted at step, num_train_epochs)
    "mid-epoch": (1, 0.0, 10, 2),
    "mid-second-epoch-dropout": (1, 0.3, 17, 2),
    "epoch-boundary-dropout": (1, 0.3, 13, 2),
    # 13 batches, accumulating 2: 7 steps per epoch, the 7th with a one-batch (partial) window.
    "accumulation-dropout": (2, 0.3, 10, 3),
    "accumulation-after-partial-window": (2, 0.0, 7, 2),
}


@pytest.mark.parametrize("case", list(RESUME_CASES))
def test_interrupted_and_resumed_run_equals_the_uninterrupted_one(data, tmp_path, case):
    accumulation, dropout, k, epochs = RESUME_CASES[case]
    common = dict(
        dropout=dropout,
        full_determinism=True,
        gradient_accumulation_steps=accumulation,
        num_train_epochs=epochs,
        save_steps=k,
        warmup_steps=3,
    )
    full = make_trainer(data, tmp_path / "full", **common)
    full.train()

    interrupted = make_trainer(data, tmp_path / "part", callbacks=[StopAt(k)], **common)
    interrupted.train()
    assert interrupted.state.global_step == k < full.state.global_step
    assert checkpoint_names(tmp_path / "part") == [f"checkpoint-{k}"]

    # A new Trainer (as after a restart) with the same arguments, taking the latest checkpoint.
    resumed = make_trainer(data, tmp_path / "part", **common)
    resumed.train(resume_from_checkpoint=True)

    assert resumed.state.global_step == full.state.global_step
    assert resumed.state.epoch == full.state.epoch
    assert_weights_equal(weights(resumed.model), weights(full.model))
    assert resumed.optimizer.param_groups[0]["lr"] == full.optimizer.param_groups[0]["lr"]

    def loss_entries(trainer: Trainer) -> dict[int, dict[str, float]]:
        return {e["step"]: e for e in trainer.state.log_history if "loss" in e}

    full_curve, resumed_curve = loss_entries(full), loss_entries(resumed)
    # The resumed history holds the first k steps (from the checkpoint) and continues at k + 1 ...
    assert sorted(resumed_curve) == sorted(full_curve) == list(range(1, full.state.global_step + 1))
    # ... with the same losses, learning rates and gradient norms as the uninterrupted run.
    for step in range(k + 1, full.state.global_step + 1):
        assert resumed_curve[step] == full_curve[step], step
    assert [resumed_curve[s] for s in range(1, k + 1)] == [full_curve[s] for s in range(1, k + 1)]


def test_resume_from_an_explicit_path_and_errors(data, tmp_path):
    make_trainer(data, tmp_path, max_steps=10).train()
    trainer = make_trainer(data, tmp_path, max_steps=10)
    trainer.train(resume_from_checkpoint=str(tmp_path / "checkpoint-5"))
    assert [e["step"] for e in trainer.state.log_history if "loss" in e] == list(range(1, 11))
    # transformers' wording first (its tests match it), then what to do.
    with pytest.raises(ValueError, match=r"^No valid checkpoint found in output directory .*no checkpoint"):
        make_trainer(data, tmp_path / "empty", max_steps=10).train(resume_from_checkpoint=True)
    with pytest.raises(ValueError, match=r"^Can't find a valid checkpoint at .*not a directory"):
        make_trainer(data, tmp_path, max_steps=10).train(resume_from_checkpoint=str(tmp_path / "nope"))


# ---------------------------------------------------------------------------------------------- foreach
class _TorchDecidesForeach(Trainer):
    """The same optimizer, with torch's ``foreach`` left unset (None), as a user building it would leave it."""

    def create_optimizer(self):
        if self.optimizer is None:
            self.optimizer = create_optimizer(self.model, self.args)
        return self.optimizer


def _foreach_values(optimizer: torch.optim.Optimizer) -> list[Any]:
    return [optimizer.defaults["foreach"], *(group["foreach"] for group in optimizer.param_groups)]


def test_on_the_cpu_foreach_is_set_to_what_torch_picks_and_training_is_bit_identical(data, tmp_path):
    ours = make_trainer(data, tmp_path / "ours", max_steps=12, full_determinism=True)
    ours.train()
    assert _foreach_values(ours.optimizer) == [False, False, False]

    train, evaluation = data
    unset = _TorchDecidesForeach(
        model_init=lambda: DigitsMLP(hidden=32), args=make_args(tmp_path / "unset", max_steps=12, full_determinism=True),
        train_dataset=train, eval_dataset=evaluation,
    )  # fmt: skip
    unset.train()
    assert _foreach_values(unset.optimizer) == [None, None, None]
    assert_weights_equal(weights(ours.model), weights(unset.model))
    assert [e.get("loss") for e in ours.state.log_history] == [e.get("loss") for e in unset.state.log_history]


def test_accelerate_prepares_a_built_optimizer_only_when_it_has_work_to_do(data, tmp_path, monkeypatch):
    # One process, no gradient scaler: accelerate's optimizer wrapper would only forward step/zero_grad, so an optimizer
    # the trainer just built (no state to place on a device) is stepped as it is, with the same result.
    from accelerate import Accelerator

    from trainer import _loop

    prepared: list[Any] = []
    original = Accelerator.prepare_optimizer

    def spy(self: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        prepared.append(optimizer)
        return original(self, optimizer, *args, **kwargs)

    monkeypatch.setattr(Accelerator, "prepare_optimizer", spy)
    direct = make_trainer(data, tmp_path / "direct", max_steps=12, full_determinism=True)
    direct.train()
    assert prepared == []
    with (
        monkeypatch.context() as m
    ):  # as if accelerate had work to do: prepared, stepped and clipped through it
        m.setattr(_loop, "wrapper_only_forwards", lambda accelerator: False)
        wrapped = make_trainer(data, tmp_path / "wrapped", max_steps=12, full_determinism=True)
        wrapped.train()
    assert prepared == [wrapped.optimizer]
    assert_weights_equal(weights(direct.model), weights(wrapped.model))
    assert [e.get("loss") for e in direct.state.log_history] == [
        e.get("loss") for e in wrapped.state.log_history
    ]
    # An optimizer with state (a second train() without model_init keeps it) is prepared: its state may need placing.
    direct.model_init = None
    direct.args = direct.args.replace(max_steps=2)
    direct.train()
    assert prepared[-1] is direct.optimizer and len(prepared) == 2


def test_foreach_given_in_optim_args_is_kept(data, tmp_path):
    trainer = make_trainer(data, tmp_path, max_steps=3, optim_args="foreach=True")
    trainer.train()
    assert _foreach_values(trainer.optimizer) == [True, True, True]


def test_a_resumed_optimizer_gets_foreach_for_the_device_it_resumes_on(data, tmp_path):
    make_trainer(data, tmp_path, max_steps=10).train()
    # A checkpoint written where torch decides (a GPU run saves None): resumed on the CPU it is settled again.
    path = tmp_path / "checkpoint-5" / ckpt.OPTIMIZER_NAME
    saved = torch.load(path, weights_only=True)
    assert [g["foreach"] for g in saved["param_groups"]] == [False, False]  # what this CPU run saved
    for group in saved["param_groups"]:
        group["foreach"] = None
    torch.save(saved, path)
    resumed = make_trainer(data, tmp_path, max_steps=10)
    resumed.train(resume_from_checkpoint=str(tmp_path / "checkpoint-5"))
    assert _foreach_values(resumed.optimizer) == [False, False, False]

    # The other way: a CPU checkpoint's False is not carried to an accelerator, where torch picks its kernels.
    settle_foreach(resumed.optimizer, resumed.args, torch.device("cuda", 0))
    assert _foreach_values(resumed.optimizer) == [None, None, None]
    # A user's own optimizer (not built by the trainer) is never touched on resume.
    custom = make_trainer(data, tmp_path / "custom", max_steps=10)
    custom.train()
    custom.optimizer.param_groups[0]["foreach"] = None
    custom._created_optimizer = False
    ckpt.load_optimizer_and_scheduler(custom, str(tmp_path / "checkpoint-5"))
    # The file says None (edited above); settling it on this CPU would have made it False.
    assert [g["foreach"] for g in custom.optimizer.param_groups] == [None, None]


# ---------------------------------------------------------------------------------------------- best model
class ScriptedMetric:
    """compute_metrics returning a scripted score per evaluation, so the best step is known in advance."""

    def __init__(self, values: list[float]) -> None:
        self.values = list(values)
        self.calls = 0

    def __call__(self, eval_pred) -> dict[str, float]:
        value = self.values[self.calls]
        self.calls += 1
        return {"score": value}


def best_args(**overrides: Any) -> dict[str, Any]:
    args: dict[str, Any] = dict(
        max_steps=20, eval_strategy="steps", eval_steps=5, save_steps=5, metric_for_best_model="score"
    )
    args.update(overrides)
    return args


@pytest.mark.parametrize("greater", [True, False])
def test_rotation_keeps_best_and_newest_and_the_best_weights_are_loaded(data, tmp_path, greater):
    scores = [0.5, 0.9, 0.7, 0.6] if greater else [0.5, 0.1, 0.3, 0.4]
    saved: dict[int, dict[str, torch.Tensor]] = {}

    class Snapshot(TrainerCallback):
        def on_save(self, args, state, control, model=None, **kwargs):
            saved[state.global_step] = weights(model)

    trainer = make_trainer(
        data,
        tmp_path,
        callbacks=[Snapshot()],
        compute_metrics=ScriptedMetric(scores),
        **best_args(save_total_limit=2, load_best_model_at_end=True, greater_is_better=greater),
    )
    trainer.train()
    assert checkpoint_names(tmp_path) == ["checkpoint-10", "checkpoint-20"]
    state = trainer.state
    assert state.best_metric == (0.9 if greater else 0.1)
    assert state.best_global_step == 10
    assert state.best_model_checkpoint == str(tmp_path / "checkpoint-10")
    assert_weights_equal(weights(trainer.model), saved[10])
    assert_weights_equal(
        weights(trainer.model), load_file(str(tmp_path / "checkpoint-10" / "model.safetensors"))
    )
    assert not torch.equal(trainer.model.state_dict()["net.0.weight"], saved[20]["net.0.weight"])
    # The state saved in the newest checkpoint knows the best one too (resume keeps tracking it).
    newest = json.loads((tmp_path / "checkpoint-20" / "trainer_state.json").read_text())
    assert newest["best_model_checkpoint"] == str(tmp_path / "checkpoint-10")
    assert newest["best_metric"] == state.best_metric


def test_rotation_without_a_best_keeps_the_newest(data, tmp_path):
    make_trainer(data, tmp_path, max_steps=20, save_total_limit=2).train()
    assert checkpoint_names(tmp_path) == ["checkpoint-15", "checkpoint-20"]


def test_save_strategy_best_saves_only_on_improvement(data, tmp_path):
    trainer = make_trainer(
        data,
        tmp_path,
        compute_metrics=ScriptedMetric([0.5, 0.9, 0.7, 0.95]),
        **best_args(save_strategy="best", greater_is_better=True),
    )
    trainer.train()
    assert checkpoint_names(tmp_path) == ["checkpoint-5", "checkpoint-10", "checkpoint-20"]
    assert trainer.state.best_global_step == 20
    assert trainer.state.best_model_checkpoint == str(tmp_path / "checkpoint-20")


def test_best_model_settings_are_checked_up_front(tmp_path):
    with pytest.raises(ValueError, match="save_strategy"):
        make_args(
            tmp_path, load_best_model_at_end=True, eval_strategy="steps", eval_steps=5, save_strategy="epoch"
        )
    with pytest.raises(ValueError, match="eval_strategy"):
        make_args(tmp_path, load_best_model_at_end=True)


def test_a_shard_index_naming_a_file_outside_the_checkpoint_is_refused(tmp_path):
    import json

    import pytest
    import torch

    from trainer._checkpoint import WEIGHTS_INDEX_NAME, load_model_weights

    folder = tmp_path / "checkpoint-1"
    folder.mkdir()
    (tmp_path / "elsewhere.safetensors").write_bytes(b"")
    (folder / WEIGHTS_INDEX_NAME).write_text(json.dumps({"weight_map": {"w": "../elsewhere.safetensors"}}))
    with pytest.raises(ValueError, match=r"not a file in the checkpoint folder.*refusing"):
        load_model_weights(torch.nn.Linear(2, 2), str(folder))


def test_a_corrupt_trainer_state_names_the_file(tmp_path):
    import pytest

    from trainer import TrainerState

    path = tmp_path / "trainer_state.json"
    path.write_text("{not json")
    with pytest.raises(
        ValueError, match=r"trainer_state.json.*not a readable trainer state.*another checkpoint"
    ):
        TrainerState.load_from_json(str(path))
