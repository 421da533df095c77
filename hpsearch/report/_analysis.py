"""Numbers the reports show, computed from a `SearchResult` with numpy/pandas only (optuna optional).

Kept apart from the plotting so that each can be tested without the other and without plotly.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal, cast

from hpsearch.trial import TrialRecord, TrialState

if TYPE_CHECKING:
    from hpsearch.results import SearchResult

__all__ = [
    "Importances",
    "ParamAxis",
    "SavedTime",
    "TargetReach",
    "best_so_far",
    "compute_importances",
    "quick_importances",
    "elapsed_best_so_far",
    "last_step",
    "order_best_first",
    "param_axis",
    "saved_time",
    "search_span",
    "time_to_target",
    "total_training_time",
]

STATE_COLORS = {
    "COMPLETE": "#2563eb",
    "PRUNED": "#f59e0b",
    "FAIL": "#dc2626",
    "RUNNING": "#6b7280",
}
_STATE_RANK = {"COMPLETE": 0, "PRUNED": 1, "RUNNING": 2, "FAIL": 3}


def _utc(value: datetime) -> datetime:
    # Naive datetimes mean local time (datetime.now()), as in SearchResult.trials_dataframe.
    return value.astimezone(timezone.utc)


def last_step(record: TrialRecord) -> int | None:
    """The last training step of a trial: its ``last_step``, else its last evaluation's step."""
    if record.last_step is not None:
        return record.last_step
    if record.intermediates:
        return max(ev.step for ev in record.intermediates)
    return None


def is_better(a: float, b: float, direction: str) -> bool:
    return a < b if direction == "minimize" else a > b


def best_so_far(values: list[float], direction: str) -> list[float]:
    """Running best of ``values`` (NaN until the first finite value; NaNs never improve it)."""
    out, best = [], math.nan
    for v in values:
        if not math.isnan(v) and (math.isnan(best) or is_better(v, best, direction)):
            best = v
        out.append(best)
    return out


def order_best_first(result: SearchResult) -> list[TrialRecord]:
    """Complete trials first (best first; the Pareto front first when multi-objective), then pruned,
    running, failed; each group by objective then number."""
    k = len(result.directions)
    signs = [1.0 if d == "minimize" else -1.0 for d in result.directions]
    front = {id(r) for r in result.best_trials}

    def key(record: TrialRecord) -> tuple[Any, ...]:
        values = result.objective_values(record) or [math.nan] * k
        scored = [math.inf if math.isnan(v) else s * v for s, v in zip(signs, values)]
        return (_STATE_RANK[TrialState(record.state).value], id(record) not in front, scored, record.number)

    return sorted(result.records, key=key)


def total_training_time(result: SearchResult) -> float:
    """Sum of the trials' durations (compute time, which exceeds wall time when trials run in parallel)."""
    return float(sum(r.duration_s for r in result.records if r.duration_s is not None))


def search_span(result: SearchResult) -> tuple[datetime | None, datetime | None]:
    """Start and end of the search: its own timestamps, else the earliest/latest trial timestamps."""
    starts = [_utc(r.started) for r in result.records if r.started is not None]
    ends = [_utc(r.finished) for r in result.records if r.finished is not None]
    start = _utc(result.started) if result.started is not None else (min(starts) if starts else None)
    end = _utc(result.finished) if result.finished is not None else (max(ends) if ends else None)
    return start, end


@dataclass
class SavedTime:
    """Estimate of the training time pruning saved (see `saved_time`)."""

    seconds: float | None
    median_steps: float | None
    counted: int
    skipped: int


def saved_time(result: SearchResult) -> SavedTime:
    """For each PRUNED trial: (median last step of COMPLETE trials - its last step) x its seconds per step.

    The idea: had it not been pruned, a trial would have run about as long as a typical complete one, at
    its own pace. Pruned trials without a duration or a positive step count are skipped (and counted).
    """
    complete_steps = [
        s for r in result.records if r.state == TrialState.COMPLETE and (s := last_step(r)) is not None
    ]
    pruned = [r for r in result.records if r.state == TrialState.PRUNED]
    if not complete_steps:
        return SavedTime(None, None, 0, len(pruned))
    median = float(statistics.median(complete_steps))
    total, counted = 0.0, 0
    for record in pruned:
        steps, duration = last_step(record), record.duration_s
        if steps is None or steps <= 0 or duration is None:
            continue
        total += max(0.0, median - steps) * (duration / steps)
        counted += 1
    return SavedTime(total if counted else None, median, counted, len(pruned) - counted)


# ---------------------------------------------------------------------- parameters as axes


