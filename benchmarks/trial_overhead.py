"""Per-trial cost of `hyperparameter_search(backend="optuna")` over a hand-written loop in a plain Optuna objective.

Both sides run the same sweep: digits MLP, ``epochs`` epochs with an evaluation (loss and accuracy) after each,
TPE seeded 0 over the same space (learning rate, hidden size, batch size), AdamW with linear decay and
gradient clipping at 1.0, no checkpoints, no pruning (Optuna's default MedianPruner would stop different
trials on the two sides, whose accuracies differ in the last digits: the work would no longer be the same). TPE's first 10 trials are its random start-up trials, so both sides
train exactly the same parameters (checked). The two searches are alternated several times after a warm-up so
machine noise hits both alike; per-trial wall and process CPU time are reported, medians over the rounds.

    python -m benchmarks.trial_overhead           # full: 10 trials x 3 epochs, 5 rounds
    python -m benchmarks.trial_overhead --quick   # seconds

Target (issue 13): per-trial wall ratio <= 1.15 (issue 4 asked for 1.25). Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import tempfile
import time
from typing import Any

from benchmarks._common import emit_json, median, print_table, quiet_logs, result_row
from benchmarks._digits import handwritten_run, limit_threads, make_trainer

TARGET = 1.15  # issue 13 (issue 4 asked for 1.25)


def space() -> dict[str, Any]:
    import spaces

    return {
        "learning_rate": spaces.Float(1e-3, 3e-2, log=True),
        "hidden": spaces.Categorical([32, 64, 128]),
        "per_device_train_batch_size": spaces.Categorical([16, 32, 64]),
    }


def suggest(trial: Any) -> dict[str, Any]:
    """The same space in Optuna's own words (same names, order and distributions as `space`)."""
    return {
        "learning_rate": trial.suggest_float("learning_rate", 1e-3, 3e-2, log=True),
        "hidden": trial.suggest_categorical("hidden", [32, 64, 128]),
        "per_device_train_batch_size": trial.suggest_categorical("per_device_train_batch_size", [16, 32, 64]),
    }


def run_ours(n_trials: int, epochs: int, output_dir: str) -> tuple[float, float, list[dict[str, Any]]]:
    """(wall s, CPU s, params of each trial) of one `hyperparameter_search` (from the call to its return)."""
    import optuna

    from hpsearch import hyperparameter_search

    trainer = make_trainer(output_dir, num_train_epochs=epochs)
    wall, cpu = time.perf_counter(), time.process_time()
    best = hyperparameter_search(
        trainer, hp_space=space(), compute_objective="eval_accuracy", direction="maximize", n_trials=n_trials,
        backend="optuna", sampler=optuna.samplers.TPESampler(seed=0), pruner=optuna.pruners.NopPruner(),
    )  # fmt: skip
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    records = sorted(best.run_summary.records, key=lambda r: r.number)
    return wall, cpu, [dict(r.params) for r in records]


def run_plain(n_trials: int, epochs: int) -> tuple[float, float, list[dict[str, Any]]]:
    """The same sweep as a user writes it without us: a plain Optuna objective around a hand-written loop."""
    import optuna

    def objective(trial: optuna.Trial) -> float:
        params = suggest(trial)

        def report(epoch: int, step: int, accuracy: float) -> bool:
            trial.report(accuracy, step)  # what our callback does at every evaluation
            return trial.should_prune()

        metrics = handwritten_run(
            learning_rate=params["learning_rate"], batch_size=params["per_device_train_batch_size"],
            epochs=epochs, hidden=params["hidden"], on_epoch=report,
        )  # fmt: skip
        return metrics["eval_accuracy"]

    wall, cpu = time.perf_counter(), time.process_time()
    study = optuna.create_study(
        direction="maximize", sampler=optuna.samplers.TPESampler(seed=0), pruner=optuna.pruners.NopPruner()
    )
    study.optimize(objective, n_trials=n_trials)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall, cpu, [dict(t.params) for t in study.trials]


@quiet_logs("trainer", "hpsearch")
def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="2 trials x 1 epoch, 1 round, no warm-up (seconds)"
    )
    parser.add_argument("--trials", type=int, default=None)
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None, help="alternated runs of each side")
    opts = parser.parse_args(argv)
    limit_threads(1)
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    n_trials = opts.trials or (2 if opts.quick else 10)
    epochs = opts.epochs or (1 if opts.quick else 3)
    rounds = opts.rounds or (1 if opts.quick else 5)

    times: dict[str, list[tuple[float, float]]] = {"ours": [], "plain": []}
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()):
        # Warm-up: imports, the dataset, allocator and thread pools, for both sides (a smoke run's figures are not
        # read: it has none).
        if not opts.quick:
            run_ours(1, 1, f"{tmp}/warm")
            run_plain(1, 1)
        same_params = True
        for i in range(rounds):
            order = ["ours", "plain"] if i % 2 == 0 else ["plain", "ours"]
            params: dict[str, list[dict[str, Any]]] = {}
            for side in order:
                if side == "ours":
                    wall, cpu, params[side] = run_ours(n_trials, epochs, f"{tmp}/round{i}")
                else:
                    wall, cpu, params[side] = run_plain(n_trials, epochs)
                times[side].append((wall / n_trials, cpu / n_trials))
            same_params &= params["ours"] == params["plain"]

    rows = []
    for side, label in (
        ("ours", "hyperparameter_search (optuna)"),
        ("plain", "plain Optuna + hand-written loop"),
    ):
        walls = [w for w, _ in times[side]]
        cpus = [c for _, c in times[side]]
        rows.append([label, median(walls) * 1e3, min(walls) * 1e3, median(cpus) * 1e3])
    wall_ratio = median([w for w, _ in times["ours"]]) / median([w for w, _ in times["plain"]])
    cpu_ratio = median([c for _, c in times["ours"]]) / median([c for _, c in times["plain"]])
    print(f"trial_overhead: digits MLP, {n_trials} trials x {epochs} epochs (eval each epoch), TPE seed 0, "
          f"{rounds} alternated rounds, torch threads 1; same sampled params on both sides: {same_params}")  # fmt: skip
    print_table("Per trial (ms)", ["side", "wall median", "wall best", "CPU median"], rows)
    print(
        f"\nratio ours / plain (median per-trial): wall {wall_ratio:.3f}, CPU {cpu_ratio:.3f}   (target <= {TARGET})"
    )
    ours_ms, plain_ms = (
        median([w for w, _ in times["ours"]]) * 1e3,
        median([w for w, _ in times["plain"]]) * 1e3,
    )
    result = {
        "wall_ratio": wall_ratio, "cpu_ratio": cpu_ratio, "ours_ms": ours_ms, "plain_ms": plain_ms,
        "same_params": same_params, "trials": n_trials, "epochs": epochs, "rounds": rounds,
    }  # fmt: skip
    emit_json(
        "trial_overhead",
        [result_row("per-trial wall, Optuna backend vs plain Optuna loop", ours_ms, plain_ms, wall_ratio,
                    f"<= {TARGET}", wall_ratio <= TARGET, unit="ms/trial", note=f"CPU ratio {cpu_ratio:.2f}")],
        **result,
    )  # fmt: skip
    return result


if __name__ == "__main__":
    main()
