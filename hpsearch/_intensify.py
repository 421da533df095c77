"""Intensification: ``reevaluate_when="during"``, the search loop's re-evaluations of each challenger, raced.

The rule (`hpsearch.reevaluate` says the rest: seeds, folds, records):

- **The incumbent** is the configuration with the best mean over its runs among those with at least two finished
  runs, ties going to the one with more runs, then to the earlier trial (several objectives: the configurations on
  the Pareto front over the means) - what `choose` returns.
- **The noise** ``sigma`` is the run-to-run standard deviation pooled over every configuration with at least two
  finished runs (`pooled_std`: the within-configuration variances weighted by their degrees of freedom), so it has
  as many degrees of freedom as the search has repeated runs, far more than one configuration's S + 1 runs.
- **A challenger** (one objective) is a search trial that ends COMPLETE with a run no worse than the incumbent's
  mean by more than ``Z`` standard errors of their difference: ``run >= mean - Z * sigma * sqrt(1 + 1/n)`` (``n``
  the incumbent's runs, ``Z`` = `Z`), or any COMPLETE trial while there is no incumbent yet. With ``sigma = 0``
  (every repeated run equal: a saturated objective) the bar is the incumbent's mean itself, a tie included.
  Several objectives: a trial not dominated by any re-evaluated configuration's means.
- **The race**: a challenger trains its extra seeds ``seed + 1 .. seed + S`` (the incumbent's seeds: paired) one at
  a time. After each, it is dropped when its mean over its ``m`` runs is below the incumbent's by more than ``Z``
  standard errors, ``mean_c < mean - Z * sigma * sqrt(1/m + 1/n)``: its remaining seeds are not trained and go back
  to the search. After all S, it becomes the incumbent when its mean is better than the incumbent's (several
  objectives: nothing is dropped; the front over the means decides).
- **Ties** (one objective): an objective that saturates (accuracy 1.0) gives many configurations the same mean on
  the same seeds, and only more seeds can tell them apart. When after its S re-evaluations a challenger's mean still
  equals the incumbent's, the one with fewer runs trains its next seed (both, paired, when they have as many) until
  the means differ, at most ``2 * S + 1`` runs each; still tied then, the incumbent keeps its place. The
  tie-break's runs are reserved one step at a time, only if they are left (otherwise the incumbent keeps its place).
- **Budget**: ``n_trials`` counts every training run, re-evaluations included, so a search trains exactly
  ``n_trials`` runs (fewer only if the engine runs out, a budget is spent or the search fails). A challenger's S runs
  are reserved when it ends, and only if S runs are left: otherwise it stays a single-run trial (logged) and the
  remaining runs go to search trials; a dropped challenger gives back the runs it did not use. Re-evaluations run
  before the next search trial, on the search's executor; they count against the compute budgets and
  ``max_failed_trials`` like every trial (too many failures in a row stop the search), are never pruned, and are
  never told to the engine (it ranks single runs; its own best trial stays the observed best).
- **Resume**: the re-evaluations an earlier run of the search saved are kept and count against ``n_trials``; a
  challenger whose race was cut short goes on with its missing seeds of the S first, unless the race's rule drops it
  on the runs it has (a tie-break cut short is not taken up again: the search goes on with the means it has).
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .reevaluate import SOURCE, ConfigSummary, _dominates, pooled_std, summarize
from .trial import TrialRecord, TrialState

if TYPE_CHECKING:
    from .executor import Executor
    from .reevaluate import Reevaluation
    from .session import SearchSession
    from .settings import TrialSettings

__all__ = ["Z", "Intensification"]

logger = logging.getLogger(__name__)

#: How many standard errors of the difference a challenger may be behind the incumbent and still race (one-sided:
#: a configuration exactly as good as the incumbent is raced with probability 84%, and dropped by a race with 16%).
Z = 1.0


@dataclass
class _Race:
    """A challenger whose extra seeds train one at a time: the seeds' indices still to train (reserved)."""

    config: TrialRecord
    todo: deque[int] = field(default_factory=deque)


