"""The HTML report of one search: one self-contained file (plotly.js inlined once), eight sections."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from hpsearch.report import _figures as figures
from hpsearch.report._analysis import (
    Importances,
    SavedTime,
    compute_importances,
    order_best_first,
    saved_time,
    search_span,
    total_training_time,
)
from hpsearch.report._format import fmt_datetime, fmt_duration, fmt_number, fmt_params
from hpsearch.report._page import esc, json_text, kv_table, note, page, section, sortable_table, write_page
from hpsearch.report._plotly import Part, Plot, bundle_script, render_parts, require_plotly
from hpsearch.report._scale import spread_sample
from hpsearch.warmstart import own_counts

if TYPE_CHECKING:
    from hpsearch.results import SearchResult
    from hpsearch.trial import TrialRecord

__all__ = [
    "LazySection",
    "Section",
    "lazy_report_sections",
    "render_html",
    "report_sections",
    "trials_page",
    "write_html",
]

#: One section of the report: (anchor, title, parts).
Section = tuple[str, str, list[Part]]
#: One section not built yet: (anchor, title, the function that builds its parts).
LazySection = tuple[str, str, Callable[[], list[Part]]]


def report_sections(result: SearchResult, importances: Importances | str | None = None) -> list[Section]:
    """The report's sections, figures still as plotly objects (the HTML report and the live dashboard use them).

    ``importances``: precomputed parameter importances, or a sentence to show instead; None computes them.
    """
    return [(anchor, title, build()) for anchor, title, build in lazy_report_sections(result, importances)]


def lazy_report_sections(
    result: SearchResult, importances: Importances | str | Callable[[], Importances | str] | None = None
) -> list[LazySection]:
    """The report's sections in order, each with the function that builds its parts: the live dashboard builds
    the quick ones first and each of the others when its own inputs changed.

    ``importances``: as for `report_sections`, or a function that returns them (called when that section is built).
    """
    require_plotly()

    def importance() -> list[Part]:
        return _importance(result, importances() if callable(importances) else importances)

    sections: list[LazySection] = [
        ("summary", "Summary", lambda: [_summary(result)]),
        ("history", "Optimization history", lambda: _history(result)),
        ("curves", "Learning curves", lambda: _curves(result)),
        ("parallel", "Parallel coordinates", lambda: _parallel(result)),
        ("importance", "Parameter importance", importance),
        ("slices", "Slice plots", lambda: _slices(result)),
        ("cost", "Cost", lambda: _cost(result)),
    ]
    if len(result.directions) >= 2:
        sections.append(("pareto", "Pareto front", lambda: _pareto(result)))
    leaders = figures.leaders_figure(result)
    if leaders is not None:
        caption = (
            "Configurations trained again on more seeds (reevaluate_top_k): every run (grey), the mean with "
            "its 95% interval (Student's t); the best mean, the search's best run, in red. Overlapping "
            "intervals: the winner is not clearly better."
        )
        part = Plot("hp-plot-leaders", leaders, esc(caption))
        sections.insert(2, ("leaders", "Leaders over seeds", lambda: [part]))
    sections.append(("trials", "All trials", lambda: [_trials_table(result)]))
    return sections


def render_html(result: SearchResult) -> str:
    """The report of ``result`` as one HTML document (needs plotly; no backend)."""
    sections = report_sections(result)
    body = "".join(section(anchor, title, render_parts(parts)) for anchor, title, parts in sections)
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    subtitle = f"{result.objective} · {' / '.join(result.directions)} · {trials_text(result)} · generated {generated}"
    return page(
        title=f"hpsearch report: {result.backend}",
        subtitle=subtitle,
        nav=[(anchor, title) for anchor, title, _ in sections],
        body=body,
        bundle=bundle_script(),
    )


def write_html(result: SearchResult, path: str | os.PathLike[str] | None = None) -> str:
    """Write the report of ``result`` to ``path`` (default ``output_dir/report.html``; a folder: ``report.html`` in
    it), atomically; return the path."""
    if path is None:
        if result.output_dir is None:
            raise ValueError(
                "write_html needs a path: the result has no output_dir; pass write_html(result, path)."
            )
        path = Path(result.output_dir)
    return write_page(render_html(result), path, "report.html")


# ---------------------------------------------------------------------- sections


def trials_text(result: SearchResult) -> str:
    """ "8 / 10 trials", plus "+ 6 warm-start" when earlier searches' trials were told to this one (not trained
    here, so never counted as this search's trials)."""
    counts, warm = own_counts(result)
    requested = "" if result.planned_trials is None else f" / {result.planned_trials}"
    return f"{sum(counts.values())}{requested} trials" + (f" + {warm} warm-start" if warm else "")


