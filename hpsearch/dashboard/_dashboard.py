"""`Dashboard`: the folders being watched, their readers, and the views rendered from them (cached).

A view is rendered again only when a folder it shows changed (or a parameter-importance computation
finished), and at most as often as its own cost allows, so a 1,000-trial search that reports an evaluation
every second does not keep a core busy redrawing. Parameter importance (fANOVA: about 2 s at 1,000 trials) is
computed in a child process (see `_importance`) on the complete trials only, when they changed, throttled;
meanwhile the view shows the previous importances, or at first a rank-correlation estimate.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpsearch.dashboard._importance import end_children, isolated_importances
from hpsearch.dashboard._reader import FolderReader, check_search_folder
from hpsearch.dashboard._views import View, compare_view, search_view

if TYPE_CHECKING:
    from hpsearch.report._analysis import Importances
    from hpsearch.results import SearchResult

__all__ = ["Dashboard"]


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
            self._future = self._executor.submit(self._compute, subset, key)
        if self._value is not None:
            return self._value
        # Nothing computed yet: a rank-correlation estimate at once, replaced when fANOVA is done.
        return quick_importances(result, "fANOVA is still being computed, so for now ")

    def _compute(self, subset: SearchResult, key: Any) -> None:
        started = time.monotonic()
        try:
            value: Importances | str = isolated_importances(subset, self.children)
        except Exception as error:  # shown instead of the figure; the dashboard goes on
            value = f"Parameter importance could not be computed ({type(error).__name__}: {error})."
        cost = time.monotonic() - started
        # At most a third of one core: wait twice the cost before computing again (never more than 30 s).
        self._next_start = time.monotonic() + min(30.0, 2 * cost)
        self._key, self._value = key, value
        self.ready = True

    def due(self, result: SearchResult) -> bool:
        """Whether a throttled computation may start now for a result whose importances are stale."""
        running = self._future is not None and not self._future.done()
        return not running and time.monotonic() >= self._next_start and self.stale(result)


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
        self.readers = [FolderReader(d) for d in dirs]
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hpsearch-importance")
        self._importance = [_Importance(self._executor) for _ in dirs]
        self._lock = threading.RLock()
        self._views: dict[str, View] = {}
        self._rendered_from: dict[str, tuple[int, ...]] = {}
        self._next_render: dict[str, float] = {}
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
        """Whether ``view`` is out of date and may be rendered again now (its throttle has passed)."""
        indices = self._indices(view)
        if view not in self._views:
            return True
        if time.monotonic() < self._next_render.get(view, 0.0):
            return False
        if self._rendered_from.get(view) != tuple(self.readers[i].version for i in indices):
            return True
        return view != "compare" and any(self._importance[i].ready for i in indices)

    def render(self, view: str, force: bool = False) -> View:
        """The current `View` of ``view`` (a view name), rendered again if anything it shows changed.

        Raises:
            KeyError: ``view`` is not one of `views`.
        """
        with self._lock:
            indices = self._indices(view)
            if not force and not self.needs_render(view):
                return self._views[view]
            started = time.monotonic()
            versions = tuple(self.readers[i].version for i in indices)
            if view == "compare":
                results = [self.readers[i].snapshot() for i in indices]
                new = compare_view(results, self.labels, [self.readers[i].warning for i in indices])
            else:
                i = indices[0]
                reader = self.readers[i]
                result = reader.snapshot()
                importance = self._importance[i]
                importance.ready = False
                new = search_view(result, importance.get(result), reader.warning, reader.has_search)
            old = self._views.get(view)
            if new.same_as(old):
                assert old is not None
                new = old
            else:
                self._counter += 1
                new.version = self._counter
            self._views[view] = new
            self._rendered_from[view] = versions
            # Throttle: the next render of this view waits twice what this one cost (at most 1 s, so a change
            # still shows within the 2 s the dashboard promises).
            self._next_render[view] = time.monotonic() + min(1.0, 2 * (time.monotonic() - started))
            return new

    def importance_due(self) -> bool:
        """Whether a throttled importance computation is waiting to start (the watch loop renders then)."""
        with self._lock:
            for i, reader in enumerate(self.readers):
                view = f"search-{i}"
                if view in self._views and self._importance[i].due(reader.snapshot()):
                    self._rendered_from.pop(view, None)
                    return True
            return False

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        for importance in self._importance:
            end_children(importance.children)


def _labels(dirs: Sequence[str]) -> list[str]:
    names = [Path(d).resolve().name or d for d in dirs]
    return names if len(set(names)) == len(names) else list(dirs)
