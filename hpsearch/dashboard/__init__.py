"""A live dashboard of running (or finished) searches: ``hpsearch dashboard OUTPUT_DIR [...]``.

It serves the HTML report's views (summary, history, learning curves, parallel coordinates, importance,
slices, Pareto front, trials; a comparison of several searches) and updates them through server-sent events as
trials start, report and end. It reads only what a search writes into its output folder (``search.json`` and
the event log ``events.jsonl``), so it works for every backend, during and after a run, and never writes there.
Starlette, uvicorn and plotly are imported when it starts (``pip install 'hpsearch[dashboard]'``).
"""

from __future__ import annotations

from hpsearch.dashboard._app import create_app
from hpsearch.dashboard._dashboard import Dashboard
from hpsearch.dashboard._reader import FolderReader, NotASearchFolder, check_search_folder
from hpsearch.dashboard._server import DashboardError, serve, start_in_background

__all__ = [
    "Dashboard",
    "DashboardError",
    "FolderReader",
    "NotASearchFolder",
    "check_search_folder",
    "create_app",
    "serve",
    "start_in_background",
]
