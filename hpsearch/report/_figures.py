"""The plotly figures of a single search's report. Each builder returns None when it has nothing to draw.

Every string handed to plotly (trace names, hover text, tick labels, titles, dimension labels) goes through
`plot_text` first: plotly renders a subset of HTML in text, and escaped entities are shown as the characters.
"""

from __future__ import annotations

import math
import weakref
from typing import TYPE_CHECKING, Any

from hpsearch.report._analysis import (
    IMPORTANCE_METHODS,
    STATE_COLORS,
    Importances,
    best_so_far,
    category_label,
    param_axis,
    param_kind,
)
from hpsearch.report._plotly import light_figure, plot_text, require_plotly
from hpsearch.trial import TrialRecord, TrialState
from hpsearch.warmstart import is_warm

if TYPE_CHECKING:
    from hpsearch.results import SearchResult

__all__ = [
    "history_figure",
    "importance_figure",
    "leaders_figure",
    "learning_curves_figure",
    "parallel_figure",
    "pareto_figure",
    "slice_figure",
]

_LAYOUT = {"template": "plotly_white", "height": 420, "margin": {"l": 60, "r": 20, "t": 40, "b": 50}}
_DASH = {"COMPLETE": "solid", "PRUNED": "dash", "FAIL": "dot", "RUNNING": "dot"}
#: Earlier searches' trials told to this one (warm start): a colour of their own, never on the best-so-far line.
WARM_COLOR = "#9333ea"
WARM_NAME = "warm start (earlier search)"


def objective_names(result: SearchResult) -> list[str]:
    """What each objective is, for axes: the metric it equals at every recorded evaluation (the metric a
    ``compute_objective`` function or the default objective returns, e.g. ``eval_loss``), else the objective's own
    name (a metric name given as compute_objective, or ``objective (the function's name)``)."""
    k = len(result.directions)
    candidates: list[set[str] | None] = [None] * k
    for record in result.records:
        for i, found in enumerate(_record_matches(result, record, k)):
            seen = candidates[i]
            if found is not None:
                candidates[i] = set(found) if seen is None else seen & found
    names = []
    for i, found in enumerate(candidates):
        if k == 1 and found is not None and result.objective in found:
            names.append(result.objective)
        elif found is not None and len(found) == 1:
            names.append(next(iter(found)))
        elif k == 1:
            is_metric = result.objective.startswith("eval_") or any(
                result.objective in ev.metrics for r in result.records for ev in r.intermediates
            )
            names.append(result.objective if is_metric else f"objective ({result.objective})")
        else:
            names.append(f"objective {i}")
    return names


#: Per record, the metrics equal to each objective at every one of its evaluations (see `_record_matches`).
_MATCHES: dict[tuple[int, int, int], tuple[weakref.ref[TrialRecord], list[set[str] | None]]] = {}
_MATCHES_MAX = 200_000


def _record_matches(result: SearchResult, record: TrialRecord, k: int) -> list[set[str] | None]:
    """For each of ``k`` objectives, the metrics equal to it at every evaluation of ``record`` that has values (None:
    no such evaluation).

    Remembered per record: every figure of a report asks `objective_names`, which reads every evaluation (eight
    passes over 100,000 evaluations at 10,000 trials, and the dashboard asks again after each finished trial). The
    key holds the number of evaluations (a running trial's copy grows), and a weak reference to the record guards
    against a new record at a reused address.
    """
    key = (id(record), len(record.intermediates), k)
    hit = _MATCHES.get(key)
    if hit is not None and hit[0]() is record:
        return hit[1]
    found: list[set[str] | None] = [None] * k
    for ev in record.intermediates:
        values = result.objective_values(ev)
        if values is None:
            continue
        for i, value in enumerate(values):
            seen = found[i]
            # After the first evaluation only the metrics still equal everywhere are checked (a few, not all).
            names = ev.metrics if seen is None else [m for m in seen if m in ev.metrics]
            found[i] = {
                m
                for m in names
                if isinstance(v := ev.metrics[m], int | float)
                and not isinstance(v, bool)
                and math.isfinite(value)
                and math.isclose(v, value, rel_tol=1e-9, abs_tol=1e-12)
            }
    if len(_MATCHES) >= _MATCHES_MAX:
        _MATCHES.clear()
    _MATCHES[key] = (weakref.ref(record), found)
    return found


