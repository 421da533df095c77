"""`BestRun`: what `hyperparameter_search` returns, and `best_runs`, which builds it from a `SearchResult`.

Without re-evaluation the best run is the trial with the best observed objective (the Pareto front for several
objectives), as in transformers; with it (`hpsearch.reevaluate`), the configuration with the best mean over seeds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from .errors import HPSearchError

if TYPE_CHECKING:
    from .reevaluate import ConfigSummary
    from .results import SearchResult
    from .trial import TrialRecord

__all__ = ["BestRun", "best_runs"]


class _BestRunFields(NamedTuple):
    run_id: str
    objective: float | list[float]
    hyperparameters: dict[str, Any]
    run_summary: SearchResult | None = None


class BestRun(_BestRunFields):
    """The best trial of a search (one per Pareto-optimal trial for several objectives).

    A tuple of transformers' four fields (``run_id, objective, hyperparameters, run_summary = best`` unpacks as
    there); ``run_summary`` is the whole search as a `SearchResult`. Attributes outside the tuple:
    ``checkpoint``, the checkpoint whose evaluation gave ``objective`` (None if the trial saved none), and
    ``name``, the trial's name (its folder in output_dir). With re-evaluation (``reevaluate_top_k``, see
    `hpsearch.reevaluate`) the run is the search trial of the configuration chosen by its mean over seeds, and
    ``objective_mean``, ``objective_std`` and ``objective_ci95`` (over its ``n_seeds`` runs) say how sure that is;
    ``observed_best`` is the trial with the best single observed objective (the pick without re-evaluation).
    Without re-evaluation: ``n_seeds`` 1, the three statistics and ``observed_best`` None.
    """

    checkpoint: str | None
    name: str | None
    objective_mean: float | list[float] | None
    objective_std: float | list[float] | None
    objective_ci95: tuple[float, float] | list[tuple[float, float]] | None
    n_seeds: int
    observed_best: BestRun | None

    def __new__(
        cls,
        run_id: str,
        objective: float | list[float],
        hyperparameters: dict[str, Any],
        run_summary: SearchResult | None = None,
        checkpoint: str | None = None,
        name: str | None = None,
        objective_mean: float | list[float] | None = None,
        objective_std: float | list[float] | None = None,
        objective_ci95: tuple[float, float] | list[tuple[float, float]] | None = None,
        n_seeds: int = 1,
        observed_best: BestRun | None = None,
    ) -> BestRun:
        self = super().__new__(cls, run_id, objective, hyperparameters, run_summary)
        self.checkpoint = checkpoint
        self.name = name
        self.objective_mean, self.objective_std, self.objective_ci95 = (
            objective_mean,
            objective_std,
            objective_ci95,
        )
        self.n_seeds = n_seeds
        self.observed_best = observed_best
        return self

    def _replace(self, **changes: Any) -> BestRun:
        fields = {**self._asdict(), **{name: getattr(self, name) for name in _EXTRA_FIELDS}, **changes}
        return type(self)(**fields)

    def __repr__(self) -> str:
        text = f"{super().__repr__()[:-1]}, checkpoint={self.checkpoint!r}, name={self.name!r}"
        if self.n_seeds > 1:
            text += (
                f", objective_mean={self.objective_mean!r}, objective_std={self.objective_std!r}, "
                f"n_seeds={self.n_seeds}"
            )
        return text + ")"


_EXTRA_FIELDS = (
    "checkpoint",
    "name",
    "objective_mean",
    "objective_std",
    "objective_ci95",
    "n_seeds",
    "observed_best",
)


def _best_run(record: TrialRecord, result: SearchResult, **fields: Any) -> BestRun:
    assert record.objective is not None
    return BestRun(
        run_id=record.trial_id,
        objective=record.objective,
        hyperparameters=dict(record.params),
        run_summary=result,
        checkpoint=record.checkpoint,
        name=record.name,
        **fields,
    )


def _chosen_run(summary: ConfigSummary, result: SearchResult, observed: BestRun | None) -> BestRun:
    """The configuration chosen by its mean over seeds, as the search trial that proposed it."""
    one = not result.is_multi_objective
    return _best_run(
        summary.trial,
        result,
        objective_mean=summary.mean[0] if one else summary.mean,
        objective_std=summary.std[0] if one else summary.std,
        objective_ci95=summary.ci95[0] if one else summary.ci95,
        n_seeds=summary.n_seeds,
        observed_best=observed,
    )


def best_runs(result: SearchResult) -> BestRun | list[BestRun]:
    """The best run (one objective) or the Pareto front (several); HPSearchError when no trial completed. With
    re-evaluation: the configuration(s) chosen by the mean over seeds (`hpsearch.reevaluate.choose`)."""
    from .reevaluate import choose

    front = result.best_trials if result.is_multi_objective else []
    best = None if result.is_multi_objective else result.best_trial
    chosen = choose(result) if (front or best is not None) else None
    if chosen is not None:
        observed = None if best is None else _best_run(best, result)
        runs = [_chosen_run(summary, result, observed) for summary in chosen]
        return runs if result.is_multi_objective else runs[0]
    if front:
        return [_best_run(r, result) for r in front]
    if best is None:
        counts = result.counts()
        errors = "; ".join(f"{r.name}: {r.error}" for r in result.records if r.error)[:2000]
        raise HPSearchError(
            f"No trial completed ({counts}); nothing to return. {('Errors: ' + errors) if errors else ''}".strip()
        )
    return _best_run(best, result)
