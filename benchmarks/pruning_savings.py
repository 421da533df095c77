"""What pruning saves: the same search with no pruning, with Hyperband (Optuna) and with ASHA (Ray).

Digits MLP trained for 27 epochs (23 batches of 64 each: 621 steps), evaluated after every epoch, so a trial
reports up to 27 times and a reduction factor of 3 has room to act: Hyperband from 1 to 27 epochs (4 brackets;
our Optuna adapter reports the global optimizer step, so its resources are 23..621 steps) and ASHA from 1 to 27
evaluations (our Ray adapter sends one Tune result per evaluation, so ``training_iteration`` counts epochs; rungs
at 1, 3, 9, 27). The space is wide on purpose (learning rate over three decades, hidden sizes 8..128, dropout)
because that is where pruning pays: bad configurations are visible after a few evaluations.

Each pruned search is compared with an unpruned one that samples the same way from the same seed:

- Hyperband (TPE, seed s) against no pruning (TPE, seed s), both through our Optuna backend;
- ASHA through our Ray backend (2 CPUs) against no pruning with a seeded random search: the unpruned random
  search runs first (Optuna's ``RandomSampler(seed=s)``), and Tune's searcher replays its 40 configurations in
  the same order (``points_to_evaluate``), so both searches train exactly the same configurations and differ only
  in pruning. (Comparing ASHA's random search with the unpruned TPE search, as an earlier version did, mixed
  up what the sampler finds with what pruning loses.)

Reported per search: total training steps used (sum of each trial's last step) and the best accuracy of a
completed trial (final evaluation), per seed and averaged over seeds.

    python -m benchmarks.pruning_savings           # full: 5 seeds x 40 trials each, ASHA on every seed
    python -m benchmarks.pruning_savings --quick   # 1 seed, 4 trials, 3 epochs, no Ray (--ray adds it)

Target (issue 8): >= 2.5x fewer steps, best accuracy within 0.5 points of the unpruned search.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import math
import os
import sys
import tempfile
import time
import warnings
from typing import Any

from benchmarks._common import (
    JSON_PREFIX,
    emit_json,
    print_table,
    quiet_logs,
    result_row,
    run_isolated,
    start_ray,
)
from benchmarks._digits import digits_datasets, limit_threads, make_trainer

BATCH = 64
EPOCHS, QUICK_EPOCHS = 27, 3
REDUCTION = 3
TARGET_SAVING = 2.5
TARGET_POINTS = 0.5


def steps_per_epoch() -> int:
    # The Trainer keeps the last, partial batch: ceil, as its own epoch length.
    return math.ceil(len(digits_datasets()[0]) / BATCH)


def space() -> dict[str, Any]:
    import spaces

    return {
        "learning_rate": spaces.Float(1e-4, 3e-1, log=True),
        "hidden": spaces.Categorical([8, 16, 32, 64, 128]),
        "dropout": spaces.Float(0.0, 0.5),
    }


def run_search(
    kind: str,
    seed: int,
    n_trials: int,
    epochs: int,
    output_dir: str,
    configs: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One search; its total steps, best completed accuracy, trial counts by state, wall time and configurations.

    ``kind``: "none" (TPE), "hyperband" (TPE), "random" (no pruning) or "asha" (Ray, replaying ``configs``).
    """
    import optuna

    from hpsearch import hyperparameter_search

    trainer = make_trainer(output_dir, num_train_epochs=epochs, eval_strategy="epoch",
                           per_device_train_batch_size=BATCH, seed=seed)  # fmt: skip
    common = dict(
        hp_space=space(), compute_objective="eval_accuracy", direction="maximize", n_trials=n_trials
    )
    # A fixed study name: Optuna's Hyperband assigns trials to brackets by a hash of the study name and the
    # trial number, so a random name (the default) would make the same seed give different searches.
    study = dict(backend="optuna", study_name=f"pruning-{kind}-{seed}")
    if kind == "none":
        backend: dict[str, Any] = dict(study, sampler=optuna.samplers.TPESampler(seed=seed),
                                       pruner=optuna.pruners.NopPruner())  # fmt: skip
    elif kind == "random":
        backend = dict(
            study, sampler=optuna.samplers.RandomSampler(seed=seed), pruner=optuna.pruners.NopPruner()
        )
    elif kind == "hyperband":
        per_epoch = steps_per_epoch()
        backend = dict(
            study, sampler=optuna.samplers.TPESampler(seed=seed),
            # Our Optuna reporter reports the global optimizer step: resources in steps, 1..`epochs` epochs.
            pruner=optuna.pruners.HyperbandPruner(min_resource=per_epoch, max_resource=epochs * per_epoch,
                                                  reduction_factor=REDUCTION),
        )  # fmt: skip
    else:
        from ray.tune.schedulers import ASHAScheduler
        from ray.tune.search import BasicVariantGenerator

        backend = dict(
            backend="ray", resources_per_trial={"cpu": 1},  # 2 CPUs: 2 trials at a time
            # One Tune result per evaluation, i.e. per epoch: training_iteration counts epochs.
            scheduler=ASHAScheduler(time_attr="training_iteration", grace_period=1, max_t=epochs,
                                    reduction_factor=REDUCTION),
            search_alg=BasicVariantGenerator(points_to_evaluate=[dict(c) for c in configs or []], random_state=seed),
            storage_path=os.path.join(output_dir, "ray"),
        )  # fmt: skip
    start = time.perf_counter()
    best = hyperparameter_search(trainer, **common, **backend)
    wall = time.perf_counter() - start
    records = sorted(best.run_summary.records, key=lambda r: r.number)
    states = [r.state.value for r in records]
    return {
        "steps": sum(r.last_step or 0 for r in records),
        "best": float(best.objective),
        "complete": states.count("COMPLETE"),
        "pruned": states.count("PRUNED"),
        "failed": states.count("FAIL"),
        "trials": len(records),
        "wall": wall,
        "configs": [{k: r.params[k] for k in ("learning_rate", "hidden", "dropout")} for r in records],
    }