def _objective_titles(result: SearchResult) -> list[str]:
    return [f"{plot_text(name)} ({d})" for name, d in zip(objective_names(result), result.directions)]


def _figure(result: SearchResult, rows: int = 1, shared_x: bool = True) -> Any:
    go = require_plotly()
    if rows == 1:
        return go.Figure()
    from plotly.subplots import make_subplots

    return make_subplots(rows=rows, cols=1, shared_xaxes=shared_x, vertical_spacing=0.08)


def _add(fig: Any, trace: Any, row: int, rows: int) -> None:
    if rows == 1:
        fig.add_trace(trace)
    else:
        fig.add_trace(trace, row=row + 1, col=1)


def _finite(v: float | None) -> bool:
    return v is not None and not math.isnan(v)


#: Above this many points a figure draws its markers with WebGL (plotly's scattergl): one SVG element per point cost
#: the browser seconds at 10,000 trials, WebGL a few milliseconds. Below it SVG (crisper, and exported as vectors).
GL_POINTS = 1000


def marker_type(points: int) -> str:
    """The plotly trace type for a marker trace of ``points`` points: ``scattergl`` above `GL_POINTS`."""
    return "scattergl" if points > GL_POINTS else "scatter"


def _grid_layout(rows: int) -> dict[str, Any]:
    """The layout of ``rows`` stacked panels sharing their x axis ({} for one), as `_figure` lays them out."""
    if rows == 1:
        return {}
    from plotly.subplots import make_subplots

    return dict(
        make_subplots(rows=rows, cols=1, shared_xaxes=True, vertical_spacing=0.08).layout.to_plotly_json()
    )


def _axes(row: int, rows: int) -> dict[str, str]:
    """The axis references of a trace in panel ``row`` (0-based) of `_grid_layout(rows)`."""
    if rows == 1:
        return {}
    return {"xaxis": "x", "yaxis": "y"} if row == 0 else {"xaxis": f"x{row + 1}", "yaxis": f"y{row + 1}"}


def history_figure(result: SearchResult) -> Any | None:
    """Objective per trial number, one marker color per state, and the best-so-far line.

    Built from dicts (`light_figure`): the dashboard builds it again after every finished trial.
    """
    k = len(result.directions)
    records = sorted(result.records, key=lambda r: r.number)
    vectors = [result.objective_values(r) or [math.nan] * k for r in records]
    if not any(_finite(v) for vec in vectors for v in vec):
        return None
    titles = _objective_titles(result)
    groups = [(state, color, state) for state, color in STATE_COLORS.items()] + [
        ("WARM", WARM_COLOR, WARM_NAME)
    ]
    layout = _grid_layout(k)
    traces: list[dict[str, Any]] = []
    for i in range(k):
        # One pass sorts the trials into their groups (one per state, warm start apart), not one pass per group.
        points: dict[str, list[tuple[TrialRecord, float]]] = {state: [] for state, _, _ in groups}
        for r, vec in zip(records, vectors):
            if _finite(vec[i]):
                group = points.get("WARM" if is_warm(r) else TrialState(r.state).value)
                if group is not None:
                    group.append((r, vec[i]))
        kind = marker_type(sum(len(pts) for pts in points.values()))
        for state, color, name in groups:
            pts = points[state]
            if pts:
                traces.append({**_state_markers(kind, state, color, name, pts, i), **_axes(i, k)})
        if k == 1:
            line = _best_so_far_line(result, records, vectors)
            if line is not None:
                traces.append(line)
        axis = "yaxis" if i == 0 else f"yaxis{i + 1}"
        layout[axis] = {**layout.get(axis, {}), "title": {"text": titles[i]}}
    layout.update({**_LAYOUT, "height": 320 * k + 100 if k > 1 else 420})
    bottom = "xaxis" if k == 1 else f"xaxis{k}"
    layout[bottom] = {**layout.get(bottom, {}), "title": {"text": "trial number"}}
    return light_figure(traces, layout)


