"""The one message types of a search: `Trial` (what a trial sees) and `TrialRecord` (what it leaves behind).

`Trial` is the object ``model_init(trial)`` and ``hp_name(trial)`` receive on every backend: a read-only
mapping of the trial's parameters (``trial["lr"]``, ``trial.items()``, ``dict(trial)``) that also answers the
native trial's attributes (``trial.number``; ``trial.suggest_float(...)`` where the engine has it) and names
the native object (``trial.native``, ``trial.backend``).

`TrialRecord` is the only message a trial sends back to the driver, on every backend: `run_trial` produces it
and it travels unchanged (as `TrialRecord.to_dict` on engines that ship results between processes).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

__all__ = ["Evaluation", "NullReporter", "Trial", "TrialRecord", "TrialReporter", "TrialState"]


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
    #: What the trial cost (``cpu_s``, ``device_s``, ``peak_memory_mb``, ``energy_kwh``, ``emissions_kg``).
    cost: dict[str, float] = field(default_factory=dict)

    @property
    def duration_s(self) -> float | None:
        if self.started is None or self.finished is None:
            return None
        return (self.finished - self.started).total_seconds()

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-safe values (tuples in parameters kept as tuples by `from_dict`)."""
        return {
            "trial_id": self.trial_id,
            "number": self.number,
            "name": self.name,
            "state": TrialState(self.state).value,
            "params": {name: encode_tuples(value) for name, value in self.params.items()},
            "objective": self.objective,
            "started": _iso(self.started),
            "finished": _iso(self.finished),
            "last_step": self.last_step,
            "checkpoint": self.checkpoint,
            "node": self.node,
            "error": self.error,
            "extra": self.extra,
            "cost": self.cost,
            "intermediates": [
                {"step": ev.step, "epoch": ev.epoch, "objective": ev.objective, "metrics": ev.metrics}
                for ev in self.intermediates
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrialRecord:
        """The record `to_dict` wrote (KeyError/TypeError/ValueError for a malformed one)."""
        return cls(
            trial_id=str(data["trial_id"]),
            number=_whole(data["number"], "number"),
            name=str(data["name"]),
            state=TrialState(data["state"]),
            params={name: decode_tuples(value) for name, value in data["params"].items()},
            objective=_objective(data.get("objective")),
            started=_from_iso(data.get("started")),
            finished=_from_iso(data.get("finished")),
            intermediates=[_evaluation(ev) for ev in data.get("intermediates") or []],
            last_step=None if data.get("last_step") is None else _whole(data["last_step"], "last_step"),
            checkpoint=data.get("checkpoint"),
            node=data.get("node"),
            error=data.get("error"),
            extra=dict(data.get("extra") or {}),
            cost={
                k: float(v) if v is not None else float("nan") for k, v in (data.get("cost") or {}).items()
            },
        )


class TrialReporter:
    """How a running trial talks to its engine: one per trial, called by the reporting callback on rank 0.

    `start` is called once with the trial's record before training (engines that ship the record back keep it);
    `report` at every evaluation. The base reports nowhere and never prunes (engines without intermediate
    results, and ranks other than 0, use it as it is).
    """

    def start(self, record: TrialRecord) -> None:
        """The trial's record exists (RUNNING); the callback appends each evaluation to it before `report`."""

    def report(self, objective: Any, step: int, metrics: Mapping[str, float], checkpoint: str | None) -> bool:
        """Tell the engine the objective of an evaluation; return True when the trial should be pruned."""
        return False


#: The reporter of engines without intermediate results.
NullReporter = TrialReporter


class Trial(Mapping[str, Any]):
    """One trial, seen the same way on every backend by `run_trial`, ``model_init(trial)`` and ``hp_name(trial)``.

    A read-only mapping of the trial's parameters. Attributes it does not have are looked up on the engine's own
    trial object (``native``), so ``trial.suggest_int(...)`` works inside ``model_init`` on engines that have it;
    parameters suggested that way join the mapping (and the record).
    """

    def __init__(
        self,
        id: str,
        number: int,
        params: Mapping[str, Any],
        backend: str,
        native: Any = None,
        name: str | None = None,
    ) -> None:
        self.id = str(id)
        self.number = int(number)
        self._params = dict(params)
        self.backend = backend
        self.native = native
        self.name = name if name is not None else f"run-{self.id}"
        # Set by the multi-process helper (`hpsearch._dist`) when several processes train one trial.
        self._suggest_hook: Any = None
        # While `unread_while` runs (model_init, in run_trial): the parameter names read so far.
        self._read: set[str] | None = None

    @property
    def params(self) -> dict[str, Any]:
        """A copy of the parameters as a dict (while `unread_while` runs, one that notes the names read from it)."""
        if self._read is not None:
            return _ReadNotingDict(self._params, self._read)
        return dict(self._params)

    def __getitem__(self, name: str) -> Any:
        if self._read is not None:
            self._read.add(name)
        try:
            return self._params[name]
        except KeyError:
            raise KeyError(
                f"Trial {self.name} has no parameter {name!r}; it has {sorted(self._params)}."
            ) from None

    def __iter__(self) -> Iterator[str]:
        if self._read is not None:
            self._read.update(self._params)
        return iter(self._params)

    def unread_while(self, call: Callable[[], Any]) -> tuple[Any, list[str]]:
        """``call()``'s result and the parameters it did not read (by key or iteration, of the trial or of its
        ``params``: ``trial.params.get("hidden")`` reads ``hidden`` only, ``Model(**trial.params)`` reads all)."""
        before, self._read = list(self._params), set()
        try:
            return call(), [name for name in before if name not in self._read]
        finally:
            self._read = None

    def __len__(self) -> int:
        return len(self._params)

    def __contains__(self, name: object) -> bool:
        return name in self._params

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_") or attr in ("native", "id", "number", "backend", "name"):
            raise AttributeError(attr)
        native = self.__dict__.get("native")
        hook = self.__dict__.get("_suggest_hook")
        if attr.startswith("suggest_") and (native is not None or hook is not None):
            return self._recording_suggest(attr)
        if native is None and attr.startswith("suggest_"):
            raise AttributeError(
                f"Trial has no attribute {attr!r}: there is no native {self.backend} trial to ask, so model_init "
                f"cannot call trial.{attr}(...) on backend={self.backend!r}; search the parameter in hp_space and read "
                "it as trial[name] in model_init, or run with the backend whose trial API it is."
            )
        if native is None:
            raise AttributeError(
                f"Trial has no attribute {attr!r} (and no native {self.backend} trial to ask)."
            )
        return getattr(native, attr)

    def _recording_suggest(self, attr: str) -> Any:
        def suggest(name: str, *args: Any, **kwargs: Any) -> Any:
            hook = self._suggest_hook
            if hook is not None:
                value = hook(self, attr, name, args, kwargs)
            else:
                value = getattr(self.native, attr)(name, *args, **kwargs)
            self._params[name] = value
            return value

        return suggest

    def __repr__(self) -> str:
        return (
            f"Trial(id={self.id!r}, number={self.number}, backend={self.backend!r}, params={self._params!r})"
        )


class _ReadNotingDict(dict):  # type: ignore[type-arg]
    """`Trial.params` while model_init runs: a plain copy of the parameters that adds to ``read`` each name looked up
    (``[name]``, ``get``, ``pop``, ``setdefault``) and every name when it is iterated or copied whole (``**params``,
    ``dict(params)``, ``items()``), so a misspelt parameter that model_init never asks for is found."""

    def __init__(self, params: Mapping[str, Any], read: set[str]) -> None:
        super().__init__(params)
        self._read = read

    def _all(self) -> None:
        self._read.update(super().keys())

    def __getitem__(self, name: Any) -> Any:
        self._read.add(name)
        return super().__getitem__(name)

    def get(self, name: Any, default: Any = None) -> Any:
        self._read.add(name)
        return super().get(name, default)

    def pop(self, name: Any, *default: Any) -> Any:
        self._read.add(name)
        return super().pop(name, *default)

    def setdefault(self, name: Any, default: Any = None) -> Any:
        self._read.add(name)
        return super().setdefault(name, default)

    def __iter__(self) -> Iterator[Any]:
        self._all()
        return super().__iter__()

    def keys(self) -> Any:
        self._all()
        return super().keys()

    def values(self) -> Any:
        self._all()
        return super().values()

    def items(self) -> Any:
        self._all()
        return super().items()

    def copy(self) -> dict[str, Any]:
        self._all()
        return dict(super().items())

    def __reduce__(self) -> Any:  # pickled or deep-copied: a plain dict of every value
        self._all()
        return (dict, (dict(super().items()),))


# ---------------------------------------------------------------------------------------------- JSON helpers
def encode_tuples(value: Any) -> Any:
    """Tuples as ``{"__tuple__": [...]}``: JSON would turn them into lists, and a categorical choice such as
    ``(0.9, 0.999)`` must come back as the tuple the model code was given."""
    if isinstance(value, tuple):
        return {"__tuple__": [encode_tuples(v) for v in value]}
    if isinstance(value, list):
        return [encode_tuples(v) for v in value]
    if isinstance(value, dict):
        return {k: encode_tuples(v) for k, v in value.items()}
    return value


def decode_tuples(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__tuple__"} and isinstance(value["__tuple__"], list):
            return tuple(decode_tuples(v) for v in value["__tuple__"])
        return {k: decode_tuples(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode_tuples(v) for v in value]
    return value


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _whole(value: Any, what: str) -> int:
    """A record's count or step: an int that a 64-bit table column holds (a file read back may say anything)."""
    if isinstance(value, bool) or not isinstance(value, int) or not -(2**63) <= value < 2**63:
        raise ValueError(f"{what} must be an integer, got {value!r}")
    return value


def _real(value: Any, what: str) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} must be a number, got {value!r}")
    return value


def _objective(value: Any) -> Any:
    """None, a number, or a list of numbers (one per direction; None where unknown), as `to_dict` writes them."""
    if isinstance(value, list):
        return [None if v is None else _real(v, "objective") for v in value]
    return None if value is None else _real(value, "objective")


def _evaluation(ev: Mapping[str, Any]) -> Evaluation:
    """One evaluation `to_dict` wrote. A search.json of 10,000 trials holds about 100,000: the usual types (an int
    step, float epoch and objective) are taken as they are, anything else goes through the checks."""
    step, epoch, objective = ev["step"], ev.get("epoch"), ev.get("objective")
    return Evaluation(
        step=step if type(step) is int and -(2**63) <= step < 2**63 else _whole(step, "step"),
        epoch=epoch if epoch is None or type(epoch) is float else _real(epoch, "epoch"),
        objective=objective if objective is None or type(objective) is float else _objective(objective),
        metrics=dict(ev.get("metrics") or {}),
    )


def _from_iso(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)
