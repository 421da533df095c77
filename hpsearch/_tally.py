"""`RunningTally`: a search's counts per state, its best trial (or Pareto front) and the compute it spent, kept up to
date per trial in O(1) (O(front size) for several objectives) instead of recomputed from every record after each
trial. The session keeps one (`SearchSession.tally`): its budgets, the progress lines and the sweep's progress bar
read it. Warm-start rows (earlier searches' trials told to the engine) are counted apart, in ``warm``, as
`hpsearch.warmstart.own_counts` does: ``counts`` are this search's own trials, the ones ``n_trials`` asks for.

It follows a `SearchResult` that grows one record at a time (what `SearchSession.record` does): `update` with the
record just kept. When the records changed otherwise (a record replaced an earlier one of the same trial, records
adopted from an earlier run, the engine's final list), it notices (the trial is known already, or the number of
records is not one more than it saw) and recounts from the records, as `SearchResult.counts` / `best_trial` /
`best_trials` / `total_cost` (and `own_counts`) would, so its answers are always theirs.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .trial import TrialState
from .warmstart import is_warm

#: The cost columns whose sums a search's budgets compare with their limits.
BUDGET_COLUMNS = ("device_s", "energy_kwh")

if TYPE_CHECKING:
    from .results import SearchResult
    from .trial import TrialRecord

__all__ = ["RunningTally"]


class RunningTally:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}  # this search's own trials per state
        self.warm = 0  # warm-start rows: never in ``counts``, never the best
        self._seen: set[str] = set()
        self._best: tuple[float, int, TrialRecord] | None = None  # (signed objective, number, record)
        self._front: list[tuple[list[float], TrialRecord]] = []  # signed vectors: smaller is better
        self._spent = {
            column: [0.0, 0] for column in BUDGET_COLUMNS
        }  # column -> [sum, trials that measured it]

    def spent(self, column: str) -> float:
        """The sum of a `BUDGET_COLUMNS` cost over the records seen that measured it; NaN when none did."""
        total, measured = self._spent[column]
        return total if measured else math.nan

    @property
    def best_trial(self) -> TrialRecord | None:
        """`SearchResult.best_trial` of the records seen (single objective)."""
        return None if self._best is None else self._best[2]

    @property
    def front_size(self) -> int:
        """``len(SearchResult.best_trials)`` of the records seen (several objectives)."""
        return len(self._front)

    def update(self, result: SearchResult, record: TrialRecord) -> None:
        """Count ``record``, which `result` has just kept."""
        if record.trial_id in self._seen or len(result.records) != len(self._seen) + 1:
            self.recount(result)
            return
        self._add(result, record)

    def recount(self, result: SearchResult) -> None:
        self.__init__()  # type: ignore[misc]
        for record in sorted(result.records, key=lambda r: r.number):
            self._add(result, record)

    def _add(self, result: SearchResult, record: TrialRecord) -> None:
        self._seen.add(record.trial_id)
        for column, tally in self._spent.items():
            value = _number(record.cost.get(column))
            if not math.isnan(value):
                tally[0] += value
                tally[1] += 1
        if is_warm(
            record
        ):  # as SearchResult.scored_trials: earlier searches' trials are never this one's best
            self.warm += 1
            return
        state = TrialState(record.state).value
        self.counts[state] = self.counts.get(state, 0) + 1
        if record.state != TrialState.COMPLETE:
            return
        values = result.objective_values(record)
        if values is None or any(math.isnan(v) for v in values):
            return
        signed = [v if d == "minimize" else -v for v, d in zip(values, result.directions)]
        if len(signed) == 1:
            key = (signed[0], record.number, record)
            if self._best is None or key[:2] < self._best[:2]:
                self._best = key
            return
        if any(_dominates(other, signed) for other, _ in self._front):
            return
        self._front = [(other, r) for other, r in self._front if not _dominates(signed, other)]
        self._front.append((signed, record))


def _dominates(a: list[float], b: list[float]) -> bool:
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


def _number(value: object) -> float:
    try:
        return math.nan if value is None else float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan
