"""Cost of the search machinery itself per trivial trial, and whether it stays flat up to 10,000 trials.

Each trial builds an ``nn.Linear`` model, trains it for one step and evaluates it once; the baseline is a plain
Optuna objective doing the same (one AdamW step, one evaluation) on its own study on the same kind of storage
(in memory by default, ``--storage sqlite`` for SQLite files). What remains in the difference is what we add per
trial: trial arguments, a fresh Trainer and Accelerator, the callbacks, the record, the results journal
(one line per trial, a snapshot at geometrically growing intervals), the event feed, the progress hooks.

The two sides run in alternated chunks of ``--chunk`` trials that continue the same two studies (our side with
``load_if_exists``, so each chunk is a resumed search, as on main). Inside a chunk, the cost of a trial is the time
between two consecutive trial ends (the search's start-up, which reads the earlier results once, is not a per-trial
cost: it is reported apart, CPU per 1,000 stored trials for the second chunk and the last, which shows whether a
resume's start-up stays O(n)); the per-trial cost "at N trials" is the mean over the chunk that ends at N. Driver
memory is the resident set size growth over our chunks after the first (the plain side's study grows in the same
process, between them). `SearchSession.record` is also timed alone (no training, no engine) over trials n+1..2n
for n = one chunk and n = all trials. At the end ``hpsearch report DIR`` is timed on our result, in a fresh process. Wall and
CPU time are both given: on a machine shared with other jobs, wall time measures the load as much as the code.

Both sides work in tmpfs (``/dev/shm``) by default: on a shared machine whose disk other jobs keep busy, an fsync
takes 10-200 ms at random. ``--dir PATH`` measures on a real disk instead.

    python -m benchmarks.scale                  # 1,000 trials a side, chunks of 250
    python -m benchmarks.scale --trials 10000   # chunks of 1,000: cost at 1k and 10k side by side
    python -m benchmarks.scale --quick          # 12 trials a side in 3 chunks (every table)

Targets (issue 32): <= 2 ms per trial above plain Optuna, cost at 10k / cost at 1k <= 1.2, memory growth over
10,000 trials <= 100 MB, ``hpsearch report`` <= 3 s.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import math
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

import torch
from torch import nn

from benchmarks._common import emit_json, print_table, quiet_logs, result_row
from benchmarks._digits import limit_threads

TARGET_MS, TARGET_RATIO, TARGET_MB, TARGET_REPORT_S = 2.0, 1.2, 100.0, 3.0
DIM, N_TRAIN, N_EVAL, BATCH = 8, 64, 32, 8


class TinyData(torch.utils.data.Dataset):
    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, DIM, generator=g)
        self.y = self.x.sum(-1, keepdim=True)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[i], "labels": self.y[i]}


class Linear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(DIM, 1)

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        out = {"logits": self.linear(x)}
        if labels is not None:
            out["loss"] = nn.functional.mse_loss(out["logits"], labels)
        return out


def make_storage(kind: str, path: str) -> Any:
    import optuna

    if kind == "memory":
        return optuna.storages.InMemoryStorage()
    return f"sqlite:///{path}.db"


def run_ours(n_total: int, output_dir: str, storage: Any, marks: list[tuple[float, float]]) -> None:
    import optuna

    import spaces
    from hpsearch import hyperparameter_search
    from trainer import Trainer, TrainingArguments

    args = TrainingArguments(
        output_dir=output_dir, max_steps=1, per_device_train_batch_size=BATCH, per_device_eval_batch_size=N_EVAL,
        eval_strategy="no", save_strategy="no", logging_strategy="no", disable_tqdm=True, report_to="none",
        use_cpu=True,
    )  # fmt: skip
    trainer = Trainer(
        model_init=Linear, args=args, train_dataset=TinyData(N_TRAIN, 0), eval_dataset=TinyData(N_EVAL, 1)
    )

    def mark(session: Any, record: Any) -> None:
        marks.append((time.perf_counter(), time.process_time()))

    hyperparameter_search(
        trainer, hp_space={"learning_rate": spaces.Float(1e-4, 1e-1, log=True)}, compute_objective="eval_loss",
        n_trials=n_total, backend="optuna", storage=storage, study_name="scale", load_if_exists=True,
        sampler=optuna.samplers.RandomSampler(seed=0), on_trial_end=mark,
    )  # fmt: skip


def plain_objective() -> Any:
    import optuna

    train, evaluation = TinyData(N_TRAIN, 0), TinyData(N_EVAL, 1)

    def objective(trial: optuna.Trial) -> float:
        lr = trial.suggest_float("learning_rate", 1e-4, 1e-1, log=True)
        torch.manual_seed(0)
        model = Linear()
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
        loader = torch.utils.data.DataLoader(train, batch_size=BATCH, shuffle=True)
        model.train()
        batch = next(iter(loader))
        model(**batch)["loss"].backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        model.eval()
        with torch.no_grad():
            batch = next(iter(torch.utils.data.DataLoader(evaluation, batch_size=N_EVAL)))
            return float(model(**batch)["loss"])

    return objective


def run_plain(study: Any, n_trials: int, marks: list[tuple[float, float]]) -> None:
    def mark(study: Any, trial: Any) -> None:
        marks.append((time.perf_counter(), time.process_time()))

    study.optimize(plain_objective(), n_trials=n_trials, callbacks=[mark])


def per_trial_ms(marks: list[tuple[float, float]]) -> tuple[float, float]:
    """Mean (wall, CPU) time between consecutive trial ends, in ms (the chunk's start-up before its first trial
    excluded)."""
    return tuple((marks[-1][j] - marks[0][j]) / (len(marks) - 1) * 1e3 for j in (0, 1))  # type: ignore[return-value]


def rss_mb() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def time_report(output_dir: str) -> tuple[float, float]:
    """(wall, CPU) seconds of ``hpsearch report DIR`` in a fresh process (imports included, as a user runs it)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "hpsearch", "report", output_dir], capture_output=True, text=True,
                          timeout=900)  # fmt: skip
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        print(f"hpsearch report failed ({done.returncode}): {done.stderr[-2000:]}", file=sys.stderr)
    return seconds, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def session_cost_ms(n: int, tmp: str) -> tuple[float, float]:
    """(wall, CPU) ms per `SearchSession.record` of a trivial trial, over trials n+1..2n of a search holding n: what
    the session does per trial (journal line, snapshots, event feed, tally, hooks) without training or engine, each
    snapshot in that range counted (a range proportional to n holds the same share of them at any n)."""
    from hpsearch.results import SearchResult
    from hpsearch.session import SearchSession
    from hpsearch.settings import TrialSettings
    from hpsearch.trial import Evaluation, TrialRecord, TrialState

    def record(i: int) -> TrialRecord:
        return TrialRecord(trial_id=str(i), number=i, name=f"run-{i}", state=TrialState.COMPLETE,
                           params={"learning_rate": 1e-3 * (1 + i % 97)}, objective=1.0 / (1 + i),
                           intermediates=[Evaluation(step=1, epoch=1.0, objective=1.0 / (1 + i), metrics={})],
                           cost={"cpu_s": 0.01})  # fmt: skip

    folder = f"{tmp}/session-{n}"
    settings = TrialSettings(
        trainer=None,
        compute_objective=lambda m: m["eval_loss"],  # type: ignore[arg-type]
        objective_name="eval_loss",
        directions=("minimize",),
        output_dir=folder,
        backend="random",
    )
    result = SearchResult("random", ["minimize"], [], n_trials=2 * n, output_dir=folder)
    session = SearchSession(settings, result, n_trials=2 * n)
    session.adopt(record(i) for i in range(n))
    session.record(record(n))  # the first record of a run takes its first snapshot (a start-up cost)
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(n + 1, 2 * n):
        session.record(record(i))
    return (time.perf_counter() - wall) / (n - 1) * 1e3, (time.process_time() - cpu) / (n - 1) * 1e3


