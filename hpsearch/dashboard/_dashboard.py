"""`Dashboard`: the folders being watched, their readers, and the views rendered from them (cached).

A view is rendered again only when a folder it shows changed (or a parameter-importance computation
finished), and at most as often as its own cost allows, so a 1,000-trial search that reports an evaluation
every second does not keep a core busy redrawing. A search's view is rendered section by section and each section
is cached: the quick ones (`QUICK`: summary, history, trials table) after every change, the others one at a time
afterwards (`render_next`, outside the lock), each throttled by its own cost (and above `EAGER_TRIALS` trials to one
rendering per `LATER_EVERY_S`); a quick section that only appended points also keeps them as a delta for the pages
that hold its previous rendering (`section_delta`); above `EAGER_TRIALS` trials the first page is served
with a stand-in for each section not drawn yet, so it does not wait for all of them. Parameter importance (fANOVA: about 2 s at 1,000 trials) is
computed in a child process (see `_importance`) on the complete trials only, when they changed, throttled;
meanwhile the view shows the previous importances, or at first a rank-correlation estimate.
"""

from __future__ import annotations

import dataclasses
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpsearch.dashboard._importance import end_children, isolated_importances
from hpsearch.dashboard._reader import FolderReader, check_search_folder
from hpsearch.dashboard._views import (
    TABLE_PAGE,
    View,
    compare_view,
    pending_text,
    search_meta,
    search_sections,
    section_delta,
    section_text,
)

if TYPE_CHECKING:
    from hpsearch.report._analysis import Importances
    from hpsearch.results import SearchResult

__all__ = ["EAGER_TRIALS", "LATER_EVERY_S", "QUICK", "Dashboard"]

#: Sections rendered at once after every change: the counts, each trial's objective and the leading trials, what a
#: person watches a running search for. The others (learning curves, slices, parallel coordinates, importance...)
#: follow one at a time, each rendered again at most as often as its own cost allows (at 10,000 trials they cost
#: seconds together, and one more point among thousands does not change what they show at a glance).
QUICK = frozenset({"waiting", "summary", "history", "trials"})

#: Up to this many trials every section is rendered with the quick ones (each costs milliseconds); above it the page
#: is served with the quick sections and a stand-in for each of the others until it is drawn.
EAGER_TRIALS = 500

#: Above `EAGER_TRIALS` trials a slower section is rendered again at most this often (seconds), whatever its cost: one
#: more trial among thousands does not change what it shows at a glance, and each new rendering is also sent to and
#: drawn by every open page (parallel coordinates of 1,000 lines cost Chromium a second or two), which a finished
#: trial's quick sections then wait behind.
LATER_EVERY_S = 10.0


@dataclasses.dataclass
class _Section:
    """One rendered section of a view: its (hash, JSON text), the reader version it shows, when it may be redone, and
    what turns the previous rendering into this one when it only appended points (hash it applies to, JSON text)."""

    title: str
    text: tuple[str, str]
    version: int
    next_at: float = 0.0
    delta: tuple[str, str] | None = None


