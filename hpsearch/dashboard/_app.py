"""The Starlette application: the page, its static files, the views as JSON and as server-sent events.

Routes (all GET; nothing the client sends names a file):

    /                      the default view (the search, or the comparison of several)
    /search/{i}, /compare  the page of one search / of the comparison
    /static/{name}         plotly.js (from the plotly package), the page's script and style sheet: a fixed table
    /api/views/{view}      the view as JSON (every section)
    /api/trials/{view}     one page of a search view's trials table (``?page=N``), as JSON
    /events/{view}         server-sent events: what the page lacks when it connects (``?have=anchor:hash,...``,
                           the sections it holds), then each changed section

One background task polls the folders (`Dashboard.refresh`, a few ``stat`` calls) every ``poll_interval``
seconds and renders the quick sections of the views that browsers are watching after a change (published at once);
a second one renders the sections left for later, one at a time (`Dashboard.render_next`), so a slow one never
holds up the first. File reads and rendering run in worker threads, so the event loop keeps serving. ``/api/views`` renders every section up to date.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from hpsearch.dashboard._page import STATIC, page_html
from hpsearch.dashboard._views import parse_have
from hpsearch.report._plotly import plotly_js_path

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

    from hpsearch.dashboard._dashboard import Dashboard

__all__ = ["LOCAL_HOSTS", "create_app"]

#: Host headers accepted when the dashboard serves the local machine only (a defence against DNS rebinding).
LOCAL_HOSTS = ["127.0.0.1", "localhost", "::1", "[::1]"]

_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    # Scripts only from this server (no inline script anywhere); plotly sets inline styles. 'unsafe-eval': plotly
    # draws parallel coordinates with regl, which compiles its WebGL drawing code with `new Function`; without it
    # that figure showed "WebGL is not supported". No string of a search is ever evaluated: the page's only code
    # is this server's two files, and what it receives is parsed with JSON.parse. plotly.js's "strict" build would
    # need no eval, but no Python package ships it (README, *Live dashboard*: why 'unsafe-eval' stays).
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self' 'unsafe-eval'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
        "connect-src 'self'; font-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    ),
}
_PING_S = 15.0


class _Watch:
    """The poll loop and the browsers' subscriptions (view -> number of open event streams)."""

    def __init__(self, dashboard: Dashboard, poll_interval: float) -> None:
        self.dashboard = dashboard
        self.poll_interval = poll_interval
        self.watched: dict[str, int] = {}
        self.published = asyncio.Event()
        self.stopping = False

    def publish(self) -> None:
        old, self.published = self.published, asyncio.Event()
        old.set()

    async def run(self) -> None:
        from anyio import to_thread

        try:  # warm up: the first page finds its quick sections rendered
            await to_thread.run_sync(self.dashboard.refresh)
            await to_thread.run_sync(self.dashboard.render, self.dashboard.default_view)
        except Exception:
            pass  # reported by the loop below if it persists
        later = asyncio.create_task(self.run_later())
        try:
            while not self.stopping:
                try:
                    await self.tick()
                except Exception:  # a bad moment in a folder must not stop the dashboard: try again next tick
                    logging.getLogger(__name__).warning("Dashboard refresh failed; retrying.", exc_info=True)
                await asyncio.sleep(self.poll_interval)
        finally:
            later.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await later

    async def tick(self) -> None:
        """Read the folders; render the watched views' quick sections if they changed, and publish them."""
        from anyio import to_thread

        dashboard = self.dashboard
        await to_thread.run_sync(dashboard.refresh)
        await to_thread.run_sync(dashboard.importance_due)
        rendered = False
        for view in [v for v, n in self.watched.items() if n > 0]:
            if dashboard.needs_render(view):
                before = dashboard.cached(view)
                rendered = (await to_thread.run_sync(dashboard.render, view)) is not before or rendered
        if rendered:
            self.publish()

    async def run_later(self) -> None:
        """The sections left for later, one at a time, beside `tick` (their own task and worker thread): a slow
        section of a large search never delays a finished trial's quick sections nor a page request."""
        from anyio import to_thread

        dashboard = self.dashboard
        while not self.stopping:
            rendered = False
            try:
                for view in [v for v, n in self.watched.items() if n > 0]:
                    started = time.monotonic()
                    if await to_thread.run_sync(dashboard.render_next, view):
                        self.publish()
                        rendered = True
                        # Together the slower sections take at most half a core (each waits as long as the last
                        # took): the quick sections of a finished trial, the page requests and, on the same machine,
                        # the browser drawing them keep the rest (a thread holding the GIL slows the others).
                        await asyncio.sleep(time.monotonic() - started)
            except Exception:
                logging.getLogger(__name__).warning("Dashboard render failed; retrying.", exc_info=True)
            if not rendered:
                await asyncio.sleep(self.poll_interval)