def run_chunks(opts: argparse.Namespace, tmp: str) -> dict[str, Any]:
    import optuna

    plain_study = optuna.create_study(storage=make_storage(opts.storage, f"{tmp}/plain"), study_name="scale",
                                      sampler=optuna.samplers.RandomSampler(seed=0))  # fmt: skip
    ours_storage = make_storage(opts.storage, f"{tmp}/ours")
    rows, startups, memory = [], [], 0.0
    n_chunks = max(1, opts.trials // opts.chunk)
    for i in range(n_chunks):
        order = ["ours", "plain"] if i % 2 == 0 else ["plain", "ours"]
        costs: dict[str, tuple[float, float]] = {}
        for side in order:
            marks: list[tuple[float, float]] = []
            gc.collect()
            if side == "ours":
                before, start, start_cpu = rss_mb(), time.perf_counter(), time.process_time()
                run_ours(opts.chunk * (i + 1), f"{tmp}/ours", ours_storage, marks)
                startups.append(
                    ((marks[0][0] - start) * 1e3, (marks[0][1] - start_cpu) * 1e3)
                    if marks
                    else (math.nan,) * 2
                )
                if i:  # the first chunk's growth is imports and caches filling, not the search
                    memory += rss_mb() - before
            else:
                run_plain(plain_study, opts.chunk, marks)
            costs[side] = per_trial_ms(marks)
        (ours, ours_cpu), (plain, plain_cpu) = costs["ours"], costs["plain"]
        rows.append(
            [opts.chunk * (i + 1), ours, plain, ours - plain, ours_cpu, plain_cpu, ours_cpu - plain_cpu]
        )
        print(f"chunk {i + 1}/{n_chunks}: ours {ours:.2f} ms ({ours_cpu:.2f} CPU), plain {plain:.2f} ms "
              f"({plain_cpu:.2f} CPU)", file=sys.stderr, flush=True)  # fmt: skip
    return {"rows": rows, "startups": startups, "memory_mb": memory}


@quiet_logs("trainer", "hpsearch")
def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="12 trials a side, chunks of 4")
    parser.add_argument("--trials", type=int, default=None, help="trials a side (default 1000)")
    parser.add_argument("--chunk", type=int, default=None, help="trials per alternated chunk")
    parser.add_argument("--storage", choices=("memory", "sqlite"), default="memory")
    parser.add_argument("--no-report", action="store_true", help="do not time `hpsearch report` at the end")
    parser.add_argument(
        "--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None,
        help="where the databases and output go (default: tmpfs, see the module docstring)",
    )  # fmt: skip
    opts = parser.parse_args(argv)
    # A smoke run: three chunks, the fewest that print the resumed search's start-up too.
    opts.trials = opts.trials or (12 if opts.quick else 1000)
    opts.chunk = opts.chunk or (
        4 if opts.quick else (1000 if opts.trials >= 5000 else max(1, opts.trials // 4))
    )
    limit_threads(1)
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with tempfile.TemporaryDirectory(dir=opts.dir) as tmp:
        with contextlib.redirect_stdout(io.StringIO()):
            # Warm-up on throw-away studies (imports, accelerate).
            run_ours(2, f"{tmp}/warm", make_storage(opts.storage, f"{tmp}/warm-ours"), [])
            run_plain(optuna.create_study(storage=make_storage(opts.storage, f"{tmp}/warm-plain")), 2, [])
            out = run_chunks(opts, tmp)
            sizes = sorted({max(1, opts.chunk), max(1, opts.trials)})
            out["session"] = [[n, *session_cost_ms(n, tmp)] for n in sizes]
        report_s, report_cpu = (float("nan"),) * 2 if opts.no_report else time_report(f"{tmp}/ours")
    rows = out["rows"]
    first, last = rows[0], rows[-1]
    ratio = last[3] / first[3] if first[3] > 0 else float("nan")
    ratio_cpu = last[6] / first[6] if first[6] > 0 else float("nan")
    print(f"scale: {rows[-1][0]} trials a side, storage {opts.storage}, 1 step + 1 evaluation of an nn.Linear each, "
          f"alternated chunks of {opts.chunk}, torch threads 1")  # fmt: skip
    print_table("Per trial (ms), mean over the chunk ending at N trials",
                ["N", "ours wall", "plain wall", "difference", "ours CPU", "plain CPU", "difference CPU"],
                rows)  # fmt: skip
    print_table("SearchSession.record alone, per trial over trials n+1..2n (ms)", ["n", "wall", "CPU"],
                out["session"])  # fmt: skip
    print_table("Summary (cost = ours - plain per trial)", ["measure", "wall", "CPU", "target"], [
        [f"cost at {first[0]} trials (ms)", first[3], first[6], f"<= {TARGET_MS}"],
        [f"cost at {last[0]} trials (ms)", last[3], last[6], f"<= {TARGET_MS}"],
        [f"cost at {last[0]} / cost at {first[0]}", ratio, ratio_cpu, f"<= {TARGET_RATIO}"],
        [f"driver memory growth over trials {first[0]}-{last[0]} (MB)", out["memory_mb"], "", f"<= {TARGET_MB:.0f}"],
        [f"hpsearch report of {last[0]} trials (s)", report_s, report_cpu, f"<= {TARGET_REPORT_S}"],
    ])  # fmt: skip
    if len(rows) >= 3:  # chunk 2 resumes a search of one chunk, the last one of all but one
        (early, early_cpu), (late, late_cpu) = out["startups"][1], out["startups"][-1]
        stored_early, stored_late = rows[0][0], rows[-2][0]
        print_table("Resumed search start-up: until its first trial ends, less one trial (ms)",
                    ["stored trials", "wall", "CPU", "CPU per 1,000 stored"], [
            [stored_early, early - rows[1][1], early_cpu - rows[1][4], (early_cpu - rows[1][4]) / stored_early * 1e3],
            [stored_late, late - last[1], late_cpu - last[4], (late_cpu - last[4]) / stored_late * 1e3],
        ])  # fmt: skip
    result = {"chunks": rows, "ratio": ratio, "ratio_cpu": ratio_cpu, "memory_mb": out["memory_mb"],
              "report_s": report_s, "report_cpu_s": report_cpu, "startup_ms": out["startups"], "session": out["session"],
              "storage": opts.storage}  # fmt: skip
    emit_json("scale", [
        result_row(f"per-trial cost above plain Optuna at {last[0]} trials ({opts.storage})", last[1], last[2],
                   last[1] / last[2], f"<= +{TARGET_MS:.0f} ms, flat (<= {TARGET_RATIO}x of {first[0]})",
                   last[3] <= TARGET_MS and ratio <= TARGET_RATIO, unit="ms/trial",
                   note=f"+{first[3]:.2f} ms at {first[0]}, +{last[3]:.2f} ms at {last[0]} (CPU +{first[6]:.2f} / "
                        f"+{last[6]:.2f} ms); memory +{out['memory_mb']:.0f} MB; report {report_s:.1f} s "
                        f"({report_cpu:.1f} s CPU)"),
    ], **result)  # fmt: skip
    return result


if __name__ == "__main__":
    main()
