"""Run under `accelerate launch` (2 CPU processes): a search with ``reevaluate_when="during"`` where every rank trains
each run, the re-evaluations included.

Each rank writes ``<result>.<rank>``: the search's records as that rank's results hold them, the best run it was
given, and the runs its ``model_init`` built (parameters and the seed torch was seeded with) in the order it trained
them.
"""

from __future__ import annotations

import json
import sys

from hpsearch import hyperparameter_search
from spaces import Categorical, Float, SearchSpace
from tests.hpsearch._reeval_trials import SeedLog, read
from tests.hpsearch._trials import digits_search_trainer


def main(output_dir: str, result_path: str) -> None:
    log = SeedLog(f"{result_path}.seeds")
    trainer = digits_search_trainer(output_dir, log)
    rank = trainer.accelerator.process_index
    log.path = f"{log.path}.{rank}"
    best = hyperparameter_search(
        trainer,
        hp_space=SearchSpace({"learning_rate": Float(1e-3, 1e-1, log=True), "hidden": Categorical([8, 16])}),
        compute_objective="eval_accuracy",
        direction="maximize",
        backend="random",
        seed=0,
        n_trials=7,
        reevaluate_when="during",
        reevaluate_seeds=2,
    )
    records = best.run_summary.records
    with open(f"{result_path}.{rank}", "w") as f:
        json.dump(
            {
                "world": trainer.accelerator.num_processes,
                "records": [
                    {
                        "id": r.trial_id,
                        "number": r.number,
                        "state": r.state.value,
                        "params": r.params,
                        "objective": r.objective,
                        "source": r.extra.get("source", "search"),
                        "config_id": r.extra.get("config_id"),
                        "seed": r.extra.get("seed"),
                    }
                    for r in records
                ],
                "best": {
                    "run_id": best.run_id,
                    "hyperparameters": best.hyperparameters,
                    "n_seeds": best.n_seeds,
                    "objective_mean": best.objective_mean,
                    "observed_best": best.observed_best.run_id if best.observed_best else None,
                },
                "trained": read(log.path),
            },
            f,
        )


if __name__ == "__main__":
    main(*sys.argv[1:])
