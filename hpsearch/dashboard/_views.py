"""A view of the dashboard as JSON: the report's sections, figures as plotly JSON, text as escaped HTML.

Each section is serialized once into a JSON text with a short hash, so a page that already shows a section
is sent only the sections whose hash changed. Figures and HTML come from the report package
(`report_sections`, `compare_sections`): the dashboard draws exactly what the HTML report draws.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from hpsearch.report._page import esc, note
from hpsearch.report._plotly import Part, Plot, figure_json

if TYPE_CHECKING:
    from hpsearch.report._analysis import Importances
    from hpsearch.results import SearchResult

__all__ = ["View", "compare_view", "search_view"]


def _dumps(value: Any) -> str:
    # Sent as JSON (a response or an event's data) and read with JSON.parse, never spliced into a <script>.
    return json.dumps(value, separators=(",", ":"), default=str)


@dataclass
class View:
    """One rendering of a view: its header facts and its sections, each as (hash, JSON text)."""

    meta: dict[str, Any]
    order: list[str]
    sections: dict[str, tuple[str, str]]
    version: int = 0
    rendered_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))

    def same_as(self, other: View | None) -> bool:
        return (
            other is not None
            and other.meta == self.meta
            and other.order == self.order
            and all(other.sections.get(a, ("",))[0] == h for a, (h, _) in self.sections.items())
        )

    def message(self, known: dict[str, str] | None = None) -> str:
        """The JSON message for a page that already holds the sections in ``known`` (anchor -> hash)."""
        known = known or {}
        changed = [a for a in self.order if known.get(a) != self.sections[a][0]]
        body = ",".join(f"{_dumps(a)}:{self.sections[a][1]}" for a in changed)
        head = _dumps(
            {
                **self.meta,
                "version": self.version,
                "order": self.order,
                "rendered": self.rendered_at.isoformat(),
            }
        )
        return f'{head[:-1]},"sections":{{{body}}}}}'

    def hashes(self) -> dict[str, str]:
        return {a: h for a, (h, _) in self.sections.items()}


def _part(part: Part) -> str:
    if isinstance(part, Plot):
        return (
            f'{{"plot":{_dumps(part.plot_id)},"caption":{_dumps(part.caption)},'
            f'"figure":{figure_json(part.figure)}}}'
        )
    if isinstance(part, list):
        return f'{{"grid":[{",".join(_part(p) for p in part)}]}}'
    return f'{{"html":{_dumps(part)}}}'


def _section(title: str, parts: Sequence[Part]) -> tuple[str, str]:
    text = f'{{"title":{_dumps(title)},"parts":[{",".join(_part(p) for p in parts)}]}}'
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest(), text


def _view(meta: dict[str, Any], sections: list[tuple[str, str, list[Part]]]) -> View:
    return View(
        meta=meta,
        order=[anchor for anchor, _, _ in sections],
        sections={anchor: _section(title, parts) for anchor, title, parts in sections},
    )


def search_view(
    result: SearchResult, importances: Importances | str | None, warning: str | None, has_search: bool
) -> View:
    """The single-search view: the report's sections of ``result`` (running trials included)."""
    from hpsearch.report import report_sections

    sections = report_sections(result, importances)
    if not has_search:
        sections.insert(
            0,
            (
                "waiting",
                "Waiting for search.json",
                [
                    note(
                        esc(
                            "No trial has finished yet, so search.json (the direction, the objective's name, the settings) is "
                            "not written; the running trials below come from events.jsonl. Best-so-far lines assume maximize "
                            "until then."
                        )
                    )
                ],
            ),
        )
    from hpsearch.report._html import trials_text
    from hpsearch.warmstart import own_counts

    counts, warm = own_counts(result)  # earlier searches' trials (warm start) are counted apart
    meta = {
        "title": f"hpsearch dashboard: {result.backend}",
        "subtitle": f"{result.output_dir} · {result.objective} · {' / '.join(result.directions)} · {trials_text(result)}",
        "warning": warning,
        "trials": sum(counts.values()),
        "warm": warm,
        "counts": counts,
    }
    return _view(meta, sections)


def compare_view(
    results: Sequence[SearchResult], labels: Sequence[str], warnings: Sequence[str | None]
) -> View:
    """Several searches side by side (the report's comparison), or a note saying why they cannot be compared."""
    from hpsearch.report import compare_sections

    try:
        sections = compare_sections(results, labels)
    except ValueError as error:
        sections = [("curves", "Best so far", [note(esc(str(error)))])]
    from hpsearch.report._html import trials_text
    from hpsearch.warmstart import own_counts

    problems = [f"{label}: {w}" for label, w in zip(labels, warnings) if w]
    own = [own_counts(r) for r in results]
    meta = {
        "title": f"hpsearch dashboard: {len(results)} searches",
        "subtitle": " · ".join(f"{label} ({trials_text(r)})" for label, r in zip(labels, results)),
        "warning": " ".join(problems) or None,
        "trials": sum(sum(c.values()) for c, _ in own),
        "warm": sum(w for _, w in own),
        "counts": {s: sum(c[s] for c, _ in own) for s in own[0][0]},
    }
    return _view(meta, sections)
