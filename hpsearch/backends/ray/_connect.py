"""Joining Ray: the address probe, token authentication, and leaving the process as the search found it.

Ray 2.60 clusters started with ``ray start --head`` use token authentication by default (whenever a token exists
on the head). A driver sends the token only in ``RAY_AUTH_MODE=token``, and ``ray.init`` turns that mode on by
itself only for a Ray it starts or one ``address="auto"`` finds through ``ray start``'s address file; for
``address="host:port"`` (or ``"auto"`` with ``RAY_ADDRESS=host:port``) it connects without the token and fails
after ~20 s with "Failed to connect". So, for the ``host:port`` it will join, `connect`:

- asks the cluster's GCS (an unauthenticated ``GetClusterId`` call) whether it wants a token, and if so (a second
  call) whether the token this process would send (Ray's own lookup: ``RAY_AUTH_TOKEN``, then ``RAY_AUTH_TOKEN_PATH``, then
  ``~/.ray/auth_token``) is the cluster's;
- turns ``RAY_AUTH_MODE=token`` on for the connection when the cluster wants a token and the driver has the right
  one (never for a cluster without authentication: the driver would then refuse the cluster's calls), and otherwise
  stops the search before any trial with a `SearchConfigError` that says which and how to fix it.

A connection the search opened is closed when it ends (the cluster keeps running) and ``RAY_AUTH_MODE`` is put back
as it was, also after a local Ray or ``"auto"`` (where Ray itself sets the mode for the rest of the process). The
mode must stay on for as long as the driver is connected: Ray attaches the token to every gRPC call it makes and
checks it on the calls the cluster makes to the driver. The token itself is never logged, printed or saved; errors
name where it was looked for.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
from typing import Any

from ...errors import SearchConfigError

__all__ = ["Connection", "connect", "gcs_auth", "probe"]

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10.0
_MODE = "RAY_AUTH_MODE"
_DOCS = "https://docs.ray.io/en/latest/ray-security/token-auth.html"

#: `gcs_auth` answers
OPEN = "open"  # the cluster takes calls without a token
ACCEPTED = "accepted"  # the cluster wants a token and took the one offered
REQUIRED = "required"  # the cluster wants a token and none was offered
REJECTED = "rejected"  # the cluster wants a token and refused the one offered


@dataclasses.dataclass
class Connection:
    """What `connect` did: whether this search called ``ray.init`` and what ``RAY_AUTH_MODE`` was before."""

    opened: bool
    mode_before: str | None = None
    #: The search started this Ray on this machine: its resources are all it will ever have (no autoscaler).
    local: bool = False

    def close(self) -> None:
        """Disconnect a driver this search connected (a cluster keeps running; a local Ray stops) and restore
        ``RAY_AUTH_MODE``. Nothing for a connection that was already open."""
        if not self.opened:
            return
        import ray

        try:
            ray.shutdown()
        finally:
            if os.environ.get(_MODE) != self.mode_before:
                _set_mode(self.mode_before)


def connect(address: str | None) -> Connection:
    """Connect to (or start) Ray as ``address`` says; see the module docstring.

    Without ``address`` (and without ``RAY_ADDRESS``) the search starts a private local Ray, never joining one
    that already runs on the machine (another user's or job's); ``address="auto"``, ``RAY_ADDRESS`` or an address
    join a cluster, which must answer within `CONNECT_TIMEOUT_S` (a closed port, or one that accepts TCP and never
    answers, fails in seconds naming the address). The log says which Ray the search uses."""
    import ray

    target, named = _target(address)
    if target is not None:
        probe(target, named)
    if ray.is_initialized():
        logger.info("Ray: using the Ray this process is already connected to.")
        return Connection(opened=False)
    connection = Connection(opened=True, mode_before=os.environ.get(_MODE))
    try:
        if address is None and not os.environ.get("RAY_ADDRESS"):
            ray.init(
                address="local",
                num_cpus=os.cpu_count(),
                include_dashboard=False,
                _node_ip_address="127.0.0.1",
                log_to_driver=False,
                configure_logging=False,
            )
            connection.local = True
            logger.info(
                "Ray: started a private local Ray for this search (%s CPUs); pass address='auto' or an "
                "address to join a running cluster instead.",
                os.cpu_count(),
            )
            return connection
        if target is not None:
            _prepare_token_auth(target)
        try:
            ray.init(address=address or "auto", log_to_driver=False, configure_logging=False)
        except (
            Exception
        ) as error:  # Ray raises ConnectionError, RuntimeError, ValueError, AuthenticationError...
            fix = (
                "unset RAY_ADDRESS to start a private local Ray, or pass address"
                if address is None
                else "leave address unset to start a private local Ray"
            )
            raise SearchConfigError(
                f"{named}: could not connect to a Ray cluster ({type(error).__name__}: {_first_line(error)}). Start "
                f"one with `ray start --head`, or {fix}. If the cluster uses token authentication (Ray's default): "
                f"{_token_fix()}",
                about="address",
            ) from error
        logger.info("Ray: joined the cluster at %s (%s).", target or address, named)
    except BaseException:
        connection.close()
        raise
    return connection


def _target(address: str | None) -> tuple[str | None, str]:
    """The ``host:port`` the search will join (None: a local Ray, or ``ray://`` that Ray Client checks) and how the
    user named it (for errors)."""
    env = os.environ.get("RAY_ADDRESS")
    if address is None:
        if env and "://" not in env and env not in ("auto", "local"):
            return env, f"address unset and RAY_ADDRESS={env!r}"
        return None, "address unset"
    if address == "auto":
        found = _auto_address()
        return found, f"address='auto' (found {found!r})" if found else "address='auto'"
    if address == "local" or address.startswith("ray://"):
        return None, f"address={address!r}"
    return address, f"address={address!r}"


def probe(address: str, named: str | None = None) -> None:
    """Fail within seconds for an address nothing listens on, or where something accepts TCP but no Ray GCS
    answers (``ray.init`` would retry for minutes)."""
    named = named or f"address={address!r}"
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise SearchConfigError(
            f"{named} is not 'auto', 'ray://host:port' or 'host:port' (e.g. '127.0.0.1:6379').",
            about="address",
        )
    fix = (
        "check the address printed by `ray start --head`, or leave address unset (and RAY_ADDRESS unset) to "
        "start a private local Ray"
    )
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as error:
        raise SearchConfigError(
            f"{named}: no Ray cluster answers there ({error.strerror or error}); {fix}.", about="address"
        ) from error
    if _gcs_silent(address):
        raise SearchConfigError(
            f"{named}: something accepts connections there but no Ray cluster answered within "
            f"{CONNECT_TIMEOUT_S:g} s; {fix}.",
            about="address",
        )


def _gcs_silent(address: str) -> bool:
    """Whether a ``GetClusterId`` call to ``address`` got no answer at all within `CONNECT_TIMEOUT_S` (any answer,
    a refusal included, is a live GCS; a Ray without grpc here is left to ``ray.init``)."""
    try:
        import grpc
        from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc
    except ImportError:
        return False
    try:
        with grpc.insecure_channel(address) as channel:
            stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
            stub.GetClusterId(
                gcs_service_pb2.GetClusterIdRequest(),  # type: ignore[attr-defined]
                timeout=CONNECT_TIMEOUT_S,
            )
    except grpc.RpcError as error:
        return bool(error.code() == grpc.StatusCode.DEADLINE_EXCEEDED)
    except Exception:
        return False
    return False


def gcs_auth(address: str, offer_token: bool) -> str | None:
    """Whether the GCS at ``address`` wants a token (`OPEN`, `REQUIRED`) and, with ``offer_token``, whether it
    takes the one Ray would send from this process (`ACCEPTED`, `REJECTED`); None when a call tells neither
    (an older Ray, TLS, a timeout: ``ray.init`` then decides and its error is reported)."""
    answer = _gcs_call(address, [])
    if answer is not True:  # an open cluster (no token needed), or no answer
        return OPEN if answer is False else None
    if not offer_token:
        return REQUIRED
    from ray._raylet import AuthenticationTokenLoader  # type: ignore[attr-defined]

    loader = AuthenticationTokenLoader.instance()
    loader.reset_cache()  # the environment may have changed since Ray last looked
    headers = loader.get_token_for_http_header(ignore_auth_mode=True)
    metadata = [(str(k).lower(), str(v)) for k, v in headers.items()]
    if not metadata:
        return REQUIRED
    answer = _gcs_call(address, metadata)
    return None if answer is None else REJECTED if answer else ACCEPTED


def _gcs_call(address: str, metadata: list[tuple[str, str]]) -> bool | None:
    """One ``GetClusterId`` call with ``metadata``: True if refused as unauthenticated, False if answered, None
    for any other outcome."""
    try:
        import grpc
        from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc
    except ImportError:
        return None
    try:
        with grpc.insecure_channel(address) as channel:
            stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
            stub.GetClusterId(
                gcs_service_pb2.GetClusterIdRequest(),  # type: ignore[attr-defined]
                timeout=CONNECT_TIMEOUT_S,
                metadata=metadata,
            )
    except grpc.RpcError as error:
        return True if error.code() == grpc.StatusCode.UNAUTHENTICATED else None
    except Exception:  # a channel problem is ray.init's to report
        return None
    return False


def token_source() -> str | None:
    """Where Ray would read this process's token from (a description, never the token), or None without one."""
    from ray._raylet import AuthenticationTokenLoader  # type: ignore[attr-defined]

    loader = AuthenticationTokenLoader.instance()
    loader.reset_cache()  # the environment may have changed since Ray last looked
    if not loader.has_token(ignore_auth_mode=True):
        return None
    if os.environ.get("RAY_AUTH_TOKEN"):
        return "the RAY_AUTH_TOKEN variable"
    if os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return f"RAY_AUTH_TOKEN_PATH={os.environ['RAY_AUTH_TOKEN_PATH']}"
    return os.path.join("~", ".ray", "auth_token")


def _prepare_token_auth(address: str) -> None:
    """Turn token mode on when the cluster wants the token this process has; refuse to start otherwise."""
    try:
        source = token_source()
        answer = gcs_auth(address, offer_token=source is not None)
    except (ImportError, AttributeError, TypeError) as error:
        # Ray's token helpers are not public API: a Ray that moved them gets no pre-check, and ray.init decides.
        logger.debug("Skipping the token pre-check of address=%r: %s", address, error)
        return
    mode = os.environ.get(_MODE)
    if answer == ACCEPTED:
        if mode is not None and mode.lower() != "token":
            raise SearchConfigError(
                f"address={address!r}: the Ray cluster there uses token authentication but this process has "
                f"{_MODE}={mode}, so Ray would not send the token; unset {_MODE} (or `export {_MODE}=token`).",
                about="address",
            )
        if mode is None:
            _set_mode("token")
            logger.info(
                "address=%r uses token authentication: connecting with the token from %s.", address, source
            )
    elif answer == REQUIRED:
        raise SearchConfigError(
            f"address={address!r}: the Ray cluster there uses token authentication (Ray's default since 2.60) and "
            f"no token was found for this process (looked in RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH and "
            f"~/.ray/auth_token). {_token_fix()}",
            about="address",
        )
    elif answer == REJECTED:
        raise SearchConfigError(
            f"address={address!r}: the Ray cluster there uses token authentication and refused the token from "
            f"{source}: it is not that cluster's token. {_token_fix()}",
            about="address",
        )


def _auto_address() -> str | None:
    """The ``host:port`` that ``address="auto"`` means: RAY_ADDRESS, else the last ``ray start`` on this machine.
    Ray turns token mode on by itself only in the second case; RAY_ADDRESS counts as an explicit address."""
    env = os.environ.get("RAY_ADDRESS")
    if env:
        return env if "://" not in env and env not in ("auto", "local") else None
    try:
        from ray._private.services import find_bootstrap_address

        found = find_bootstrap_address(None)
    except Exception:  # Ray's private helper moved or failed: leave "auto" to ray.init
        return None
    return found or None


def _token_fix() -> str:
    return (
        "Give this process the cluster's token: on the head node run `ray get-auth-token` (it prints the token), "
        "then here either `export RAY_AUTH_TOKEN_PATH=/path/to/a/file/holding/it` (chmod 600) or "
        "`export RAY_AUTH_TOKEN=<token>`; or copy the head's ~/.ray/auth_token to this machine's ~/.ray/auth_token. "
        f"See {_DOCS}."
    )


def _set_mode(mode: str | None) -> None:
    """Set ``RAY_AUTH_MODE`` for this process and refresh Ray's cached config, which reads it."""
    from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]

    if mode is None:
        os.environ.pop(_MODE, None)
    else:
        os.environ[_MODE] = mode
    # The config first, then the token cache (Ray's own order: a draining gRPC thread must not reload the token
    # under a stale mode).
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def _first_line(error: BaseException) -> Any:
    text = str(error).strip()
    return text.splitlines()[0] if text else ""
