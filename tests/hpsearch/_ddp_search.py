"""Run under `accelerate launch --num_processes 2 --cpu`: a pruned Optuna search where every rank trains each trial.

``fsdp`` as a third argument trains every trial sharded with FSDP (and records, per trial, the class of the model
each rank trained: FSDP2 makes it ``FSDP<Model>``).
"""

from __future__ import annotations

import json
import sys

import optuna

import spaces
from tests._digits import DigitsMLP, accuracy, digits_datasets
from trainer import Trainer, TrainerCallback, TrainingArguments

#: The class of the model each trial trained, as the trial's callback saw it when training began.
TRAINED: list[str] = []


class RecordModel(TrainerCallback):
    def on_train_begin(self, args, state, control, model=None, **kwargs):
        TRAINED.append(type(model).__name__)


def model_init(trial):
    hidden = trial.suggest_categorical("hidden", [16, 64]) if trial is not None else 64
    return DigitsMLP(hidden=hidden)


def main(output_dir: str, result_path: str, mode: str = "ddp") -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    train, evaluation = digits_datasets()
    sharded = (
        {"fsdp": "full_shard", "fsdp_config": {"state_dict_type": "FULL_STATE_DICT"}}
        if mode == "fsdp"
        else {}
    )
    args = TrainingArguments(
        output_dir=output_dir,
        eval_strategy="epoch",
        save_strategy="no",
        num_train_epochs=3,
        per_device_train_batch_size=32,
        logging_strategy="no",
        disable_tqdm=True,
        **sharded,
    )
    trainer = Trainer(
        model_init=model_init,
        args=args,
        train_dataset=train,
        eval_dataset=evaluation,
        compute_metrics=accuracy,
        callbacks=[RecordModel()],
    )
    best = trainer.hyperparameter_search(
        hp_space={"learning_rate": spaces.Float(1e-4, 3e-2, log=True)},
        compute_objective="eval_accuracy",
        direction="maximize",
        n_trials=6 if mode == "ddp" else 3,
        backend="optuna",
        sampler=optuna.samplers.RandomSampler(seed=0),
        pruner=optuna.pruners.ThresholdPruner(lower=0.6, n_warmup_steps=0),
    )
    rank = trainer.accelerator.process_index
    records = best.run_summary.records
    with open(f"{result_path}.{rank}", "w") as f:
        json.dump(
            {
                "rank": rank,
                "world": trainer.accelerator.num_processes,
                "trained": TRAINED,
                "records": [
                    {
                        "id": r.trial_id,
                        "state": r.state.value,
                        "params": r.params,
                        "last_step": r.last_step,
                        "objective": r.objective,
                    }
                    for r in records
                ],
            },
            f,
        )


if __name__ == "__main__":
    main(*sys.argv[1:])
