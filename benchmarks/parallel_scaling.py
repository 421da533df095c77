"""Trials per minute with 1 and 2 workers: Optuna worker processes on one storage, and Ray with 2 CPUs.

Optuna: 1 or 2 processes each run ``hyperparameter_search(storage=..., study_name=..., load_if_exists=True)``
on the same study (a journal file by default, ``--storage sqlite`` for SQLite), whose ``n_trials`` is the
budget the workers share. The processes import everything and run a one-trial warm-up search first, then
start together on a signal, so start-up is not counted; the rate is finished trials over the time from the
signal to the last trial's end, and the workers' CPU time per trial is reported too (it shows whether two
workers make each other do more work, whatever the machine's load). Ray: our backend on a local Ray with
2 CPUs, ``max_concurrent_trials`` 1 vs 2; the rate is trials over the span from the first trial's start to
the last one's end (Ray's start-up excluded). Every process (and Ray worker) runs torch with one thread.
Trials are the digits MLP for 2 epochs, with only the learning rate searched and no pruning, so every trial
does the same work.

    python -m benchmarks.parallel_scaling           # Optuna: 20 trials a run, 3 alternated rounds; Ray: 8, 1
    python -m benchmarks.parallel_scaling --quick   # 2 trials of 1 epoch a run, no warm-up, Optuna only (--ray: Ray)

Target (issue 8): >= 1.7x the trials per minute with 2 workers on 2 cores. On a machine shared with other jobs
the second core is not free, which caps what any scheduler can show; the load average is printed alongside.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from benchmarks._common import (
    JSON_PREFIX,
    emit_json,
    median,
    print_table,
    quiet_logs,
    result_row,
    run_isolated,
    start_ray,
)
from benchmarks._digits import limit_threads, make_trainer

TARGET = 1.7
EPOCHS = 2
ROOT = Path(__file__).resolve().parents[1]


def _space() -> dict[str, Any]:
    import spaces

    return {"learning_rate": spaces.Float(1e-3, 3e-2, log=True)}


@quiet_logs("hpsearch")
def worker(
    journal: str,
    study: str,
    n_trials: int,
    output_dir: str,
    ready: str,
    go: str,
    epochs: int = EPOCHS,
    warm_up: bool = True,
) -> None:
    """One Optuna worker process: get ready, wait for the signal, search the shared study."""
    limit_threads(1)
    import optuna

    from hpsearch import hyperparameter_search

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    trainer = make_trainer(output_dir, num_train_epochs=epochs)
    # Warm-up on a throw-away in-memory study: lazy imports, first-call costs of torch and accelerate, which
    # every worker process pays once and which would otherwise count as contention between workers (a smoke run,
    # whose figures are not read, skips it).
    if warm_up:
        with contextlib.redirect_stdout(io.StringIO()):
            hyperparameter_search(
                make_trainer(f"{output_dir}-warm", num_train_epochs=1), hp_space=_space(),
                compute_objective="eval_accuracy", direction="maximize", n_trials=1, backend="optuna",
            )  # fmt: skip
    Path(ready).touch()
    while not os.path.exists(go):
        time.sleep(0.01)
    cpu = time.process_time()
    with contextlib.redirect_stdout(io.StringIO()):
        hyperparameter_search(
            trainer, hp_space=_space(), compute_objective="eval_accuracy", direction="maximize", n_trials=n_trials,
            backend="optuna", storage=journal, study_name=study, load_if_exists=True,
            sampler=optuna.samplers.RandomSampler(), pruner=optuna.pruners.NopPruner(),
        )  # fmt: skip
    # The parent adds up the workers' CPU time: per trial, it tells whether two workers make each other work more.
    Path(ready).write_text(json.dumps({"cpu": time.process_time() - cpu}))


def run_optuna(
    n_workers: int,
    n_trials: int,
    tmp: str,
    tag: str,
    epochs: int = EPOCHS,
    storage_kind: str = "journal",
    warm_up: bool = True,
) -> dict[str, float]:
    """Trials per minute of ``n_workers`` processes sharing one study (journal file or SQLite)."""
    import optuna
    from optuna.storages.journal import JournalFileBackend

    if storage_kind == "sqlite":
        journal = f"sqlite:///{os.path.join(tmp, tag)}.db"
        storage: Any = journal
    else:
        journal = os.path.join(tmp, f"{tag}.log")
        storage = optuna.storages.JournalStorage(JournalFileBackend(journal))
    study = tag
    go = os.path.join(tmp, f"{tag}.go")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))  # fmt: skip
    # Create the study first so that the workers' create_study(load_if_exists=True) calls do not race.
    optuna.create_study(storage=storage, study_name=study, direction="maximize")
    procs, readies = [], []
    for w in range(n_workers):
        ready = os.path.join(tmp, f"{tag}.ready{w}")
        readies.append(ready)
        spec = json.dumps(
            [journal, study, n_trials, os.path.join(tmp, f"{tag}-w{w}"), ready, go, epochs, warm_up]
        )
        procs.append(subprocess.Popen([sys.executable, "-m", "benchmarks.parallel_scaling", "--worker", spec],
                                      env=env, cwd=str(ROOT)))  # fmt: skip
    while not all(os.path.exists(r) for r in readies):
        if any(p.poll() not in (None, 0) for p in procs):
            raise RuntimeError(f"an Optuna worker exited with {[p.poll() for p in procs]} before starting")
        time.sleep(0.05)
    start = time.time()
    Path(go).touch()
    codes = [p.wait() for p in procs]
    if any(codes):
        raise RuntimeError(f"Optuna workers exited with {codes}")
    cpu = sum(json.loads(Path(r).read_text())["cpu"] for r in readies)
    trials = optuna.load_study(study_name=study, storage=storage).trials
    done = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    if len(done) < n_trials:
        raise RuntimeError(
            f"only {len(done)} of {n_trials} trials completed: {[t.state.name for t in trials]}"
        )
    end = max(t.datetime_complete.timestamp() for t in done)
    return {"trials": len(done), "seconds": end - start, "per_min": len(done) / (end - start) * 60,
            "cpu_per_trial": cpu / len(done)}  # fmt: skip


def run_ray(concurrent: int, n_trials: int, tmp: str, tag: str) -> dict[str, float]:
    """Trials per minute of our Ray backend with ``max_concurrent_trials=concurrent`` on a 2-CPU local Ray."""
    from hpsearch import hyperparameter_search

    trainer = make_trainer(os.path.join(tmp, tag), num_train_epochs=EPOCHS)
    with contextlib.redirect_stdout(io.StringIO()):
        best = hyperparameter_search(
            trainer, hp_space=_space(), compute_objective="eval_accuracy", direction="maximize", n_trials=n_trials,
            # No search_alg: Tune ignores max_concurrent_trials with a BasicVariantGenerator passed in, and
            # builds its own that honours it. Only the learning rate varies: every trial does the same work.
            backend="ray", max_concurrent_trials=concurrent, resources_per_trial={"cpu": 1},
            storage_path=os.path.join(tmp, tag, "ray"),
        )  # fmt: skip
    records = [r for r in best.run_summary.records if r.state.value == "COMPLETE"]
    span = (max(r.finished for r in records) - min(r.started for r in records)).total_seconds()
    return {"trials": len(records), "seconds": span, "per_min": len(records) / span * 60}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 trials a run, one round, Optuna only")
    parser.add_argument("--trials", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--ray", action="store_true", help="run Ray in --quick mode too")
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--storage", choices=("journal", "sqlite"), default="journal",
                        help="what the Optuna workers share (default: a journal file)")  # fmt: skip
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--ray-worker", help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    if opts.worker:
        worker(*json.loads(opts.worker))
        return {}
    if opts.ray_worker:
        concurrent, trials, tmp, tag = json.loads(opts.ray_worker)
        limit_threads(1)
        warnings.filterwarnings("ignore")
        ray = start_ray(2)
        try:
            rate = run_ray(concurrent, trials, tmp, tag)
        finally:
            ray.shutdown()
        print(JSON_PREFIX + json.dumps(rate), flush=True)
        return rate
    limit_threads(1)
    warnings.filterwarnings("ignore")
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    n_trials = opts.trials or (2 if opts.quick else 20)
    rounds = opts.rounds or (1 if opts.quick else 3)
    epochs = 1 if opts.quick else EPOCHS  # a smoke run: 1 epoch a trial, no warm-up in the workers
    use_ray = not opts.no_ray and (opts.ray or not opts.quick)
    load_before = os.getloadavg()[0]
    rates: dict[str, list[float]] = {"optuna-1": [], "optuna-2": [], "ray-1": [], "ray-2": []}
    cpu_per_trial: dict[int, list[float]] = {1: [], 2: []}
    ray_note = ""
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(rounds):
            for n in (1, 2) if i % 2 == 0 else (2, 1):
                run = run_optuna(
                    n, n_trials, tmp, f"optuna{n}-{i}", epochs, opts.storage, warm_up=not opts.quick
                )
                rates[f"optuna-{n}"].append(run["per_min"])
                cpu_per_trial[n].append(run["cpu_per_trial"])
        if use_ray:
            # One round of 8: a Ray trial carries seconds of actor overhead here, so rounds are costly. Each run
            # in a child process: Ray aborts its driver when its processes are killed under it (`ray stop`).
            try:
                for n in (1, 2):
                    spec = json.dumps([n, min(n_trials, 8), tmp, f"ray{n}"])
                    rate = run_isolated("benchmarks.parallel_scaling", ["--ray-worker", spec])["per_min"]
                    rates[f"ray-{n}"].append(rate)
            except Exception as error:
                ray_note = f"ray: not available ({error})"
                rates["ray-1"], rates["ray-2"] = [], []
        else:
            ray_note = (
                "ray: skipped (--no-ray)" if opts.no_ray else "ray: skipped in --quick mode (--ray adds it)"
            )
    load_after = os.getloadavg()[0]

    table, rows = [], []
    shared = "one journal file" if opts.storage == "journal" else "one SQLite database"
    for engine, label in (("optuna", f"Optuna, worker processes on {shared}"),
                          ("ray", "Ray (our backend), max_concurrent_trials on 2 CPUs")):  # fmt: skip
        if not rates[f"{engine}-1"]:
            continue
        one, two = median(rates[f"{engine}-1"]), median(rates[f"{engine}-2"])
        table.append([label, one, two, two / one])
        what = f"{engine} ({opts.storage})" if engine == "optuna" else engine
        rows.append(result_row(f"trials/min 2 workers vs 1, {what}", two, one, two / one, f">= {TARGET}x",
                               two / one >= TARGET, unit="trials/min",
                               note=f"load avg {load_before:.1f}->{load_after:.1f}"))  # fmt: skip
    print(f"parallel_scaling: digits MLP, {epochs} epochs a trial, {n_trials} trials a run, {rounds} alternated "
          f"rounds, torch threads 1 per worker, {os.cpu_count()} CPUs, load average {load_before:.1f} before and "
          f"{load_after:.1f} after")  # fmt: skip
    print_table(
        "Trials per minute (median over rounds)", ["engine", "1 worker", "2 workers", "speed-up"], table
    )
    cpu1, cpu2 = median(cpu_per_trial[1]), median(cpu_per_trial[2])
    cpu_bound = 2 * cpu1 / cpu2
    print(f"\nOptuna CPU per trial (all workers): {cpu1 * 1e3:.0f} ms with 1 worker, {cpu2 * 1e3:.0f} ms with 2: "
          f"on 2 otherwise idle cores, 2 workers would give {cpu_bound:.2f}x (what the wall figure shows when the "
          "machine is shared is the cores other jobs leave free)")  # fmt: skip
    rows.append(result_row(f"CPU-bound speed-up with 2 workers, optuna ({opts.storage}; 2 x CPU/trial ratio)", cpu2 * 1e3,
                           cpu1 * 1e3, cpu_bound, f">= {TARGET}x", cpu_bound >= TARGET, unit="ms CPU/trial",
                           note="load-independent: extra work two workers cause each other"))  # fmt: skip
    if ray_note:
        print(ray_note)
        rows.append(result_row("trials/min 2 workers vs 1, ray", None, None, None, f">= {TARGET}x", None,
                               note=ray_note))  # fmt: skip
    result = {"rates": rates, "cpu_per_trial": cpu_per_trial, "trials": n_trials, "rounds": rounds, "load": [load_before, load_after],
              "ray_note": ray_note}  # fmt: skip
    emit_json("parallel_scaling", rows, **result)
    return result


if __name__ == "__main__":
    main()