def _state_markers(
    kind: str, state: str, color: str, name: str, pts: list[tuple[Any, float]], i: int
) -> dict[str, Any]:
    """One state's trials as markers (objective ``i`` against trial number); a cross for FAIL, a diamond for WARM."""
    return {
        "type": kind,
        "x": [r.number for r, _ in pts],
        "y": [v for _, v in pts],
        "mode": "markers",
        "name": name,
        "legendgroup": state,
        "showlegend": i == 0,
        "marker": {
            "color": color,
            "size": 8,
            "symbol": {"FAIL": "x", "WARM": "diamond"}.get(state, "circle"),
        },
        "text": [plot_text(r.name) for r, _ in pts],
        "hovertemplate": "%{text}<br>trial %{x}<br>%{y:.6g}<extra>" + name + "</extra>",
    }


def _best_so_far_line(
    result: SearchResult, records: list[Any], vectors: list[list[float]]
) -> dict[str, Any] | None:
    """The best complete trial so far, by trial number (one objective); None before any complete trial."""
    complete = [  # this search's own trials: an earlier search's trial is never its best run
        (r.number, vec[0])
        for r, vec in zip(records, vectors)
        if r.state == TrialState.COMPLETE and not is_warm(r)
    ]
    if not complete:
        return None
    return {
        "type": "scatter",
        "x": [n for n, _ in complete],
        "y": best_so_far([v for _, v in complete], result.directions[0]),
        "mode": "lines",
        "line": {"shape": "hv", "color": "#111827", "width": 2},
        "name": "best so far",
        "hovertemplate": "best so far %{y:.6g}<extra></extra>",
    }


def learning_curves_figure(result: SearchResult) -> Any | None:
    """Objective against step for every trial; pruned dashed, a cross at the last point of failed trials.

    The curves of all trials in one state form one trace, separated by gaps: a thousand trials draw as four
    traces, which plotly renders (and the live dashboard updates) far faster than a thousand.
    """
    go = require_plotly()
    k = len(result.directions)
    curves = _trained_curves(result)
    if not curves:
        return None
    fig = _figure(result, k)
    titles = _objective_titles(result)
    for state in STATE_COLORS:
        group = [(r, pts) for r, pts in curves if TrialState(r.state).value == state]
        if not group:
            continue
        for i in range(k):
            for trace in _state_curves(go, state, group, i):
                _add(fig, trace, i, k)
    _add_best_curve(fig, result, {id(r): pts for r, pts in curves}, k)
    for i in range(k):
        axis = "yaxis" if i == 0 else f"yaxis{i + 1}"
        fig.update_layout({axis: {"title": {"text": titles[i]}}})
    fig.update_layout(**{**_LAYOUT, "height": 320 * k + 100 if k > 1 else 420})
    fig.update_xaxes(title_text="step", row=k if k > 1 else None)
    return fig


def _trained_curves(result: SearchResult) -> list[tuple[TrialRecord, list[tuple[int, list[float]]]]]:
    """(record, [(step, objective values), ...]) of every trial trained in this search that evaluated, by number."""
    curves = []
    for record in sorted(result.records, key=lambda r: r.number):
        if is_warm(record):  # not trained here: its curve belongs to the earlier search's report
            continue
        pts = []
        for ev in sorted(record.intermediates, key=lambda e: e.step):
            vec = result.objective_values(ev)
            if vec is not None:
                pts.append((ev.step, vec))
        if pts:
            curves.append((record, pts))
    return curves


def _state_curves(go: Any, state: str, group: list[Any], i: int) -> list[Any]:
    """The traces of objective ``i`` for the trials of one state: their curves as one trace split by gaps, and for
    failed trials a cross where each stopped."""
    color = STATE_COLORS[state]
    xs: list[Any] = []
    ys: list[Any] = []
    names: list[str] = []
    for record, pts in group:
        if xs:  # a gap between two trials' curves
            xs.append(None)
            ys.append(None)
            names.append("")
        xs += [s for s, _ in pts]
        ys += [vec[i] for _, vec in pts]
        names += [plot_text(record.name)] * len(pts)
    single = all(len(pts) == 1 for _, pts in group)
    traces = [
        go.Scatter(
            x=xs,
            y=ys,
            text=names,
            mode="lines+markers" if single else "lines",
            connectgaps=False,
            line={"color": color, "dash": _DASH[state], "width": 1.5},
            marker={"size": 5},
            opacity=0.75,
            name=state,
            legendgroup=state,
            showlegend=i == 0,
            hovertemplate=f"%{{text}}<br>step %{{x}}<br>%{{y:.6g}}<extra>{state}</extra>",
        )
    ]
    if state == "FAIL":
        traces.append(
            go.Scatter(
                x=[pts[-1][0] for _, pts in group],
                y=[pts[-1][1][i] for _, pts in group],
                text=[plot_text(r.name) for r, _ in group],
                mode="markers",
                marker={"symbol": "x", "size": 11, "color": color},
                legendgroup=state,
                showlegend=False,
                hovertemplate="%{text} failed here<extra></extra>",
            )
        )
    return traces


