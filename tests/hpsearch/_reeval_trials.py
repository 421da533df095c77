"""What the re-evaluation tests' trials run (importable by Ray's workers and by the kill test's subprocess).

`SeedLog` records, for every model_init call, the trial's parameters and the seed torch was seeded with (the trainer
seeds with ``TrainingArguments.seed`` before ``model_init``), so a test sees which seed each run really trained with.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import torch

from tests.hpsearch._trials import model_init


class SeedLog:
    """A model_init that appends ``{"params", "torch_seed"}`` to ``path`` per call; with ``kill_seed``, the first
    call seeded with it ends the process at once (``os._exit``: no cleanup, as SIGKILL), leaving ``path + ".killed"``;
    with ``fail_seeds``, calls seeded with one of them raise (the trial fails); trials numbered below ``mute_below``
    get a model whose logits are always zero (chance accuracy: worse than any trained one)."""

    def __init__(
        self, path: str, kill_seed: int | None = None, fail_seeds: tuple[int, ...] = (), mute_below: int = 0
    ) -> None:
        self.path, self.kill_seed, self.fail_seeds, self.mute_below = path, kill_seed, fail_seeds, mute_below

    def __call__(self, trial: Any = None) -> Any:
        seed = torch.initial_seed()
        if trial is not None:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps({"params": dict(trial), "torch_seed": seed}) + "\n")
        if (
            self.kill_seed is not None
            and seed == self.kill_seed
            and not os.path.exists(self.path + ".killed")
        ):
            open(self.path + ".killed", "w").close()
            os._exit(9)
        if seed in self.fail_seeds:
            raise RuntimeError(f"scripted failure at seed {seed}")
        if trial is not None and trial.number < self.mute_below:
            return Muted(model_init(trial))
        return model_init(trial)


class Muted(torch.nn.Module):
    """A model whose logits are zero (its loss is log 10 whatever it learns)."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        logits = self.inner(x)["logits"] * 0.0
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = torch.nn.functional.cross_entropy(logits, labels)
        return out


def suggesting_model_init(trial: Any = None) -> Any:
    """A model_init that asks the engine's trial for ``hidden`` (Optuna's define-by-run form)."""
    from tests._digits import DigitsMLP

    return DigitsMLP(hidden=16 if trial is None else int(trial.suggest_categorical("hidden", [8, 16])))


def read(path: str) -> list[dict[str, Any]]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def resumable_search(backend: str, output_dir: str, log: str, kill_seed: int | None) -> None:
    """A search that a rerun continues (Optuna: a SQLite study beside output_dir; SigOpt lite: resume=True),
    re-evaluating its top 2 with 2 more seeds; ``backend`` "<name>-during": 6 runs in all, each challenger
    re-evaluated with 2 more seeds as the search goes."""
    backend, _, during = backend.partition("-")
    from hpsearch import hyperparameter_search
    from spaces import Categorical, Float, SearchSpace
    from tests.hpsearch._trials import digits_search_trainer

    options: dict[str, Any] = {"driver": "lite", "resume": True}
    if backend == "optuna":
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        options = {
            "storage": f"sqlite:///{output_dir}.db",
            "study_name": "reeval",
            "load_if_exists": True,
            "sampler": optuna.samplers.RandomSampler(seed=0),
        }
    space = SearchSpace({"learning_rate": Float(1e-3, 1e-1, log=True), "hidden": Categorical([8, 16])})
    trainer = digits_search_trainer(output_dir, SeedLog(log, kill_seed))
    hyperparameter_search(
        trainer,
        hp_space=space,
        compute_objective="eval_accuracy",
        direction="maximize",
        backend=backend,
        reevaluate_seeds=2,
        **(
            {"n_trials": 6, "reevaluate_when": "during"} if during else {"n_trials": 3, "reevaluate_top_k": 2}
        ),
        **options,
    )


if __name__ == "__main__":
    resumable_search(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else None)
