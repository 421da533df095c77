"""Serving the dashboard with uvicorn: in the foreground (`serve`, the CLI) or beside a search (`start_in_background`).

The listening socket is bound here, before uvicorn starts, so a port in use or a refused address is a clear
`DashboardError` (the CLI exits 2), and port 0 picks a free port whose address is then printed. Only loopback
addresses are served unless ``allow_remote`` is given: the dashboard has no authentication.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from hpsearch.errors import SearchConfigError

if TYPE_CHECKING:
    from hpsearch.dashboard._dashboard import Dashboard

__all__ = ["DashboardError", "require_web_stack", "serve", "start_in_background"]

_INSTALL = "pip install 'hpsearch[dashboard]'"


class DashboardError(SearchConfigError):
    """The dashboard cannot start as asked (a folder, the address, a missing package); the message says why."""


def require_web_stack() -> None:
    """Raise `DashboardError` with the install command when starlette, uvicorn or plotly is missing."""
    missing = []
    for name in ("starlette", "uvicorn", "plotly"):
        try:
            __import__(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise DashboardError(
            f"The dashboard needs {', '.join(missing)}, which is not installed; run `{_INSTALL}`."
        )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _check_host(host: str, allow_remote: bool) -> None:
    if not is_loopback(host) and not allow_remote:
        raise DashboardError(
            f"--host {host} would serve the dashboard to other machines, and it has no authentication: anyone who "
            "can reach the port sees the searches. Keep the default --host 127.0.0.1 (and reach it through an SSH "
            "tunnel: ssh -L 8765:127.0.0.1:8765 HOST), or pass --allow-remote to serve it anyway (see the README, "
            "'Live dashboard')."
        )


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on (host, port); port 0 picks a free one.

    Raises:
        DashboardError: the port is in use, or the address cannot be bound; the message says what to pass.
    """
    if not 0 <= port <= 65535:
        raise DashboardError(
            f"--port must be between 0 and 65535 but got {port}; pass e.g. --port 8765 (0: any free port)."
        )
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        raise DashboardError(
            f"--host {host!r} is not an address this machine can listen on ({error}); "
            "pass e.g. --host 127.0.0.1."
        ) from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        if (
            os.name != "nt"
        ):  # a restart may rebind at once; on Windows this flag would allow stealing the port
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as error:
        sock.close()
        if error.errno == errno.EADDRINUSE:
            raise DashboardError(
                f"port {port} on {host} is already in use (another dashboard or server?); pass another port with "
                "--port N, or --port 0 to let the system pick a free one."
            ) from None
        raise DashboardError(
            f"cannot listen on {host}:{port} ({error.strerror or error}); pass another --host/--port."
        ) from None
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    if ":" in host:
        host = f"[{host}]"
    if host in ("0.0.0.0", "[::]"):
        host = socket.gethostname()
    return f"http://{host}:{port}/"


def _server(dashboard: Dashboard, host: str, allow_remote: bool, poll_interval: float) -> Any:
    import uvicorn

    from hpsearch.dashboard._app import create_app

    app = create_app(dashboard, poll_interval=poll_interval, allowed_hosts=["*"] if allow_remote else None)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        ws="none",
        timeout_graceful_shutdown=1,
        host=host,
    )
    return uvicorn.Server(config)


def _dashboard(output_dirs: Sequence[str | os.PathLike[str]], require_search: bool) -> Dashboard:
    from hpsearch.dashboard._dashboard import Dashboard
    from hpsearch.dashboard._reader import NotASearchFolder

    try:
        return Dashboard(output_dirs, require_search=require_search)
    except NotASearchFolder as error:
        raise DashboardError(str(error)) from None


def serve(
    output_dirs: Sequence[str | os.PathLike[str]],
    host: str = "127.0.0.1",
    port: int = 8765,
    allow_remote: bool = False,
    poll_interval: float = 0.25,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve the dashboard of ``output_dirs`` until interrupted (Ctrl+C); ``on_ready(url)`` once it listens.

    Raises:
        DashboardError: a folder holds no search, the address is refused or in use, or a package is missing.
    """
    require_web_stack()
    _check_host(host, allow_remote)
    dashboard = _dashboard(output_dirs, require_search=True)
    sock = bind(host, port)
    server = _server(dashboard, host, allow_remote, poll_interval)
    if on_ready is not None:
        on_ready(url_of(sock))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        dashboard.close()


def start_in_background(
    output_dirs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    host: str = "127.0.0.1",
    port: int = 0,
    allow_remote: bool = False,
    poll_interval: float = 0.25,
) -> tuple[str, Callable[[], None]]:
    """Serve the dashboard from a daemon thread (beside a search in this process); returns ``(url, stop)``.

    The folders may still be empty: the page fills in as the search writes them. ``stop()`` shuts the server
    down and waits for it (a few seconds at most); the daemon thread also ends with the process.

    Raises:
        DashboardError: the address is refused or in use, or a package is missing.
    """
    require_web_stack()
    _check_host(host, allow_remote)
    dirs = [output_dirs] if isinstance(output_dirs, (str, os.PathLike)) else list(output_dirs)
    dashboard = _dashboard(dirs, require_search=False)
    sock = bind(host, port)
    server = _server(dashboard, host, allow_remote, poll_interval)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="hpsearch-dashboard", daemon=True
    )
    thread.start()

    def stop() -> None:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
        dashboard.close()

    return url_of(sock), stop
