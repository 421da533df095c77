"""The Markdown summary of a search: a few lines and a table, readable in a terminal and a pull request."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from hpsearch.report._analysis import order_best_first, saved_time, search_span, total_training_time
from hpsearch.report._format import fmt_datetime, fmt_duration, fmt_number, fmt_params, fmt_value
from hpsearch.warmstart import own_counts

if TYPE_CHECKING:
    from hpsearch.results import SearchResult
    from hpsearch.trial import TrialRecord

__all__ = ["render_markdown"]


def _md(value: Any) -> str:
    """A cell's text with what would break a table row or be read as HTML by a Markdown renderer escaped."""
    text = html.escape(str(value), quote=False).replace("|", "\\|")
    return " ".join(text.split())


def render_markdown(result: SearchResult, max_rows: int | None = 50) -> str:
    """Summary lines and a table of the trials, best first (at most ``max_rows`` rows; None for all)."""
    if max_rows is not None and max_rows < 0:
        raise ValueError(f"max_rows must be None or >= 0 but got {max_rows}; pass e.g. max_rows=50.")
    lines = _summary_lines(result) + [""]
    records = order_best_first(result)
    if not records:
        lines.append("_No trials recorded._")
        return "\n".join(lines) + "\n"
    shown = records if max_rows is None else records[:max_rows]
    lines += _trial_table(result, shown)
    if len(shown) < len(records):
        lines.append("")
        lines.append(f"_… and {len(records) - len(shown)} more trial(s); see trials.csv._")
    return "\n".join(lines) + "\n"


def _summary_lines(result: SearchResult) -> list[str]:
    """The search in a few bullet points: objective, trial counts, best (or the Pareto front), leaders, times."""
    counts, warm = own_counts(result)  # warm-start rows (earlier searches' trials) are counted apart
    start, end = search_span(result)
    requested = "" if result.planned_trials is None else f" of {result.planned_trials}"
    lines = [
        f"## Hyperparameter search: {_md(result.backend)}",
        "",
        f"- **Objective**: {_md(result.objective)} ({', '.join(result.directions)})",
        f"- **Trials**: {sum(counts.values())}{requested} ("
        + ", ".join(f"{n} {s}" for s, n in counts.items() if n or s == "COMPLETE")
        + ")"
        + (f", plus {warm} earlier trial(s) told by warm start (not trained here)" if warm else ""),
    ]
    if not result.is_multi_objective:
        best = result.best_trial
        if best is None:
            lines.append("- **Best**: none (no complete trial with an objective)")
        else:
            value = (result.objective_values(best) or [float("nan")])[0]
            lines.append(
                f"- **Best**: {fmt_number(value)} by {_md(best.name)} (trial {best.number}): {_md(fmt_params(best.params))}"
            )
    else:
        lines.append(f"- **Pareto front**: {len(result.best_trials)} trial(s), marked ★ below")
    lines.extend(_leader_lines(result))
    saved = saved_time(result)
    time_line = f"- **Training time**: {fmt_duration(total_training_time(result))} (sum of trial durations)"
    if saved.seconds is not None:
        time_line += f", about {fmt_duration(saved.seconds)} saved by pruning {saved.counted} trial(s)"
    lines.append(time_line)
    lines.append(f"- **Started** {fmt_datetime(start)} · **finished** {fmt_datetime(end)}")
    return lines


def _trial_table(result: SearchResult, shown: list[TrialRecord]) -> list[str]:
    """The Markdown table of ``shown``: number, name (★ on the Pareto front), state, objectives, parameters."""
    front = {id(r) for r in result.best_trials}
    objectives = result.objective_columns
    params = result.param_names
    header = ["#", "name", "state", *objectives, *params, "last step", "duration"]
    align = ["---:", "---", "---", *["---:"] * len(objectives), *["---"] * len(params), "---:", "---:"]
    lines = ["| " + " | ".join(_md(h) for h in header) + " |", "|" + "|".join(align) + "|"]
    for record in shown:
        values = result.objective_values(record) or [float("nan")] * len(objectives)
        star = " ★" if id(record) in front else ""
        cells = [
            str(record.number),
            _md(record.name) + star,
            record.state.value if hasattr(record.state, "value") else str(record.state),
            *[fmt_number(v) for v in values],
            *[_md(fmt_value(record.params[p])) if p in record.params else "" for p in params],
            fmt_number(record.last_step),
            fmt_duration(record.duration_s),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _leader_lines(result: SearchResult) -> list[str]:
    """With re-evaluation: each re-evaluated configuration's mean and 95% interval (the best mean first)."""
    from hpsearch.reevaluate import choose, summarize

    leaders = [s for s in summarize(result) if s.n_seeds >= 2]
    if not leaders:
        return []
    chosen = {s.config_id for s in choose(result) or []}
    lines = ["- **Leaders over seeds** (mean [95% interval], runs; ★ chosen):"]
    sign = -1.0 if result.directions[0] == "maximize" else 1.0
    for s in sorted(leaders, key=lambda s: (sign * s.mean[0], s.trial.number)):
        stats = "; ".join(
            f"{fmt_number(m)} [{fmt_number(lo)}, {fmt_number(hi)}]" for m, (lo, hi) in zip(s.mean, s.ci95)
        )
        lines.append(
            f"  - {_md(s.trial.name)}{' ★' if s.config_id in chosen else ''}: {stats}, n={s.n_seeds}"
        )
    return lines
