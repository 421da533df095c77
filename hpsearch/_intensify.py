"""Intensification: ``reevaluate_when="during"``, the search loop's re-evaluations of each challenger.

The rule (`hpsearch.reevaluate` says the rest: seeds, folds, records):

- **The incumbent** is the configuration with the best mean over its runs among those with at least two finished
  runs, ties going to the one with more runs, then to the earlier trial (several objectives: the configurations on
  the Pareto front over the means) - what `choose` returns.
- **A challenger** is a search trial that ends COMPLETE with an objective at least as good as the incumbent's mean
  (several objectives: not dominated by any re-evaluated configuration's means), or any COMPLETE trial while there
  is no incumbent yet. Before it can be accepted, it trains ``reevaluate_seeds`` more times (seeds ``seed + 1 ..
  seed + S``, the incumbent's seeds: a paired comparison); it becomes the incumbent when its mean over its runs is
  better than the incumbent's. A trial whose single run is worse than the incumbent's mean is not re-evaluated.
- **Ties** (one objective): an objective that saturates (accuracy 1.0) gives many configurations the same mean on
  the same seeds, and only more seeds can tell them apart. So a trial whose run equals the incumbent's mean is a
  challenger too, and when after its S re-evaluations its mean still equals the incumbent's, the one with fewer runs
  trains its next seed (both, paired, when they have as many) until the means differ, at most ``2 * S + 1`` runs
  each; still tied then, the incumbent keeps its place. The tie-break's runs are reserved one step at a time, only
  if they are left (otherwise the incumbent keeps its place).
- **Budget**: ``n_trials`` counts every training run, re-evaluations included, so a search trains exactly
  ``n_trials`` runs (fewer only if the engine runs out, a budget is spent or the search fails). A challenger's S runs
  are reserved when it ends, and only if S runs are left: otherwise it stays a single-run trial (logged) and the
  remaining runs go to search trials. Re-evaluations run before the next search trial, on the search's executor;
  they count against the compute budgets and ``max_failed_trials`` like every trial (too many failures in a row stop
  the search), are never pruned, and are never told to the engine (it ranks single runs; its own best trial stays
  the observed best).
- **Resume**: the re-evaluations an earlier run of the search saved are kept and count against ``n_trials``; a
  challenger whose re-evaluations were cut short trains only the missing seeds of its S first (a tie-break cut
  short is not taken up again: the search goes on with the means it has).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .reevaluate import SOURCE, _dominates, summarize
from .trial import TrialRecord, TrialState

if TYPE_CHECKING:
    from .executor import Executor
    from .reevaluate import Reevaluation
    from .session import SearchSession
    from .settings import TrialSettings

__all__ = ["Intensification"]

logger = logging.getLogger(__name__)


class Intensification:
    """The search loop asks it for queued re-evaluations (`next`), has it train them (`train`) and tells it every
    search trial's end (`consider`); see the module."""

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
        self._means: list[tuple[str, list[float]]] | None = (
            None  # the re-evaluated configurations' means, signed
        )
        self._open: set[str] = set()  # queued re-evaluations not recorded yet
        self._racer: TrialRecord | None = None  # the challenger whose re-evaluations run now
        #: The re-evaluations kept from an earlier run and recorded by this one (the loop keeps them after an
        #: engine's final list of trials).
        self.records: list[TrialRecord] = []

    # ------------------------------------------------------------------ the loop's questions
    def start(self, budget: int) -> int:
        """Before the first trial: keep the earlier run's re-evaluations, queue the missing seeds of a challenger cut
        short, and return how many runs this run may start (the engine's ``budget``, less the runs n_trials already
        holds)."""
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
            runs_left -= len(missing)
            self._enqueue(config, missing)
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

    def owns(self, trial: Any) -> bool:
        """Whether ``trial`` is one of the re-evaluations queued here (not the engine's)."""
        return trial.id in self._ids

    def train(self, settings: TrialSettings, trial: Any, executor: Executor) -> TrialRecord:
        return self.plan.train(settings, trial, executor)

    def recorded(self, record: TrialRecord, runs_left: int) -> int:
        """A re-evaluation was recorded (the means change). When it was the last one queued, and the challenger ties
        the incumbent, queue the tie-break's runs if ``runs_left`` allows; returns how many runs it reserved."""
        self.records.append(record)
        self._means = None
        self._open.discard(record.trial_id)
        if self._open or self.queue or self._racer is None:
            return 0
        return self._break_tie(self._racer, runs_left)

    def consider(self, record: TrialRecord, runs_left: int) -> int:
        """A search trial ended: queue its re-evaluations if it challenges the incumbent and ``runs_left`` allows;
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
        self._enqueue(record, range(1, seeds + 1))
        self._racer = record
        return seeds

    # ------------------------------------------------------------------ the rule
    def _challenges(self, record: TrialRecord) -> bool:
        result = self.session.result
        objective = record.objective
        values = objective if isinstance(objective, list) else [objective]
        if any(v is None for v in values):
            return False
        signs = [1.0 if d == "minimize" else -1.0 for d in result.directions]
        ours = [s * float(v) for s, v in zip(signs, values) if v is not None]
        if self._means is None:  # only after a re-evaluation: not a pass over every record per trial
            self._means = [
                (summary.config_id, [s * m for s, m in zip(signs, summary.mean)])
                for summary in summarize(result)
                if summary.n_seeds >= 2
            ]
        means = [m for config_id, m in self._means if config_id != record.trial_id]
        if not means:
            return True  # no incumbent yet
        if len(signs) == 1:
            return ours[0] <= min(m[0] for m in means)  # a tie too: only more seeds can tell them apart
        return not any(_dominates(m, ours) for m in means)

    def _break_tie(self, challenger: TrialRecord, runs_left: int) -> int:
        """One objective: while the challenger's mean equals the incumbent's, the one with fewer runs trains its next
        seed (both when they have as many), up to ``2 * seeds + 1`` runs each; returns the runs queued."""
        if len(self.session.result.directions) != 1:
            return 0
        summaries = {s.config_id: s for s in summarize(self.session.result) if s.n_seeds >= 2}
        ours = summaries.get(challenger.trial_id)
        others = [s for config_id, s in summaries.items() if config_id != challenger.trial_id]
        if ours is None or not others:
            return 0
        sign = 1.0 if self.session.result.directions[0] == "minimize" else -1.0
        incumbent = min(others, key=lambda s: (sign * s.mean[0], -s.n_seeds, s.trial.number))
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
