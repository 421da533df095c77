"""A real Optuna search reporting to trackers (issue 17): every trial's run ends with the state and objective
that the search recorded, including a pruned trial and a failed one, and a tracker's fault is kept in the
trial's record without failing the trial."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

import hpsearch
import spaces
from hpsearch import SearchResult, TrialState
from tests._digits import DigitsMLP, accuracy, digits_datasets
from tests.trainer._tracker_readers import read_dvclive, read_wandb
from trainer import Trainer, TrainerCallback, TrainingArguments

optuna.logging.set_verbosity(optuna.logging.WARNING)


class PruneTrial1(optuna.pruners.BasePruner):
    def prune(self, study, trial) -> bool:
        return trial.number == 1


class BreakTrial2(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.trial_name == "run-2" and state.global_step == 2:
            raise RuntimeError("trial 2 breaks")


def _trainer(out: Path, report_to, callbacks=()) -> Trainer:
    train, evaluation = digits_datasets()
    args = TrainingArguments(
        output_dir=str(out),
        max_steps=6,
        eval_strategy="steps",
        eval_steps=2,
        logging_steps=2,
        save_strategy="no",
        per_device_train_batch_size=64,
        disable_tqdm=True,
        report_to=report_to,
        use_cpu=True,
    )
    return Trainer(
        model_init=lambda trial: DigitsMLP(hidden=trial.get("hidden", 16) if trial else 16),
        args=args,
        train_dataset=train,
        eval_dataset=evaluation,
        compute_metrics=accuracy,
        callbacks=list(callbacks),
    )


@pytest.mark.slow
def test_each_trial_run_ends_with_the_recorded_state_and_objective(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_SILENT", "true")
    for name in ("WANDB_MODE", "WANDB_DIR", "WANDB_RUN_GROUP", "DVCLIVE_DIR"):
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "sweep"
    sampler = optuna.samplers.RandomSampler(seed=0)
    hpsearch.hyperparameter_search(
        _trainer(out, ["dvclive", "wandb"], callbacks=[BreakTrial2()]),
        hp_space={"hidden": spaces.Categorical([8, 16])},
        n_trials=3,
        backend="optuna",
        compute_objective="eval_loss",
        direction="minimize",
        sampler=sampler,
        pruner=PruneTrial1(),
    )
    records = {r.name: r for r in SearchResult.load(out).records}
    assert len(records) == 3
    states = {name: r.state for name, r in records.items()}
    assert sorted(s.value for s in states.values()) == ["COMPLETE", "FAIL", "PRUNED"]
    runs = {run.name: run for run in read_wandb(str(out))}
    for name, record in records.items():
        live = read_dvclive(str(out / name / "dvclive"))
        assert live.state == record.state.value, name
        assert runs[name].state == record.state.value and runs[name].group == "sweep"
        if record.objective is not None:
            assert live.objective == pytest.approx(record.objective)
            assert runs[name].objective == pytest.approx(record.objective)
        assert runs[name].raw["exit_code"] == (1 if record.state is TrialState.FAIL else 0)
        assert "tracker_errors" not in record.extra


def test_a_failing_tracker_does_not_fail_the_trial_and_is_kept_in_its_record(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("DVCLive cannot make its folder here")
    monkeypatch.setenv("DVCLIVE_DIR", str(blocker))
    out = tmp_path / "sweep"
    hpsearch.hyperparameter_search(
        _trainer(out, ["dvclive"]),
        hp_space={"hidden": spaces.Categorical([8, 16])},
        n_trials=2,
        backend="optuna",
        compute_objective="eval_loss",
        direction="minimize",
    )
    records = SearchResult.load(out).records
    assert [r.state for r in records] == [TrialState.COMPLETE, TrialState.COMPLETE]
    for record in records:
        [error] = record.extra["tracker_errors"]
        assert error.startswith("dvclive opening the run:")
