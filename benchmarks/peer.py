"""Our search against the peer users would reach for: ``transformers.Trainer.hyperparameter_search`` (Optuna).

The sweep of `benchmarks.trial_overhead` (digits MLP, eval per epoch, TPE seeded 0, no pruning, no checkpoints)
through both, alternated; the figure is our speed-up (their per-trial wall / ours). transformers' Trainer gets
the same model (its forward already returns the loss), ``report_to="none"``, no saving, no progress bars, and
the same optimizer settings (AdamW, linear decay, clipping at 1.0). Where transformers is not installed the
script says so and reports nothing.

    python -m benchmarks.peer           # full: 10 trials x 3 epochs, 3 rounds
    python -m benchmarks.peer --quick   # 1 trial x 1 epoch a side, 1 round, no warm-up of ours (seconds)
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import tempfile
import time
from typing import Any

from benchmarks._common import emit_json, median, print_table, quiet_logs, result_row
from benchmarks._digits import limit_threads, make_transformers_trainer
from benchmarks.trial_overhead import run_ours, suggest


def run_transformers(
    n_trials: int, epochs: int, output_dir: str
) -> tuple[float, float, list[dict[str, Any]]]:
    """(wall s, CPU s, params of each trial) of ``transformers.Trainer.hyperparameter_search(backend="optuna")``."""
    import optuna

    trainer = make_transformers_trainer(output_dir, num_train_epochs=epochs)
    wall, cpu = time.perf_counter(), time.process_time()
    trainer.hyperparameter_search(
        hp_space=suggest, compute_objective=lambda metrics: metrics["eval_accuracy"], n_trials=n_trials,
        direction="maximize", backend="optuna", sampler=optuna.samplers.TPESampler(seed=0),
        pruner=optuna.pruners.NopPruner(),
    )  # fmt: skip
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall, cpu, []


@quiet_logs("trainer", "hpsearch", "transformers", "optuna", ignore_warnings=True)
def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 trial x 1 epoch, 1 round (seconds)")
    parser.add_argument("--trials", type=int, default=None)
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    opts = parser.parse_args(argv)
    if importlib.util.find_spec("transformers") is None:
        print("peer: transformers is not installed; nothing to compare against")
        emit_json("peer", [result_row("speed-up over transformers.Trainer (optuna)", None, None, None, "report",
                                      None, note="transformers not installed")])  # fmt: skip
        return {}
    limit_threads(1)
    import optuna
    import transformers

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    transformers.logging.set_verbosity_error()
    n_trials = opts.trials or (1 if opts.quick else 10)
    epochs = opts.epochs or (1 if opts.quick else 3)
    rounds = opts.rounds or (1 if opts.quick else 3)

    times: dict[str, list[tuple[float, float]]] = {"ours": [], "transformers": []}
    failed: str | None = None
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()):
        if not opts.quick:  # a smoke run's figures are not read; transformers' warm-up also tells it works
            run_ours(1, 1, f"{tmp}/warm-ours")
        try:
            run_transformers(1, 1, f"{tmp}/warm-hf")
        except Exception as error:  # the baseline is another project's API, installed at its newest release
            failed = f"transformers {transformers.__version__} failed: {type(error).__name__}: {error}"[:300]
    if failed is not None:
        print(f"peer: {failed}; nothing to compare against")
        emit_json("peer", [result_row("speed-up over transformers.Trainer (optuna)", None, None, None, "report",
                                      None, note=failed)])  # fmt: skip
        return {}
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()):
        for i in range(rounds):
            order = ["ours", "transformers"] if i % 2 == 0 else ["transformers", "ours"]
            for side in order:
                run = run_ours if side == "ours" else run_transformers
                wall, cpu, _ = run(n_trials, epochs, f"{tmp}/{side}-{i}")
                times[side].append((wall / n_trials, cpu / n_trials))

    ours_ms = median([w for w, _ in times["ours"]]) * 1e3
    hf_ms = median([w for w, _ in times["transformers"]]) * 1e3
    ours_cpu = median([c for _, c in times["ours"]]) * 1e3
    hf_cpu = median([c for _, c in times["transformers"]]) * 1e3
    speedup, cpu_speedup = hf_ms / ours_ms, hf_cpu / ours_cpu
    print(f"peer: digits MLP, {n_trials} trials x {epochs} epochs, TPE seed 0, {rounds} alternated rounds, "
          f"transformers {transformers.__version__}, torch threads 1")  # fmt: skip
    print_table("Per trial (ms, median)", ["side", "wall", "CPU"],
                [["hpsearch.hyperparameter_search (optuna)", ours_ms, ours_cpu],
                 ["transformers.Trainer.hyperparameter_search (optuna)", hf_ms, hf_cpu]])  # fmt: skip
    print(f"\nour speed-up over transformers: wall {speedup:.2f}x, CPU {cpu_speedup:.2f}x")
    result = {"speedup": speedup, "cpu_speedup": cpu_speedup, "ours_ms": ours_ms, "transformers_ms": hf_ms,
              "transformers_version": transformers.__version__}  # fmt: skip
    emit_json(
        "peer",
        [result_row("per-trial wall, transformers.Trainer search / ours", ours_ms, hf_ms, speedup, "report (>1 = faster)",
                    None, unit="ms/trial", note=f"CPU speed-up {cpu_speedup:.2f}x")],
        **result,
    )  # fmt: skip
    return result


if __name__ == "__main__":
    main()