class Intensification:
    """The search loop asks it for queued re-evaluations (`next`), has it train them (`train`) and tells it every
    search trial's end (`consider`) and every re-evaluation's (`recorded`); see the module."""

    def __init__(
        self,
        plan: Reevaluation,
        session: SearchSession,
        earlier: Sequence[TrialRecord],
        native: Callable[[dict[str, Any]], Any] | None,
    ) -> None:
        self.plan = plan
        self.session = session
        self.earlier = list(earlier)
        self.native = native
        self.queue: deque[Any] = deque()
        self._ids: set[str] = set()
        self._stats: _Standing | None = None  # the re-evaluated configurations, after the last re-evaluation
        self._open: set[str] = set()  # queued re-evaluations not recorded yet
        self._races: dict[str, _Race] = {}  # config_id -> its race
        self._racer: TrialRecord | None = None  # the challenger whose tie-break may run
        #: The re-evaluations kept from an earlier run and recorded by this one (the loop keeps them after an
        #: engine's final list of trials).
        self.records: list[TrialRecord] = []

    # ------------------------------------------------------------------ the loop's questions
    def start(self, budget: int) -> int:
        """Before the first trial: keep the earlier run's re-evaluations, go on with the races cut short, and return
        how many runs this run may start (the engine's ``budget``, less the runs n_trials already holds)."""
        session = self.session
        ids = {r.trial_id for r in session.records}
        kept = [r for r in self.earlier if r.extra.get("config_id") in ids]
        session.adopt(kept)
        self.records.extend(kept)
        finished = [
            r
            for r in session.records
            if r.extra.get("source", "search") in ("search", SOURCE) and r.state is not TrialState.RUNNING
        ]
        runs_left = min(
            budget - sum(r.extra.get("source") == SOURCE for r in finished), session.n_trials - len(finished)
        )
        runs_left = max(runs_left, 0)
        for config, missing in self._cut_short():
            if len(missing) > runs_left:
                break
            if self._dropped(config.trial_id):
                logger.info(
                    "Trial %s's race, cut short, is not taken up: it is behind the incumbent.", config.name
                )
                continue
            runs_left -= len(missing)
            self._race(config, missing)
        return runs_left

    def next(self) -> Any | None:
        """The next queued re-evaluation, or None."""
        return self.queue.popleft() if self.queue else None

    def _enqueue(self, config: TrialRecord, indices: Sequence[int]) -> None:
        for j in indices:
            trial = self.plan.trial(self.session.settings, config, j, config.number, self.native)
            self._ids.add(trial.id)
            self._open.add(trial.id)
            self.queue.append(trial)

    def _race(self, config: TrialRecord, indices: Sequence[int]) -> None:
        """Start ``config``'s race over the extra seeds ``indices`` (their runs already reserved): the first now."""
        race = _Race(config, deque(indices))
        self._races[config.trial_id] = race
        self._enqueue(config, [race.todo.popleft()])

    def owns(self, trial: Any) -> bool:
        """Whether ``trial`` is one of the re-evaluations queued here (not the engine's)."""
        return trial.id in self._ids

    def train(self, settings: TrialSettings, trial: Any, executor: Executor) -> TrialRecord:
        return self.plan.train(settings, trial, executor)

    def recorded(self, record: TrialRecord, runs_left: int) -> int:
        """A re-evaluation was recorded (the means change): its race goes on (the next seed queued), is dropped (its
        unused runs given back) or ends (a tie-break queued if ``runs_left`` allows). Returns the runs it took from
        the budget (negative: given back)."""
        self.records.append(record)
        self._stats = None
        self._open.discard(record.trial_id)
        config_id = str(record.extra.get("config_id"))
        race = self._races.get(config_id)
        if race is not None:
            if race.todo and self._dropped(config_id):
                del self._races[config_id]
                logger.info(
                    "Trial %s is dropped after %d re-evaluation(s): behind the incumbent.",
                    race.config.name,
                    self.plan.seeds - len(race.todo),
                )
                return -len(race.todo)
            if race.todo:
                self._enqueue(race.config, [race.todo.popleft()])
                return 0
            del self._races[config_id]
            self._racer = race.config
        if self._open or self.queue or self._races or self._racer is None:
            return 0
        return self._break_tie(self._racer, runs_left)

    def consider(self, record: TrialRecord, runs_left: int) -> int:
        """A search trial ended: start its race if it challenges the incumbent and ``runs_left`` allows its S runs;
        returns how many runs it reserved."""
        if record.state is not TrialState.COMPLETE or not self._challenges(record):
            return 0
        seeds = self.plan.seeds
        if seeds > runs_left:
            logger.info(
                "Trial %s challenges the incumbent, but only %d run(s) are left for its %d re-evaluation(s); it stays "
                "a single run.",
                record.name,
                runs_left,
                seeds,
            )
            return 0
        self._racer = None
        self._race(record, range(1, seeds + 1))
        return seeds

    # ------------------------------------------------------------------ the rule
    def _standing(self) -> _Standing:
        if self._stats is None:  # only after a re-evaluation: not a pass over every record per trial
            self._stats = _Standing.of(self.session.result)
        return self._stats

    def _challenges(self, record: TrialRecord) -> bool:
        objective = record.objective
        values = objective if isinstance(objective, list) else [objective]
        if any(v is None for v in values):
            return False
        standing = self._standing()
        ours = [s * float(v) for s, v in zip(standing.signs, values) if v is not None]
        others = [s for s in standing.repeated if s.config_id != record.trial_id]
        if not others:
            return True  # no incumbent yet
        if len(ours) == 1:
            incumbent = standing.incumbent(record.trial_id)
            assert incumbent is not None
            margin = Z * standing.sigma * math.sqrt(1 + 1 / incumbent.n_seeds)
            return (
                ours[0] <= standing.signed(incumbent) + margin
            )  # a tie too: only more seeds can tell them apart
        return not any(_dominates(standing.signed_means(s), ours) for s in others)

    def _dropped(self, config_id: str) -> bool:
        """Whether ``config_id``'s runs put it behind the incumbent by more than ``Z`` standard errors (one
        objective; never with several)."""
        standing = self._standing()
        if len(standing.signs) != 1:
            return False
        ours = next((s for s in standing.repeated if s.config_id == config_id), None)
        incumbent = standing.incumbent(config_id)
        if ours is None or incumbent is None:
            return False
        margin = Z * standing.sigma * math.sqrt(1 / ours.n_seeds + 1 / incumbent.n_seeds)
        return standing.signed(ours) > standing.signed(incumbent) + margin

    def _break_tie(self, challenger: TrialRecord, runs_left: int) -> int:
        """One objective: while the challenger's mean equals the incumbent's, the one with fewer runs trains its next
        seed (both when they have as many), up to ``2 * seeds + 1`` runs each; returns the runs queued."""
        standing = self._standing()
        if len(standing.signs) != 1:
            return 0
        ours = next((s for s in standing.repeated if s.config_id == challenger.trial_id), None)
        incumbent = standing.incumbent(challenger.trial_id)
        if ours is None or incumbent is None:
            return 0
        if ours.mean[0] != incumbent.mean[0]:
            self._racer = None  # decided: by the mean
            return 0
        behind = [challenger] if ours.n_seeds < incumbent.n_seeds else [incumbent.trial, challenger]
        nexts = [(config, self._next_index(config.trial_id)) for config in behind]
        if any(j > 2 * self.plan.seeds for _, j in nexts) or len(nexts) > runs_left:
            if len(nexts) > runs_left:
                logger.info(
                    "Trial %s ties the incumbent's mean; no run is left to tell them apart.", challenger.name
                )
            self._racer = (
                None  # the incumbent keeps its place (choose: the mean, then more runs, then earlier)
            )
            return 0
        for config, j in nexts:
            self._enqueue(config, [j])
        return len(nexts)

    def _next_index(self, config_id: str) -> int:
        """The index of a configuration's next seed (its search run is 0; a re-evaluation with seed + j is j)."""
        base = int(self.session.settings.trainer.args.seed)
        used = [
            int(r.extra["seed"]) - base
            for r in self.session.records
            if r.extra.get("source") == SOURCE and r.extra.get("config_id") == config_id
        ]
        return max(used, default=0) + 1

    def _cut_short(self) -> list[tuple[TrialRecord, list[int]]]:
        """Configurations whose re-evaluations an earlier run started but did not finish: (the search trial, the
        missing extra seeds' indices)."""
        base = int(self.session.settings.trainer.args.seed)
        seen: dict[str, set[int]] = {}
        for r in self.session.records:
            if r.extra.get("source") == SOURCE:
                seen.setdefault(str(r.extra.get("config_id")), set()).add(int(r.extra["seed"]) - base)
        out = []
        for r in self.session.records:
            if r.trial_id in seen and r.extra.get("source", "search") == "search":
                missing = [j for j in range(1, self.plan.seeds + 1) if j not in seen[r.trial_id]]
                if missing:
                    out.append((r, missing))
        return sorted(out, key=lambda rm: rm[0].number)


@dataclass(frozen=True)
class _Standing:
    """The re-evaluated configurations (at least two finished runs) of a search, its directions' signs (minimizing)
    and the pooled noise of its first objective (0 when nothing is repeated yet)."""

    signs: list[float]
    repeated: list[ConfigSummary]
    sigma: float

    @classmethod
    def of(cls, result: Any) -> _Standing:
        signs = [1.0 if d == "minimize" else -1.0 for d in result.directions]
        repeated = [s for s in summarize(result) if s.n_seeds >= 2]
        return cls(signs, repeated, pooled_std(repeated) or 0.0)

    def signed(self, summary: ConfigSummary) -> float:
        return self.signs[0] * summary.mean[0]

    def signed_means(self, summary: ConfigSummary) -> list[float]:
        return [s * m for s, m in zip(self.signs, summary.mean)]

    def incumbent(self, besides: str) -> ConfigSummary | None:
        """The best re-evaluated configuration other than ``besides`` (one objective: the best mean, then more runs,
        then the earlier trial), or None."""
        others = [s for s in self.repeated if s.config_id != besides]
        if not others:
            return None
        return min(others, key=lambda s: (self.signed(s), -s.n_seeds, s.trial.number))
