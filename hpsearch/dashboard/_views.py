"""A view of the dashboard as JSON: the report's sections, figures as plotly JSON, text as escaped HTML.

Each section is serialized once into a JSON text with a short hash, so a page that already shows a section
is sent only the sections whose hash changed. Figures and HTML come from the report package
(`report_sections`, `compare_sections`): the dashboard draws exactly what the HTML report draws.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from hpsearch.report._page import esc, note
from hpsearch.report._plotly import Part, Plot, figure_json

if TYPE_CHECKING:
    from hpsearch.report._analysis import Importances
    from hpsearch.report._html import LazySection
    from hpsearch.results import SearchResult

__all__ = [
    "TABLE_PAGE",
    "View",
    "compare_view",
    "parse_have",
    "pending_text",
    "search_meta",
    "search_sections",
    "search_view",
    "section_delta",
    "section_text",
]


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
    #: anchor -> (hash it applies to, JSON text): a section that only grew, as the points to append
    #: (`section_delta`), sent instead of the whole section to a page that holds that hash.
    deltas: dict[str, tuple[str, str]] = field(default_factory=dict)

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
        body = ",".join(f"{_dumps(a)}:{self._text(a, known.get(a))}" for a in changed)
        head = _dumps(
            {
                **self.meta,
                "version": self.version,
                "order": self.order,
                # What the page holds once it applied this message: it hands these back when its event stream
                # (re)connects, so the stream sends only what changed since (`parse_have`).
                "hashes": self.hashes(),
                "rendered": self.rendered_at.isoformat(),
            }
        )
        return f'{head[:-1]},"sections":{{{body}}}}}'

    def hashes(self) -> dict[str, str]:
        return {a: h for a, (h, _) in self.sections.items()}

    def _text(self, anchor: str, held: str | None) -> str:
        delta = self.deltas.get(anchor)
        return delta[1] if delta is not None and held == delta[0] else self.sections[anchor][1]


#: Bounds on a page's ``have`` list (anchors are short names, hashes 16 hex digits): anything else is ignored.
_HAVE_MAX = 4096


def parse_have(text: str | None) -> dict[str, str]:
    """The sections a page already holds, from its ``?have=anchor:hash,...`` (the ``hashes`` of the last message it
    applied); malformed or oversized input counts as holding nothing, which only costs a full message."""
    if not text or len(text) > _HAVE_MAX:
        return {}
    have = {}
    for item in text.split(","):
        anchor, _, digest = item.partition(":")
        if anchor and len(digest) == 16 and all(c in "0123456789abcdef" for c in digest):
            have[anchor] = digest
    return have


def _part(part: Part) -> str:
    if isinstance(part, Plot):
        return (
            f'{{"plot":{_dumps(part.plot_id)},"caption":{_dumps(part.caption)},'
            f'"figure":{figure_json(part.figure)}}}'
        )
    if isinstance(part, list):
        return f'{{"grid":[{",".join(_part(p) for p in part)}]}}'
    return f'{{"html":{_dumps(part)}}}'


def section_text(title: str, parts: Sequence[Part]) -> tuple[str, str]:
    """A section as (hash, JSON text): serialized once, sent to every page that does not hold that hash yet."""
    text = f'{{"title":{_dumps(title)},"parts":[{",".join(_part(p) for p in parts)}]}}'
    return _hash(text), text


def _hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


#: Above this share of the whole section's size a delta is not worth sending (the page redraws the figure instead).
_DELTA_MAX_SHARE = 0.5


def section_delta(old: str, new: str) -> str | None:
    """What turns section text ``old`` into ``new`` when ``new`` only appended points to ``old``'s figures, as JSON:
    ``{"title", "from", "extend": [{"plot", "caption", "calls"}]}`` (``from``: the hash of ``old``, which the page
    checks it holds), one entry per figure, each call a pair
    ``[trace indices, {array name: [values to append, one list per trace]}]`` as ``Plotly.extendTraces`` takes it
    (``x``, ``y``, ``text``... grown together). None when anything else changed (a layout, a trace's style, a point moved, a new trace, any HTML), or the
    delta would not be much smaller: then the page gets the whole section.

    A finished trial adds one point to the history of a 10,000-trial search; the page appends it to the drawn figure
    instead of receiving, parsing and drawing 10,000 points again.
    """
    if '"plot":' not in new:
        return None
    a, b = json.loads(old), json.loads(new)
    if a.get("title") != b.get("title") or len(a["parts"]) != len(b["parts"]):
        return None
    extends: list[dict[str, Any]] = []
    for p, q in zip(a["parts"], b["parts"]):
        if "grid" in p and "grid" in q and len(p["grid"]) == len(q["grid"]):
            pairs = list(zip(p["grid"], q["grid"]))
        elif "plot" in p and "plot" in q:
            pairs = [(p, q)]
        elif p == q:
            continue
        else:
            return None
        for x, y in pairs:
            extend = _plot_delta(x, y)
            if extend is None:
                return None
            extends.append(extend)
    text = _dumps({"title": b["title"], "extend": extends, "from": _hash(old)})
    return text if len(text) <= _DELTA_MAX_SHARE * len(new) else None


def _plot_delta(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any] | None:
    fa, fb = old.get("figure") or {}, new.get("figure") or {}
    da, db = fa.get("data") or [], fb.get("data") or []
    if old.get("plot") != new.get("plot") or fa.get("layout") != fb.get("layout") or len(da) != len(db):
        return None
    grown: dict[int, dict[str, list[Any]]] = {}
    for i, (s, t) in enumerate(zip(da, db)):
        if s.keys() != t.keys():
            return None
        added = {}
        for key, value in t.items():
            before = s[key]
            if value == before:
                continue
            if not (isinstance(value, list) and isinstance(before, list)) or value[: len(before)] != before:
                return None
            added[key] = value[len(before) :]
        if added:
            grown[i] = added
    # extendTraces takes one list per trace for each array it names: the traces that grew the same arrays go together.
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, added in grown.items():
        groups.setdefault(tuple(sorted(added)), []).append(i)
    calls = [[traces, {k: [grown[i][k] for i in traces] for k in keys}] for keys, traces in groups.items()]
    return {"plot": new["plot"], "caption": new.get("caption", ""), "calls": calls}


def pending_text(title: str, trials: int) -> tuple[str, str]:
    """The stand-in of a section not drawn yet (a large search's first page comes before its slower sections)."""
    message = f"Being drawn from the {trials:,} trials; this section follows in a moment."
    return section_text(title, [note(esc(message))])


def _view(meta: dict[str, Any], sections: list[tuple[str, str, list[Part]]]) -> View:
    return View(
        meta=meta,
        order=[anchor for anchor, _, _ in sections],
        sections={anchor: section_text(title, parts) for anchor, title, parts in sections},
    )


#: Rows per page of the trials table: one page comes with the view (and again after each finished trial), the others
#: are fetched when asked; a person reads a hundred rows, and the browser lays them out in milliseconds.
TABLE_PAGE = 100


def search_sections(
    result: SearchResult,
    importances: Importances | str | Callable[[], Importances | str] | None,
    has_search: bool,
) -> list[LazySection]:
    """The single-search view's sections, not built yet: the report's (running trials included), after a
    waiting note while the folder holds no search.json."""
    from hpsearch.report import lazy_report_sections
    from hpsearch.report._html import trials_page

    # The trials table: its first page, the others fetched when asked (`Dashboard.trials_page`), where the report
    # shows the best 500 only.
    def first_page() -> list[Part]:
        return [trials_page(result, 0, TABLE_PAGE)[0]]

    sections: list[LazySection] = [
        (a, t, first_page if a == "trials" else build)
        for a, t, build in lazy_report_sections(result, importances)
    ]
    if not has_search:
        waiting = note(
            esc(
                "No trial has finished yet, so search.json (the direction, the objective's name, the settings) is "
                "not written; the running trials below come from events.jsonl. Best-so-far lines assume maximize "
                "until then."
            )
        )
        sections.insert(0, ("waiting", "Waiting for search.json", lambda: [waiting]))
    return sections


def search_meta(result: SearchResult, warning: str | None) -> dict[str, Any]:
    """The single-search view's header facts: title, subtitle, warning and the trial counts."""
    from hpsearch.report._html import trials_text
    from hpsearch.warmstart import own_counts

    counts, warm = own_counts(result)  # earlier searches' trials (warm start) are counted apart
    return {
        "title": f"hpsearch dashboard: {result.backend}",
        "subtitle": f"{result.output_dir} · {result.objective} · {' / '.join(result.directions)} · {trials_text(result)}",
        "warning": warning,
        "trials": sum(counts.values()),
        "warm": warm,
        "counts": counts,
    }


def search_view(
    result: SearchResult, importances: Importances | str | None, warning: str | None, has_search: bool
) -> View:
    """The single-search view with every section built: the report's sections of ``result``."""
    sections = [(a, t, build()) for a, t, build in search_sections(result, importances, has_search)]
    return _view(search_meta(result, warning), sections)


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
