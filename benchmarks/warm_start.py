"""Warm start on the digits task: does continuing a search reach a longer fresh search's best sooner?

For each engine and seed: a fresh search of N trials (the earlier one); that search continued for N more trials
with ``warm_start`` (inform); a fresh search of 2N trials; and the fresh N-trial search's best. Printed side by
side: the best accuracy after the N new trials, and how many new trials the warm-started search needed to reach
the fresh 2N-trial search's best (fewer is better; "-" = not reached).

    python -m benchmarks.warm_start            # N=20, 5 seeds, optuna and sigopt (tens of minutes)
    python -m benchmarks.warm_start --quick    # N=2, 1 seed, optuna (seconds)
    python -m benchmarks.warm_start --engines optuna,sigopt,ray
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path
from typing import Any

from benchmarks._common import emit_json, print_table, result_row
from benchmarks._digits import limit_threads, make_trainer


def _space() -> dict[str, Any]:
    import spaces

    return {"learning_rate": spaces.Float(1e-4, 0.3, log=True), "hidden": spaces.Int(8, 128)}


def _search(engine: str, out: Path, n: int, seed: int, warm: Path | None = None) -> list[float]:
    """The accuracy of each new trial, in order (NaN for a failed one)."""
    import hpsearch

    options: dict[str, Any] = {}
    if engine == "optuna":
        import optuna

        options["sampler"] = optuna.samplers.TPESampler(seed=seed)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
    if warm is not None:
        options["warm_start"] = str(warm)
    trainer = make_trainer(str(out), num_train_epochs=1, seed=seed, per_device_train_batch_size=64)
    best = hpsearch.hyperparameter_search(
        trainer,
        hp_space=_space(),
        compute_objective="eval_accuracy",
        direction="maximize",
        n_trials=n,
        backend=engine,
        **options,
    )
    records = [r for r in best.run_summary.records if r.extra.get("source") != "warm_start"]
    return [
        float(r.objective) if r.objective is not None else float("nan")
        for r in sorted(records, key=lambda r: r.number)
    ]


def _reached(values: list[float], target: float) -> int | None:
    best = float("-inf")
    for i, v in enumerate(values, 1):
        best = max(best, v)
        if best >= target:
            return i
    return None


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--trials", type=int)
    parser.add_argument("--seeds", type=int)
    parser.add_argument("--engines")
    opts = parser.parse_args(argv)
    limit_threads()
    n = opts.trials or (2 if opts.quick else 20)
    seeds = range(opts.seeds or (1 if opts.quick else 5))
    engines = (opts.engines or ("optuna" if opts.quick else "optuna,sigopt")).split(",")
    rows, table = [], []
    for engine in engines:
        warm_best, fresh_best, fresh2_best, reached = [], [], [], []
        for seed in seeds:
            with tempfile.TemporaryDirectory() as tmp:
                root = Path(tmp)
                first = _search(engine, root / "first", n, seed)
                warm = _search(engine, root / "warm", n, seed + 1000, warm=root / "first")
                fresh2 = _search(engine, root / "fresh2", 2 * n, seed + 2000)
            target = max(fresh2)
            warm_best.append(max(first + warm))
            fresh_best.append(max(first))
            fresh2_best.append(target)
            hit = _reached(warm, target) if max(first) < target else 0
            reached.append(hit)
            table.append(
                [
                    engine,
                    seed,
                    f"{max(first):.4f}",
                    f"{max(first + warm):.4f}",
                    f"{target:.4f}",
                    "-" if hit is None else hit,
                ]
            )
        done = [r for r in reached if r is not None]
        rows.append(
            result_row(
                f"{engine}: best accuracy, {n} trials + {n} warm-started vs {2 * n} fresh ({len(seeds)} seeds, median)",
                statistics.median(warm_best),
                statistics.median(fresh2_best),
                statistics.median(warm_best) / statistics.median(fresh2_best),
                "reported (>= 1: warm start as good)",
                None,
                note=f"fresh {n}-trial best {statistics.median(fresh_best):.4f}",
            )
        )
        rows.append(
            result_row(
                f"{engine}: new trials the warm-started search needed to reach the fresh {2 * n}-trial best",
                statistics.median(done) if done else None,
                float(2 * n),
                (2 * n) / statistics.median(done) if done and statistics.median(done) else None,
                f"< {2 * n} new trials",
                bool(done) and statistics.median(done) < 2 * n,
                note=f"reached on {len(done)}/{len(reached)} seeds (0 = the first {n} trials already had it)",
            )
        )
    print_table(
        "Per seed",
        [
            "engine",
            "seed",
            f"fresh {n} best",
            f"{n} + {n} warm best",
            f"fresh {2 * n} best",
            "new trials to reach it",
        ],
        table,
    )
    emit_json("warm_start", rows)
    return {"rows": rows}


if __name__ == "__main__":
    main()
