"""Re-evaluation of the leaders: the top configurations trained again with other seeds, the best chosen by the mean.

``hyperparameter_search(..., reevaluate_top_k=K, reevaluate_seeds=S)``, on every backend. The rule, chosen to be
predictable (``reevaluate_when="during"``, intensification as the search goes: `hpsearch._intensify`):

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
- **The best run.** Among the configurations with at least two finished runs, the best mean over their runs, a tie
  going to more runs, then to the earlier trial (several objectives: the Pareto front over the means). The mean, not a lower confidence bound: every leader has the same
  number of runs, so a bound would only penalize the spread, whose estimate from S + 1 runs is itself too noisy to
  rank by; the 95% interval is reported beside the mean instead.
- **Resume.** A re-evaluation is identified by (config_id, seed): a search continued after a kill trains only the
  ones its results do not hold yet.
- **Folds.** ``reevaluate_folds``: the j-th re-evaluation of every configuration trains on fold ``(j - 1) mod F`` of
  F (train_dataset, eval_dataset) pairs, or on what a callable answers for its seed (asked once per seed, in the
  driver, before any trial); the record's ``fold`` says which. The search trials keep the trainer's own datasets, so
  a configuration's mean spans its own split and the folds.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
import statistics
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._repeats import SEED_ARGS, mark
from .errors import SearchConfigError, TooManyFailedTrials
from .trial import TrialRecord

if TYPE_CHECKING:
    import pandas as pd

    from .backends.base import SearchBackend
    from .executor import Executor
    from .results import SearchResult
    from .session import SearchSession
    from .settings import TrialSettings

__all__ = [
    "SOURCE",
    "WHEN",
    "ConfigSummary",
    "Reevaluation",
    "check_folds",
    "check_reevaluation",
    "choose",
    "mark",
    "pooled_std",
    "summarize",
]

logger = logging.getLogger(__name__)

#: The ``source`` of a re-evaluation's record.
SOURCE = "reevaluation"


#: When the re-evaluations run: after the search ("end"), or as it goes, before a challenger is accepted ("during").
WHEN = ("end", "during")


def check_reevaluation(
    top_k: int | None,
    seeds: int | None,
    n_trials: int,
    when: str = "end",
    folds: Folds | None = None,
) -> Reevaluation | None:
    """The re-evaluation the options ask for (None: none); `SearchConfigError` for a set that makes no sense."""
    if top_k is None and seeds is None:
        for name, value, default in (("reevaluate_when", when, "end"), ("reevaluate_folds", folds, None)):
            if value != default:
                raise SearchConfigError(
                    f"{name}={_short(value)} needs reevaluate_seeds (how many extra seeds a configuration trains "
                    f"with); pass e.g. reevaluate_seeds=2, or remove {name}.",
                    about=name,
                )
        return None
    if seeds is None:
        raise SearchConfigError(
            f"reevaluate_top_k={top_k} needs reevaluate_seeds (how many extra seeds each of the top {top_k} "
            "configurations trains with); pass e.g. reevaluate_seeds=2, or remove reevaluate_top_k.",
            about="reevaluate_top_k",
        )
    if when == "during":
        if top_k is not None:
            raise SearchConfigError(
                f"reevaluate_top_k={top_k} chooses the leaders re-evaluated after the search (reevaluate_when='end'); "
                "with reevaluate_when='during' every challenger of the incumbent is re-evaluated as the search goes: "
                "remove reevaluate_top_k, or pass reevaluate_when='end'.",
                about="reevaluate_top_k",
            )
        if n_trials < seeds + 1:
            raise SearchConfigError(
                f"reevaluate_seeds={seeds} with reevaluate_when='during' needs n_trials >= {seeds + 1} (n_trials "
                f"counts every run, re-evaluations included; n_trials={n_trials} cannot finish one configuration's "
                f"{seeds + 1} runs); pass n_trials >= {seeds + 1}, or fewer reevaluate_seeds.",
                about="n_trials",
            )
        return Reevaluation(None, seeds, when, folds)
    if top_k is None:
        raise SearchConfigError(
            f"reevaluate_seeds={seeds} needs reevaluate_top_k (how many of the best configurations train again); "
            "pass e.g. reevaluate_top_k=3, or remove reevaluate_seeds (or pass reevaluate_when='during').",
            about="reevaluate_seeds",
        )
    if top_k > n_trials:
        raise SearchConfigError(
            f"reevaluate_top_k={top_k} is more than n_trials={n_trials}: at most {n_trials} configurations can "
            f"complete; pass reevaluate_top_k <= {n_trials}, or more trials.",
            about="reevaluate_top_k",
        )
    return Reevaluation(top_k, seeds, when, folds)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"<{type(value).__name__}>"


#: Other splits for the re-evaluations: (train_dataset, eval_dataset) pairs, or ``folds(seed)`` returning one.
Folds = Sequence[tuple[Any, Any]] | Callable[[int], tuple[Any, Any]]


def check_folds(value: Any) -> Any:
    """The rule of ``reevaluate_folds`` alone: a non-empty list of (train_dataset, eval_dataset) pairs, or a
    callable of the seed (its answer is checked when it is called)."""
    if callable(value):
        return value
    for i, fold in enumerate(value):
        problem = _fold_problem(fold)
        if problem:
            raise SearchConfigError(
                f"reevaluate_folds[{i}]={_short(fold)} {problem}; pass a list of (train_dataset, eval_dataset) pairs, "
                "e.g. reevaluate_folds=[(train_1, eval_1), (train_2, eval_2)], or a callable seed -> such a pair.",
                about="reevaluate_folds",
            )
    return list(value)


def _fold_problem(fold: Any) -> str | None:
    """Why ``fold`` is not a (train_dataset, eval_dataset) pair, or None."""
    if not isinstance(fold, list | tuple) or len(fold) != 2:
        return "is not a (train_dataset, eval_dataset) pair"
    for part, data in zip(("train_dataset", "eval_dataset"), fold):
        if data is None or isinstance(data, str | bytes | bool | int | float):
            return f"has {part}={_short(data)}, which is not a dataset"
    return None


@dataclass(frozen=True)
class Reevaluation:
    """Configurations of a search trained with ``seeds`` more seeds each (see the module): the top ``top_k`` after
    the search (``when`` "end"), or each challenger of the incumbent as the search goes ("during"); on ``folds``
    (other splits) if given."""

    top_k: int | None
    seeds: int
    when: str = "end"
    folds: Folds | None = None
    #: Whether ``folds`` are a callable's answers, one per extra seed (`resolve_folds`).
    folds_by_seed: bool = False

    def check_space(self, names: Iterable[str]) -> None:
        """A searched seed would be overwritten by the re-evaluation's seeds: refused before any trial."""
        searched = [name for name in SEED_ARGS if name in set(names)]
        if searched:
            raise SearchConfigError(
                f"hp_space searches {searched[0]!r}, which re-evaluation ({self._options()}) sets to other values "
                f"for each run of a configuration; remove {searched[0]!r} from hp_space, or drop the reevaluate_* "
                "options.",
                about="hp_space",
            )

    def check_backend(self, adapter: SearchBackend, trial_workers: int | None) -> None:
        """What the backend and the executor must allow, before any trial: "during" needs the shared search loop
        (trials asked and told in the driver); other folds need the re-evaluations trained in the driver, where their
        trainer is built (a trial worker process has the search's datasets only)."""
        if self.when == "during" and adapter.trial_workers_refusal is not None:
            raise SearchConfigError(
                f"reevaluate_when='during' is not supported by backend={adapter.name!r}: its engine runs the "
                "search's loop itself (its trials are not asked and told by hpsearch's loop), so a re-evaluation "
                "cannot be put in before a challenger is accepted; pass reevaluate_when='end' (the leaders are "
                "re-evaluated after the search, on every backend).",
                about="reevaluate_when",
            )
        from ._dist import world_size

        if self.folds is not None and world_size() > 1:
            raise SearchConfigError(
                f"reevaluate_folds in a launched search of {world_size()} processes: the other processes train "
                "each run with the search's own datasets; run the search in one process, or drop reevaluate_folds.",
                about="reevaluate_folds",
            )
        if self.folds is not None and trial_workers is not None:
            raise SearchConfigError(
                f"reevaluate_folds with trial_workers={trial_workers}: the worker processes hold the search's own "
                "datasets, not the folds; drop trial_workers (the re-evaluations then train in this process), or "
                "drop reevaluate_folds.",
                about="reevaluate_folds",
            )

    def _options(self) -> str:
        top = f"reevaluate_top_k={self.top_k}, " if self.top_k is not None else ""
        return f"{top}reevaluate_seeds={self.seeds}, reevaluate_when={self.when!r}"

    def describe(self, settings: TrialSettings) -> dict[str, Any]:
        """What the results keep of it (in their settings)."""
        out: dict[str, Any] = {
            "seeds": self.seeds,
            "when": self.when,
            "base_seed": int(settings.trainer.args.seed),
        }
        if self.top_k is not None:
            out["top_k"] = self.top_k
        if self.folds is not None:
            out["folds"] = (
                "callable of the seed" if self.folds_by_seed or callable(self.folds) else len(self.folds)
            )
        return out

    def resolve_folds(self, base_seed: int) -> Reevaluation:
        """This plan with a callable ``folds`` asked once per extra seed (``base_seed + 1 .. + seeds``), in the
        driver before any trial, each answer checked; unchanged otherwise."""
        if not callable(self.folds):
            return self
        pairs = []
        for j in range(1, self.seeds + 1):
            seed = base_seed + j
            fold = self.folds(seed)
            problem = _fold_problem(fold)
            if problem:
                raise SearchConfigError(
                    f"reevaluate_folds({seed}) returned {_short(fold)}, which {problem}; return a "
                    "(train_dataset, eval_dataset) pair for every seed.",
                    about="reevaluate_folds",
                )
            pairs.append((fold[0], fold[1]))
        return dataclasses.replace(self, folds=pairs, folds_by_seed=True)

    def fold(self, seed: int, j: int) -> tuple[Any, tuple[Any, Any]] | None:
        """(what the ``fold`` column says, (train_dataset, eval_dataset)) for the ``j``-th extra seed (1-based),
        ``seed``; None without folds. A list's folds are taken in turn: the j-th run of every configuration trains
        on the fold at (j - 1) modulo their number (the column: that position); a callable's answer for the seed
        (the column: the seed)."""
        if self.folds is None:
            return None
        assert not callable(self.folds), "resolve_folds first"
        i = (j - 1) % len(self.folds)
        train, evaluation = self.folds[i]
        return (seed if self.folds_by_seed else i), (train, evaluation)

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

        assert self.top_k is not None  # when == "end" (check_reevaluation)
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
                lambda trial: self.train(session.settings, trial, executor),
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
        done = {
            (r.extra.get("config_id"), r.extra.get("seed"))
            for r in session.records
            if r.extra.get("source") == SOURCE
        }
        base = int(session.settings.trainer.args.seed)
        first = 1 + max((r.number for r in session.records if r.extra.get("source") != SOURCE), default=-1)
        for rank, leader in enumerate(leaders):
            for j in range(1, self.seeds + 1):
                if (leader.trial_id, base + j) not in done:
                    yield self.trial(session.settings, leader, j, first + rank * self.seeds + j - 1, native)

    def trial(
        self,
        settings: TrialSettings,
        config: TrialRecord,
        j: int,
        number: int,
        native: Callable[[dict[str, Any]], Any] | None,
    ) -> Any:
        """The trial that trains ``config`` again with its ``j``-th extra seed (``seed + j``), numbered ``number``."""
        from .trial import Trial

        seed = int(settings.trainer.args.seed) + j
        if any(name in config.params for name in SEED_ARGS):
            logger.warning(
                "Trial %s chose %s itself; its re-evaluation sets it to %d.",
                config.name,
                [n for n in SEED_ARGS if n in config.params],
                seed,
            )
        trial = Trial(
            f"{config.trial_id}-seed{seed}",
            number,
            {**config.params, "seed": seed, "data_seed": seed},
            settings.backend,
            native=native(dict(config.params)) if native else None,
        )
        trial.config_id, trial.seed, trial.fold_index = config.trial_id, seed, j  # type: ignore[attr-defined]
        #: What its record says it repeats (a launched search's other processes record it so too: `_lockstep`).
        trial.record_extra = {"source": SOURCE, "config_id": config.trial_id, "seed": seed}  # type: ignore[attr-defined]
        return trial

    def train(self, settings: TrialSettings, trial: Any, executor: Executor) -> TrialRecord:
        """Train a re-evaluation's ``trial`` on ``executor``, never pruned (it trains to the end), on its fold if
        there are folds; its record says what it repeats (``source``, ``config_id``, ``seed``, ``fold``)."""
        from .trial import NullReporter

        extra: dict[str, Any] = dict(trial.record_extra)
        fold = self.fold(trial.seed, trial.fold_index)
        if fold is not None:
            extra["fold"], (train, evaluation) = fold
            recipe = copy.copy(settings.trainer)
            recipe.train_dataset, recipe.eval_dataset = train, evaluation
            settings = dataclasses.replace(settings, trainer=recipe)
        return mark(executor.run(settings, trial, NullReporter()), extra)


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


def pooled_std(summaries: Iterable[ConfigSummary], objective: int = 0) -> float | None:
    """The run-to-run standard deviation of an objective pooled over configurations: the square root of their
    variances weighted by their degrees of freedom (runs - 1); None when no configuration has two runs."""
    weighted, df = 0.0, 0
    for s in summaries:
        if s.n_seeds >= 2 and not math.isnan(s.std[objective]):
            weighted += (s.n_seeds - 1) * s.std[objective] ** 2
            df += s.n_seeds - 1
    return math.sqrt(weighted / df) if df else None


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
    """The chosen configuration(s): the best mean among the re-evaluated ones (at least two finished runs; a tie: more
    runs, then the earlier trial), or the Pareto front over the means; None when the search has no re-evaluated
    configuration."""
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
        return [min(keyed, key=lambda sk: (sk[1][0], -sk[0].n_seeds, sk[0].trial.number))[0]]
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
