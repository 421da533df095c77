"""``hpsearch dashboard OUTPUT_DIR [OUTPUT_DIR ...] [--host H] [--port N] [--allow-remote]``.

`add_parser` adds the subcommand to the ``hpsearch`` parser; `dashboard` runs it and returns the exit code
(0 after Ctrl+C, 2 when it cannot start: the message says why and what to pass instead).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["add_parser", "dashboard"]

EXIT_OK, EXIT_CONFIG = 0, 2


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Add ``dashboard`` to the subparsers ``commands`` of the ``hpsearch`` command."""
    parser = commands.add_parser(
        "dashboard",
        help="serve a live dashboard of running or finished searches",
        description="Serve the report's views of one search (or a comparison of several) and update them as "
        "trials start, report and end. Reads only search.json and events.jsonl; never writes.",
    )
    parser.add_argument("dirs", nargs="+", metavar="OUTPUT_DIR", help="output folder(s) of searches")
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)"
    )
    parser.add_argument(
        "--port", type=int, default=8765, help="port to listen on (default 8765; 0: any free port)"
    )
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a --host other machines can reach (the dashboard has no authentication)",
    )
    parser.set_defaults(handler=dashboard)
    return parser


def dashboard(args: argparse.Namespace) -> int:
    """Serve until Ctrl+C; print the address once listening."""
    from hpsearch.dashboard._server import DashboardError, serve

    def ready(url: str) -> None:
        print(f"hpsearch dashboard: {url} (Ctrl+C to stop)", flush=True)

    try:
        serve(args.dirs, host=args.host, port=args.port, allow_remote=args.allow_remote, on_ready=ready)
    except DashboardError as error:
        print(f"hpsearch dashboard: error: {error}", file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        pass
    return EXIT_OK