def _card(label: str, value: str) -> str:
    return f'<div class="card"><div class="v">{esc(value)}</div><div class="k">{esc(label)}</div></div>'


def _summary(result: SearchResult) -> str:
    counts, warm = own_counts(result)
    saved = saved_time(result)
    best_html, best_card = _best_html(result)
    requested = "unbounded" if result.planned_trials is None else str(result.planned_trials)
    cards = [_card("trials", f"{sum(counts.values())} / {requested}")]
    cards += [_card(state, str(n)) for state, n in counts.items()]
    if warm:
        cards.append(_card("warm start", f"{warm} earlier"))
    cards += [_card("best", best_card), _card("training time", fmt_duration(total_training_time(result)))]
    cards.append(
        _card("saved by pruning*", fmt_duration(saved.seconds) if saved.seconds is not None else "—")
    )
    footnote = (
        '<p class="footnote">* Estimate: for each pruned trial, (median last step of the complete trials '
        f"[{esc(fmt_number(saved.median_steps))}] - the step it was pruned at) x its own seconds per step, "
        "summed. It assumes a pruned trial would have run as long as a typical complete one at its own pace; "
        f"{saved.counted} pruned trial(s) counted, {saved.skipped} left out (no duration, no step count, or "
        "no complete trial to compare with).</p>"
    )
    return (
        f'<div class="cards">{"".join(cards)}</div>{kv_table(_summary_rows(result, saved, best_html))}'
        f"<h3>Settings</h3>{_settings_and_space(result)}{footnote}"
    )


def _summary_rows(result: SearchResult, saved: SavedTime, best_html: str) -> list[tuple[str, str]]:
    """The summary table: backend, objective, trial counts, best, times, folder and versions."""
    counts, warm = own_counts(result)
    start, end = search_span(result)
    total = total_training_time(result)
    requested = "unbounded" if result.planned_trials is None else str(result.planned_trials)
    if result.n_trials is not None and result.planned_trials != result.n_trials:
        requested += f" (n_trials={result.n_trials} samples of every grid_search combination)"
    wall = (end - start).total_seconds() if start is not None and end is not None else None
    told = (
        f"{warm} earlier searches' trials told to this one before it began: not trained here, not counted above, "
        "never its best run"
    )
    rows = [
        ("backend", esc(result.backend)),
        ("directions", esc(", ".join(result.directions))),
        ("objective", esc(result.objective)),
        ("trials requested", esc(requested)),
        ("trials by state", esc(", ".join(f"{n} {s}" for s, n in counts.items()))),
        *([("warm start", esc(told))] if warm else []),
        ("best" if not result.is_multi_objective else "Pareto front", best_html),
        ("total training time", esc(f"{fmt_duration(total)} (sum of trial durations)")),
        ("saved by pruning*", esc(_saved_text(saved))),
        ("started", esc(fmt_datetime(start))),
        ("finished", esc(fmt_datetime(end))),
        ("wall time", esc(fmt_duration(wall))),
    ]
    if result.output_dir:
        rows.append(("output dir", esc(result.output_dir)))
    if result.versions:
        rows.append(("versions", esc(", ".join(f"{k} {v}" for k, v in sorted(result.versions.items())))))
    return rows


def _settings_and_space(result: SearchResult) -> str:
    """The backend settings as a table and the portable search space (or notes saying they were not recorded)."""
    settings = (
        kv_table(
            (str(k), json_text(v)) for k, v in sorted(result.settings.items(), key=lambda kv: str(kv[0]))
        )
        if result.settings
        else note("No backend settings were recorded.")
    )
    space = (
        f"<details><summary>Search space</summary><pre>{json_text(result.space)}</pre></details>"
        if result.space
        else note("The search space was given in the backend's native form (not recorded).")
    )
    return settings + space


def _saved_text(saved: SavedTime) -> str:
    if saved.seconds is None:
        return "— (no pruned trial to estimate from)" if saved.counted == 0 else "—"
    return f"≈ {fmt_duration(saved.seconds)} over {saved.counted} pruned trial(s)"


def _best_html(result: SearchResult) -> tuple[str, str]:
    if not result.is_multi_objective:
        best = result.best_trial
        if best is None:
            return esc("no complete trial with an objective"), "—"
        value = (result.objective_values(best) or [float("nan")])[0]
        text = f"{best.name} (trial {best.number}): {fmt_number(value)} · {fmt_params(best.params)}"
        return esc(text), fmt_number(value)
    front = result.best_trials
    if not front:
        return esc("no complete trial with objectives"), "—"
    columns = ["name", "number", *[f"objective_{i}" for i in range(len(result.directions))], "params"]
    rows = [[r.name, r.number, *(result.objective_values(r) or []), fmt_params(r.params)] for r in front]
    return (
        f"{len(front)} trial(s){sortable_table(columns, rows, state_column=None)}",
        f"{len(front)} on front",
    )


