"""Several searches side by side: best-so-far curves, best results, time to reach a target."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from hpsearch.report._analysis import (
    best_so_far,
    elapsed_best_so_far,
    is_better,
    search_span,
    time_to_target,
    total_training_time,
)
from hpsearch.report._figures import objective_names
from hpsearch.report._format import fmt_duration, fmt_number, fmt_params
from hpsearch.report._page import esc, note, page, section, sortable_table, write_page
from hpsearch.report._plotly import Part, Plot, bundle_script, plot_text, render_parts, require_plotly
from hpsearch.trial import TrialState
from hpsearch.warmstart import own_counts

if TYPE_CHECKING:
    from hpsearch.results import SearchResult
    from hpsearch.trial import TrialRecord

__all__ = ["compare_html", "compare_sections", "write_compare_html"]

_LAYOUT = {"template": "plotly_white", "height": 420, "margin": {"l": 60, "r": 20, "t": 30, "b": 50}}


def _check(results: Sequence[SearchResult], labels: Sequence[str] | None) -> list[str]:
    results = list(results)
    if not results:
        raise ValueError("compare_html needs at least one SearchResult but got an empty list.")
    multi = [i for i, r in enumerate(results) if r.is_multi_objective]
    if multi:
        raise ValueError(
            f"compare_html compares single-objective searches but results {multi} have several directions; "
            "compare their Pareto fronts in their own reports (render_html) instead."
        )
    directions = sorted({r.directions[0] for r in results})
    if len(directions) > 1:
        raise ValueError(
            f"compare_html needs searches optimized in the same direction but got {directions}; compare "
            "searches of the same objective."
        )
    if labels is None:
        labels = [f"{i + 1}. {r.backend}" for i, r in enumerate(results)]
    labels = [str(label) for label in labels]
    if len(labels) != len(results):
        raise ValueError(
            f"labels must give one label per result: got {len(labels)} labels for {len(results)} results."
        )
    return labels


def compare_html(
    results: Sequence[SearchResult], labels: Sequence[str] | None = None, target: float | None = None
) -> str:
    """One HTML page comparing searches of the same objective.

    Args:
        results: the searches (single-objective, all in the same direction).
        labels: one name per search (default "1. optuna", "2. ray", ...).
        target: the objective value for "time to reach target"; default: the best objective of the worst
            search, which every search with a complete trial reaches.
    """
    sections = compare_sections(results, labels, target)
    body = "".join(section(anchor, title, render_parts(parts)) for anchor, title, parts in sections)
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return page(
        title=f"hpsearch comparison: {len(results)} searches",
        subtitle=f"{results[0].objective} · {results[0].directions[0]} · generated {generated}",
        nav=[("curves", "Best so far"), ("best", "Best results"), ("target", "Time to target")],
        body=body,
        bundle=bundle_script(),
    )


def compare_sections(
    results: Sequence[SearchResult], labels: Sequence[str] | None = None, target: float | None = None
) -> list[tuple[str, str, list[Part]]]:
    """The comparison's sections (anchor, title, parts), figures as plotly objects; arguments as `compare_html`."""
    go = require_plotly()
    names = _check(results, labels)
    if target is not None and (
        isinstance(target, bool) or not isinstance(target, (int, float)) or not math.isfinite(target)
    ):
        raise ValueError(f"target must be a finite number (an objective value) or None, got {target!r}.")
    results = list(results)
    bests = [r.best_trial for r in results]
    best_values = [
        None if b is None else (r.objective_values(b) or [math.nan])[0] for r, b in zip(results, bests)
    ]
    return [
        ("curves", "Best so far", _curves(go, names, results)),
        ("best", "Best results", [_best_table(names, results, bests, best_values)]),
        ("target", "Time to reach target", [_reach(names, results, best_values, target)]),
    ]