def _add_best_curve(fig: Any, result: SearchResult, curves: dict[int, list[Any]], k: int) -> None:
    """The best trial's curve (one objective) drawn over the others, thick and dark, named in the legend."""
    go = require_plotly()
    best = result.best_trial if k == 1 else None
    pts = curves.get(id(best)) if best is not None else None
    if best is None or not pts:
        return
    _add(
        fig,
        go.Scatter(
            x=[s for s, _ in pts],
            y=[vec[0] for _, vec in pts],
            mode="lines+markers",
            line={"color": "#111827", "width": 3.5},
            marker={"size": 6, "color": "#111827"},
            name=plot_text(f"best: {best.name}"),
            text=[plot_text(best.name)] * len(pts),
            hovertemplate="%{text} (best)<br>step %{x}<br>%{y:.6g}<extra></extra>",
        ),
        0,
        k,
    )


def parallel_figure(result: SearchResult, limit: int | None = None) -> Any | None:
    """Parallel coordinates of the complete trials over every parameter, colored by the (first) objective.

    ``limit``: draw at most this many trials (`spread_sample`: the best tenth, then an even sample by number); the
    caller says so in the caption. The axes' ranges and ticks come from every complete trial all the same.
    """
    go = require_plotly()
    every = result.scored_trials()
    names = sorted({n for r, _ in every for n in r.params})
    if not every or not names:
        return None
    rows = list(range(len(every)))
    if limit is not None and len(every) > limit:
        from hpsearch.report._scale import spread_sample

        kept = {id(r) for r in spread_sample(result, [r for r, _ in every], limit)}
        rows = [j for j, (r, _) in enumerate(every) if id(r) in kept]
    scored = [every[j] for j in rows]
    records = [r for r, _ in every]
    dimensions = []
    for name in names:
        axis = param_axis(result, name, records)  # ticks and range from every trial, drawn or not
        low, high = min(axis.tickvals + axis.positions), max(axis.tickvals + axis.positions)
        pad = 0.5 if axis.kind == "categorical" else 0.0
        label = plot_text(f"{name} (log)" if axis.log else name)
        dimensions.append(
            {
                "label": label,
                "values": [axis.positions[j] for j in rows],
                "tickvals": axis.tickvals,
                "ticktext": [plot_text(t) for t in axis.ticktext],
                "range": [low - pad, high + pad] if high > low or pad else [low - 1, high + 1],
            }
        )
    titles = _objective_titles(result)
    sampled = len(scored) < len(every)
    for i in range(len(result.directions)):
        dimension = {"label": titles[i], "values": [v[i] for _, v in scored]}
        low, high = min(v[i] for _, v in every), max(v[i] for _, v in every)
        if sampled and high > low:  # the range of every trial, drawn or not
            dimension["range"] = [low, high]
        dimensions.append(dimension)
    color = [v[0] for _, v in scored]
    # A sample keeps each trial's color: the scale spans every trial's objective.
    scale = {"cmin": min(v[0] for _, v in every), "cmax": max(v[0] for _, v in every)} if sampled else {}
    fig = go.Figure(
        go.Parcoords(
            dimensions=dimensions,
            line={
                "color": color,
                "colorscale": "Viridis",
                # Bright means better whatever the direction.
                "reversescale": result.directions[0] == "minimize",
                **scale,
                "showscale": True,
                "colorbar": {"title": {"text": "objective" if len(titles) == 1 else "objective 0"}},
            },
        )
    )
    fig.update_layout(**{**_LAYOUT, "margin": {"l": 80, "r": 80, "t": 60, "b": 40}})
    return fig


