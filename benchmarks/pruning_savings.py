"""What pruning saves: the same search with no pruning, with Hyperband (Optuna) and with ASHA (Ray).

Digits MLP, a 405-step budget per trial (9 epochs of 45 batches of 32) evaluated every 15 steps, so a trial
reports up to 27 times and a reduction factor of 3 has room to act (Hyperband: resources 15..405 steps,
4 brackets; ASHA: grace 1 report, max 27 reports, rungs at 1, 3, 9, 27). The space is wide on purpose
(learning rate over three decades, hidden sizes 8..128, dropout) because that is where pruning pays:
bad configurations are visible after a few evaluations.

For each seed: 40 trials without pruning (TPE), with ``HyperbandPruner`` (TPE), and with ``ASHAScheduler``
through our Ray backend (Tune's seeded random search, 2 CPUs). Reported: total training steps used (sum of
each trial's last step) and the best accuracy of a completed trial, averaged over seeds.

    python -m benchmarks.pruning_savings           # full: 5 seeds x 40 trials each
    python -m benchmarks.pruning_savings --quick   # 1 seed, 8 trials, short budget, no Ray (--ray adds it)

Ray's ASHA runs the first 2 seeds by default (``--asha-seeds 5`` for all): each Ray trial pays seconds of actor
start-up on a busy 2-core machine, which does not change the steps it counts.

Target (issue 8): >= 2.5x fewer steps, best accuracy within 0.5 points of the unpruned search.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import sys
import tempfile
import time
import warnings
from typing import Any

from benchmarks._common import JSON_PREFIX, emit_json, print_table, result_row, run_isolated, start_ray
from benchmarks._digits import limit_threads, make_trainer

STEPS_PER_EVAL = 15
TARGET_SAVING = 2.5
TARGET_POINTS = 0.5


def space() -> dict[str, Any]:
    import spaces

    return {
        "learning_rate": spaces.Float(1e-4, 3e-1, log=True),
        "hidden": spaces.Categorical([8, 16, 32, 64, 128]),
        "dropout": spaces.Float(0.0, 0.5),
    }


def run_search(kind: str, seed: int, n_trials: int, max_steps: int, output_dir: str) -> dict[str, Any]:
    """One search; its total steps, best completed accuracy, trial counts by state and wall time."""
    import optuna

    from hpsearch import hyperparameter_search

    trainer = make_trainer(
        output_dir, max_steps=max_steps, eval_strategy="steps", eval_steps=STEPS_PER_EVAL,
        per_device_train_batch_size=32, seed=seed,
    )  # fmt: skip
    common = dict(hp_space=space(), compute_objective="eval_accuracy", direction="maximize", n_trials=n_trials)
    n_evals = max_steps // STEPS_PER_EVAL
    if kind == "none":
        backend: dict[str, Any] = dict(backend="optuna", sampler=optuna.samplers.TPESampler(seed=seed),
                                       pruner=optuna.pruners.NopPruner())  # fmt: skip
    elif kind == "hyperband":
        backend = dict(
            backend="optuna", sampler=optuna.samplers.TPESampler(seed=seed),
            pruner=optuna.pruners.HyperbandPruner(min_resource=STEPS_PER_EVAL, max_resource=max_steps,
                                                  reduction_factor=3),
        )  # fmt: skip
    else:
        from ray.tune.schedulers import ASHAScheduler
        from ray.tune.search import BasicVariantGenerator

        backend = dict(
            backend="ray", resources_per_trial={"cpu": 1},  # 2 CPUs: 2 trials at a time
            scheduler=ASHAScheduler(time_attr="training_iteration", grace_period=1, max_t=n_evals,
                                    reduction_factor=3),
            search_alg=BasicVariantGenerator(random_state=seed), storage_path=os.path.join(output_dir, "ray"),
        )  # fmt: skip
    start = time.perf_counter()
    best = hyperparameter_search(trainer, **common, **backend)
    wall = time.perf_counter() - start
    records = best.run_summary.records
    states = [r.state.value for r in records]
    return {
        "steps": sum(r.last_step or 0 for r in records),
        "best": float(best.objective),
        "complete": states.count("COMPLETE"),
        "pruned": states.count("PRUNED"),
        "failed": states.count("FAIL"),
        "trials": len(records),
        "wall": wall,
    }


def asha_worker(seed: int, n_trials: int, max_steps: int, output_dir: str) -> dict[str, Any]:
    """One ASHA search on a fresh local Ray (2 CPUs), in its own process; prints its summary as JSON."""
    warnings.filterwarnings("ignore")
    for name in ("trainer", "hpsearch", "ray"):
        logging.getLogger(name).setLevel(logging.ERROR)
    ray = start_ray(2)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            summary = run_search("asha", seed, n_trials, max_steps, output_dir)
    finally:
        ray.shutdown()
    print(JSON_PREFIX + json.dumps(summary), flush=True)
    return summary


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 seed, 8 trials, 135-step budget")
    parser.add_argument("--seeds", type=int, default=None)
    parser.add_argument("--trials", type=int, default=None)
    parser.add_argument("--no-ray", action="store_true", help="skip ASHA")
    parser.add_argument("--asha-worker", help=argparse.SUPPRESS)
    parser.add_argument("--ray", action="store_true", help="run ASHA in --quick mode too")
    parser.add_argument(
        "--asha-seeds", type=int, default=None,
        help="seeds for ASHA (default 2 in full mode: a Ray trial costs seconds of actor start-up here)",
    )  # fmt: skip
    opts = parser.parse_args(argv)
    limit_threads(1)
    if opts.asha_worker:
        return asha_worker(*json.loads(opts.asha_worker))
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore")
    for name in ("trainer", "hpsearch", "ray"):
        logging.getLogger(name).setLevel(logging.ERROR)
    seeds = list(range(opts.seeds or (1 if opts.quick else 5)))
    n_trials = opts.trials or (8 if opts.quick else 40)
    max_steps = 9 * STEPS_PER_EVAL if opts.quick else 27 * STEPS_PER_EVAL

    kinds = ["none", "hyperband"]
    ray_note = ""
    asha_seeds = opts.asha_seeds or min(len(seeds), 2)
    if opts.quick and not opts.ray:
        opts.no_ray = True  # Ray's start-up alone is a minute on a busy 2-core machine: not a smoke test
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            for kind in kinds:
                with contextlib.redirect_stdout(io.StringIO()):
                    runs[kind].append(run_search(kind, seed, n_trials, max_steps, f"{tmp}/{kind}-{seed}"))
                print(f"  seed {seed} {kind}: {runs[kind][-1]}", file=sys.stderr, flush=True)
        if not opts.no_ray:
            # Each in a child process: Ray aborts its driver when its own processes are killed under it
            # (another job on the machine running `ray stop`), which must not take this benchmark down.
            asha: list[dict[str, Any]] = []
            for seed in seeds[:asha_seeds]:
                spec = json.dumps([seed, n_trials, max_steps, f"{tmp}/asha-{seed}"])
                try:
                    asha.append(run_isolated("benchmarks.pruning_savings", ["--asha-worker", spec]))
                except Exception as error:
                    # Keep the seeds that finished (compared with the same seeds unpruned) and say why.
                    ray_note = f"ray: the ASHA search of seed {seed} failed ({str(error)[:300]})"
                    break
                print(f"  seed {seed} asha: {asha[-1]}", file=sys.stderr, flush=True)
            if asha:
                kinds.append("asha")
                runs["asha"] = asha

    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    labels = {"none": "no pruning (TPE)", "hyperband": "Hyperband (TPE, Optuna)", "asha": "ASHA (random, Ray)"}
    table, rows = [], []
    for kind in kinds:
        # Against the unpruned searches of the same seeds (ASHA may run fewer).
        base = runs["none"][: len(runs[kind])]
        base_steps, base_best = mean([r["steps"] for r in base]), mean([r["best"] for r in base])
        steps = mean([r["steps"] for r in runs[kind]])
        best = mean([r["best"] for r in runs[kind]])
        saving = base_steps / steps
        drop = (base_best - best) * 100
        table.append([labels[kind], steps, saving, best * 100, drop,
                      mean([r["pruned"] for r in runs[kind]]), mean([r["wall"] for r in runs[kind]])])  # fmt: skip
        if kind != "none":
            met = saving >= TARGET_SAVING and drop <= TARGET_POINTS
            rows.append(result_row(
                f"training steps saved by {labels[kind]}", steps, base_steps, saving,
                f">= {TARGET_SAVING}x, acc within {TARGET_POINTS} pt", met, unit="steps/search",
                note=f"best acc {best * 100:.2f} vs {base_best * 100:.2f} (-{drop:.2f} pt), {len(runs[kind])} seed(s)"
                + (f"; {ray_note}" if kind == "asha" and ray_note else ""),
            ))  # fmt: skip
    print(f"pruning_savings: digits MLP, {n_trials} trials x {max_steps} steps (eval every {STEPS_PER_EVAL}), "
          f"seeds {seeds} (ASHA: first {asha_seeds}), torch threads 1")  # fmt: skip
    print_table(
        "Per search (mean over seeds)",
        ["search", "steps", "saving (x)", "best acc (%)", "acc drop (pt)", "pruned trials", "wall (s)"], table,
    )
    if ray_note:
        print(ray_note)
    if "asha" not in kinds:
        if opts.no_ray:
            print("ray: skipped (--no-ray)")
        rows.append(result_row("training steps saved by ASHA (Ray)", None, None, None,
                               f">= {TARGET_SAVING}x", None, note=ray_note or "skipped"))  # fmt: skip
    result = {"runs": runs, "max_steps": max_steps, "trials": n_trials, "seeds": seeds, "ray_note": ray_note}
    emit_json("pruning_savings", rows, **result)
    return result


if __name__ == "__main__":
    main()