def _curves(go: Any, names: Sequence[str], results: Sequence[SearchResult]) -> list[Part]:
    """The best-so-far figures: by trial number and by time since each search started."""
    direction = results[0].directions[0]
    by_number = go.Figure()
    by_time = go.Figure()
    for label, result in zip(names, results):
        complete = sorted((r.number, v[0]) for r, v in result.scored_trials())
        if complete:
            by_number.add_trace(
                _step_line(
                    go,
                    [n for n, _ in complete],
                    best_so_far([v for _, v in complete], direction),
                    label,
                    "trial %{x}",
                )
            )
        xs, ys = elapsed_best_so_far(result)
        if xs:
            by_time.add_trace(_step_line(go, xs, ys, label, "%{x:.1f}s"))
    best_title = f"best {plot_text(objective_names(results[0])[0])}"
    by_number.update_layout(**_LAYOUT, xaxis_title="trial number", yaxis_title=best_title)
    by_time.update_layout(**_LAYOUT, xaxis_title="seconds since the search started", yaxis_title=best_title)
    curves = []
    if by_number.data:
        curves.append(
            Plot("hp-plot-compare-trials", by_number, "Best complete trial so far, by trial number.")
        )
    if by_time.data:
        curves.append(
            Plot(
                "hp-plot-compare-time",
                by_time,
                "Best complete trial so far, by time since each search started (trials in finishing order).",
            )
        )
    return [curves] if curves else [note("No complete trial in any search.")]


def _step_line(go: Any, xs: Sequence[float], ys: Sequence[float], label: str, x_hover: str) -> Any:
    """One search's best-so-far trace: a step line, hovering the x value and the best objective."""
    return go.Scatter(
        x=list(xs),
        y=list(ys),
        mode="lines+markers",
        line={"shape": "hv"},
        name=plot_text(label),
        hovertemplate=f"{x_hover}<br>best %{{y:.6g}}<extra>" + plot_text(label) + "</extra>",
    )


_BEST_COLUMNS = [
    "search",
    "backend",
    "best objective",
    "best trial",
    "params",
    "trials",
    "complete",
    "pruned",
    "failed",
    "warm start",
    "wall time",
    "training time",
]


def _best_table(
    names: Sequence[str],
    results: Sequence[SearchResult],
    bests: Sequence[TrialRecord | None],
    best_values: Sequence[float | None],
) -> str:
    """One row per search: its best trial, its trial counts and its times; the best search highlighted."""
    rows = []
    for label, result, best, value in zip(names, results, bests, best_values):
        start, end = search_span(result)
        wall = (end - start).total_seconds() if start is not None and end is not None else None
        counts, warm = own_counts(result)
        rows.append(
            [
                label,
                result.backend,
                value,
                None if best is None else best.name,
                None if best is None else fmt_params(best.params),
                sum(counts.values()),
                counts[TrialState.COMPLETE.value],
                counts[TrialState.PRUNED.value],
                counts[TrialState.FAIL.value],
                warm,
                fmt_duration(wall),
                fmt_duration(total_training_time(result)),
            ]
        )
    direction = results[0].directions[0]
    return sortable_table(
        _BEST_COLUMNS, rows, state_column=None, highlight=_best_rows(best_values, direction)
    )


def _reach(
    names: Sequence[str],
    results: Sequence[SearchResult],
    best_values: Sequence[float | None],
    target: float | None,
) -> str:
    """Time to reach the target (default: the best objective of the worst search) for each search."""
    direction = results[0].directions[0]
    finite = [v for v in best_values if v is not None and not math.isnan(v)]
    if target is None and finite:
        worst = finite[0]
        for v in finite[1:]:
            if is_better(worst, v, direction):
                worst = v
        target, origin = worst, "the best objective of the worst search"
    else:
        origin = "given"
    if target is None:
        return note("No search has a complete trial, so there is no target to reach.")
    reach_rows = []
    for label, result in zip(names, results):
        reach = time_to_target(result, target)
        reach_rows.append(
            [label, reach.trials, reach.seconds, None if reach.record is None else reach.record.name]
        )
    return (
        f"<p>Target: {esc(fmt_number(target))} ({esc(origin)}, {esc(direction)}). For each search, the "
        "trials finished and the seconds elapsed when a complete trial first reached it (— if never).</p>"
        + sortable_table(
            ["search", "trials", "seconds", "trial that reached it"], reach_rows, state_column=None
        )
    )


def _best_rows(values: Sequence[float | None], direction: str) -> list[int]:
    """The searches whose best objective is the best of all (ties: each of them)."""
    finite = [v for v in values if v is not None and not math.isnan(v)]
    if not finite:
        return []
    top = finite[0]
    for v in finite[1:]:
        if is_better(v, top, direction):
            top = v
    return [i for i, v in enumerate(values) if v == top]


def write_compare_html(
    results: Sequence[SearchResult],
    path: str | os.PathLike[str],
    labels: Sequence[str] | None = None,
    target: float | None = None,
) -> str:
    """Write `compare_html` to ``path`` (a folder: ``compare.html`` in it), atomically; return the path as a string."""
    return write_page(compare_html(results, labels=labels, target=target), path, "compare.html")
