"""What the Ray backend costs over a plain Ray Tune function trainable, on the same Ray, task and budget.

Both sides train the digits MLP (tests/_digits.py) for the same trials, epochs, batch size and evaluation per
epoch, one CPU per trial on a local Ray with 2 CPUs: ours through ``hyperparameter_search(backend="ray")``
(trainer, accelerate, reporting callback, checkpoints), theirs a hand-written torch loop reporting the eval
accuracy to ``tune.report``. Printed: search wall per trial (wall / trials) and the mean in-trial time Tune
measured, with the ratio of ours to plain (target <= 1.2). Numbers only, never asserted.

Single searches of either side vary by about +-20% on a shared 2-core machine (Tune's scheduling around the
trials, not the trials themselves), so the full run takes ``--rounds`` (default 3) alternated pairs on one Ray and
prints the medians, their ratio and each round's ratio.

    python -m benchmarks.ray_overhead [--quick] [--rounds N]   # --quick: 1 trial a side, to run the code only
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from benchmarks._common import Timer, median, print_table  # noqa: E402

LEARNING_RATES = [1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 3e-2, 5e-3, 1e-3]
BATCH = 64


def _model_init(trial=None):
    from benchmarks._digits import DigitsMLP

    return DigitsMLP(hidden=32)


def plain_trainable(config: dict, data: tuple) -> None:
    """The hand-written loop: what a Ray Tune user writes without any trainer (data via the object store too)."""
    import numpy as np
    import torch
    from ray import tune

    torch.manual_seed(42)
    train, evaluation = data
    model = _model_init()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["learning_rate"])
    loader = torch.utils.data.DataLoader(train, batch_size=BATCH, shuffle=True)
    eval_loader = torch.utils.data.DataLoader(evaluation, batch_size=BATCH)
    for _ in range(config["epochs"]):
        model.train()
        for batch in loader:
            loss = model(**batch)["loss"]
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        model.eval()
        preds, labels = [], []
        with torch.no_grad():
            for batch in eval_loader:
                preds.append(model(batch["x"])["logits"].argmax(-1).numpy())
                labels.append(batch["labels"].numpy())
        accuracy = float((np.concatenate(preds) == np.concatenate(labels)).mean())
        tune.report({"objective": accuracy})


def run_plain(n_trials: int, epochs: int, storage: str) -> tuple[float, float]:
    from ray import tune

    from benchmarks._digits import digits_datasets

    with Timer() as t:
        grid = tune.Tuner(
            tune.with_resources(tune.with_parameters(plain_trainable, data=digits_datasets()), {"cpu": 1}),
            param_space={"learning_rate": tune.grid_search(LEARNING_RATES[:n_trials]), "epochs": epochs},
            tune_config=tune.TuneConfig(metric="objective", mode="max"),
            run_config=tune.RunConfig(name="plain", storage_path=storage, verbose=0),
        ).fit()
    in_trial = [r.metrics["time_total_s"] for r in grid]
    return t.seconds / n_trials, sum(in_trial) / len(in_trial)


def run_ours(n_trials: int, epochs: int, storage: str) -> tuple[float, float]:
    from ray import tune

    from benchmarks._digits import accuracy, digits_datasets
    from hpsearch import hyperparameter_search
    from trainer import Trainer, TrainingArguments

    train, evaluation = digits_datasets()
    args = TrainingArguments(
        output_dir=os.path.join(storage, "ours"),
        disable_tqdm=True,
        report_to="none",
        eval_strategy="epoch",
        save_strategy="epoch",
        logging_strategy="no",
        num_train_epochs=epochs,
        per_device_train_batch_size=BATCH,
        per_device_eval_batch_size=BATCH,
        skip_memory_metrics=True,
        seed=42,
    )
    trainer = Trainer(
        model_init=_model_init,
        args=args,
        train_dataset=train,
        eval_dataset=evaluation,
        compute_metrics=accuracy,
    )
    with Timer() as t:
        best = hyperparameter_search(
            trainer,
            hp_space={"learning_rate": tune.grid_search(LEARNING_RATES[:n_trials])},
            compute_objective="eval_accuracy",
            n_trials=1,
            direction="maximize",
            backend="ray",
            resources_per_trial={"cpu": 1},
        )
    grid = best.run_summary.native
    in_trial = [r.metrics["time_total_s"] for r in grid]
    return t.seconds / n_trials, sum(in_trial) / len(in_trial)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 1 trial, 1 epoch, one round, no warm-up"
    )
    parser.add_argument(
        "--rounds", type=int, default=None, help="alternated pairs of searches (default 3; quick 1)"
    )
    options = parser.parse_args()
    n_trials, epochs = (1, 1) if options.quick else (8, 3)
    rounds = options.rounds or (1 if options.quick else 3)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    plain: list[tuple[float, float]] = []
    ours: list[tuple[float, float]] = []
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    try:
        with tempfile.TemporaryDirectory() as storage:
            # Warm-up: the first trials of a fresh Ray pay for its worker pool; give both sides a warm one. A smoke
            # run's figures mean nothing: it only runs both sides' code, so it warms nothing up.
            if not options.quick:
                run_plain(2, 1, os.path.join(storage, "warm"))
            for i in range(rounds):
                # Alternate which side goes first, so drift and a warmer worker pool favour neither.
                sides = [(run_plain, plain), (run_ours, ours)]
                for run, times in sides if i % 2 == 0 else sides[::-1]:
                    times.append(run(n_trials, epochs, os.path.join(storage, f"round{i}")))
    finally:
        ray.shutdown()
    plain_wall, plain_in = (median([t[k] for t in plain]) for k in (0, 1))
    ours_wall, ours_in = (median([t[k] for t in ours]) for k in (0, 1))
    print_table(
        f"Ray overhead: {n_trials} trials x {epochs} epochs, digits MLP, 2 CPUs, 1 CPU per trial, "
        f"median of {rounds} alternated round(s)",
        ["", "plain Tune trainable", "hpsearch ray backend", "ratio"],
        [
            ["search wall / trial (s)", plain_wall, ours_wall, ours_wall / plain_wall],
            ["mean in-trial time (s)", plain_in, ours_in, ours_in / plain_in],
        ],
    )
    print("each round's wall ratio: " + ", ".join(f"{o[0] / p[0]:.3f}" for p, o in zip(plain, ours)))


if __name__ == "__main__":
    main()