class _Importance:
    """Parameter importances of one folder, computed off the request path and reused while nothing changed."""

    def __init__(self, executor: ThreadPoolExecutor) -> None:
        self._executor = executor
        self.children: set[Any] = set()
        self._key: Any = None
        self._value: Importances | str | None = None
        self._future: Future[Any] | None = None
        self._pending_key: Any = None
        self._next_start = 0.0
        self.ready = False  # a computation finished since the last render
        self._fresh_at: int | None = (
            None  # the reader version at which the importances were last found up to date
        )

    @staticmethod
    def key(result: SearchResult) -> Any:
        return hash(tuple((r.trial_id, tuple(v)) for r, v in result.scored_trials()))

    def stale(self, result: SearchResult) -> bool:
        return self._key != self.key(result)

    def get(self, result: SearchResult) -> Importances | str:
        """The importances of ``result``'s complete trials, or the previous ones while new ones are computed."""
        from hpsearch.report._analysis import compute_importances, quick_importances

        key = self.key(result)
        if key == self._key and self._value is not None:
            return self._value
        scored = result.scored_trials()
        if len(scored) < 2:  # the report's own sentence, at no cost
            self._key, self._value = key, compute_importances(result)
            return self._value
        running = self._future is not None and not self._future.done()
        if not running and time.monotonic() >= self._next_start:
            subset = dataclasses.replace(result, records=[r for r, _ in scored], native=None)
            self._pending_key = key
            self._future = self._executor.submit(self._compute, subset, key, len(result.records))
        if self._value is not None:
            return self._value
        # Nothing computed yet: a rank-correlation estimate at once, replaced when fANOVA is done.
        return quick_importances(result, "fANOVA is still being computed, so for now ")

    def _compute(self, subset: SearchResult, key: Any, trials: int) -> None:
        started = time.monotonic()
        try:
            value: Importances | str = isolated_importances(subset, self.children)
        except Exception as error:  # shown instead of the figure; the dashboard goes on
            value = f"Parameter importance could not be computed ({type(error).__name__}: {error})."
        cost = time.monotonic() - started
        # At most a third of one core: wait twice the cost before computing again (never more than 30 s), and above
        # EAGER_TRIALS trials at least LATER_EVERY_S (a child process busy with fANOVA takes a core from the
        # server and from a browser on the same machine).
        every = LATER_EVERY_S if trials > EAGER_TRIALS else 0.0
        self._next_start = time.monotonic() + min(30.0, max(every, 2 * cost))
        self._key, self._value = key, value
        self.ready = True

    def due(self, reader: FolderReader) -> bool:
        """Whether a throttled computation may start now for the reader's search, whose importances are stale.

        Asked at every poll: the staleness (a pass over every complete trial, tens of milliseconds at 10,000) is
        looked at again only once the folder changed since it was last found up to date.
        """
        running = self._future is not None and not self._future.done()
        if running or time.monotonic() < self._next_start or self._fresh_at == reader.version:
            return False
        if self.stale(reader.snapshot()):
            return True
        self._fresh_at = reader.version
        return False


