"""Re-evaluation of the leaders: the top configurations trained again with other seeds, the best chosen by the mean.

``hyperparameter_search(..., reevaluate_top_k=K, reevaluate_seeds=S)``, on every backend. The rule, chosen to be
predictable:

- **When.** After the search's ``n_trials`` trials, once: the K best COMPLETE trials of the search (by their own
  objective; several objectives: the first K by non-dominated rank, then trial number) are each trained again S
  times, with ``TrainingArguments.seed`` and ``data_seed`` set to ``seed + 1 .. seed + S`` (``seed`` is the trainer's;
  the search's trials ran with it). The same seeds for every configuration, so the comparison is paired.
- **How they count.** Not against ``n_trials`` (exactly ``n_trials`` search trials still finish); against the compute
  budgets (``max_device_hours``, ``max_energy_kwh``: no re-evaluation starts once one is spent) and
  ``max_failed_trials`` (that many failures in a row stop the re-evaluation, not the results). Each is a record of
  its own (``source`` "reevaluation", ``config_id`` the search trial it repeats, ``seed``), run by ``run_trial`` like
  every trial, on the search's executor (with ``trial_workers``: in its worker processes, as many at once, with the
  same isolation and ``trial_timeout``), and never told to the engine (its search is over).
- **Pruning.** Re-evaluations are never pruned: each trains to the end, so its objective (chosen by the same
  ``objective_scope``) is comparable to the complete search trial it repeats. Pruned trials are never leaders.
- **The best run.** Among the configurations with at least two finished runs, the best mean over their runs (several
  objectives: the Pareto front over the means). The mean, not a lower confidence bound: every leader has the same
  number of runs, so a bound would only penalize the spread, whose estimate from S + 1 runs is itself too noisy to
  rank by; the 95% interval is reported beside the mean instead.
- **Resume.** A re-evaluation is identified by (config_id, seed): a search continued after a kill trains only the
  ones its results do not hold yet.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import SearchConfigError, TooManyFailedTrials
from .trial import TrialRecord

if TYPE_CHECKING:
    import pandas as pd

    from .executor import Executor
    from .results import SearchResult
    from .session import SearchSession
    from .settings import TrialSettings

__all__ = ["SOURCE", "ConfigSummary", "Reevaluation", "check_reevaluation", "choose", "summarize"]

logger = logging.getLogger(__name__)

#: The ``source`` of a re-evaluation's record.
SOURCE = "reevaluation"
#: The arguments a re-evaluation sets (a space may not search them when re-evaluation is on).
SEED_ARGS = ("seed", "data_seed")


def check_reevaluation(top_k: int | None, seeds: int | None, n_trials: int) -> Reevaluation | None:
    """The re-evaluation the two options ask for (None: none); `SearchConfigError` for a pair that makes no sense."""
    if top_k is None and seeds is None:
        return None
    if seeds is None:
        raise SearchConfigError(
            f"reevaluate_top_k={top_k} needs reevaluate_seeds (how many extra seeds each of the top {top_k} "
            "configurations trains with); pass e.g. reevaluate_seeds=2, or remove reevaluate_top_k.",
            about="reevaluate_top_k",
        )
    if top_k is None:
        raise SearchConfigError(
            f"reevaluate_seeds={seeds} needs reevaluate_top_k (how many of the best configurations train again); "
            "pass e.g. reevaluate_top_k=3, or remove reevaluate_seeds.",
            about="reevaluate_seeds",
        )
    if top_k > n_trials:
        raise SearchConfigError(
            f"reevaluate_top_k={top_k} is more than n_trials={n_trials}: at most {n_trials} configurations can "
            f"complete; pass reevaluate_top_k <= {n_trials}, or more trials.",
            about="reevaluate_top_k",
        )
    return Reevaluation(top_k, seeds)


@dataclass(frozen=True)
class Reevaluation:
    """The top ``top_k`` configurations of a search trained with ``seeds`` more seeds each (see the module)."""

    top_k: int
    seeds: int

    def check_space(self, names: Iterable[str]) -> None:
        """A searched seed would be overwritten by the re-evaluation's seeds: refused before any trial."""
        searched = [name for name in SEED_ARGS if name in set(names)]
        if searched:
            raise SearchConfigError(
                f"hp_space searches {searched[0]!r}, which re-evaluation (reevaluate_top_k={self.top_k}, "
                f"reevaluate_seeds={self.seeds}) sets to other values for each run of a configuration; remove "
                f"{searched[0]!r} from hp_space, or drop reevaluate_top_k and reevaluate_seeds.",
                about="hp_space",
            )

    def describe(self, settings: TrialSettings) -> dict[str, int]:
        """What the results keep of it (in their settings)."""
        return {"top_k": self.top_k, "seeds": self.seeds, "base_seed": int(settings.trainer.args.seed)}

    def earlier_runs(self, session: SearchSession) -> list[TrialRecord]:
        """The re-evaluations an earlier run of this search saved (read before the backend runs: an engine that
        rebuilds the results from its own store does not know them)."""
        return [r for r in session.saved_records() if r.extra.get("source") == SOURCE]

    def run(
        self,
        session: SearchSession,
        earlier: Sequence[TrialRecord] = (),
        native: Callable[[dict[str, Any]], Any] | None = None,
        executor: Executor | None = None,
    ) -> None:
        """Train the missing re-evaluations of the leaders, recording each in ``session``; ``native(params)`` gives
        the engine's trial that ``model_init`` may ask (`SearchBackend.replay_trial`); ``executor`` runs them (the
        search's; default: in this process)."""
        from . import _lockstep
        from .executor import InProcess

        settings = session.settings
        if _lockstep.is_follower():
            _lockstep.follow(settings, session)
            return
        try:
            self._run(session, earlier, native, executor or InProcess())
        finally:
            _lockstep.announce_end()
            session.save()

    def _run(
        self,
        session: SearchSession,
        earlier: Sequence[TrialRecord],
        native: Callable[[dict[str, Any]], Any] | None,
        executor: Executor,
    ) -> None:
        from . import _lockstep
        from .executor import run_each

        # Every earlier re-evaluation of a configuration this search holds is kept (nothing written is lost), also
        # of one that a longer rerun (more n_trials) pushed out of the top K.
        ids = {r.trial_id for r in session.records}
        session.adopt(r for r in earlier if r.extra.get("config_id") in ids)
        leaders = leading_trials(session.result, self.top_k)
        if session.stop_reason is not None:
            logger.warning("No re-evaluation: the search stopped starting trials (%s).", session.stop_reason)
            return
        if len(leaders) < self.top_k:
            logger.warning(
                "reevaluate_top_k=%d but only %d trial(s) completed; re-evaluating those.",
                self.top_k,
                len(leaders),
            )

        def stopped() -> bool:  # asked before each run starts
            if session.stop_reason is None:
                return False
            logger.warning("Re-evaluation stops: %s.", session.stop_reason)
            return True

        try:
            run_each(
                executor.slots,
                self._pending(session, leaders, native),
                lambda trial: self._train(session.settings, trial, executor),
                session.record,
                stopped,
                before=lambda trial: _lockstep.announce(_lockstep.lead(trial)),
            )
        except TooManyFailedTrials as error:
            logger.warning("Re-evaluation stops (the search's results stay): %s", error)

    def _pending(
        self,
        session: SearchSession,
        leaders: Sequence[TrialRecord],
        native: Callable[[dict[str, Any]], Any] | None,
    ) -> Iterator[Any]:
        from .trial import Trial

        settings = session.settings
        done = {
            (r.extra.get("config_id"), r.extra.get("seed"))
            for r in session.records
            if r.extra.get("source") == SOURCE
        }
        base = int(settings.trainer.args.seed)
        first = 1 + max((r.number for r in session.records if r.extra.get("source") != SOURCE), default=-1)
        for rank, leader in enumerate(leaders):
            for j in range(1, self.seeds + 1):
                seed = base + j
                if (leader.trial_id, seed) in done:
                    continue
                if any(name in leader.params for name in SEED_ARGS):
                    logger.warning(
                        "Trial %s chose %s itself; its re-evaluation sets it to %d.",
                        leader.name,
                        [n for n in SEED_ARGS if n in leader.params],
                        seed,
                    )
                params = {**leader.params, "seed": seed, "data_seed": seed}
                trial = Trial(
                    f"{leader.trial_id}-seed{seed}",
                    first + rank * self.seeds + j - 1,
                    params,
                    settings.backend,
                    native=native(dict(leader.params)) if native else None,
                )
                trial.config_id, trial.seed = leader.trial_id, seed  # type: ignore[attr-defined]
                yield trial

    @staticmethod
    def _train(settings: TrialSettings, trial: Any, executor: Executor) -> TrialRecord:
        from .trial import NullReporter

        config_id, seed = trial.config_id, trial.seed
        record = executor.run(settings, trial, NullReporter())  # never pruned: it trains to the end
        record.params = {k: v for k, v in record.params.items() if k not in SEED_ARGS}
        record.extra.update({"source": SOURCE, "config_id": config_id, "seed": seed})
        return record


