"""One uniform view of a backend trial (`Trial`) and the record every backend leaves of it (`TrialRecord`)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

__all__ = ["Evaluation", "Trial", "TrialRecord", "TrialState"]


class TrialState(str, enum.Enum):
    """How a trial ended (or that it has not yet)."""

    RUNNING = "RUNNING"
    COMPLETE = "COMPLETE"
    PRUNED = "PRUNED"
    FAIL = "FAIL"


@dataclass
class Evaluation:
    """One evaluation of a trial: the objective the backend was told and every eval metric."""

    step: int
    epoch: float | None
    objective: float | list[float] | None
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class TrialRecord:
    """What a search keeps of one trial, the same for every backend.

    ``objective`` is a float for single-objective searches and a list of floats (one per direction) for
    multi-objective ones; ``None`` when the trial failed before reporting anything. ``checkpoint`` is the
    checkpoint folder whose evaluation gave ``objective`` (None if the trial saved none). ``extra`` holds
    backend-specific facts worth showing (e.g. ``workers``, ``restored_from``).
    """

    trial_id: str
    number: int
    name: str
    state: TrialState
    params: dict[str, Any]
    objective: float | list[float] | None = None
    started: datetime | None = None
    finished: datetime | None = None
    intermediates: list[Evaluation] = field(default_factory=list)
    last_step: int | None = None
    checkpoint: str | None = None
    node: str | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def duration_s(self) -> float | None:
        if self.started is None or self.finished is None:
            return None
        return (self.finished - self.started).total_seconds()