def _cost(result: SearchResult) -> list[Part]:
    totals = result.total_cost()

    def show(value: float, unit: str, digits: str = ".3g") -> str:
        return "—" if value != value else f"{value:{digits}} {unit}"

    cards = [
        _card("device-hours", show(totals["device_hours"], "h")),
        _card("CPU time", fmt_duration(totals["cpu_s"]) if totals["cpu_s"] == totals["cpu_s"] else "—"),
        _card("peak memory", show(totals["peak_memory_mb"], "MB", ".0f")),
        _card("energy", show(totals["energy_kwh"], "kWh")),
        _card("emissions", show(totals["emissions_kg"], "kg CO2eq")),
    ]
    fig = figures.cost_figure(result)
    plot: Part = (
        Plot("hp-plot-cost", fig, esc("Objective against what each trial cost (device-seconds)"))
        if fig is not None
        else note("No trial has both a cost and an objective yet.")
    )
    caption = note(
        "Totals over all trials; peak memory is the largest of any trial. Energy and emissions are "
        "measured by CodeCarbon when it is asked to (max_energy_kwh, or HPSEARCH_CODECARBON=1)."
    )
    return [f'<div class="cards">{"".join(cards)}</div>{caption}', plot]


def _history(result: SearchResult) -> list[Part]:
    fig = figures.history_figure(result)
    if fig is None:
        return [note("No trial reported an objective yet.")]
    missing = sum(1 for r in result.records if result.objective_values(r) is None)
    caption = "Objective of every trial by number, colored by state"
    caption += "; the black line is the best complete trial so far." if not result.is_multi_objective else "."
    _, warm = own_counts(result)
    if warm:
        caption += (
            f" The {warm} purple diamonds at negative numbers are earlier searches' trials told to this one "
            "(warm start): not trained here, never on the best-so-far line."
        )
    if missing:
        caption += f" {missing} trial(s) without an objective are not shown."
    return [Plot("hp-plot-history", fig, esc(caption))]


#: Trials whose learning curves are drawn: beyond this, a sample (10,000 overlaid curves are one dark band that takes
#: seconds to build and to draw).
CURVES_MAX = 1000


def _curves(result: SearchResult) -> list[Part]:
    shown, sampled = result, ""
    with_curves = [r for r in result.records if r.intermediates]
    if len(with_curves) > CURVES_MAX:
        shown = dataclasses.replace(result, records=spread_sample(result, with_curves, CURVES_MAX))
        sampled = (
            f" {CURVES_MAX:,} of the {len(with_curves):,} trials with evaluations are drawn: the best complete "
            "ones and an even sample of the rest by trial number."
        )
    fig = figures.learning_curves_figure(shown)
    if fig is None:
        return [note("No intermediate evaluations were recorded.")]
    caption = (
        "Objective at each evaluation of every trial: complete solid, pruned dashed, running dotted, "
        "failed dotted with a cross at its last evaluation."
        + sampled
        + (
            " The best trial is the thick dark line."
            if not result.is_multi_objective and result.best_trial
            else ""
        )
    )
    return [Plot("hp-plot-curves", fig, esc(caption))]


#: Trials drawn as lines in the parallel coordinates: beyond this, a sample (thousands of lines are one band a person
#: cannot follow, and each costs the browser time to draw and to brush).
PARALLEL_MAX = 1000


def _parallel(result: SearchResult) -> list[Part]:
    fig = figures.parallel_figure(result, limit=PARALLEL_MAX)
    if fig is None:
        if not result.param_names:
            return [note("The trials have no parameters.")]
        return [note("No complete trial with an objective to draw.")]
    complete = len(result.scored_trials())
    sampled = (
        f"{PARALLEL_MAX:,} of the {complete:,} complete trials are drawn: the best {PARALLEL_MAX // 10:,} and an "
        "even sample of the rest by trial number (the axes span every complete trial). "
        if complete > PARALLEL_MAX
        else ""
    )
    caption = (
        sampled
        + "Complete trials across every parameter, colored by objective (brighter is better). Categorical "
        "values sit on integer ticks; a conditional parameter that was inactive sits on its own "
        "'(inactive)' tick; '(log)' axes show log10 of the value."
    )
    return [Plot("hp-plot-parallel", fig, esc(caption))]