# ---------------------------------------------------------------------------------------------- leaders
def leading_trials(result: SearchResult, k: int) -> list[TrialRecord]:
    """The ``k`` best COMPLETE search trials (not re-evaluations, not warm-start rows): by objective, then number;
    several objectives: by non-dominated rank, then number."""
    signs = [1.0 if d == "minimize" else -1.0 for d in result.directions]
    scored = [
        (r, [s * v for s, v in zip(signs, values)])
        for r, values in result.scored_trials()
        if r.extra.get("source") != SOURCE
    ]
    ordered: list[TrialRecord] = []
    rest = scored
    while rest and len(ordered) < k:
        front = [(r, a) for r, a in rest if not any(_dominates(b, a) for _, b in rest)]
        ordered.extend(r for r, _ in sorted(front, key=lambda ra: (ra[1], ra[0].number)))
        rest = [(r, a) for r, a in rest if all(r is not f for f, _ in front)]
    return ordered[:k]


def _dominates(b: Sequence[float], a: Sequence[float]) -> bool:
    return all(x <= y for x, y in zip(b, a)) and any(x < y for x, y in zip(b, a))


# ---------------------------------------------------------------------------------------------- summaries
@dataclass(frozen=True)
class ConfigSummary:
    """One configuration's finished runs: the search trial that proposed it and the statistics of its objective(s)
    over its COMPLETE runs (each a list, one value per objective; std and interval NaN for a single run)."""

    config_id: str
    trial: TrialRecord
    runs: tuple[TrialRecord, ...]
    mean: list[float]
    std: list[float]
    ci95: list[tuple[float, float]]

    @property
    def n_seeds(self) -> int:
        return len(self.runs)