def asha_worker(
    seed: int, n_trials: int, epochs: int, output_dir: str, configs: list[dict[str, Any]]
) -> dict[str, Any]:
    """One ASHA search on a fresh local Ray (2 CPUs), in its own process; prints its summary as JSON."""
    warnings.filterwarnings("ignore")
    for name in ("trainer", "hpsearch", "ray"):
        logging.getLogger(name).setLevel(logging.ERROR)
    ray = start_ray(2)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            summary = run_search("asha", seed, n_trials, epochs, output_dir, configs)
    finally:
        ray.shutdown()
    print(JSON_PREFIX + json.dumps(summary), flush=True)
    return summary


def _asha(seed: int, n_trials: int, epochs: int, output_dir: str, configs: list[dict[str, Any]],
          attempts: int = 3) -> dict[str, Any]:  # fmt: skip
    """The ASHA search of one seed in a child process, retried when Ray died under it (another job's ``ray stop``)."""
    error: Exception | None = None
    for attempt in range(attempts):
        spec = json.dumps([seed, n_trials, epochs, f"{output_dir}-{attempt}", configs])
        try:
            return run_isolated("benchmarks.pruning_savings", ["--asha-worker", spec])
        except Exception as exc:  # reported with the seed, retried first
            error = exc
            print(
                f"  seed {seed} asha: attempt {attempt + 1} failed ({str(exc)[:200]})",
                file=sys.stderr,
                flush=True,
            )
    assert error is not None
    raise error


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


#: Each pruned search and the unpruned search it is compared with (same sampler, same seed).
BASELINE = {"hyperband": "none", "asha": "random"}
LABELS = {
    "none": "no pruning (TPE)",
    "hyperband": "Hyperband (TPE, Optuna)",
    "random": "no pruning (random)",
    "asha": "ASHA (same random configs, Ray)",
}


