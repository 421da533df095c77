"""What the Ray backend costs over a plain Ray Tune function trainable, on the same Ray, task and budget.

Both sides train the digits MLP (tests/_digits.py) for the same trials, epochs, batch size and evaluation per
epoch, one CPU per trial on a local Ray with 2 CPUs: ours through ``hyperparameter_search(backend="ray")``
(trainer, accelerate, reporting callback, checkpoints), theirs a hand-written torch loop reporting the eval
accuracy to ``tune.report``. The plain side runs twice: as Tune runs it by default (a new actor, a new process,
per trial) and with Tune's ``reuse_actors=True`` (the fair baseline for our backend, which reuses actors by
default). The datasets are built once, before any timed search, and reach every side through the object store.
Printed, per trial: search wall (wall / trials), the mean in-trial time Tune measured and the driver process's
CPU time, with the ratios of ours to each plain side (issue 32: <= 1.10 against plain with reuse). Numbers only,
never asserted.

Single searches of any side vary by about +-20% on a shared 2-core machine (Tune's scheduling around the
trials, not the trials themselves), so the full run takes ``--rounds`` (default 3) rounds of the three searches on
one Ray, rotating which goes first, and prints the medians, their ratios and each round's ratios.

    python -m benchmarks.ray_overhead [--quick] [--rounds N]   # --quick: 1 trial a side, to run the code only
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

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


class Side(NamedTuple):
    """One search's figures, each per trial: wall of the whole search, Tune's in-trial time, the driver's CPU."""

    wall: float
    in_trial: float
    driver_cpu: float


def _measured(n_trials: int, fit: Callable[[], Any]) -> Side:
    """Runs ``fit`` (a search returning Tune's ResultGrid) and returns its per-trial figures."""
    cpu = time.process_time()
    with Timer() as t:
        grid = fit()
    cpu = time.process_time() - cpu
    in_trial = [r.metrics["time_total_s"] for r in grid]
    return Side(t.seconds / n_trials, sum(in_trial) / len(in_trial), cpu / n_trials)


def run_plain(n_trials: int, epochs: int, storage: str, data: tuple, reuse_actors: bool = False) -> Side:
    """The plain trainable; ``reuse_actors`` as Tune's TuneConfig takes it (its default for a function trainable
    is False: a new actor, a new process, per trial)."""
    from ray import tune

    return _measured(
        n_trials,
        lambda: tune.Tuner(
            tune.with_resources(tune.with_parameters(plain_trainable, data=data), {"cpu": 1}),
            param_space={"learning_rate": tune.grid_search(LEARNING_RATES[:n_trials]), "epochs": epochs},
            tune_config=tune.TuneConfig(metric="objective", mode="max", reuse_actors=reuse_actors),
            run_config=tune.RunConfig(name="plain", storage_path=storage, verbose=0),
        ).fit(),
    )


def run_plain_reused(n_trials: int, epochs: int, storage: str, data: tuple) -> Side:
    return run_plain(n_trials, epochs, storage, data, reuse_actors=True)


def run_ours(n_trials: int, epochs: int, storage: str, data: tuple) -> Side:
    from ray import tune

    from benchmarks._digits import accuracy
    from hpsearch import hyperparameter_search
    from trainer import Trainer, TrainingArguments

    train, evaluation = data
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
    return _measured(
        n_trials,
        lambda: (
            hyperparameter_search(
                trainer,
                hp_space={"learning_rate": tune.grid_search(LEARNING_RATES[:n_trials])},
                compute_objective="eval_accuracy",
                n_trials=1,
                direction="maximize",
                backend="ray",
                resources_per_trial={"cpu": 1},
            ).run_summary.native
        ),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 1 trial, 1 epoch, one round, no warm-up"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="alternated rounds of the three searches (default 3; quick 1)",
    )
    options = parser.parse_args()
    n_trials, epochs = (1, 1) if options.quick else (8, 3)
    rounds = options.rounds or (1 if options.quick else 3)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    from benchmarks._digits import digits_datasets

    sides: dict[str, Callable[..., Side]] = {
        "plain Tune trainable": run_plain,
        "plain, reuse_actors=True": run_plain_reused,
        "hpsearch ray backend": run_ours,
    }
    times: dict[str, list[Side]] = {name: [] for name in sides}
    data = digits_datasets()  # built once, outside every timed search
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    try:
        with tempfile.TemporaryDirectory() as storage:
            # Warm-up: the first trials of a fresh Ray pay for its worker pool; give every side a warm one. A smoke
            # run's figures mean nothing: it only runs every side's code, so it warms nothing up.
            if not options.quick:
                run_plain(2, 1, os.path.join(storage, "warm"), data)
            order = list(sides)
            for i in range(rounds):
                # Rotate which side goes first, so drift and a warmer worker pool favour none of them.
                for name in order[i % 3 :] + order[: i % 3]:
                    times[name].append(
                        sides[name](n_trials, epochs, os.path.join(storage, f"round{i}"), data)
                    )
    finally:
        ray.shutdown()
    med = {
        name: Side(*(median([getattr(t, f) for t in runs]) for f in Side._fields))
        for name, runs in times.items()
    }
    plain, reused, ours = (med[name] for name in sides)
    print_table(
        f"Ray overhead: {n_trials} trials x {epochs} epochs, digits MLP, 2 CPUs, 1 CPU per trial, "
        f"median of {rounds} alternated round(s)",
        [
            "",
            "plain Tune trainable",
            "hpsearch ray backend",
            "ratio",
            "plain, reuse_actors=True",
            "ratio vs reuse",
        ],
        [
            [label, getattr(plain, f), getattr(ours, f), getattr(ours, f) / getattr(plain, f),
             getattr(reused, f), getattr(ours, f) / getattr(reused, f)]
            for label, f in (
                ("search wall / trial (s)", "wall"),
                ("mean in-trial time (s)", "in_trial"),
                ("driver CPU / trial (s)", "driver_cpu"),
            )
        ],
    )  # fmt: skip
    for name, base in (("plain", "plain Tune trainable"), ("plain reuse", "plain, reuse_actors=True")):
        ratios = [o.wall / p.wall for p, o in zip(times[base], times["hpsearch ray backend"])]
        print(f"each round's wall ratio vs {name}: " + ", ".join(f"{r:.3f}" for r in ratios))


if __name__ == "__main__":
    main()