def summarize(result: SearchResult) -> list[ConfigSummary]:
    """Every configuration with a COMPLETE search trial, its re-evaluations grouped with it (by config_id)."""
    groups: dict[str, list[tuple[TrialRecord, list[float]]]] = {}
    trials: dict[str, TrialRecord] = {}
    for record, values in result.scored_trials():
        config_id = str(record.extra.get("config_id", record.trial_id))
        groups.setdefault(config_id, []).append((record, values))
        if record.extra.get("source") != SOURCE:
            trials[config_id] = record
    out = []
    for config_id, runs in groups.items():
        if config_id not in trials:
            continue  # re-evaluations of a configuration whose own trial is not COMPLETE here
        columns = list(zip(*(values for _, values in runs)))
        stats = [_stats(column) for column in columns]
        out.append(
            ConfigSummary(
                config_id,
                trials[config_id],
                tuple(r for r, _ in runs),
                [s[0] for s in stats],
                [s[1] for s in stats],
                [s[2] for s in stats],
            )
        )
    return sorted(out, key=lambda s: (s.trial.number, s.config_id))


def _stats(values: Sequence[float]) -> tuple[float, float, tuple[float, float]]:
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, math.nan, (math.nan, math.nan)
    std = statistics.stdev(values)
    half = t_quantile_975(len(values) - 1) * std / math.sqrt(len(values))
    return mean, std, (mean - half, mean + half)


#: Student's t 0.975 quantile for 1..30 degrees of freedom (beyond: the normal's 1.96 is within 2%).
_T975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)


def t_quantile_975(df: int) -> float:
    """The two-sided 95% critical value of Student's t with ``df`` degrees of freedom."""
    return _T975[df - 1] if df <= len(_T975) else 1.96


def choose(result: SearchResult) -> list[ConfigSummary] | None:
    """The chosen configuration(s): the best mean among the re-evaluated ones (at least two finished runs), or the
    Pareto front over the means; None when the search has no re-evaluated configuration."""
    candidates = [s for s in summarize(result) if s.n_seeds >= 2]
    if not candidates:
        if any(r.extra.get("source") == SOURCE for r in result.records) or "reevaluate" in result.settings:
            logger.warning(
                "No configuration finished a re-evaluation; the best run is the observed best trial."
            )
        return None
    signs = [1.0 if d == "minimize" else -1.0 for d in result.directions]
    keyed = [(s, [sign * m for sign, m in zip(signs, s.mean)]) for s in candidates]
    if len(signs) == 1:
        return [min(keyed, key=lambda sk: (sk[1][0], sk[0].trial.number))[0]]
    return [s for s, a in keyed if not any(_dominates(b, a) for _, b in keyed)]


def summary_dataframe(result: SearchResult) -> pd.DataFrame:
    """One row per configuration: ``config_id, number, n_seeds``, per objective column ``<col>_mean, <col>_std,
    <col>_ci95_low, <col>_ci95_high``, then the ``params_<name>`` columns; sorted by number."""
    import pandas as pd

    summaries = summarize(result)
    columns: dict[str, Any] = {
        "config_id": pd.Series([s.config_id for s in summaries], dtype="object"),
        "number": pd.Series([s.trial.number for s in summaries], dtype="int64"),
        "n_seeds": pd.Series([s.n_seeds for s in summaries], dtype="int64"),
    }
    for i, col in enumerate(result.objective_columns):
        columns[f"{col}_mean"] = pd.Series([s.mean[i] for s in summaries], dtype="float64")
        columns[f"{col}_std"] = pd.Series([s.std[i] for s in summaries], dtype="float64")
        columns[f"{col}_ci95_low"] = pd.Series([s.ci95[i][0] for s in summaries], dtype="float64")
        columns[f"{col}_ci95_high"] = pd.Series([s.ci95[i][1] for s in summaries], dtype="float64")
    for name in result.param_names:
        columns[f"params_{name}"] = pd.Series(
            [_plain(s.trial.params.get(name)) for s in summaries], dtype="object"
        )
    return pd.DataFrame(columns)


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value