def _importance(result: SearchResult, importances: Importances | str | None = None) -> list[Part]:
    if importances is None:
        importances = compute_importances(result)
    if isinstance(importances, str):
        return [note(esc(importances))]
    fig = figures.importance_figure(result, importances)
    if importances.method == "fanova":
        caption = (
            "Computed by optuna's fANOVA (FanovaImportanceEvaluator, seed 0) on an in-memory study rebuilt "
            "from the complete trials. " + importances.note
        )
    elif importances.method == "ped-anova":
        caption = importances.note
    else:
        caption = importances.note
    if fig is None:
        return [note(esc("No parameter could be assessed. " + caption))]
    return [Plot("hp-plot-importance", fig, esc(caption.strip()))]


def _slices(result: SearchResult) -> list[Part]:
    names = sorted({n for r, _ in result.scored_trials() for n in r.params})
    if not names:
        if not result.param_names:
            return [note("The trials have no parameters.")]
        return [note("No complete trial with an objective to draw.")]
    parts = []
    for i, name in enumerate(names):
        fig, inactive = figures.slice_figure(result, name)
        if fig is None:
            continue
        caption = f"{name}: objective of the complete trials against the value (color: trial number)."
        if inactive:
            caption += f" Inactive in {inactive} complete trial(s), not shown."
        parts.append(Plot(f"hp-plot-slice-{i}", fig, esc(caption)))
    return [parts]


def _pareto(result: SearchResult) -> list[Part]:
    fig = figures.pareto_figure(result)
    if fig is not None:
        n = len(result.best_trials)
        return [
            Plot(
                figure=fig,
                plot_id="hp-plot-pareto",
                caption=esc(f"{n} trial(s) on the Pareto front (red); grey ones are dominated."),
            )
        ]
    if len(result.directions) > 2:
        return [
            note(
                esc(
                    f"The front of {len(result.directions)} objectives is listed in the summary; it is drawn for two only."
                )
            )
        ]
    return [note("No complete trial with objectives to draw.")]


#: Rows of the trials table: beyond this, the best ones (a person does not read 10,000 rows, and a page that holds
#: them all takes seconds to open); every trial is in trials.csv.
TABLE_ROWS = 500


def _trials_table(result: SearchResult) -> str:
    if not result.records:
        return note("No trials were recorded.")
    caption = "Click a column header to sort."
    if len(result.records) > TABLE_ROWS:
        shown = order_best_first(result)[:TABLE_ROWS]
        caption = (
            f"The {TABLE_ROWS:,} best of {len(result.records):,} trials (complete ones best first, then pruned, "
            f"running, failed); every trial is in trials.csv beside search.json. {caption}"
        )
    else:
        shown = sorted(result.records, key=lambda r: (r.number, r.trial_id))
    return _table_of(result, shown, caption)


def trials_page(result: SearchResult, page: int, size: int = TABLE_ROWS) -> tuple[str, int, int]:
    """One page of the trials table, for the live dashboard (which fetches the others on demand): ``(HTML, page,
    pages)``; ``page`` (0-based) is clamped to the pages there are.

    Up to ``size`` trials it is the report's table (by number); above, every trial in the order the report's table
    shows its first page (complete ones best first, then pruned, running, failed), ``size`` per page, with a pager
    whose buttons name the page they fetch (``data-page``).
    """
    if len(result.records) <= size:
        return _trials_table(result), 0, 1
    ordered = order_best_first(result)
    pages = -(-len(ordered) // size)
    page = min(max(page, 0), pages - 1)
    shown = ordered[page * size : (page + 1) * size]
    first, last = page * size + 1, page * size + len(shown)
    caption = (
        f"Trials {first:,}-{last:,} of {len(ordered):,} (page {page + 1} of {pages}): complete ones best first, "
        "then pruned, running, failed. Click a column header to sort this page."
    )
    buttons = [("first", 0), ("previous", page - 1), ("next", page + 1), ("last", pages - 1)]
    pager = "".join(
        f'<button type="button" data-page="{target}"{" disabled" if target == page or not 0 <= target < pages else ""}>'
        f"{label}</button>"
        for label, target in buttons
    )
    head = (
        f'<div class="hp-pager" data-page="{page}" data-pages="{pages}">{pager}'
        f"<span>page {page + 1} of {pages}</span></div>"
    )
    return head + _table_of(result, shown, caption), page, pages


def _table_of(result: SearchResult, shown: list[TrialRecord], caption: str) -> str:
    """``shown`` as the sortable trials table (the best trial starred), ``caption`` below it."""
    # The rows as plain values, not a DataFrame of every trial: pandas' import alone was ~0.4 s of a report.
    columns, rows = result.trials_rows(shown)
    best_ids = {str(r.trial_id) for r in result.best_trials}
    marked = [i for i, record in enumerate(shown) if str(record.trial_id) in best_ids]
    if marked:
        caption += (
            " The best trial" + (" (the Pareto front)" if result.is_multi_objective else "") + " is starred."
        )
    return sortable_table(columns, rows, highlight=marked) + f'<p class="caption">{esc(caption)}</p>'