@dataclass
class ParamAxis:
    """A parameter mapped onto a numeric axis: numbers as they are (log10 when log-scaled), categories as
    integer codes with their labels, inactive (missing) values on a tick of their own."""

    name: str
    kind: str  # "numeric" or "categorical"
    log: bool
    positions: list[float]  # one per trial given to param_axis
    tickvals: list[float] = field(default_factory=list)
    ticktext: list[str] = field(default_factory=list)


INACTIVE = "(inactive)"


def _space_spec(result: SearchResult, name: str) -> dict[str, Any]:
    space = result.space
    if isinstance(space, dict):
        spec = space.get(name)
        if spec is None and isinstance(space.get("params"), dict):
            spec = space["params"].get(name)
        if isinstance(spec, dict):
            return spec
    # A native space (e.g. Optuna's hp_space(trial)) is not recorded for the search; each of its trials keeps the
    # distributions it was drawn from in extra["space"].
    for record in result.records:
        drawn = record.extra.get("space")
        if isinstance(drawn, dict) and isinstance(drawn.get(name), dict):
            return drawn[name]
    return {}


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def param_kind(result: SearchResult, name: str, values: list[Any]) -> tuple[str, bool]:
    """("numeric"|"categorical", log) for a parameter, from the space when known, else from its values.

    ``values`` are the values of the trials that have the parameter: a None among them is a choice (e.g.
    ``suggest_categorical("wd", [None, 0.01])`` in a native space), which makes the parameter categorical.
    """
    spec = _space_spec(result, name)
    present = [v for v in values if v is not None]
    if spec.get("type") == "categorical" or "choices" in spec:
        return "categorical", False
    if not present or len(present) < len(values) or not all(_is_number(v) for v in present):
        return "categorical", False
    if "log" in spec:
        return "numeric", bool(spec["log"]) and min(present) > 0
    # Without a space, a positive range spanning two decades or more (learning rates, weight decays) is
    # far more readable on a log axis.
    low, high = min(present), max(present)
    return "numeric", low > 0 and high / low >= 100


def category_label(value: Any) -> str:
    from hpsearch.report._format import fmt_value

    return fmt_value(value)


def param_axis(result: SearchResult, name: str, records: list[TrialRecord]) -> ParamAxis:
    kind, log = param_kind(result, name, [r.params[name] for r in records if name in r.params])
    if kind == "categorical":
        # A trial without the parameter (a conditional one, inactive) is INACTIVE; a None it has is a choice.
        all_labels = [category_label(r.params[name]) if name in r.params else INACTIVE for r in records]
        labels: list[str] = []
        for label in all_labels:
            if label not in labels:
                labels.append(label)
        ordered = sorted(label for label in labels if label != INACTIVE)
        if INACTIVE in labels:
            ordered.append(INACTIVE)
        code = {label: i for i, label in enumerate(ordered)}
        positions = [float(code[label]) for label in all_labels]
        return ParamAxis(name, kind, False, positions, [float(i) for i in range(len(ordered))], ordered)
    values = [r.params.get(name) for r in records]  # numeric: None only where the trial lacks the parameter
    present = [v for v in values if v is not None]

    def transform(v: float) -> float:
        return math.log10(v) if log else float(v)

    numbers = [transform(v) for v in present]
    low, high = (min(numbers), max(numbers)) if numbers else (0.0, 1.0)
    span = high - low if high > low else 1.0
    ticks = [low + span * i / 4 for i in range(5)] if high > low else [low]
    ticktext = [f"{(10**t if log else t):.3g}" for t in ticks]
    # Inactive values sit a little below the range, on a labelled tick of their own.
    sentinel = low - 0.15 * span
    positions = [sentinel if v is None else transform(v) for v in values]
    if len(present) < len(values):
        ticks = [sentinel, *ticks]
        ticktext = [INACTIVE, *ticktext]
    return ParamAxis(name, kind, log, positions, ticks, ticktext)


# ---------------------------------------------------------------------- importance


@dataclass
class Importances:
    """Parameter importances, one mapping per objective (highest first), and how they were computed."""

    method: str  # a key of IMPORTANCE_METHODS
    per_objective: list[dict[str, float]]
    note: str = ""


#: Above this many scored trials fANOVA (a random forest: minutes and hundreds of MB at 10,000 trials) gives way to
#: PED-ANOVA (`hpsearch.report._ped_anova`: milliseconds at that size).
FANOVA_MAX_TRIALS = 1000

#: What each method is called in the report and the dashboard.
IMPORTANCE_METHODS = {"fanova": "fANOVA", "ped-anova": "PED-ANOVA", "spearman": "|Spearman rho|"}