def importance_figure(result: SearchResult, importances: Importances) -> Any | None:
    go = require_plotly()
    names = sorted({n for per in importances.per_objective for n in per})
    if not names:
        return None
    first = importances.per_objective[0]
    names.sort(key=lambda n: first.get(n, 0.0))  # most important on top of a horizontal bar chart
    fig = go.Figure()
    labels = (
        ["importance"]
        if len(importances.per_objective) == 1
        else [f"objective {i}" for i in range(len(importances.per_objective))]
    )
    for label, per in zip(labels, importances.per_objective):
        fig.add_trace(
            go.Bar(
                x=[per.get(n, 0.0) for n in names],
                y=[plot_text(n) for n in names],
                orientation="h",
                name=label,
                hovertemplate="%{y}: %{x:.3f}<extra></extra>",
            )
        )
    title = (
        "|Spearman rho|"
        if importances.method == "spearman"
        else f"{IMPORTANCE_METHODS.get(importances.method, importances.method)} importance (sums to 1)"
    )
    fig.update_layout(
        **{
            **_LAYOUT,
            "height": max(240, 40 * len(names) + 120),
            "margin": {"l": 140, "r": 20, "t": 30, "b": 50},
        },
        barmode="group",
        xaxis_title=title,
        showlegend=len(labels) > 1,
    )
    return fig


def slice_figure(result: SearchResult, name: str) -> tuple[Any | None, int]:
    """Objective against one parameter's value over the complete trials; (figure, trials where inactive)."""
    go = require_plotly()
    scored = result.scored_trials()
    active = [(r, v) for r, v in scored if name in r.params]
    inactive = len(scored) - len(active)
    if not active:
        return None, inactive
    k = len(result.directions)
    values = [r.params[name] for r, _ in active]
    kind, log = param_kind(result, name, values)
    # Numbers go to plotly as floats: its JSON encoder refuses an int beyond 64 bits (a Categorical may hold one).
    xs: list[Any] = (
        [plot_text(category_label(v)) for v in values]
        if kind == "categorical"
        else [float(v) for v in values]
    )
    fig = _figure(result, k, shared_x=True)
    titles = _objective_titles(result)
    scatter = go.Scattergl if marker_type(len(active)) == "scattergl" else go.Scatter
    for i in range(k):
        _add(
            fig,
            scatter(
                x=xs,
                y=[v[i] for _, v in active],
                mode="markers",
                marker={
                    "color": [r.number for r, _ in active],
                    "colorscale": "Viridis",
                    "showscale": i == 0,
                    "colorbar": {"title": {"text": "trial"}},
                    "size": 9,
                    "line": {"width": 0.5, "color": "#1f2937"},
                },
                text=[plot_text(r.name) for r, _ in active],
                hovertemplate="%{text}<br>%{x}<br>%{y:.6g}<extra></extra>",
                showlegend=False,
            ),
            i,
            k,
        )
        axis = "yaxis" if i == 0 else f"yaxis{i + 1}"
        fig.update_layout({axis: {"title": {"text": titles[i]}}})
    xaxis: dict[str, Any] = {"title_text": plot_text(name)}
    if kind == "categorical":
        order = sorted(set(xs))
        xaxis.update(type="category", categoryorder="array", categoryarray=order)
    elif log:
        xaxis.update(type="log")
    fig.update_xaxes(**xaxis, row=k if k > 1 else None)
    if kind == "categorical" and k > 1:
        fig.update_xaxes(type="category")
    fig.update_layout(**{**_LAYOUT, "height": 300 * k + 60 if k > 1 else 340})
    return fig, inactive


def pareto_figure(result: SearchResult) -> Any | None:
    """Two objectives: every complete trial, the Pareto front highlighted and joined."""
    go = require_plotly()
    if len(result.directions) != 2:
        return None
    scored = result.scored_trials()
    if not scored:
        return None
    front = result.best_trials
    front_ids = {id(r) for r in front}
    others = [(r, v) for r, v in scored if id(r) not in front_ids]
    fig = go.Figure()
    if others:
        scatter = go.Scattergl if marker_type(len(others)) == "scattergl" else go.Scatter
        fig.add_trace(
            scatter(
                x=[v[0] for _, v in others],
                y=[v[1] for _, v in others],
                mode="markers",
                name="dominated",
                marker={"color": "#9ca3af", "size": 8},
                text=[plot_text(r.name) for r, _ in others],
                hovertemplate="%{text}<br>%{x:.6g}, %{y:.6g}<extra></extra>",
            )
        )
    points = sorted(((result.objective_values(r) or [], r) for r in front), key=lambda p: (p[0], p[1].number))
    # The front drawn as the edge of the region it dominates: a staircase that first moves along x when x
    # is minimized (the corner point is dominated by the left point) and first along y when x is maximized.
    shape = "hv" if result.directions[0] == "minimize" else "vh"
    fig.add_trace(
        go.Scatter(
            x=[v[0] for v, _ in points],
            y=[v[1] for v, _ in points],
            mode="lines+markers",
            name="Pareto front",
            line={"shape": shape, "color": "#dc2626"},
            marker={"color": "#dc2626", "size": 10},
            text=[plot_text(r.name) for _, r in points],
            hovertemplate="%{text}<br>%{x:.6g}, %{y:.6g}<extra>front</extra>",
        )
    )
    titles = _objective_titles(result)
    fig.update_layout(**_LAYOUT, xaxis_title=titles[0], yaxis_title=titles[1])
    return fig


