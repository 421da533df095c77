"""A small real search for the dashboard's browser test: ``python -m tests.hpsearch._dashboard_search OUTPUT_DIR``.

Digits, Optuna, a grid of 6 configurations in a seeded order (6 trials): ``hidden=8`` makes model_init raise
(FAIL), ``learning_rate=1e-5`` cannot reach the ThresholdPruner's 0.5 at the first evaluation (PRUNED), the
others train 3 epochs (COMPLETE). Each step sleeps ``STEP_SLEEP`` seconds so that a watcher sees
trials running, with their evaluations, before they end.
"""

from __future__ import annotations

import sys
import time

import optuna

import spaces
from hpsearch import hyperparameter_search
from tests._digits import DigitsMLP, digits_trainer
from trainer import TrainerCallback

STEP_SLEEP = 0.04


class Slow(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        time.sleep(STEP_SLEEP)


def model_init(trial):
    hidden = trial["hidden"] if trial is not None and "hidden" in trial else 16
    if hidden == 8:
        raise ValueError("model_init refuses hidden=8 (the failing trial of the dashboard test)")
    return DigitsMLP(hidden=hidden)


def main(output_dir: str) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    trainer = digits_trainer(
        output_dir,
        model_init,
        eval_strategy="epoch",
        save_strategy="no",
        num_train_epochs=3,
        learning_rate=3e-3,
        per_device_train_batch_size=32,
        per_device_eval_batch_size=256,
        logging_strategy="no",
        disable_tqdm=True,
    )
    trainer.add_callback(Slow())
    grid = {"hidden": [8, 32, 64], "learning_rate": [1e-5, 3e-2]}
    hyperparameter_search(
        trainer,
        hp_space={
            "hidden": spaces.Categorical([8, 32, 64]),
            "learning_rate": spaces.Categorical([1e-5, 3e-2]),
        },
        compute_objective="eval_accuracy",
        n_trials=6,
        direction="maximize",
        backend="optuna",
        sampler=optuna.samplers.GridSampler(grid, seed=0),
        pruner=optuna.pruners.ThresholdPruner(lower=0.5),
        max_failed_trials=5,
    )


if __name__ == "__main__":
    main(sys.argv[1])
