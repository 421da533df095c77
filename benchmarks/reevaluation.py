"""Re-evaluation on a noisy objective: does picking by the mean over seeds find configurations better on held-out data?

Digits split three ways: a deliberately small validation split (the search's objective, ``--val`` examples: noisy),
a large held-out test split, and the rest to train. Short trials (one epoch) make the seed matter too. For each
search seed, two policies spend the same number of training runs ``B = N + K * S``:

- **observed max**: ``n_trials=B``, the trial with the best validation accuracy (what every engine returns);
- **re-evaluated mean**: ``n_trials=N``, ``reevaluate_top_k=K``, ``reevaluate_seeds=S``, the best mean.

Both on the same engine with the same sampler seed. Each pick is then scored by what it is worth: its configuration
trained on ``--test-seeds`` fresh seeds, mean accuracy on the test split. Printed side by side per seed, and the
means with their ratio (re-evaluated / observed), and the optimism of each pick (its validation score minus its
test accuracy).

    python -m benchmarks.reevaluation            # 10 search seeds, N=12, K=3, S=2, random (several minutes)
    python -m benchmarks.reevaluation --quick    # 1 seed, N=3, K=1, S=1 (well under a minute)
    python -m benchmarks.reevaluation --engine optuna --seeds 20
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path
from typing import Any

from benchmarks._common import emit_json, print_table, quiet_logs, result_row
from benchmarks._digits import DigitsDataset, accuracy, limit_threads, model_init

EPOCHS = 1
BATCH = 64


def _splits(val: int) -> tuple[Any, Any, Any]:
    """(train, validation, test): the 1,797 digits shuffled once; ``val`` to validate, 700 to test, the rest train."""
    import numpy as np
    from sklearn.datasets import load_digits

    data = load_digits()
    x, y = (data.data / 16.0).astype(np.float32), data.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(y))
    x, y = x[order], y[order]
    test = 700
    return (
        DigitsDataset(x[test + val :], y[test + val :]),
        DigitsDataset(x[test : test + val], y[test : test + val]),
        DigitsDataset(x[:test], y[:test]),
    )


def _trainer(out: str, train: Any, evaluation: Any, seed: int, **params: Any) -> Any:
    from trainer import Trainer, TrainingArguments

    args = TrainingArguments(
        output_dir=out,
        eval_strategy="epoch",
        save_strategy="no",
        logging_strategy="no",
        num_train_epochs=EPOCHS,
        per_device_train_batch_size=BATCH,
        per_device_eval_batch_size=256,
        disable_tqdm=True,
        report_to="none",
        use_cpu=True,
        seed=seed,
        **params,
    )
    return Trainer(
        model_init=model_init,
        args=args,
        train_dataset=train,
        eval_dataset=evaluation,
        compute_metrics=accuracy,
    )


def _space() -> dict[str, Any]:
    import spaces

    return {"learning_rate": spaces.Float(1e-4, 0.3, log=True), "hidden": spaces.Int(8, 128, log=True)}


def _pick(
    engine: str, out: str, data: tuple[Any, Any, Any], seed: int, n: int, k: int, s: int
) -> tuple[dict, float]:
    """(params, validation score) of the pick: by the mean with k and s, else by the observed max."""
    import hpsearch

    options: dict[str, Any] = {"seed": seed} if engine == "random" else {}
    if engine == "optuna":
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        options["sampler"] = optuna.samplers.TPESampler(seed=seed)
    if k:
        options.update(reevaluate_top_k=k, reevaluate_seeds=s)
    best: Any = hpsearch.hyperparameter_search(
        _trainer(out, data[0], data[1], seed),
        hp_space=_space(),
        compute_objective="eval_accuracy",
        direction="maximize",
        n_trials=n,
        backend=engine,
        **options,
    )
    score = best.objective_mean if best.objective_mean is not None else best.objective
    return dict(best.hyperparameters), float(score)


def _test_accuracy(out: str, data: tuple[Any, Any, Any], params: dict, seeds: int) -> float:
    """The configuration's worth: mean test accuracy over ``seeds`` fresh training seeds."""
    values = []
    for j in range(seeds):
        trainer = _trainer(out, data[0], data[2], 10_000 + j, learning_rate=params["learning_rate"])
        trainer.model_init = lambda trial=None, hidden=params["hidden"]: model_init({"hidden": hidden})
        trainer.train()
        values.append(trainer.evaluate()["eval_accuracy"])
    return statistics.fmean(values)


@quiet_logs("hpsearch")
def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seeds", type=int, help="search seeds (default 10)")
    parser.add_argument("--trials", type=int, help="N, the re-evaluated policy's search trials (default 12)")
    parser.add_argument("--top-k", type=int, default=None)
    parser.add_argument("--reeval-seeds", type=int, default=None)
    parser.add_argument("--val", type=int, default=60, help="validation examples (small: a noisy objective)")
    parser.add_argument("--test-seeds", type=int, default=3)
    parser.add_argument("--engine", default="random")
    opts = parser.parse_args(argv)
    limit_threads()

    seeds = opts.seeds or (1 if opts.quick else 10)
    n, k = opts.trials or (3 if opts.quick else 12), opts.top_k or (1 if opts.quick else 3)
    s = opts.reeval_seeds or (1 if opts.quick else 2)
    test_seeds = 1 if opts.quick else opts.test_seeds
    data = _splits(opts.val)
    per_seed: list[list[Any]] = []
    observed: list[float] = []
    reevaluated: list[float] = []
    optimism: tuple[list[float], list[float]] = ([], [])
    for seed in range(seeds):
        with tempfile.TemporaryDirectory() as tmp:
            picks = [
                _pick(opts.engine, str(Path(tmp) / "max"), data, seed, n + k * s, 0, 0),
                _pick(opts.engine, str(Path(tmp) / "mean"), data, seed, n, k, s),
            ]
            tests = [_test_accuracy(str(Path(tmp) / "test"), data, params, test_seeds) for params, _ in picks]
        observed.append(tests[0])
        reevaluated.append(tests[1])
        for i in range(2):
            optimism[i].append(picks[i][1] - tests[i])
        per_seed.append([seed, picks[0][1], tests[0], picks[1][1], tests[1]])
    print_table(
        f"Per search seed ({opts.engine}; budget {n + k * s} runs each; val {opts.val}, test 700)",
        ["seed", "max: val", "max: test", "mean: val", "mean: test"],
        per_seed,
    )
    mean_max, mean_re = statistics.fmean(observed), statistics.fmean(reevaluated)
    wins = sum(b > a for a, b in zip(observed, reevaluated))
    ties = sum(b == a for a, b in zip(observed, reevaluated))
    print_table(
        "Test accuracy of the pick (mean over search seeds)",
        ["policy", "test accuracy", "optimism (val - test)"],
        [
            ["observed max", mean_max, statistics.fmean(optimism[0])],
            ["re-evaluated mean", mean_re, statistics.fmean(optimism[1])],
        ],
    )
    ratio = mean_re / mean_max
    print(
        f"\nratio re-evaluated / observed max: {ratio:.3f}; re-evaluated better on {wins} of {seeds} seeds "
        f"({ties} ties)"
    )
    row = result_row(
        "reevaluation test accuracy",
        mean_re,
        mean_max,
        ratio,
        ">= 1.0",
        ratio >= 1.0,
        note=f"{seeds} seeds, N={n}, K={k}, S={s}, {opts.engine}; wins {wins}, ties {ties}",
    )
    emit_json("reevaluation", [row])
    return row


if __name__ == "__main__":
    main()