def compute_importances(result: SearchResult) -> Importances | str:
    """Importances by optuna's fANOVA (seed 0) when optuna is importable, else |Spearman rho|; above
    `FANOVA_MAX_TRIALS` scored trials by PED-ANOVA (``hpsearch.report._ped_anova``: numpy only, milliseconds).

    Returns:
        The importances, or a sentence saying why there are none (fewer than 2 complete trials, no
        parameters).
    """
    scored = result.scored_trials()
    problem = _importance_problem(result, scored)
    if problem is not None:
        return problem
    if len(scored) > FANOVA_MAX_TRIALS:
        return _ped_anova(result, scored)  # numpy only: no optuna import (a second) either
    names = sorted({n for r, _ in scored for n in r.params})
    note = ""
    try:
        import optuna  # noqa: F401
    except ImportError:
        note = "optuna is not installed, so "
    else:
        try:
            return _fanova(result, scored)
        except Exception as exc:  # fANOVA has its own limits (e.g. one distinct value): fall back, say why.
            note = f"fANOVA failed ({type(exc).__name__}: {exc}), so "
    return _spearman(result, scored, names, note)


def quick_importances(result: SearchResult, note: str = "") -> Importances | str:
    """|Spearman rho| importances (milliseconds where fANOVA takes seconds), under the same conditions as
    `compute_importances`; ``note`` starts the explanation (e.g. "fANOVA is still being computed, so ")."""
    scored = result.scored_trials()
    problem = _importance_problem(result, scored)
    if problem is not None:
        return problem
    return _spearman(result, scored, sorted({n for r, _ in scored for n in r.params}), note)


def _importance_problem(result: SearchResult, scored: list[tuple[TrialRecord, list[float]]]) -> str | None:
    """Why there can be no importances (a sentence), or None."""
    if len(scored) < 2:
        return f"Parameter importance needs at least 2 complete trials; this search has {len(scored)}."
    if not any(r.params for r, _ in scored):
        return "Parameter importance needs parameters; the trials have none."
    if all(len({v[i] for _, v in scored}) < 2 for i in range(len(result.directions))):
        # Nothing to explain (fANOVA would answer with equal shares, which reads as a finding).
        return "Parameter importance needs an objective that varies; every complete trial scored the same."
    return None


def _ped_anova(result: SearchResult, scored: list[tuple[TrialRecord, list[float]]]) -> Importances:
    from hpsearch.report._ped_anova import TOP_QUANTILE, ped_anova

    names = sorted({n for r, _ in scored for n in r.params})
    common = [n for n in names if all(n in r.params for r, _ in scored)]
    columns = {}
    for name in common:
        values = [r.params[name] for r, _ in scored]
        kind, log = param_kind(result, name, values)
        columns[name] = (
            kind == "numeric",
            log,
            values if kind == "numeric" else [category_label(v) for v in values],
        )
    per_objective, constant = ped_anova(result.directions, [v for _, v in scored], columns)
    note = (
        f"{len(scored):,} complete trials, more than {FANOVA_MAX_TRIALS:,} (where fANOVA takes minutes): "
        f"PED-ANOVA, how differently each parameter is distributed in the best {TOP_QUANTILE:.0%} of them."
    )
    left_out = sorted(set(names) - set(common)) + constant
    if left_out:
        note += (
            " Left out (absent from some complete trials, or a single value): " + ", ".join(left_out) + "."
        )
    return Importances("ped-anova", per_objective, note)


def _fanova(result: SearchResult, scored: list[tuple[TrialRecord, list[float]]]) -> Importances:
    import optuna
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    def choice(v: Any) -> Any:
        return v if v is None or isinstance(v, (bool, int, float, str)) else repr(v)

    distributions: dict[str, Any] = {}
    for name in sorted({n for r, _ in scored for n in r.params}):
        values = [r.params[name] for r, _ in scored if name in r.params]
        kind, log = param_kind(result, name, values)
        if kind == "numeric" and all(isinstance(v, int) for v in values):
            distributions[name] = IntDistribution(
                int(min(values)), int(max(values)), log=log and min(values) >= 1
            )
        elif kind == "numeric":
            distributions[name] = FloatDistribution(float(min(values)), float(max(values)), log=log)
        else:
            unique: list[Any] = []
            for v in map(choice, values):
                if v not in unique:
                    unique.append(v)
            distributions[name] = CategoricalDistribution(unique)

    # fANOVA explains the parameters every scored trial has (a conditional one is named as left out by the caller).
    common = [name for name in distributions if all(name in r.params for r, _ in scored)]
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        # SearchResult validates each direction as "minimize" or "maximize"; only the static type is narrowed.
        directions = cast('list[Literal["minimize", "maximize"]]', result.directions)
        study = optuna.create_study(directions=directions)
        for record, values in scored:
            params = {
                n: (float(v) if isinstance(distributions[n], FloatDistribution) else choice(v))
                for n, v in record.params.items()
            }
            study.add_trial(
                optuna.trial.create_trial(
                    params=params,
                    distributions={n: distributions[n] for n in params},
                    **({"values": values} if result.is_multi_objective else {"value": values[0]}),
                )
            )
        per_objective = []
        for i in range(len(result.directions)):
            target: Callable[[Any], float] | None = None
            if result.is_multi_objective:
                target = lambda t, i=i: t.values[i]  # noqa: E731
            importances = optuna.importance.get_param_importances(
                study,
                evaluator=optuna.importance.FanovaImportanceEvaluator(seed=0),
                target=target,
                params=common,
                normalize=True,
            )
            per_objective.append({name: float(value) for name, value in importances.items()})
    finally:
        optuna.logging.set_verbosity(verbosity)
    missing = sorted(set(distributions) - set().union(*per_objective))
    note = ""
    if missing:
        note = (
            "Parameters absent from some complete trials (conditional) or with a single value are left out: "
            + ", ".join(missing)
            + "."
        )
    return Importances("fanova", per_objective, note)