def cost_figure(result: SearchResult) -> Any | None:
    """Objective (first direction) against each trial's device-seconds, one marker color per state."""
    go = require_plotly()
    points = []
    for r in result.records:
        values = result.objective_values(r)
        cost = None if is_warm(r) else r.cost.get("device_s")
        if values and _finite(values[0]) and cost is not None and _finite(cost):
            points.append((r, float(cost), values[0]))
    if not points:
        return None
    fig = go.Figure()
    scatter = go.Scattergl if marker_type(len(points)) == "scattergl" else go.Scatter
    for state, color in STATE_COLORS.items():
        pts = [p for p in points if p[0].state == state]
        if pts:
            fig.add_trace(
                scatter(
                    x=[c for _, c, _ in pts],
                    y=[v for _, _, v in pts],
                    mode="markers",
                    name=state,
                    marker={"color": color, "size": 8, "symbol": "x" if state == "FAIL" else "circle"},
                    text=[plot_text(r.name) for r, _, _ in pts],
                    hovertemplate="%{text}<br>%{x:.4g} device-s<br>%{y:.6g}<extra>" + state + "</extra>",
                )
            )
    fig.update_layout(**{**_LAYOUT, "height": 420})
    fig.update_xaxes(title_text="device-seconds (wall seconds x processes)")
    fig.update_yaxes(title_text=_objective_titles(result)[0])
    return fig


def leaders_figure(result: SearchResult) -> Any | None:
    """Re-evaluated configurations (one objective): each run as a dot, the mean with its 95% interval as an error
    bar, the chosen configuration in red; None without re-evaluated configurations."""
    from hpsearch.reevaluate import SOURCE, choose, summarize

    go = require_plotly()
    if result.is_multi_objective or not any(r.extra.get("source") == SOURCE for r in result.records):
        return None  # summarize() of every configuration costs more than the rest of a large report
    leaders = [s for s in summarize(result) if s.n_seeds >= 2]
    if not leaders or result.is_multi_objective:
        return None
    sign = -1.0 if result.directions[0] == "maximize" else 1.0
    leaders.sort(key=lambda s: (sign * s.mean[0], s.trial.number))
    chosen = {s.config_id for s in choose(result) or []}
    labels = [plot_text(f"{s.trial.name} (n={s.n_seeds})") for s in leaders]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[label for label, s in zip(labels, leaders) for _ in s.runs],
            y=[(result.objective_values(r) or [math.nan])[0] for s in leaders for r in s.runs],
            mode="markers",
            name="runs",
            marker={"color": "#9ca3af", "size": 7},
            text=[plot_text(r.name) for s in leaders for r in s.runs],
            hovertemplate="%{text}: %{y:.6g}<extra></extra>",
        )
    )
    half = [
        s.ci95[0][1] - s.mean[0] if _finite(s.ci95[0][1]) else 0.0 for s in leaders
    ]  # NaN: one finished run
    fig.add_trace(
        go.Scatter(
            x=labels,
            y=[s.mean[0] for s in leaders],
            mode="markers",
            name="mean, 95% interval",
            marker={
                "color": ["#dc2626" if s.config_id in chosen else "#2563eb" for s in leaders],
                "size": 11,
                "symbol": "diamond",
            },
            error_y={"type": "data", "array": half, "visible": True},
            hovertemplate="mean %{y:.6g} ± %{error_y.array:.3g}<extra></extra>",
        )
    )
    fig.update_layout(**_LAYOUT, yaxis_title=_objective_titles(result)[0], xaxis_title="configuration (runs)")
    return fig
