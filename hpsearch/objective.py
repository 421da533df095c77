"""Turning evaluation metrics into the objective a backend optimizes."""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .errors import MissingMetric, SearchConfigError

__all__ = ["default_compute_objective", "objective_from_metrics", "resolve_compute_objective", "to_objective"]

logger = logging.getLogger(__name__)

_IGNORED_SUFFIXES = ("_runtime", "_per_second", "_compilation_time", "_time")
_warned_sum = threading.Event()


def _summable(metrics: Mapping[str, Any]) -> dict[str, float]:
    out = {}
    for key, value in metrics.items():
        if key in ("epoch", "eval_loss") or key.endswith(_IGNORED_SUFFIXES) or "_mem_" in key:
            continue
        if isinstance(value, bool) or (
            not isinstance(value, int | float) and not hasattr(value, "__float__")
        ):
            continue
        try:
            out[key] = float(value)
        except (
            TypeError,
            ValueError,
            OverflowError,
        ):  # an array of several values (a confusion matrix): no number
            continue
    return out


def default_compute_objective(metrics: Mapping[str, float]) -> float:
    """The evaluation loss when it is the only metric; otherwise the sum of the other metrics.

    Speed, runtime, memory and epoch entries are never counted. Summing several metrics is rarely what you
    want, so it is announced once: pass ``compute_objective="eval_accuracy"`` (or a callable) to choose.
    """
    others = _summable(metrics)
    if not others:
        if "eval_loss" not in metrics:
            # An evaluation returns the same kinds of metrics in every trial: no trial has one to optimize.
            raise SearchConfigError(
                f"No metric to optimize among {sorted(metrics)} (no eval_loss: the evaluation batches carry no labels, "
                "and no compute_metrics result); pass compute_objective (a metric name or a callable), or labels "
                "in the eval_dataset (label_names) or Trainer(compute_metrics=...).",
                about="compute_objective",
            )
        return float(metrics["eval_loss"])
    if len(others) > 1 and not _warned_sum.is_set():
        _warned_sum.set()
        logger.warning(
            "default_compute_objective sums %d metrics (%s); pass compute_objective to optimize one of them.",
            len(others),
            ", ".join(sorted(others)),
        )
    return sum(others.values())


class _Metric:
    """``compute_objective="<metric>"``: that metric (or ``eval_<metric>``). A class, not a closure: the settings
    are pickled for worker processes (``trial_workers``), and a nested function cannot be."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.__qualname__ = name

    def __call__(self, metrics: Mapping[str, float]) -> float:
        for key in (self.name, f"eval_{self.name}"):
            if key in metrics:
                return float(metrics[key])
        raise SearchConfigError(
            f"compute_objective={self.name!r} is not among the evaluation metrics {sorted(metrics)}; "
            "pass one of those names (or a callable).",
            about="compute_objective",
        )

    def __repr__(self) -> str:
        return f"compute_objective={self.name!r}"


def _metric_getter(name: str) -> Callable[[Mapping[str, float]], float]:
    return _Metric(name)


def resolve_compute_objective(compute_objective: Any) -> tuple[Callable[[Mapping[str, float]], Any], str]:
    """(function, description) for a callable, a metric name or None (the default)."""
    if compute_objective is None:
        return default_compute_objective, "default"
    if isinstance(compute_objective, str):
        if not compute_objective:
            raise SearchConfigError(
                "compute_objective='' is empty; pass a metric name such as 'eval_accuracy'.",
                about="compute_objective",
            )
        return _metric_getter(compute_objective), compute_objective
    if callable(compute_objective):
        name = getattr(compute_objective, "__qualname__", None) or type(compute_objective).__name__
        return compute_objective, name
    raise SearchConfigError(
        f"compute_objective must be a callable on the metrics dict, a metric name or None, got "
        f"{compute_objective!r}.",
        about="compute_objective",
    )


def objective_from_metrics(
    compute_objective: Callable[[dict[str, Any]], Any], metrics: Mapping[str, Any], n_objectives: int
) -> float | list[float]:
    """``compute_objective`` on one evaluation's metrics, its value checked (`to_objective`). A `KeyError` for a name
    the metrics lack (a misspelt metric, or one no ``compute_metrics`` returns) fails the trial naming the metrics
    there are: the function may read other mappings too, so the search goes on."""
    metrics = dict(metrics)
    try:
        value = compute_objective(metrics)
    except KeyError as error:
        missing = error.args[0] if len(error.args) == 1 else None
        if not isinstance(missing, str) or missing in metrics:
            raise
        raise MissingMetric(
            f"compute_objective raised KeyError({missing!r}), a name that is not among this evaluation's metrics "
            f"{sorted(metrics)}; read one of those, or have compute_metrics (Trainer(compute_metrics=...)) return "
            f"{missing!r}."
        ) from error
    return to_objective(value, n_objectives)


def to_objective(value: Any, n_objectives: int) -> float | list[float]:
    """Check and normalise what compute_objective returned: a finite float, or one per direction."""
    if getattr(value, "ndim", 0) >= 1 and callable(getattr(value, "tolist", None)):
        value = value.tolist()  # a numpy array or a tensor of values: its numbers, as a list
    if n_objectives == 1:
        if isinstance(value, Sequence) and not isinstance(value, str | bytes) and len(value) == 1:
            value = value[0]
        elif isinstance(value, Sequence) and not isinstance(value, str | bytes):
            raise SearchConfigError(
                f"compute_objective returned {len(value)} values {value!r}, but direction has 1 entry: return one "
                f"number, or pass direction with one entry per value (e.g. {['minimize'] * len(value)}).",
                about="direction",
            )
        number = _as_float(value)
        if not math.isfinite(number):
            raise ValueError(f"the objective is {number} (not finite)")
        return number
    if not isinstance(value, Sequence) or isinstance(value, str | bytes) or len(value) != n_objectives:
        # Whatever the trial: the directions and the function disagree on the number of objectives, so the search
        # stops (a SearchConfigError) rather than train every trial to this point.
        raise SearchConfigError(
            f"compute_objective returned {value!r}, but direction has {n_objectives} entries: return a "
            f"sequence of {n_objectives} numbers, or pass one direction per value it returns.",
            about="direction",
        )
    numbers = [_as_float(v) for v in value]
    if not all(math.isfinite(v) for v in numbers):
        raise ValueError(f"the objective is {numbers} (not finite)")
    return numbers


def _as_float(value: Any) -> float:
    if isinstance(
        value, str | bytes | bool
    ):  # float("0.5") and float(True) work, but they are no measurement
        raise ValueError(
            f"compute_objective returned {value!r} ({type(value).__name__}), which is not a number"
        )
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"compute_objective returned {value!r}, which is not a number") from None
    except OverflowError:  # an int too large for a float
        raise ValueError(f"compute_objective returned {value!r}, which is too large for a float") from None