class Dashboard:
    """The state behind the dashboard's pages, shared by every browser connected to it.

    Args:
        output_dirs: the search folders to show (each holds search.json and/or events.jsonl).
        labels: one name per folder (default: the folder names, or the paths when two share a name).
        require_search: False lets a folder that holds nothing yet be watched (a search starting beside it).

    Raises:
        NotASearchFolder: a folder does not exist or holds no search (when ``require_search``).
    """

    def __init__(
        self,
        output_dirs: Sequence[str | os.PathLike[str]],
        labels: Sequence[str] | None = None,
        require_search: bool = True,
    ) -> None:
        dirs = [os.fspath(d) for d in output_dirs]
        if not dirs:
            raise ValueError(
                "Dashboard needs at least one output folder but got none; pass the output_dir of a search."
            )
        if require_search:
            for folder in dirs:
                check_search_folder(folder)
        self.folders = dirs
        self.labels = list(labels) if labels is not None else _labels(dirs)
        if len(self.labels) != len(dirs):
            raise ValueError(
                f"labels must name each of the {len(dirs)} folders but got {len(self.labels)} labels."
            )
        self.readers = [FolderReader(d, background=True) for d in dirs]
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hpsearch-importance")
        self._importance = [_Importance(self._executor) for _ in dirs]
        self._lock = threading.RLock()
        self._views: dict[str, View] = {}
        self._rendered_from: dict[str, tuple[int, ...]] = {}
        self._next_render: dict[str, float] = {}
        self._sections: dict[str, dict[str, _Section]] = {}
        self._counter = 0

    # ------------------------------------------------------------------ views

    @property
    def views(self) -> list[str]:
        """View names: ``search-0`` ... one per folder, and ``compare`` when there are several."""
        names = [f"search-{i}" for i in range(len(self.folders))]
        return names + ["compare"] if len(self.folders) > 1 else names

    @property
    def default_view(self) -> str:
        return "search-0" if len(self.folders) == 1 else "compare"

    def _indices(self, view: str) -> list[int]:
        if view == "compare" and len(self.folders) > 1:
            return list(range(len(self.folders)))
        if view.startswith("search-") and view[7:].isdigit() and int(view[7:]) < len(self.folders):
            return [int(view[7:])]
        raise KeyError(view)

    def refresh(self) -> bool:
        """Read every folder's changes; True when any folder changed."""
        with self._lock:
            changed = False
            for reader in self.readers:
                changed = reader.refresh() or changed
            return changed

    def cached(self, view: str) -> View | None:
        return self._views.get(view)

    def needs_render(self, view: str) -> bool:
        """Whether ``view``'s quick sections are out of date and may be rendered again now (throttle passed)."""
        indices = self._indices(view)
        if view not in self._views:
            return True
        if time.monotonic() < self._next_render.get(view, 0.0):
            return False
        return self._rendered_from.get(view) != tuple(self.readers[i].version for i in indices)

    def render(self, view: str, force: bool = False, complete: bool = False) -> View:
        """The current `View` of ``view`` (a view name), rendered again if anything it shows changed.

        A search's quick sections (`QUICK`) are rendered now; the others keep their last rendering (or a stand-in
        above `EAGER_TRIALS` trials) until `render_next` renders them, unless ``complete`` asks for every section
        up to date.

        Raises:
            KeyError: ``view`` is not one of `views`.
        """
        with self._lock:
            indices = self._indices(view)
            if not force and not complete and not self.needs_render(view):
                return self._views[view]
            started = time.monotonic()
            versions = tuple(self.readers[i].version for i in indices)
            if view == "compare":
                results = [self.readers[i].snapshot() for i in indices]
                new = compare_view(results, self.labels, [self.readers[i].warning for i in indices])
            else:
                new = self._render_search(view, indices[0], complete)
            self._store(view, new)
            self._rendered_from[view] = versions
            # Throttle: the next render of this view waits twice what this one cost (at most 1 s, so a change
            # still shows within the 2 s the dashboard promises).
            self._next_render[view] = time.monotonic() + min(1.0, 2 * (time.monotonic() - started))
            return self._views[view]

    def _render_search(self, view: str, i: int, complete: bool) -> View:
        reader = self.readers[i]
        result = reader.snapshot()
        cache = self._sections.setdefault(view, {})
        eager = complete or len(result.records) <= EAGER_TRIALS
        order = []
        for anchor, title, build in search_sections(result, self._importances(i, result), reader.has_search):
            order.append(anchor)
            known = cache.get(anchor)
            if anchor in QUICK or (eager and (known is None or complete or known.version != reader.version)):
                cache[anchor] = self._build(title, build, reader.version)
                if anchor in QUICK and known is not None and known.text[0] != cache[anchor].text[0]:
                    # A finished trial appends a point to the history: pages that hold the previous rendering are
                    # sent that point (only the quick sections: the page draws them as they come, never later).
                    grown = section_delta(known.text[1], cache[anchor].text[1])
                    cache[anchor].delta = None if grown is None else (known.text[0], grown)
            elif known is None:
                cache[anchor] = _Section(title, pending_text(title, len(result.records)), version=-1)
        for anchor in set(cache) - set(order):
            del cache[anchor]
        return View(
            meta=search_meta(result, reader.warning),
            order=order,
            sections={a: cache[a].text for a in order},
            deltas={a: delta for a in order if (delta := cache[a].delta) is not None},
        )

    def _importances(self, i: int, result: SearchResult) -> Callable[[], Importances | str]:
        importance = self._importance[i]

        def get() -> Importances | str:
            importance.ready = False
            return importance.get(result)

        return get

    @staticmethod
    def _build(title: str, build: Callable[[], list[Any]], version: int, every: float = 0.0) -> _Section:
        started = time.monotonic()
        text = section_text(title, build())
        cost = time.monotonic() - started
        # At most a fifth of a core on one section: wait four times its cost before the next (never over 30 s), so
        # the slower sections of a large search do not hold the lock while new trials wait for the quick ones; and
        # no sooner than ``every``.
        return _Section(title, text, version, next_at=time.monotonic() + max(every, min(30.0, 4 * cost)))

    def render_next(self, view: str) -> bool:
        """Render one out-of-date section that `render` left for later (the first in page order whose throttle
        passed); True when one was rendered, so the caller publishes and comes back for the next.

        The section is built outside the lock, from a snapshot taken under it: at 10,000 trials one slow section
        costs a second, and a page request or a finished trial (the quick sections) must not wait for it.
        """
        with self._lock:
            if view == "compare" or view not in self._views:
                return False
            i = self._indices(view)[0]
            reader, cache = self.readers[i], self._sections.get(view, {})
            now = time.monotonic()
            stale = [
                a
                for a in self._views[view].order
                if a not in QUICK
                and a in cache
                and (cache[a].version != reader.version or (a == "importance" and self._importance[i].ready))
                and now >= cache[a].next_at
            ]
            if not stale:
                return False
            anchor, version, result = stale[0], reader.version, reader.snapshot()
            # Not picked again by a concurrent call while it is being built (its throttle is set once built).
            cache[anchor].next_at = math.inf
        sections = search_sections(result, self._importances(i, result), reader.has_search)
        title, build = next((t, b) for a, t, b in sections if a == anchor)
        try:
            every = LATER_EVERY_S if len(result.records) > EAGER_TRIALS else 0.0
            built = self._build(title, build, version, every)
        except BaseException:
            with self._lock:
                cache[anchor].next_at = 0.0
            raise
        with self._lock:
            old = self._views.get(view)
            if old is None or anchor not in old.order or self._sections.get(view) is not cache:
                if anchor in cache and cache[anchor].next_at == math.inf:
                    cache[anchor].next_at = 0.0
                return False
            cache[anchor] = built
            self._store(view, dataclasses.replace(old, sections={**old.sections, anchor: built.text}))
            return True

    def trials_page(self, view: str, page: int) -> dict[str, Any]:
        """Page ``page`` (0-based, clamped) of a search view's trials table as ``{"html", "page", "pages"}``: the
        table's first page comes with the view, the others are fetched by the page's pager.

        Raises:
            KeyError: ``view`` is not a search view.
        """
        from hpsearch.report._html import trials_page

        with self._lock:
            if view == "compare":
                raise KeyError(view)
            result = self.readers[self._indices(view)[0]].snapshot()
        html, page, pages = trials_page(result, page, TABLE_PAGE)
        return {"html": html, "page": page, "pages": pages}

    def _store(self, view: str, new: View) -> None:
        old = self._views.get(view)
        if new.same_as(old):
            assert old is not None
            new = old
        else:
            self._counter += 1
            new.version = self._counter
        self._views[view] = new

    def importance_due(self) -> bool:
        """Whether a throttled importance computation is waiting to start (its section is then rendered again)."""
        with self._lock:
            for i, reader in enumerate(self.readers):
                section = self._sections.get(f"search-{i}", {}).get("importance")
                if section is not None and self._importance[i].due(reader):
                    section.version, section.next_at = -1, 0.0
                    return True
            return False

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        for importance in self._importance:
            end_children(importance.children)


def _labels(dirs: Sequence[str]) -> list[str]:
    names = [Path(d).resolve().name or d for d in dirs]
    return names if len(set(names)) == len(names) else list(dirs)
