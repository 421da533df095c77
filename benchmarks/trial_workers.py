"""`trial_workers`: trials per hour of the digits sweep, the worker path's per-trial overhead, and a stuck trial.

1. The digits sweep (Optuna, TPE seeded 0, MedianPruner: pruning on) run four ways one after another in this
   process: ``trial_workers=2``, ``trial_workers=1``, ``n_jobs=2`` (threads in this process) and in-process
   ``n_jobs=1``. Two rates: finished trials over the whole call (worker start-up included, the forkserver
   already running as from a process's second search: ``--startup`` measures a first one), and from the first
   trial's end to the last one's (once the workers run). Every way runs torch with one thread per trial (the
   workers take the driver's setting).
2. Per-trial overhead of the worker path: trivial trials (one step, one evaluation) with ``trial_workers=1`` vs in
   this process; the time of each trial as the driver sees it (around the executor's ``run``), medians, the
   first trial of a worker left out (its first-call costs are start-up).
3. A trial stuck in a 60 s sleep with ``trial_timeout=3``: seconds until it is recorded FAIL, once with the sleep
   interruptible (the worker's own timer stops it) and once with SIGALRM blocked (only the kill stops it), from
   the trial's start in its worker to its FAIL record (the worker's start-up before it is not the trial's).

    python -m benchmarks.trial_workers             # 30 trials of 2 epochs
    python -m benchmarks.trial_workers --quick     # 2 trials of 1 epoch, no warm-ups, trial_timeout=1
    python -m benchmarks.trial_workers --scaling   # only 2 workers vs 1, side by side (see below)
    python -m benchmarks.trial_workers --scaling --epochs 8   # the same with trials 4x longer
    python -m benchmarks.trial_workers --startup   # workers forked from a forkserver vs spawned (see below)

``--scaling`` measures the 2-vs-1 ratio alone, in one run, with the two ways interleaved 1, 2, 2, 1 (the same
sweep each time, in fresh folders, after a search that started the forkserver): on a shared machine whose load
drifts, a drift that is linear over the run weighs on both ways alike, which one way after the other does not. The ratio is of the summed trials over the
summed seconds of each way (whole calls, worker start-up included), printed beside the ratio of each pair and the
ratio once the workers run (from each call's first trial end to its last).

``--startup`` measures what the workers' start cost a search: fresh processes, one per way, alternated spawn,
forkserver preloading torch and the trainer only, forkserver preloading the search's modules too (the default),
then the same in reverse, each running two searches one after the other (2 workers, 2 trivial trials: one step, no
evaluation); the seconds of each call, the first (the forkserver starts and imports) and the second (the server is
running) apart.

Targets (issue 31): >= 1.8x trials/hour with 2 workers vs 1 on 2 cores; overhead <= 20 ms; stuck trial FAIL
<= 6 s. Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import signal
import tempfile
import time
from typing import Any

from benchmarks._common import emit_json, median, print_table, quiet_logs, result_row
from benchmarks._digits import limit_threads, make_trainer


def _space() -> dict[str, Any]:
    import spaces

    return {"learning_rate": spaces.Float(1e-3, 3e-2, log=True), "hidden": spaces.Categorical([32, 64, 128])}


def stuck_model_init(trial: Any = None) -> Any:
    """Sleeps 60 s (with SIGALRM blocked when the trial's ``blocked`` parameter says so), then builds the model."""
    from benchmarks._digits import model_init

    if trial is not None:
        if trial["blocked"]:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        time.sleep(60)
    return model_init(trial)


def _timed_runs() -> list[float]:
    """Wrap both executors' ``run`` (once): the seconds of each trial as the driver sees them, in order."""
    from hpsearch import executor

    times: list[float] = []
    if getattr(executor.InProcess.run, "timed", None) is not None:
        return executor.InProcess.run.timed  # type: ignore[attr-defined,no-any-return]
    for cls in (executor.InProcess, executor._Workers):
        original = cls.__dict__["run"]

        def run(self: Any, *args: Any, _original: Any = original) -> Any:
            start = time.perf_counter()
            try:
                return _original(self, *args)
            finally:
                times.append(time.perf_counter() - start)

        run.timed = times  # type: ignore[attr-defined]
        cls.run = run  # type: ignore[method-assign]
    return times


def _search(trainer: Any, n_trials: int, **kwargs: Any) -> tuple[float, Any]:
    import optuna

    from hpsearch import hyperparameter_search

    kwargs.setdefault("pruner", optuna.pruners.MedianPruner(n_startup_trials=5))
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        best = hyperparameter_search(
            trainer,
            hp_space=kwargs.pop("hp_space", None) or _space(),
            compute_objective="eval_accuracy",
            direction="maximize",
            n_trials=n_trials,
            backend="optuna",
            max_failed_trials=n_trials + 1,
            sampler=optuna.samplers.TPESampler(seed=0),
            **kwargs,
        )
    return time.perf_counter() - start, best


def sweep_rates(
    tmp: str, n_trials: int, epochs: int, warm_up: bool = True
) -> list[tuple[str, float, float, int, float]]:
    """(way, trials/hour over the whole call, trials/hour from the first trial's start, pruned) for each way.

    ``warm_up=False`` (a smoke run, whose figures are not read): the first way pays the first-call costs."""
    _timed_runs()
    if warm_up:
        # Warm-up in this process: the in-process ways would otherwise pay torch's and accelerate's first-call
        # costs ...
        _search(make_trainer(os.path.join(tmp, "warm"), num_train_epochs=1), 1)
        # ... and the forkserver the workers are forked from (a process's first worker search starts it:
        # `--startup`).
        _search(make_trainer(os.path.join(tmp, "warm-workers"), num_train_epochs=1), 1, trial_workers=1)
    rows = []
    ways = {
        "trial_workers=2": {"trial_workers": 2},
        "trial_workers=1": {"trial_workers": 1},
        "n_jobs=2 (threads)": {"n_jobs": 2},
        "in-process, n_jobs=1": {},
    }
    for name, kwargs in ways.items():
        trainer = make_trainer(os.path.join(tmp, name.replace(" ", "_")), num_train_epochs=epochs)
        seconds, best = _search(trainer, n_trials, **kwargs)
        # Once the workers run: from the first trial's end to the last one's (start-up and first trials left out).
        ends = sorted(r.finished for r in best.run_summary.records)
        span = (ends[-1] - ends[0]).total_seconds()
        pruned = best.run_summary.counts().get("PRUNED", 0)
        # Pruning (and TPE, told results in another order) differ between the ways: steps/s compares the work.
        steps = sum(r.last_step or 0 for r in best.run_summary.records)
        rows.append((name, n_trials / seconds * 3600, (n_trials - 1) / span * 3600, pruned, steps / seconds))
        print(
            f"  {name}: {seconds:.1f} s in all, {span:.1f} s from the first trial's end to the last's, "
            f"{pruned} pruned",
            flush=True,
        )
    return rows


def scaling_side_by_side(tmp: str, n_trials: int, epochs: int) -> dict[str, Any]:
    """``trial_workers`` 1, 2, 2, 1 (see the module): seconds of each call, trials/hour of each way, their ratio."""
    _timed_runs()
    _search(make_trainer(os.path.join(tmp, "warm"), num_train_epochs=1), 1)  # as in `sweep_rates`
    # The forkserver the workers are forked from starts (and imports torch) at the first worker search of a
    # process: started here, so that neither way pays it (`--startup` measures it).
    _search(make_trainer(os.path.join(tmp, "warm-workers"), num_train_epochs=1), 1, trial_workers=1)
    seconds: dict[int, list[float]] = {1: [], 2: []}
    spans: dict[int, list[float]] = {
        1: [],
        2: [],
    }  # from the first trial's end to the last's: once the workers run
    for i, workers in enumerate((1, 2, 2, 1)):
        trainer = make_trainer(os.path.join(tmp, f"scaling-{i}-{workers}"), num_train_epochs=epochs)
        took, best = _search(trainer, n_trials, trial_workers=workers)
        ends = sorted(r.finished for r in best.run_summary.records)
        seconds[workers].append(took)
        spans[workers].append((ends[-1] - ends[0]).total_seconds())
        print(
            f"  round {i + 1}: trial_workers={workers}: {took:.1f} s in all, {spans[workers][-1]:.1f} s from the "
            f"first trial's end to the last's, load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    rate = {w: len(s) * n_trials / sum(s) * 3600 for w, s in seconds.items()}
    running = {w: len(s) * (n_trials - 1) / sum(s) * 3600 for w, s in spans.items()}
    pairs = [seconds[1][0] / seconds[2][0], seconds[1][1] / seconds[2][1]]  # (round 1 vs 2), (round 4 vs 3)
    return {
        "seconds": seconds,
        "rate": rate,
        "ratio": rate[2] / rate[1],
        "pairs": pairs,
        "running": running,
        "running_ratio": running[2] / running[1],
    }


def overhead_ms(tmp: str, n_trials: int) -> tuple[float, float]:
    times = _timed_runs()
    per = {}
    for name, kwargs in (("in-process", {}), ("worker", {"trial_workers": 1})):
        import optuna

        trainer = make_trainer(os.path.join(tmp, f"trivial-{name}"), max_steps=1, eval_strategy="no")
        del times[:]
        _search(trainer, n_trials + 1, pruner=optuna.pruners.NopPruner(), **kwargs)
        per[name] = median(times[1:]) * 1000  # the first trial pays first-call costs on both paths
    return per["in-process"], per["worker"]


def stuck_seconds(tmp: str, timeout: float = 3) -> dict[str, float]:
    import spaces
    from hpsearch import SearchResult

    out = {}
    for blocked in (False, True):
        folder = os.path.join(tmp, f"stuck-{blocked}")
        trainer = make_trainer(folder, num_train_epochs=1)
        trainer.model_init = stuck_model_init
        with contextlib.suppress(Exception):  # the search has no completed trial: it raises, as it should
            _search(
                trainer,
                1,
                trial_workers=1,
                trial_timeout=timeout,
                hp_space={"blocked": spaces.Categorical([blocked]), "hidden": spaces.Categorical([32, 64])},
            )
        record = SearchResult.load(folder).records[0]  # from the trial's start in its worker to its FAIL
        out["SIGALRM blocked (killed)" if blocked else "interruptible sleep"] = record.duration_s
    return out


@quiet_logs("hpsearch")
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--trials", type=int)
    parser.add_argument("--epochs", type=int, help="epochs per trial (default 2; 1 with --quick)")
    parser.add_argument("--scaling", action="store_true", help="only 2 workers vs 1, interleaved 1, 2, 2, 1")
    parser.add_argument(
        "--startup", action="store_true", help="workers from a forkserver vs spawned, first/second"
    )
    parser.add_argument("--startup-child", choices=_STARTUP_WAYS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    limit_threads(1)
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    n_trials, epochs = (args.trials or 2, 1) if args.quick else (args.trials or 30, 2)
    if args.epochs is not None:
        if args.epochs < 1:
            parser.error(f"--epochs {args.epochs}: a trial trains at least 1 epoch; give --epochs 1 or more")
        epochs = args.epochs
    if args.startup_child:
        print(json.dumps(startup_calls(args.startup_child)), flush=True)
        return
    print(f"load average before: {os.getloadavg()}", flush=True)
    if args.startup:
        _startup_main()
        return
    if args.scaling:
        _scaling_main(n_trials, epochs)
        return
    with tempfile.TemporaryDirectory() as tmp:
        # A smoke run's figures are not read: no warm-ups, 2 timed trivial trials, a stuck trial timed out after 1 s.
        rates = sweep_rates(tmp, n_trials, epochs, warm_up=not args.quick)
        inproc, worker = overhead_ms(tmp, 2 if args.quick else 20)
        stuck = stuck_seconds(tmp, timeout=1 if args.quick else 3)
    by = {name: rate for name, rate, _, _, _ in rates}
    print_table(
        f"Digits sweep, {n_trials} trials x {epochs} epochs, pruning on (trials per hour)",
        [
            "way",
            "trials/hour (whole call)",
            "vs trial_workers=1",
            "trials/hour (first end to last)",
            "pruned",
            "training steps/s (whole call)",
        ],
        [(n, r, r / by["trial_workers=1"], r2, p, s) for n, r, r2, p, s in rates],
    )
    print_table(
        "Per-trial time of a trivial trial (ms, median)",
        ["in-process", "worker", "overhead"],
        [(inproc, worker, worker - inproc)],
    )
    print_table(
        "A trial stuck in a 60 s sleep, trial_timeout=3: seconds to FAIL",
        ["case", "seconds"],
        list(stuck.items()),
    )
    scaling = by["trial_workers=2"] / by["trial_workers=1"]
    rows = [
        result_row(
            "2 workers vs 1 (trials/hour)",
            by["trial_workers=2"],
            by["trial_workers=1"],
            scaling,
            ">= 1.8x",
            scaling >= 1.8,
        ),
        result_row(
            "2 workers vs n_jobs=2 threads",
            by["trial_workers=2"],
            by["n_jobs=2 (threads)"],
            by["trial_workers=2"] / by["n_jobs=2 (threads)"],
            "> 1x",
            by["trial_workers=2"] > by["n_jobs=2 (threads)"],
        ),
        result_row(
            "worker overhead per trial", worker - inproc, None, None, "<= 20 ms", worker - inproc <= 20, "ms"
        ),
        result_row(
            "stuck trial to FAIL (killed)",
            stuck["SIGALRM blocked (killed)"],
            None,
            None,
            "<= 6 s",
            stuck["SIGALRM blocked (killed)"] <= 6,
            "s",
        ),
    ]
    print(f"load average after: {os.getloadavg()}", flush=True)
    emit_json("trial_workers", rows)


#: How `--startup` starts workers: spawned; forked from a server that preloads torch and the trainer only (before
#: the search's own modules were preloaded); forked from one that preloads the search's modules too (the default).
_STARTUP_WAYS = ("spawn", "forkserver, torch only", "forkserver")


def startup_calls(method: str) -> list[float]:
    """In this (fresh) process: the seconds of two searches in a row (2 workers, 2 trivial trials each), workers
    started the way ``method`` names (`_STARTUP_WAYS`)."""
    import multiprocessing

    import optuna

    from hpsearch.executor import _pool, _preload

    if method == "spawn":
        _pool.start_context = lambda: multiprocessing.get_context("spawn")  # type: ignore[assignment]
    elif method == "forkserver, torch only":
        _preload.modules_to_preload = lambda blob: []  # type: ignore[assignment]
    calls = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(2):
            trainer = make_trainer(os.path.join(tmp, str(i)), max_steps=1, eval_strategy="no")
            took, _ = _search(trainer, 2, trial_workers=2, pruner=optuna.pruners.NopPruner())
            calls.append(took)
    return calls


def _startup_main() -> None:
    import subprocess
    import sys

    seconds: dict[str, list[list[float]]] = {way: [] for way in _STARTUP_WAYS}
    for method in (*_STARTUP_WAYS, *reversed(_STARTUP_WAYS)):
        child = subprocess.run(
            [sys.executable, "-m", "benchmarks.trial_workers", "--startup-child", method],
            capture_output=True,
            text=True,
            check=True,
        )
        seconds[method].append(json.loads(child.stdout.strip().splitlines()[-1]))
        print(f"  {method}: calls {seconds[method][-1]}, load {os.getloadavg()[0]:.1f}", flush=True)
    rows = [(m, median([c[0] for c in calls]), median([c[1] for c in calls])) for m, calls in seconds.items()]
    print_table(
        "A search's whole call, 2 workers x 2 trivial trials (s, median of 2 fresh processes each)",
        ["workers started by", "first search in the process", "second search"],
        rows,
    )
    by = {m: (first, second) for m, first, second in rows}
    emit_json(
        "trial_workers",
        [
            result_row(
                f"forkserver vs {baseline}, {which} search (s)",
                by["forkserver"][i],
                by[baseline][i],
                by[baseline][i] / by["forkserver"][i],
                "reported",
                None,
                "s",
            )
            for baseline in ("spawn", "forkserver, torch only")
            for i, which in enumerate(("first", "second"))
        ],
    )


def _scaling_main(n_trials: int, epochs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = scaling_side_by_side(tmp, n_trials, epochs)
    print_table(
        f"2 workers vs 1, side by side: digits sweep, {n_trials} trials x {epochs} epochs, pruning on, "
        "order 1, 2, 2, 1",
        ["way", "seconds per call", "trials/hour (whole calls)", "trials/hour (once the workers run)"],
        [
            (
                f"trial_workers={w}",
                ", ".join(f"{s:.1f}" for s in out["seconds"][w]),
                out["rate"][w],
                out["running"][w],
            )
            for w in (2, 1)
        ],
    )
    print(
        f"ratio 2 workers / 1: {out['ratio']:.2f}x over the whole calls (pairs: {out['pairs'][0]:.2f}x, "
        f"{out['pairs'][1]:.2f}x), {out['running_ratio']:.2f}x once the workers run; "
        f"{os.cpu_count()} cores; load average after: {os.getloadavg()}",
        flush=True,
    )
    rows = [
        result_row(
            f"2 workers vs 1, interleaved{when} (trials/hour)",
            rate[2],
            rate[1],
            ratio,
            ">= 1.8x",
            ratio >= 1.8,
        )
        for when, rate, ratio in (
            ("", out["rate"], out["ratio"]),
            (", once the workers run", out["running"], out["running_ratio"]),
        )
    ]
    emit_json("trial_workers", rows, load_average=os.getloadavg())


if __name__ == "__main__":
    main()