@quiet_logs("trainer", "hpsearch", "ray", ignore_warnings=True)
def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help=f"1 seed, 4 trials, {QUICK_EPOCHS} epochs, no Ray"
    )
    parser.add_argument("--seeds", type=int, default=None)
    parser.add_argument("--trials", type=int, default=None)
    parser.add_argument("--epochs", type=int, default=None, help=f"epochs per trial (default {EPOCHS})")
    parser.add_argument("--no-ray", action="store_true", help="skip ASHA (and its unpruned random search)")
    parser.add_argument("--asha-worker", help=argparse.SUPPRESS)
    parser.add_argument("--ray", action="store_true", help="run ASHA in --quick mode too")
    parser.add_argument("--asha-seeds", type=int, default=None, help="seeds for ASHA (default: all)")
    opts = parser.parse_args(argv)
    limit_threads(1)
    if opts.asha_worker:
        return asha_worker(*json.loads(opts.asha_worker))
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    seeds = list(range(opts.seeds or (1 if opts.quick else 5)))
    n_trials = opts.trials or (4 if opts.quick else 40)
    epochs = opts.epochs or (QUICK_EPOCHS if opts.quick else EPOCHS)
    if opts.quick and not opts.ray:
        opts.no_ray = True  # Ray's start-up alone is a minute on a busy 2-core machine: not a smoke test
    asha_seeds = [] if opts.no_ray else seeds[: opts.asha_seeds or len(seeds)]

    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in LABELS}
    ray_note = ""
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            kinds = ["none", "hyperband"] + (["random"] if seed in asha_seeds and not ray_note else [])
            for kind in kinds:
                with contextlib.redirect_stdout(io.StringIO()):
                    runs[kind].append(run_search(kind, seed, n_trials, epochs, f"{tmp}/{kind}-{seed}"))
                _progress(seed, kind, runs[kind][-1])
            if "random" in kinds:
                # In a child process: Ray aborts its driver when its own processes are killed under it.
                try:
                    runs["asha"].append(
                        _asha(seed, n_trials, epochs, f"{tmp}/asha-{seed}", runs["random"][-1]["configs"])
                    )
                except Exception as error:
                    # Keep the seeds that finished (compared with the same seeds' random search) and say why.
                    ray_note = f"ray: the ASHA search of seed {seed} failed ({str(error)[:300]})"
                    runs["random"].pop()
                    continue
                _progress(seed, "asha", runs["asha"][-1])
                if runs["asha"][-1]["configs"] != runs["random"][-1]["configs"]:
                    ray_note = f"seed {seed}: ASHA did not train the random search's configurations"

    kinds = [k for k in LABELS if runs[k]]
    table, per_seed, rows = [], [], []
    for kind in kinds:
        steps, best = _mean([r["steps"] for r in runs[kind]]), _mean([r["best"] for r in runs[kind]])
        base = BASELINE.get(kind)
        saving = drop = None
        if base is not None:
            base_steps, base_best = (
                _mean([r["steps"] for r in runs[base]]),
                _mean([r["best"] for r in runs[base]]),
            )
            saving, drop = base_steps / steps, (base_best - best) * 100
        table.append([LABELS[kind], steps, "-" if saving is None else saving, best * 100,
                      "-" if drop is None else drop, _mean([r["pruned"] for r in runs[kind]]),
                      _mean([r["complete"] for r in runs[kind]]), _mean([r["wall"] for r in runs[kind]])])  # fmt: skip
        per_seed.append([LABELS[kind], *(f"{r['best'] * 100:.2f} / {r['steps']}" for r in runs[kind])])
        if base is not None:
            assert saving is not None and drop is not None
            met = saving >= TARGET_SAVING and drop <= TARGET_POINTS
            accs = ", ".join(
                f"{r['best'] * 100:.2f} vs {b['best'] * 100:.2f}" for r, b in zip(runs[kind], runs[base])
            )
            rows.append(result_row(
                f"training steps saved by {LABELS[kind]}", steps, base_steps, saving,
                f">= {TARGET_SAVING}x, acc within {TARGET_POINTS} pt", met, unit="steps/search",
                note=f"best acc {best * 100:.2f} vs {base_best * 100:.2f} ({(best - base_best) * 100:+.2f} pt), {len(runs[kind])} seed(s); "
                     f"per seed {accs}" + (f"; {ray_note}" if kind == "asha" and ray_note else ""),
            ))  # fmt: skip
    print(f"pruning_savings: digits MLP, {n_trials} trials x {epochs} epochs of {steps_per_epoch()} steps "
          f"(batch {BATCH}, eval every epoch), seeds {seeds} (ASHA: {asha_seeds}), torch threads 1")  # fmt: skip
    print_table(
        "Per search (mean over seeds; saving and drop against the unpruned search with the same sampler)",
        ["search", "steps", "saving (x)", "best acc (%)", "acc drop (pt)", "pruned", "complete", "wall (s)"],
        table,
    )
    n_cols = max(len(row) for row in per_seed) - 1
    print_table("Per seed: best accuracy (%) / total steps", ["search", *(f"seed {s}" for s in seeds[:n_cols])],
                [row + ["-"] * (n_cols + 1 - len(row)) for row in per_seed])  # fmt: skip
    if ray_note:
        print(ray_note)
    if not runs["asha"]:
        if opts.no_ray:
            print("ray: skipped (--no-ray)")
        rows.append(result_row("training steps saved by ASHA (Ray)", None, None, None,
                               f">= {TARGET_SAVING}x", None, note=ray_note or "skipped"))  # fmt: skip
    for kind_runs in runs.values():
        for r in kind_runs:
            r.pop("configs", None)  # the JSON line stays short
    result = {"runs": runs, "epochs": epochs, "steps_per_epoch": steps_per_epoch(), "trials": n_trials,
              "seeds": seeds, "asha_seeds": asha_seeds, "ray_note": ray_note}  # fmt: skip
    emit_json("pruning_savings", rows, **result)
    return result


def _progress(seed: int, kind: str, run: dict[str, Any]) -> None:
    shown = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in run.items() if k != "configs"}
    print(f"  seed {seed} {kind}: {shown}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
