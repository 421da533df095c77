"""Cost of the search machinery itself: 1,000 trivial trials through the Optuna backend on SQLite storage.

Each trial builds an ``nn.Linear`` model, trains it for one step and evaluates it once; the baseline is a plain
Optuna objective doing the same (one AdamW step, one evaluation) on its own study in the same kind of SQLite
database. What remains in the difference is what we add per trial: trial arguments, a fresh Trainer and
Accelerator, the callbacks, the record (one JSON user attribute on the Optuna trial, besides its driver's
``host:pid`` set when it starts), Optuna's heartbeat on storages built from a URL, and `SearchResult.save`
after every trial (search.json, trials.csv and intermediates.csv replaced whole; each record's JSON line and
CSV rows are rendered once and reused while it is unchanged, so what grows with the number of trials is
joining and writing the text; a save is timed on its own after each chunk). The two sides are run in
alternated chunks that continue the same two studies (``load_if_exists``).

Both sides work in tmpfs (``/dev/shm``) by default: on a shared machine whose disk other jobs keep busy, each
fsync (SQLite commits a few per trial on both sides; `SearchResult.save` one per trial) takes 10-200 ms at
random and would bury the machinery's cost in disk noise. ``--dir PATH`` measures on a real disk instead.

    python -m benchmarks.scale           # 1,000 trials a side, 4 chunks each
    python -m benchmarks.scale --quick   # 20 trials a side

Target (issue 8): per-trial cost <= 20 ms above plain Optuna's.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import tempfile
import time
from typing import Any

import torch
from torch import nn

from benchmarks._common import emit_json, median, print_table, result_row
from benchmarks._digits import limit_threads

TARGET_MS = 20.0
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


def run_ours(n_total: int, output_dir: str, storage: str) -> None:
    import optuna

    import spaces
    from hpsearch import hyperparameter_search
    from trainer import Trainer, TrainingArguments

    args = TrainingArguments(
        output_dir=output_dir, max_steps=1, per_device_train_batch_size=BATCH, per_device_eval_batch_size=N_EVAL,
        eval_strategy="no", save_strategy="no", logging_strategy="no", disable_tqdm=True, report_to="none",
        use_cpu=True,
    )  # fmt: skip
    trainer = Trainer(model_init=Linear, args=args, train_dataset=TinyData(N_TRAIN, 0), eval_dataset=TinyData(N_EVAL, 1))
    hyperparameter_search(
        trainer, hp_space={"learning_rate": spaces.Float(1e-4, 1e-1, log=True)}, compute_objective="eval_loss",
        n_trials=n_total, backend="optuna", storage=storage, study_name="scale", load_if_exists=True,
        sampler=optuna.samplers.RandomSampler(seed=0),
    )  # fmt: skip


def run_plain(n_trials: int, storage: str) -> None:
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

    study = optuna.create_study(storage=storage, study_name="scale", load_if_exists=True,
                                sampler=optuna.samplers.RandomSampler(seed=0))  # fmt: skip
    study.optimize(objective, n_trials=n_trials)


def time_save(output_dir: str) -> tuple[int, float]:
    """(records, ms) of one `SearchResult.save` of the search ``output_dir`` holds (median of 5)."""
    from hpsearch.results import SearchResult

    result = SearchResult.load(output_dir)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        result.save(output_dir)
        times.append((time.perf_counter() - start) * 1e3)
    return len(result.records), median(times)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 trials a side")
    parser.add_argument("--trials", type=int, default=None)
    parser.add_argument("--chunks", type=int, default=None)
    parser.add_argument(
        "--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None,
        help="where the databases and output go (default: tmpfs, see the module docstring)",
    )  # fmt: skip
    opts = parser.parse_args(argv)
    limit_threads(1)
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for name in ("trainer", "hpsearch"):
        logging.getLogger(name).setLevel(logging.ERROR)
    n_trials = opts.trials or (20 if opts.quick else 1000)
    chunks = opts.chunks or (2 if opts.quick else 4)
    per_chunk = n_trials // chunks
    walls: dict[str, float] = {"ours": 0.0, "plain": 0.0}
    cpus: dict[str, float] = {"ours": 0.0, "plain": 0.0}
    with tempfile.TemporaryDirectory(dir=opts.dir) as tmp, contextlib.redirect_stdout(io.StringIO()):
        ours_db, plain_db = f"sqlite:///{tmp}/ours.db", f"sqlite:///{tmp}/plain.db"
        # Warm-up on throw-away studies (imports, SQLAlchemy, accelerate).
        run_ours(2, f"{tmp}/warm", f"sqlite:///{tmp}/warm-ours.db")
        run_plain(2, f"sqlite:///{tmp}/warm-plain.db")
        saves: list[tuple[int, float]] = []
        for i in range(chunks):
            order = ["ours", "plain"] if i % 2 == 0 else ["plain", "ours"]
            for side in order:
                wall, cpu = time.perf_counter(), time.process_time()
                if side == "ours":
                    run_ours(per_chunk * (i + 1), f"{tmp}/ours", ours_db)
                else:
                    run_plain(per_chunk, plain_db)
                walls[side] += time.perf_counter() - wall
                cpus[side] += time.process_time() - cpu
            saves.append(time_save(f"{tmp}/ours"))
        done = {"ours": len(optuna.load_study(study_name="scale", storage=ours_db).trials),
                "plain": len(optuna.load_study(study_name="scale", storage=plain_db).trials)}  # fmt: skip
        dirs = len([d for d in os.listdir(f"{tmp}/ours") if d.startswith("run-")])

    per = {side: walls[side] / done[side] * 1e3 for side in walls}
    per_cpu = {side: cpus[side] / done[side] * 1e3 for side in cpus}
    extra, extra_cpu = per["ours"] - per["plain"], per_cpu["ours"] - per_cpu["plain"]
    print(f"scale: {done['ours']} / {done['plain']} trials (ours / plain) on SQLite, 1 step + 1 evaluation of an "
          f"nn.Linear each, {chunks} alternated chunks, torch threads 1; trial folders left: {dirs}")  # fmt: skip
    print_table("Per trial (ms)", ["side", "wall", "CPU"],
                [["hyperparameter_search (optuna, sqlite)", per["ours"], per_cpu["ours"]],
                 ["plain Optuna objective (sqlite)", per["plain"], per_cpu["plain"]],
                 ["difference", extra, extra_cpu]])  # fmt: skip
    print_table("SearchResult.save (search.json + 2 CSVs), median of 5", ["records", "ms"], saves)
    print(f"\nper-trial cost above plain Optuna: wall {extra:.1f} ms, CPU {extra_cpu:.1f} ms (target <= {TARGET_MS:.0f} ms)")
    result = {"ours_ms": per["ours"], "plain_ms": per["plain"], "extra_ms": extra, "extra_cpu_ms": extra_cpu,
              "save_ms": saves, "trials": done}  # fmt: skip
    emit_json(
        "scale",
        [result_row(f"per-trial cost above plain Optuna ({done['ours']} trials, SQLite)", per["ours"], per["plain"],
                    per["ours"] / per["plain"], f"<= +{TARGET_MS:.0f} ms", extra <= TARGET_MS, unit="ms/trial",
                    note=f"+{extra:.1f} ms wall, +{extra_cpu:.1f} ms CPU; save at {saves[-1][0]} records "
                         f"{saves[-1][1]:.0f} ms")],
        **result,
    )  # fmt: skip
    return result


if __name__ == "__main__":
    main()
