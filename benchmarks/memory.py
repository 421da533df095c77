"""Memory over a long search: peak RSS, and RSS after trial 10 vs after trial 100 (a leak grows between them).

A 100-trial Optuna search of the digits MLP with tiny trials (20 steps, an evaluation every 10, the default
MedianPruner, a checkpoint at the end so that saving is exercised too). An Optuna callback reads the
process RSS with psutil after every trial. Hidden sizes up to 512 make each trial's model and optimizer
a few MB, so a trial that left its model, optimizer, callbacks or accelerator behind would show.

    python -m benchmarks.memory           # 100 trials
    python -m benchmarks.memory --quick   # 4 trials (RSS after trial 3 vs 4)

Target (issue 8): growth from trial 10 to trial 100 under 50 MB.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import resource
import tempfile
from typing import Any

from benchmarks._common import emit_json, print_table, quiet_logs, result_row
from benchmarks._digits import limit_threads, make_trainer

TARGET_MB = 50.0
MB = 1024 * 1024


@quiet_logs("trainer", "hpsearch")
def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 trials")
    parser.add_argument("--trials", type=int, default=None)
    opts = parser.parse_args(argv)
    limit_threads(1)
    import optuna
    import psutil

    import spaces
    from hpsearch import hyperparameter_search

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    n_trials = opts.trials or (4 if opts.quick else 100)
    early = 3 if n_trials < 50 else 10
    process = psutil.Process()
    rss: list[float] = []

    def record_rss(study: Any, frozen: Any) -> None:
        rss.append(process.memory_info().rss / MB)

    start_rss = process.memory_info().rss / MB
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()):
        trainer = make_trainer(
            tmp, max_steps=20, eval_strategy="steps", eval_steps=10, save_strategy="steps", save_steps=20,
            save_total_limit=1,
        )  # fmt: skip
        hyperparameter_search(
            trainer,
            hp_space={"learning_rate": spaces.Float(1e-3, 3e-2, log=True),
                      "hidden": spaces.Categorical([64, 128, 256, 512])},
            compute_objective="eval_accuracy", direction="maximize", n_trials=n_trials, backend="optuna",
            sampler=optuna.samplers.TPESampler(seed=0), callbacks=[record_rss],
        )  # fmt: skip
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    growth = rss[-1] - rss[early - 1]
    marks = sorted({1, early, n_trials // 4, n_trials // 2, 3 * n_trials // 4, n_trials} - {0})
    print(f"memory: {n_trials}-trial Optuna search, digits MLP (hidden 64..512), 20 steps a trial with 2 "
          "evaluations and 1 checkpoint, torch threads 1")  # fmt: skip
    print_table(
        "RSS after trial (MB)",
        ["trial", "RSS"],
        [["before the search", start_rss]] + [[m, rss[m - 1]] for m in marks],
    )
    print(f"\npeak RSS {peak:.1f} MB; growth from trial {early} to trial {n_trials}: {growth:+.1f} MB "
          f"(target < {TARGET_MB:.0f} MB)")  # fmt: skip
    result = {"peak_mb": peak, "growth_mb": growth, "rss_mb": rss, "early_trial": early, "trials": n_trials}
    emit_json(
        "memory",
        [result_row(f"RSS growth, trial {early} -> {n_trials}", growth, None, None, f"< {TARGET_MB:.0f} MB",
                    growth < TARGET_MB, unit="MB", note=f"peak RSS {peak:.0f} MB")],
        **result,
    )  # fmt: skip
    return result


if __name__ == "__main__":
    main()
