"""A client-side bound on every wait of psycopg2 for a PostgreSQL server: connecting, each statement, the heartbeat.

``statement_timeout`` is enforced by the server, and TCP keepalives are answered by its kernel, so neither ends a
wait on a server that is frozen (SIGSTOP, a hung host) while the connection stays open: a search then waited for
minutes. psycopg2 lets one wait callback replace libpq's blocking waits (`psycopg2.extensions.set_wait_callback`);
this one waits with ``select`` up to its limit and then raises psycopg2's ``OperationalError`` with a message
SQLAlchemy reads as a lost connection (so the pooled connection is discarded). The callback is process-wide: it is
installed only when a search opens a PostgreSQL storage through psycopg2, and never replaces a callback someone
else installed (gevent's, for instance).
"""

from __future__ import annotations

import logging
import select
import time
from typing import Any

__all__ = ["install"]

logger = logging.getLogger(__name__)

_limits = (0.0, 0.0)  # (connecting, any other wait) in seconds


def install(connect_s: float, statement_s: float) -> None:
    """Bound psycopg2's waits in this process: ``connect_s`` while connecting (libpq's own connect_timeout does not
    apply once a wait callback is set), ``statement_s`` for every other wait (a statement, the heartbeat)."""
    global _limits
    try:
        import psycopg2.extensions
    except ImportError:
        return
    current = psycopg2.extensions.get_wait_callback()
    if current is not None and current is not _wait:
        logger.debug(
            "psycopg2 already has a wait callback (%r); PostgreSQL waits are not bounded here.", current
        )
        return
    _limits = (connect_s, statement_s)
    psycopg2.extensions.set_wait_callback(_wait)


def _wait(conn: Any) -> None:
    import psycopg2
    from psycopg2.extensions import POLL_OK, POLL_READ, POLL_WRITE, STATUS_SETUP

    limit = _limits[0] if conn.status == STATUS_SETUP else _limits[1]
    deadline = time.monotonic() + limit
    while True:
        state = conn.poll()
        if state == POLL_OK:
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise psycopg2.OperationalError(
                f"server closed the connection unexpectedly: the PostgreSQL server did not answer within {limit:g} s "
                "(frozen, overloaded or unreachable)"
            )
        if state == POLL_READ:
            select.select([conn.fileno()], [], [], remaining)
        elif state == POLL_WRITE:
            select.select([], [conn.fileno()], [], remaining)
        else:
            raise psycopg2.OperationalError(f"bad state from poll: {state}")
