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


class Trial:
    """One backend trial, seen the same way by every backend, by `run_trial` and by ``model_init(trial)``.

    ``trial[name]`` reads a parameter. Attributes the view does not have are looked up on the backend's own
    object (``native``), so ``trial.suggest_int(...)`` works inside ``model_init`` for Optuna users; parameters
    suggested that way are recorded in ``params`` too.
    """

    def __init__(
        self,
        id: str,
        number: int,
        params: dict[str, Any],
        backend: str,
        native: Any = None,
        name: str | None = None,
    ) -> None:
        self.id = str(id)
        self.number = int(number)
        self.params = dict(params)
        self.backend = backend
        self.native = native
        self.name = name if name is not None else f"run-{self.id}"
        # Filled by the distributed helper when several processes train one trial.
        self._suggest_hook: Any = None

    def __getitem__(self, name: str) -> Any:
        try:
            return self.params[name]
        except KeyError:
            raise KeyError(f"Trial {self.name} has no parameter {name!r}; it has {sorted(self.params)}.") from None

    def __contains__(self, name: object) -> bool:
        return name in self.params

    def get(self, name: str, default: Any = None) -> Any:
        return self.params.get(name, default)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_") or attr in ("native", "params"):
            raise AttributeError(attr)
        native = self.__dict__.get("native")
        hook = self.__dict__.get("_suggest_hook")
        if attr.startswith("suggest_") and (native is not None or hook is not None):
            return self._recording_suggest(attr)
        if native is None:
            raise AttributeError(f"Trial has no attribute {attr!r} (and no native {self.backend} trial to ask).")
        return getattr(native, attr)

    def _recording_suggest(self, attr: str) -> Any:
        def suggest(name: str, *args: Any, **kwargs: Any) -> Any:
            hook = self._suggest_hook
            if hook is not None:
                value = hook(self, attr, name, args, kwargs)
            else:
                value = getattr(self.native, attr)(name, *args, **kwargs)
            self.params[name] = value
            return value

        return suggest

    def __repr__(self) -> str:
        return f"Trial(id={self.id!r}, number={self.number}, backend={self.backend!r}, params={self.params!r})"