class _Handlers:
    """The routes' handlers: pages, static files, a view as JSON, a view's event stream."""

    def __init__(self, dashboard: Dashboard, watch: _Watch) -> None:
        self.dashboard, self.watch = dashboard, watch

    def _view(self, name: str) -> str | None:
        return name if name in self.dashboard.views else None

    async def _page(self, view: str) -> Response:
        from anyio import to_thread
        from starlette.responses import HTMLResponse

        dashboard = self.dashboard
        try:  # the page carries the view's current state, so it never opens empty ("connecting")
            await to_thread.run_sync(dashboard.refresh)
            initial: str | None = (await to_thread.run_sync(dashboard.render, view)).message()
        except Exception:  # a bad moment in a folder: the page fills in from the event stream instead
            logging.getLogger(__name__).warning("Dashboard render for a page failed.", exc_info=True)
            initial = None
        return HTMLResponse(page_html(dashboard, view, initial), headers=_HEADERS)

    async def index(self, request: Request) -> Response:
        return await self._page(self.dashboard.default_view)

    async def search_page(self, request: Request) -> Response:
        view = self._view(f"search-{request.path_params['index']}")
        return _not_found() if view is None else await self._page(view)

    async def compare_page(self, request: Request) -> Response:
        return _not_found() if self._view("compare") is None else await self._page("compare")

    async def static(self, request: Request) -> Response:
        from starlette.responses import FileResponse, Response

        name = request.path_params["name"]
        if name == "plotly.min.js":
            return FileResponse(
                plotly_js_path(),
                media_type="text/javascript",
                headers={**_HEADERS, "Cache-Control": "max-age=86400"},
            )
        entry = STATIC.get(name)
        if entry is None:
            return _not_found()
        body, media_type = entry
        return Response(body, media_type=media_type, headers={**_HEADERS, "Cache-Control": "no-cache"})

    async def view_json(self, request: Request) -> Response:
        """Every section of the view, up to date (not left for later as the page's slower sections are)."""
        from anyio import to_thread
        from starlette.responses import Response

        view = self._view(request.path_params["view"])
        if view is None:
            return _not_found()
        await to_thread.run_sync(self.dashboard.refresh)
        rendered = await to_thread.run_sync(lambda: self.dashboard.render(view, complete=True))
        return Response(rendered.message(), media_type="application/json", headers=_HEADERS)

    async def trials(self, request: Request) -> Response:
        """One page of a search view's trials table (``?page=N``, 0-based) as JSON: html, page, pages."""
        from anyio import to_thread
        from starlette.responses import JSONResponse

        view = self._view(request.path_params["view"])
        if view is None or view == "compare":
            return _not_found()
        try:
            page = int(request.query_params.get("page", "0"))
        except ValueError:
            return JSONResponse(
                {"error": "page must be a whole number (0 is the first page)"},
                status_code=400,
                headers=_HEADERS,
            )
        await to_thread.run_sync(self.dashboard.refresh)
        body = await to_thread.run_sync(self.dashboard.trials_page, view, page)
        return JSONResponse(body, headers=_HEADERS)

    async def events(self, request: Request) -> Response:
        from starlette.responses import StreamingResponse

        view = self._view(request.path_params["view"])
        if view is None:
            return _not_found()
        have = parse_have(request.query_params.get("have"))
        return StreamingResponse(
            _stream(self.watch, view, have),
            media_type="text/event-stream",
            headers={**_HEADERS, "Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )


def _not_found() -> Response:
    from starlette.responses import JSONResponse

    return JSONResponse({"error": "not found"}, status_code=404, headers=_HEADERS)


def _lifespan(watch: _Watch) -> Callable[[Any], contextlib.AbstractAsyncContextManager[None]]:
    """Start the poll loop with the server; stop it, and the dashboard's helpers, when the server stops."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        watch.published = asyncio.Event()  # bound to the server's loop
        task = asyncio.create_task(watch.run())
        try:
            yield
        finally:
            watch.stopping = True
            watch.publish()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            watch.dashboard.close()

    return lifespan


def create_app(
    dashboard: Dashboard, poll_interval: float = 0.25, allowed_hosts: list[str] | None = None
) -> Starlette:
    """The ASGI application serving ``dashboard``.

    Args:
        poll_interval: seconds between two looks at the folders (a change shows within about twice this plus
            the render time).
        allowed_hosts: Host headers to accept (default `LOCAL_HOSTS`); ``["*"]`` accepts any, for --allow-remote.
    """
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.trustedhost import TrustedHostMiddleware
    from starlette.routing import Route

    watch = _Watch(dashboard, poll_interval)
    handlers = _Handlers(dashboard, watch)
    routes = [
        Route("/", handlers.index),
        Route("/search/{index:int}", handlers.search_page),
        Route("/compare", handlers.compare_page),
        Route("/static/{name}", handlers.static),
        Route("/api/views/{view}", handlers.view_json),
        Route("/api/trials/{view}", handlers.trials),
        Route("/events/{view}", handlers.events),
    ]
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts or LOCAL_HOSTS)]
    app = Starlette(routes=routes, middleware=middleware, lifespan=_lifespan(watch))
    app.state.dashboard = dashboard
    app.state.watch = watch
    return app


def _sse(data: str, event: str = "update") -> bytes:
    # A data field ends at a line break, so each line of the payload becomes its own "data:" line.
    lines = data.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return (f"event: {event}\n" + "".join(f"data: {line}\n" for line in lines) + "\n").encode("utf-8")


async def _stream(watch: _Watch, view: str, have: dict[str, str]) -> AsyncIterator[bytes]:
    """The events of one browser: the sections it does not hold yet (``have``: anchor -> hash, what the page came
    with), then only the sections that changed."""
    from anyio import to_thread

    dashboard = watch.dashboard
    watch.watched[view] = watch.watched.get(view, 0) + 1
    known = dict(have)
    sent = -1
    try:
        yield b"retry: 1000\n\n"
        current = dashboard.cached(view)
        if current is None or dashboard.needs_render(view):
            await to_thread.run_sync(dashboard.refresh)
            current = await to_thread.run_sync(dashboard.render, view)
        while not watch.stopping:
            waiter = watch.published
            current = dashboard.cached(view) or current
            if current.version != sent:
                yield _sse(current.message(known))
                known, sent = current.hashes(), current.version
            try:
                await asyncio.wait_for(waiter.wait(), timeout=_PING_S)
            except asyncio.TimeoutError:
                yield b": ping\n\n"  # keeps proxies from closing an idle stream, and notices a gone browser
    finally:
        watch.watched[view] -= 1