def _rank(values: list[float]) -> list[float]:
    import pandas as pd

    return pd.Series(values, dtype="float64").rank(method="average").tolist()


def _spearman(
    result: SearchResult, scored: list[tuple[TrialRecord, list[float]]], names: list[str], note: str
) -> Importances:
    import numpy as np

    per_objective: list[dict[str, float]] = []
    skipped: set[str] = set()
    for i in range(len(result.directions)):
        scores: dict[str, float] = {}
        for name in names:
            rows = [(r.params[name], v[i]) for r, v in scored if name in r.params]
            xs, ys = [x for x, _ in rows], [y for _, y in rows]
            kind, _ = param_kind(result, name, xs)
            if kind == "categorical":
                # Categories have no order; ranking them by their mean objective measures how much the
                # objective depends on the choice (it flatters categorical parameters a little).
                labels = [category_label(x) for x in xs]
                means = {
                    lab: float(np.mean([y for l2, y in zip(labels, ys) if l2 == lab])) for lab in set(labels)
                }
                order = {lab: j for j, lab in enumerate(sorted(means, key=means.__getitem__))}
                numeric = [float(order[lab]) for lab in labels]
            else:
                numeric = [float(x) for x in xs]
            if len(rows) < 2 or len(set(numeric)) < 2 or len(set(ys)) < 2:
                skipped.add(name)
                continue
            rho = float(np.corrcoef(_rank(numeric), _rank(ys))[0, 1])
            if math.isnan(rho):
                skipped.add(name)
                continue
            scores[name] = abs(rho)
        per_objective.append(dict(sorted(scores.items(), key=lambda kv: -kv[1])))
    text = (
        note
        + "importance is the absolute Spearman rank correlation between each parameter and the objective."
    )
    if skipped:
        text += (
            " Left out (fewer than 2 distinct values or a constant objective): "
            + ", ".join(sorted(skipped))
            + "."
        )
    return Importances("spearman", per_objective, text[0].upper() + text[1:])


# ---------------------------------------------------------------------- comparison


def elapsed_best_so_far(result: SearchResult) -> tuple[list[float], list[float]]:
    """(seconds since the search started, best objective so far) at each complete trial's end.

    Ordered by finishing time, since trials that run in parallel finish out of number order. Trials
    without timestamps are left out.
    """
    start, _ = search_span(result)
    if start is None:
        return [], []
    direction = result.directions[0]
    points = sorted(
        ((_utc(r.finished) - start).total_seconds(), v[0])
        for r, v in result.scored_trials()
        if r.finished is not None
    )
    xs = [x for x, _ in points]
    return xs, best_so_far([y for _, y in points], direction)


@dataclass
class TargetReach:
    """When a search first reached a target: trials finished by then and seconds since its start."""

    trials: int | None
    seconds: float | None
    record: TrialRecord | None


def time_to_target(result: SearchResult, target: float) -> TargetReach:
    """The first COMPLETE trial whose objective is at least as good as ``target``, in finishing order."""
    direction = result.directions[0]
    start, _ = search_span(result)
    far = datetime.max.replace(tzinfo=timezone.utc)
    ordered = sorted(
        result.records, key=lambda r: (_utc(r.finished) if r.finished is not None else far, r.number)
    )
    for position, record in enumerate(ordered, start=1):
        if record.state != TrialState.COMPLETE:
            continue
        values = result.objective_values(record)
        if values is None or math.isnan(values[0]):
            continue
        if values[0] == target or is_better(values[0], target, direction):
            seconds = None
            if start is not None and record.finished is not None:
                seconds = (_utc(record.finished) - start).total_seconds()
            return TargetReach(position, seconds, record)
    return TargetReach(None, None, None)
